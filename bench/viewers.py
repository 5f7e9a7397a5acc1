"""Load for a running cluster: N requests with M websocket viewers each, spread over the web
processes, each viewer keeping the view as chat.js does. Shared by `python -m bench scaled` and
tests/scaled.

A viewer applies patches whose `base` is its revision and asks for a `snapshot` on a gap; a
`terminal` (or a ping) naming a revision newer than its own makes it ask for one too and wait for
it: the protocol's rule for a client. A closed socket is reopened with `?reconnect=1` and the
revision it holds (`&revision=`); a snapshot older than that is not applied (the server sends none
while the request runs). Request i
is submitted through web process i % P; its viewer j watches through process (i + j) % P, so with
M >= 2 every request is watched both on the process that took it and on another.

At the end each request's committed final state is read back (GET /api/requests/<id>) and every
viewer compared with it: a viewer is "behind" unless it ended on exactly that revision and view.
Lag is receipt time minus the simulator's emit stamp (`sim.stamp`) of the newest delta in a patch.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from bench.harness import pct
from bench.stamps import STAMP
from responses_app.streaming.view import apply_patch
from responses_app.streaming.wire import PROTOCOL, appended, decode


def plain_text(view: dict[str, Any]) -> str:
    """The answer's text without the benchmark stamps."""
    return STAMP.sub("", "".join(b.get("text", "") for b in view.get("blocks", []) if b.get("kind") == "text"))


SILENCE_S = 50.0  # the server pings every 20 s when idle: this much silence is a dead socket
CONNECT_S = 5.0  # a handshake that hangs is given up and tried again, as chat.js does (livesocket.js CONNECT_MS)


def holds(viewer: Viewer) -> str:
    """The reconnect's `revision`: what the viewer shows (the server never sends it an older view)."""
    return f"&revision={viewer.shown}" if viewer.shown >= 0 else ""


@dataclass
class Viewer:
    request_id: str
    port: int
    view: dict[str, Any] | None = None
    revision: int = -1
    terminal: dict[str, Any] | None = None
    resyncs: int = 0  # snapshots asked for on a gap, a newer terminal or ping
    snapshots: int = 0  # snapshots received
    reconnects: int = 0
    lags: list[float] = field(default_factory=list)  # ms
    last_text_at: float = 0.0  # wall clock of the newest patch that appended text
    max_text_gap_s: float = 0.0  # the longest wait between two patches that appended text
    max_text_gap_end: float = 0.0  # wall clock of the patch that ended it
    error: str = ""

    @property
    def shown(self) -> int:
        """The revision it shows, -1 before its first view."""
        return self.revision if self.view is not None else -1


@dataclass
class Load:
    ports: list[int]
    session: str
    streams: int
    viewers: int = 2
    tokens: int = 300
    tokens_per_s: float = 30.0
    model: str = "sim-long"
    seed: int = 1
    deadline_s: float = 120.0
    stamp: bool = True
    request_ids: list[str] = field(default_factory=list)
    watchers: list[Viewer] = field(default_factory=list)
    committed: dict[str, dict[str, Any]] = field(default_factory=dict)
    submit_errors: list[str] = field(default_factory=list)

    def http(self, port: int) -> Any:
        import httpx

        token = "x" * 32
        return httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30,
                                 cookies={"sessionid": self.session, "csrftoken": token},
                                 headers={"X-CSRFToken": token})

    async def submit(self, i: int) -> str | None:
        metadata = {"sim.tokens_per_s": str(self.tokens_per_s), "sim.tokens": str(self.tokens),
                    "sim.seed": str(self.seed + i)}
        if self.stamp:
            metadata["sim.stamp"] = "true"
        port = self.ports[i % len(self.ports)]
        async with self.http(port) as http:
            for _attempt in range(3):
                try:
                    created = await http.post("/api/requests", json={
                        "input": "Tell me something long.", "model": self.model, "background": True,
                        "client_request_id": f"load-{self.seed}-{i}-{uuid.uuid4().hex[:6]}", "metadata": metadata})
                    if created.status_code == 201:
                        return str(created.json()["id"])
                    error = f"{created.status_code} {created.text[:200]}"
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"
                await asyncio.sleep(0.5)
        self.submit_errors.append(error)
        return None

    async def start(self) -> None:
        """Submit every request and open every viewer; returns once all are connected."""
        ids = await asyncio.gather(*(self.submit(i) for i in range(self.streams)))
        self.deadline = time.time() + self.deadline_s
        self.tasks = []
        for i, request_id in enumerate(ids):
            if request_id is None:
                continue
            self.request_ids.append(request_id)
            for j in range(self.viewers):
                viewer = Viewer(request_id, self.ports[(i + j) % len(self.ports)])
                self.watchers.append(viewer)
                self.tasks.append(asyncio.create_task(self.watch(viewer)))

    async def finish(self) -> None:
        """Wait for every viewer (bounded by the deadline), then read back what was committed."""
        await asyncio.gather(*self.tasks, return_exceptions=True)
        async with self.http(self.ports[0]) as http:
            for request_id in self.request_ids:
                for _attempt in range(20):
                    try:
                        detail = await http.get(f"/api/requests/{request_id}")
                        if detail.status_code == 200:
                            self.committed[request_id] = detail.json()
                            break
                    except Exception:
                        pass
                    await asyncio.sleep(0.5)

    async def run(self) -> Load:
        await self.start()
        await self.finish()
        return self

    async def watch(self, viewer: Viewer) -> None:
        from websockets.asyncio.client import connect
        from websockets.typing import Origin

        url = f"ws://127.0.0.1:{viewer.port}/ws/requests/{viewer.request_id}/?v={PROTOCOL}"
        headers = {"Cookie": f"sessionid={self.session}"}
        while time.time() < self.deadline:
            query = "&reconnect=1" if viewer.reconnects or viewer.view is not None else ""
            query += holds(viewer) if query else ""
            try:
                async with connect(url + query, origin=Origin(f"http://127.0.0.1:{viewer.port}"),
                                   additional_headers=headers, compression=None, proxy=None, open_timeout=CONNECT_S,
                                   ping_interval=None) as ws:
                    if await self._receive(viewer, ws):
                        return
            except Exception as exc:
                viewer.error = f"{type(exc).__name__}: {exc}"[:200]
            viewer.reconnects += 1
            await asyncio.sleep(min(0.2 * viewer.reconnects, 2.0))
        viewer.error = viewer.error or "deadline passed"

    async def _receive(self, viewer: Viewer, ws: Any) -> bool:
        """Messages until the viewer holds the terminal's revision (True) or the socket ends."""
        awaiting = False
        wanted = -1  # a revision announced by terminal or ping, that the viewer must reach
        while (remaining := self.deadline - time.time()) > 0:
            try:
                async with asyncio.timeout(min(remaining, SILENCE_S)):
                    raw = await ws.recv()
            except TimeoutError:
                return False  # a silent socket is dead, reconnect (the browser pings first: livesocket.js)
            now = time.time()
            message = decode(raw)
            kind = message["type"]
            if kind == "snapshot":
                if viewer.view is not None and message["revision"] < viewer.revision:
                    continue  # older than what it shows: never applied, the newer state follows
                viewer.view, viewer.revision = message["view"], message["revision"]
                viewer.snapshots += 1
                awaiting = False
            elif kind == "patch":
                if viewer.view is None or awaiting or message["revision"] <= viewer.revision:
                    continue
                try:
                    applied = message["base"] == viewer.revision and apply_patch(viewer.view, message)
                except (KeyError, IndexError, TypeError, ValueError):  # a patch that does not fit the view
                    applied = False
                if not applied:
                    viewer.resyncs += 1
                    awaiting = True
                    await ws.send('{"type":"snapshot"}')
                    continue
                viewer.revision = message["revision"]
                texts = appended(message["ops"])
                stamps = [float(s) for text in texts for s in STAMP.findall(text)]
                if stamps:
                    viewer.lags.append((now - max(stamps)) * 1000)
                if texts:
                    if viewer.last_text_at and now - viewer.last_text_at > viewer.max_text_gap_s:
                        viewer.max_text_gap_s, viewer.max_text_gap_end = now - viewer.last_text_at, now
                    viewer.last_text_at = now
            elif kind == "terminal":
                viewer.terminal = message
                wanted = max(wanted, int(message.get("revision", -1)))
            elif kind == "ping" and isinstance(message.get("revision"), int):
                wanted = max(wanted, message["revision"])
            if wanted > viewer.revision and not awaiting:
                viewer.resyncs += 1
                awaiting = True
                await ws.send('{"type":"snapshot"}')
            if viewer.terminal is not None and viewer.revision >= wanted and not awaiting:
                with contextlib.suppress(Exception):
                    await ws.close()
                return True
        return False

    # --- results ---------------------------------------------------------------------------------

    def behind(self) -> list[Viewer]:
        """Viewers that did not end exactly on their request's committed final view."""
        out = []
        for viewer in self.watchers:
            committed = self.committed.get(viewer.request_id)
            if committed is None or viewer.view is None or viewer.revision != committed["revision"] \
                    or viewer.view.get("blocks") != committed["view"].get("blocks"):
                out.append(viewer)
        return out

    def completed(self) -> int:
        return sum(1 for c in self.committed.values() if c["status"] == "completed")

    def lags(self) -> list[float]:
        return [lag for viewer in self.watchers for lag in viewer.lags]

    def summary(self) -> dict[str, Any]:
        lags = self.lags()
        return {
            "streams": self.streams, "submitted": len(self.request_ids), "completed": self.completed(),
            "statuses": sorted(c["status"] for c in self.committed.values()),
            "viewers": len(self.watchers), "behind": len(self.behind()),
            "no_terminal": sum(1 for v in self.watchers if v.terminal is None),
            "resyncs": sum(v.resyncs for v in self.watchers), "snapshots": sum(v.snapshots for v in self.watchers),
            "reconnects": sum(v.reconnects for v in self.watchers),
            "lag_p50_ms": pct(lags, 50), "lag_p99_ms": pct(lags, 99), "lag_samples": len(lags),
            "submit_errors": self.submit_errors[:3],
            "viewer_errors": sorted({v.error for v in self.watchers if v.error})[:3],
        }
