"""What a view's blocks show, in words: pure functions the block templates use as filters
(`responses_app/blocks/*.html`, through relay_tags): no templates, no models, no requests.

Reasoning summary parts go inside their item (one collapsible per item); citations are the http(s)
URLs and file names, once each; a tool reads as its name and what it did; a generated image is a
data: URL only when its data is plain base64 of a known image type.
"""

from __future__ import annotations

import json
import re
from typing import Any

from . import markdown as md

# The safety policy's notice (streaming/gate.py), where the answer was stopped: the turn's
# incomplete reason already says that part was withheld; the notice says where, and how.
NOTICE_SENTENCES = {
    "withheld": "The rest of this answer was withheld by the safety policy.",
    "retracted": "The rest of this answer was retracted by the safety policy.",
}
DONE_STATES = frozenset({"completed", "done"})

# One word per tool state, whichever event or item status it came from ("done" from a part's end,
# "interpreting" from code interpreter ...): what people read, and the CSS class.
TOOL_STATES = {
    "in_progress": "running", "streaming": "running", "interpreting": "running", "calling": "running",
    "searching": "searching", "generating": "generating",
    "completed": "completed", "done": "completed",
    "failed": "failed", "incomplete": "incomplete", "cancelled": "cancelled",
    "awaiting_approval": "awaiting approval", "approved": "approved", "denied": "denied",
    "withheld": "withheld", "retracted": "retracted",  # the safety policy's notice
}

TOOL_NAMES = {
    "web_search_call": "Web search",
    "file_search_call": "File search",
    "function_call": "Function call",
    "custom_tool_call": "Tool call",
    "code_interpreter_call": "Code interpreter",
    "image_generation_call": "Image generation",
    "mcp_call": "MCP call",
    "mcp_list_tools": "MCP tools list",
    "mcp_approval_request": "MCP approval request",
    "computer_call": "Computer use",
    "local_shell_call": "Shell",
    "shell_call": "Shell",
    "apply_patch_call": "Patch",
    # The safety policy's notice (streaming/gate.py): a compaction-kind block in place of the text.
    "content_filter": "Part of this answer was withheld by the safety policy",
}


def tool_state(state: str) -> str:
    return TOOL_STATES.get(state or "", state or "")


def _is_reasoning_item(block: dict[str, Any]) -> bool:
    return block.get("kind") == "reasoning" and block.get("tool") == "reasoning"


def group_blocks(blocks: list[dict[str, Any]], thought_s: int | None = None) -> list[dict[str, Any]]:
    """Blocks in reading order, with each reasoning item's summary parts inside it (one
    collapsible per item, titled "Thought for N s" once its time is known)."""
    out: list[dict[str, Any]] = []
    items: dict[str, dict[str, Any]] = {}
    for block in blocks or []:
        if _is_reasoning_item(block):
            entry = dict(block, parts=[])
            items[str(block.get("item_id") or block.get("id"))] = entry
            out.append(entry)
        elif block.get("kind") == "reasoning":
            owner = items.get(str(block.get("item_id")))
            if owner is None:  # a part whose item block is missing: a group of its own
                owner = {"id": f"group-{block.get('id')}", "kind": "reasoning", "tool": "reasoning",
                         "item_id": block.get("item_id"), "state": block.get("state"), "parts": []}
                items[str(block.get("item_id"))] = owner
                out.append(owner)
            owner["parts"].append(block)
        else:
            out.append(block)
    first = True
    for entry in out:
        if entry.get("kind") == "reasoning":
            entry["title"] = reasoning_title(entry, thought_s if first else None)
            first = False
    return out


def reasoning_title(item: dict[str, Any], thought_s: int | None) -> str:
    if item.get("state") not in DONE_STATES and item.get("state") not in ("incomplete", "failed"):
        return "Thinking…"
    if thought_s is not None:
        return f"Thought for {thought_s} s"
    return "Thought"


def citations(block: dict[str, Any]) -> list[dict[str, str]]:
    """url_citation annotations as {title, url} (http/https only, once each); file_citation as
    {filename}."""
    seen: set[str] = set()
    found: list[dict[str, str]] = []
    for note in block.get("annotations") or []:
        if not isinstance(note, dict):
            continue
        if note.get("type") == "url_citation":
            url = md.safe_url(note.get("url"))
            if url and url not in seen:
                seen.add(url)
                found.append({"kind": "url", "url": url, "title": str(note.get("title") or url)})
        elif note.get("type") in ("file_citation", "container_file_citation"):
            name = str(note.get("filename") or note.get("file_id") or "file")
            if name not in seen:
                seen.add(name)
                found.append({"kind": "file", "title": name})
    return found


def notice_sentence(block: dict[str, Any]) -> str:
    """The safety notice's words."""
    return NOTICE_SENTENCES.get(str(block.get("state")), NOTICE_SENTENCES["withheld"])


def tool_title(block: dict[str, Any]) -> str:
    """What the tool did, in words: `Web search: "query"`, `Function call get_weather` ..."""
    tool = str(block.get("tool") or "tool")
    title = TOOL_NAMES.get(tool, tool.replace("_", " ").capitalize())
    if block.get("name"):
        title += f" {block['server_label']}.{block['name']}" if block.get("server_label") else f" {block['name']}"
    if block.get("query"):
        title += f": “{block['query']}”"
    elif block.get("queries"):
        title += ": " + ", ".join(f"“{q}”" for q in block["queries"][:3])
    return title


def tool_details(block: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, text) pairs worth showing under a tool call: arguments, output, commands ..."""
    details = []
    for key in ("arguments", "input", "commands", "output", "result", "outputs", "operation", "error"):
        value = block.get(key)
        if value in (None, "", [], {}):
            continue
        if key == "result" and image_src(block):
            continue  # an image's base64 is shown as the image
        if key == "outputs" and code_outputs(block):
            continue  # a code interpreter's logs and files, shown as such
        if isinstance(value, str):
            try:
                value = json.dumps(json.loads(value), indent=2, ensure_ascii=False)
            except (ValueError, RecursionError):  # not JSON, or nested too deep to show as such
                pass
        else:
            value = json.dumps(value, indent=2, ensure_ascii=False)
        details.append((key, value))
    return details


_DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|webp|gif);base64,[A-Za-z0-9+/=]+$")


def code_outputs(block: dict[str, Any]) -> list[dict[str, str]]:
    """A code interpreter's outputs: its logs as text, the files it made (images) as links. Empty
    when any output is of another shape (then they are shown as they came, as JSON)."""
    outputs = block.get("outputs")
    if block.get("tool") != "code_interpreter_call" or not isinstance(outputs, list) or not outputs:
        return []
    shown: list[dict[str, str]] = []
    for n, output in enumerate(outputs, 1):
        if not isinstance(output, dict):
            return []
        if output.get("type") == "logs" and isinstance(output.get("logs"), str):
            shown.append({"kind": "logs", "text": output["logs"]})
            continue
        url = output.get("url") if output.get("type") == "image" else None
        image = _DATA_IMAGE.match(url) if isinstance(url, str) else None
        if image is not None or md.safe_url(url):
            extension = image.group(1).replace("jpeg", "jpg") if image else "png"
            shown.append({"kind": "file", "url": str(url).strip(), "name": f"output-{n}.{extension}"})
        else:
            return []
    return shown


_B64 = re.compile(r"^[A-Za-z0-9+/=\s]+$")
_IMAGE_PREFIXES = (("iVBOR", "image/png"), ("/9j/", "image/jpeg"), ("UklGR", "image/webp"), ("R0lGOD", "image/gif"))


def image_src(block: dict[str, Any]) -> str:
    """A data: URL for a generated image, only when it is plain base64 image data: the final image
    once there is one, else the latest partial (the block keeps its last partial after the final
    arrives)."""
    data = block.get("result") or block.get("image_b64")
    if not isinstance(data, str) or not data or len(data) > 8_000_000 or not _B64.match(data):
        return ""
    mime = next((m for prefix, m in _IMAGE_PREFIXES if data.startswith(prefix)), "")
    return f"data:{mime};base64,{data}" if mime else ""


def image_field(block: dict[str, Any]) -> str:
    """Which field `image_src` showed: the page's script puts that field's data into the image."""
    return "result" if block.get("result") else "image_b64"
