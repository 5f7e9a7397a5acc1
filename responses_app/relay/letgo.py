"""How a runner lets its request go, a base of `StreamRunner` (runner.py) over `Endings`.

A process whose viewer holds more than was committed asks for a commit now (`commit_asked`).
A stopping process hands each request over (`hand_off`, then `_hand_over`): what it applied is
published and committed and its lease released at once, so another runner resumes the stream
within a second instead of waiting out the lease. A runner whose lease another runner took (a
database blip outlasted it) abandons its request (`abandon`): it writes and publishes nothing
more. The state is the runner's (declared here, held in its slots).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .. import services
from ..ops import logcontext
from .dbthreads import db
from .endings import Endings
from .outcomes import LET_GO, Ending

logger = logging.getLogger(__name__)


class LettingGo(Endings):
    __slots__ = ("_hand_off_when_created",)  # its process stops: let go once the upstream confirms it
    request_id: str
    log_context: logcontext.RequestContext | None
    _task: asyncio.Task[None] | None
    _reader: asyncio.Task[Any] | None

    def abandon(self) -> None:
        """Another runner holds the request now (this one's lease ran out during a database blip
        and a sweep took it over): stop at once, publish and write nothing more, cancel nothing."""
        if self._task is not None and (self.stopped is None or self.stopped.ending not in LET_GO):
            with logcontext.using(self.log_context):
                logger.warning("request %s was taken over by another runner; this one stops", self.request_id)
            self._stop(Ending.ABANDONED, cancel=False)
            self._task.cancel()

    def hand_off(self, *, now: bool = False) -> bool:
        """Its process stops: stop reading (`now`: whatever it does), commit, release (False: ending).
        A request the upstream has not confirmed yet (no `response.created`) is let go the moment it
        is (`created`), not before: a runner taking over a request with no response id cannot know
        whether it ran, and ends it `unknown` rather than send it twice."""
        if self._task is None or self.stopped is not None or not (now or self._reader is not None):
            return False
        if not now and not self.transcript.response_id:
            self._hand_off_when_created = True
            return True
        self._stop(Ending.HANDED_OFF, cancel=False)
        (self._reader or self._task).cancel()
        return True

    def created(self) -> None:
        """The upstream confirmed the request and its id is stored: a hand-off waiting for it goes on."""
        if self._hand_off_when_created:
            self.hand_off(now=True)

    def commit_asked(self) -> bool:
        """Another process's viewer holds a newer view than the committed one (a tab moved there
        by a restart): what was applied is committed now, not at the next interval."""
        return self.delivery.commit_asked()

    async def _hand_over(self) -> None:
        """Its process is stopping: what it applied is published and committed, then its lease is
        released at once (not left to run out), so the runner that takes over resumes from there."""
        await self.delivery.hand_over()
        await db(services.request_release_lease)(request_id=self.uuid, token=self.token)
