"""What each model the composer offers does, in a few words: Regenerate's model choice shows them.

The upstream's `GET /models` may describe its models (the simulator does; most providers do not):
its first sentence is kept, with the list (pages.available_models remembers it here). The built-in
simulator's scenarios have words of their own, plainer than its listing (which names its fault knobs).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.cache import cache

CACHE_KEY = "relay:upstream-model-descriptions"
MAX_CHARS = 90

BUILT_IN = {
    "sim-text": "A few paragraphs of plain text.",
    "sim-long": "A long answer, written quickly.",
    "sim-rich": "A table, a quote, a task list, code and math.",
    "sim-citations": "Searches the web, then answers with sources.",
    "sim-reasoning": "Thinks first, then answers.",
    "sim-function": "Calls one of the app's tools, then answers.",
    "sim-parallel-functions": "Calls two tools at once, then answers.",
    "sim-file-search": "Searches files, then answers with citations.",
    "sim-code-interpreter": "Runs code, then answers.",
    "sim-image": "Draws a picture, then describes it.",
    "sim-mcp": "Uses a connected service, then answers.",
    "sim-mcp-approval": "Asks your approval before using a connected service.",
    "sim-refusal": "Declines to answer.",
    "sim-incomplete": "Stops early, as if out of room: Continue goes on.",
    "sim-failed": "Starts, then fails (for trying errors).",
    "sim-error": "Starts, then breaks off with an error (for trying errors).",
}


def short(description: Any) -> str:
    """The first sentence of a listing's description, within MAX_CHARS."""
    if not isinstance(description, str):
        return ""
    text = " ".join(description.split())
    end = text.find(". ")
    text = text[: end + 1] if end >= 0 else text
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1].rstrip() + "…"


def remember(listed: Iterable[Any], ttl_s: int) -> None:
    """Keep the descriptions of an upstream's model listing as long as the list itself."""
    words = {m["id"]: short(m.get("description")) for m in listed
             if isinstance(m, dict) and isinstance(m.get("id"), str) and m.get("description")}
    cache.set(CACHE_KEY, words, ttl_s)


def choices(models: Iterable[str]) -> list[tuple[str, str]]:
    """Each model with its words: the built-in simulator's own, else the upstream's, else none."""
    listed: dict[str, str] = cache.get(CACHE_KEY) or {}
    return [(model, BUILT_IN.get(model) or listed.get(model, "")) for model in models]
