"""The allocator gives freed memory back: malloc_trim, called by the lease keeper."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from responses_app.relay import keepers, malloc
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from tests.relay.helpers import make_request

needs_glibc = pytest.mark.skipif(not malloc.AVAILABLE, reason="no malloc_trim (not glibc)")


def _rss() -> int:
    import os

    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@needs_glibc
def test_trim_returns_free_pages_inside_the_heap() -> None:
    # 4 KiB objects come from malloc (pymalloc takes up to 512 bytes), below the mmap threshold:
    # the heap. Freed with one kept at the top, glibc cannot shrink the heap by itself.
    blocks = [bytes(4096) for _ in range(12_000)]  # about 48 MiB
    top = blocks[-1]
    del blocks[:-1]
    before = _rss()
    took = malloc.trim()
    after = _rss()
    assert top and took > 0
    assert before - after > 24 * 1024 * 1024, (before, after)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("relay_settings")
@needs_glibc
async def test_the_lease_keeper_trims_while_runners_run_and_when_the_last_ended(owner: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(keepers, "LEASE_POLL_S", 0.05)
    monkeypatch.setattr(malloc, "TRIM_S", 0.1)
    request = await make_request(owner, "sim-long", {"sim.tokens_per_s": "20", "sim.tokens": "400"},
                                 background=False)
    hub = get_hub()
    runner = StreamRunner(str(request.pk), hub)
    task = asyncio.get_running_loop().create_task(runner.run())
    try:
        async with asyncio.timeout(15):
            start = hub.leases.trims
            while hub.leases.trims < start + 2:  # at least two rounds' trims while it streams
                await asyncio.sleep(0.02)
            assert not task.done()
    finally:
        runner.cancel()
        await task
    ended = hub.leases.trims
    async with asyncio.timeout(5):
        while hub.leases.trims == ended:  # and one more once no runner is left
            await asyncio.sleep(0.02)
    assert not hub.leases.runners
