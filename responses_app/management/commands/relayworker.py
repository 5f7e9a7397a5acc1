"""`manage.py relayworker`: a process that runs stream runners (scaled out: RELAY_INPROCESS_RUNNER=false
on the web processes, a Redis channel layer, as many of these as the load needs).

It serves the `relay-runner` channel like `manage.py runworker relay-runner` would, and adds what a
deployment needs of it (relay/worker.py `serve`): a periodic sweep that takes over streams whose
runner died, and a restart with backoff when the channel layer fails (Redis restarting) instead
of exiting. SIGTERM (or SIGINT) stops it without a pause in any stream: it stops taking requests,
then hands each stream it runs over (relay/worker.py `hand_off`) and exits; another worker resumes
each one within a second. A second signal exits at once (the leases then run out, as after a crash).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any

from django.core.management.base import BaseCommand

from ...relay.worker import hand_off, serve

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Run stream runners: the relay-runner channel, takeover sweeps, reconnecting to the channel layer."

    def handle(self, *args: Any, **options: Any) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        loop = asyncio.get_running_loop()
        task = loop.create_task(serve(), name="relayworker")
        stopping = asyncio.Event()

        def stop() -> None:
            if stopping.is_set():
                raise SystemExit(1)  # a second signal: at once
            stopping.set()
            task.cancel()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop)
        logger.info("relayworker serving the relay-runner channel")
        try:
            await task
        except asyncio.CancelledError:
            pass
        if stopping.is_set():
            await hand_off()
            logger.info("relayworker stopped")
