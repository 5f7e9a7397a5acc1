"""Error text from the upstream is data, never a secret: a provider that quotes the server's key
back (a 401 echoing the Authorization header, a stream's error event, a failed Response) puts it
nowhere, not in the request's row, its segments, checkpoints, event log, the socket's frames, the
JSON API or the page; and an upstream message is bounded in length."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from responses_app.models import Checkpoint, EventRecord, ResponseRequest, Segment
from responses_app.streaming.masking import MASK, MAX_MESSAGE, mask_error, mask_secrets
from tests.relay.helpers import Watcher, connect, make_request, reload
from tests.upstreams import Reply, scripted_upstream

KEY = "sk-proj-4f0e9a7c1b2d3e5f6a7b8c9d0e1f2a3b"  # the provider's key, as configured
SIM_KEY = "configured-simulator-key-7d41"  # a configured key of no known shape


# --- the one function ------------------------------------------------------------------------------


def test_known_keys_tokens_and_openai_style_keys_are_masked() -> None:
    text = f"bad key {SIM_KEY}; header Authorization: Bearer abc.def-ghi; other sk-live_0123456789ab"
    assert mask_secrets(text, (SIM_KEY,)) == (f"bad key {MASK}; header Authorization: Bearer {MASK}; "
                                              f"other {MASK}")
    assert mask_secrets("the task-list is 12 items", ("abc",)) == "the task-list is 12 items", "nothing else"
    assert mask_secrets(mask_secrets(text, (SIM_KEY,)), (SIM_KEY,)) == mask_secrets(text, (SIM_KEY,))


def test_a_message_is_bounded_and_never_keeps_half_a_key() -> None:
    long = "x" * (MAX_MESSAGE - 10) + KEY + "y" * 50_000
    masked = mask_secrets(long, (KEY,))
    assert len(masked) == MAX_MESSAGE and masked.endswith("…")
    assert KEY[:8] not in masked and "sk-proj" not in masked


def test_an_error_object_keeps_its_shape() -> None:
    error = {"code": "invalid_api_key", "message": f"Incorrect API key provided: {KEY}.", "param": None}
    assert mask_error(error, ()) == {"code": "invalid_api_key", "message": f"Incorrect API key provided: {MASK}.",
                                     "param": None}
    clean = {"code": "server_error", "message": "The server had an error."}
    assert mask_error(clean, (KEY,)) is clean


# --- every place it is stored or shown --------------------------------------------------------------


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(event) + b"\n\n" for event in events)


ECHOING_401 = Reply(401, b'{"error": {"message": "Invalid header: Authorization: {echo}; the simulator key is '
                         + SIM_KEY.encode() + b'", "type": "invalid_request_error", "code": "invalid_api_key"}}',
                    "application/json", echo="authorization")
FAILING_STREAM = Reply(body=sse(
    {"type": "response.created", "sequence_number": 0,
     "response": {"id": "resp_secret", "status": "in_progress", "output": []}},
    {"type": "error", "sequence_number": 1, "code": "auth", "message": f"token {SIM_KEY} is not valid", "param": None},
    {"type": "response.failed", "sequence_number": 2,
     "response": {"id": "resp_secret", "status": "failed", "output": [],
                  "error": {"code": "invalid_api_key", "message": f"Bearer {KEY} refused" + " and more" * 500}}},
))


@sync_to_async
def everything_stored(request: ResponseRequest) -> str:
    row = ResponseRequest.objects.get(pk=request.pk)
    parts = [row.error_code, row.error_message, row.final_text, orjson.dumps(row.usage).decode()]
    parts += [f"{s.outcome} {s.detail}" for s in Segment.objects.filter(request=request)]
    parts += [orjson.dumps([c.view, c.ops, c.snapshot]).decode() for c in Checkpoint.objects.filter(request=request)]
    parts += [batch.text for batch in EventRecord.objects.filter(request=request)]
    return "\n".join(parts)


@sync_to_async
def pages(user: Any, request: ResponseRequest) -> str:
    client = Client()
    client.force_login(user)
    api = client.get(f"/api/requests/{request.pk}")
    page = client.get(f"/c/{request.conversation_id}/")
    turn = client.get(f"/c/{request.conversation_id}/turns/{request.pk}/")
    assert api.status_code == page.status_code == turn.status_code == 200
    return "\n".join(response.content.decode() for response in (api, page, turn))


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("relay_settings")
@pytest.mark.parametrize(("reply", "status"), [(ECHOING_401, "error"), (FAILING_STREAM, "failed")],
                         ids=["401 quoting the key", "a stream that fails with it"])
async def test_no_key_is_stored_or_shown(owner: Any, settings: Any, reply: Reply, status: str) -> None:
    async with scripted_upstream({"POST /v1/responses": reply}) as upstream:
        settings.RELAY_UPSTREAM_BASE_URL, settings.RELAY_UPSTREAM_API_KEY = upstream.base, KEY
        settings.RELAY_SIMULATOR_API_KEY = SIM_KEY
        request = await make_request(owner, "gpt-test", background=False)
        communicator = await connect(owner, request.pk)  # the socket starts the runner
        assert (await communicator.connect())[0]
        watcher = Watcher(communicator)
        terminal = await watcher.until_terminal()
        frames = orjson.dumps(watcher.messages).decode()
        await communicator.disconnect()
    assert upstream.headers[0]["authorization"] == f"Bearer {KEY}", "the key went where it belongs ..."
    saved = await reload(request)
    assert saved.status == terminal["status"] == status
    seen = "\n".join([frames, await everything_stored(request), await pages(owner, request)])
    assert KEY not in seen and SIM_KEY not in seen and "sk-proj" not in seen
    assert MASK in saved.error_message, "... and nowhere else: the message says where it was"
    assert len(saved.error_message) <= MAX_MESSAGE
