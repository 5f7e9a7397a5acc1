"""How each `RELAY_*` setting's value is read (conf.py's table names one of these per setting): a
raw value, typed or the text of an environment variable, becomes the value, or a ValueError whose
words `manage.py check` shows (responses_app.E002)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from .input_items import KINDS as INPUT_KINDS
from .sniff import TYPES as ATTACHMENT_TYPES

SAFETY_MODES = ("off", "progressive", "buffered")
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off", "")
_WINDOWS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def integer(*, minimum: int = 1) -> Callable[[Any], int]:
    assert minimum in (0, 1)
    def parse(raw: Any) -> int:
        if isinstance(raw, bool):
            raise ValueError(f"must be an integer, got {raw!r}")
        if isinstance(raw, str):
            try:
                raw = int(raw.strip())
            except ValueError:
                raise ValueError(f"must be an integer, got {raw!r}") from None
        if not isinstance(raw, int):
            raise ValueError(f"must be an integer, got {type(raw).__name__}")
        if raw < minimum:
            raise ValueError(f"must be {'zero or more' if minimum == 0 else 'positive'}, got {raw}")
        return raw
    return parse


MAX_ANSWER_CHARS_CAP = 20_000_000  # six bytes each when escaped: far under jsonb's size limit


def answer_chars(raw: Any) -> int:
    value = integer()(raw)
    if value > MAX_ANSWER_CHARS_CAP:
        raise ValueError(f"must be at most {MAX_ANSWER_CHARS_CAP:,}, got {value:,}")
    return value


def seconds(raw: Any) -> float:
    """A positive number of seconds (an int, a float, or their text)."""
    if isinstance(raw, bool):
        raise ValueError(f"must be a number of seconds, got {raw!r}")
    try:
        value = float(raw.strip()) if isinstance(raw, str) else float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"must be a number of seconds, got {raw!r}") from None
    if not value > 0:
        raise ValueError(f"must be positive, got {raw!r}")
    return value


def boolean(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in _TRUE + _FALSE:
        return raw.strip().lower() in _TRUE
    raise ValueError(f"must be true or false, got {raw!r}")


def text(raw: Any) -> str:
    if not isinstance(raw, str):
        raise ValueError(f"must be a string, got {type(raw).__name__}")
    return raw.strip()


def url(raw: Any) -> str:
    url_ = text(raw).rstrip("/")
    if url_ and not url_.startswith(("http://", "https://")):
        raise ValueError(f"must be an http(s) URL, got {url_!r}")
    return url_


def names(raw: Any) -> tuple[str, ...]:
    if isinstance(raw, str):
        raw = raw.split(",")
    if not isinstance(raw, (list, tuple)) or not all(isinstance(item, str) for item in raw):
        raise ValueError("must be a list of strings (or a comma-separated string)")
    return tuple(item.strip() for item in raw if item.strip())


def choice(*choices: str) -> Callable[[Any], str]:
    def parse(raw: Any) -> str:
        value = text(raw).lower()
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(c or '(empty)' for c in choices)}, got {raw!r}")
        return value
    return parse


def rate(raw: Any) -> tuple[int, int]:
    """`N/s`, `N/m`, `N/h` or `N/d` (or a pair) -> (N, window seconds)."""
    if isinstance(raw, (list, tuple)) and len(raw) == 2:
        return integer()(raw[0]), integer()(raw[1])
    count, _, unit = text(raw).partition("/")
    if not count.isdigit() or int(count) <= 0 or unit not in _WINDOWS:
        raise ValueError(f"must look like 20/m (per s, m, h or d), got {raw!r}")
    return int(count), _WINDOWS[unit]


def safety_modes(raw: Any) -> dict[str, str]:
    """{model: mode}, or its text `model-a=buffered,model-b=off`."""
    if isinstance(raw, str):
        pairs = {}
        for item in filter(None, (part.strip() for part in raw.split(","))):
            model, sep, mode = item.partition("=")
            if not sep or not model.strip():
                raise ValueError(f"must look like model-a=buffered,model-b=off, got {item!r}")
            pairs[model.strip()] = mode
        raw = pairs
    if not isinstance(raw, Mapping):
        raise ValueError("must be a dict of model: mode")
    mode_of = choice(*SAFETY_MODES)
    return {str(model): mode_of(mode) for model, mode in raw.items()}


def json_mapping(raw: Any, what: str) -> Mapping[Any, Any]:
    """A dict given as it is, or as the JSON text of an environment variable (blank: empty)."""
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"must be a JSON object of {what}: {exc}") from None
    if not isinstance(raw, Mapping):
        raise ValueError(f"must be a JSON object of {what} (or a dict)")
    return raw


PRICE_KEYS = ("input", "cached_input", "output")  # per million tokens; cached_input defaults to input


def prices(raw: Any) -> dict[str, dict[str, Decimal]]:
    """{model: {"input": p, "cached_input": p, "output": p}} per million tokens (or its JSON), each
    price a Decimal, an int, or its text ("2.50"; a float is read by its shortest text)."""
    raw = json_mapping(raw, "models")
    found: dict[str, dict[str, Decimal]] = {}
    for model, row in raw.items():
        if not isinstance(row, Mapping) or not set(row) <= set(PRICE_KEYS) or not {"input", "output"} <= set(row):
            raise ValueError(f"[{model!r}] must be a dict of input and output (and cached_input) prices "
                             f"per million tokens")
        found[str(model)] = {key: _price(model, key, value) for key, value in row.items()}
    return found


def _price(model: Any, key: str, value: Any) -> Decimal:
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)):
            raise InvalidOperation
        price = Decimal(str(value).strip())
    except InvalidOperation:
        raise ValueError(f"[{model!r}][{key!r}] must be a non-negative number, got {value!r}") from None
    if not price.is_finite() or price < 0:
        raise ValueError(f"[{model!r}][{key!r}] must be a non-negative number, got {value!r}")
    return price


def currency(raw: Any) -> str:
    """An ISO 4217 code: three letters (USD, EUR ...)."""
    value = text(raw).upper()
    if len(value) != 3 or not value.isascii() or not value.isalpha():
        raise ValueError(f"must be a three-letter currency code such as USD or EUR, got {raw!r}")
    return value


def checker(raw: Any) -> str:
    value = text(raw)
    if value not in ("rules", "moderation") and "." not in value:
        raise ValueError(f"must be rules, moderation or a dotted path to a checker factory "
                         f"(for example myproject.safety.make_checker), got {value!r}")
    return value


def api_tokens(raw: Any) -> dict[str, str]:
    """{token: username}, or its text `alice=<token>,bob=<token>`."""
    if isinstance(raw, str):
        pairs = {}
        for item in filter(None, (part.strip() for part in raw.split(","))):
            username, sep, token = item.partition("=")
            if not sep or not username.strip() or not token.strip():
                raise ValueError(f"must look like alice=<token>,bob=<token>, got {item[:40]!r}")
            pairs[token.strip()] = username.strip()
        return pairs
    if not isinstance(raw, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise ValueError("must be a dict of token: username")
    return dict(raw)


def input_kinds(raw: Any) -> tuple[str, ...]:
    found = names(raw)
    unknown = [name for name in found if name not in INPUT_KINDS]
    if unknown:
        raise ValueError(f"names no kind of input item {unknown[0]!r} (one of {', '.join(sorted(INPUT_KINDS))})")
    return found


def optional_text(raw: Any) -> str | None:
    return None if raw is None else text(raw)


def dotted_paths(raw: Any) -> tuple[str, ...]:
    found = names(raw)
    for name in found:
        if "." not in name:
            raise ValueError(f"must be dotted paths (myproject.tools.lookup), got {name!r}")
    return found


def attachment_types(raw: Any) -> tuple[str, ...]:
    found = tuple(name.lower() for name in names(raw))
    unknown = [name for name in found if name not in ATTACHMENT_TYPES]
    if unknown:
        raise ValueError(f"names no type of attachment {unknown[0]!r} (one of {', '.join(ATTACHMENT_TYPES)})")
    return found
