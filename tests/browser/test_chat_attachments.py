"""Attachments on the chat page, in Chromium at desktop and phone widths: picked (the file picker,
on the first prompt's plain form post), pasted (a synthetic ClipboardEvent with a DataTransfer) and
dropped (a synthetic drop) into the composer, removed from their chips before sending; shown as a
thumbnail or a file chip after the send and after a reload, and described by the simulator (the
round trip). A refused file keeps everything typed and attached. A server of its own: its files go
to a temp folder (DJANGO_MEDIA_ROOT)."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.app.test_attachments import EXE, PDF, png

from .axe import assert_accessible
from .conftest import RelayServer, open_sessions, serve
from .test_chat import submit_first_prompt, turn, wait_completed
from .test_chat_page import FAST, WIDTHS, no_console_errors, sized

pytestmark = pytest.mark.browser

PNG = png(3, 2)
PHOTO = png(40, 30)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayServer]:
    tmp = tmp_path_factory.mktemp("relay-attachments")
    with serve(tmp, DJANGO_MEDIA_ROOT=str(tmp / "media")) as running:
        yield running


@pytest.fixture
def people(browser: Any, server: RelayServer) -> Iterator[Any]:
    yield from open_sessions(browser, server)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# Files made in the page: [name, mime, base64] each.
MAKE_FILES = """files => files.map(([name, type, data]) =>
    new File([Uint8Array.from(atob(data), c => c.charCodeAt(0))], name, {type}))"""


def paste(page: Page, *files: tuple[str, str, bytes]) -> None:
    page.evaluate(f"""files => {{
        const transfer = new DataTransfer();
        for (const file of ({MAKE_FILES})(files)) transfer.items.add(file);
        const box = document.getElementById("composer-input");
        box.focus();
        box.dispatchEvent(new ClipboardEvent("paste", {{clipboardData: transfer, bubbles: true, cancelable: true}}));
    }}""", [[name, mime, b64(data)] for name, mime, data in files])


def drop(page: Page, *files: tuple[str, str, bytes]) -> None:
    page.evaluate(f"""files => {{
        const transfer = new DataTransfer();
        for (const file of ({MAKE_FILES})(files)) transfer.items.add(file);
        const composer = document.getElementById("composer");
        for (const type of ["dragenter", "dragover", "drop"]) {{
            composer.dispatchEvent(new DragEvent(type, {{dataTransfer: transfer, bubbles: true, cancelable: true}}));
        }}
    }}""", [[name, mime, b64(data)] for name, mime, data in files])


def chips(page: Page) -> list[str]:
    return page.locator("#composer [data-chips] .chip-name").all_inner_texts()


def thumbnails_loaded(page: Page, request_id: str) -> list[list[Any]]:
    """Each image of the turn: [alt, its decoded width] once the server's bytes have loaded."""
    image = turn(page, request_id).locator(".attachment-image img").first
    expect(image).to_be_visible()
    page.wait_for_function("""id => [...document.querySelectorAll(`#turn-${id} .attachment-image img`)]
        .every(img => img.complete && img.naturalWidth > 0)""", arg=request_id)
    return page.evaluate("""id => [...document.querySelectorAll(`#turn-${id} .attachment-image img`)]
        .map(img => [img.alt, img.naturalWidth])""", request_id)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_pick_paste_drop_remove_send_and_reload(people: Any, width: int, tmp_path: Path) -> None:
    page = sized(people("alice"), width)
    # The picker, on the first prompt: a plain form post (multipart) that carries what was picked.
    page.goto("/")
    picked = tmp_path / "photo.png"
    picked.write_bytes(PHOTO)
    expect(page.get_by_role("button", name="Attach")).to_be_visible()
    page.set_input_files("#composer-files", str(picked))
    assert chips(page) == ["photo.png"]
    page.fill("#composer-input", "Describe my photo")
    page.click("#composer details.advanced > summary")
    page.fill("#composer textarea[name=metadata]", json.dumps(FAST))
    page.click("#composer button[type=submit]")
    page.wait_for_url(re.compile(r"/c/[0-9a-f-]+/"))
    first = str(page.locator("article.turn").last.get_attribute("data-request-id"))
    wait_completed(page, first)
    assert thumbnails_loaded(page, first) == [["photo.png", 40]]
    expect(turn(page, first).locator("[data-blocks]")).to_contain_text("I see an image 40×30 (PNG).")

    # Paste an image, drop a PDF and a note, remove the note: two chips go with the reply (fetch).
    paste(page, ("pasted.png", "image/png", PNG))
    drop(page, ("report.pdf", "application/pdf", PDF), ("note.txt", "text/plain", b"a note"))
    assert chips(page) == ["pasted.png", "report.pdf", "note.txt"]
    expect(page.locator("#composer .chip img")).to_have_count(1)  # the pasted image's thumbnail
    page.get_by_role("button", name="Remove note.txt").click()
    assert chips(page) == ["pasted.png", "report.pdf"]
    expect(page.get_by_role("button", name="Remove report.pdf")).to_be_focused()
    assert_accessible(page, "#composer")
    page.fill("#composer-input", "And these?")
    page.click("#composer button[type=submit]")
    expect(page.locator("article.turn")).to_have_count(2)
    reply = str(page.locator("article.turn").last.get_attribute("data-request-id"))
    expect(page.locator("#composer [data-chips]")).to_be_hidden()  # sent: the chips are gone
    wait_completed(page, reply)
    answer = turn(page, reply).locator("[data-blocks]")
    expect(answer).to_contain_text("I see an image 3×2 (PNG).")
    expect(answer).to_contain_text(f"I see a file “report.pdf”, {len(PDF)} bytes.")
    file_chip = turn(page, reply).locator(".attachment-file a")
    expect(file_chip).to_contain_text("report.pdf")
    assert file_chip.get_attribute("download") == "report.pdf"
    assert thumbnails_loaded(page, reply) == [["pasted.png", 3]]

    page.reload()
    page.wait_for_function("() => document.querySelector('.relay.relay-js') !== null")
    assert thumbnails_loaded(page, first) == [["photo.png", 40]]
    assert thumbnails_loaded(page, reply) == [["pasted.png", 3]]
    expect(turn(page, reply).locator(".attachment-file")).to_have_count(1)
    sideways = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert sideways <= 0
    assert_accessible(page)
    no_console_errors(page)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_a_refused_file_keeps_what_was_typed_and_attached(people: Any, width: int) -> None:
    page = sized(people("bob"), width)
    first = submit_first_prompt(page, "Hello", metadata=FAST)
    wait_completed(page, first)
    # Too large for the page's own check: never added, with words that say what to do.
    page.evaluate("""() => {
        const transfer = new DataTransfer();
        transfer.items.add(new File([new Uint8Array(9 * 1024 * 1024)], "huge.png", {type: "image/png"}));
        document.getElementById("composer").dispatchEvent(
            new DragEvent("drop", {dataTransfer: transfer, bubbles: true, cancelable: true}));
    }""")
    errors = page.locator("#composer-errors")
    expect(errors).to_contain_text("“huge.png” is 9 MB; an attachment can be at most 8 MB. Choose a smaller file.")
    assert chips(page) == []
    # A program named as a picture: the server tells it by its bytes; the text and the chip stay.
    paste(page, ("cat.png", "image/png", EXE))
    expect(errors).to_be_hidden()  # a change of the files clears what was said about them
    page.fill("#composer-input", "Look at my cat")
    page.click("#composer button[type=submit]")
    expect(errors).to_contain_text("“cat.png” is not a kind of file this chat takes")
    expect(page.locator("#composer-input")).to_have_value("Look at my cat")
    assert chips(page) == ["cat.png"]
    expect(page.locator("article.turn")).to_have_count(1)
    assert_accessible(page, "#composer")
    others = [e for e in page.console_errors if "status of 400" not in e]  # type: ignore[attr-defined]
    assert others == [], "the refusal's own 400 is the only error"
