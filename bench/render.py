"""The chat page's render cost per frame as an answer grows, in real Chromium (Playwright).

One growing Markdown answer (paragraphs, lists, bold, code fences, links, tables, quotes, task
lists, math) is streamed into a turn, 64 characters per animation frame, up to 1k, 10k and 100k
characters, through the page's own modules. Two ways of rendering are timed on the same text:

- `incremental`: what the page does (turnview.js): final paragraphs are parsed once, only the
  live tail is re-rendered per frame, its math typeset (math.js, temml loaded first);
- `full`: the old way, re-parsing the whole block's Markdown and replacing it every frame.

Per frame we record the script time (the render call, `performance.now()`) and the script time
plus the style and layout it forces (reading `offsetHeight` right after); Chromium's long-task
observer counts tasks over 50 ms. Statistics are over the last fifth of the frames of each size,
where the answer is at its longest. Each run checks that the incremental DOM ends identical to
a whole rendering.

    python -m bench render [--quick]     # prints the table; without --quick writes bench/results/render.md
    python -m bench render --sizes=100000 --modes=incremental   # one cell, printed only
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.harness import keep_notes

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "responses_app" / "static"
RESULTS = Path(__file__).resolve().parent / "results" / "render.md"
CHROMIUM = "/usr/bin/chromium"
SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (1_000, 10_000)
DELTA = 64
MODES = ("incremental", "full")

PAGE = """<!doctype html><html><head><meta charset="utf-8">
<link rel="stylesheet" href="/static/responses_app/chat.css"></head><body>
<main class="page"><article class="turn"><div class="msg msg-assistant">
<div class="answer" data-blocks>ENTRY</div></div></article></main>
<script id="relay-vocabulary" type="application/json">VOCABULARY</script>
<script type="module">
import { configure } from "/static/responses_app/chat/vocab.js";
import { renderMarkdown } from "/static/responses_app/chat/markdown.js";
import { TurnView } from "/static/responses_app/chat/turnview.js";
import { prepare, typeset } from "/static/responses_app/chat/math.js";
configure(JSON.parse(document.getElementById("relay-vocabulary").textContent));
const longTasks = [];
new PerformanceObserver((list) => { for (const e of list.getEntries()) longTasks.push(e.duration); })
  .observe({ type: "longtask", buffered: true });
const frame = () => new Promise((resolve) => requestAnimationFrame(resolve));

window.runBench = async (text, mode, delta) => {
  await prepare(); // temml loaded, as on the chat page
  const box = document.querySelector("[data-blocks]");
  const block = { id: "m0-c0", kind: "text", state: "streaming", text: "", annotations: [] };
  const view = new TurnView(box, { blocks: () => [block] }); // the block's markup is the server's
  const md = box.querySelector(".md");
  const script = [];
  const withLayout = [];
  longTasks.length = 0;
  for (let end = delta; ; end += delta) {
    block.text = text.slice(0, Math.min(end, text.length));
    await frame();
    const start = performance.now();
    if (mode === "incremental") view.update(block, false, false);
    else md.innerHTML = renderMarkdown(block.text, true);
    const rendered = performance.now();
    void box.offsetHeight;
    script.push(rendered - start);
    withLayout.push(performance.now() - start);
    if (end >= text.length) break;
  }
  await frame();
  const whole = document.createElement("template"); // parsed, so both serialize alike (`disabled=""`)
  whole.innerHTML = renderMarkdown(text, true);
  if (mode === "incremental") typeset(whole.content); // the page typesets math (math.js)
  const same = md.innerHTML === whole.innerHTML;
  return { script, withLayout, longTasks: [...longTasks], same };
};
window.benchReady = true;
</script></body></html>"""


def answer(size: int) -> str:
    """Deterministic Markdown of about `size` characters, shaped like a long model answer."""
    parts: list[str] = []
    n = 0
    while sum(map(len, parts)) < size:
        n += 1
        parts.append(f"## Part {n}\n\nThe relay keeps **every answer** safe while it streams, and a reader "
                     f"who reloads finds it where it was. See [the notes](https://example.org/notes/{n}) "
                     f"and `code_{n}` for *details* on step {n}.\n")
        if n % 3 == 0:
            parts.append(f"- first point of {n}\n- second point, with **bold**\n- third point\n")
        if n % 5 == 0:
            parts.append(f"```python\ndef step_{n}(x):\n    return x * {n}\n\n\nprint(step_{n}(2))\n```\n")
        if n % 4 == 0:
            parts.append("\n| step | value | note |\n|:--|--:|:-:|\n" + "".join(
                f"| {n}.{r} | {n * r} | **ok** and $x_{r}$ |\n" for r in range(1, 7)))
        if n % 6 == 0:
            parts.append(f"\n> A quote about step {n}, with *emphasis*:\n> - a point\n\n- [x] done {n}\n- [ ] to do\n")
        parts.append("\n")
    return "".join(parts)[:size]


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def do_GET(self) -> None:
        if self.path == "/bench.html":
            body = self.server.page.encode()  # type: ignore[attr-defined]
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path.startswith("/static/"):
            self.path = self.path[len("/static"):]
        super().do_GET()

    def guess_type(self, path: Any) -> str:
        return "text/javascript" if str(path).endswith((".js", ".mjs")) else super().guess_type(path)


def _page() -> str:
    """The bench page with the server's vocabulary and its drawing of the empty answer block."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.template.loader import render_to_string

    from responses_app.web.turns import vocabulary

    entry = render_to_string("responses_app/_block.html", {"live": True, "block": {
        "id": "m0-c0", "kind": "text", "state": "streaming", "text": "", "annotations": []}})
    return PAGE.replace("VOCABULARY", json.dumps(vocabulary()).replace("</", "<\\/")).replace("ENTRY", entry)


def _stats(values: list[float]) -> dict[str, float]:
    tail = values[-max(1, len(values) // 5):]
    ordered = sorted(tail)
    return {"median": statistics.median(tail), "p95": ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))],
            "max": max(values)}


def run(sizes: tuple[int, ...] = SIZES, modes: tuple[str, ...] = MODES) -> list[dict[str, Any]]:
    from playwright.sync_api import sync_playwright

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadingHTTPServer(("127.0.0.1", port), partial(_Quiet, directory=str(STATIC)))
    server.page = _page()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    rows: list[dict[str, Any]] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            try:
                for size in sizes:
                    for mode in modes:
                        page = browser.new_page(viewport={"width": 1280, "height": 900})
                        page.goto(f"http://127.0.0.1:{port}/bench.html")
                        page.wait_for_function("() => window.benchReady === true")
                        result = page.evaluate("([t, m, d]) => window.runBench(t, m, d)", [answer(size), mode, DELTA])
                        page.close()
                        if not result["same"]:
                            raise AssertionError(f"{mode} at {size}: the DOM differs from a whole rendering")
                        rows.append({"size": size, "mode": mode, "frames": len(result["script"]),
                                     "script": _stats(result["script"]), "layout": _stats(result["withLayout"]),
                                     "long_tasks": len(result["longTasks"]),
                                     "long_ms": sum(result["longTasks"])})
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| answer | rendering | frames | script ms/frame median · p95 | script + layout ms/frame median · p95 "
             "| long tasks (total ms) |", "|---|---|---|---|---|---|"]
    for r in rows:
        s, lay = r["script"], r["layout"]
        lines.append(f"| {r['size'] // 1000}k chars | {r['mode']} | {r['frames']} | {s['median']:.2f} · {s['p95']:.2f} "
                     f"| {lay['median']:.2f} · {lay['p95']:.2f} | {r['long_tasks']} ({r['long_ms']:.0f}) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench render")
    parser.add_argument("--quick", action="store_true", help="1k and 10k characters only; no results file")
    parser.add_argument("--sizes", default="", help="comma-separated answer sizes, e.g. 100000 (printed only)")
    parser.add_argument("--modes", default="", help=f"comma-separated: {','.join(MODES)} (printed only)")
    args = parser.parse_args(argv)
    sizes: tuple[int, ...] = QUICK_SIZES if args.quick else SIZES
    modes: tuple[str, ...] = MODES
    if args.sizes:  # --sizes=100000 --modes=incremental: one cell again
        sizes = tuple(int(v) for v in args.sizes.split(","))
    if args.modes:
        modes = tuple(args.modes.split(","))
    rows = run(sizes, modes)
    text = table(rows)
    print(text)
    if sizes == SIZES and modes == MODES:
        RESULTS.write_text(keep_notes(RESULTS,
            "# Render benchmark (bench/render.py)\n\n"
            f"Chromium {CHROMIUM}, {platform.machine()}, {os.cpu_count()} cores shared; {DELTA} characters per "
            "animation frame; statistics over the last fifth of each run's frames.\n\n" + text + "\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
