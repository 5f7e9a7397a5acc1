"""Hosted tools' shown fields under the safety policy, end to end: real captures served by the
scripted loopback upstream, the relay's runner in buffered mode with the rules checker. A rule that
matches a search query, a shell command, a patch's diff or a code interpreter's output stops the
request, and that text reaches no view, checkpoint, final_text or page."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from responses_app.models import Checkpoint, SafetyVerdict
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.safety.checkers import reset_checker
from responses_app.streaming.gate import NOTICE_ID
from responses_app.upstream.http import Upstream
from tests.conftest import REAL_STREAMS, require_real_streams
from tests.relay.helpers import make_request, reload
from tests.upstreams import Reply, scripted_upstream

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]

CASES = [  # capture, a phrase only that field holds, the field, its kind
    ("pydantic-ai__web-search-citations.sse", "Pydantic AI GitHub repository official", "query", "tool_arguments"),
    ("vercel-ai__hosted-shell-container-output.sse", "uname -a", "commands", "tool_arguments"),
    ("vercel-ai__apply-patch-diff.sse", "Shopping Checklist", "operation", "tool_arguments"),
    ("vercel-ai__azure-code-interpreter.sse", "88\\.99, 51\\.21", "outputs", "tool_output"),
]


@sync_to_async
def stored(request: Any) -> tuple[str, list[SafetyVerdict], str]:
    checkpoints = " ".join(f"{c.view} {c.snapshot}" for c in Checkpoint.objects.filter(request=request))
    verdicts = list(SafetyVerdict.objects.filter(request=request, flagged=True))
    client = Client()
    client.force_login(request.owner)
    page = client.get(f"/c/{request.conversation_id}/turns/{request.pk}/").content.decode()
    return checkpoints, verdicts, page.split('class="msg msg-assistant"', 1)[1]


@pytest.mark.parametrize("name, rule, field, kind", CASES, ids=[c[2] for c in CASES])
async def test_a_flagged_hosted_tool_field_is_shown_nowhere(owner: Any, relay_settings: Any, name: str, rule: str,
                                                            field: str, kind: str) -> None:
    require_real_streams()
    relay_settings.RELAY_SAFETY_MODE = "buffered"
    relay_settings.RELAY_SAFETY_RULES = [rule]
    reset_checker()
    phrase = rule.replace("\\", "")
    body = (REAL_STREAMS / name).read_bytes()
    assert phrase.encode() in body.replace(b"\\n", b"\n")
    try:
        async with scripted_upstream({"POST /v1/responses": Reply(body=body, chunk_size=512)}) as upstream:
            request = await make_request(owner, "gpt-test")
            runner = StreamRunner(str(request.pk), get_hub(),
                                  upstream_factory=lambda: Upstream(base=upstream.base, api_key=""))
            await runner.run()
    finally:
        reset_checker()
    saved = await reload(request)
    checkpoints, verdicts, page = await stored(saved)
    view = json.dumps(runner.view.to_dict(), ensure_ascii=False)
    assert saved.status == "incomplete" and saved.incomplete_reason == "content_filter"
    assert phrase not in view and phrase not in checkpoints and phrase not in page
    assert phrase not in saved.final_text
    assert NOTICE_ID in view and "withheld by the safety policy" in page
    # windows judged at once may all be flagged: every one of them is this field's
    judged = {(v.kind, v.block_id.split(":")[-1]) for v in verdicts}
    assert judged == {(kind, field)}, [(v.kind, v.text) for v in verdicts]
