// follower.js: follows one live turn over its websocket, /ws/requests/<id>/.
//
// The `snapshot` comes first, then patches in the wire format of protocol 2 (wire.js, read with the
// same reducer as responses_app/streaming/view.py). The socket's URL names the protocol this tab
// reads; a snapshot from a server speaking a newer one reloads the page (at most once a minute) so
// its patches are never misread. The revision rule: a patch applies only when its `base` equals the
// held revision; an older one is a duplicate and dropped, a newer base is a gap and we ask for a
// snapshot rather than show a hole. Messages are applied at most once per animation frame, through
// a TurnView (only what changed is drawn again). The socket (livesocket.js) says within seconds
// whether it is connected: the turn reads "Live" or "Reconnecting…". On `terminal` the turn is
// swapped for its server rendering, so a finished answer is the same in every tab; the reader
// stays where they were. The turn is aria-busy while it streams, and its start and end are
// announced once each.

import { csrfToken } from "./csrf.js";
import { LiveSocket } from "./livesocket.js";
import { typeset } from "./math.js";
import { badgeIsFinal, badgeKey, badgeText } from "./state.js";
import { TurnView, focusWithin, keepOpenBlocks } from "./turnview.js";
import { vocab } from "./vocab.js";
import { PROTOCOL, applyOp, decode } from "./wire.js";
import { socketUrl, url } from "./urls.js";

export const followers = new Map();
export const liveTexts = new Map(); // request id -> the text this tab assembled itself, before the swap
export const liveHtml = new Map(); // ... and its HTML
// `answer`: a turn's answer started or stopped being followed here (the sidebar's live mark).
export const hooks = { rendered: () => {}, replaced: () => {}, keep: (old, fresh) => old.replaceWith(fresh), answer: () => {} };
const RELOAD_AFTER_MS = 60000; // a server of a newer protocol reloads the tab at most this often
const DRAWN_MS = 2000; // at the end, how long the last entries asked of the server may take

function remember(key) {
  // True when this tab's session storage already had the key; sets it either way.
  try {
    const seen = sessionStorage.getItem(key) !== null;
    sessionStorage.setItem(key, "1");
    return seen;
  } catch {
    return false; // storage disabled: count as a first connection
  }
}

function schedule(callback) {
  // Hidden tabs get no animation frames; they still keep their view current, just less often.
  return document.hidden ? setTimeout(callback, 100) : requestAnimationFrame(callback);
}

export function announce(text) {
  const region = document.querySelector("[data-announce]");
  if (!region) return;
  region.textContent = "";
  requestAnimationFrame(() => { region.textContent = text; });
}

class Follower {
  constructor(turn) {
    this.turn = turn;
    this.id = turn.dataset.requestId;
    this.status = turn.dataset.status;
    this.view = null;
    this.revision = -1;
    this.queue = [];
    this.scheduled = false;
    this.dirty = new Set();
    this.replaced = new Set(); // blocks whose text was replaced, not appended to
    this.structural = new Set(); // blocks added, or changed in more than their text
    this.full = false;
    this.notice = "";
    this.created = Number(turn.dataset.created || 0) * 1000;
    this.awaitingSnapshot = false;
    this.done = false;
    // A tab that followed this request before (a reload, back/forward) is reconnecting, not new.
    this.followedBefore = remember(`relay:followed:${this.id}`);
    followers.set(this.id, this);
    hooks.answer();
    this.bindStop();
    this.socket = new LiveSocket(() => this.url(), {
      message: (data) => this.received(data),
      state: (live) => this.setConnection(live),
      closed: (event, opened) => this.closed(event, opened),
    });
    if (!this.followedBefore) announce("Answer started");
  }

  get ws() { return this.socket.ws; }

  bindStop() {
    const form = this.turn.querySelector(".stop-form");
    if (!form) return;
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.stop();
    });
  }

  url() {
    const reconnect = this.socket?.opened || this.socket?.attempt || this.followedBefore;
    // What this tab shows: the server never sends it an older view (another web process may know
    // only an older committed one); it goes on from this revision instead.
    const holds = reconnect && this.view && this.revision >= 0 ? `&revision=${this.revision}` : "";
    return `${socketUrl("wsRequest", { request: this.id })}?v=${PROTOCOL}${reconnect ? "&reconnect=1" : ""}${holds}`;
  }

  received(data) {
    let message;
    try { message = decode(data); } catch { return; }
    this.queue.push(message);
    if (!this.scheduled) {
      this.scheduled = true;
      schedule(() => { this.scheduled = false; this.flush(); });
    }
  }

  closed(event, opened) {
    if (event.code === 4403) { this.forbidden(); return false; }
    // A socket that never opened looks like a network error: after two of those, ask the API
    // whether we may still see this request at all (a proxy may refuse the handshake itself).
    if (!opened && this.socket.attempt >= 1) this.checkAccess();
    return true;
  }

  askSnapshot() {
    this.awaitingSnapshot = true;
    if (!this.socket.send({ type: "snapshot" })) this.socket.reconnectNow(); // a new connection starts with one
  }

  flush() {
    const messages = this.queue;
    this.queue = [];
    for (const message of messages) {
      if (this.done) break;
      this.handle(message);
    }
    if (!this.done) this.render();
  }

  handle(message) {
    switch (message.type) {
      case "snapshot":
        if ((message.protocol || 1) > PROTOCOL && this.reloadForProtocol()) return;
        // Older than what is shown: never applied over newer text; the newer state follows.
        if (this.view && message.revision < this.revision) return;
        this.view = message.view;
        this.revision = message.revision;
        if (message.status) this.status = message.status;
        this.awaitingSnapshot = false;
        this.full = true;
        break;
      case "patch":
        if (!this.view || this.awaitingSnapshot || message.revision <= this.revision) return; // a duplicate
        if (message.base !== this.revision) { this.askSnapshot(); return; } // a gap: never show a hole
        try {
          for (const op of message.ops) this.apply(op);
        } catch {
          this.askSnapshot();
          return;
        }
        this.revision = message.revision;
        this.view.revision = message.revision;
        if (this.status === "pending") this.status = "streaming";
        break;
      case "terminal":
        this.status = message.status;
        this.finish(message);
        break;
      default: // ping, pong, error: liveness only
        break;
    }
  }

  apply(op) {
    const [id, replaced, , structural] = applyOp(this.view, op);
    if (id === null) return;
    this.dirty.add(id);
    if (replaced) this.replaced.add(id);
    if (structural) this.structural.add(id);
  }

  reloadForProtocol() {
    // The server speaks a protocol this page's modules do not: load the page (and its modules)
    // again rather than misread a patch. True when the reload is under way.
    const key = "relay:protocol-reload";
    try {
      const last = Number(sessionStorage.getItem(key) || 0);
      if (Date.now() - last < RELOAD_AFTER_MS) return false; // just reloaded: follow by snapshots
      sessionStorage.setItem(key, String(Date.now()));
    } catch {
      return false; // no storage, no guard against a reload loop
    }
    this.close();
    location.reload();
    return true;
  }

  render() {
    if (!this.view) return;
    if (!this.turnView) {
      const thought = this.turn.dataset.thoughtS;
      this.turnView = new TurnView(this.turn.querySelector("[data-blocks]"), {
        thoughtS: thought === undefined ? null : Number(thought),
        blocks: () => this.view.blocks,
        drawn: () => hooks.rendered(this.turn),
        notice: (html) => this.showNotice(html),
      });
    }
    if (this.full) {
      this.turnView.reset();
      this.full = false;
    } else {
      for (const id of this.dirty) {
        const block = this.view.blocks.find((b) => b.id === id);
        if (block) this.turnView.update(block, this.replaced.has(id), this.structural.has(id));
      }
    }
    this.dirty.clear();
    this.replaced.clear();
    this.structural.clear();
    this.noteThought();
    const placeholder = this.turn.querySelector("[data-placeholder]");
    if (placeholder) placeholder.hidden = this.view.blocks.length > 0;
    const copy = this.turn.querySelector("button[data-copy=answer]");
    if (copy) copy.hidden = !this.view.blocks.some((b) => b.kind === "text" && b.text); // nothing to copy yet
    const badge = badgeKey(this.status, this.view);
    this.setBadge(badge);
    if (badgeIsFinal(badge)) this.removeStop(); // the outcome is known: nothing left to stop
    const meta = this.view.meta || {};
    const notice = JSON.stringify([meta.error || null, meta.incomplete_reason || ""]);
    if (notice !== this.notice && ((meta.error && typeof meta.error === "object") || meta.incomplete_reason)) {
      this.notice = notice;
      this.turnView.notice(meta);
    }
    hooks.rendered(this.turn);
  }

  noteThought() {
    // "Thought for N s": from the request's creation to its first visible text, as the server counts it.
    if (this.turnView.thoughtS !== null || !this.created) return;
    const blocks = this.view.blocks;
    if (!blocks.some((b) => b.kind === "reasoning")) return;
    if (!blocks.some((b) => vocab.visibleKinds.has(b.kind) && b.text)) return;
    this.turnView.setThought(Math.max(0, Math.round((Date.now() - this.created) / 1000)));
  }

  removeStop() {
    const stop = this.turn.querySelector(".stop-form");
    if (stop) {
      const focused = stop.contains(document.activeElement);
      stop.remove();
      if (focused) this.turn.focus({ preventScroll: true }); // the reader's place: this answer
    }
    hooks.rendered(this.turn);
  }

  setBadge(key) {
    const badge = this.turn.querySelector("[data-badge]");
    if (!badge) return;
    const text = badgeText(key, this.view);
    if (badge.dataset.badge === key && badge.textContent === text) return;
    badge.dataset.badge = key;
    badge.className = `badge badge-${key}`;
    badge.textContent = text;
  }

  showNotice(html) {
    const box = this.turn.querySelector("[data-error]");
    if (!box) return;
    box.hidden = !html;
    box.innerHTML = html;
  }

  setConnection(live) {
    const conn = this.turn.querySelector("[data-conn]");
    if (conn) {
      conn.dataset.conn = live ? "live" : "reconnecting";
      conn.textContent = live ? "Live" : "Reconnecting…";
    }
    this.turn.classList.toggle("reconnecting", !live);
  }

  stop() {
    const button = this.turn.querySelector(".stop");
    if (button) {
      if (button === document.activeElement) this.turn.focus({ preventScroll: true }); // disabled, it drops it
      button.disabled = true;
      button.textContent = "Stopping…";
    }
    if (this.socket.send({ type: "cancel" })) return;
    fetch(this.turn.dataset.cancelUrl, {
      method: "POST", credentials: "same-origin", headers: { "X-CSRFToken": csrfToken() },
    }).catch(() => { if (button) { button.disabled = false; button.textContent = "Stop"; } });
  }

  async checkAccess() {
    try {
      const response = await fetch(url("apiRequest", { request: this.id }), { credentials: "same-origin" });
      if (response.status === 404 || response.status === 401 || response.status === 403) this.forbidden();
    } catch {
      // offline: keep retrying
    }
  }

  forbidden() {
    this.close();
    this.setBadge("unknown");
    this.showNotice("<strong>forbidden</strong>: You cannot watch this response.");
  }

  close() {
    this.done = true;
    if (followers.delete(this.id)) hooks.answer();
    this.socket.close();
    if (this.turnView && !this.finishing) this.turnView.close();
    const conn = this.turn.querySelector("[data-conn]");
    if (conn) conn.remove();
    this.turn.classList.remove("reconnecting");
  }

  async finish(message) {
    this.render();
    this.finishing = true;
    this.close();
    if (this.turnView) { // the last blocks drawn, so the live answer is whole before the swap
      await this.turnView.idle(DRAWN_MS);
      this.turnView.close();
    }
    const box = this.turn.querySelector("[data-blocks]");
    if (box && this.view) { liveTexts.set(this.id, box.innerText); liveHtml.set(this.id, box.innerHTML); }
    const badge = badgeKey(message.status, this.view);
    this.setBadge(badge);
    this.removeStop();
    this.turn.dataset.finished = "0"; // until the server rendering is swapped in ("1") or cannot be
    this.turn.removeAttribute("data-live");
    this.turn.removeAttribute("aria-busy");
    this.turn.dataset.status = message.status;
    announce(`Answer ${badgeText(badge, this.view).toLowerCase()}`);
    // The server rendering of the committed answer: the same HTML in every tab, after every reload.
    const live = this.turn;
    try {
      await this.swapRendering();
    } finally {
      if (live.dataset.finished === "0") delete live.dataset.finished; // kept the live drawing
    }
  }

  async swapRendering() {
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const response = await fetch(this.turn.dataset.turnUrl, { credentials: "same-origin" });
        if (!response.ok) return;
        const holder = document.createElement("div");
        holder.innerHTML = (await response.text()).trim();
        const fresh = holder.firstElementChild;
        if (!fresh) return;
        if (fresh.dataset.live && attempt < 2) { // not committed yet: try once more shortly
          await new Promise((resolve) => setTimeout(resolve, 300));
          continue;
        }
        typeset(fresh); // before it goes in, so the math never shows as code meanwhile
        keepDecodedImages(this.turn, fresh);
        keepOpenBlocks(this.turn, fresh);
        const refocus = focusWithin(this.turn);
        hooks.keep(this.turn, fresh); // the reader stays where they were
        refocus(fresh);
        this.turn = fresh;
        fresh.dataset.finished = "1";
        showConversationCost(fresh.dataset.conversationTotal);
        hooks.replaced(fresh);
        return;
      } catch {
        return;
      }
    }
  }
}

// The conversation's total under its title, as the server counted it with this answer (the turn's data-conversation-total).
function showConversationCost(words) {
  const line = document.querySelector("[data-conversation-cost]");
  const total = line && line.querySelector("[data-cost-total]");
  if (!total || words === undefined) return;
  total.textContent = words;
  line.hidden = !words;
}

export function followAll() {
  document.querySelectorAll("article.turn[data-live]").forEach(follow);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") followers.forEach((f) => f.socket.probe());
  });
  window.addEventListener("online", () => followers.forEach((f) => f.socket.reconnectNow()));
}

export function follow(turn) {
  const id = turn.dataset.requestId;
  if (!id || followers.has(id) || !turn.dataset.live) return followers.get(id);
  return new Follower(turn);
}

// A fresh <img> with the same data URL lays out at 0×0 until it decodes again: the picture would blink out
// when the server rendering replaces the live turn. The live tab's decoded image moves across instead.
function keepDecodedImages(live, fresh) {
  const decoded = new Map();
  for (const img of live.querySelectorAll("img")) if (img.complete && img.naturalWidth) decoded.set(img.src, img);
  for (const img of fresh.querySelectorAll("img")) {
    const kept = decoded.get(img.src);
    if (kept) { decoded.delete(img.src); img.replaceWith(kept); }
  }
}
