// markdown.js: safe Markdown for model output, the same algorithm as responses_app/markdown.py.
//
// Every line is escaped first; only then does a small subset become markup (paragraphs, bold, em,
// code, fences, lists, small headings, http(s) links). A text still being written (`partial`)
// never shows half-built syntax: see tidyPartial. Pure: no DOM, importable from Node.
// `MarkdownStream` renders a growing text incrementally: text up to the last blank line outside
// a fence is final (the renderer flushes every construct there), so it is rendered once; only the
// tail after it is rendered again per frame. Concatenating the pieces equals rendering the whole.

export function esc(value) {
  return String(value ?? "").replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;").replace(/'/g, "&#x27;");
}

const FENCE = /^\s*(```|~~~)\s*([\w+#.-]*)\s*$/;
const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBER = /^\s*\d{1,9}[.)]\s+(.*)$/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const CODE = /`([^`\n]+)`/g;
const LINK = /\[([^[\]\n]+)\]\((https?:\/\/[^\s()<>]+)\)/gi;
const BOLD = /\*\*(?=\S)(.+?)(?<=\S)\*\*/g;
const EM_STAR = /(?<![*\p{L}\p{N}_])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*\p{L}\p{N}_])/gu;
const EM_UNDER = /(?<![_\p{L}\p{N}])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![_\p{L}\p{N}])/gu;
const TOKEN = /\u0000(\d+)\u0000/g;
const SAFE_URL = /^https?:\/\/[^\s"'<>`]+$/i;
// What a partial last line may be in the middle of: a fence being typed, a link, an emphasis.
const FENCE_TYPED = /^\s*(?:(?:```|~~~)\s*[\w+#.-]*|`{1,2}|~{1,2})\s*$/;
const OPEN_LINK = /\[([^[\]\n]*)(?:\](?:\([^()\s]*)?)?$/d;
const BOLD_OPEN = /\*\*(?=\S)/g;
const EM_STAR_OPEN = /(?<![*\p{L}\p{N}_])\*(?=[^\s*])/gu;
const EM_UNDER_OPEN = /(?<![_\p{L}\p{N}])_(?=[^\s_])/gu;
const TRAILING_MARKS = /(?:\*+|(?<![\p{L}\p{N}_])_+)$/u;
const COPY_BUTTON = '<button type="button" class="copy" data-copy="code" aria-label="Copy code"></button>';

export function safeUrl(url) {
  return typeof url === "string" && SAFE_URL.test(url.trim()) ? url.trim() : null;
}

function emphasis(html) {
  return html.replace(BOLD, "<strong>$1</strong>").replace(EM_STAR, "<em>$1</em>").replace(EM_UNDER, "<em>$1</em>");
}

export function renderInline(text) {
  const stash = [];
  const keep = (html) => { stash.push(html); return `\u0000${stash.length - 1}\u0000`; };
  let out = esc(String(text).replace(/\u0000/g, ""));
  out = out.replace(CODE, (_, code) => keep(`<code>${code}</code>`));
  out = out.replace(LINK, (_, label, url) =>
    keep(`<a href="${url}" rel="noopener noreferrer nofollow" target="_blank">${emphasis(label)}</a>`));
  out = emphasis(out);
  while (/\u0000\d+\u0000/.test(out)) out = out.replace(TOKEN, (_, n) => stash[Number(n)]);
  return out;
}

const mask = (text, pattern) => text.replace(pattern, (m) => "\u0001".repeat(m.length));

// The last line of a text still being written, without the markers of what has not closed: a code
// span is held back whole, a link shows its label and holds its address, an emphasis loses its marker.
export function tidyPartial(line) {
  if (!/[*_`[]/.test(line)) return line; // nothing that can open
  let masked = mask(line, CODE);
  const tick = masked.indexOf("`");
  if (tick >= 0) { line = line.slice(0, tick); masked = masked.slice(0, tick); }
  masked = mask(masked, LINK);
  const link = OPEN_LINK.exec(masked);
  if (link) {
    const [from, to] = link.indices[1];
    line = line.slice(0, link.index) + line.slice(from, to);
    masked = masked.slice(0, link.index) + masked.slice(from, to);
  }
  const drop = new Set();
  for (const [closed, opener, width] of [[BOLD, BOLD_OPEN, 2], [EM_STAR, EM_STAR_OPEN, 1], [EM_UNDER, EM_UNDER_OPEN, 1]]) {
    masked = mask(masked, closed);
    const before = drop.size;
    for (const m of masked.matchAll(opener)) for (let i = m.index; i < m.index + width; i++) drop.add(i);
    if (drop.size !== before) masked = masked.split("").map((c, i) => (drop.has(i) ? "\u0001" : c)).join("");
  }
  const trailing = TRAILING_MARKS.exec(masked);
  if (trailing) for (let i = trailing.index; i < masked.length; i++) drop.add(i);
  return drop.size ? line.split("").filter((_, i) => !drop.has(i)).join("") : line;
}

export function renderMarkdown(text, partial = false) {
  const lines = String(text || "").replace(/\r\n?/g, "\n").split("\n");
  const last = lines.length - 1;
  const out = [];
  const paragraph = [];
  let items = [];
  let listTag = "";
  const flushParagraph = () => {
    if (paragraph.length) out.push(`<p>${paragraph.map(renderInline).join("<br>")}</p>`);
    paragraph.length = 0;
  };
  const flushList = () => {
    if (items.length) out.push(`<${listTag}>${items.map((i) => `<li>${i}</li>`).join("")}</${listTag}>`);
    items = [];
    listTag = "";
  };
  for (let i = 0; i < lines.length; i++) {
    let line = lines[i];
    if (partial && i === last) line = FENCE_TYPED.test(line) ? "" : tidyPartial(line);
    const fence = FENCE.exec(line);
    if (fence) {
      flushParagraph(); flushList();
      const code = [];
      i++;
      for (; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) {
        const typed = lines[i].trim();
        if (!(partial && i === last && typed && fence[1].startsWith(typed))) code.push(lines[i]);
      }
      const cls = fence[2] ? ` class="language-${esc(fence[2])}"` : "";
      out.push(`<div class="code-block"><pre><code${cls}>${esc(code.join("\n"))}</code></pre>${COPY_BUTTON}</div>`);
      continue;
    }
    const bullet = BULLET.exec(line);
    const number = bullet ? null : NUMBER.exec(line);
    const heading = HEADING.exec(line);
    if (bullet || number) {
      flushParagraph();
      const tag = bullet ? "ul" : "ol";
      if (listTag && listTag !== tag) flushList();
      listTag = tag;
      items.push(renderInline((bullet || number)[1]));
    } else if (!line.trim()) {
      flushParagraph(); flushList();
    } else if (heading) {
      flushParagraph(); flushList();
      const level = Math.min(heading[1].length + 2, 6);
      out.push(`<h${level} class="md-h">${renderInline(heading[2])}</h${level}>`);
    } else if (items.length && /^( {2}|\t)/.test(line)) {
      items[items.length - 1] += " " + renderInline(line.trim());
    } else {
      flushList();
      paragraph.push(line);
    }
  }
  flushParagraph(); flushList();
  return out.join("");
}

export class MarkdownStream {
  constructor() { this.reset(); }

  reset() {
    this.stable = 0; // text before this offset is rendered and final
    this.scanned = 0; // complete lines before this offset have been classified
    this.fence = null; // the open fence's marker while scanning inside one
  }

  // Returns [html of newly final text, html of the live tail]. `text` must extend the text of the
  // previous call; after any other change, call reset() first. `partial`: the text is still being
  // written (its last line may be unfinished).
  update(text, partial = false) {
    if (text.includes("\r")) { // line ends the scan below does not model: render it whole
      const html = renderMarkdown(text.slice(this.stable), partial);
      return ["", html];
    }
    let pos = this.scanned;
    let cut = this.stable;
    for (;;) {
      const end = text.indexOf("\n", pos);
      if (end < 0) break;
      const line = text.slice(pos, end);
      if (this.fence !== null) {
        if (line.trim().startsWith(this.fence)) this.fence = null;
      } else {
        const fence = FENCE.exec(line);
        if (fence) this.fence = fence[1];
        else if (!line.trim()) cut = end + 1;
      }
      pos = end + 1;
    }
    this.scanned = pos;
    const fresh = cut > this.stable ? renderMarkdown(text.slice(this.stable, cut)) : "";
    this.stable = cut;
    return [fresh, renderMarkdown(text.slice(cut), partial)];
  }
}
