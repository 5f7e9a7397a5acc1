"""What a probe needs inside a Django process: the project set up against a benchmark's simulator,
and requests to stream, made the way the API makes them.

The probes (bench/relay/writes.py, bench/storage_probe.py) build StreamRunners directly in such a
process, so what they count is the runner's own work, with no server in between.
"""

from __future__ import annotations

import os
import uuid
from typing import Any


def setup_django(cfg: dict[str, Any]) -> None:
    """Django set up with project.settings, the upstream being the simulator at `cfg["simulator"]`."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.conf import settings

    # Both spellings: a --baseline tree may predate the app's RELAY_-prefixed upstream settings.
    settings.SIMULATOR_BASE_URL = settings.RELAY_SIMULATOR_BASE_URL = cfg["simulator"]
    settings.OPENAI_BASE_URL = settings.RELAY_UPSTREAM_BASE_URL = ""
    settings.OPENAI_API_KEY = settings.RELAY_UPSTREAM_API_KEY = ""


def make_requests(n: int, metadata: dict[str, str], background: bool) -> list[str]:
    """`n` `sim-long` requests of a new user, each in a conversation of its own; their ids."""
    from django.contrib.auth import get_user_model

    from responses_app import services

    user, _ = get_user_model().objects.get_or_create(username=f"probe-{uuid.uuid4().hex[:6]}")
    # Seeds unique to this call: the simulator derives response ids from the seed, and another
    # probe may run at the same time against the same simulator.
    seed = uuid.uuid4().int >> 80
    ids = []
    for i in range(n):
        conversation = services.conversation_create(owner=user)
        request, _ = services.request_create(
            owner=user, input="Tell me something long.", model="sim-long", client_request_id=uuid.uuid4().hex,
            conversation=conversation,
            params={"background": background, "metadata": dict(metadata, **{"sim.seed": str(seed + i)})})
        ids.append(str(request.pk))
    return ids
