"""The tool step between two responses: each completed function call runs once per call id, and
each MCP approval request waits for a person's answer.

A call id is claimed in the database before its tool runs (`services.tool_call_claim`); a replay,
a recovery or a reconnect finds the claim and reuses the stored output, never running it again.
Arguments are parsed only from the finished call item. Each state change of the view goes to the
runner as the ops the transcript returned, sent at once (a boundary).

After a takeover the calls come from the raw event log, where their arguments are redacted
(RELAY_REDACT_FIELDS): a call not run yet has them from the committed view (the response's end
is committed before its tools run), else from the upstream's stored response, else it is not run
and the model is told why. A call claimed by a runner that died before storing its output is not
run again either.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import orjson
from asgiref.sync import sync_to_async

from .. import selectors, services, signals
from ..streaming.resumed import holds_redacted
from ..streaming.transcript import Ops, Transcript
from ..tools import ToolError, parse_arguments, run_tool
from ..upstream.http import Upstream
from .dbthreads import db
from .flag import Flag

APPROVAL_POLL_S = 0.5  # how often a request waiting for an MCP approval looks for the answer
ARGUMENTS_LOST = ("The relay restarted before this tool ran, and the call's arguments were not kept (they are "
                  "redacted in its log) nor could the model provider give them back; it was not run.")
INTERRUPTED = ("The relay restarted while this tool ran, before its result was stored; it is not run twice, so "
               "no result is known.")


class ToolRound:
    def __init__(self, request_id: uuid.UUID, changed: Callable[[Ops], None]) -> None:
        self.request_id = request_id
        self._changed = changed
        self.writes = 0

    async def run(self, transcript: Transcript, upstream: Upstream) -> list[dict[str, Any]]:
        """Outputs for the continuation (empty: the response called no function)."""
        calls = transcript.function_calls()
        if not calls:
            return []
        self._changed(transcript.tools_started())
        kept: dict[str, str] | None = None
        outputs = []
        for call in calls:
            call_id, name, arguments = call["call_id"], call.get("name", ""), call.get("arguments") or ""
            if holds_redacted(arguments):  # rebuilt from the log by a takeover, and not committed
                if kept is None:
                    kept = await _arguments_upstream(upstream, transcript.response_id or "")
                arguments = kept.get(call_id, arguments)
            claim = await db(services.tool_call_claim)(request_id=self.request_id, call_id=call_id, name=name,
                                                        arguments=_json_or_text(arguments))
            self.writes += 1
            if claim is None:  # it ran before (replay, recovery): reuse its output, never run it again
                output = await db(selectors.tool_call_output)(request_id=self.request_id, call_id=call_id)
                if output is None:  # claimed by a runner that died while it ran
                    output = orjson.dumps({"error": INTERRUPTED}).decode()
            elif holds_redacted(arguments):
                output = orjson.dumps({"error": ARGUMENTS_LOST}).decode()
                await db(services.tool_call_finish)(request_id=self.request_id, call_id=call_id, output=output,
                                                    ok=False)
                self.writes += 1
            else:
                self._changed(transcript.tool_running(call.get("id")))
                try:
                    output = await sync_to_async(run_tool, thread_sensitive=False)(
                        name, parse_arguments(name, arguments))
                    ok = True
                except ToolError as exc:
                    output, ok = orjson.dumps({"error": str(exc)}).decode(), False
                await db(services.tool_call_finish)(request_id=self.request_id, call_id=call_id, output=output, ok=ok)
                self.writes += 1
                await db(signals.send)(signals.tool_called, request_id=self.request_id, call_id=call_id, name=name,
                                       arguments=arguments, output=output, ok=ok)
            self._changed(transcript.tool_done(call.get("id"), output))
            outputs.append({"type": "function_call_output", "call_id": call_id, "output": output})
        self._changed(transcript.tools_finished())
        return outputs


    async def approvals(self, transcript: Transcript, stop: Flag) -> list[dict[str, Any]] | None:
        """MCP approval requests wait for a person (any tab: services.mcp_approval_decide); their
        answers become `mcp_approval_response` inputs of the continuation. None: a Stop (or the
        deadline) came first."""
        asked = transcript.approval_requests()
        if not asked:
            return []
        self._changed(transcript.approvals_awaited(asked))
        while True:
            decided = await db(selectors.mcp_approvals)(request_id=self.request_id)
            if all(approval_id in decided for approval_id in asked):
                break
            try:
                async with asyncio.timeout(APPROVAL_POLL_S):
                    await stop.wait()
            except TimeoutError:
                continue
            return None
        for approval_id in asked:
            self._changed(transcript.approval_decided(approval_id, decided[approval_id]))
        self._changed(transcript.tools_finished())
        return [{"type": "mcp_approval_response", "approval_request_id": approval_id, "approve": decided[approval_id]}
                for approval_id in asked]


async def _arguments_upstream(upstream: Upstream, response_id: str) -> dict[str, str]:
    """The arguments of each function call of the upstream's stored response, by call id (none
    when it keeps no responses or cannot be reached)."""
    if not upstream.can_retrieve or not response_id:
        return {}
    try:
        response = await upstream.retrieve(response_id)
    except Exception:  # any failure means the same: the arguments are not to be had
        return {}
    return {item["call_id"]: item["arguments"] for item in response.get("output") or ()
            if isinstance(item, dict) and item.get("type") == "function_call"
            and isinstance(item.get("call_id"), str) and isinstance(item.get("arguments"), str)}


def _json_or_text(arguments: str) -> Any:
    try:
        return orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments
