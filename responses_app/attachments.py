"""Attachments: images and files a person sends with a message.

- checked before anything is stored (`check`, called by the one door, submission.submit): at most
  RELAY_ATTACHMENT_MAX_FILES of them, each at most RELAY_ATTACHMENT_MAX_BYTES (refused by its
  size before it is read), of a type RELAY_ATTACHMENT_TYPES lists, told by its bytes (sniff.py);
  a refusal says in words what to do, and nothing is stored or started;
- stored with the turn (`store`): the bytes in RELAY_ATTACHMENT_STORAGE under a random name, a row
  (models.Attachment) per file, listed in the turn's `params["attachments"]`, where Regenerate and
  Edit find them again (submission.submit copies the list to the new version);
- sent upstream as the Responses API's content parts (`upstream_input`): an image as
  `{"type": "input_image", "image_url": "data:<mime>;base64,..."}`, a file as `{"type": "input_file",
  "filename": ..., "file_data": "data:<mime>;base64,..."}`, in the user message of the turn, read
  from the storage when a runner loads its request (selectors.request_get) or the context of the
  turns before (selectors.conversation_context). The stored input stays the text typed.
- served by web/attachment_files.py only to who may see the turn (the owner, staff, a share link's
  viewers), never from MEDIA_URL.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages

from .conf import app_settings
from .models import Attachment
from .sniff import WORDS, Sniffed, sniff

PARAM = "attachments"  # the turn's params key: its attachments' ids, in the order sent
FOLDER = "relay-attachments"
NAME_CHARS = 255


File = Any  # a browser's upload (Django's UploadedFile: name, size, read(n)), or a test's stand-in


class Refused(ValueError):
    """An attachment this server does not take: the message says what to do."""


@dataclass(frozen=True)
class Upload:
    name: str
    data: bytes
    sniffed: Sniffed


def storage() -> Storage:
    return storages[app_settings.ATTACHMENT_STORAGE]


def size_words(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f}".removesuffix(".0") + " MB"


def types_words(types: Iterable[str] | None = None) -> str:
    """What may be attached, in words: "PNG, JPEG, GIF or WebP images, PDF or plain text files"."""
    types = tuple(app_settings.ATTACHMENT_TYPES if types is None else types)
    images = [WORDS[t] for t in types if t in ("png", "jpeg", "gif", "webp")]
    files = [WORDS[t] for t in types if t in ("pdf", "text")]
    parts = [f"{_or(images)} images" if images else "", f"{_or(files)} files" if files else ""]
    return ", ".join(p for p in parts if p)


def _or(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def accept_attribute() -> str:
    """The file picker's `accept`: a hint for the picker only (the bytes decide)."""
    from .sniff import TYPES

    return ",".join(TYPES[t] for t in app_settings.ATTACHMENT_TYPES) + (
        ",.txt,.md,.csv" if "text" in app_settings.ATTACHMENT_TYPES else "")


def _name(file: File) -> str:
    name = (file.name or "attachment").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in name if c.isprintable() and c not in "\"\x00").strip() or "attachment"
    return name[:NAME_CHARS]


def check(files: Sequence[File]) -> list[Upload]:
    """The files as uploads this server takes, or Refused (the first reason, in words)."""
    if not files:
        return []
    types = app_settings.ATTACHMENT_TYPES
    if not types:
        raise Refused("This chat takes no attachments. Remove them to send your message.")
    most, cap = app_settings.ATTACHMENT_MAX_FILES, app_settings.ATTACHMENT_MAX_BYTES
    if len(files) > most:
        raise Refused(f"You attached {len(files)} files; a message takes at most {most}. "
                      f"Remove {len(files) - most} to send.")
    uploads = []
    for file in files:
        name = _name(file)
        if file.size is not None and file.size > cap:  # refused before a byte of it is read
            raise Refused(f"“{name}” is {size_words(file.size)}; an attachment can be at most "
                          f"{size_words(cap)}. Choose a smaller file.")
        data = file.read(cap + 1)
        if len(data) > cap:
            raise Refused(f"“{name}” is larger than {size_words(cap)}, the most an attachment can be. "
                          "Choose a smaller file.")
        if not data:
            raise Refused(f"“{name}” is empty. Choose another file.")
        sniffed = sniff(data)
        if sniffed is None or sniffed.name not in types:
            raise Refused(f"“{name}” is not a kind of file this chat takes: attach {types_words(types)}.")
        uploads.append(Upload(name, data, sniffed))
    return uploads


def store(uploads: Sequence[Upload], *, ids: Sequence[str], request: Any, owner: Any) -> list[Attachment]:
    """Save the uploads (their ids chosen before the turn was made: its params list them)."""
    saved = []
    for upload, pk in zip(uploads, ids, strict=True):
        stored = storage().save(f"{FOLDER}/{pk}", ContentFile(upload.data))
        saved.append(Attachment.objects.create(
            id=pk, owner=owner, request=request, name=upload.name, stored_name=stored, mime=upload.sniffed.mime,
            size=len(upload.data), width=upload.sniffed.width, height=upload.sniffed.height))
    return saved


def new_ids(count: int) -> list[str]:
    return [str(uuid.uuid4()) for _ in range(count)]


def ids_of(params: Any) -> list[str]:
    ids = (params or {}).get(PARAM) if isinstance(params, dict) else None
    return [str(pk) for pk in ids] if isinstance(ids, list) else []


def of_turns(turns: Iterable[Any]) -> dict[Any, list[Attachment]]:
    """Each turn's attachments (by its pk), in the order sent: one query for them all."""
    wanted = {turn.pk: ids_of(turn.params) for turn in turns}
    every = {pk for ids in wanted.values() for pk in ids}
    if not every:
        return {}
    by_id = {str(a.pk): a for a in Attachment.objects.filter(pk__in=every)}
    return {pk: [by_id[i] for i in ids if i in by_id] for pk, ids in wanted.items() if ids}


def of_turn(turn: Any) -> list[Attachment]:
    return of_turns([turn]).get(turn.pk, [])


def read(attachment: Attachment) -> bytes:
    with storage().open(attachment.stored_name, "rb") as handle:
        data: bytes = handle.read()
    return data


def part(attachment: Attachment) -> dict[str, Any]:
    """The Responses API content part of one attachment, its bytes inline."""
    url = f"data:{attachment.mime};base64,{base64.b64encode(read(attachment)).decode('ascii')}"
    if attachment.is_image:
        return {"type": "input_image", "image_url": url}
    return {"type": "input_file", "filename": attachment.name, "file_data": url}


def with_parts(value: Any, attachments: Sequence[Attachment]) -> Any:
    """A turn's input with its attachments: text becomes one user message of input_text and the
    parts; a list of items gets the parts as a user message after them."""
    if not attachments:
        return value
    parts = [part(a) for a in attachments]
    if isinstance(value, list):
        return [*value, {"role": "user", "content": parts}]
    text = [{"type": "input_text", "text": value}] if value else []
    return [{"role": "user", "content": [*text, *parts]}]


def upstream_input(value: Any, params: Any) -> Any:
    """What the provider is sent as a turn's input (`value` as stored, `params` the turn's)."""
    ids = ids_of(params)
    if not ids:
        return value
    by_id = {str(a.pk): a for a in Attachment.objects.filter(pk__in=ids)}
    return with_parts(value, [by_id[i] for i in ids if i in by_id])


def forget_deleted(*, instance: Attachment, **kwargs: Any) -> None:
    """post_delete: the bytes of a deleted row go too (once the database has committed)."""
    from django.db import transaction

    name = instance.stored_name
    transaction.on_commit(lambda: storage().delete(name))
