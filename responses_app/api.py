"""The JSON API for programmatic clients: session-authenticated, CSRF-protected.

POST /api/requests                 -> 201 {id, ws_url, status} (200 with the same id on a resubmit)
GET  /api/requests/<id>            -> {status, response_id, revision, view}
POST /api/requests/<id>/cancel     -> the explicit Stop
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET, require_POST

from . import selectors, services
from .conversation_events import announce_turn
from .forms import SubmitForm
from .models import Conversation, ResponseRequest
from .relay.hub import get_hub
from .relay.worker import cancel_request, start_request
from .tools import tool_definitions


def _error(status: int, message: str, errors: dict[str, list[str]] | None = None) -> JsonResponse:
    body: dict[str, Any] = {"error": message}
    if errors:
        body["errors"] = errors
    return JsonResponse(body, status=status)


def ws_url(request_id: uuid.UUID | str) -> str:
    return f"/ws/requests/{request_id}/"


def submit(user: Any, data: dict[str, Any]) -> tuple[ResponseRequest | None, bool, dict[str, list[str]]]:
    """Validate and create (or find) a logical request. Shared with the chat page."""
    form = SubmitForm(data)
    if not form.is_valid():
        return None, False, {k: [str(m) for m in v] for k, v in form.errors.items()}
    cleaned = form.cleaned_data
    existing = ResponseRequest.objects.filter(owner=user, client_request_id=cleaned["client_request_id"]).first()
    if existing is not None:  # a resubmitted form or retried call: the same logical request
        return existing, False, {}
    conversation = None
    if cleaned.get("conversation"):
        conversation = selectors.conversation_get_for_user(user=user, conversation_id=cleaned["conversation"])
        if conversation is None or conversation.owner_id != user.pk:
            return None, False, {"conversation": ["No such conversation."]}
    else:
        conversation = services.conversation_create(owner=user)
    background = cleaned["background"]
    params: dict[str, Any] = {
        "background": settings.RELAY_BACKGROUND_DEFAULT if background is None else background,
        "metadata": cleaned["metadata"],
        "tools": tool_definitions(),
    }
    if conversation.last_response_id:
        params["previous_response_id"] = conversation.last_response_id
    request, created = services.request_create(
        owner=user, input=cleaned["input"], model=cleaned["model"],
        client_request_id=cleaned["client_request_id"], conversation=conversation, params=params,
    )
    if not created and conversation.pk != request.conversation_id and not conversation.requests.exists():
        Conversation.objects.filter(pk=conversation.pk).delete()  # lost a race to a concurrent resubmit
    return request, created, {}


def describe(request: ResponseRequest, view: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(request.pk),
        "status": request.status,
        "response_id": request.response_id or None,
        "revision": view.get("revision", 0),
        "view": view,
        "conversation": str(request.conversation_id) if request.conversation_id else None,
        "ws_url": ws_url(request.pk),
    }


@require_POST
async def requests_create(http: HttpRequest) -> JsonResponse:
    user = await http.auser()
    if not user.is_authenticated:
        return _error(401, "authentication required")
    if http.content_type == "application/json":
        try:
            data = orjson.loads(http.body or b"{}")
        except orjson.JSONDecodeError:
            return _error(400, "body is not valid JSON")
        if not isinstance(data, dict):
            return _error(400, "body must be a JSON object")
        if isinstance(data.get("metadata"), dict):
            data["metadata"] = orjson.dumps(data["metadata"]).decode()  # JSONField parses a string
    else:
        data = http.POST.dict()
    request, created, errors = await sync_to_async(submit)(user, data)
    if request is None:
        return _error(400, "invalid request", errors)
    if created or request.status == ResponseRequest.Status.PENDING:
        await start_request(str(request.pk))
    if created:
        await announce_turn(request)  # every open tab of the conversation shows the new turn
    return JsonResponse({"id": str(request.pk), "ws_url": ws_url(request.pk), "status": request.status,
                         "conversation": str(request.conversation_id)}, status=201 if created else 200)


@require_GET
async def requests_detail(http: HttpRequest, request_id: str) -> JsonResponse:
    user = await http.auser()
    request = await sync_to_async(selectors.request_get_for_user)(user=user, request_id=request_id)
    if request is None:
        return _error(404, "not found")
    runner = get_hub().runner(str(request.pk))
    view = runner.snapshot() if runner is not None else await sync_to_async(selectors.view_latest)(
        request=request)
    return JsonResponse(describe(request, view))


@require_POST
async def requests_cancel(http: HttpRequest, request_id: str) -> JsonResponse:
    user = await http.auser()
    request = await sync_to_async(selectors.request_get_for_user)(user=user, request_id=request_id)
    if request is None:
        return _error(404, "not found")
    if request.is_terminal:
        return JsonResponse({"id": str(request.pk), "status": request.status, "cancelled": False})
    await sync_to_async(services.request_cancel)(request=request)
    await cancel_request(str(request.pk))
    return JsonResponse({"id": str(request.pk), "status": "cancelling", "cancelled": True}, status=202)
