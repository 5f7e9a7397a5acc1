"""relay/flag.py: the runner's cancel and end flags behave as asyncio.Event's set/is_set/wait."""

from __future__ import annotations

import asyncio

from responses_app.relay.flag import Flag


def test_waiters_wake_on_set_and_later_waits_return_at_once() -> None:
    async def main() -> None:
        flag = Flag()
        assert not flag.is_set()
        waiters = [asyncio.create_task(flag.wait()) for _ in range(3)]
        await asyncio.sleep(0)
        assert not any(w.done() for w in waiters)
        flag.set()
        assert flag.is_set()
        assert await asyncio.gather(*waiters) == [True, True, True]
        flag.set()  # once set, stays set
        assert await asyncio.wait_for(flag.wait(), 1) is True

    asyncio.run(main())


def test_a_cancelled_waiter_leaves_no_future_behind() -> None:
    async def main() -> None:
        flag = Flag()
        with_timeout = asyncio.wait_for(flag.wait(), 0.01)
        try:
            await with_timeout
        except TimeoutError:
            pass
        else:
            raise AssertionError("the wait should have timed out")
        assert not flag._waiters
        other = asyncio.create_task(flag.wait())
        await asyncio.sleep(0)
        flag.set()
        assert await other is True
        assert flag._waiters is None

    asyncio.run(main())
