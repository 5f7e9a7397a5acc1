"""Login throttling (django-axes): after AXES_FAILURE_LIMIT failures for a username from one
address, even the right password is refused (429) until the cool-off; other users are not."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


def attempt(client: Client, username: str, password: str) -> Any:
    return client.post(reverse("login"), {"username": username, "password": password})


def test_repeated_failures_lock_the_account_out(settings: Any) -> None:
    settings.AXES_FAILURE_LIMIT = 3
    user_model = get_user_model()
    user_model.objects.create_user("alice", password="right")
    user_model.objects.create_user("bob", password="right")
    client = Client()
    assert [attempt(client, "alice", "wrong").status_code for _ in range(2)] == [200, 200]
    assert attempt(client, "alice", "wrong").status_code == 429
    assert attempt(client, "alice", "right").status_code == 429, "locked out, even with the password"
    assert "_auth_user_id" not in client.session
    bob = attempt(Client(), "bob", "right")
    assert bob.status_code == 302, "another user is not locked out"


def test_a_username_too_long_is_a_form_error_not_a_recorded_failure() -> None:
    """Django's login form does not check its username's length; django-axes then recorded the
    failure in a 255-character column, a 500 on PostgreSQL (the route walk found it)."""
    from axes.models import AccessAttempt

    page = attempt(Client(), "x" * 300, "wrong")
    assert page.status_code == 200 and "did not match" in page.content.decode()
    assert not AccessAttempt.objects.exists(), "refused by the form, before any authentication"
    assert attempt(Client(), "x" * 150, "wrong").status_code == 200, "the longest a name can be: tried"
    assert AccessAttempt.objects.count() == 1


def test_behind_the_proxy_an_address_is_the_client_it_forwards(settings: Any) -> None:
    """The demo's settings behind a proxy (DJANGO_TRUST_X_FORWARDED_PROTO): every connection comes
    from the proxy, so an attacker's failures must not lock the account out for everyone else; the
    address is the one the proxy appended, whatever the client wrote before it."""
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_IPWARE_PROXY_ORDER = "right-most"
    settings.AXES_IPWARE_META_PRECEDENCE_ORDER = ["HTTP_X_FORWARDED_FOR", "REMOTE_ADDR"]
    get_user_model().objects.create_user("alice", password="right")
    attacker = Client(HTTP_X_FORWARDED_FOR="203.0.113.5")
    assert [attempt(attacker, "alice", "wrong").status_code for _ in range(3)] == [200, 200, 429]
    spoofing = Client(HTTP_X_FORWARDED_FOR="198.51.100.7, 203.0.113.5")  # a header of its own, then the proxy's
    assert attempt(spoofing, "alice", "right").status_code == 429
    assert attempt(Client(HTTP_X_FORWARDED_FOR="198.51.100.7"), "alice", "right").status_code == 302, \
        "the owner, through the same proxy from another address, is not locked out"
