"""The JSON API for programmatic clients: session-authenticated, CSRF-protected.

POST /api/requests                 -> 201 {id, ws_url, status} (200 with the same id on a resubmit);
                                      JSON, or a multipart form with files as `attachments`,
                                      400 {error, errors: {field: [...]}}, 404 (no such conversation),
                                      429 {error, code} + Retry-After: submission.submit, the one door
GET  /api/requests/<id>            -> {status, response_id, revision, view}
POST /api/requests/<id>/cancel     -> the explicit Stop
POST /api/requests/<id>/continue   -> 201 {id, status, continues, ...}: the stopped or cut-short answer
                                      goes on as a new request (submission.continue_answer; 200 on a
                                      resubmitted client_request_id), 409 {error, code} saying why not,
                                      403 not the owner, 404 not yours to see
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET, require_POST

from .. import idempotency, selectors, submission
from ..addresses import request_socket
from ..models import ResponseRequest
from ..relay.hub import get_hub
from ..submission import Refused


def _error(status: int, message: str, errors: dict[str, list[str]] | None = None) -> JsonResponse:
    body: dict[str, Any] = {"error": message}
    if errors:
        body["errors"] = errors
    return JsonResponse(body, status=status)


def ws_url(request_id: uuid.UUID | str) -> str:
    return request_socket(request_id)


def describe(request: ResponseRequest, view: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(request.pk),
        "status": request.status,
        "response_id": request.response_id or None,
        "revision": view.get("revision", 0),
        "view": view,
        "conversation": str(request.conversation_id) if request.conversation_id else None,
        "continues": str(request.continues_id) if request.continues_id else None,  # the answer it goes on from
        "ws_url": ws_url(request.pk),
    }


@require_POST
async def requests_create(http: HttpRequest) -> HttpResponse:
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
        files = []
    else:  # a form, multipart with its attachments (the chat page's composer.js sends one so)
        data, files = http.POST.dict(), http.FILES.getlist("attachments")
    try:
        done = await sync_to_async(submission.submit)(user=user, data=data, files=files)
    except Refused as refusal:
        return refusal.answer()
    await submission.start(done)  # and every open tab of the conversation shows the new turn
    request = done.request
    return JsonResponse({"id": str(request.pk), "ws_url": ws_url(request.pk), "status": request.status,
                         "conversation": str(request.conversation_id)}, status=201 if done.created else 200)


@require_GET
async def requests_detail(http: HttpRequest, request_id: str) -> HttpResponse:
    try:
        _, request = await _visible(http, request_id)
    except Refused as refusal:
        return refusal.answer()
    runner = get_hub().runner(str(request.pk))
    view = runner.view_now() if runner is not None else await sync_to_async(selectors.view_latest)(
        request=request)
    return JsonResponse(describe(request, view))


async def _visible(http: HttpRequest, request_id: str) -> tuple[Any, ResponseRequest]:
    """The signed-in user and the request they may see; Refused 404 otherwise."""
    user = await http.auser()
    request = await sync_to_async(selectors.request_get_for_user)(user=user, request_id=request_id)
    if request is None:
        raise Refused(404, "not_found", "not found")
    return user, request


@require_POST
async def requests_cancel(http: HttpRequest, request_id: str) -> HttpResponse:
    try:
        user, request = await _visible(http, request_id)
        stopped = await submission.stop(request=request, user=user)
    except Refused as refusal:
        return refusal.answer()
    return JsonResponse(stopped.body(), status=stopped.http_status)


@require_POST
async def requests_continue(http: HttpRequest, request_id: str) -> HttpResponse:
    """Continue this stopped or cut-short answer: `{"client_request_id"?}` (JSON or a form, or no
    body), as `requests_create`'s."""
    if not (await http.auser()).is_authenticated:
        return _error(401, "authentication required")
    if http.content_type == "application/json" and http.body.strip():
        try:
            data = orjson.loads(http.body)
        except orjson.JSONDecodeError:
            return _error(400, "body is not valid JSON")
        if not isinstance(data, dict) or not isinstance(data.get("client_request_id") or "", str):
            return _error(400, "invalid request", {"client_request_id": ["Must be a string."]})
    else:  # no body, or a form (as api/requests takes one)
        data = http.POST.dict()
    key = idempotency.fitted((data.get("client_request_id") or "").strip()) or str(uuid.uuid4())
    try:
        user, source = await _visible(http, request_id)
        done = await sync_to_async(submission.continue_answer)(user=user, source=source, client_request_id=key)
    except Refused as refusal:
        return refusal.answer()
    await submission.start(done)  # and every open tab shows it as the rest of the same answer
    view = await sync_to_async(selectors.view_latest)(request=done.request)
    return JsonResponse(describe(done.request, view), status=201 if done.created else 200)


@require_POST
async def requests_approve(http: HttpRequest, request_id: str, approval_request_id: str) -> HttpResponse:
    """A person's answer to an MCP approval request: `{"approve": true|false}`, stored once."""
    try:
        user, request = await _visible(http, request_id)
    except Refused as refusal:
        return refusal.answer()
    try:
        data = orjson.loads(http.body or b"{}")
    except orjson.JSONDecodeError:
        return _error(400, "body is not valid JSON")
    if not isinstance(data, dict) or not isinstance(data.get("approve"), bool):
        return _error(400, "invalid request", {"approve": ["Must be true or false."]})
    try:
        stored = await submission.approve(user=user, request=request, answers={approval_request_id: data["approve"]})
    except Refused as refusal:
        return refusal.answer()
    if not stored:
        return _error(409, "this approval request was already answered")
    return JsonResponse({"id": str(request.pk), "approval_request_id": approval_request_id,
                         "approve": data["approve"]}, status=201)
