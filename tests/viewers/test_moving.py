"""A stopping web process asks its sockets to move (viewers/guard.py `move_sockets`), those whose
handshake was under way as it stopped listening too: they were closed 1012 with no ask, and their
tabs paused (the three longest web-restart pauses of bench chaos's 30 minutes with moves)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from responses_app.viewers import guard
from tests.relay.helpers import connect, make_request

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


async def until_moving(communicator: Any) -> list[str]:
    """The message types a socket gets until `moving`."""
    seen: list[str] = []
    while (message := json.loads(await communicator.receive_from(timeout=5))) != {"type": "moving"}:
        seen.append(message["type"] if isinstance(message, dict) else "patch")  # protocol 2's bare ops
    return seen


async def test_a_socket_admitted_as_the_process_stops_is_asked_to_move_at_once(
        owner: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard, "layer_spans_processes", lambda: True)  # another process could take the tab
    monkeypatch.setattr(guard, "_moving", False)
    request = await make_request(owner, "sim-text", {"sim.tokens_per_s": "20"})
    first = await connect(owner, request.pk)
    assert (await first.connect())[0]
    stopping = asyncio.create_task(guard.move_sockets(per_s=50, spread_s=4, wait_s=5))
    await until_moving(first)
    late = await connect(owner, request.pk)  # its handshake was under way as the process stopped listening
    assert (await late.connect())[0]
    assert await until_moving(late) == [], "asked before anything else"
    await first.disconnect()
    await late.disconnect()
    assert await asyncio.wait_for(stopping, 5) == (1, 0), "one asked in the round, none left open"


async def test_nothing_is_asked_where_no_other_process_could_take_the_tab(owner: Any) -> None:
    request = await make_request(owner, "sim-text", {"sim.tokens_per_s": "20"})
    socket = await connect(owner, request.pk)
    assert (await socket.connect())[0]
    assert await guard.move_sockets(per_s=50, spread_s=4, wait_s=5) == (0, 1), "the in-memory layer"
    assert not guard._moving
    await socket.disconnect()
