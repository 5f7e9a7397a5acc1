"""An attachment's bytes, served only to who may see its turn: the owner and staff (the turn's
address in the chat), or a share link's viewers (the link's address). Anyone else, signed in or
not, gets 404, as for a turn they cannot see; so does an attachment the turn does not list.

Never from MEDIA_URL: the storage's own URL is never handed out. Every answer carries
`X-Content-Type-Options: nosniff`, a Content-Disposition (inline for an image, a download for
anything else) and a Content-Security-Policy that lets the bytes run nothing, should a browser
open one as a page.
"""

from __future__ import annotations

import uuid

from django.http import FileResponse, Http404, HttpRequest
from django.http.response import HttpResponseBase
from django.views.decorators.http import require_GET

from .. import attachments, selectors
from ..models import Attachment, ResponseRequest

CSP = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox"


@require_GET
def chat_attachment(http: HttpRequest, conversation_id: uuid.UUID, request_id: uuid.UUID,
                    attachment_id: uuid.UUID) -> HttpResponseBase:
    request = selectors.request_get_for_user(user=http.user, request_id=request_id)  # type: ignore[arg-type]
    if request is None or request.conversation_id != conversation_id:
        raise Http404("No such attachment")
    deleted = request.conversation is not None and request.conversation.deleted_at is not None
    if deleted and not http.user.has_perm(selectors.VIEW_PERMISSION):
        raise Http404("No such attachment")
    return _serve(request, attachment_id)


@require_GET
def shared_attachment(http: HttpRequest, token: str, request_id: uuid.UUID, attachment_id: uuid.UUID
                      ) -> HttpResponseBase:
    request = selectors.request_for_viewer(user=http.user, request_id=request_id, share=token)
    if request is None:
        raise Http404("No such attachment")
    return _serve(request, attachment_id)


def _serve(request: ResponseRequest, attachment_id: uuid.UUID) -> HttpResponseBase:
    if str(attachment_id) not in attachments.ids_of(request.params):
        raise Http404("No such attachment")
    attachment = Attachment.objects.filter(pk=attachment_id).first()
    if attachment is None:
        raise Http404("No such attachment")
    try:
        handle = attachments.storage().open(attachment.stored_name, "rb")
    except FileNotFoundError:
        raise Http404("This attachment's file is gone") from None
    response = FileResponse(handle, content_type=attachment.mime, as_attachment=not attachment.is_image,
                            filename=attachment.name)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = CSP
    response["Cross-Origin-Resource-Policy"] = "same-origin"
    response["Cache-Control"] = "private, max-age=3600"
    return response
