"""Every verdict the relay stores passes through `verdict_record`: the audit row (the admin shows it)
and, through services.safety_verdicts_record, the verdict counter. Sync: the relay calls it on its database threads."""

from __future__ import annotations

import uuid

from .. import services
from .checkers import Kind, Verdict


def verdict_record(*, request_id: uuid.UUID, mode: str, kind: Kind, action: str, verdict: Verdict,
                   text: str = "", block_id: str = "", start: int = 0, end: int = 0) -> None:
    services.safety_verdicts_record(request_id=request_id, verdicts=[{
        "kind": kind, "mode": mode, "block_id": block_id, "start": start, "end": end, "text": text,
        "flagged": verdict.flagged, "action": action, "checker": verdict.checker,
        "categories": list(verdict.categories), "error": verdict.error, "elapsed_ms": verdict.elapsed * 1000,
    }])
