// turnview.js: keeps one turn's answer box in step with its live view, cheaply.
//
// The server draws every block (draw.js asks it, through the page's own templates); this module
// only appends text and changes state. A block that is added, or whose fields other than its text
// change, is drawn again; its new entry replaces the old one and keeps the live text boxes in it.
// A growing text goes into the box its entry holds: Markdown (an answer, a reasoning summary)
// through a MarkdownStream, so paragraphs that are final are parsed and inserted once and only the
// live tail is replaced per frame, its math typeset before it goes in (math.js); plain text (a
// refusal, a transcript, a tool's code) as it is.

import { Drawer } from "./draw.js";
import { MarkdownStream } from "./markdown.js";
import { typeset } from "./math.js";
import { vocab } from "./vocab.js";

const template = document.createElement("template");

// A <details> the reader opened stays open when its block is drawn again. One the server opened
// for a question (data-auto-open) closes with the server's drawing once the question is answered,
// in every tab alike, and stays as the reader left it while the question is open.
function keepOpen(old, fresh) {
  const auto = old.hasAttribute("data-auto-open");
  if (auto && fresh.hasAttribute("data-auto-open")) fresh.open = old.open;
  else if (old.open && !auto) fresh.open = true;
}

// The same for a whole turn drawn again (its server rendering once finished), block by block.
export function keepOpenBlocks(old, fresh) {
  for (const details of old.querySelectorAll("details[data-block-id]")) {
    const again = fresh.querySelector(`details[data-block-id="${CSS.escape(details.dataset.blockId)}"]`);
    if (again) keepOpen(details, again);
  }
}

// Where the reader's focus is inside an entry or a turn about to be drawn again. The function it
// returns puts the focus on the same control of the new drawing: the same block, the same kind of
// element, the same position among them; a keyboard reader keeps their place.
export function focusWithin(old) {
  const active = document.activeElement;
  if (!active || !old.contains(active)) return () => {};
  if (active === old) return (fresh) => fresh.focus({ preventScroll: true });
  const block = active.closest("[data-block-id]");
  const id = block && block !== old && old.contains(block) ? block.dataset.blockId : null;
  const scope = id === null ? old : block;
  const index = Array.from(scope.querySelectorAll(active.tagName)).indexOf(active);
  return (fresh) => {
    const within = id === null ? fresh : fresh.querySelector(`[data-block-id="${CSS.escape(id)}"]`);
    const again = within && within.querySelectorAll(active.tagName)[index];
    if (again) again.focus({ preventScroll: true });
  };
}

function fragment(html) {
  template.innerHTML = html;
  return template.content;
}

class MarkdownBox {
  constructor(element) {
    this.element = element;
    this.stream = new MarkdownStream();
    this.tail = [];
    this.text = null;
    this.partial = null;
  }

  show(text, reset, partial) {
    text = text || "";
    if (text === this.text && partial === this.partial) return;
    // A `set` at a part's end usually repeats the text it had grown to: keep what is rendered.
    if (this.text === null || (reset && !text.startsWith(this.text))) {
      this.stream.reset();
      this.element.textContent = "";
      this.tail = [];
    }
    this.text = text;
    this.partial = partial;
    const [fresh, tail] = this.stream.update(text, partial);
    for (const node of this.tail) node.remove();
    if (fresh) this.element.appendChild(typeset(fragment(fresh)));
    const nodes = typeset(fragment(tail)); // the tail's formulas come from math.js's cache
    this.tail = Array.from(nodes.childNodes);
    this.element.appendChild(nodes);
  }
}

export class TurnView {
  // `blocks()`: the live view's blocks; `drawn()`: called after entries from the server went in.
  constructor(box, { thoughtS = null, blocks = () => [], drawn = () => {}, notice = () => {} } = {}) {
    this.box = box;
    this.thoughtS = thoughtS;
    this.blocks = blocks;
    this.boxes = new Map(); // block id -> MarkdownBox
    this.drawer = new Drawer((result) => this.place(result), notice);
    this.drawn = drawn;
  }

  element(id) {
    return this.box.querySelector(`[data-block-id="${CSS.escape(id)}"]`);
  }

  // A snapshot: every text now, every entry drawn anew.
  reset() {
    const blocks = this.blocks();
    for (const block of blocks) this.fill(block, true);
    this.drawer.want(blocks.map((b) => b.id), this.request());
  }

  // One block changed: its text (`replaced` when not appended to), or more (`structural`).
  update(block, replaced, structural) {
    const filled = this.fill(block, replaced);
    if (structural || !filled) this.drawer.want([block.id], this.request());
  }

  // The line under the answer (an error, why it stopped early), worded by the server.
  notice(meta) {
    this.drawer.wantNotice({ error: meta.error || null, incomplete_reason: meta.incomplete_reason || "" },
      this.request());
  }

  // The first reasoning item's title once the time to the first text is known.
  setThought(seconds) {
    if (this.thoughtS === seconds) return;
    this.thoughtS = seconds;
    const item = this.blocks().find((b) => b.kind === "reasoning");
    if (item) this.drawer.want([item.id], this.request());
  }

  // Resolves once the entries asked of the server are in (or after `ms`).
  idle(ms) {
    return this.drawer.idle(ms);
  }

  close() {
    this.drawer.close();
  }

  request() {
    return { blocks: this.blocks, thoughtS: () => this.thoughtS };
  }

  // Shows a block's text in the box its entry holds; false when it has text and no box yet.
  fill(block, replaced) {
    const element = this.element(block.id);
    if (!element) return false;
    const md = element.querySelector(":scope > .md");
    if (md) {
      let box = this.boxes.get(block.id);
      if (!box || box.element !== md) { box = new MarkdownBox(md); this.boxes.set(block.id, box); }
      box.show(block.text, replaced, !vocab.doneStates.has(block.state));
      return true;
    }
    const plain = element.querySelector("[data-text]");
    if (plain) {
      if (plain.textContent !== (block.text || "")) plain.textContent = block.text || "";
      return true;
    }
    return !block.text;
  }

  // Entries drawn by the server go in: each replaces its old entry (keeping the live Markdown
  // boxes and an opened <details>) or goes in reading order; entries of no block any more go.
  place({ order, entries }) {
    const byId = new Map(this.blocks().map((b) => [b.id, b]));
    for (const id of order) {
      if (entries[id] === undefined) continue;
      const fresh = typeset(fragment(entries[id])).firstElementChild;
      const old = this.entry(id);
      if (old) {
        const refocus = focusWithin(old);
        this.keepLive(old, fresh);
        old.replaceWith(fresh);
        refocus(fresh);
      } else {
        this.insert(fresh, id, order);
      }
      this.fillImages(fresh, byId);
      for (const inner of [fresh, ...fresh.querySelectorAll("[data-block-id]")]) {
        const block = byId.get(inner.dataset.blockId);
        if (block) this.fill(block, false);
      }
    }
    const listed = new Set(order);
    for (const child of this.box.querySelectorAll(":scope > [data-block-id]")) {
      if (!listed.has(child.dataset.blockId) && !byId.has(child.dataset.blockId)) child.remove();
    }
    this.drawn();
  }

  entry(id) {
    return this.box.querySelector(`:scope > [data-block-id="${CSS.escape(id)}"]`);
  }

  insert(fresh, id, order) {
    const at = order.indexOf(id);
    for (let j = at - 1; j >= 0; j--) {
      const before = this.entry(order[j]);
      if (before) { before.after(fresh); return; }
    }
    for (let j = at + 1; j < order.length; j++) {
      const after = this.entry(order[j]);
      if (after) { after.before(fresh); return; }
    }
    this.box.appendChild(fresh);
  }

  keepLive(old, fresh) {
    for (const md of fresh.querySelectorAll(".md")) {
      const box = this.boxes.get(md.parentElement.dataset.blockId);
      if (box && old.contains(box.element)) md.replaceWith(box.element);
    }
    if (old.tagName === "DETAILS") keepOpen(old, fresh);
  }

  // The server drew an image from the start of its data (draw.js sends no more): the rest of the
  // data goes in here, as text appended to its address.
  fillImages(fresh, byId) {
    for (const img of fresh.querySelectorAll("img[data-field]")) {
      const owner = byId.get(img.closest("[data-block-id]").dataset.blockId);
      const data = owner && owner[img.dataset.field];
      const head = img.getAttribute("src").split(",")[0];
      if (typeof data === "string") img.src = `${head},${data}`;
    }
  }
}
