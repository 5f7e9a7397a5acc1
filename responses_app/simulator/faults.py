"""Fault injection knobs, read from the request's `metadata` (string values, as the API requires).

Every `*_at = k` knob is keyed by sequence number: the fault takes the place of event k (or of the
terminal event when the response is shorter), so a resume with `starting_after >= k` no longer
sees it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .api_errors import ApiError, bad_request
from .dialects import NAMES as DIALECTS

PREFIX = "sim."

# name -> (kind, description); the single source for validation, `GET /models` and README.md's table.
FAULTS: dict[str, tuple[str, str]] = {
    "sim.seed": (
        "int",
        "Seed for text, ids and timestamps: the same seed and request give byte-identical streams.",
    ),
    "sim.tokens_per_s": ("float", "Pace in tokens per second; 0 means as fast as possible."),
    "sim.tokens": ("int", "Length of generated text in tokens (sim-long, sim-text)."),
    "sim.first_byte_delay_ms": ("int", "Wait this long before answering at all."),
    "sim.drop_after": (
        "int",
        "Close the connection after the event with this sequence number "
        "(background responses keep generating).",
    ),
    "sim.duplicate": ("bool", "Send every event twice."),
    "sim.stall_at": ("int", "Go silent before this sequence number for sim.stall_ms."),
    "sim.stall_ms": ("int", "Length of the stall (default 2000)."),
    "sim.keepalive_ms": (
        "int",
        "Send `: keep-alive` comments whenever the stream is idle this long.",
    ),
    "sim.http_error": (
        "int",
        "Answer 429 (with retry-after), 500 or 503 with the API's error body, no stream.",
    ),
    "sim.malformed_at": ("int", "Write one event with broken JSON before this sequence number."),
    "sim.unknown_at": ("int", "Emit one event of an unknown type with this sequence number."),
    "sim.fail_at": ("int", "Emit response.failed with this sequence number."),
    "sim.error_at": (
        "int",
        "Emit an `error` event with this sequence number, then response.failed.",
    ),
    "sim.resume_max_age_s": (
        "float",
        "Refuse to re-stream (GET ?stream=true) a response older than this.",
    ),
    "sim.ws_max_age_s": (
        "float",
        "WebSocket mode: the connection reaches its time limit this many seconds after it opened "
        "(`websocket_connection_limit_reached`).",
    ),
    "sim.dialect": (
        "dialect",
        "Send the stream as another server would: " + ", ".join(DIALECTS) + " (see docs/simulator.md).",
    ),
    "sim.id_length": (
        "int",
        "Make every id (response, item, call) this many characters long, as some providers do "
        "(LiteLLM's proxy: 441).",
    ),
    "sim.delta_chars": (
        "int",
        "Make every answer text delta this many characters long (its token repeated): a huge answer "
        "in few events.",
    ),
    "sim.stamp": (
        "bool",
        "Append the emit wall-clock time to each text delta as `⟨time.time()⟩` (for benchmarks).",
    ),
}

HTTP_ERRORS = (429, 500, 503)

# `sim.stamp`: the moment a text delta was emitted, appended to its text, and how to read it back.
STAMP_PATTERN = r"⟨(\d+\.\d+)⟩"


def stamp_delta(delta: str, now: float) -> str:
    return f"{delta}⟨{now:.6f}⟩"


@dataclass(frozen=True, slots=True)
class Faults:
    seed: int | None = None
    tokens_per_s: float | None = None
    tokens: int | None = None
    first_byte_delay_ms: int = 0
    drop_after: int | None = None
    duplicate: bool = False
    stall_at: int | None = None
    stall_ms: int = 2000
    keepalive_ms: int | None = None
    http_error: int | None = None
    malformed_at: int | None = None
    unknown_at: int | None = None
    fail_at: int | None = None
    error_at: int | None = None
    resume_max_age_s: float | None = None
    ws_max_age_s: float | None = None
    delta_chars: int | None = None
    stamp: bool = False
    dialect: str | None = None
    id_length: int | None = None


_LIMITS: dict[str, tuple[float, float]] = {
    "sim.seed": (0, 2**63 - 1),
    "sim.tokens_per_s": (0, 1_000_000),
    "sim.tokens": (1, 1_000_000),
    "sim.first_byte_delay_ms": (0, 600_000),
    "sim.drop_after": (0, 10_000_000),
    "sim.stall_at": (0, 10_000_000),
    "sim.stall_ms": (0, 3_600_000),
    "sim.keepalive_ms": (10, 3_600_000),
    "sim.http_error": (400, 599),
    "sim.malformed_at": (0, 10_000_000),
    "sim.unknown_at": (0, 10_000_000),
    "sim.fail_at": (0, 10_000_000),
    "sim.error_at": (0, 10_000_000),
    "sim.resume_max_age_s": (0, 86_400 * 365),
    "sim.ws_max_age_s": (0, 86_400),
    "sim.id_length": (1, 65_536),
    "sim.delta_chars": (1, 100_000_000),
}


def _invalid(key: str, raw: str, expected: str) -> ApiError:
    return bad_request(
        f"Invalid value for 'metadata.{key}': expected {expected}, got {raw!r}.",
        param=f"metadata.{key}",
        code="invalid_value",
    )


def _convert(key: str, kind: str, raw: str) -> Any:
    if kind == "dialect":
        if raw not in DIALECTS:
            raise _invalid(key, raw, "one of " + ", ".join(DIALECTS))
        return raw
    if kind == "bool":
        if raw.lower() in ("true", "1", "yes"):
            return True
        if raw.lower() in ("false", "0", "no"):
            return False
        raise _invalid(key, raw, "'true' or 'false'")
    try:
        value: float = int(raw) if kind == "int" else float(raw)
    except ValueError:
        raise _invalid(key, raw, "an integer" if kind == "int" else "a number") from None
    if value != value:  # NaN
        raise _invalid(key, raw, "a number")
    low, high = _LIMITS[key]
    if not low <= value <= high:
        raise _invalid(key, raw, f"a value between {low:g} and {high:g}")
    return value


def validate_metadata(metadata: Any) -> dict[str, str]:
    """The real API's own metadata rules: an object of at most 16 string pairs."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise bad_request(
            "Invalid type for 'metadata': expected an object.",
            param="metadata",
            code="invalid_type",
        )
    if len(metadata) > 16:
        raise bad_request(
            "Invalid 'metadata': too many properties. Expected an object with at most 16 "
            "properties.",
            param="metadata",
            code="object_above_max_length",
        )
    for key, value in metadata.items():
        if len(key) > 64:
            raise bad_request(
                f"Invalid 'metadata': key {key!r} is longer than 64 characters.",
                param="metadata",
                code="string_above_max_length",
            )
        if not isinstance(value, str):
            raise bad_request(
                f"Invalid type for 'metadata.{key}': expected a string, but got "
                f"{type(value).__name__} instead.",
                param=f"metadata.{key}",
                code="invalid_type",
            )
        if len(value) > 512:
            raise bad_request(
                f"Invalid 'metadata.{key}': string too long.",
                param=f"metadata.{key}",
                code="string_above_max_length",
            )
    return metadata


def parse_faults(metadata: dict[str, str]) -> Faults:
    values: dict[str, Any] = {}
    for key, raw in metadata.items():
        if not key.startswith(PREFIX):
            continue
        spec = FAULTS.get(key)
        if spec is None:
            known = ", ".join(sorted(FAULTS))
            raise bad_request(
                f"Unknown simulator option 'metadata.{key}'. Known options: {known}.",
                param=f"metadata.{key}",
                code="invalid_value",
            )
        values[key[len(PREFIX) :]] = _convert(key, spec[0], raw)
    status = values.get("http_error")
    if status is not None and status not in HTTP_ERRORS:
        raise _invalid("sim.http_error", str(status), "one of 429, 500, 503")
    for name in (
        "tokens",
        "first_byte_delay_ms",
        "drop_after",
        "stall_at",
        "stall_ms",
        "keepalive_ms",
        "malformed_at",
        "unknown_at",
        "fail_at",
        "error_at",
        "seed",
        "http_error",
        "id_length",
        "delta_chars",
    ):
        if name in values:
            values[name] = int(values[name])
    return Faults(**values)
