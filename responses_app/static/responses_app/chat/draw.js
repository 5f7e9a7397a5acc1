// draw.js: asks the server to draw blocks of a live view (POST render/blocks, web/live_blocks.py),
// with the page's own templates, so no block's markup is written in the script.
//
// One request in flight per turn: what is wanted meanwhile goes in the next one, which always
// sends the latest blocks, so the last answer applied is never older than the view. What the
// script fills in itself is left out of what it sends: Markdown text (the Markdown box holds it)
// and all but the start of an image's data (turnview.js appends the rest).

import { csrfToken } from "./csrf.js";
import { url } from "./urls.js";

const MARKDOWN_KINDS = new Set(["text", "reasoning"]);
const IMAGE_FIELDS = ["result", "image_b64"];
const IMAGE_HEAD = 64; // characters: enough for the server to tell the image's type
const RETRY_MS = 1000;

function sent(block, whole) {
  if (!whole) return { id: block.id, kind: block.kind, tool: block.tool, item_id: block.item_id, state: block.state };
  const copy = { ...block };
  if (MARKDOWN_KINDS.has(block.kind)) copy.text = "";
  for (const field of IMAGE_FIELDS) {
    if (typeof copy[field] === "string") copy[field] = copy[field].slice(0, IMAGE_HEAD);
  }
  return copy;
}

export class Drawer {
  // `place(result)`: entries to put in; `notice(html)`: the line under the answer.
  constructor(place, notice) {
    this.place = place;
    this.notice = notice;
    this.wanted = new Set();
    this.meta = null;
    this.busy = false;
    this.closed = false;
    this.source = null;
    this.waiting = []; // resolvers of idle()
  }

  // Resolves once nothing is wanted or in flight (or after `ms`).
  idle(ms) {
    if (!this.busy && !this.wanted.size && !this.meta) return Promise.resolve();
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      setTimeout(resolve, ms);
    });
  }

  want(ids, source) {
    for (const id of ids) this.wanted.add(id);
    this.source = source;
    this.kick();
  }

  wantNotice(meta, source) {
    this.meta = meta;
    this.source = source;
    this.kick();
  }

  close() {
    this.closed = true;
  }

  kick() {
    if (this.busy || this.closed || (!this.wanted.size && !this.meta)) return;
    this.busy = true;
    queueMicrotask(() => this.draw());
  }

  async draw() {
    const ids = [...this.wanted];
    const meta = this.meta;
    this.wanted.clear();
    this.meta = null;
    const blocks = this.source.blocks();
    const wanted = new Set(ids);
    // A wanted block's entry needs its whole group (a reasoning item and its parts).
    const groups = new Set(blocks.filter((b) => wanted.has(b.id)).map((b) => b.item_id ?? b.id));
    const body = {
      blocks: blocks.map((b) => sent(b, wanted.has(b.id) || groups.has(b.item_id ?? b.id))),
      entries: ids,
      thought_s: this.source.thoughtS(),
      ...(meta ? { meta } : {}),
    };
    let retry = false;
    let wait = RETRY_MS;
    try {
      const response = await fetch(url("renderBlocks"), {
        method: "POST", credentials: "same-origin", body: JSON.stringify(body),
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      });
      if (response.ok) {
        const result = await response.json();
        if (!this.closed) {
          this.place(result);
          if (typeof result.notice === "string") this.notice(result.notice);
        }
      } else if (response.status === 429) { // drawing too often: again once the server allows it
        retry = true;
        wait = Math.max(RETRY_MS, 1000 * (Number(response.headers.get("Retry-After")) || 0));
      } else {
        retry = response.status >= 500; // a block the server will not draw waits for the end
      }
    } catch {
      retry = true; // offline: the socket reconnects too, and the next snapshot asks again
    }
    if (retry) {
      for (const id of ids) this.wanted.add(id);
      if (meta && !this.meta) this.meta = meta;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
    this.busy = false;
    this.kick();
    if (!this.busy) for (const resolve of this.waiting.splice(0)) resolve();
  }
}
