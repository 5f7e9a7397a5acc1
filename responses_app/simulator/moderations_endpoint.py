"""`POST /v1/moderations`, deterministically: a fixed table of terms per category, matched
case-insensitively, answered in the API's shape (https://platform.openai.com/docs/api-reference/moderations).

The request has no `metadata`, so its faults ride in the input text itself: `sim.moderation_error=500`
(or 429, 503) answers that status with the API's error body, `sim.moderation_delay_ms=N` waits N ms
first. The relay's `moderation` checker sends the text it judges, so a test puts a directive in a
prompt or an answer to make that one check fail or time out.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any

from .api_errors import ApiError, bad_request, http_fault
from .faults import HTTP_ERRORS

MODELS = ("omni-moderation-latest", "omni-moderation-2024-09-26", "text-moderation-latest",
          "text-moderation-stable")
DEFAULT_MODEL = "omni-moderation-latest"

# Every category the API reports, in its order; a few terms flag some of them (tests rely on these).
CATEGORIES = ("harassment", "harassment/threatening", "hate", "hate/threatening", "illicit",
              "illicit/violent", "self-harm", "self-harm/intent", "self-harm/instructions", "sexual",
              "sexual/minors", "violence", "violence/graphic")
TERMS: dict[str, tuple[str, ...]] = {
    "harassment": ("worthless idiot",),
    "hate": ("subhuman vermin",),
    "illicit": ("launch codes", "untraceable poison"),
    "illicit/violent": ("untraceable poison",),
    "self-harm": ("hurt myself",),
    "violence": ("bloodbath", "untraceable poison"),
}
_PATTERNS = {category: re.compile("|".join(re.escape(t) for t in terms), re.IGNORECASE)
             for category, terms in TERMS.items()}
_ERROR = re.compile(r"sim\.moderation_error=(\d+)")
_DELAY = re.compile(r"sim\.moderation_delay_ms=(\d+)")
MAX_DELAY_MS = 600_000


def _inputs(raw: Any) -> list[str]:
    """The texts judged, one result each: a string, a list of strings, or (one result) a list of
    multimodal parts whose `text` parts are judged together (images are never flagged here)."""
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and raw and all(isinstance(i, str) for i in raw):
        return list(raw)
    if isinstance(raw, list) and raw and all(isinstance(i, dict) and i.get("type") in ("text", "image_url")
                                             for i in raw):
        return ["\n".join(str(i.get("text") or "") for i in raw if i.get("type") == "text")]
    raise bad_request("Invalid value for 'input': expected a string, an array of strings or an array of "
                      "multimodal inputs.", param="input", code="invalid_value")


def _score(text: str, category: str, flagged: bool) -> float:
    """A stable pseudo-score: high for a flagged category, tiny otherwise."""
    digest = hashlib.blake2b(f"{category}\0{text}".encode(), digest_size=4).digest()
    unit = int.from_bytes(digest, "big") / 2**32
    return round(0.9 + 0.0999 * unit, 6) if flagged else round(0.0001 + 0.01 * unit, 6)


def result_for(text: str) -> dict[str, Any]:
    categories = {c: bool(_PATTERNS[c].search(text)) if c in _PATTERNS else False for c in CATEGORIES}
    return {
        "flagged": any(categories.values()),
        "categories": categories,
        "category_scores": {c: _score(text, c, hit) for c, hit in categories.items()},
        "category_applied_input_types": {c: ["text"] for c in CATEGORIES},
    }


async def moderate(request: dict[str, Any], moderation_id: str) -> dict[str, Any]:
    """The Moderation object for a request body; an ApiError for bad input or a forced fault."""
    model = request.get("model", DEFAULT_MODEL)
    if model not in MODELS:
        raise ApiError(400, f"The model '{model}' does not exist. The simulator moderates with: "
                       f"{', '.join(MODELS)}.", param="model", code="model_not_found")
    if "input" not in request:
        raise bad_request("Missing required parameter: 'input'.", param="input",
                          code="missing_required_parameter")
    texts = _inputs(request["input"])
    joined = "\n".join(texts)
    delay = _DELAY.search(joined)
    if delay:
        await asyncio.sleep(min(int(delay.group(1)), MAX_DELAY_MS) / 1000)
    error = _ERROR.search(joined)
    if error:
        status = int(error.group(1))
        if status not in HTTP_ERRORS:
            raise bad_request(f"sim.moderation_error must be one of {', '.join(map(str, HTTP_ERRORS))}, "
                              f"got {status}.", param="input", code="invalid_value")
        raise http_fault(status, str(model))
    return {"id": moderation_id, "model": model, "results": [result_for(text) for text in texts]}
