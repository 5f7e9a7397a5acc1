// turnview.js: keeps one turn's answer box in step with its view, cheaply.
//
// A snapshot renders every block once. After that only changed blocks are touched, and a growing
// Markdown text (an answer, a reasoning summary) goes through a MarkdownStream: paragraphs that
// are final are parsed and inserted once, and only the live tail's nodes are replaced per frame,
// so the cost of a frame follows the size of the tail, not of the answer. The DOM that results is
// the one `renderBlocks` would produce for the whole view.

import { MarkdownStream } from "./markdown.js";
import { groupBlocks, isReasoningItem, reasoningTitle, renderEntry, renderPart, sourcesHtml } from "./render.js";

const template = document.createElement("template");

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
  }

  show(text, reset) {
    text = text || "";
    if (text === this.text) return;
    // A `set` at a part's end usually repeats the text it had grown to: keep what is rendered.
    if (reset && !(this.text !== null && text.startsWith(this.text))) {
      this.stream.reset();
      this.element.textContent = "";
      this.tail = [];
    }
    this.text = text;
    const [fresh, tail] = this.stream.update(text);
    for (const node of this.tail) node.remove();
    if (fresh) this.element.appendChild(fragment(fresh));
    const nodes = fragment(tail);
    this.tail = Array.from(nodes.childNodes);
    this.element.appendChild(nodes);
  }
}

export class TurnView {
  constructor(box, { thoughtS = null } = {}) {
    this.box = box;
    this.thoughtS = thoughtS;
    this.boxes = new Map(); // block id -> MarkdownBox
    this.sources = new Map(); // text block id -> its annotations, as JSON
    this.firstItem = null; // the first reasoning item's id: the one titled with the time
  }

  element(id) {
    return this.box.querySelector(`[data-block-id="${CSS.escape(id)}"]`);
  }

  // Everything from scratch (a snapshot).
  reset(blocks) {
    this.boxes.clear();
    this.sources.clear();
    const entries = groupBlocks(blocks, this.thoughtS);
    this.firstItem = entries.find((e) => e.kind === "reasoning")?.id ?? null;
    this.box.innerHTML = entries.map((entry) => renderEntry(entry, "")).join("");
    for (const block of blocks) this.fill(block, true);
  }

  // One block changed (added, appended to or set); `reset` when its text was replaced.
  update(block, reset) {
    if (!this.element(block.id)) this.mount(block);
    this.fill(block, reset);
  }

  mount(block) {
    if (block.kind === "reasoning" && !isReasoningItem(block)) {
      const item = CSS.escape(String(block.item_id));
      const group = this.box.querySelector(`.block-reasoning[data-item-id="${item}"] [data-parts]`);
      if (group) { group.appendChild(fragment(renderPart(block, ""))); return; }
    } else if (isReasoningItem(block) && this.firstItem === null) {
      this.firstItem = block.id;
    }
    this.box.appendChild(fragment(renderBlocksFor([block], this)));
  }

  titleFor(item) {
    return reasoningTitle(item, item.id === this.firstItem ? this.thoughtS : null);
  }

  fill(block, reset) {
    const element = this.element(block.id);
    if (!element) return;
    if (block.kind === "text" || (block.kind === "reasoning" && !isReasoningItem(block))) {
      let box = this.boxes.get(block.id);
      if (!box) { box = new MarkdownBox(element.querySelector(".md")); this.boxes.set(block.id, box); }
      box.show(block.text, reset);
      if (block.kind === "text") this.fillSources(block, element);
    } else if (isReasoningItem(block)) {
      const summary = element.querySelector("summary");
      const title = this.titleFor(block);
      if (summary.textContent !== title) summary.textContent = title;
    } else {
      const open = element.tagName === "DETAILS" && element.open;
      element.replaceWith(fragment(renderEntry(block)));
      if (open) this.element(block.id).open = true;
    }
  }

  fillSources(block, element) {
    const key = JSON.stringify(block.annotations || []);
    if (this.sources.get(block.id) === key) return;
    this.sources.set(block.id, key);
    const old = element.querySelector(":scope > .sources");
    if (old) old.remove();
    const html = sourcesHtml(block);
    if (html) element.appendChild(fragment(html));
  }

  // The first reasoning item's title once the time to the first text is known.
  setThought(seconds, blocks) {
    if (this.thoughtS === seconds) return;
    this.thoughtS = seconds;
    const item = blocks.find((b) => b.id === this.firstItem);
    if (item) this.fill(item, false);
  }
}

function renderBlocksFor(blocks, view) {
  return groupBlocks(blocks, null).map((entry) => {
    if (entry.kind === "reasoning") entry.title = view.titleFor(entry);
    return renderEntry(entry, "");
  }).join("");
}
