"""The JSON API for programmatic clients: session-authenticated, CSRF-protected.

POST /api/requests                 -> 201 {id, ws_url, status} (200 with the same id on a resubmit),
                                      400 {error, errors: {field: [...]}}, 404 (no such conversation),
                                      429 {error, code} + Retry-After: submission.submit, the one door
GET  /api/requests/<id>            -> {status, response_id, revision, view}
POST /api/requests/<id>/cancel     -> the explicit Stop
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET, require_POST

from . import selectors, services, submission
from .addresses import request_socket
from .models import ResponseRequest
from .relay.hub import get_hub
from .relay.worker import cancel_request
from .submission import Refused
from .viewers.follow import asks


def _error(status: int, message: str, errors: dict[str, list[str]] | None = None) -> JsonResponse:
    body: dict[str, Any] = {"error": message}
    if errors:
        body["errors"] = errors
    return JsonResponse(body, status=status)


def ws_url(request_id: uuid.UUID | str) -> str:
    return request_socket(request_id)


def refused(refusal: Refused) -> JsonResponse:
    response = JsonResponse(refusal.body(), status=refusal.status)
    if refusal.retry_after is not None:
        response["Retry-After"] = str(refusal.retry_after)
    return response


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
    else:
        data = http.POST.dict()
    try:
        done = await sync_to_async(submission.submit)(user=user, data=data)
    except Refused as refusal:
        return refused(refusal)
    await submission.start(done)  # and every open tab of the conversation shows the new turn
    request = done.request
    return JsonResponse({"id": str(request.pk), "ws_url": ws_url(request.pk), "status": request.status,
                         "conversation": str(request.conversation_id)}, status=201 if done.created else 200)


@require_GET
async def requests_detail(http: HttpRequest, request_id: str) -> JsonResponse:
    user = await http.auser()
    request = await sync_to_async(selectors.request_get_for_user)(user=user, request_id=request_id)
    if request is None:
        return _error(404, "not found")
    runner = get_hub().runner(str(request.pk))
    view = runner.view_now() if runner is not None else await sync_to_async(selectors.view_latest)(
        request=request)
    return JsonResponse(describe(request, view))


@require_POST
async def requests_cancel(http: HttpRequest, request_id: str) -> JsonResponse:
    user = await http.auser()
    request = await sync_to_async(selectors.request_get_for_user)(user=user, request_id=request_id)
    if request is None:
        return _error(404, "not found")
    if not await sync_to_async(selectors.can_cancel)(user, request):
        return _error(403, "stopping another person's request needs the change_responserequest permission")
    if request.is_terminal:
        return JsonResponse({"id": str(request.pk), "status": request.status, "cancelled": False})
    await sync_to_async(services.request_cancel)(request=request)
    await cancel_request(str(request.pk))
    return JsonResponse({"id": str(request.pk), "status": "cancelling", "cancelled": True}, status=202)


@require_POST
async def requests_approve(http: HttpRequest, request_id: str, approval_request_id: str) -> JsonResponse:
    """A person's answer to an MCP approval request: `{"approve": true|false}`, stored once."""
    user = await http.auser()
    request = await sync_to_async(selectors.request_get_for_user)(user=user, request_id=request_id)
    if request is None:
        return _error(404, "not found")
    if request.owner_id != user.pk:
        return _error(403, "only the owner can answer an approval request")
    try:
        data = orjson.loads(http.body or b"{}")
    except orjson.JSONDecodeError:
        return _error(400, "body is not valid JSON")
    if not isinstance(data, dict) or not isinstance(data.get("approve"), bool):
        return _error(400, "invalid request", {"approve": ["Must be true or false."]})
    if not await asks(str(request.pk), {approval_request_id}):  # as the tabs see it, not only as committed
        return _error(404, "no such approval request")
    if request.is_terminal:
        return _error(409, "the request has ended")
    stored = await sync_to_async(services.mcp_approval_decide)(
        request=request, approval_request_id=approval_request_id, approve=data["approve"], user=user)
    if not stored:
        return _error(409, "this approval request was already answered")
    return JsonResponse({"id": str(request.pk), "approval_request_id": approval_request_id,
                         "approve": data["approve"]}, status=201)
