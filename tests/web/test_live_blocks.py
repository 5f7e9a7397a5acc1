"""POST render/blocks (web/live_blocks.py) and the block templates (responses_app/blocks/): every
block kind drawn by the server alone, for the page's script, over a corpus of every kind; hostile
fields stay inert; a new kind falls back to the tool template; a code interpreter's logs read as
text and its files as links.

It answers only the page's session (a signed-in user, or the viewer of an open share link) with
its CSRF token, caps its body (413) and its rate (429), and takes deep nesting as a 400.
"""

from __future__ import annotations

import base64
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.template.loader import render_to_string
from django.test import Client
from django.urls import reverse

from responses_app import shares
from responses_app.blockwords import code_outputs, group_blocks
from responses_app.models import Conversation
from responses_app.simulator.texts import picture_png
from responses_app.templatetags.relay_tags import block_templates
from responses_app.web import live_blocks

pytestmark = pytest.mark.django_db

TEMPLATES = Path(__file__).resolve().parents[2] / "responses_app" / "templates" / "responses_app"
PNG = picture_png(random.Random(7), size=8)
PARTIAL_PNG = picture_png(random.Random(7), size=8, fill=0.5)
HOSTILE = "<script>alert('x')</script> [click](javascript:alert(1)) **b** `c <i>`"

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
                          for i, text in enumerate([HOSTILE, "plain"])])
case("hostile reasoning", [{"id": "r", "kind": "reasoning", "tool": "reasoning", "item_id": "r", "state": "done"}]
     + [{"id": f"r-s{i}", "kind": "reasoning", "item_id": "r", "state": "done", "text": text}
        for i, text in enumerate([HOSTILE, "plain"])])
case("safety notice", [
    {"id": "t", "kind": "text", "state": "done", "text": "What passed."},
    {"id": "safety-notice", "kind": "compaction", "tool": "content_filter", "state": "retracted", "block_id": "t"},
], status="incomplete", meta={"status": "incomplete", "incomplete_reason": "content_filter"})
case("errored request", [{"id": "t", "kind": "text", "state": "streaming", "text": "partial"}], status="error")


URL = reverse("responses_app:render-blocks")
SIGNED_IN: list[Client] = []


@pytest.fixture(autouse=True)
def signed_in(db: Any) -> Any:
    cache.clear()  # the rate windows (the tests' cache is the process's own)
    client = Client()
    client.force_login(get_user_model().objects.create_user("drawer"))
    SIGNED_IN[:] = [client]
    return client


def draw(blocks: list[dict[str, Any]], entries: list[str], **extra: Any) -> Any:
    return SIGNED_IN[0].post(URL, json.dumps({"blocks": blocks, "entries": entries, **extra}),
                             content_type="application/json")


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=[name for name, *_ in BLOCKS])
def test_every_entry_is_drawn_by_the_page_templates(index: int) -> None:
    _name, _status, view, thought_s = BLOCKS[index]
    blocks = view["blocks"]
    response = draw(blocks, [b["id"] for b in blocks], thought_s=thought_s)
    assert response.status_code == 200, response.content
    result = response.json()
    entries = group_blocks(json.loads(json.dumps(blocks)), thought_s)
    assert result["order"] == [str(e["id"]) for e in entries]
    for entry in entries:
        expected = render_to_string("responses_app/_block.html", {"block": entry, "live": True}).strip()
        assert result["entries"][str(entry["id"])] == expected


def test_the_corpus_holds_every_kind_and_the_hostile_input_is_inert() -> None:
    kinds = {b["kind"] for _, _, v, _ in BLOCKS for b in v["blocks"]}
    assert kinds == {"text", "refusal", "reasoning", "tool", "image", "audio", "compaction"}
    html = ""
    for _name, _status, view, thought_s in BLOCKS:
        html += "".join(draw(view["blocks"], [b["id"] for b in view["blocks"]], thought_s=thought_s)
                        .json()["entries"].values())
    assert "<script" not in html and 'href="javascript' not in html
    assert html.count("<img ") == html.count('<img src="data:image/png;base64,')  # only generated images
    assert html.count('<div class="approval"') == 2, "Approve/Deny only while an approval is awaited"
    assert 'data-approval-id="mcpr_&lt;1&gt;"' in html
    assert base64.b64decode(PNG).startswith(b"\x89PNG")
    (final,) = re.findall(r'<figure class="block block-image" data-block-id="ig4">.*?</figure>', html, re.S)
    assert PNG in final and PARTIAL_PNG not in final, "a finished image shows the final picture, not the last partial"
    assert 'data-field="result"' in final


def test_a_part_draws_its_item_and_markdown_boxes_come_empty_for_the_script() -> None:
    blocks: list[dict[str, Any]] = [
        {"id": "rs0", "kind": "reasoning", "tool": "reasoning", "item_id": "rs0", "state": "completed"},
        {"id": "rs0-s0", "kind": "reasoning", "item_id": "rs0", "state": "done", "text": ""},
        {"id": "m0", "kind": "text", "state": "streaming", "text": "", "annotations": [
            {"type": "url_citation", "url": "https://example.org/", "title": "Ex"}]}]
    result = draw(blocks, ["rs0-s0"], thought_s=3).json()
    assert result["order"] == ["rs0", "m0"] and list(result["entries"]) == ["rs0"]
    assert "<summary>Thought for 3 s</summary>" in result["entries"]["rs0"]
    assert '<div class="reasoning-part" data-block-id="rs0-s0">' in result["entries"]["rs0"]
    text = draw(blocks, ["m0"]).json()["entries"]["m0"]
    assert '<div class="md"></div>' in text and 'href="https://example.org/"' in text
    assert result["notice"] is None


def test_the_notice_under_the_answer_is_worded_by_the_server() -> None:
    notice = {"id": "safety-notice", "kind": "compaction", "tool": "content_filter", "state": "retracted"}
    result = draw([notice], [], meta={"error": None, "incomplete_reason": "content_filter"}).json()
    assert result["notice"] == "Part of this answer was retracted by the safety policy."
    result = draw([], [], meta={"error": {"code": "server_error", "message": "<b>x</b>"}}).json()
    assert result["notice"] == "<strong>server_error</strong>: &lt;b&gt;x&lt;/b&gt;"


@pytest.mark.parametrize("body", [
    "not json", "[]", json.dumps({"blocks": "x", "entries": []}), json.dumps({"blocks": [{"id": 1}], "entries": []}),
    json.dumps({"blocks": [], "entries": [1]}), json.dumps({"blocks": [], "entries": [], "thought_s": "3"}),
    json.dumps({"blocks": [{"id": str(i)} for i in range(5001)], "entries": []}),
])
def test_a_body_of_another_shape_is_refused(body: str, signed_in: Client) -> None:
    response = signed_in.post(URL, body, content_type="application/json")
    assert response.status_code == 400 and "error" in response.json()


EMPTY = json.dumps({"blocks": [], "entries": []})


def test_it_only_answers_posts_from_a_signed_in_page_with_its_csrf_token(signed_in: Client) -> None:
    assert signed_in.get(URL).status_code == 405
    for client in (Client(), Client(enforce_csrf_checks=True)):  # no session: refused before any work
        response = client.post(URL, EMPTY, content_type="application/json")
        assert response.status_code == 403, response.content
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(get_user_model().objects.create_user("strict"))
    assert strict.post(URL, EMPTY, content_type="application/json").status_code == 403, "no CSRF token"
    strict.get(reverse("responses_app:conversations"))  # a page: the CSRF cookie the script sends back
    token = strict.cookies["csrftoken"].value
    response = strict.post(URL, EMPTY, content_type="application/json", headers={"X-CSRFToken": token})
    assert response.status_code == 200 and response.json() == {"order": [], "entries": {}, "notice": None}


def test_a_shared_page_draws_through_its_link_while_the_link_is_open(settings: Any) -> None:
    settings.RELAY_SHARE_ANONYMOUS = True
    owner = get_user_model().objects.create_user("sharer")
    share = shares.share_create(conversation=Conversation.objects.create(owner=owner), user=owner, anonymous=True)
    viewer = Client(enforce_csrf_checks=True)  # no account
    page = viewer.get(reverse("responses_app:shared", kwargs={"token": share.token}))
    assert page.status_code == 200
    url = reverse("responses_app:shared-render-blocks", kwargs={"token": share.token})
    assert url.encode() in page.content, "the page's script is given the link's own address"
    headers = {"X-CSRFToken": viewer.cookies["csrftoken"].value}
    response = viewer.post(url, EMPTY, content_type="application/json", headers=headers)
    assert response.status_code == 200, response.content
    assert viewer.post(url, EMPTY, content_type="application/json").status_code == 403, "no CSRF token"
    assert viewer.post(URL, EMPTY, content_type="application/json", headers=headers).status_code == 403
    shares.share_revoke(share=share)
    assert viewer.post(url, EMPTY, content_type="application/json", headers=headers).status_code == 403
    bad = reverse("responses_app:shared-render-blocks", kwargs={"token": "nope"})
    assert viewer.post(bad, EMPTY, content_type="application/json", headers=headers).status_code == 403


def test_a_body_larger_than_a_page_sends_is_refused_with_413(signed_in: Client) -> None:
    text = "a" * live_blocks.MAX_BODY_BYTES
    response = draw([{"id": "t", "kind": "text", "state": "done", "text": text}], ["t"])
    assert response.status_code == 413
    assert response.json()["error"] == f"The body takes at most {live_blocks.MAX_BODY_BYTES} bytes."
    assert draw([{"id": "t", "kind": "text", "state": "done", "text": text[:400_000]}], ["t"]).status_code == 200


def test_drawing_too_often_is_refused_with_retry_after(signed_in: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_blocks, "RENDER_RATE", (3, 60))
    assert [draw([], []).status_code for _ in range(3)] == [200, 200, 200]
    refused = draw([], [])
    assert refused.status_code == 429 and refused.json()["code"] == "rate_limited"
    assert 1 <= int(refused["Retry-After"]) <= 60
    other = Client()
    other.force_login(get_user_model().objects.create_user("other"))
    assert other.post(URL, EMPTY, content_type="application/json").status_code == 200, "per user"


def test_deep_nesting_is_a_400_or_drawn_never_a_recursion_error() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    response = SIGNED_IN[0].post(URL, '{"blocks": ' + deep + ', "entries": []}', content_type="application/json")
    assert response.status_code == 400 and "nests too deep" in response.json()["error"]
    blocks = [{"id": "t", "kind": "text", "state": "done", "text": deep},
              {"id": "f", "kind": "tool", "tool": "function_call", "state": "completed", "name": "f",
               "arguments": deep, "output": "{" * 100_000}]
    response = draw(blocks, ["t", "f"])
    assert response.status_code == 200, response.content[:300]
    assert deep in response.json()["entries"]["f"]


def test_each_kind_has_one_template_and_a_new_kind_reads_as_a_tool() -> None:
    for kind in ("text", "refusal", "reasoning", "image", "audio", "tool"):
        assert block_templates({"kind": kind})[0] == f"responses_app/blocks/{kind}.html"
        assert (TEMPLATES / "blocks" / f"{kind}.html").exists()
    assert block_templates({"kind": "compaction", "tool": "content_filter"})[0] == "responses_app/blocks/notice.html"
    assert block_templates({"kind": "../../secret"}) == ["responses_app/blocks/tool.html"]
    html = draw([{"id": "n", "kind": "brand_new", "tool": "brand_new_call", "state": "calling"}], ["n"]).json()
    assert '<details class="block block-tool" data-block-id="n"' in html["entries"]["n"]


def test_the_app_templates_hold_one_element_per_line() -> None:
    for path in TEMPLATES.parent.rglob("*.html"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            opened = re.findall(r"<(?!/|!--)(?:div|p|li|ol|ul|form|section|details|summary|figure|article|"
                                r"button|label|select|option|textarea|table|tr|h[1-6])\b", line)
            assert len(opened) <= 1, f"{path.name}:{number}: {line.strip()}"


def test_a_code_interpreter_shows_logs_as_text_and_files_as_links() -> None:
    block = {"id": "ci", "kind": "tool", "tool": "code_interpreter_call", "state": "completed", "text": "print(1)",
             "outputs": [{"type": "logs", "logs": "1\n<b>"},
                         {"type": "image", "url": "data:image/png;base64," + PNG},
                         {"type": "image", "url": "https://files.example/chart.png"}]}
    assert [o["kind"] for o in code_outputs(block)] == ["logs", "file", "file"]
    html = draw([block], ["ci"]).json()["entries"]["ci"]
    assert "<pre>1\n&lt;b&gt;</pre>" in html and '"type"' not in html, "logs as text, not a JSON array"
    assert f'href="data:image/png;base64,{PNG}" download="output-2.png"' in html
    assert 'href="https://files.example/chart.png" download="output-3.png"' in html
    odd = dict(block, outputs=[{"type": "image", "url": "javascript:alert(1)"}])
    assert code_outputs(odd) == [] and "javascript:alert" not in draw([odd], ["ci"]).json()["entries"]["ci"] \
        or "&quot;javascript:alert(1)&quot;" in draw([odd], ["ci"]).json()["entries"]["ci"]


SESSION = """
import json
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
user = get_user_model().objects.create_user("attacker")
s = SessionStore()
s["_auth_user_id"] = str(user.pk)
s["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
s["_auth_user_hash"] = user.get_session_auth_hash()
s.create()
print("SETUP " + json.dumps({"session": s.session_key}))
"""
HEALTH_BOUND_S = 2.0  # the stall this guards against held the loop 6.2 s; CI runs three lanes on two cores


def hostile_bodies() -> list[bytes]:
    """The body from the report, then the costliest cases at half the cap, each a block still being written."""
    report = {"blocks": [{"id": "t", "kind": "text", "text": "**a " * 8000, "state": "done"}], "entries": ["t"]}
    bodies = [json.dumps(report).encode()]
    for unit in ("**a ", "*", "_a ", "# a" + " " * 1000, "[" * 1000 + "]" * 1000):
        text = (unit * (256_000 // len(unit)))[:256_000]
        bodies.append(json.dumps({"blocks": [{"id": "t", "kind": "text", "text": text, "state": "streaming"}],
                                  "entries": ["t"]}).encode())
    return bodies


@pytest.mark.timeout(240)
def test_hostile_markdown_through_the_real_server_never_stalls_it(tmp_path: Path) -> None:
    import threading
    import time

    import httpx

    from tests.servers import served

    with served(tmp_path, SESSION) as server:
        url = server["url"] + URL
        bodies = hostile_bodies()
        json_type = {"Content-Type": "application/json"}
        started = time.perf_counter()
        refused = httpx.post(url, content=bodies[0], headers=json_type, timeout=30)
        assert refused.status_code == 403 and time.perf_counter() - started < 1, "refused before any work"
        token = "a" * 32
        signed = httpx.Client(cookies={"sessionid": server["users"]["session"], "csrftoken": token},
                              headers={**json_type, "X-CSRFToken": token}, timeout=60)
        statuses: list[int] = []
        attacking = threading.Event()

        def attack() -> None:
            attacking.set()
            for body in bodies * 2:
                statuses.append(signed.post(url, content=body).status_code)

        attacker = threading.Thread(target=attack)
        attacker.start()
        attacking.wait()
        waits: list[float] = []
        with httpx.Client(timeout=10) as probe:
            while attacker.is_alive():
                asked = time.perf_counter()
                assert probe.get(server["url"] + "/healthz").status_code == 200
                waits.append(time.perf_counter() - asked)
                time.sleep(0.02)
        attacker.join()
        signed.close()
        assert statuses == [200] * len(bodies) * 2
        assert len(waits) >= 5, "the attack ended before the probe could measure it"
        assert max(waits) < HEALTH_BOUND_S, sorted(waits)[-5:]
