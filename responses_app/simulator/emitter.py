"""Output items as event sequences, following the ordering rules of the real API: messages and
reasoning here, tool calls in tool_items.py, ids and shared item events in emit_items.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .emit_items import Emission, Event
from .texts import tokenize
from .tool_items import ToolEmitter

__all__ = ["Emitter", "Event", "Emission"]


class Emitter(ToolEmitter):
    delta_chars: int | None = None  # sim.delta_chars: every answer text delta this long
    def message(
        self,
        text: str,
        *,
        annotations: tuple[tuple[int, dict[str, Any]], ...] = (),
        status: str = "completed",
        finish: bool = True,
        refusal: bool = False,
    ) -> Iterator[Emission]:
        """A message item; `annotations` are (char offset after which to announce, annotation).

        `finish=False` stops after the deltas, as a stream that fails mid-answer does."""
        item_id = self.new_id("msg")
        index = self._index()
        yield self._added(
            index,
            {
                "id": item_id,
                "type": "message",
                "status": "in_progress",
                "content": [],
                "role": "assistant",
            },
        )
        if refusal:
            part: dict[str, Any] = {"type": "refusal", "refusal": ""}
        else:
            part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        yield (
            {
                "type": "response.content_part.added",
                "sequence_number": 0,
                "item_id": item_id,
                "output_index": index,
                "content_index": 0,
                "part": part,
            },
            0,
        )
        kind = "response.refusal.delta" if refusal else "response.output_text.delta"
        tokens = tokenize(text)
        if self.delta_chars:  # each token repeated to the size asked for
            size = self.delta_chars
            tokens = [(token * (size // len(token) + 1))[:size] for token in tokens if token]
            text = "".join(tokens)
        pending = sorted(annotations, key=lambda pair: pair[0])
        emitted: list[dict[str, Any]] = []
        all_logprobs: list[dict[str, Any]] = []
        offset = 0
        obf = self.obfuscation
        with_logprobs = self.top_logprobs is not None and not refusal
        for token in tokens:
            event: Event = {
                "type": kind,
                "sequence_number": 0,
                "item_id": item_id,
                "output_index": index,
                "content_index": 0,
                "delta": token,
            }
            if not refusal:
                if with_logprobs:
                    lp = self._logprobs(token)
                    all_logprobs.extend(lp)
                    event["logprobs"] = lp
                else:
                    event["logprobs"] = []
            if obf:
                event["obfuscation"] = self._obf(token)
            self.output_tokens += 1
            yield (event, 1)
            offset += len(token)
            while pending and pending[0][0] <= offset:
                annotation = pending.pop(0)[1]
                yield (
                    {
                        "type": "response.output_text.annotation.added",
                        "sequence_number": 0,
                        "item_id": item_id,
                        "output_index": index,
                        "content_index": 0,
                        "annotation_index": len(emitted),
                        "annotation": annotation,
                    },
                    0,
                )
                emitted.append(annotation)
        if not finish:
            return
        if refusal:
            yield (
                {
                    "type": "response.refusal.done",
                    "sequence_number": 0,
                    "item_id": item_id,
                    "output_index": index,
                    "content_index": 0,
                    "refusal": text,
                },
                0,
            )
            final_part: dict[str, Any] = {"type": "refusal", "refusal": text}
        else:
            yield (
                {
                    "type": "response.output_text.done",
                    "sequence_number": 0,
                    "item_id": item_id,
                    "output_index": index,
                    "content_index": 0,
                    "text": text,
                    "logprobs": all_logprobs,
                },
                0,
            )
            final_part = {
                "type": "output_text",
                "annotations": emitted,
                "logprobs": all_logprobs,
                "text": text,
            }
        yield (
            {
                "type": "response.content_part.done",
                "sequence_number": 0,
                "item_id": item_id,
                "output_index": index,
                "content_index": 0,
                "part": final_part,
            },
            0,
        )
        yield self._done(
            index,
            {
                "id": item_id,
                "type": "message",
                "status": status,
                "content": [final_part],
                "role": "assistant",
            },
        )

    # --- reasoning ------------------------------------------------------------------------
    def reasoning(self, parts: list[str]) -> Iterator[Emission]:
        item_id = self.new_id("rs")
        index = self._index()
        yield self._added(index, {"id": item_id, "type": "reasoning", "summary": []})
        summary: list[dict[str, Any]] = []
        for n, text in enumerate(parts):
            yield (
                {
                    "type": "response.reasoning_summary_part.added",
                    "sequence_number": 0,
                    "item_id": item_id,
                    "output_index": index,
                    "summary_index": n,
                    "part": {"type": "summary_text", "text": ""},
                },
                0,
            )
            for token in tokenize(text):
                event: Event = {
                    "type": "response.reasoning_summary_text.delta",
                    "sequence_number": 0,
                    "item_id": item_id,
                    "output_index": index,
                    "summary_index": n,
                    "delta": token,
                }
                if self.obfuscation:
                    event["obfuscation"] = self._obf(token)
                self.reasoning_tokens += 1
                yield (event, 1)
            yield (
                {
                    "type": "response.reasoning_summary_text.done",
                    "sequence_number": 0,
                    "item_id": item_id,
                    "output_index": index,
                    "summary_index": n,
                    "text": text,
                },
                0,
            )
            part = {"type": "summary_text", "text": text}
            yield (
                {
                    "type": "response.reasoning_summary_part.done",
                    "sequence_number": 0,
                    "item_id": item_id,
                    "output_index": index,
                    "summary_index": n,
                    "part": part,
                },
                0,
            )
            summary.append(part)
        yield self._done(index, {"id": item_id, "type": "reasoning", "summary": summary})
