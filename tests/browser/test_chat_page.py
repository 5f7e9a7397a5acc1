"""The chat page as people use it, in Chromium at desktop (1280 px) and phone (390 px) widths:
following a growing answer, no horizontal scrolling, a turn started in one tab live in another,
the conversation's actions, and an honest display (reasoning, images, tool states, usage)."""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .conftest import ROOT, RelayServer
from .test_chat import answer_text, live_text, submit_first_prompt, turn, wait_completed, wait_for_text

pytestmark = pytest.mark.browser

WIDTHS = {"desktop": 1280, "phone": 390}
FAST = {"sim.tokens_per_s": "400", "sim.seed": "2"}


def sized(session: Any, width: int, height: int = 800) -> Page:
    page: Page = session.page()
    page.set_viewport_size({"width": width, "height": height})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.console_errors = errors  # type: ignore[attr-defined]
    return page


def squeeze(html: str) -> str:
    return re.sub(r">\s+<", "><", html).strip()


def no_console_errors(page: Page) -> None:
    assert page.console_errors == [], page.console_errors  # type: ignore[attr-defined]


def geometry(page: Page, request_id: str) -> dict[str, float]:
    return page.evaluate("""id => {
        const box = document.querySelector(`article.turn[data-request-id="${id}"] [data-blocks]`);
        const composer = document.getElementById("composer").getBoundingClientRect();
        const range = document.createRange();
        range.selectNodeContents(box);
        const rects = range.getClientRects();
        const last = rects.length ? rects[rects.length - 1] : box.getBoundingClientRect();
        const root = document.scrollingElement;
        return {textBottom: last.bottom, composerTop: composer.top, viewport: innerHeight,
                fromBottom: root.scrollHeight - root.scrollTop - root.clientHeight, scrollY: scrollY};
    }""", request_id)


def send_reply(page: Page, text: str, metadata: dict[str, str] | None = None, model: str = "sim-text") -> str:
    count = page.locator("article.turn").count()
    page.select_option("#composer select[name=model]", model)
    if metadata is not None:
        advanced = page.locator("#composer details.advanced")
        if advanced.get_attribute("open") is None:
            page.click("#composer details.advanced > summary")
        page.fill("#composer textarea[name=metadata]", json.dumps(metadata))
    page.fill("#composer textarea[name=input]", text)
    page.click("#composer button[type=submit]")
    expect(page.locator("article.turn")).to_have_count(count + 1)
    return str(page.locator("article.turn").last.get_attribute("data-request-id"))


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_the_page_follows_the_answer_and_offers_jump_to_latest(sessions: Any, width: int) -> None:
    page = sized(sessions("alice"), width, 700)
    first = submit_first_prompt(page, "Warm up", metadata=FAST)
    wait_completed(page, first)
    slow = {"sim.tokens_per_s": "60", "sim.seed": "5", "sim.tokens": "900"}
    request_id = send_reply(page, "A long answer, please", metadata=slow, model="sim-long")  # Advanced stays open
    for chars in (200, 500, 900):
        wait_for_text(page, request_id, chars)
        g = geometry(page, request_id)
        assert g["textBottom"] <= g["composerTop"] + 1, f"the newest text is under the composer: {g}"
        assert g["fromBottom"] <= 48, g
    page.mouse.move(width / 2, 200)
    page.mouse.wheel(0, -600)
    jump = page.get_by_role("button", name=re.compile("Jump to latest"))
    expect(jump).to_be_visible()
    held = geometry(page, request_id)["scrollY"]
    wait_for_text(page, request_id, len(answer_text(page, request_id)) + 150)
    assert abs(geometry(page, request_id)["scrollY"] - held) < 2, "scrolled up: the page must stay put"
    jump.click()
    expect(jump).to_be_hidden()
    wait_for_text(page, request_id, len(answer_text(page, request_id)) + 100)
    g = geometry(page, request_id)
    assert g["fromBottom"] <= 48 and g["textBottom"] <= g["composerTop"] + 1, g
    wait_completed(page, request_id, timeout=120_000)
    error_free = geometry(page, request_id)
    assert error_free["fromBottom"] <= 48
    page.reload()  # a conversation opens at its latest turn
    page.wait_for_function("() => document.querySelector('.relay.relay-js') !== null")
    g = geometry(page, request_id)
    assert g["fromBottom"] <= 48 and g["scrollY"] > 0, g
    no_console_errors(page)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_no_page_scrolls_sideways(sessions: Any, width: int) -> None:
    boss = sessions("boss")  # staff: the widest header
    page = sized(boss, width)
    code = "```\n" + "x" * 300 + "\n```\n\nhttps://example.org/" + "a" * 200 + " " + "y" * 150
    request_id = submit_first_prompt(page, code, metadata=FAST)
    wait_completed(page, request_id)
    page.click("#composer details.advanced > summary")
    for path in (page.url, "/", "/analytics/"):
        page.goto(path)
        sideways = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert sideways <= 0, f"{path} scrolls sideways by {sideways} px at {width} px"
        logout = page.get_by_role("button", name="Log out")
        box = logout.bounding_box()
        assert box is not None and box["x"] + box["width"] <= width, "Log out is off screen"
        header = page.locator("header.topbar").bounding_box()
        assert header is not None and header["height"] <= 64, f"the header wraps: {header}"
    page.goto("/accounts/login/")
    assert page.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    no_console_errors(page)


def test_a_turn_started_in_one_tab_streams_live_in_another(sessions: Any, relay_server: RelayServer) -> None:
    alice = sessions("alice")
    tab_a = sized(alice, 1280)
    first = submit_first_prompt(tab_a, "Start here", metadata=FAST)
    wait_completed(tab_a, first)
    tab_b = sized(alice, 390)
    tab_b.goto(tab_a.url)
    expect(tab_b.locator("article.turn")).to_have_count(1)
    tab_b.wait_for_function("() => document.querySelector('.relay.relay-js') !== null")
    tab_b.wait_for_timeout(300)  # let tab B's conversation socket connect (it also catches up if not)
    pace = {"sim.tokens_per_s": "60", "sim.seed": "9", "sim.tokens": "200"}
    second = send_reply(tab_a, "Started in tab A", metadata=pace)
    expect(tab_b.locator(f'article.turn[data-request-id="{second}"]')).to_have_count(1)
    wait_for_text(tab_b, second, 20)
    assert relay_server.request_row(second)["status"] == "streaming", "tab B saw it live, before the end"
    wait_completed(tab_a, second)
    wait_completed(tab_b, second)
    assert answer_text(tab_a, second) == answer_text(tab_b, second)
    assert live_text(tab_b, second) == answer_text(tab_b, second), "tab B followed the stream itself"
    live_html = tab_b.evaluate("id => window.relayChat.liveHtml.get(id)", second)
    server_html = turn(tab_b, second).locator("[data-blocks]").inner_html()
    assert squeeze(live_html) == squeeze(server_html), "the incremental DOM is the server's rendering"
    conversation = tab_a.url.split("/c/")[1].split("/")[0].replace("-", "")
    assert relay_server.query("SELECT COUNT(*) FROM responses_app_responserequest WHERE conversation_id = ?",
                              conversation)[0][0] == 2, "one logical request per prompt"
    no_console_errors(tab_a)
    no_console_errors(tab_b)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_rename_regenerate_edit_and_delete(sessions: Any, relay_server: RelayServer, width: int) -> None:
    alice = sessions("alice")
    page = sized(alice, width)
    first = submit_first_prompt(page, "Original prompt", metadata=FAST)
    wait_completed(page, first)
    chat_url = page.url.split("#")[0]
    other = sized(alice, 1280)
    other.goto(chat_url)
    other.wait_for_function("() => document.querySelector('.relay.relay-js') !== null")

    page.get_by_role("button", name="Rename").click()
    page.fill("#rename-title", "Renamed  by me ")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("h1[data-title]")).to_have_text("Renamed by me")
    expect(other.locator("h1[data-title]")).to_have_text("Renamed by me")  # live in the other tab
    expect(other.locator('[data-sidebar-item] a[aria-current="page"]')).to_have_text("Renamed by me")  # its sidebar too

    shown = first
    for attempt in (1, 2):  # twice: each press is a new logical request (a new version), not a resubmit
        turn(page, shown).get_by_role("button", name="Regenerate").click()
        expect(turn(page, shown)).to_have_count(0)  # the version replaces the turn in place
        expect(page.locator("article.turn")).to_have_count(1)
        shown = str(page.locator("article.turn").last.get_attribute("data-request-id"))
        wait_completed(page, shown)
        expect(turn(page, shown).locator(".msg-user .bubble")).to_have_text("Original prompt")
        expect(turn(page, shown).locator("[data-version-count]")).to_have_text(f"{1 + attempt}/{1 + attempt}")
    expect(other.locator("article.turn")).to_have_count(1)
    expect(turn(other, shown)).to_have_count(1)

    turn(page, shown).get_by_role("button", name="Edit").click()
    page.fill(f"#edit-{shown}", "Edited prompt")
    turn(page, shown).get_by_role("button", name="Send").click()
    expect(turn(page, shown)).to_have_count(0)
    expect(page.locator("article.turn")).to_have_count(1)
    edited = str(page.locator("article.turn").last.get_attribute("data-request-id"))
    wait_completed(page, edited)
    expect(turn(page, edited).locator(".msg-user .bubble")).to_have_text("Edited prompt")
    expect(turn(other, edited)).to_have_count(1)
    params = json.loads(relay_server.query("SELECT params FROM responses_app_responserequest WHERE id = ?",
                                           edited.replace("-", ""))[0][0])
    assert "previous_response_id" not in params, "an edit of the first prompt chains to nothing before it"

    page.locator(".conversation-actions").get_by_role("button", name="Delete").click()
    page.locator("dialog[data-delete-dialog]").get_by_role("button", name="Delete").click()  # the page's confirm
    page.wait_for_url(re.compile(r"/\?deleted="))  # where Undo is offered (tests/browser/test_sidebar.py)
    expect(page.locator(".conversations").get_by_text("Renamed by me")).to_have_count(0)
    other.wait_for_url(f"{relay_server.url}/")  # the other tab leaves the deleted conversation
    conversation = chat_url.split("/c/")[1].strip("/").replace("-", "")
    assert relay_server.query("SELECT deleted_at IS NOT NULL FROM responses_app_conversation WHERE id = ?",
                              conversation) == [(1,)]
    assert relay_server.query("SELECT COUNT(*) FROM responses_app_responserequest WHERE conversation_id = ?",
                              conversation) == [(4,)], "the audit rows stay, one per logical request"
    assert page.goto(chat_url).status == 404  # type: ignore[union-attr]
    no_console_errors(other)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_reasoning_images_tool_states_usage_and_times_read_honestly(sessions: Any, width: int) -> None:
    page = sized(sessions("bob"), width)
    thought = submit_first_prompt(page, "Think first", model="sim-reasoning", metadata=FAST)
    wait_completed(page, thought)
    reasoning = turn(page, thought).locator("details.block-reasoning")
    expect(reasoning).to_have_count(1)
    expect(reasoning.locator("summary")).to_have_text(re.compile(r"^Thought for \d+ s$"))
    assert reasoning.locator(".reasoning-part").count() >= 1
    expect(turn(page, thought).locator("[data-usage=output]")).to_be_visible()
    expect(turn(page, thought).locator("[data-usage=reasoning]")).to_be_visible()

    # The server rendering that replaces the live turn at the end is held back until the live image is marked.
    rendering = re.compile(r"/turns/[0-9a-f-]+/$")
    held: list[Any] = []
    fetched: set[str] = set()

    def hold_finished_rendering(route: Any) -> None:
        if route.request.method == "GET" and route.request.url in fetched:
            held.append(route)  # the second fetch of a turn: its rendering once finished (the first inserted it)
        else:
            fetched.add(route.request.url)
            route.continue_()

    page.route(rendering, hold_finished_rendering)
    image = send_reply(page, "Draw a sun", model="sim-image", metadata=FAST)
    wait_completed(page, image, rendered=False)  # its rendering is held
    img = turn(page, image).locator("figure.block-image img")
    expect(img).to_have_count(1)
    expect(img).to_be_visible()
    img.evaluate("i => { i.dataset.liveNode = '1'; }")
    deadline = time.monotonic() + 30
    while not held and time.monotonic() < deadline:
        page.wait_for_timeout(20)
    assert held, "the finished turn fetches its server rendering"
    for route in held:
        route.continue_()
    page.unroute(rendering)
    expect(turn(page, image)).to_have_attribute("data-finished", "1")
    # The decoded picture moved across into the server rendering instead of blinking out while a copy decodes.
    expect(img).to_have_attribute("data-live-node", "1")
    # Measured in one step in the page (a bounding box read across a re-render can find no box).
    natural, shown = img.evaluate("i => [i.naturalWidth, i.getBoundingClientRect().width]")
    assert natural == 256 and shown >= min(256, width - 80), (natural, shown)
    bottom = img.evaluate("""i => {
        const canvas = document.createElement("canvas");
        canvas.width = i.naturalWidth; canvas.height = i.naturalHeight;
        const g = canvas.getContext("2d");
        g.drawImage(i, 0, 0);
        return Array.from(g.getImageData(i.naturalWidth / 2, i.naturalHeight - 1, 1, 1).data.slice(0, 3));
    }""")
    assert bottom != [255, 255, 255], "the final picture (hills at the bottom), not a partial with blank lower rows"
    page.get_by_role("button", name="Enlarge image").click()
    expect(turn(page, image).locator("figure.block-image")).to_have_class(re.compile("zoomed"))
    page.get_by_role("button", name="Enlarge image").click()
    expect(turn(page, image).locator("figure.block-image")).not_to_have_class(re.compile("zoomed"))

    tools = send_reply(page, "Weather?", model="sim-function", metadata=FAST)
    wait_completed(page, tools)
    states = turn(page, tools).locator(".tool-state").all_inner_texts()
    assert states and set(states) == {"completed"}, states
    expect(turn(page, tools).locator(".stop")).to_have_count(0)

    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert icon and page.request.get(icon).status == 200
    page.goto("/")
    expect(page.locator(".conversations time").first).to_have_text("just now")
    expect(page.locator("[data-usage-total]")).to_contain_text("tokens used")
    no_console_errors(page)


def test_screenshots_of_desktop_and_phone(sessions: Any, relay_server: RelayServer) -> None:
    """docs/screenshot-desktop.png and docs/screenshot-phone.png with RELAY_SCREENSHOT=1 (otherwise
    into the test's temp dir): a finished answer with reasoning and a web search, one streaming."""
    page = sized(sessions("alice"), 1280, 900)
    first = submit_first_prompt(page, "How do rivers form?", model="sim-citations",
                                metadata={"sim.tokens_per_s": "0", "sim.seed": "3"})
    wait_completed(page, first)
    thought = send_reply(page, "Think it through", model="sim-reasoning", metadata={"sim.tokens_per_s": "0"})
    wait_completed(page, thought)
    send_reply(page, "And lakes?", model="sim-text", metadata={"sim.tokens_per_s": "20", "sim.tokens": "400"})
    page.click("#composer details.advanced > summary")  # fold Advanced again
    streaming = str(page.locator("article.turn").last.get_attribute("data-request-id"))
    wait_for_text(page, streaming, 200)
    folder = ROOT / "docs" if os.environ.get("RELAY_SCREENSHOT") == "1" else relay_server.db_path.parent
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / "screenshot-desktop.png"))
    phone = sized(sessions("alice"), 390, 844)
    phone.goto(page.url)
    wait_for_text(phone, streaming, 250)
    phone.screenshot(path=str(folder / "screenshot-phone.png"))
    for name in ("screenshot-desktop.png", "screenshot-phone.png"):
        assert (folder / name).stat().st_size > 10_000


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_the_error_of_a_failed_answer_ends_in_view(sessions: Any, width: int) -> None:
    page = sized(sessions("bob"), width, 640)
    first = submit_first_prompt(page, "Warm up", metadata=FAST)
    wait_completed(page, first)
    failed = send_reply(page, "This one fails", model="sim-failed", metadata=FAST)
    expect(turn(page, failed).locator("[data-badge]")).to_have_attribute("data-badge", "failed")
    error = turn(page, failed).locator("[data-error]")
    expect(error).to_be_visible()
    page.wait_for_function("id => document.querySelector(`article.turn[data-request-id=\"${id}\"]`)"
                           ".dataset.live === undefined", arg=failed)
    # The ended turn is swapped for the server's rendering, so the box is measured in one step, in
    # the page, until it holds (the page keeps following): its bottom above the composer's top.
    page.wait_for_function("""id => {
        const box = document.querySelector(`article.turn[data-request-id="${id}"] [data-error]`);
        const composer = document.getElementById("composer");
        if (!box || !composer) return false;
        const b = box.getBoundingClientRect(), c = composer.getBoundingClientRect();
        return b.height > 0 && b.bottom <= c.top + 1;
    }""", arg=failed, timeout=10_000)
    expect(turn(page, failed).locator(".stop")).to_have_count(0)
    no_console_errors(page)


def test_a_block_the_reader_opened_stays_open_when_the_turn_finishes(sessions: Any) -> None:
    page = sized(sessions("bob"), WIDTHS["desktop"])
    thought = submit_first_prompt(page, "Think it over", model="sim-reasoning",
                                  metadata={"sim.tokens_per_s": "20", "sim.seed": "4"})
    reasoning = turn(page, thought).locator("details.block-reasoning")
    expect(reasoning).to_have_count(1, timeout=20_000)
    reasoning.locator("summary").focus()
    page.keyboard.press("Enter")
    expect(reasoning).to_have_attribute("open", "")
    assert turn(page, thought).get_attribute("data-live") is not None, "opened while the answer streams"
    wait_completed(page, thought)
    expect(turn(page, thought)).to_have_attribute("data-finished", "1")
    expect(reasoning).to_have_attribute("open", "")  # the server rendering that replaced the live turn too
    # A keyboard reader keeps their place: the focus moved across into the server rendering.
    expect(reasoning.locator("summary")).to_be_focused()
    no_console_errors(page)


def test_an_answer_that_was_not_sent_says_so_and_can_be_given_again(sessions: Any) -> None:
    page = sized(sessions("bob"), WIDTHS["phone"])
    ask = submit_first_prompt(page, "Roll the dice", model="sim-mcp-approval", metadata=FAST)
    approve = turn(page, ask).locator(".approval button[data-approve=true]")
    expect(approve).to_be_visible(timeout=20_000)
    note = turn(page, ask).locator(".approval [role=alert]")
    approvals = re.compile(r"/approvals/")
    page.route(approvals, lambda route: route.abort())
    approve.click()
    expect(note).to_have_text("Your answer was not sent (no connection). Try again.")
    expect(approve).to_be_enabled()
    page.unroute(approvals)
    page.route(approvals, lambda route: route.fulfill(status=503, content_type="application/json",
                                                      body='{"error": "try later"}'))
    approve.click()
    expect(note).to_have_text("Your answer was not sent (503: try later). Try again.")
    page.unroute(approvals)
    approve.click()
    wait_completed(page, ask)
    assert "With your approval I rolled" in answer_text(page, ask)
    assert all("Failed to load resource" in error for error in page.console_errors), page.console_errors  # type: ignore[attr-defined]


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_an_approval_answered_from_a_second_tab_after_a_reload(sessions: Any, relay_server: RelayServer,
                                                               width: int) -> None:
    alice = sessions("alice")
    tab_a = sized(alice, width)
    ask = submit_first_prompt(tab_a, "Roll the dice", model="sim-mcp-approval", metadata=FAST)
    expect(turn(tab_a, ask).locator(".approval button[data-approve=true]")).to_be_visible(timeout=20_000)
    expect(turn(tab_a, ask).locator("[data-badge]")).to_have_attribute("data-badge", "waiting_approval")
    tab_b = sized(alice, width)
    tab_b.goto(tab_a.url)
    tab_b.reload()  # the question survives a reload: it is in the committed view
    approve = turn(tab_b, ask).locator(".approval button[data-approve=true]")
    expect(approve).to_be_visible()
    for tab in (tab_a, tab_b):  # no answer written yet: nothing to copy, live or drawn by the server
        expect(turn(tab, ask).locator("button[data-copy=answer]")).to_be_hidden()
    # Tab A's server rendering of the finished turn is held back: what it shows then is its live drawing.
    held: list[Any] = []
    rendering = re.compile(r"/turns/[0-9a-f-]+/$")
    tab_a.route(rendering,
                lambda route: held.append(route) if route.request.method == "GET" else route.continue_())
    approve.click()
    wait_completed(tab_a, ask, rendered=False)  # its rendering is held
    wait_completed(tab_b, ask)
    expect(turn(tab_b, ask)).to_have_attribute("data-finished", "1")
    deadline = time.monotonic() + 30
    while not held and time.monotonic() < deadline:
        tab_a.wait_for_timeout(20)
    assert held, "the finished turn fetches its server rendering"
    # Opened for the question, closed once it is answered: live in tab A as in tab B's server rendering.
    expect(turn(tab_a, ask).locator("details.block-tool[open]")).to_have_count(0)
    assert "With your approval I rolled" in answer_text(tab_a, ask)
    assert answer_text(tab_a, ask) == answer_text(tab_b, ask)
    expect(turn(tab_a, ask).locator("button[data-copy=answer]")).to_be_visible()  # shown as the text came
    for route in held:
        route.continue_()
    tab_a.unroute(rendering)
    expect(turn(tab_a, ask)).to_have_attribute("data-finished", "1")
    assert answer_text(tab_a, ask) == answer_text(tab_b, ask)
    for tab in (tab_a, tab_b):
        expect(turn(tab, ask).locator("button[data-copy=answer]")).to_be_visible()
    expect(turn(tab_a, ask).locator(".approval")).to_have_count(0)  # answered: no buttons in any tab
    no_console_errors(tab_a)
    no_console_errors(tab_b)
    [(approval_id, approved)] = relay_server.query(
        "SELECT approval_request_id, approve FROM responses_app_mcpapproval WHERE request_id = ?", ask.replace("-", ""))
    assert approved == 1
    second = tab_b.evaluate("""async ([id, approval]) => (await fetch(`/api/requests/${id}/approvals/${approval}`, {
        method: "POST", credentials: "same-origin", body: JSON.stringify({approve: false}),
        headers: {"Content-Type": "application/json",
                  "X-CSRFToken": document.querySelector("input[name=csrfmiddlewaretoken]").value}})).status""",
                            [ask, approval_id])
    assert second == 409, "a second answer is refused"
    assert relay_server.request_row(ask)["status"] == "completed"


def test_the_page_reads_protocol_2_patches_and_assembles_the_answer_from_them(sessions: Any) -> None:
    """The tab names protocol 2 on its socket, so the server sends it patch arrays (a tab naming
    none would follow by snapshots only); wire.js assembles exactly the server's rendering."""
    page = sized(sessions("alice"), 1280)
    sockets: list[dict[str, Any]] = []

    def opened(ws: Any) -> None:
        if "/ws/requests/" in ws.url:
            frames: list[str] = []
            ws.on("framereceived", lambda payload: frames.append(payload))
            sockets.append({"url": ws.url, "frames": frames})

    page.on("websocket", opened)
    request_id = submit_first_prompt(page, "Tell me about rivers",
                                     metadata={"sim.tokens_per_s": "150", "sim.tokens": "300", "sim.seed": "3"},
                                     model="sim-long")
    wait_completed(page, request_id)
    [socket] = [s for s in sockets if request_id in s["url"]]
    assert "v=2" in socket["url"]
    frames = [json.loads(f) for f in socket["frames"]]
    assert frames[0]["type"] == "snapshot" and frames[0]["protocol"] == 2
    arrays = [f for f in frames if isinstance(f, list)]
    assert len(arrays) >= 5, "the answer came as patches, not snapshots"
    assert live_text(page, request_id) == answer_text(page, request_id) != ""
    no_console_errors(page)
