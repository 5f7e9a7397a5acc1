"""The view schema covers everything a viewer can see, and the safety gate holds to it.

Every field of the schema's TypedDicts is classified (gated text, or safe and why); every field
any view holds, of the simulator's recordings, the real captures and a hostile stream, is in the
schema of its block's kind; and behind a buffered gate a phrase the upstream puts into every
string it sends reaches the public view only in fields the schema proves safe (identifiers and
words the API defines), never in one that carries text, and nowhere in the snapshot's text."""

from __future__ import annotations

import copy
import typing
from pathlib import Path
from typing import Any

import orjson
import pytest

from responses_app.safety.checkers import RulesChecker
from responses_app.streaming import schema
from responses_app.streaming.gate import SafetyGate
from responses_app.streaming.transcript import Transcript
from tests.conftest import real_stream_files

FIXTURES = sorted((Path(__file__).resolve().parent.parent / "fixtures" / "sim").glob("*.sse"))
SCHEMAS = [schema.PartBlock, schema.ItemBlock, schema.ImageBlock, schema.Meta]
PHRASE = "launch codes"


def test_every_field_of_the_schema_is_classified() -> None:
    for typed in SCHEMAS:
        classes = schema.classes(typed)  # raises for a field with no class, or two
        assert classes and set(classes) == set(typing.get_type_hints(typed))
        for name, mark in classes.items():
            if isinstance(mark, schema.Gated):
                assert mark.kind in ("output", "tool_arguments", "tool_output"), (typed.__name__, name)


def test_a_field_without_a_class_is_refused() -> None:
    class Unclassified(typing.TypedDict, total=False):
        id: typing.Annotated[str, schema.SAFE_ID]
        title: str

    with pytest.raises(TypeError, match=r"Unclassified\.title needs one class"):
        schema.classes(Unclassified)


def events_of(path: Path) -> list[dict[str, Any]]:
    body = path.read_bytes().replace(b"\r\n", b"\n")
    return [orjson.loads(line[6:]) for block in body.split(b"\n\n") for line in block.split(b"\n")
            if line.startswith(b"data: ")]


def sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(event) + b"\n\n" for event in events)


def views(transcript: Transcript) -> list[dict[str, Any]]:
    return [transcript._inner.to_dict(), transcript.view.to_dict()]


def unknown_fields(view: dict[str, Any]) -> list[str]:
    found = [f"meta.{name}" for name in view["meta"] if name not in typing.get_type_hints(schema.Meta)]
    for block in view["blocks"]:
        known = typing.get_type_hints(schema.schema_for(block["kind"]))
        found += [f"{block['kind']}.{name}" for name in block if name not in known]
    return found


STREAMS = FIXTURES + real_stream_files()


@pytest.mark.parametrize("path", STREAMS, ids=[p.stem for p in STREAMS])
def test_every_field_a_view_holds_is_in_the_schema(path: Path) -> None:
    for mode in ("buffered", "progressive"):
        transcript = Transcript()
        transcript.guard(SafetyGate(mode))
        windows = transcript.feed(sse(events_of(path)), 0.0).change.windows + transcript.safety_close().windows
        for window in windows:  # everything passes: the public view holds every field
            transcript.safety_verdict(window.id, False)
        transcript.end("completed")
        for view in views(transcript):
            assert unknown_fields(view) == []


def poisoned(value: Any, key: str = "") -> Any:
    """The value with the phrase in every string but the event's type and the sequencing keys."""
    if isinstance(value, str):
        return value if key in ("type", "role") else f"{value} {PHRASE}"
    if isinstance(value, list):
        return [poisoned(v, key) for v in value]
    if isinstance(value, dict):
        return {k: poisoned(v, k) for k, v in value.items()}
    return value


def hostile(path: Path) -> list[dict[str, Any]]:
    """A recorded stream with the phrase in every string, and the fields a hostile upstream adds:
    citations, a tool's name and server label, a failed response's error and incomplete reason."""
    events = [poisoned(copy.deepcopy(event)) for event in events_of(path)]
    for event in events:
        part = event.get("part")
        if isinstance(part, dict) and part.get("type") == "output_text":
            part["annotations"] = [{"type": "url_citation", "title": f"the {PHRASE}",
                                    "url": "https://example.com/launch%20codes", "start_index": 0, "end_index": 1}]
        item = event.get("item")
        if isinstance(item, dict) and item.get("type") not in ("message", "reasoning"):
            item.update(name=f"{PHRASE}_tool", server_label=f"{PHRASE} server")
    seq = max((e.get("sequence_number", 0) for e in events if isinstance(e.get("sequence_number"), int)), default=0)
    events.append({"type": "response.failed", "sequence_number": seq + 1, "response": {
        "id": "resp_x", "status": "failed", "output": [], "incomplete_details": {"reason": f"{PHRASE} reason"},
        "error": {"code": "server_error", "message": f"the {PHRASE} are 0000"}}})
    return events


def text_anywhere(value: Any, path: str = "") -> list[str]:
    """Where the phrase is in a view: the dotted paths of the fields holding it."""
    if isinstance(value, str):
        return [path] if PHRASE in value.lower() or "launch%20codes" in value else []
    if isinstance(value, list):
        return [p for v in value for p in text_anywhere(v, path)]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in text_anywhere(v, f"{path}.{k}" if path else k)]
    return []


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_behind_a_buffered_gate_the_phrase_shows_only_in_fields_proven_safe(path: Path) -> None:
    rules = RulesChecker([r"launch(\s|%20)codes"])
    transcript = Transcript()
    transcript.guard(SafetyGate("buffered"))
    change = transcript.feed(sse(hostile(path)), 0.0).change
    windows = change.windows + transcript.safety_close().windows
    while windows:
        window = windows.pop(0)
        categories, start = rules.matches(window.text, window.judged_context())
        windows += transcript.safety_verdict(window.id, bool(categories), start).change.windows
    transcript.end("failed")
    public = transcript.view.to_dict()
    assert unknown_fields(public) == []
    for block in public["blocks"]:
        for where in text_anywhere(block):
            assert where.split(".")[0] in schema.safe_fields(block["kind"]), f"{block['kind']}.{where} shows it"
    for where in text_anywhere(public["meta"]):
        assert where.split(".")[0] in schema.safe_fields(schema.META), f"meta.{where} shows it"
    assert any(text_anywhere(b) for b in transcript._inner.to_dict()["blocks"]), "the upstream said it everywhere"
    snapshot = transcript.snapshot()
    for item in snapshot["output"]:
        for part in item.get("content") or []:
            assert PHRASE not in str(part.get("text", "")) + str(part.get("annotations", ""))
        for field in ("name", "server_label", "arguments", "output"):
            assert PHRASE not in str(item.get(field, "")), field
    assert PHRASE not in str(snapshot.get("error")) and PHRASE not in str(snapshot.get("incomplete_details"))
    assert PHRASE not in transcript.final_text()
