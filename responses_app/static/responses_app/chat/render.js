// render.js: a view's blocks as HTML, exactly as templates/responses_app/_block.html renders them
// (tests/test_render_parity.py compares the two over a corpus of every block kind). Pure: no DOM.

import { esc, renderMarkdown, safeUrl } from "./markdown.js";
import { vocab } from "./vocab.js";

export function badgeKey(status, view) {
  if (vocab.terminalBadges[status]) return vocab.terminalBadges[status];
  if (status === vocab.pending) return "queued";
  const meta = (view && view.meta) || {};
  if (vocab.terminalBadges[meta.status]) return vocab.terminalBadges[meta.status];
  if (meta.status === "queued") return "queued";
  if (meta.status === "waiting_for_approval") return "waiting_approval";
  const blocks = (view && view.blocks) || [];
  if (blocks.some((b) => b.kind === "tool" && b.state === "searching")) return "searching";
  const last = blocks[blocks.length - 1];
  if (last && last.kind === "tool" && vocab.callerTools.has(last.tool) && vocab.doneStates.has(last.state)) {
    return "waiting_tool";
  }
  if (meta.activity === "tool" && last && last.kind === "tool" && !vocab.doneStates.has(last.state)) {
    return "working"; // no text for a while, but a tool runs and events flow
  }
  const visible = blocks.some((b) => vocab.visibleKinds.has(b.kind) && b.text);
  if (!visible || (last && last.kind === "reasoning")) return "thinking";
  return "in_progress";
}

export function badgeIsFinal(key) {
  return Object.values(vocab.terminalBadges).includes(key);
}

// The incomplete reason refined by the view's safety notice, as relay_tags.reason_key does it.
export function reasonKey(reason, view) {
  const notice = ((view && view.blocks) || []).find((b) => b.kind === "compaction" && b.tool === "content_filter");
  if (!notice) return reason;
  const key = `${reason}:${notice.state}`;
  return Object.hasOwn(vocab.reasonSentences, key) ? key : reason;
}

// The line under an ended answer, as relay_tags.turn_notice words it: its error, and why it stopped
// early (as the view's safety notice stands).
export function noticeHtml(error, reason, view = null) {
  const parts = [];
  if (error && typeof error === "object") {
    const code = String(error.code || "");
    const label = vocab.errorLabels[code] || code || "error";
    const message = String(error.message || "");
    parts.push(`<strong>${esc(label)}</strong>${message ? esc(": " + message) : ""}`);
  }
  if (reason) parts.push(esc(vocab.reasonSentences[reasonKey(reason, view)] || `Stopped early: ${reason}`));
  return parts.join(" ");
}

export function toolState(state) {
  return vocab.toolStates[state || ""] || state || "";
}

export const isReasoningItem = (block) => block.kind === "reasoning" && block.tool === "reasoning";

export function reasoningTitle(item, thoughtS) {
  if (!vocab.doneStates.has(item.state) && item.state !== "incomplete" && item.state !== "failed") return "Thinking…";
  return thoughtS === null || thoughtS === undefined ? "Thought" : `Thought for ${thoughtS} s`;
}

// Blocks in reading order with each reasoning item's parts inside it (relay_tags.group_blocks).
export function groupBlocks(blocks, thoughtS) {
  const out = [];
  const items = new Map();
  for (const block of blocks || []) {
    if (isReasoningItem(block)) {
      const entry = { ...block, parts: [] };
      items.set(String(block.item_id || block.id), entry);
      out.push(entry);
    } else if (block.kind === "reasoning") {
      let owner = items.get(String(block.item_id));
      if (!owner) {
        owner = { id: `group-${block.id}`, kind: "reasoning", tool: "reasoning", item_id: block.item_id, state: block.state, parts: [] };
        items.set(String(block.item_id), owner);
        out.push(owner);
      }
      owner.parts.push(block);
    } else {
      out.push(block);
    }
  }
  let first = true;
  for (const entry of out) {
    if (entry.kind === "reasoning") {
      entry.title = reasoningTitle(entry, first ? thoughtS : null);
      first = false;
    }
  }
  return out;
}

export function citations(block) {
  const seen = new Set();
  const found = [];
  for (const note of block.annotations || []) {
    if (!note || typeof note !== "object" || Array.isArray(note)) continue;
    if (note.type === "url_citation") {
      const url = safeUrl(note.url);
      if (url && !seen.has(url)) { seen.add(url); found.push({ kind: "url", url, title: String(note.title || url) }); }
    } else if (note.type === "file_citation" || note.type === "container_file_citation") {
      const name = String(note.filename || note.file_id || "file");
      if (!seen.has(name)) { seen.add(name); found.push({ kind: "file", title: name }); }
    }
  }
  return found;
}

// The "add" op's reducer (the same as apply_op in streaming/view.py): an existing block takes the
// fields; a new one goes right after the block named by "after" (not kept), else at the end.
// Returns "existing", "appended" or "inserted".
export function noticeSentence(block) {
  return vocab.noticeSentences[block.state] || vocab.noticeSentences.withheld || "";
}

export function toolTitle(block) {
  const tool = String(block.tool || "tool");
  const spaced = tool.replace(/_/g, " ");
  let title = vocab.toolNames[tool] || spaced.charAt(0).toUpperCase() + spaced.slice(1).toLowerCase();
  if (block.name) title += block.server_label ? ` ${block.server_label}.${block.name}` : ` ${block.name}`;
  if (block.query) title += `: “${block.query}”`;
  else if (block.queries && block.queries.length) title += ": " + block.queries.slice(0, 3).map((q) => `“${q}”`).join(", ");
  return title;
}

const isEmpty = (value) => value === undefined || value === null || value === ""
  || (Array.isArray(value) && !value.length)
  || (typeof value === "object" && !Array.isArray(value) && !Object.keys(value).length);

export function toolDetails(block) {
  const details = [];
  for (const key of ["arguments", "input", "commands", "output", "result", "outputs", "operation", "error"]) {
    let value = block[key];
    if (isEmpty(value)) continue;
    if (key === "result" && imageSrc(block)) continue;
    if (typeof value === "string") {
      try { value = JSON.stringify(JSON.parse(value), null, 2); } catch { /* keep the text */ }
    } else {
      value = JSON.stringify(value, null, 2);
    }
    details.push([key, value]);
  }
  return details;
}

const IMAGE_PREFIXES = [["iVBOR", "image/png"], ["/9j/", "image/jpeg"], ["UklGR", "image/webp"], ["R0lGOD", "image/gif"]];

export function imageSrc(block) {
  const data = block.result || block.image_b64; // the final image once there is one, else the latest partial
  if (typeof data !== "string" || !data || data.length > 8000000 || !/^[A-Za-z0-9+/=\s]+$/.test(data)) return "";
  const found = IMAGE_PREFIXES.find(([prefix]) => data.startsWith(prefix));
  return found ? `data:${found[1]};base64,${data}` : "";
}

export function sourcesHtml(block) {
  const cites = citations(block);
  if (!cites.length) return "";
  const items = cites.map((c) => c.kind === "url"
    ? `<li><a href="${esc(c.url)}" rel="noopener noreferrer nofollow" target="_blank">${esc(c.title)}</a></li>`
    : `<li><span class="file-cite">${esc(c.title)}</span></li>`).join("");
  return `<div class="sources"><span class="sources-label">Sources</span><ol>${items}</ol></div>`;
}

// `md` is the inner HTML of the Markdown box; the live renderer passes "" and streams it in.
export function renderPart(part, md = renderMarkdown(part.text)) {
  return `<div class="reasoning-part" data-block-id="${esc(part.id)}"><div class="md">${md}</div></div>`;
}

export function renderEntry(block, md = null) {
  const id = esc(block.id);
  switch (block.kind) {
    case "text":
      return `<div class="block block-text" data-block-id="${id}"><div class="md">${md ?? renderMarkdown(block.text)}</div>${sourcesHtml(block)}</div>`;
    case "refusal":
      return `<div class="block block-refusal" data-block-id="${id}"><span class="tag">Refusal</span> ${esc(block.text)}</div>`;
    case "reasoning": {
      const parts = (block.parts || []).map((p) => renderPart(p, md === null ? undefined : "")).join("");
      return `<details class="block block-reasoning" data-block-id="${id}" data-item-id="${esc(block.item_id || block.id)}"><summary>${esc(block.title)}</summary><div class="reasoning-parts" data-parts>${parts}</div></details>`;
    }
    case "image": {
      const src = imageSrc(block);
      const img = src ? `<button type="button" class="image-zoom" aria-label="Enlarge image"><img src="${esc(src)}" alt="Generated image"></button>` : "";
      return `<figure class="block block-image" data-block-id="${id}">${img}<figcaption>Image generation · ${esc(toolState(block.state))}</figcaption></figure>`;
    }
    case "audio":
      return `<div class="block block-audio" data-block-id="${id}"><span class="tag">Audio transcript</span> ${esc(block.text)}</div>`;
    case "compaction":
      if (block.tool === "content_filter") {
        const state = esc(toolState(block.state));
        return `<div class="block block-notice" data-block-id="${id}" data-state="${state}" role="note"><span class="tag">${state}</span> ${esc(noticeSentence(block))}</div>`;
      }
    // falls through: a compaction item of the API's reads as a tool block
    default: {
      const state = esc(toolState(block.state));
      const code = block.text ? `<pre><code>${esc(block.text)}</code></pre>` : "";
      const details = toolDetails(block).map(([label, value]) =>
        `<div class="tool-detail"><span class="muted small">${esc(label)}</span><pre>${esc(value)}</pre></div>`).join("");
      const awaiting = block.state === "awaiting_approval";
      const approval = awaiting && block.tool === "mcp_approval_request"
        ? `<div class="approval" data-approval-id="${esc(block.item_id)}"><button type="button" data-approve="true">Approve</button> <button type="button" data-approve="false">Deny</button></div>`
        : "";
      return `<details class="block block-tool" data-block-id="${id}" data-state="${state}"${awaiting ? " open" : ""}><summary><span class="tool-title">${esc(toolTitle(block))}</span> <span class="tool-state state-${state}">${state}</span></summary>${code}${details}${approval}</details>`;
    }
  }
}

export function renderBlocks(blocks, thoughtS = null) {
  return groupBlocks(blocks, thoughtS).map((entry) => renderEntry(entry)).join("");
}
