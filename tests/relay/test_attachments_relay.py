"""Attachments end to end: a turn with an image and a PDF, through the door and a runner, to the
standalone simulator over loopback HTTP, which says what it was sent (its size, the file's name and
size); a full-context retry sends the earlier turn's image again. The pages and the rules are in
tests/app/test_attachments.py."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile

from responses_app import api, submission
from responses_app.simulator import texts
from tests.app.test_attachments import PDF, png
from tests.relay.helpers import FAST

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


@pytest.fixture(autouse=True)
def memory_storage(settings: Any) -> None:
    settings.STORAGES = {**settings.STORAGES, "default": {"BACKEND": "django.core.files.storage.InMemoryStorage"}}


def test_the_simulator_says_what_it_sees() -> None:
    image = "data:image/png;base64," + base64.b64encode(png(640, 480)).decode()
    pdf = "data:application/pdf;base64," + base64.b64encode(PDF).decode()
    message = {"role": "user", "content": [{"type": "input_text", "text": "What are these?"},
                                           {"type": "input_image", "image_url": image},
                                           {"type": "input_file", "filename": "report.pdf", "file_data": pdf}]}
    assert texts.attachment_notes([message]) == [
        "I see an image 640×480 (PNG).", f"I see a file “report.pdf”, {len(PDF)} bytes."]
    assert texts.attachment_notes("just text") == []
    assert texts.attachment_notes([message, {"role": "user", "content": "and then?"}]) == [], "the last message's"


async def test_a_turn_with_attachments_round_trips_through_the_simulator(owner: Any) -> None:
    files = [SimpleUploadedFile("shot.png", png(64, 48)), SimpleUploadedFile("report.pdf", PDF)]
    done = await sync_to_async(submission.submit)(
        user=owner, data={"input": "What are these?", "model": "sim-text", "metadata": FAST}, files=files)
    await submission.start(done)
    request = await api.await_request(done.request, timeout=30)
    assert request.status == "completed", request.error_message
    assert "I see an image 64×48 (PNG)." in request.final_text
    assert f"I see a file “report.pdf”, {len(PDF)} bytes." in request.final_text
