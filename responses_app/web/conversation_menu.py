"""The conversation sidebar (its list as a fragment, refreshed by sidebar.js when an answer starts
or ends), Pin and Archive (owner-only plain forms) and the Undo of a Delete; what the list page
shows of them is pages.py's (the Archived view, the "Deleted. Undo" notice)."""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from .. import conversation_lists, selectors
from .pages import own_conversation, refused_page


@login_required
@require_GET
def sidebar_items(http: HttpRequest) -> HttpResponse:
    """The sidebar's list alone (`?current=` marks the page's conversation): sidebar.js swaps it in."""
    current = selectors.parse_id(http.GET.get("current"))
    response = render(http, "responses_app/_sidebar_items.html",
                      {"sidebar": conversation_lists.sidebar(user=http.user, current=current)})
    response["Cache-Control"] = "no-store"
    return response


def _back(http: HttpRequest, fallback: str) -> HttpResponseRedirect:
    """Where the form was (its `next`, an address of this site), else `fallback`."""
    target = http.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={http.get_host()},
                                                  require_https=http.is_secure()):
        return HttpResponseRedirect(target)
    return HttpResponseRedirect(fallback)


@login_required
@require_POST
def conversation_mark(http: HttpRequest, conversation_id: uuid.UUID, mark: conversation_lists.Mark) -> HttpResponse:
    """Pin and Archive (`mark`, given by the URL): the form's `pinned` or `archived` field is "1"
    to set the mark, anything else to clear it; back where the form was."""
    conversation = own_conversation(http, conversation_id)
    conversation_lists.set_mark(conversation=conversation, mark=mark, on=http.POST.get(mark) == "1")
    return _back(http, reverse("responses_app:chat", args=[conversation.pk]))


@login_required
@require_POST
def conversation_restore(http: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    """Undo after Delete, for UNDO_S: the conversation opens again where it was."""
    conversation = conversation_lists.undoable(user=http.user, conversation_id=conversation_id)
    if conversation is None:
        return refused_page(http, 404, "This conversation cannot be restored", (
            "Only a conversation you deleted in the last few minutes can be brought back. "
            "Your other conversations are in your list."))
    conversation_lists.restore(conversation=conversation)
    return HttpResponseRedirect(reverse("responses_app:chat", args=[conversation.pk]))

