"""The doors: `submit` starts a request, `stop` stops one, `approve` answers its approval requests.

Every path that starts one (the pages, the JSON API,
Regenerate and Edit, the Python API, the AG-UI and AI SDK endpoints) comes through `submit`, so
none can forget a rule:

- the input is validated (forms.SubmitForm: types, sizes, no U+0000, metadata as the API allows);
- a user's input items are an allowlist (input_items.py: user messages of text and public https
  images; RELAY_USER_INPUT_ITEMS adds kinds); only server code (`trusted`: api.submit, or a
  Regenerate of a turn it made) sends system messages, tool outputs, item references or file ids;
- the model is one RELAY_ALLOWED_MODELS allows, checked now (a turn of a model removed since is
  not regenerated), and one a provider serves: the request records that provider (RELAY_PROVIDERS);
- the conversation is the user's own and not deleted (404 otherwise);
- the user is under RELAY_MAX_CONCURRENT_PER_USER and RELAY_SUBMIT_RATE (limits.submit_guard);
- the conversation's settings (turn_settings.py) are sent with every new turn, as they are now;
  a turn sent with a preset copies the preset's into the conversation first (as Apply preset
  does), and goes to the preset's model when it names one and the request names none;
- the output cap (RELAY_MAX_OUTPUT_TOKENS) is applied to every body sent (relay/bodies.py,
  continuations included), and the input precheck runs before any upstream call (relay/precheck.py).

A resubmitted `client_request_id` finds the same logical request and starts nothing new. `submit`
is synchronous (database work); `start` hands a new request to a runner, from async code;
`api.submit` does both for callers in any process.

Every Stop (the no-JS form, the JSON API, the AG-UI and AI SDK streams' DELETE, the request socket,
`api.cancel`) comes through `stop` (`stop_blocking` from sync code): who may stop it
(`selectors.can_cancel`, else Refused 403), an ended request answered as ended (nothing written,
no runner told), else the cancel written once (services.request_cancel) and its runner told.
Every Continue (the chat page, the JSON API, AG-UI, the AI SDK) comes through `continue_answer`:
the owner only, the rules of continuing.refusal applied in `submit`. Every approval answer (the
JSON API, AG-UI `resume`, the AI SDK's approval parts) comes through `approve`: the owner only, a
running request only, questions the request asks only.
A refusal is answered by `Refused.answer` (its status, and Retry-After on a 429).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpResponse, JsonResponse

from . import attachments, branches, continuing, input_items, limits, selectors, services, signals, turn_settings
from .conf import app_settings
from .forms import SubmitForm
from .models import Conversation, ResponseRequest
from .providers import Provider
from .tools import tool_definitions

TRUSTED = "trusted_input"  # params of a turn whose input items server code sent


class Refused(Exception):
    """Nothing was started: `status` is the HTTP status that says why (400, 404 or 429)."""

    def __init__(self, status: int, code: str, message: str, *, errors: dict[str, list[str]] | None = None,
                 retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.errors = errors or {}
        self.retry_after = retry_after

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.message, "code": self.code}
        if self.errors:
            body["errors"] = self.errors
        if self.retry_after is not None:
            body["retry_after"] = self.retry_after
        return body

    def answer(self, response: HttpResponse | None = None) -> HttpResponse:
        """`response` (a page saying why), or the JSON body, with this refusal's status."""
        return limits.refusal_answer(response if response is not None else JsonResponse(self.body()),
                                     status=self.status, retry_after=self.retry_after)


@dataclass(frozen=True)
class Submitted:
    request: ResponseRequest
    created: bool  # False: the same client_request_id made it before
    starts: bool = field(default=False)  # a runner must be asked to start it
    branch: list[str] = field(default_factory=list)  # a new turn's branch, first turn first (every tab shows it)


def submit(*, user: Any, data: Mapping[str, Any], replaces: ResponseRequest | None = None,
           trusted: bool = False, files: Sequence[attachments.File] = (),
           continues: ResponseRequest | None = None) -> Submitted:
    """Validate, apply the user's limits and create the logical request (or find the one this
    idempotency key made). `replaces`: Regenerate or Edit of that turn, a new version of it (a
    branch) chained to the answers before it, with its attachments. `continues`: Continue of that
    stopped or cut-short answer, the turn after it (continuing.py). `trusted`: the input comes
    from server code, not a user (any input item). `files`: attachments (attachments.check: their
    number, sizes and types), stored with the new turn. Raises Refused."""
    try:
        uploads = attachments.check(files)
    except attachments.Refused as exc:
        raise Refused(400, "invalid_attachment", str(exc), errors={attachments.PARAM: [str(exc)]}) from None
    kept = attachments.ids_of(replaces.params) if replaces is not None else []
    form = SubmitForm(dict(data), attached=bool(uploads or kept))
    if not form.is_valid():
        raise Refused(400, "invalid_request", "invalid request",
                      errors={k: [str(m) for m in v] for k, v in form.errors.items()})
    cleaned = form.cleaned_data
    provider = _provider(cleaned["model"])
    # Regenerate resends a turn's own input: as trusted as the code that first sent it.
    trusted = trusted or (replaces is not None and bool((replaces.params or {}).get(TRUSTED))
                          and cleaned["input"] == replaces.input)
    if not trusted:
        why = input_items.refusal(cleaned["input"], allowed=app_settings.USER_INPUT_ITEMS)
        if why is not None:
            raise Refused(400, "invalid_request", why, errors={"input": [why]})
    with limits.submit_guard(user=user, client_request_id=cleaned["client_request_id"]) as refusal:
        existing = selectors.request_by_client_id(owner=user, client_request_id=cleaned["client_request_id"])
        if existing is not None:  # a resubmitted form or retried call: the same logical request
            return Submitted(existing, False, existing.status == ResponseRequest.Status.PENDING)
        if refusal is not None:
            raise Refused(429, refusal.code, refusal.message, retry_after=refusal.retry_after)
        conversation = _conversation(user, cleaned.get("conversation"))
        # A new turn follows the branch shown; Regenerate and Edit add a version beside `replaces`.
        turns = branches.tree(conversation.pk)
        parent_id = replaces.parent_id if replaces is not None else turns.leaf(conversation.leaf_id)
        if continues is not None:
            if continues.conversation_id != conversation.pk or continues.pk not in turns:
                raise Refused(404, "not_found", "No such answer to continue.")
            why = continuing.refusal(continues, last=continues.pk == parent_id and turns.last(continues.pk))
            if why is not None:
                raise Refused(409, "not_continuable", why)
            parent_id = continues.pk
        head = branches.branch_head(turns=turns, parent_id=parent_id)
        params = _params(cleaned, head=head, tools=data.get("tools"), provider=provider)
        if cleaned.get("preset") is not None:
            turn_settings.copy_preset(conversation=conversation, preset=cleaned["preset"])
        turn_settings.apply(params, conversation)  # its instructions, temperature ... as they are now
        if continues is not None:
            _continue_params(params, continues, provider)
        if trusted and isinstance(cleaned["input"], list):
            params[TRUSTED] = True
        new = attachments.new_ids(len(uploads))
        if kept or new:
            params[attachments.PARAM] = [*kept, *new]
        request, created = services.request_create(
            owner=user, input=cleaned["input"], model=cleaned["model"],
            client_request_id=cleaned["client_request_id"], conversation=conversation, params=params,
            parent_id=parent_id, provider=provider.name, continues=continues)
        if created and uploads:
            attachments.store(uploads, ids=new, request=request, owner=user)
    branch: list[str] = []
    if created:
        signals.send(signals.request_started, request=request)
        # The turns the pages show: a continuation is part of the turn it continues.
        branch = [str(pk) for pk in (*turns.shown(head.path), *(() if continues else (request.pk,)))]
    elif conversation.pk != request.conversation_id and not conversation.requests.exists():
        Conversation.objects.filter(pk=conversation.pk).delete()  # lost a race to a concurrent resubmit
    return Submitted(request, created, created or request.status == ResponseRequest.Status.PENDING, branch)


def resend_data(source: ResponseRequest, *, client_request_id: str, input: Any | None = None,
                model: str | None = None) -> dict[str, Any]:
    """What Regenerate (the same prompt, or with another `model`) or Edit (`input`) submits: the
    turn's own settings."""
    params = source.params or {}
    data: dict[str, Any] = {"input": source.input if input is None else input, "model": model or source.model,
                            "conversation": str(source.conversation_id), "client_request_id": client_request_id,
                            "metadata": params.get("metadata") or {}}
    for key in ("background", "max_output_tokens"):  # the conversation's settings are applied anew
        if params.get(key) is not None and not turn_settings.from_settings(params, key):
            data[key] = params[key]
    return data


def continue_data(source: ResponseRequest, *, client_request_id: str) -> dict[str, Any]:
    """What Continue submits: the instruction to go on, with the turn's own model and settings."""
    return resend_data(source, client_request_id=client_request_id, input=continuing.INSTRUCTION)


def continue_answer(*, user: Any, source: ResponseRequest, client_request_id: str) -> Submitted:
    """Continue `source`, a stopped or cut-short answer, as the next part of its turn: every door's
    Continue (the chat page, the JSON API, AG-UI, the AI SDK) comes here. Refused: 403 not the
    owner, 404 its conversation is gone, 409 it cannot be continued (continuing.refusal's words);
    a resubmitted `client_request_id` finds the continuation it made."""
    if not selectors.is_owner(user, source):
        raise Refused(403, "forbidden", continuing.NOT_OWNER)
    if source.conversation_id is None:
        raise Refused(409, "not_continuable", continuing.NOT_IN_CONVERSATION)
    return submit(user=user, data=continue_data(source, client_request_id=client_request_id), continues=source)


def _continue_params(params: dict[str, Any], source: ResponseRequest, provider: Provider) -> None:
    """Chained to the stopped response itself, or (when that cannot be) the branch as input."""
    params.pop("previous_response_id", None)
    params.pop("full_context", None)
    same = (source.provider or "") == provider.name or not source.provider
    if continuing.chained(source, stores=provider.supports.store, same_provider=same):
        params["previous_response_id"] = source.response_id
    else:
        params["full_context"] = True


def _conversation(user: Any, conversation_id: Any) -> Conversation:
    if not conversation_id:
        return services.conversation_create(owner=user)
    conversation = selectors.conversation_get_for_user(user=user, conversation_id=conversation_id)
    if conversation is None or not selectors.is_owner(user, conversation) or conversation.deleted_at is not None:
        raise Refused(404, "not_found", "No such conversation.", errors={"conversation": ["No such conversation."]})
    return conversation


def _provider(model: str) -> Provider:
    """The provider that serves the model (RELAY_PROVIDERS; by default the one upstream)."""
    provider = app_settings.provider_for(model)
    if provider is None:
        served = sorted({m for p in app_settings.providers().values() for m in p.models})
        message = f"No provider serves the model {model!r}: this server offers {', '.join(served) or 'none'}."
        raise Refused(400, "model_not_served", message, errors={"model": [message]})
    return provider


def _chains(head: branches.Head, provider: Provider) -> bool:
    """A turn chains to the last answer only on the provider that made it, and one that keeps it."""
    if not provider.supports.store:
        return False
    made_by = selectors.provider_of_response(response_id=head.previous_response_id)
    return made_by is None or made_by == provider.name


def _params(cleaned: dict[str, Any], *, head: branches.Head, tools: Any, provider: Provider) -> dict[str, Any]:
    background = cleaned["background"]
    # WebSocket mode has no background mode: a provider spoken to over it streams in the foreground
    # unless a request asks for background (then POSTed over HTTP, upstream/websocket.py).
    default = app_settings.BACKGROUND_DEFAULT and not provider.websocket
    params: dict[str, Any] = {
        # A provider without background mode gets none: nothing would resume it.
        "background": (default if background is None else background) and provider.supports.background,
        "metadata": cleaned["metadata"],
        "tools": _tools(tools),
    }
    if cleaned.get("max_output_tokens"):
        params["max_output_tokens"] = cleaned["max_output_tokens"]
    if head.previous_response_id and _chains(head, provider):
        params["previous_response_id"] = head.previous_response_id
    elif head.has_turns:
        # No answer to chain to (or one this provider cannot know): send the branch so far instead.
        params["full_context"] = True
    return params


def _tools(names: Any) -> list[dict[str, Any]]:
    """Every registered tool, or the named ones (the Python API's `tools=`)."""
    if names is None:
        return tool_definitions()
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise Refused(400, "invalid_request", "tools must be a list of registered tool names",
                      errors={"tools": ["Must be a list of tool names."]})
    definitions = {d["name"]: d for d in tool_definitions()}
    unknown = [n for n in names if n not in definitions]
    if unknown:
        raise Refused(400, "invalid_request", f"unknown tools: {', '.join(unknown)}",
                      errors={"tools": [f"Unknown tool {unknown[0]!r}."]})
    return [definitions[n] for n in names]


async def start(submitted: Submitted) -> None:
    """Hand the request to a runner (single-flight in the database) and show the new turn in every
    tab of its conversation. From async code; `api.submit` covers sync callers."""
    from .conversation_events import announce_turn
    from .relay import worker

    if submitted.starts:
        await worker.start_request(str(submitted.request.pk))
    if submitted.created:
        await announce_turn(submitted.request, branch=submitted.branch)


# --- stopping --------------------------------------------------------------------------------------

STOP_REFUSED = "stopping another person's answer needs the change_responserequest permission"


@dataclass(frozen=True)
class StopAnswer:
    request: ResponseRequest
    ended: bool  # it had ended already: nothing written, no runner told

    @property
    def http_status(self) -> int:
        return 200 if self.ended else 202

    def body(self) -> dict[str, Any]:
        return {"id": str(self.request.pk), "status": self.request.status if self.ended else "cancelling",
                "cancelled": not self.ended}


def _stop(request: ResponseRequest, user: Any, trusted: bool) -> StopAnswer:
    if not trusted and (user is None or not selectors.can_cancel(user, request)):
        raise Refused(403, "forbidden", STOP_REFUSED)
    if request.is_terminal:
        return StopAnswer(request, True)
    # False only when it ended since it was read: answered as ended.
    return StopAnswer(request, not services.request_cancel(request=request))


async def stop(*, request: ResponseRequest, user: Any = None, trusted: bool = False,
               db: Callable[[Callable[..., StopAnswer]], Callable[..., Awaitable[StopAnswer]]] = sync_to_async,
               ) -> StopAnswer:
    """The one Stop, from async code: Refused (403) when `user` may not stop it. `trusted`: server
    code (the Python API) stops any request. `db`: the thread pool its database work runs on (the
    sockets' own, dbthreads.ws_call)."""
    from .relay import worker

    stopped = await db(_stop)(request, user, trusted)
    if not stopped.ended:
        await worker.cancel_request(str(request.pk))
    return stopped


def stop_blocking(*, request: ResponseRequest, user: Any = None, trusted: bool = False) -> StopAnswer:
    """`stop` for sync code in any process: the runner is told through the channel layer or
    PostgreSQL (worker.notify_cancel)."""
    from .relay import worker

    stopped = _stop(request, user, trusted)
    if not stopped.ended:
        worker.notify_cancel(str(request.pk))
    return stopped


# --- approvals -------------------------------------------------------------------------------------

async def approve(*, user: Any, request: ResponseRequest, answers: Mapping[str, bool]) -> list[str]:
    """Store a person's answers to the request's MCP approval requests; the ids stored now (an id
    answered before is not stored again). Refused: 403 not the owner, 404 it does not ask one of these
    (as the tabs see it: the live view, not only the committed), 409 the request has ended."""
    from .viewers.follow import asks

    if not selectors.is_owner(user, request):
        raise Refused(403, "forbidden", "only the owner can answer an approval request")
    if not answers or not await asks(str(request.pk), set(answers)):
        raise Refused(404, "not_found", "no such approval request")  # at once for an ended request (asks)
    if request.is_terminal:
        raise Refused(409, "ended", "the request has ended")
    decide = sync_to_async(services.mcp_approval_decide)
    return [approval_id for approval_id, approved in answers.items()
            if await decide(request=request, approval_request_id=approval_id, approve=approved, user=user)]
