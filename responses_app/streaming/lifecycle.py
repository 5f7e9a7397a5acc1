"""The response's own events: its lifecycle, the terminal Response and `error`.

`ResponseEvents` is a base of `Assembler`, above `ItemEvents`: it holds the response's id, status,
error and fields (but its output), takes the terminal Response as authoritative (its items matched
with the streamed ones by item id; one that omits output keeps the deltas shown), and masks the
upstream's error messages (masking.py) before they reach the view or the snapshot. Sequencing and
the text path live in assembler.py, items and parts in item_events.py.

Pure: no Django, no I/O.
"""

from __future__ import annotations

from typing import Any

import orjson

from .item_events import ItemEvents, OverLimit
from .masking import mask_error
from .projection import sync_item
from .view import ViewModel
from .vocabulary import CANCELLED, COMPLETED, ERROR, FAILED, INCOMPLETE, TERMINAL_EVENTS, TERMINAL_STATUSES

UPSTREAM_ERROR = "upstream_error"  # the code of an error the upstream gave without one


def _error_of(value: Any) -> dict[str, Any] | None:
    """A terminal Response's `error` as an error object, None when it reports none (null, empty)."""
    if value is None or value == {} or value == "":
        return None
    if isinstance(value, dict):
        return value if isinstance(value.get("code"), str) and value["code"] else {**value, "code": UPSTREAM_ERROR}
    return {"code": UPSTREAM_ERROR, "message": value if isinstance(value, str) else str(value)}


class ResponseEvents(ItemEvents):
    def __init__(self, view: ViewModel, block_prefix: str, max_items: int, secrets: tuple[str, ...]) -> None:
        super().__init__(view, block_prefix, max_items)
        self.secrets = secrets
        self.response_id: str | None = None
        self.status: str | None = None  # the response's own status, terminal or not
        self.error: dict[str, Any] | None = None
        # The Response's fields but its output, as compact JSON: a parsed dict tree, held for the
        # life of the stream, is larger (bench/README.md, storage).
        self._response: str | dict[str, Any] = "{}"

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def response(self) -> dict[str, Any]:
        """The Response snapshot as it stands, shaped like the API's Response object."""
        self.share_text()
        kept = self._response
        out = orjson.loads(kept) if isinstance(kept, str) else dict(kept)
        out["output"] = [self._items[i].materialize() for i in sorted(self._items)]
        return out

    def _on_lifecycle(self, event: dict[str, Any]) -> None:
        response = event.get("response")
        if not isinstance(response, dict):
            self._anomaly(f"{event['type']} without a response object")
            return
        self._take_response(response)
        if not self.terminal:
            self.status = response.get("status") or self.status
        self.view.set_meta(
            {"response_id": self.response_id, "status": self.status, "model": response.get("model")}
        )

    def _on_terminal(self, event: dict[str, Any]) -> None:
        response = event.get("response")
        status = TERMINAL_EVENTS[event["type"]]
        if isinstance(response, dict):
            if response.get("status") == CANCELLED:
                status = CANCELLED
            error = _error_of(response.get("error"))
            if error is not None and status in (COMPLETED, INCOMPLETE):
                # A response that reports an error did not succeed, whatever its event or status.
                self._anomaly(f"{event['type']} carrying an error: failed")
                status = FAILED
                response = {**response, "status": FAILED, "error": error}
            self._take_response(response)
            output = response.get("output")
            if error is not None and self._items:
                # What streamed stands: a failed response's output (stand-in text, a partial
                # retry) does not replace it, nor add to it.
                self._anomaly(f"{event['type']} with an error: its output does not replace what streamed")
            elif isinstance(output, list) and output:  # authoritative, unless it omits output
                self._replace_output(self._bounded_output(output))
        else:
            self._anomaly(f"{event['type']} without a response object")
            response = {}
        self.status = status
        error = mask_error(response.get("error"), self.secrets) or (self.error if status == FAILED else None)
        details = response.get("incomplete_details") or {}
        self.view.set_meta(
            {
                "response_id": self.response_id,
                "status": status,
                "error": error,
                "incomplete_reason": details.get("reason") if isinstance(details, dict) else None,
                "usage": response.get("usage"),
            }
        )

    def _on_error(self, event: dict[str, Any]) -> None:
        # The catalogue puts code/message/param at the top; the wire nests them under "error".
        nested = event.get("error")
        source = nested if isinstance(nested, dict) else event
        self.error = mask_error({k: source.get(k) for k in ("code", "message", "param")}, self.secrets)
        if not self.terminal:
            self.status = ERROR
        self.view.set_meta({"status": self.status, "error": self.error})

    def _take_response(self, response: dict[str, Any]) -> None:
        fields = {k: v for k, v in response.items() if k != "output"}
        if fields.get("error"):
            fields["error"] = mask_error(fields["error"], self.secrets)
        try:
            self._response = orjson.dumps(fields).decode()  # a str of the exact size, not orjson's buffer
        except orjson.JSONEncodeError:  # not JSON orjson writes (an int over 64 bits): kept as is
            self._response = fields
        rid = response.get("id")
        if isinstance(rid, str) and rid:
            self.response_id = rid

    def _replace_output(self, output: list[Any]) -> None:
        """The terminal output is authoritative. Its items are matched with the streamed ones by
        item id (a stream's output_index values need not run 0..n-1: real captures skip one), by
        position only where an id is missing; items the stream never announced are added."""
        kept: set[int] = set()
        for position, data in enumerate(output):
            if not isinstance(data, dict):
                continue
            item_id = data.get("id") if isinstance(data.get("id"), str) and data.get("id") else None
            item = self._by_id.get(item_id) if item_id else None
            if item is None:
                candidate = self._items.get(position)
                # By position where an id is missing, or where the stream addressed the item by
                # an id of its own that the final Response does not use (an item of the same type).
                if candidate is not None and candidate.index not in kept and (
                        candidate.id is None or item_id is None or candidate.type == data.get("type")):
                    item = candidate
            try:
                if item is None:
                    index = position if position not in self._items else max(self._items) + 1
                    item = self._new_item(data, index)
                else:
                    self._set_item(item, data)
            except OverLimit:
                continue
            kept.add(item.index)
            item.done = True
            sync_item(self.view, item)
        for index in [i for i in self._items if i not in kept]:
            self._anomaly(f"final response omits output item {index}; dropped from the snapshot")
            del self._items[index]
