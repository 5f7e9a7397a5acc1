"""The front-end streams over HTTP: AG-UI and the Vercel AI SDK's UI message stream, followed from
the relay itself (the committed view, then live patches), as the request socket follows it.

    POST   agui-run                          an AG-UI RunAgentInput: a new turn, or `resume` answers to
                                             the approval interrupts of one; the run as SSE
    GET    agui-stream <request id>          follow a request (AG-UI); with Last-Event-ID, resume after it
    DELETE agui-stream <request id>          Stop: cancel the request (closing a stream never does)
    POST   aisdk-chat                        `useChat`'s endpoint: a new turn, or its approval answers
    GET    aisdk-stream <request or chat id> `useChat({resume: true})`: the message in flight, replayed,
                                             then live; 204 when nothing is in flight
    DELETE aisdk-stream <request or chat id> Stop (`useChat`'s stop() only closes its stream)

Authentication is the request socket's: the session (with CSRF on POST and DELETE), or
`Authorization: Bearer <token>` for clients without a browser, a token of RELAY_API_TOKENS
(token -> username). Who may follow a request is `selectors.request_get_for_user`, who may stop it
`submission.stop` (403 otherwise); only its owner answers approvals (`submission.approve`). A new turn goes through
the submit path with its per-user limits (429 and Retry-After, before any stream). A stream counts
as one viewer connection of its request (a resumed one as a reconnect too), never as a request.

The adapters below (`submit`, `subscribe`, `stop`, `approve`, and frontend_continue.go_on) are
this module's only contact with how requests start, stream and stop.

Continue (continuing.py): AG-UI has no word for it (its `resume` answers interrupts only; a
cancelled run's next run is an ordinary one), so a RunAgentInput with `forwardedProps.continue`
asks for it; the AI SDK's own way is `sendMessage()` with the stopped assistant message last.
Both streams carry the rest as the same message (frontend_continue.py, docs/frontends.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, Protocol

import orjson
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse, StreamingHttpResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.urls import reverse
from django.utils.crypto import constant_time_compare
from django.views.decorators.csrf import csrf_exempt

from .. import selectors, services, submission
from ..conf import app_settings
from ..frontends import aisdk
from ..frontends.told import CursorError, Told
from ..idempotency import client_key
from ..models import Conversation, ResponseRequest
from ..relay.hub import get_hub
from ..relay.worker import start_request
from ..submission import Refused
from ..viewers.follow import Follow, approvals_asked, current_view
from . import frontend_continue
from .pages import DEFAULT_MODEL

logger = logging.getLogger(__name__)

HEARTBEAT_S = 15.0  # an SSE comment this often keeps proxies from cutting a quiet stream
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
ENDED = ResponseRequest.ENDED

try:
    from ..frontends import agui
except ImportError:  # the optional extra: responses-relay[agui]
    agui = None  # type: ignore[assignment]


class Translator(Protocol):
    @property
    def closed(self) -> bool: ...

    def frames(self, view: dict[str, Any], status: str, *, ended: bool = False, fresh: bool = False) -> list[str]: ...


# --- adapters ----------------------------------------------------------------------------------


async def submit(user: Any, data: dict[str, Any]) -> tuple[ResponseRequest | None, HttpResponse | None]:
    """Start a turn through the one door (submission.py); the request, or the answer that refuses it."""
    try:
        done = await sync_to_async(submission.submit)(user=user, data=data)
    except Refused as refused:
        return None, refused.answer()
    await submission.start(done)  # and the conversation's open tabs show the new turn
    return done.request, None


async def stop(user: Any, request: ResponseRequest) -> HttpResponse:
    """Stop through the one door (submission.stop); the answer says whether it was still running."""
    try:
        stopped = await submission.stop(request=request, user=user)
    except Refused as refused:
        return refused.answer()
    return JsonResponse(stopped.body(), status=stopped.http_status)


async def approve(user: Any, request: ResponseRequest, answers: dict[str, bool]) -> HttpResponse | None:
    """Store each answer through the one door (a repeated answer is a no-op); the refusal, if any."""
    try:
        await submission.approve(user=user, request=request, answers=answers)
    except Refused as refused:
        return refused.answer()
    return None


Update = tuple[dict[str, Any], str, bool, bool] | None


async def subscribe(request: ResponseRequest, *, reconnect: bool) -> AsyncGenerator[Update]:
    """The request's view as it grows (follow.Follow): (view, status, ended, fresh) after each
    change, None when nothing came for HEARTBEAT_S. The first is a snapshot; a gap or falling
    behind brings a fresh one (`fresh`), so the view never skips a change; the last has `ended`."""
    request_id, hub = str(request.pk), get_hub()
    async with Follow(request_id, count_viewer=True, reconnect=reconnect) as follow:
        updates = aiter(follow)
        next_update = asyncio.ensure_future(anext(updates))
        first = True
        try:
            while True:
                done, _ = await asyncio.wait({next_update}, timeout=HEARTBEAT_S)
                if not done:
                    yield None
                    continue
                try:
                    update = next_update.result()
                except StopAsyncIteration:
                    return
                if first and (update.status == ResponseRequest.Status.PENDING or (
                        update.status == ResponseRequest.Status.STREAMING and hub.runner(request_id) is None)):
                    await start_request(request_id)  # a lost start is retried; a dead runner's lease taken over
                first = False
                ended = update.done or (update.kind == "snapshot" and update.status in ENDED)
                yield update.view, update.status, ended, update.kind == "snapshot"
                if ended:
                    return
                next_update = asyncio.ensure_future(anext(updates))
        finally:
            next_update.cancel()


async def _sse(request: ResponseRequest, translator: Translator, *, reconnect: bool,
               heartbeat: str) -> AsyncIterator[str]:
    """The response body: the translator's frames for each newer view, until its run closes. The
    client going away cancels this (Django's ASGI handler), which detaches it from the hub."""
    async with contextlib.aclosing(subscribe(request, reconnect=reconnect)) as updates:
        async for update in updates:
            if update is None:
                yield heartbeat
                continue
            view, status, ended, fresh = update
            frames = translator.frames(view, status, ended=ended, fresh=fresh)
            if frames:
                yield "".join(frames)
            if translator.closed:
                return


def _stream_response(http: HttpRequest, body: AsyncIterator[str], request: ResponseRequest,
                     route: str | None, extra: dict[str, str] | None = None) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    for name, value in {**SSE_HEADERS, **(extra or {})}.items():
        response[name] = value
    response["X-Relay-Request-Id"] = str(request.pk)
    if route:
        response["Content-Location"] = _reverse(http, route, str(request.pk))
    return response


def _reverse(http: HttpRequest, name: str, key: str) -> str:
    namespace = http.resolver_match.namespace if http.resolver_match else ""
    return reverse(f"{namespace}:{name}" if namespace else name, args=[key])


# --- authentication ------------------------------------------------------------------------------


def _token_username(header: str) -> str | None:
    token = header[len("Bearer "):].strip() if header.startswith("Bearer ") else ""
    found = None
    for known, username in app_settings.API_TOKENS.items():
        if token and constant_time_compare(known, token):
            found = username
    return found


def _csrf_refusal(http: HttpRequest) -> HttpResponse | None:
    check = CsrfViewMiddleware(lambda _: HttpResponse())
    check.process_request(http)
    return check.process_view(http, lambda _: HttpResponse(), (), {})


async def _authenticate(http: HttpRequest) -> tuple[Any, HttpResponse | None]:
    """The user, or the answer that refuses the request (401, or 403 for a failed CSRF check)."""
    header = http.headers.get("Authorization", "")
    if header:
        username = _token_username(header)
        bearer = await get_user_model().objects.filter(username=username, is_active=True).afirst() if username else None
        if bearer is None:
            refusal = JsonResponse({"error": "invalid token"}, status=401)
            refusal["WWW-Authenticate"] = 'Bearer realm="responses-relay"'
            return None, refusal
        return bearer, None
    user = await http.auser()
    if not user.is_authenticated:
        refusal = JsonResponse({"error": "authentication required"}, status=401)
        refusal["WWW-Authenticate"] = 'Bearer realm="responses-relay"'
        return None, refusal
    if http.method not in ("GET", "HEAD", "OPTIONS"):
        csrf = await sync_to_async(_csrf_refusal)(http)
        if csrf is not None:
            return None, csrf
    return user, None


def _error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def _model(requested: Any, conversation: Conversation) -> str:
    if isinstance(requested, str) and requested:
        return requested
    last = conversation.requests.order_by("-created").values_list("model", flat=True).first()
    allowed = app_settings.ALLOWED_MODELS
    return last or (allowed[0] if allowed else DEFAULT_MODEL)


async def _new_turn(user: Any, thread_id: str, text: str, options: dict[str, Any], client_request_id: str | None,
                    ) -> tuple[ResponseRequest | None, HttpResponse | None]:
    """A new turn of the thread; `options`: the client's `model` and `metadata`, if any."""
    if not text.strip():
        return None, _error(400, "no user message to answer")
    conversation = await sync_to_async(services.conversation_for_thread)(user=user, thread_id=thread_id)
    if conversation is None:
        return None, _error(404, "no such thread")
    data = {"input": text, "model": await sync_to_async(_model)(options.get("model"), conversation),
            "conversation": str(conversation.pk), "client_request_id": client_request_id,
            "metadata": options.get("metadata")}
    return await submit(user, data)


async def _answered(user: Any, request_id: str, answers: dict[str, bool],
                    ) -> tuple[Told | None, Any, HttpResponse | None]:
    """Answer a request's approvals; what its client was told when it paused, and the request."""
    request = await sync_to_async(selectors.request_get_for_user)(user=user, request_id=request_id)
    if request is None:
        return None, None, _error(404, "no such request")
    refused = await approve(user, request, answers)
    if refused is not None:
        return None, None, refused
    view, _ = await current_view(str(request.pk))
    return Told.paused_at(view, set(answers), str(request.pk)), request, None


def _refuse_methods(methods: tuple[str, ...]) -> Callable[[Any], Any]:
    def wrap(view: Any) -> Any:
        async def guarded(http: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if http.method not in methods:
                return HttpResponse(status=405, headers={"Allow": ", ".join(methods)})
            return await view(http, *args, **kwargs)  # type: ignore[no-any-return]

        return csrf_exempt(guarded)  # CSRF is checked for session clients only (_authenticate)

    return wrap


# --- AG-UI -------------------------------------------------------------------------------------


def _agui_missing() -> JsonResponse:
    return _error(501, "AG-UI needs the ag-ui-protocol package: pip install 'responses-relay[agui]'")


@_refuse_methods(("POST",))
async def agui_run(http: HttpRequest) -> HttpResponseBase:
    if agui is None:
        return _agui_missing()
    user, refusal = await _authenticate(http)
    if refusal is not None:
        return refusal
    try:
        run_input = agui.parse_input(http.body)
        answers = agui.resume_answers(run_input.resume or [])
    except ValueError as exc:
        return JsonResponse({"error": "not an AG-UI RunAgentInput", "detail": str(exc)[:2000]}, status=400)
    props = run_input.forwarded_props if isinstance(run_input.forwarded_props, dict) else {}
    told, joins, go = None, None, props.get("continue")
    if answers:
        resumed = await _waiting_request(user, run_input.thread_id, set(answers))
        if resumed is None:
            return _error(404, "no request of this thread waits for these interrupts")
        told, request, refusal = await _answered(user, resumed, answers)
    elif go is not None and go is not False:
        if go is not True and not isinstance(go, str):
            return _error(400, "forwardedProps.continue must be true or the id of a request to continue")
        request, refusal = await frontend_continue.go_on(user, None if go is True else go, run_input.thread_id,
                                                         lambda _: client_key("agui", run_input.run_id))
        joins = await sync_to_async(frontend_continue.joins)(request) if request is not None else None
    else:
        request, refusal = await _new_turn(user, run_input.thread_id, agui.last_user_text(run_input),
                                           props, client_key("agui", run_input.run_id))
    if refusal is not None:
        return refusal
    assert request is not None
    stream = agui.AguiStream(request_id=str(request.pk), thread_id=run_input.thread_id, run_id=run_input.run_id,
                             told=told, joins=joins)
    return _stream_response(http, _sse(request, stream, reconnect=False, heartbeat=agui.HEARTBEAT), request,
                            "agui-stream")


async def _waiting_request(user: Any, thread_id: str, approval_ids: set[str]) -> str | None:
    """The request of the thread whose view asks these approvals (of its newest few)."""
    conversation_id = selectors.thread_conversation_id(user=user, thread_id=thread_id)
    newest = ResponseRequest.objects.filter(conversation_id=conversation_id).order_by("-created").values_list(
        "pk", flat=True)[:5]
    async for request_id in newest:
        view, _ = await current_view(str(request_id))
        if approval_ids <= approvals_asked(view):
            return str(request_id)
    return None


@_refuse_methods(("GET", "DELETE"))
async def agui_stream(http: HttpRequest, request_id: str) -> HttpResponseBase:
    if agui is None:
        return _agui_missing()
    user, refusal = await _authenticate(http)
    if refusal is not None:
        return refusal
    request = await sync_to_async(selectors.request_get_for_user)(user=user, request_id=request_id)
    if request is None:
        return _error(404, "no such request")
    if http.method == "DELETE":
        return await stop(user, request)
    cursor = http.headers.get("Last-Event-ID") or http.GET.get("last_event_id")
    try:
        told = Told.from_cursor(cursor, str(request.pk)) if cursor else None
    except CursorError as exc:
        return _error(400, str(exc))
    if told is not None and told.finished:
        return HttpResponse(status=204)  # everything was told
    thread_id = http.GET.get("thread_id") or str(request.conversation_id or request.pk)
    stream = agui.AguiStream(request_id=str(request.pk), thread_id=thread_id, run_id=http.GET.get("run_id"), told=told,
                             joins=await sync_to_async(frontend_continue.joins)(request))
    return _stream_response(http, _sse(request, stream, reconnect=told is not None, heartbeat=agui.HEARTBEAT),
                            request, None)


# --- the AI SDK ---------------------------------------------------------------------------------


@_refuse_methods(("POST",))
async def aisdk_chat(http: HttpRequest) -> HttpResponseBase:
    user, refusal = await _authenticate(http)
    if refusal is not None:
        return refusal
    try:
        body = orjson.loads(http.body or b"null")
    except orjson.JSONDecodeError:
        return _error(400, "body is not valid JSON")
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return _error(400, "expected useChat's body: {id, messages, ...}")
    message_id, answers = aisdk.approval_answers(body["messages"])
    told = None
    chat_id, message = str(body.get("id") or ""), None
    if answers and message_id:
        told, request, refusal = await _answered(user, message_id, answers)
    elif message_id:  # the assistant's message last, nothing answered: `sendMessage()` continues it
        named = message_id
        request, refusal = await frontend_continue.go_on(
            user, named, chat_id, lambda source: client_key("aisdk", chat_id, named, "continue", str(source.pk)))
        message = (await sync_to_async(frontend_continue.earlier)(request))[0] if request is not None else None
    else:
        text, user_message_id = aisdk.last_user_text(body["messages"])
        fresh = body.get("trigger") == "regenerate-message" or not user_message_id
        request, refusal = await _new_turn(user, chat_id, text, body,
                                           None if fresh else client_key("aisdk", chat_id, str(user_message_id)))
    if refusal is not None:
        return refusal
    assert request is not None
    stream = aisdk.AisdkStream(request_id=str(request.pk), told=told, message_id=message)
    return _stream_response(http, _sse(request, stream, reconnect=False, heartbeat=aisdk.HEARTBEAT), request,
                            "aisdk-stream", aisdk.HEADERS)


@_refuse_methods(("GET", "DELETE"))
async def aisdk_stream(http: HttpRequest, key: str) -> HttpResponseBase:
    user, refusal = await _authenticate(http)
    if refusal is not None:
        return refusal
    request = await sync_to_async(selectors.request_in_flight_for_user)(user=user, key=key)
    if request is None:
        return HttpResponse(status=204)  # nothing in flight: useChat stays as it is
    if http.method == "DELETE":
        return await stop(user, request)
    # A continuation's replay is its whole message: the parts before it, then its own.
    message, earlier = await sync_to_async(frontend_continue.earlier)(request)
    stream = aisdk.AisdkStream(request_id=str(request.pk), message_id=message, earlier=earlier)
    return _stream_response(http, _sse(request, stream, reconnect=True, heartbeat=aisdk.HEARTBEAT), request, None,
                            aisdk.HEADERS)
