"""What the relay's process-wide parts (hub, keepers, worker) need of a stream runner.

The hub and the keepers know runners only through this Protocol, so nothing imports the runner
except the worker that starts it: no import circle.
"""

from __future__ import annotations

from typing import Any, Protocol
from uuid import UUID

from .flag import Flag


class Runner(Protocol):
    """What the hub and its keepers need of a stream runner (relay/stream_runner.py)."""

    uuid: UUID
    token: UUID
    status: str
    cancel_requested: Flag

    async def run(self) -> None: ...

    def cancel(self) -> None: ...

    def abandon(self) -> None: ...

    def hand_off(self, *, now: bool = False) -> bool: ...

    def check_idle(self, now: float) -> None: ...

    def heartbeat(self) -> None: ...

    def count_write(self, n: int = 1) -> None: ...

    async def live_view(self) -> tuple[dict[str, Any], str]: ...

    def view_now(self) -> dict[str, Any]: ...

    def commit_asked(self) -> bool: ...


class Viewer(Protocol):
    def offer(self, message: dict[str, Any], text: str) -> None:
        """Queue a message without waiting; drop it when the viewer is too far behind."""

    def hurry(self, revision: int) -> None:
        """A view at `revision` reached this process: a viewer whose client holds less takes it now."""

    def missed(self) -> None:
        """Messages of its request were lost on their way to this process: a snapshot now."""
