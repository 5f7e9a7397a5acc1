"""The chat page in Chromium against the real server: streaming, tabs, reloads, closed tabs, access."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .conftest import ROOT, RelayServer

pytestmark = pytest.mark.browser

PACE = {"sim.tokens_per_s": "60", "sim.seed": "1"}


def submit_first_prompt(page: Page, text: str, model: str = "sim-text", metadata: dict[str, str] | None = None
                        ) -> str:
    """From the conversation list (a plain POST, then the redirect); returns the new request id."""
    page.goto("/")
    page.fill("textarea[name=input]", text)
    page.select_option("select[name=model]", model)
    page.click("details.advanced > summary")
    page.fill("textarea[name=metadata]", json.dumps(metadata or PACE))
    page.click("#composer button[type=submit]")
    page.wait_for_url(re.compile(r"/c/[0-9a-f-]+/"))
    turn = page.locator("article.turn").last
    return str(turn.get_attribute("data-request-id"))


def turn(page: Page, request_id: str) -> Any:
    return page.locator(f'article.turn[data-request-id="{request_id}"]')


def answer_text(page: Page, request_id: str) -> str:
    return str(turn(page, request_id).locator("[data-blocks]").inner_text())


def wait_for_text(page: Page, request_id: str, min_chars: int = 1) -> None:
    page.wait_for_function(
        """([id, n]) => {
            const box = document.querySelector(`article.turn[data-request-id="${id}"] [data-blocks]`);
            return box && box.innerText.trim().length >= n;
        }""", arg=[request_id, min_chars])


def wait_completed(page: Page, request_id: str, timeout: float = 60_000, *, rendered: bool = True) -> None:
    """The turn completed and is no longer live; `rendered`: and a followed turn's server rendering
    is swapped in (data-finished "0" until then), so a click after this lands on the lasting markup."""
    expect(turn(page, request_id).locator("[data-badge]")).to_have_attribute("data-badge", "completed",
                                                                            timeout=timeout)
    page.wait_for_function(
        """([id, rendered]) => {
            const t = document.querySelector(`article.turn[data-request-id="${id}"]`);
            return t.dataset.live === undefined && !(rendered && t.dataset.finished === "0");
        }""", arg=[request_id, rendered], timeout=timeout)


def live_text(page: Page, request_id: str) -> str:
    """What this tab's own reducer and Markdown renderer assembled, before the server rendering."""
    return str(page.evaluate("id => window.relayChat.liveTexts.get(id) || ''", request_id))


def server_text(page: Page, request_id: str) -> str:
    """The answer as the server renders it now, read in a static copy without JavaScript."""
    response = page.request.get(page.url.split("#")[0])
    static = page.context.new_page()
    try:
        static.set_content(response.text().replace('<script type="module"', '<script type="text/plain"'))
        return str(static.locator(f'article.turn[data-request-id="{request_id}"] [data-blocks]').inner_text())
    finally:
        static.close()


def wait_until(predicate: Any, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_prompt_streams_to_completion(sessions: Any, relay_server: RelayServer) -> None:
    alice = sessions("alice")
    page = alice.page()
    request_id = submit_first_prompt(page, "Tell me about rivers")
    badge = turn(page, request_id).locator("[data-badge]")
    wait_for_text(page, request_id, 20)
    assert badge.get_attribute("data-badge") in ("in_progress", "completed")
    wait_completed(page, request_id)
    row = relay_server.request_row(request_id)
    assert row["status"] == "completed" and row["final_text"]
    final = answer_text(page, request_id)
    assert final.strip()
    assert live_text(page, request_id) == final, "the live reducer and Markdown match the server rendering"
    assert final == server_text(page, request_id)
    expect(turn(page, request_id).locator(".stop")).to_have_count(0)

    # a follow-up through fetch + websocket, without a reload
    url_before = page.url
    page.fill("textarea[name=input]", "And **more**, please")
    page.keyboard.press("Enter")
    expect(page.locator("article.turn")).to_have_count(2)
    second = str(page.locator("article.turn").last.get_attribute("data-request-id"))
    wait_completed(page, second)
    assert page.url.split("#")[0] == url_before.split("#")[0], "no reload"
    assert page.url.endswith(f"#turn-{second}"), "the address names the newest turn, so a reload opens there"
    assert relay_server.request_row(second)["status"] == "completed"
    assert live_text(page, second) == answer_text(page, second)


def test_a_second_tab_opened_mid_stream_ends_with_identical_text(sessions: Any, relay_server: RelayServer) -> None:
    alice = sessions("alice")
    first = alice.page()
    request_id = submit_first_prompt(first, "Two tabs", metadata={**PACE, "sim.tokens": "200"})
    wait_for_text(first, request_id, 10)
    second = alice.page()
    second.goto(first.url)
    assert relay_server.request_row(request_id)["status"] == "streaming", "the second tab joined mid-stream"
    wait_completed(first, request_id)
    wait_completed(second, request_id)
    assert answer_text(first, request_id) == answer_text(second, request_id)
    assert live_text(first, request_id) == live_text(second, request_id) == answer_text(first, request_id)


def test_a_reload_mid_stream_shows_committed_text_at_once(sessions: Any, relay_server: RelayServer) -> None:
    alice = sessions("alice")
    page = alice.page()
    request_id = submit_first_prompt(page, "Reload me", metadata={**PACE, "sim.tokens": "260"})
    wait_for_text(page, request_id, 150)  # well past the first interval checkpoint
    response = page.reload()
    assert response is not None
    html = response.text()
    assert relay_server.request_row(request_id)["status"] == "streaming", "reloaded mid-stream"
    block = re.search(rf'data-request-id="{request_id}".*?<div class="md">(.*?)</div>', html, re.S)
    assert block and re.sub(r"<[^>]+>", "", block.group(1)).strip(), "committed text is in the server HTML"
    committed = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", block.group(1))).strip()
    wait_completed(page, request_id)
    final = answer_text(page, request_id)
    assert re.sub(r"\s+", " ", final).startswith(committed[:40])
    assert live_text(page, request_id) == final, "no duplicated fragment after the reload"
    assert final == server_text(page, request_id)
    row = relay_server.request_row(request_id)
    assert row["reconnects"] >= 1 and row["viewer_connections"] >= 2


def test_tabs_closed_mid_stream_find_the_completed_response_later(sessions: Any, relay_server: RelayServer) -> None:
    alice = sessions("alice")
    page = alice.page()
    request_id = submit_first_prompt(page, "Close the tab", metadata={**PACE, "sim.tokens": "150"})
    wait_for_text(page, request_id, 10)
    url = page.url
    page.close()  # every tab of this request is gone; the runner keeps going
    wait_until(lambda: relay_server.request_row(request_id)["status"] == "completed", what="the runner to finish")
    reopened = alice.page()
    response = reopened.goto(url)
    assert response is not None
    html = response.text()
    assert f'id="turn-{request_id}"' in html and 'data-badge="completed"' in html
    final = relay_server.request_row(request_id)["final_text"]
    assert final.split()[0] in answer_text(reopened, request_id)
    expect(turn(reopened, request_id).locator("[data-badge]")).to_have_attribute("data-badge", "completed")


def test_another_user_cannot_view_it(sessions: Any, relay_server: RelayServer) -> None:
    alice = sessions("alice")
    page = alice.page()
    request_id = submit_first_prompt(page, "Private question", metadata={**PACE, "sim.tokens": "40"})
    url = page.url
    bob = sessions("bob").page()
    response = bob.goto(url)
    assert response is not None and response.status == 404
    result = bob.evaluate(
        """id => new Promise(resolve => {
            let opened = false;
            const ws = new WebSocket(`ws://${location.host}/ws/requests/${id}/`);
            ws.onopen = () => { opened = true; };
            ws.onclose = event => resolve({opened, code: event.code});
        })""", request_id)
    # The consumer accepts, then closes with 4403, so the browser sees the code itself.
    assert result["code"] == 4403
    api = bob.request.get(f"/api/requests/{request_id}")
    assert api.status == 404
    wait_completed(page, request_id)


def test_analytics_counts_one_request_across_tabs_reloads_and_resubmits(
        sessions: Any, relay_server: RelayServer) -> None:
    boss = sessions("boss").page()

    def stat(name: str) -> int:
        boss.goto("/analytics/?days=7")
        return int(boss.locator(f'[data-stat="{name}"]').inner_text())

    before = {name: stat(name) for name in ("requests", "connections", "reconnects")}
    alice = sessions("alice")
    page = alice.page()
    # Ten seconds of answer: the second tab and the reload open their sockets while it runs (a
    # finished turn opens none), on a loaded machine too.
    request_id = submit_first_prompt(page, "Count me once", metadata={**PACE, "sim.tokens": "600"})
    key = page.evaluate("() => document.querySelector('input[name=client_request_id]').value")
    wait_for_text(page, request_id, 5)
    other = alice.page()
    other.goto(page.url)  # a second tab
    page.reload()  # a reload
    # a resubmit with the key of the form that created it: the same logical request
    conversation = str(page.locator(".chat").get_attribute("data-conversation"))
    token = page.evaluate("() => document.querySelector('input[name=csrfmiddlewaretoken]').value")
    first_key = relay_server.query("SELECT client_request_id FROM responses_app_responserequest WHERE id = ?",
                                   request_id.replace("-", ""))[0][0]
    assert first_key != key, "the chat page rendered a fresh key for the next prompt"
    again = page.request.post("/api/requests", headers={"X-CSRFToken": token}, data={
        "input": "Count me once", "model": "sim-text", "conversation": conversation,
        "client_request_id": first_key})
    assert again.status == 200 and again.json()["id"] == request_id
    wait_completed(page, request_id)
    wait_completed(other, request_id)

    after = {name: stat(name) for name in ("requests", "connections", "reconnects")}
    assert after["requests"] - before["requests"] == 1
    row = relay_server.request_row(request_id)
    assert after["connections"] - before["connections"] >= row["viewer_connections"] >= 3
    assert after["reconnects"] - before["reconnects"] >= row["reconnects"] >= 1


def test_screenshot_of_the_chat_page(sessions: Any, relay_server: RelayServer) -> None:
    """docs/screenshot-chat.png (with RELAY_SCREENSHOT=1; otherwise into the test's temp dir)."""
    alice = sessions("alice")
    page = alice.page()
    first = submit_first_prompt(page, "How does the relay keep a stream safe?", model="sim-citations",
                                metadata={"sim.tokens_per_s": "0", "sim.seed": "3"})
    wait_completed(page, first)
    page.fill("textarea[name=input]", "Explain resuming in a few paragraphs")
    page.select_option("select[name=model]", "sim-text")
    page.click("details.advanced > summary")
    page.fill("textarea[name=metadata]", json.dumps({"sim.tokens_per_s": "25", "sim.seed": "4", "sim.tokens": "400"}))
    page.click("details.advanced > summary")  # fold Advanced again
    page.click("#composer button[type=submit]")
    expect(page.locator("article.turn")).to_have_count(2)
    second = str(page.locator("article.turn").last.get_attribute("data-request-id"))
    wait_for_text(page, second, 420)
    expect(turn(page, second).locator("[data-badge]")).to_have_attribute("data-badge", "in_progress")
    target = ROOT / "docs" / "screenshot-chat.png" if os.environ.get("RELAY_SCREENSHOT") == "1" else (
        Path(str(relay_server.db_path.parent)) / "screenshot-chat.png")
    target.parent.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1100, "height": 1280})
    page.evaluate("() => window.scrollTo(0, 0)")
    page.screenshot(path=str(target))
    assert target.stat().st_size > 10_000
    turn(page, second).locator(".stop").click()  # and Stop works
    expect(turn(page, second).locator("[data-badge]")).to_have_attribute("data-badge", "cancelled")
    expect(turn(page, second)).to_have_attribute("data-finished", "1")
    expect(turn(page, second)).to_be_focused()  # the button went away under the focus: its answer has it
    wait_until(lambda: relay_server.request_row(second)["status"] == "cancelled", what="the cancel")


def test_a_dropped_socket_shows_reconnecting_and_resumes(sessions: Any, relay_server: RelayServer) -> None:
    alice = sessions("alice")
    page = alice.page()
    request_id = submit_first_prompt(page, "Drop my socket", metadata={**PACE, "sim.tokens": "400"})
    wait_for_text(page, request_id, 10)
    conn = turn(page, request_id).locator("[data-conn]")
    expect(conn).to_have_text("Live")
    page.evaluate("""() => {
        window.conn_seen = [];
        const conn = document.querySelector("[data-conn]");
        new MutationObserver(() => window.conn_seen.push(conn.textContent)).observe(conn, {childList: true});
    }""")
    page.evaluate("id => window.relayChat.followers.get(id).ws.close()", request_id)  # as if the network dropped it
    page.wait_for_function("() => window.conn_seen.at(-1) === 'Live'")  # back, with ?reconnect=1
    assert page.evaluate("() => window.conn_seen") == ["Reconnecting…", "Live"]
    # The reconnect says what the tab shows, and a snapshot older than that is never applied.
    assert "&reconnect=1&revision=" in page.evaluate("id => window.relayChat.followers.get(id).url()", request_id)
    assert page.evaluate("""id => {
        const follower = window.relayChat.followers.get(id), held = follower.revision, view = follower.view;
        follower.handle({type: "snapshot", revision: held - 1, view: {revision: held - 1, meta: {}, blocks: []}});
        return follower.revision === held && follower.view === view;
    }""", request_id)
    wait_completed(page, request_id)
    assert live_text(page, request_id) == answer_text(page, request_id)
    assert relay_server.request_row(request_id)["reconnects"] >= 1
