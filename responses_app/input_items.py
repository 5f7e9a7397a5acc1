"""What a user may put in a request's input: an allowlist, applied by the one door (submission.py).

A user sends text (a string), or a list of user messages whose content is text (`input_text`) or
images (`input_image`) at a public `https://` URL or inline as a `data:image/...;base64,` URL
(within the body limit of forms.MAX_INPUT_BYTES). Nothing else reaches the provider from a user:
system, developer and assistant messages, `item_reference`, tool calls and their outputs
(`function_call_output` ...), approval responses, files (`input_file`: a person's files come as
attachments, checked and added by attachments.py) and provider `file_id`s come only from server
code (`api.submit`, the runner's own continuations) or from a kind RELAY_USER_INPUT_ITEMS lists.
An image URL whose host is `localhost` or an IP literal outside the public ranges (private,
loopback, link-local, reserved ...) is never accepted.

Pure: no Django; the kinds a setting may list are `KINDS`.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any
from urllib.parse import urlsplit

ROLES = frozenset({"system", "developer", "assistant"})  # messages from anyone but the user
ITEM_TYPES = frozenset({
    "item_reference", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output",
    "mcp_approval_request", "mcp_approval_response", "mcp_call", "mcp_list_tools", "reasoning", "compaction",
    "computer_call", "computer_call_output", "web_search_call", "file_search_call", "image_generation_call",
    "code_interpreter_call", "local_shell_call", "local_shell_call_output", "shell_call", "shell_call_output",
    "apply_patch_call", "apply_patch_call_output",
})
PART_TYPES = frozenset({"input_file", "input_audio", "output_text", "refusal"})
FILE_ID = "file_id"  # a provider's stored file, named by id (in an input_image or input_file)
KINDS = frozenset(ROLES | ITEM_TYPES | PART_TYPES | {FILE_ID})

_MESSAGE_KEYS = frozenset({"type", "role", "content"})
_PART_KEYS = {"input_text": frozenset({"type", "text"}), "input_image": frozenset({"type", "image_url", "detail"})}
_DETAILS = ("auto", "low", "high")
_DATA_IMAGE = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*\Z")
_WHY = "only user messages of text and images at public https URLs are accepted from users"


def refusal(value: Any, *, allowed: frozenset[str] | tuple[str, ...] = ()) -> str | None:
    """Why a user may not send this input (an error naming the item and its kind), or None.
    `allowed`: extra kinds this server accepts from users (RELAY_USER_INPUT_ITEMS)."""
    if not isinstance(value, list):
        return None  # text
    extra = frozenset(allowed)
    for index, item in enumerate(value):
        why = _item(item, extra)
        if why is not None:
            return f"input[{index}]: {why}"
    return None


def _refused(kind: str, what: str) -> str:
    return (f"{what} ({kind!r}) comes only from the server, {_WHY} "
            f"(RELAY_USER_INPUT_ITEMS lists what else this server accepts).")


def _item(item: Any, extra: frozenset[str]) -> str | None:
    if not isinstance(item, dict):
        return "must be an input item (an object)."
    kind = item.get("type", "message")
    if kind != "message":
        if kind in extra:
            return None
        what = "a tool output" if str(kind).endswith("_output") else "an approval response" if str(kind).endswith(
            "_response") else "an item of this type"
        return _refused(str(kind)[:64], what)
    role = item.get("role")
    if role != "user":
        if role in extra:
            return None
        return _refused(str(role)[:64], f"a {str(role)[:64]} message" if role in ROLES else "a message of this role")
    unknown = sorted(set(item) - _MESSAGE_KEYS)
    if unknown:
        return f"{unknown[0][:64]!r} is not accepted on a user message ({_WHY})."
    content = item.get("content")
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return "a user message's content must be text or a list of input_text and input_image parts."
    for index, part in enumerate(content):
        why = _part(part, extra)
        if why is not None:
            return f"content[{index}]: {why}"
    return None


def _part(part: Any, extra: frozenset[str]) -> str | None:
    if not isinstance(part, dict):
        return "must be a content part (an object)."
    kind = part.get("type")
    if FILE_ID in part and FILE_ID not in extra:
        return _refused(FILE_ID, "a provider's stored file")
    if kind not in _PART_KEYS:
        if kind in extra:
            return None
        return _refused(str(kind)[:64], "a file" if kind == "input_file" else "a part of this type")
    unknown = sorted(set(part) - _PART_KEYS[kind] - ({FILE_ID} if FILE_ID in extra else set()))
    if unknown:
        return f"{unknown[0][:64]!r} is not accepted on {kind} ({_WHY})."
    if kind == "input_text":
        return None if isinstance(part.get("text"), str) else "input_text needs a string 'text'."
    if part.get("detail", "auto") not in _DETAILS:
        return f"input_image's detail is one of {', '.join(_DETAILS)}."
    url = part.get("image_url")
    if url is None and FILE_ID in part:
        return None
    return image_url_refusal(url)


def image_url_refusal(url: Any) -> str | None:
    """An image a provider may fetch for a user: public https, or the image inline (data:)."""
    if not isinstance(url, str):
        return "input_image needs an 'image_url' (https:// or data:image/...;base64,)."
    if url[:5].lower() == "data:":
        return None if _DATA_IMAGE.match(url) else "input_image's data: URL must be a base64 png, jpeg, gif or webp."
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").rstrip(".").lower()
        parts.port  # noqa: B018 - raises on a port that is not one
    except ValueError:
        return "input_image's image_url is not a URL."
    if parts.scheme.lower() != "https":
        return "input_image's image_url must be https:// (or a data:image URL)."
    if not host or parts.username is not None or parts.password is not None:
        return "input_image's image_url needs a host and no credentials."
    if host == "localhost" or host.endswith(".localhost"):
        return "input_image's image_url may not point at localhost."
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        # A name whose last label starts with a digit is an address in a form resolvers accept
        # (2852039166, 0xa9.0xfe.0xa9.0xfe, 127.1), never a DNS name: refused with the literals.
        if host.rsplit(".", 1)[-1][:1].isdigit():
            return f"input_image's image_url host {host[:64]!r} is a numeric address; use a public name."
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    if not (mapped or address).is_global:
        return f"input_image's image_url host {host[:64]!r} is not a public address."
    return None
