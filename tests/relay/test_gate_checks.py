"""The safety gate's shell (relay/gate_checks.py) on the event loop."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

from responses_app.relay.gate_checks import SafetyChecks


class Transcript:
    def safety_close(self) -> None:
        return None


def checks() -> SafetyChecks:
    return SafetyChecks(uuid.uuid4(), "buffered", Transcript(), checker=None,  # type: ignore[arg-type]
                        changed=lambda ops, flagged: None, on_flag=lambda: None, timeout=1.0, fail_closed=False)


def test_settle_right_after_a_check_ended_returns() -> None:
    """A check that ended in this turn of the loop is still in the set (its done callback runs at
    the next turn), and the runner may settle in between (the stream ended as the verdict came).
    Waiting on it with gather, which completes at once without yielding when every task it is given
    is done (Python 3.12), spun forever with the whole loop frozen: CI's stall of
    test_every_text_is_checked_once (the runner's lease never renewed, the main thread in settle).
    Run on a loop of its own in a thread, so that a spin fails this test instead of hanging it."""
    gate = checks()
    settled = threading.Event()

    async def scenario() -> None:
        loop = asyncio.get_running_loop()

        async def judged() -> None:
            return None

        check = loop.create_task(judged())
        gate._tasks.add(check)
        check.add_done_callback(gate._tasks.discard)

        async def runner() -> None:  # its first step comes in the turn the check ends, before the callback
            assert check.done() and check in gate._tasks
            await gate.settle()
            settled.set()

        await loop.create_task(runner())

    thread = threading.Thread(target=asyncio.run, args=(scenario(),), daemon=True)
    thread.start()
    if not settled.wait(5):
        gate._tasks.clear()  # ends the spin
        raise AssertionError("settle spun on a check already done")
    thread.join(5)


async def test_settle_waits_for_every_check_started_meanwhile() -> None:
    gate = checks()
    order: list[str] = []
    loop = asyncio.get_running_loop()

    def start(name: str, delay: float, then: Any = None) -> None:
        async def judged() -> None:
            await asyncio.sleep(delay)
            order.append(name)
            if then is not None:
                then()

        task = loop.create_task(judged())
        gate._tasks.add(task)
        task.add_done_callback(gate._tasks.discard)

    start("first", 0.01, then=lambda: start("second", 0.02))  # a verdict that opens another window
    await asyncio.wait_for(gate.settle(), 5)
    assert order == ["first", "second"] and not gate._tasks
