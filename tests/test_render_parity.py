"""The server's renderers (markdown.py, relay_tags, _block.html) and the browser's (markdown.js,
render.js) give the same HTML for the same view, over every block kind and hostile Markdown; and
the browser's incremental MarkdownStream, fed in chunks of any size, gives the whole rendering.

Node runs the browser modules (tests/js/render_parity.mjs). Skipped without node, unless CI=true.
"""

from __future__ import annotations

import base64
import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.template.loader import render_to_string

from responses_app import markdown
from responses_app.simulator.texts import picture_png
from responses_app.templatetags.relay_tags import badge_key, group_blocks, vocabulary
from tests.node import node_or_skip

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "js" / "render_parity.mjs"
PNG = picture_png(random.Random(7), size=8)
PARTIAL_PNG = picture_png(random.Random(7), size=8, fill=0.5)

HOSTILE = [
    "<script>alert('x')</script> and <img src=x onerror=alert(1)>",
    "[click](javascript:alert(1)) [ok](https://example.org/a?b=1&c=2) [q](https://x.org/\"onmouseover=alert(1))",
    "**unbalanced bold and *em and `code and _under",
    "Entities: &amp; &lt;b&gt; &#x27; &quot; &copy; &#0; & < > \" '",
    "# Heading **bold** #\n\n## Two\n\n###### Six\n####### seven",
    "Para one\nline two\n\n- a\n- b *em*\n  continued\n+ c\n\n1. one\n2) two\n\n* star after number",
    "```python\nx = '<p>' & 1\n\n\ny = 2\n```\nafter the fence\n\n~~~\nunclosed ~~~ fence <b>\n\nstill code",
    "snake_case_word and 2*3*4 and **b** _e_ *e* __x__ ***both***",
    "Windows\r\nline ends\r\n\r\nand a lone\rcarriage return",
    "Nul \x00 bytes \x00 and `code with <tags>` and [**bold link**](https://example.com/x_y_z)",
    "Emoji 🦀 and CJK 漢字, RTL שלום, combining é\n\n\n\n\nmany blank lines",
    "- list\n\n\n- list again\n```\ncode right after\n```",
    "",
    "   \n\t\n",
]

BLOCKS: list[tuple[str, str, dict[str, Any], int | None]] = []


def case(name: str, blocks: list[dict[str, Any]], *, status: str = "completed", thought_s: int | None = None,
         meta: dict[str, Any] | None = None) -> None:
    BLOCKS.append((name, status, {"revision": 1, "meta": meta or {"status": status}, "blocks": blocks}, thought_s))


case("text with citations", [{"id": "m0-c0", "kind": "text", "item_id": "m0", "state": "done",
      "text": "Rivers **flow**.\n\n- one", "annotations": [
          {"type": "url_citation", "url": "https://example.org/rivers", "title": "Rivers <b>101</b>"},
          {"type": "url_citation", "url": "https://example.org/rivers", "title": "again"},
          {"type": "url_citation", "url": "javascript:alert(1)", "title": "evil"},
          {"type": "url_citation", "url": " https://example.org/padded ", "title": ""},
          {"type": "file_citation", "file_id": "file-1", "filename": "notes<1>.txt", "index": 3},
          {"type": "container_file_citation", "file_id": "cfile-2"},
          "not an object", ["nor", "this"]]}])
case("refusal", [{"id": "m0-r0", "kind": "refusal", "state": "done", "text": "I can't <help> & won't."}])
case("reasoning with summary parts", [
    {"id": "rs0", "kind": "reasoning", "tool": "reasoning", "item_id": "rs0", "state": "completed"},
    {"id": "rs0-s0", "kind": "reasoning", "item_id": "rs0", "state": "done", "text": "**Planning**\n\nFirst <this>."},
    {"id": "rs0-s1", "kind": "reasoning", "item_id": "rs0", "state": "done", "text": "Then _that_."},
    {"id": "m1-c0", "kind": "text", "item_id": "m1", "state": "done", "text": "Answer."},
    {"id": "rs2", "kind": "reasoning", "tool": "reasoning", "item_id": "rs2", "state": "completed"},
    {"id": "rs2-s0", "kind": "reasoning", "item_id": "rs2", "state": "done", "text": "Second item."},
], thought_s=4)
case("reasoning still thinking", [
    {"id": "rs0", "kind": "reasoning", "tool": "reasoning", "item_id": "rs0", "state": "in_progress"},
    {"id": "rs0-s0", "kind": "reasoning", "item_id": "rs0", "state": "streaming", "text": "Hmm"},
], status="streaming", meta={"status": "in_progress"})
case("reasoning part without its item", [
    {"id": "x-s0", "kind": "reasoning", "item_id": "x", "state": "done", "text": "orphan one"},
    {"id": "x-s1", "kind": "reasoning", "item_id": "x", "state": "done", "text": "orphan two"},
    {"id": "y", "kind": "reasoning", "tool": "reasoning", "item_id": "y", "state": "completed"},
])
case("web and file search", [
    {"id": "ws0", "kind": "tool", "tool": "web_search_call", "state": "searching", "query": "river <facts>"},
    {"id": "ws1", "kind": "tool", "tool": "web_search_call", "state": "completed", "query": ""},
    {"id": "fs0", "kind": "tool", "tool": "file_search_call", "state": "completed",
     "queries": ["a", "b & c", "d", "e"], "results": [{"file_id": "f1"}]},
], status="streaming", meta={"status": "in_progress"})
case("function and custom tool calls", [
    {"id": "fc0", "kind": "tool", "tool": "function_call", "state": "completed", "name": "get_weather",
     "arguments": '{"location":"Paris","units":["c","f"],"deep":{"a":null,"b":true,"n":3}}', "output": "22 C"},
    {"id": "fc1", "kind": "tool", "tool": "function_call", "state": "in_progress", "name": "half",
     "arguments": '{"location":"Pa'},
    {"id": "ct0", "kind": "tool", "tool": "custom_tool_call", "state": "completed", "name": "grep", "input": "a<b"},
], status="streaming", meta={})
case("code interpreter", [
    {"id": "ci0", "kind": "tool", "tool": "code_interpreter_call", "state": "interpreting",
     "text": "import math\nprint(math.pi < 4)", "outputs": [{"type": "logs", "logs": "True\n"}],
     "container_id": "cntr_1"},
    {"id": "ci1", "kind": "tool", "tool": "code_interpreter_call", "state": "completed", "text": "",
     "outputs": []},
])
case("image", [
    {"id": "ig0", "kind": "image", "tool": "image_generation_call", "state": "generating", "image_b64": PNG},
    {"id": "ig1", "kind": "image", "tool": "image_generation_call", "state": "completed", "result": PNG,
     "revised_prompt": "A sun"},
    {"id": "ig2", "kind": "image", "tool": "image_generation_call", "state": "completed",
     "result": "not base64 <script>"},
    {"id": "ig3", "kind": "image", "tool": "image_generation_call", "state": "in_progress"},
    # as the assembler leaves it: the last partial stays beside the final image
    {"id": "ig4", "kind": "image", "tool": "image_generation_call", "state": "completed", "image_b64": PARTIAL_PNG,
     "partial_index": 1, "result": PNG},
])
case("audio", [{"id": "audio", "kind": "audio", "state": "completed", "text": "Hello <there>"}])
case("shell and apply_patch", [
    {"id": "sh0", "kind": "tool", "tool": "shell_call", "state": "completed", "commands": ["ls -la", "echo '<x>'"],
     "output": [{"stdout": "a\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]},
    {"id": "sh1", "kind": "tool", "tool": "local_shell_call", "state": "in_progress", "action": {"command": ["pwd"]}},
    {"id": "ap0", "kind": "tool", "tool": "apply_patch_call", "state": "completed",
     "operation": {"type": "update_file", "path": "a.py", "diff": "@@ -1 +1 @@\n-x\n+y"}},
    {"id": "cu0", "kind": "tool", "tool": "computer_call", "state": "completed", "action": {"type": "click"}},
])
case("mcp", [
    {"id": "ml0", "kind": "tool", "tool": "mcp_list_tools", "state": "completed", "server_label": "deepwiki",
     "tools": [{"name": "ask"}]},
    {"id": "mc0", "kind": "tool", "tool": "mcp_call", "state": "completed", "server_label": "deepwiki", "name": "ask",
     "arguments": '{"q": "what?"}', "output": "an answer", "error": None},
    {"id": "mc1", "kind": "tool", "tool": "mcp_call", "state": "failed", "name": "ask", "error": "boom <b>"},
    {"id": "ma0", "kind": "tool", "tool": "mcp_approval_request", "state": "completed", "server_label": "deepwiki",
     "name": "ask", "arguments": '{"q": 1}'},
    {"id": "ma1", "kind": "tool", "tool": "mcp_approval_request", "state": "awaiting_approval", "item_id": "mcpr_<1>",
     "server_label": "dice", "name": "roll", "arguments": '{"expression": "2d4+1"}'},
    {"id": "ma2", "kind": "tool", "tool": "mcp_approval_request", "state": "denied", "item_id": "mcpr_2",
     "server_label": "dice", "name": "roll"},
    {"id": "cp0", "kind": "compaction", "tool": "compaction", "state": "compacting", "item_id": "cmp_1"},
])
case("a hosted tool running, no text yet", [
    {"id": "ci0", "kind": "tool", "tool": "code_interpreter_call", "state": "interpreting", "text": "print(1)"},
], status="streaming", meta={"status": "in_progress", "activity": "tool"})
case("waiting for an approval", [
    {"id": "ma3", "kind": "tool", "tool": "mcp_approval_request", "state": "awaiting_approval", "item_id": "mcpr_3",
     "name": "roll"},
], status="streaming", meta={"status": "waiting_for_approval", "activity": "approval"})
case("unknown tool kinds and states", [
    {"id": "u0", "kind": "tool", "tool": "brand_NEW_call", "state": "calling"},
    {"id": "u1", "kind": "tool", "state": "weird_state"},
    {"id": "u2", "kind": "tool", "tool": "function_call", "state": "done", "name": "f"},
], status="streaming", meta={})
case("hostile markdown", [{"id": f"h{i}", "kind": "text", "state": "done", "text": text}
                          for i, text in enumerate(HOSTILE)])
case("hostile reasoning", [{"id": "r", "kind": "reasoning", "tool": "reasoning", "item_id": "r", "state": "done"}]
     + [{"id": f"r-s{i}", "kind": "reasoning", "item_id": "r", "state": "done", "text": text}
        for i, text in enumerate(HOSTILE)])
case("safety notice", [
    {"id": "t", "kind": "text", "state": "done", "text": "What passed."},
    {"id": "safety-notice", "kind": "compaction", "tool": "content_filter", "state": "retracted", "block_id": "t"},
], status="incomplete", meta={"status": "incomplete", "incomplete_reason": "content_filter"})
case("errored request", [{"id": "t", "kind": "text", "state": "streaming", "text": "partial"}], status="error")


def server_entries(view: dict[str, Any], thought_s: int | None) -> list[str]:
    return [render_to_string("responses_app/_block.html", {"block": entry}).strip()
            for entry in group_blocks(view["blocks"], thought_s)]


def run_node(corpus: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    node = node_or_skip("render parity")
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps(corpus))
    done = subprocess.run([node, str(SCRIPT), str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    corpus = {
        "vocabulary": vocabulary(),
        "cases": [{"name": n, "status": s, "view": v, "thought_s": t} for n, s, v, t in BLOCKS],
        "texts": HOSTILE + [block["text"] for _, _, view, _ in BLOCKS for block in view["blocks"] if block.get("text")],
    }
    return {"corpus": corpus, "node": run_node(corpus, tmp_path_factory.mktemp("parity"))}


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=[name for name, *_ in BLOCKS])
def test_blocks_render_the_same_in_the_browser(rendered: dict[str, Any], index: int) -> None:
    name, status, view, thought_s = BLOCKS[index]
    browser = rendered["node"]["cases"][index]
    assert browser["name"] == name
    assert [entry.strip() for entry in browser["entries"]] == server_entries(view, thought_s)
    assert browser["badge"] == badge_key(status, view)


def test_markdown_renders_the_same_whole_and_streamed(rendered: dict[str, Any]) -> None:
    for text, browser in zip(rendered["corpus"]["texts"], rendered["node"]["texts"], strict=True):
        server = markdown.render_html(text)
        assert browser["whole"] == server, text
        for html in browser["streamed"]:
            assert html == server, text


def test_the_corpus_holds_every_kind_and_the_hostile_input_is_inert(rendered: dict[str, Any]) -> None:
    kinds = {b["kind"] for _, _, v, _ in BLOCKS for b in v["blocks"]}
    tools = {b.get("tool") for _, _, v, _ in BLOCKS for b in v["blocks"]}
    assert kinds == {"text", "refusal", "reasoning", "tool", "image", "audio", "compaction"}
    assert {"web_search_call", "file_search_call", "function_call", "custom_tool_call", "code_interpreter_call",
            "shell_call", "local_shell_call", "apply_patch_call", "mcp_call", "mcp_list_tools",
            "mcp_approval_request", "image_generation_call"} <= tools
    html = "".join(e for c in rendered["node"]["cases"] for e in c["entries"])
    assert "<script" not in html and 'href="javascript' not in html
    assert html.count("<img ") == html.count('<img src="data:image/png;base64,')  # only generated images
    assert html.count('<div class="approval"') == 2, "Approve/Deny only while an approval is awaited"
    assert 'data-approval-id="mcpr_&lt;1&gt;"' in html
    assert base64.b64decode(PNG).startswith(b"\x89PNG")
    (final,) = [e for c in rendered["node"]["cases"] for e in c["entries"] if 'data-block-id="ig4"' in e]
    assert PNG in final and PARTIAL_PNG not in final, "a finished image shows the final picture, not the last partial"


def test_the_badge_tells_a_working_tool_and_an_awaited_approval_from_silence() -> None:
    views = {name: (status, view) for name, status, view, _ in BLOCKS}
    assert badge_key(*views["a hosted tool running, no text yet"]) == "working"
    assert badge_key(*views["waiting for an approval"]) == "waiting_approval"



def with_notice(state: str) -> dict[str, Any]:
    return {"revision": 3, "meta": {}, "blocks": [
        {"id": "o0-c0", "kind": "text", "text": "Kept."},
        {"id": "safety-notice", "kind": "compaction", "tool": "content_filter", "state": state, "block_id": "o0-c0"}]}


NOTICES: list[tuple[dict[str, Any] | None, str, dict[str, Any] | None]] = [
    ({"code": "input_flagged", "message": "The safety policy flagged this message (illicit)."}, "", None),
    (None, "content_filter", None),
    ({"code": "server_error", "message": "Broke <b>here</b> & 'there'"}, "", None),
    ({"code": "", "message": ""}, "max_output_tokens", None),
    ({"code": "content_blocked", "message": "x"}, "content_filter", None),
    (None, "deadline", None),
    (None, "content_filter", with_notice("retracted")),  # progressive: the line says what the notice says
    (None, "content_filter", with_notice("withheld")),
    (None, "content_filter", with_notice("odd")),  # a state no sentence refines: the reason's own
    (None, "deadline", with_notice("retracted")),
]


def test_the_notice_under_an_answer_reads_the_same_in_the_browser(tmp_path: Path) -> None:
    from django.template import Context, Template

    template = Template("{% load relay_tags %}{% turn_notice error reason view %}")
    server = [template.render(Context({"error": e, "reason": r, "view": v})) for e, r, v in NOTICES]
    browser = run_node({"vocabulary": vocabulary(), "cases": [], "texts": [], "notices": NOTICES}, tmp_path)
    assert browser["notices"] == server
    assert server[0] == "<strong>Not sent</strong>: The safety policy flagged this message (illicit)."
    assert server[1] == "Part of this answer was withheld by the safety policy."
    assert "&lt;b&gt;" in server[2] and server[5] == "Stopped early: deadline"
    assert server[6] == "Part of this answer was retracted by the safety policy."
    assert server[7] == server[8] == server[1] and server[9] == server[5]


def test_the_add_op_places_a_block_where_the_python_reducer_does(tmp_path: Path) -> None:
    from responses_app.streaming.view import apply_op

    blocks = [{"id": "a", "kind": "text", "text": "A"}, {"id": "b", "kind": "tool", "tool": "function_call"}]
    notice = {"id": "safety-notice", "kind": "compaction", "tool": "content_filter", "state": "retracted"}
    adds = [(blocks, {**notice, "after": "a"}), (blocks, {**notice, "after": "b"}), (blocks, {**notice, "after": "zz"}),
            (blocks, notice), (blocks, {"id": "a", "text": "A2", "after": "b"})]
    browser = run_node({"vocabulary": vocabulary(), "cases": [], "texts": [], "adds": adds}, tmp_path)["adds"]
    for (start, added), placed in zip(adds, browser, strict=True):
        view = {"revision": 0, "meta": {}, "blocks": [dict(b) for b in start]}
        apply_op(view, ["add", added])
        assert placed == view["blocks"], added
    assert [b["id"] for b in browser[0]] == ["a", "safety-notice", "b"]
    assert all("after" not in b for placed in browser for b in placed)
