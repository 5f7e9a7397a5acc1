"""The closed loop: `streams` requests always in flight, each watched by one to three viewers
spread over the web processes, as one ends the next is submitted. Every request is checked as
soon as it ends (the simulator forgets old responses; the views are dropped once compared), and
only what the report needs is kept.

A viewer keeps the view as chat.js does (bench/viewers.py's rules) and, in addition, checks that
what it shows never goes back: a snapshot or a patch that rewrites text must extend the text shown
before it. A closed socket is reopened on the next web process, as nginx would send a tab
elsewhere when its process is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.chaos import schedule as s
from bench.chaos.moving import MovingSocket, close_quietly, listening
from bench.cluster import Cluster
from bench.viewers import CONNECT_S, SILENCE_S, Load, Viewer, holds, plain_text
from responses_app.simulator.auth import DEV_API_KEY
from responses_app.streaming.view import apply_patch
from responses_app.streaming.vocabulary import ENDED_STATUSES as ENDED
from responses_app.streaming.wire import PROTOCOL, appended, decode

STOPPING = (1001, 1012)  # close codes after which the page reconnects at once (livesocket.js)
SOON_S = 0.1  # ... spread over this (its SOON_MS)
PAUSE_MIN_S = 0.25  # gaps between text shorter than this are kept as a maximum only
BOUND_SLACK_S = 60.0  # a request must reach its terminal status within its generation time plus this
VIEWER_SLACK_S = 60.0  # ... and each viewer must hold the committed view within this after that
TERMINAL = ("completed", "failed", "error", "cancelled", "incomplete")


@dataclass(frozen=True)
class Plan:
    index: int
    kind: str  # text, drop, 429, tools
    model: str
    metadata: dict[str, str]
    viewers: int
    expected_status: str
    bound_s: float


@dataclass
class ChaosViewer(Viewer):
    slot: int = 0  # which web process, of the list, it uses now
    gaps: list[tuple[float, float]] = field(default_factory=list)  # (last text, next text), >= PAUSE_MIN_S
    small_max_s: float = 0.0  # the longest gap shorter than PAUSE_MIN_S
    regressions: list[str] = field(default_factory=list)
    first_text_at: float = 0.0
    trail: list[tuple[float, str]] = field(default_factory=list)  # (wall clock, what): its connections' steps
    floor: int = -1  # what the server knows this socket's client holds (no older snapshot promised)

    def step(self, what: str) -> None:
        self.trail.append((time.time(), what))


@dataclass
class Done:
    """What is kept of a request once checked."""

    plan: Plan
    request_id: str
    client_request_id: str
    started: float
    ended: float
    status: str = ""
    violations: dict[str, list[str]] = field(default_factory=dict)  # invariant -> what went wrong
    viewers: list[ChaosViewer] = field(default_factory=list)  # views dropped, pauses kept
    response_ids: list[str] = field(default_factory=list)
    function_calls: int = 0
    chars: int = 0


class Traffic(Load):
    def __init__(self, cluster: Cluster, *, streams: int, seconds: float, seed: int, tokens: tuple[int, int],
                 tokens_per_s: float, mix: dict[str, float]) -> None:
        super().__init__(ports=cluster.web_ports(), session=cluster.session, streams=streams, seed=seed,
                         tokens_per_s=tokens_per_s, stamp=False)
        self.cluster, self.seconds, self.token_range, self.mix = cluster, seconds, tokens, mix
        self.counter = itertools.count()
        self.done: list[Done] = []
        self.in_flight = 0
        self.sim = httpx.AsyncClient(base_url=cluster.simulator_url, timeout=30,
                                     headers={"authorization": f"Bearer {DEV_API_KEY}"})

    def plan(self, i: int) -> Plan:
        rng = random.Random(self.seed * 1_000_003 + i)
        roll, viewers = rng.random(), rng.randint(1, 3)
        tokens = rng.randint(*self.token_range)
        meta = {"sim.seed": str(self.seed * 100_000 + i), "sim.tokens_per_s": str(self.tokens_per_s)}
        generation = tokens / self.tokens_per_s
        if roll < self.mix["tools"]:
            model = "sim-parallel-functions" if rng.random() < 0.3 else "sim-function"
            return Plan(i, "tools", model, meta, viewers, "completed", 30 + BOUND_SLACK_S)
        roll -= self.mix["tools"]
        if roll < self.mix["drop"]:
            meta.update({"sim.tokens": str(tokens), "sim.drop_after": str(rng.randint(10, max(11, tokens // 2)))})
            return Plan(i, "drop", "sim-long", meta, viewers, "completed", generation + BOUND_SLACK_S)
        roll -= self.mix["drop"]
        if roll < self.mix["429"]:
            meta.update({"sim.tokens": "50", "sim.http_error": "429"})
            return Plan(i, "429", "sim-text", meta, viewers, "error", 10 + BOUND_SLACK_S)
        meta["sim.tokens"] = str(tokens)
        return Plan(i, "text", "sim-long", meta, viewers, "completed", generation + BOUND_SLACK_S)

    # --- the loop ----------------------------------------------------------------------------------

    async def run_loop(self, t0: float) -> None:
        self.t0, self.end = t0, t0 + self.seconds
        await asyncio.gather(*(self._slot() for _ in range(self.streams)))
        await self.sim.aclose()

    async def _slot(self) -> None:
        while time.time() < self.end:
            plan = self.plan(next(self.counter))
            self.in_flight += 1
            try:
                self.done.append(await self.one(plan))
            finally:
                self.in_flight -= 1

    async def one(self, plan: Plan) -> Done:
        started = time.time()
        client_request_id = f"chaos-{self.seed}-{plan.index}-{uuid.uuid4().hex[:6]}"
        request_id, error = await self.submit_plan(plan, client_request_id)
        done = Done(plan, request_id or "", client_request_id, started, 0.0)
        if request_id is None:
            done.violations["terminal"] = [f"never submitted: {error}"]
            done.ended = time.time()
            return done
        deadline = started + plan.bound_s + VIEWER_SLACK_S
        done.viewers = [ChaosViewer(request_id, 0, slot=(plan.index + j) % len(self.ports))
                        for j in range(plan.viewers)]
        await asyncio.gather(*(self.follow(v, deadline) for v in done.viewers))
        committed = await self.committed_detail(request_id, deadline + 30)
        done.ended = time.time()
        await self.check(done, committed)
        for viewer in done.viewers:
            viewer.view = None  # what the report needs is kept beside it
        return done

    async def submit_plan(self, plan: Plan, client_request_id: str) -> tuple[str | None, str]:
        """Submit through web process index % P; on failure, the next process, for up to a minute
        (a process restarting, Redis or PostgreSQL down). One client_request_id throughout: a
        submit that got through but whose answer was lost is found again, not made twice."""
        body = {"input": "Tell me something.", "model": plan.model, "background": True, "metadata": plan.metadata,
                "client_request_id": client_request_id}
        error = ""
        for attempt in range(120):
            port = self.ports[(plan.index + attempt) % len(self.ports)]
            try:
                async with self.http(port) as http:
                    created = await http.post("/api/requests", json=body)
                if created.status_code in (200, 201):
                    return str(created.json()["id"]), ""
                error = f"{created.status_code} {created.text[:200]}"
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
            await asyncio.sleep(0.5)
        return None, error

    async def committed_detail(self, request_id: str, deadline: float) -> dict[str, Any] | None:
        detail = None
        attempt = 0
        while time.time() < deadline:
            port = self.ports[attempt % len(self.ports)]
            attempt += 1
            try:
                async with self.http(port) as http:
                    answer = await http.get(f"/api/requests/{request_id}")
                if answer.status_code == 200:
                    detail = answer.json()
                    if detail["status"] in TERMINAL:
                        return detail
            except Exception:
                pass
            await asyncio.sleep(0.5)
        return detail

    # --- a viewer ----------------------------------------------------------------------------------

    async def follow(self, viewer: ChaosViewer, deadline: float) -> None:
        from websockets.asyncio.client import connect
        from websockets.typing import Origin

        headers = {"Cookie": f"sessionid={self.session}"}

        def opening(port: int) -> Any:
            url = f"ws://127.0.0.1:{port}/ws/requests/{viewer.request_id}/?v={PROTOCOL}"
            query = "&reconnect=1" if viewer.reconnects or viewer.view is not None else ""
            query += holds(viewer) if query else ""
            viewer.step(f"connecting to :{port}")
            return connect(url + query, origin=Origin(f"http://127.0.0.1:{port}"), additional_headers=headers,
                           compression=None, proxy=None, open_timeout=CONNECT_S, ping_interval=None)

        async def move() -> tuple[Any, Any, Any]:
            """The new socket of a move, to the next web process, its first message, and a function
            that makes it the viewer's (called when the switch is made, not before: a move done but
            not switched to leaves the viewer where it was)."""
            floor = viewer.shown  # what it tells the new socket it holds
            slot, ws = await listening(self.ports, self.ports.index(viewer.port) + 1, opening)  # the next process
            port = self.ports[slot % len(self.ports)]
            viewer.step("new socket open")
            try:
                async with asyncio.timeout(CONNECT_S):
                    first = await ws.recv()
            except BaseException:
                await close_quietly(ws)
                raise

            def switched() -> None:
                viewer.slot, viewer.port, viewer.floor = slot, port, floor

            return ws, first, switched

        while time.time() < deadline:
            viewer.floor = viewer.shown
            try:
                viewer.slot, ws = await listening(self.ports, viewer.slot, opening)
                viewer.port = self.ports[viewer.slot % len(self.ports)]
                async with ws:
                    viewer.step("open")
                    line = MovingSocket(ws, move, viewer)
                    try:
                        if await self._follow(viewer, line, deadline):
                            viewer.error = ""
                            return
                    finally:
                        await line.close()
                    viewer.step(f"closed {line.close_code}")
            except Exception as exc:
                viewer.error = f"{type(exc).__name__}: {exc}"[:200]
                viewer.step(viewer.error[:80])
                stopping = getattr(getattr(exc, "rcvd", None), "code", None) in STOPPING
            else:
                stopping = False
            viewer.reconnects += 1
            viewer.slot += 1
            # As livesocket.js: a server that stops closed it on purpose, so at once, spread.
            await asyncio.sleep(random.uniform(0, SOON_S) if stopping else min(0.1 * viewer.reconnects, 1.0))
        viewer.error = viewer.error or "deadline passed"

    def _text_arrived(self, viewer: ChaosViewer, now: float) -> None:
        if not viewer.trail or viewer.trail[-1][1] != "text":
            viewer.step("text")
        if viewer.last_text_at:
            gap = now - viewer.last_text_at
            if gap >= PAUSE_MIN_S:
                viewer.gaps.append((viewer.last_text_at, now))
            else:
                viewer.small_max_s = max(viewer.small_max_s, gap)
            viewer.max_text_gap_s = max(viewer.max_text_gap_s, gap)
        else:
            viewer.first_text_at = now
        viewer.last_text_at = now

    def _went_back(self, viewer: ChaosViewer, before: str, what: str, revision: int) -> None:
        after = plain_text(viewer.view or {})
        if not after.startswith(before):
            viewer.regressions.append(f"at {time.time() - self.t0:.1f} s a {what} took r{revision} to "
                                      f"r{viewer.revision}: {len(before)} chars shown, then {len(after)} that do "
                                      f"not extend them (common prefix {_first_difference(before, after)})")
        elif len(after) > len(before):
            self._text_arrived(viewer, time.time())

    async def _follow(self, viewer: ChaosViewer, ws: Any, deadline: float) -> bool:
        awaiting, wanted = False, -1
        while (remaining := deadline - time.time()) > 0:
            try:
                async with asyncio.timeout(min(remaining, SILENCE_S)):
                    raw = await ws.recv()
            except TimeoutError:
                return False
            message = decode(raw)
            kind = message["type"]
            sent = message["revision"] if kind in ("snapshot", "patch") else -1
            floor, viewer.floor = viewer.floor, max(viewer.floor, sent)
            if kind == "snapshot":
                before = plain_text(viewer.view) if viewer.view is not None else ""
                previous = viewer.revision
                if viewer.view is not None and message["revision"] < previous:
                    # Not applied (chat.js's rule), but the server promised none older than what it
                    # knows the client holds while the request runs: one is a loss all the same.
                    if message.get("status") not in ENDED and message["revision"] < floor:
                        viewer.regressions.append(f"at {time.time() - self.t0:.1f} s a snapshot at "
                                                  f"r{message['revision']} was sent to a viewer at r{previous}")
                    continue
                viewer.view, viewer.revision = message["view"], message["revision"]
                viewer.snapshots += 1
                viewer.step(f"snapshot r{previous}->r{viewer.revision}")
                awaiting = False
                self._went_back(viewer, before, "snapshot", previous)
            elif kind == "patch":
                if viewer.view is None or awaiting or message["revision"] <= viewer.revision:
                    continue
                rewrites = any(isinstance(op, list) and op[0] in ("set", "add") for op in message["ops"])
                before = plain_text(viewer.view) if rewrites else ""
                try:
                    applied = message["base"] == viewer.revision and apply_patch(viewer.view, message)
                except (KeyError, IndexError, TypeError, ValueError):
                    applied = False
                if not applied:
                    viewer.resyncs += 1
                    awaiting = True
                    viewer.step(f"asked: patch r{message['base']}->r{message['revision']} on r{viewer.revision}")
                    await ws.send('{"type":"snapshot"}')
                    continue
                previous, viewer.revision = viewer.revision, message["revision"]
                if rewrites:
                    self._went_back(viewer, before, "patch", previous)
                elif appended(message["ops"]):
                    self._text_arrived(viewer, time.time())
            elif kind == "terminal":
                viewer.terminal = message
                wanted = max(wanted, int(message.get("revision", -1)))
                viewer.step(f"terminal r{message.get('revision')}")
            elif kind == "ping" and isinstance(message.get("revision"), int):
                wanted = max(wanted, message["revision"])
            if wanted > viewer.revision and not awaiting:
                viewer.resyncs += 1
                awaiting = True
                viewer.step(f"asked: r{wanted} heard on r{viewer.revision}")
                await ws.send('{"type":"snapshot"}')
            if viewer.terminal is not None and viewer.revision >= wanted and not awaiting:
                with contextlib.suppress(Exception):
                    await ws.close()
                return True
        return False

    # --- checking a request that ended -------------------------------------------------------------

    async def upstream(self, response_ids: list[str]) -> tuple[str, int]:
        """The simulator's text of these responses, in order, and their function calls."""
        text, calls = [], 0
        for response_id in response_ids:
            for _attempt in range(10):
                try:
                    answer = await self.sim.get(f"/responses/{response_id}")
                    answer.raise_for_status()
                    break
                except httpx.HTTPError:
                    await asyncio.sleep(1)
            else:
                raise RuntimeError(f"the simulator does not answer for {response_id}")
            for item in answer.json().get("output", []):
                if item.get("type") == "message":
                    text += [part.get("text", "") for part in item.get("content", [])]
                calls += item.get("type") == "function_call"
        return "".join(text), calls

    async def stored(self, request_id: str) -> tuple[list[str], float | None, int]:
        """The request's upstream response ids (segment order), seconds from creation to its
        terminal status, and its HTTP retries, from PostgreSQL (waiting out a restart)."""
        assert self.cluster.postgres is not None
        for _attempt in range(60):
            try:
                segments = await asyncio.to_thread(
                    self.cluster.postgres.query,
                    'SELECT response_id FROM responses_app_segment WHERE request_id = %s ORDER BY "index"', request_id)
                [(elapsed, retries)] = await asyncio.to_thread(
                    self.cluster.postgres.query, "SELECT EXTRACT(EPOCH FROM terminal_at - created), retries "
                    "FROM responses_app_responserequest WHERE id = %s", request_id)
                ids = list(dict.fromkeys(r for (r,) in segments if r))
                return ids, (float(elapsed) if elapsed is not None else None), int(retries)
            except Exception:
                await asyncio.sleep(1)
        raise RuntimeError(f"PostgreSQL did not answer about {request_id}")

    async def check(self, done: Done, committed: dict[str, Any] | None) -> None:
        plan, v = done.plan, done.violations
        if committed is None:
            v["terminal"] = ["no detail from any web process"]
            return
        done.status = committed["status"]
        done.response_ids, elapsed, retries = await self.stored(done.request_id)
        expected, done.function_calls = await self.upstream(done.response_ids)
        done.chars = len(expected)
        if done.status != plan.expected_status:
            v.setdefault("terminal", []).append(f"status {done.status}, expected {plan.expected_status}")
        elif elapsed is None or elapsed > plan.bound_s:
            v.setdefault("terminal", []).append(f"terminal after {elapsed} s, bound {plan.bound_s:.0f} s")
        if plan.kind == "429" and retries != 3:
            v.setdefault("terminal", []).append(f"{retries} retries of the 429, expected 3")
        shown = plain_text(committed["view"])
        if shown != expected:
            v.setdefault("text", []).append(f"committed {len(shown)} chars, upstream {len(expected)}; first "
                                            f"difference at {_first_difference(shown, expected)}")
        for viewer in done.viewers:
            problems = list(viewer.regressions)
            if viewer.view is None or viewer.revision != committed["revision"] \
                    or viewer.view.get("blocks") != committed["view"].get("blocks"):
                problems.append(f"ended on r{viewer.revision}, committed r{committed['revision']} "
                                f"{_block_difference(viewer.view, committed['view'])} {viewer.error}".rstrip())
            elif plain_text(viewer.view) != expected:
                problems.append("text differs from the upstream's")
            if problems:
                v.setdefault("viewers", []).append(f"viewer on :{viewer.port}: {'; '.join(problems)}")


def _block_difference(view: dict[str, Any] | None, committed: dict[str, Any]) -> str:
    if view is None:
        return "(no view)"
    mine, theirs = view.get("blocks", []), committed.get("blocks", [])
    if len(mine) != len(theirs):
        return f"({len(mine)} blocks, committed {len(theirs)})"
    for i, (a, b) in enumerate(zip(mine, theirs, strict=True)):
        if a != b:
            keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            return f"(block {i} {a.get('kind')} differs in {keys}: {str({k: a.get(k) for k in keys})[:120]} " \
                   f"vs {str({k: b.get(k) for k in keys})[:120]})"
    return ""


def _first_difference(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def own_fault(done: Done) -> str:
    """The fault a request brought with it (its upstream's drop or 429), else "none"."""
    return {"drop": s.DROP, "429": s.RATE_LIMIT}.get(done.plan.kind, s.NONE)


def pause_kinds(done: Done, windows: list[Any]) -> dict[str, float]:
    """For each kind of fault this request's viewers lived through, the longest pause of text any
    of its viewers saw during it; "none" for a request that met no fault at all."""
    out: dict[str, float] = {}
    request_kind = own_fault(done)
    for viewer in done.viewers:
        if not viewer.first_text_at:
            continue
        life = (viewer.first_text_at, viewer.last_text_at)
        met = [w for w in windows if w.overlaps(*life)]
        for window in met:
            longest = max((b - a for a, b in viewer.gaps if window.overlaps(a, b)), default=viewer.small_max_s)
            out[window.kind] = max(out.get(window.kind, 0.0), longest)
        if not met:
            out[request_kind] = max(out.get(request_kind, 0.0), viewer.max_text_gap_s)
    return out
