"""How far a request's texts passed, from its stored verdicts: what a runner taking over skips."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from responses_app import selectors, services


@pytest.mark.django_db
def test_passed_offsets_stop_at_the_first_hole(django_user_model: Any) -> None:
    owner = django_user_model.objects.create_user("owner", password="pw")
    request, _ = services.request_create(owner=owner, input="hi", model="sim-text",
                                         client_request_id=str(uuid.uuid4()), params={})

    def row(block_id: str, kind: str, start: int, end: int, action: str = "passed") -> dict[str, Any]:
        return {"kind": kind, "mode": "buffered", "block_id": block_id, "start": start, "end": end, "text": "x",
                "flagged": action != "passed", "action": action, "checker": "rules"}

    services.safety_verdicts_record(request_id=request.pk, verdicts=[
        row("o0-c0", "output", 10, 20), row("o0-c0", "output", 0, 10),  # stored out of order: both count
        row("o0-c0", "output", 30, 40),  # after a hole (20..30 was never stored): not counted
        row("o1", "tool_arguments", 0, 15), row("o1", "tool_output", 0, 9, "withheld"),
        row("", "input", 0, 2),
    ])
    assert selectors.safety_passed(request_id=request.pk) == {("o0-c0", "output"): 20, ("o1", "tool_arguments"): 15}
