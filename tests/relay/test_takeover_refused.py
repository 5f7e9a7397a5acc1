"""A request the upstream refused (429) whose runner died in its backoff: the upstream accepted
none of its POSTs, so the runner that takes it over sends it again, up to the retries left, and
it ends as the refusals say (`error`), not `unknown`. One POST that may have been accepted (no
answer to it stored) still stops a takeover from sending the request again."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from responses_app.models import ResponseRequest, Segment
from responses_app.relay.hub import get_hub
from responses_app.relay.steps import MAX_HTTP_RETRIES
from responses_app.relay.stream_runner import StreamRunner
from tests.relay.helpers import make_request, reload

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


@sync_to_async
def segments(request: ResponseRequest) -> list[tuple[str, int | None, bool]]:
    return [(kind, status, ended is not None) for kind, status, ended in Segment.objects.filter(
        request=request).order_by("index").values_list("kind", "http_status", "ended_at")]


async def killed_after(request: ResponseRequest, posts: int) -> None:
    """Run a runner until its `posts`-th POST was refused and it waits to retry, then kill it: no
    word, no write, its lease left to run out (as kill -9 leaves it)."""
    task = asyncio.get_running_loop().create_task(StreamRunner(str(request.pk), get_hub()).run())
    async with asyncio.timeout(30):
        while not ((rows := await segments(request)) and len(rows) == posts and rows[-1][2]):
            await asyncio.sleep(0.01)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await sync_to_async(ResponseRequest.objects.filter(pk=request.pk).update)(
        lease_expires=timezone.now() - timedelta(seconds=1))


@pytest.mark.parametrize("posts", [1, 2])
async def test_a_request_refused_every_time_is_retried_after_a_takeover(owner: Any, posts: int) -> None:
    request = await make_request(owner, "sim-text", {"sim.http_error": "429"})
    await killed_after(request, posts)
    await StreamRunner(str(request.pk), get_hub()).run()
    saved = await reload(request)
    assert saved.status == "error" and saved.error_code.startswith("rate_limit")
    assert await segments(request) == [("initial", 429, True)] * (MAX_HTTP_RETRIES + 1)
    assert saved.retries == MAX_HTTP_RETRIES, "every POST after the first, counted once"


async def test_a_post_without_an_answer_is_not_sent_again(owner: Any) -> None:
    request = await make_request(owner, "sim-text", {"sim.http_error": "429"})
    await killed_after(request, 1)
    # The runner died with its second POST sent and no answer stored: the upstream may have taken it.
    await sync_to_async(Segment.objects.create)(request=request, index=1, kind=Segment.Kind.INITIAL)
    await StreamRunner(str(request.pk), get_hub()).run()
    saved = await reload(request)
    assert saved.status == "unknown"
    assert len(await segments(request)) == 2, "nothing sent again"
