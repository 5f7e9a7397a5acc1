"""Run by tests/host/test_custom_user_model.py under tests.custom_user.settings (AUTH_USER_MODEL is
custom_user.Member): migrations, the demo account, a streamed request, the pages and the admin."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from responses_app import api
from responses_app.models import ResponseRequest
from tests.relay.helpers import FAST

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


async def test_a_custom_user_streams_a_request() -> None:
    from asgiref.sync import sync_to_async

    member = await sync_to_async(get_user_model().objects.create_user)("ada", password="pw", team="blue")
    assert type(member).__name__ == "Member"
    request = await api.asubmit(member, "Hello", model="sim-text", metadata=FAST)
    done = await api.await_request(request, timeout=10)
    assert done.status == "completed" and done.owner_id == member.pk


def test_pages_admin_and_the_demo_account(settings: Any) -> None:
    settings.DEVELOPMENT = True
    call_command("bootstrap_demo", "--address", "http://127.0.0.1:8000/", stdout=StringIO())
    demo = get_user_model().objects.get(username="demo")
    client = Client()
    client.force_login(demo)
    assert client.get(reverse("responses_app:conversations")).status_code == 200
    assert client.get(reverse("admin:responses_app_responserequest_changelist")).status_code == 200
    assert ResponseRequest._meta.get_field("owner").related_model is get_user_model()
