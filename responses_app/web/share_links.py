"""Share a live answer: the owner makes a read-only link to a conversation, or to one of its turns,
and revokes it (the panel of the chat page, `_conversation_tools.html`); whoever the link admits
(selectors.share_open: signed in, or anyone when the owner chose so and RELAY_SHARE_ANONYMOUS
allows it) reads the committed view at /s/<token>/ and follows it live over the link's sockets.

A viewer is a viewer connection of the owner's request, never a request of theirs: nothing here
starts, stops or counts one. Revoking closes their sockets at once (shares.close_sockets), and
the link answers 404 from then on: a page that says so (a person reads it). A visitor who is not
signed in, of a link for signed-in people, goes to the login page, which says why.

A signed-in visitor may continue the shared conversation as their own (`shared_continue`, a POST
of the shared page): shares.share_continue copies its turns into a new conversation of theirs,
which opens. A visitor who is not signed in is asked to, and comes back to the shared page.
"""

from __future__ import annotations

import uuid
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET, require_POST

from .. import addresses, continuing, selectors, shares
from ..models import Conversation, Share
from . import pages
from .turns import turn_context_of


def _own(http: HttpRequest, conversation_id: uuid.UUID) -> Conversation:
    return pages.own_conversation(http, conversation_id, refused="Only the owner shares a conversation")


def _tools_url(conversation_id: Any, share: Share | None = None) -> str:
    """The chat page with its tools open: at a new link (`share=`: it takes the focus), or at the panel."""
    url = reverse("responses_app:chat", args=[conversation_id])
    return f"{url}?tools=open&share={share.pk}#share-{share.pk}" if share else f"{url}?tools=open#conversation-tools"


def share_link(http: HttpRequest, share: Share) -> str:
    return http.build_absolute_uri(reverse("responses_app:shared", args=[share.token]))


@login_required
@require_POST
def share_create(http: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    """A new link: `turn` (a request id) for one turn, else the whole conversation; `anonymous=1`
    for anyone with the link, where the setting allows it."""
    conversation = _own(http, conversation_id)
    turn = None
    if http.POST.get("turn"):
        turn = selectors.request_get_for_user(user=http.user, request_id=http.POST["turn"])
        if turn is None or turn.conversation_id != conversation.pk:
            return HttpResponse("No such turn in this conversation.", status=400, content_type="text/plain")
    try:
        share = shares.share_create(conversation=conversation, user=http.user, request=turn,
                                    anonymous=http.POST.get("anonymous") == "1")
    except ValueError as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain")
    if "application/json" in http.headers.get("accept", ""):
        return JsonResponse({"id": str(share.pk), "url": share_link(http, share), "anonymous": share.anonymous},
                            status=201)
    return HttpResponseRedirect(_tools_url(conversation.pk, share))


def _own_share(http: HttpRequest, conversation_id: uuid.UUID, share_id: uuid.UUID) -> Share:
    conversation = _own(http, conversation_id)
    share = Share.objects.filter(pk=share_id, conversation=conversation).first()
    if share is None:
        raise Http404("No such link")
    return share


@login_required
@require_POST
async def share_revoke(http: HttpRequest, conversation_id: uuid.UUID, share_id: uuid.UUID) -> HttpResponse:
    """The link stops working now: its open sockets close, in every process."""
    share = await sync_to_async(_own_share)(http, conversation_id, share_id)
    if await sync_to_async(shares.share_revoke)(share=share):
        await shares.close_sockets(share.token)
    if "application/json" in http.headers.get("accept", ""):
        return JsonResponse({"id": str(share.pk), "revoked": True})
    return HttpResponseRedirect(_tools_url(conversation_id))


# --- the shared pages -------------------------------------------------------------------------------

LOGIN_WHY = "This conversation was shared with people who have an account here. Log in to read it."
GONE = "This link was revoked or never existed"
CONTINUE_WHY = "Log in to continue this conversation as your own. You will come back to it."
NOTHING_YET = "There is nothing to continue yet"


def _open(http: HttpRequest, token: str) -> Share | HttpResponse:
    share = selectors.share_open(token=token, user=http.user)
    if share is not None:
        return share
    if not http.user.is_authenticated and selectors.share_open(token=token, user=_SIGNED_IN) is not None:
        # a link for signed-in people: the login page says why, then the link opens
        messages.info(http, LOGIN_WHY, fail_silently=True)
        return redirect_to_login(http.get_full_path())
    return pages.refused_page(http, 404, GONE, (
        "Whoever shared it may have revoked it, or the conversation was deleted. "
        "Ask them for a new link if you still need it."),
        links=[(reverse("responses_app:conversations"), "Your conversations")] if http.user.is_authenticated else [])


class _SignedIn:
    """Anyone signed in, for the question "would this link open after logging in?"."""

    is_authenticated = True


_SIGNED_IN: Any = _SignedIn()


@ensure_csrf_cookie  # the script's POST render/blocks sends it; a read-only page has no form to hold it
@require_GET
def shared(http: HttpRequest, token: str) -> HttpResponse:
    """The committed view of what the link shares, then followed live by the page's script."""
    share = _open(http, token)
    if isinstance(share, HttpResponse):
        return share
    conversation = share.conversation
    if share.request is not None:  # the turn, with its continuations (continuing.py)
        turns = [continuing.turn_of(share.request)._replace(versions=None)]
    else:
        turns = continuing.conversation_turns(conversation=conversation)
    return pages.page(http, "responses_app/shared.html", {
        "share": share,
        "conversation": conversation,
        "is_owner": selectors.is_owner(http.user, conversation),
        "signed_in": http.user.is_authenticated,
        "continue_id": str(uuid.uuid4()),
        "turns": [turn_context_of(turn, can_post=False, can_cancel=False) for turn in turns],
        "relay_urls": addresses.share_url_templates(share.token),
    })


@require_POST
def shared_continue(http: HttpRequest, token: str) -> HttpResponse:
    """A copy of what the link shows, as the signed-in visitor's own new conversation, opened."""
    if not http.user.is_authenticated:
        messages.info(http, CONTINUE_WHY, fail_silently=True)
        return redirect_to_login(reverse("responses_app:shared", args=[token]))
    share = _open(http, token)
    if isinstance(share, HttpResponse):
        return share
    try:
        key = uuid.UUID(http.POST.get("continue_id", ""))
    except ValueError:
        key = uuid.uuid4()
    conversation = shares.share_continue(share=share, user=http.user, key=key)
    if conversation is None:
        return pages.refused_page(http, 409, NOTHING_YET, (
            "No answer in this conversation has ended yet. Wait until one has, then continue it."),
            links=[(reverse("responses_app:shared", args=[token]), "Back to the shared conversation")])
    return HttpResponseRedirect(reverse("responses_app:chat", args=[conversation.pk]))


@require_GET
def shared_turn(http: HttpRequest, token: str, request_id: uuid.UUID) -> HttpResponse:
    """One turn through the link, server-rendered (a new turn, a finished answer swapped in)."""
    share = selectors.share_open(token=token, user=http.user)
    if share is None:
        # the script's question "may I still see it?" (follower.js reads the status only): no page,
        # no message left for the login page
        if http.user.is_authenticated:
            raise Http404("This link does not work (any more).")
        return HttpResponse("This link does not work (any more), or it needs you to sign in.", status=401,
                            content_type="text/plain")
    request = selectors.request_for_viewer(user=http.user, request_id=request_id, share=token)
    if request is None:
        raise Http404("No such turn")
    turn = continuing.turn_of(request)
    context = turn_context_of(turn._replace(versions=None) if share.request_id else turn, can_post=False,
                              can_cancel=False)
    return render(http, "responses_app/_turn.html", {**context, "share": share})
