"""Pages: the conversation list, the chat page (server-rendered, then followed live by chat/main.js),
a turn partial for the script, the no-JS Stop, the conversation's actions (rename, delete,
regenerate, edit and resend).

Forms post to the pages themselves and redirect (PRG); every form render carries a fresh
`client_request_id`, so a double submit or a browser resubmit finds the same logical request.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import httpx
from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from .. import (
    attachments,
    continuing,
    conversation_lists,
    feedback,
    forms,
    idempotency,
    limits,
    pricing,
    selectors,
    services,
    submission,
)
from ..conf import app_settings
from ..conversation_events import announce
from ..models import Conversation, Preset, ResponseRequest
from ..relay import worker
from ..submission import Refused, Submitted
from ..upstream import http as upstream
from . import form_words, model_choices, versions
from .turns import turn_context_of

logger = logging.getLogger(__name__)

FALLBACK_MODELS = [
    "sim-text", "sim-long", "sim-rich", "sim-citations", "sim-reasoning", "sim-function", "sim-parallel-functions",
    "sim-file-search", "sim-code-interpreter", "sim-image", "sim-mcp", "sim-refusal", "sim-incomplete",
    "sim-failed", "sim-error",
]
MODELS_CACHE_KEY = "relay:upstream-models"
MODELS_TTL_S = 300
MODELS_RETRY_S = 30  # an unreachable upstream is asked again soon, not on every page view
DEFAULT_MODEL = "sim-text"


# --- the model picker ----------------------------------------------------------------------------

def available_models() -> list[str]:
    """Model ids from the upstream's GET /models (the simulator's scenarios by default), cached.
    Fetched server-side: the upstream key never reaches the browser."""
    models: list[str] | None = cache.get(MODELS_CACHE_KEY)
    if models is None:
        try:
            listed = upstream.list_models(timeout=2.0)
            models = [m["id"] for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str)]
            if not models:
                raise ValueError("no models listed")
            cache.set(MODELS_CACHE_KEY, models, MODELS_TTL_S)
            model_choices.remember(listed, MODELS_TTL_S)
        except (httpx.HTTPError, ValueError, AttributeError, TypeError) as exc:
            logger.info("model list unavailable from %s (%s); using the built-in list", upstream.base_url(), exc)
            models = list(FALLBACK_MODELS)
            cache.set(MODELS_CACHE_KEY, models, MODELS_RETRY_S)
    allowed = app_settings.ALLOWED_MODELS
    if allowed:
        models = [m for m in models if m in allowed] or list(allowed)
    return models


def model_groups() -> list[tuple[str, list[str]]]:
    """The picker's models by provider (its label, its models), with RELAY_PROVIDERS: each
    provider's own list (what the door accepts), within RELAY_ALLOWED_MODELS if set. Without it,
    one group of the upstream's models, unlabelled."""
    if not app_settings.PROVIDERS:
        return [("", available_models())]
    allowed = app_settings.ALLOWED_MODELS
    groups = [(p.title, [m for m in p.models if not allowed or m in allowed])
              for p in app_settings.PROVIDERS.values()]
    return [(label, models) for label, models in groups if models] or [("", list(allowed) or [DEFAULT_MODEL])]


def regenerate_choices() -> list[tuple[str, str]]:
    """The models Regenerate may use instead: the composer's, each with a few words on it."""
    return model_choices.choices(model for _label, group in model_groups() for model in group)


def composer_context(*, conversation: Conversation | None = None, values: dict[str, Any] | None = None,
                     errors: dict[str, list[str]] | None = None) -> dict[str, Any]:
    groups = model_groups()
    models = [model for _label, group in groups for model in group]
    values = values or {}
    selected = values.get("model")
    if not selected and conversation is not None:
        last = conversation.requests.order_by("-created").values_list("model", flat=True).first()
        selected = last
    if selected not in models:
        selected = DEFAULT_MODEL if DEFAULT_MODEL in models else models[0]
    return {
        "models": models,
        "model_groups": groups if len(groups) > 1 or groups[0][0] else None,  # <optgroup>s by provider
        "selected_model": selected,  # each model with its words (model_choices), the selected one's shown under it
        "model_options": [(label, model_choices.choices(group)) for label, group in groups],
        "selected_description": dict(model_choices.choices(models)).get(selected, ""),
        "presets": list(Preset.objects.all()),  # sent with a message; choosing one picks its model (composer.js)
        "client_request_id": str(uuid.uuid4()),  # fresh per render: the idempotency key
        "max_input_chars": forms.MAX_INPUT_CHARS,  # the page counts against the form's own limit
        "values": values,
        "errors": errors or {},
        "error_lines": form_words.error_lines(errors or {}),  # in words, each tied to its field
        "conversation": conversation,
        "attachments": _attachment_limits(),
    }


def _attachment_limits() -> dict[str, Any] | None:
    """What the composer's file picker offers and checks (the server checks again, by the bytes)."""
    if not app_settings.ATTACHMENT_TYPES:
        return None
    return {"accept": attachments.accept_attribute(), "max_bytes": app_settings.ATTACHMENT_MAX_BYTES,
            "max_files": app_settings.ATTACHMENT_MAX_FILES, "types": attachments.types_words(),
            "max_size": attachments.size_words(app_settings.ATTACHMENT_MAX_BYTES)}


def _chat_url(conversation_id: Any, request_id: Any | None = None) -> str:
    url = reverse("responses_app:chat", args=[conversation_id])
    return f"{url}#turn-{request_id}" if request_id else url


def _form_data(http: HttpRequest) -> dict[str, Any]:
    return {key: http.POST.get(key, "") for key in ("input", "preset", "model", "client_request_id", "metadata")}


# --- pages --------------------------------------------------------------------------------------

def page(http: HttpRequest, template: str, context: dict[str, Any], status: int = 200) -> HttpResponse:
    """One of the app's pages, inside RELAY_BASE_TEMPLATE (the host's base, or the app's own).

    `relay_skip_link` is the page's first focusable element (the base template includes
    _skip_link.html first in <body>): to the message box where the page has one, else to the content."""
    composer = "composer" in context and context.get("can_post", True)
    skip = ({"href": "#composer-input", "text": "Skip to the message box"} if composer
            else {"href": "#relay-content", "text": "Skip to content"})
    return render(http, template, {**context, "relay_base_template": app_settings.BASE_TEMPLATE,
                                   "relay_skip_link": skip}, status=status)


def refused_page(http: HttpRequest, status: int, heading: str, reason: str,
                 links: list[tuple[str, str]] | None = None) -> HttpResponse:
    """A 403 or 404 that says why in the app's styling: an answer, not an exception (nothing is
    logged but Django's one line for a 4xx)."""
    links = links if links is not None else [(reverse("responses_app:conversations"), "Your conversations")]
    return page(http, "responses_app/refused.html",
                {"status": status, "heading": heading, "reason": reason, "links": links}, status=status)


# Views that start or stop a runner are async and await the start or the cancel on the server's
# loop; the database work (the one door: submission.submit) runs in sync helpers.

@login_required
@require_GET
def conversation_list(http: HttpRequest) -> HttpResponse:
    return _conversation_list(http)


def _conversation_list(http: HttpRequest, *, values: dict[str, Any] | None = None,
                       errors: dict[str, list[str]] | None = None) -> HttpResponse:
    views = _list_views(http)
    composer = {} if views["archived_view"] else {  # the Archived view has no message box
        "composer": composer_context(values=values, errors=errors),
        "composer_action": reverse("responses_app:conversation-new"),
    }
    return page(http, "responses_app/conversation_list.html", {
        **views, **composer, "totals": selectors.usage_totals(user=http.user),  # type: ignore[arg-type]
    }, status=400 if errors else 200)


def _list_views(http: HttpRequest) -> dict[str, Any]:
    """The list (pinned first; `?archived=1`: the archived ones) and the Undo of a Delete (`?deleted=`)."""
    archived = http.GET.get("archived") == "1"
    deleted = http.GET.get("deleted")
    undo = conversation_lists.undoable(user=http.user, conversation_id=deleted) if deleted else None
    return {
        "conversations": list(conversation_lists.listed(user=http.user, archived=archived)[:200]),
        "archived_view": archived,
        "archived_count": conversation_lists.archived_count(user=http.user),
        "undo": undo,
        "undo_until": conversation_lists.undo_until(undo) if undo is not None else None,
    }


# What the composer calls its fields when a send is refused; a refusal of the whole send has no label.
def _in_words(seconds: int) -> str:
    if seconds < 90:
        return f"{seconds} second{'' if seconds == 1 else 's'}"
    minutes = round(seconds / 60)
    return f"{minutes} minutes" if minutes < 90 else f"{round(minutes / 60)} hours"


def refusal_words(refused: Refused) -> str:
    """Why a send was refused, as a person reads it next to the composer: never a setting's name;
    a rate limit says when to send again."""
    if refused.code == "too_many_requests_in_flight":
        return limits.running_words(app_settings.MAX_CONCURRENT_PER_USER)
    if refused.code == "rate_limited":
        count, window = app_settings.SUBMIT_RATE
        when = _in_words(refused.retry_after or 1)
        return (f"You have sent as many messages as allowed for now ({count} per {limits.window_words(window)}). "
                f"You can send again in {when}.")
    return refused.message


FILES_AGAIN = "Your message was kept, but a page cannot keep files: attach them again to send them."


def _form_errors(refused: Refused, http: HttpRequest | None = None) -> dict[str, list[str]]:
    """The composer's errors by field ("" for the send as a whole), worded by form_words; a send
    with files says to attach them again (a file input comes back empty)."""
    errors = refused.errors if refused.status == 400 and refused.errors else {"": [refusal_words(refused)]}
    if http is not None and _files(http):
        errors = {**errors, attachments.PARAM: [*errors.get(attachments.PARAM, []), FILES_AGAIN]}
    return errors


def _files(http: HttpRequest) -> list[Any]:
    return http.FILES.getlist(attachments.PARAM)


def _conversation_new(http: HttpRequest) -> tuple[HttpResponse, Submitted | None]:
    data = _form_data(http)
    try:
        done = submission.submit(user=http.user, data=data, files=_files(http))
    except Refused as refused:
        return refused.answer(_conversation_list(http, values=data, errors=_form_errors(refused, http))), None
    return HttpResponseRedirect(_chat_url(done.request.conversation_id, done.request.pk)), done


@login_required
@require_http_methods(["GET", "POST"])
async def conversation_new(http: HttpRequest) -> HttpResponse:
    """Start a conversation with its first prompt (POST); GET goes to the list."""
    if http.method != "POST":
        return redirect("responses_app:conversations")
    response, done = await sync_to_async(_conversation_new)(http)
    if done is not None:
        await submission.start(done)
    return response


def _chat(http: HttpRequest, conversation_id: uuid.UUID) -> tuple[HttpResponse, Submitted | None]:
    conversation = selectors.conversation_open_for_user(user=http.user, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation")
    can_post = selectors.is_owner(http.user, conversation)
    can_cancel = can_post or http.user.has_perm(selectors.CHANGE_PERMISSION)
    values: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    refused = None
    if http.method == "POST":
        if not can_post:
            raise PermissionDenied("Only the owner can add to a conversation")
        values = _form_data(http)
        try:
            done = submission.submit(user=http.user, data=dict(values, conversation=str(conversation.pk)),
                                     files=_files(http))
        except Refused as exc:
            refused, errors = exc, _form_errors(exc, http)
        else:
            return HttpResponseRedirect(_chat_url(done.request.conversation_id, done.request.pk)), done
    # `?version=`: a search result's version, for this page view only (the saved choice stays).
    through = versions.version_asked(http) if http.method == "GET" else None
    shown = continuing.conversation_turns(conversation=conversation, through=through)
    rated = feedback.of_user(user=http.user, request_ids=[t.request.pk for t in shown]) if can_post else {}
    choices = regenerate_choices() if can_post else []
    turns = [turn_context_of(t, can_post=can_post, can_cancel=can_cancel, feedback=rated.get(t.request.pk),
                             model_choices=choices) for t in shown]
    peek = through is not None and any(t.head.pk == through for t in shown) and (
        str(through) not in selectors.conversation_turn_ids(conversation_id=conversation.pk))
    response = page(http, "responses_app/chat.html", {
        "conversation": conversation,
        "sidebar": conversation_lists.sidebar(user=http.user, current=conversation.pk),
        "turns": turns,
        "peek": through if peek else None,
        "can_post": can_post,
        "can_cancel": can_cancel,
        "composer": composer_context(conversation=conversation, values=values, errors=errors),
        "composer_action": reverse("responses_app:chat", args=[conversation.pk]),
        "conversation_cost": _cost_words(conversation.pk),
    }, status=400 if errors else 200)
    return (refused.answer(response) if refused is not None else response), None


@login_required
@require_http_methods(["GET", "POST"])
async def chat(http: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    """Every committed message rendered here; chat.js then follows the live ones."""
    response, done = await sync_to_async(_chat)(http, conversation_id)
    if done is not None:
        await submission.start(done)
    return response


@login_required
@require_GET
def chat_turn(http: HttpRequest, conversation_id: uuid.UUID, request_id: uuid.UUID) -> HttpResponse:
    """One turn, server-rendered: chat.js inserts it after a submit and swaps it in at the end."""
    request = selectors.request_get_for_user(user=http.user, request_id=request_id)
    if request is None or request.conversation_id != conversation_id:
        raise Http404("No such request")
    turn = continuing.turn_of(request)  # with the parts it is shown with (Continue)
    can_post = selectors.is_owner(http.user, request) and request.conversation.deleted_at is None  # type: ignore[union-attr]
    rated = feedback.of_user(user=http.user, request_ids=[turn.request.pk]) if can_post else {}
    return render(http, "responses_app/_turn.html", {**turn_context_of(
        turn, can_post=can_post, can_cancel=selectors.can_cancel(http.user, turn.request),
        feedback=rated.get(turn.request.pk), model_choices=regenerate_choices() if can_post else None),
        "conversation_cost": _cost_words(conversation_id)})


def _cost_words(conversation_id: uuid.UUID) -> str | None:
    """The conversation's total cost in words (empty: nothing priced yet); None: no prices set."""
    total = selectors.conversation_cost(conversation_id=conversation_id)
    return None if total is None else pricing.total_text(total)


def _chat_request(http: HttpRequest, conversation_id: uuid.UUID, request_id: uuid.UUID) -> ResponseRequest:
    request = selectors.request_get_for_user(user=http.user, request_id=request_id)
    if request is None or request.conversation_id != conversation_id:
        raise Http404("No such request")
    return request


@login_required
@require_POST
async def chat_cancel(http: HttpRequest, conversation_id: uuid.UUID, request_id: uuid.UUID) -> HttpResponse:
    """The Stop button without JavaScript (chat.js sends `cancel` over the websocket instead)."""
    request = await sync_to_async(_chat_request)(http, conversation_id, request_id)
    try:
        await submission.stop(request=request, user=http.user)
    except Refused as refused:
        raise PermissionDenied(refused.message) from None
    return HttpResponseRedirect(_chat_url(conversation_id, request_id))


# --- conversation actions ---------------------------------------------------------------------------

def own_conversation(http: HttpRequest, conversation_id: uuid.UUID,
                     refused: str = "Only the owner can change a conversation") -> Conversation:
    """The signed-in user's own open conversation: 404 if they cannot see it, 403 (`refused`) if
    they may see it but are not its owner."""
    conversation = selectors.conversation_open_for_user(user=http.user, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation")
    if not selectors.is_owner(http.user, conversation):
        raise PermissionDenied(refused)
    return conversation


def _wants_json(http: HttpRequest) -> bool:
    return "application/json" in http.headers.get("accept", "")


@login_required
@require_POST
async def conversation_rename(http: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    conversation = await sync_to_async(own_conversation)(http, conversation_id)
    try:
        title = await sync_to_async(services.conversation_rename)(conversation=conversation,
                                                                  title=http.POST.get("title", ""))
    except ValueError as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain")
    await announce(conversation.pk, {"type": "renamed", "title": title})
    return HttpResponseRedirect(_chat_url(conversation.pk))


@login_required
@require_POST
async def conversation_delete(http: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    conversation = await sync_to_async(own_conversation)(http, conversation_id)
    stopped = await sync_to_async(services.conversation_delete)(conversation=conversation)
    for request in stopped:  # already cancelled in the database: their runners are told
        await worker.cancel_request(str(request.pk))
    await announce(conversation.pk, {"type": "deleted"})
    # the list says "Deleted. Undo" (conversation_lists.UNDO_S)
    return HttpResponseRedirect(f"{reverse('responses_app:conversations')}?deleted={conversation.pk}")


def _resend(http: HttpRequest, conversation_id: uuid.UUID, request_id: uuid.UUID, *, edit: bool) -> Submitted:
    """Regenerate or Edit: through the one door, as any submit (limits, allowlist, cap, precheck)."""
    conversation = own_conversation(http, conversation_id)
    source = selectors.request_get_for_user(user=http.user, request_id=request_id)
    if source is None or source.conversation_id != conversation.pk:
        raise Http404("No such request")
    key = idempotency.fitted(http.POST.get("client_request_id", "").strip()) or str(uuid.uuid4())
    model = None if edit else http.POST.get("model", "").strip() or None  # Regenerate with another model
    data = submission.resend_data(source, client_request_id=key, input=http.POST.get("prompt", "") if edit else None,
                                  model=model)
    return submission.submit(user=http.user, data=data, replaces=source)


async def _resend_view(http: HttpRequest, conversation_id: uuid.UUID, request_id: uuid.UUID, *, edit: bool
                       ) -> HttpResponse:
    try:
        done = await sync_to_async(_resend)(http, conversation_id, request_id, edit=edit)
    except Refused as refused:
        if _wants_json(http):
            return refused.answer()
        message = "; ".join(m for messages in refused.errors.values() for m in messages) or refused.message
        return refused.answer(HttpResponse(message, content_type="text/plain"))
    await submission.start(done)
    request = done.request
    if _wants_json(http):
        return JsonResponse({"id": str(request.pk), "status": request.status}, status=201 if done.created else 200)
    return HttpResponseRedirect(_chat_url(conversation_id, request.pk))


@login_required
@require_POST
async def chat_regenerate(http: HttpRequest, conversation_id: uuid.UUID, request_id: uuid.UUID) -> HttpResponse:
    """The same prompt again: a new version of the turn (a new logical request), shown at once."""
    return await _resend_view(http, conversation_id, request_id, edit=False)


@login_required
@require_POST
async def chat_edit(http: HttpRequest, conversation_id: uuid.UUID, request_id: uuid.UUID) -> HttpResponse:
    """An edited prompt: a new version of the turn, chained to the answers before it."""
    return await _resend_view(http, conversation_id, request_id, edit=True)
