// markdown.js: safe Markdown for model output, the same algorithm as responses_app/markdown.py.
//
// Every line is escaped first; only then does a small subset become markup (paragraphs, bold, em,
// code, fences (coloured by token for a few languages: highlight.js), lists and task lists, small
// headings, one level of `>` quotes, pipe tables, `$math$` as code, http(s) links). A text still
// being written (`partial`)
// never shows half-built syntax: see tidyPartial. Pure: no DOM, importable from Node.
// `MarkdownStream` renders a growing text incrementally: text up to the last blank line outside
// a fence is final (the renderer flushes every construct there), so it is rendered once; only the
// tail after it is rendered again per frame. Concatenating the pieces equals rendering the whole.

import { highlight } from "./highlight.js";

export function esc(value) {
  return String(value ?? "").replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;").replace(/'/g, "&#x27;");
}

const FENCE_OPEN = /^\s*(```|~~~)/;
const LANG = /^[\w+#.-]*$/;
const BULLET_OPEN = /^\s*[-*+]\s+/;
const NUMBER_OPEN = /^\s*\d{1,9}[.)]\s+/;
const HEADING_OPEN = /^\s{0,3}(#{1,6})\s+/;
const LINE_END = /[\n\r\u2028\u2029]/; // what `.` does not match
const CODE = /`([^`\n]+)`/g;
const LINK = /\[([^[\]\n]+)\]\((https?:\/\/[^\s()<>]+)\)/gi;
// An emphasis marker: where one may open, where one may close (zero-width, so every position is
// found, overlapping ones too), and its width.
const BOLD = [/(?=\*\*\S)/g, /(?<=\S)(?=\*\*)/g, 2];
const EM_STAR = [/(?<![*\p{L}\p{N}_])(?=\*[^\s*])/gu, /(?<=[^\s*])(?=\*(?![*\p{L}\p{N}_]))/gu, 1];
const EM_UNDER = [/(?<![_\p{L}\p{N}])(?=_[^\s_])/gu, /(?<=[^\s_])(?=_(?![_\p{L}\p{N}]))/gu, 1];
const LINE_ENDS = /[\n\r\u2028\u2029]/g;
const WORD = /[\p{L}\p{N}_]/u;
const TOKEN = /\u0000(\d+)\u0000/g;
const SAFE_URL = /^https?:\/\/[^\s"'<>`]+$/i;
// What a partial last line may be in the middle of: a fence being typed, a link, an emphasis.
const FENCE_TYPED = /^(?:(?:```|~~~)\s*[\w+#.-]*|`{1,2}|~{1,2})$/;
const OPEN_LINK = /\[([^[\]\n]*)(?:\](?:\([^()\s]*)?)?$/d;
const BOLD_OPEN = /\*\*(?=\S)/g;
const EM_STAR_OPEN = /(?<![*\p{L}\p{N}_])\*(?=[^\s*])/gu;
const EM_UNDER_OPEN = /(?<![_\p{L}\p{N}])_(?=[^\s_])/gu;
// `$$display$$` and `$inline$` math: no space inside either end, no digit after (`$5 and $10`).
const MATH_DISPLAY = /\$\$([^$ \t\n](?:[^$\n]*[^$ \t\n])?)\$\$/g;
const MATH = /\$([^$ \t\n](?:[^$\n]*[^$ \t\n])?)\$(?![0-9])/g;
const MATH_OPEN = /\$(?=[^ \t\n0-9])/g;
const MATH_FENCE = /^[ \t]*\$\$[ \t]*$/; // a `$$` line alone opens (and closes) display math
const QUOTE = /^[ \t]{0,3}> ?/;
const TASK = /^\[([ xX])\][ \t]+/;
const TASK_TYPED = /^([ \t]*[-*+][ \t]+)\[[ xX]?\]?$/;
const PIPE_LED = /^[ \t]*\|/;
const DELIMITER_TYPED = /^(?:[ \t]*\|[ \t|:-]*)?$/;
const DELIMITER_CELL = /^:?-+:?$/;
const EDGE_SPACE = /^[ \t]+|[ \t]+$/g;
const COPY_BUTTON = '<button type="button" class="copy" data-copy="code" aria-label="Copy code"></button>';

export function safeUrl(url) {
  return typeof url === "string" && SAFE_URL.test(url.trim()) ? url.trim() : null;
}

const starts = (text, pattern) => Array.from(text.matchAll(pattern), (m) => m.index);

// Where a marker pairs up, as `open(.+?)close` substituted left to right pairs it (a closer is the
// first one after the opener, on the same line), found in one pass: [opener, closer] offsets.
function spans(text, [opens, closes, width]) {
  const found = [];
  const closers = starts(text, closes);
  if (!closers.length) return found;
  const breaks = starts(text, LINE_ENDS);
  let c = 0, b = 0, end = 0;
  for (const start of starts(text, opens)) {
    if (start < end) continue;
    while (c < closers.length && closers[c] <= start + width) c++; // at least one character inside
    if (c === closers.length) break;
    while (b < breaks.length && breaks[b] < start) b++;
    if (b < breaks.length && breaks[b] < closers[c]) continue; // the first closer is on a later line
    found.push([start, closers[c]]);
    end = closers[c] + width;
  }
  return found;
}

function wrap(text, mark, tag) {
  const width = mark[2];
  const pieces = [];
  let at = 0;
  for (const [start, close] of spans(text, mark)) {
    pieces.push(text.slice(at, start), `<${tag}>`, text.slice(start + width, close), `</${tag}>`);
    at = close + width;
  }
  return pieces.length ? pieces.join("") + text.slice(at) : text;
}

function emphasis(html) {
  return wrap(wrap(wrap(html, BOLD, "strong"), EM_STAR, "em"), EM_UNDER, "em");
}

export function renderInline(text) {
  const stash = [];
  const keep = (html) => { stash.push(html); return `\u0000${stash.length - 1}\u0000`; };
  let out = esc(String(text).replace(/\u0000/g, ""));
  out = out.replace(CODE, (_, code) => keep(`<code>${code}</code>`));
  out = out.replace(MATH_DISPLAY, (_, tex) => keep(`<code class="md-math md-math-display">${tex}</code>`));
  out = out.replace(MATH, (_, tex) => keep(`<code class="md-math">${tex}</code>`));
  out = out.replace(LINK, (_, label, url) =>
    keep(`<a href="${url}" rel="noopener noreferrer nofollow" target="_blank">${emphasis(label)}</a>`));
  out = emphasis(out);
  while (/\u0000\d+\u0000/.test(out)) out = out.replace(TOKEN, (_, n) => stash[Number(n)]);
  return out;
}

function mask(text, found) {
  const pieces = [];
  let at = 0;
  for (const [start, end] of found) {
    pieces.push(text.slice(at, start), "\u0001".repeat(end - start));
    at = end;
  }
  return pieces.length ? pieces.join("") + text.slice(at) : text;
}

const matches = (text, pattern) => Array.from(text.matchAll(pattern), (m) => [m.index, m.index + m[0].length]);
const closed = (text, mark) => spans(text, mark).map(([start, close]) => [start, close + mark[2]]);

// Where a run of markers that may yet open something ends the line (its length if none).
function trailingMarks(masked) {
  let start = masked.length;
  if (masked.endsWith("*")) {
    while (start > 0 && masked[start - 1] === "*") start--;
    return start;
  }
  if (masked.endsWith("_")) {
    while (start > 0 && masked[start - 1] === "_") start--;
    const pair = start >= 2 && /[\uDC00-\uDFFF]/.test(masked[start - 1]) && /[\uD800-\uDBFF]/.test(masked[start - 2]);
    if (start === 0 || !WORD.test(masked.slice(start - (pair ? 2 : 1), start))) return start;
  }
  return masked.length;
}

// The last line of a text still being written, without the markers of what has not closed: a code
// span is held back whole, a link shows its label and holds its address, an emphasis loses its marker.
export function tidyPartial(line) {
  if (!/[*_`[$]/.test(line)) return line; // nothing that can open
  let masked = mask(line, matches(line, CODE));
  const tick = masked.indexOf("`");
  if (tick >= 0) { line = line.slice(0, tick); masked = masked.slice(0, tick); }
  masked = mask(masked, matches(masked, MATH_DISPLAY));
  masked = mask(masked, matches(masked, MATH));
  masked = mask(masked, matches(masked, LINK));
  const link = OPEN_LINK.exec(masked);
  if (link) {
    const [from, to] = link.indices[1];
    line = line.slice(0, link.index) + line.slice(from, to);
    masked = masked.slice(0, link.index) + masked.slice(from, to);
  }
  const drop = new Uint8Array(masked.length); // 1 where a marker is dropped
  let dropped = false;
  for (const start of starts(masked, MATH_OPEN)) { drop[start] = 1; dropped = true; } // math still open
  if (masked.endsWith("$")) {
    let start = masked.length;
    while (start > 0 && masked[start - 1] === "$") start--;
    drop.fill(1, start);
    dropped = true;
  }
  for (const [mark, opener, width] of [[BOLD, BOLD_OPEN, 2], [EM_STAR, EM_STAR_OPEN, 1], [EM_UNDER, EM_UNDER_OPEN, 1]]) {
    masked = mask(masked, closed(masked, mark));
    const hits = starts(masked, opener);
    for (const start of hits) drop.fill(1, start, start + width);
    if (hits.length) {
      dropped = true;
      masked = masked.split("").map((c, i) => (drop[i] ? "\u0001" : c)).join("");
    }
  }
  const trailing = trailingMarks(masked);
  if (trailing < masked.length) { dropped = true; drop.fill(1, trailing); }
  return dropped ? line.split("").filter((_, i) => !drop[i]).join("") : line;
}

// A fence line's marker and language: the marker, then at most a language word, both padded; or a
// `$$` line alone, which fences display math.
function fence(line) {
  const opened = FENCE_OPEN.exec(line);
  if (!opened) return MATH_FENCE.test(line) ? ["$$", ""] : null;
  const lang = line.slice(opened[0].length).trim();
  return LANG.test(lang) ? [opened[1], lang] : null;
}

// A list item's text (what `^\s*[-*+]\s+(.*)$` captures: `.` stops at a line end).
function listItem(line, open) {
  const opened = open.exec(line);
  if (!opened) return null;
  const rest = line.slice(opened[0].length);
  return LINE_END.test(rest) ? null : rest;
}

// A heading's level and text, without a closing run of `#` (`# Title ##`).
function heading(line) {
  const opened = HEADING_OPEN.exec(line);
  if (!opened) return null;
  let text = line.slice(opened[0].length).trimEnd();
  let end = text.length;
  while (end > 0 && text[end - 1] === "#") end--;
  text = text.slice(0, end).trimEnd();
  return LINE_END.test(text) ? null : [opened[1].length, text];
}

// A table row's cells: split at each `|` not escaped (`\|` is a pipe inside a cell), the row's
// outer pipes dropped, each cell without its padding.
function cells(line) {
  let row = line.replace(EDGE_SPACE, "");
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
  const found = [];
  let cell = "";
  for (let at = 0; at < row.length; at++) {
    if (row[at] === "\\" && row[at + 1] === "|") { cell += "|"; at++; }
    else if (row[at] === "|") { found.push(cell); cell = ""; }
    else cell += row[at];
  }
  found.push(cell);
  return found.map((c) => c.replace(EDGE_SPACE, ""));
}

// A delimiter row's alignments ("", "left", "center", "right"), or null if it is not one.
function alignments(line) {
  if (!line.includes("-")) return null;
  const found = cells(line);
  if (!found.every((c) => DELIMITER_CELL.test(c))) return null;
  return found.map((c) => (c.startsWith(":") ? (c.endsWith(":") ? "center" : "left") : (c.endsWith(":") ? "right" : "")));
}

function row(found, aligns, tag) {
  const shown = [...found, ...aligns.map(() => "")].slice(0, aligns.length);
  return `<tr>${shown.map((c, n) => `${aligns[n] ? `<${tag} class="md-${aligns[n]}">` : `<${tag}>`}${renderInline(c)}</${tag}>`).join("")}</tr>`;
}

// A table in its own scrolling wrapper (a wide one scrolls there, not the page).
function table(header, aligns, rows) {
  const body = rows.length ? `<tbody>${rows.map((r) => row(cells(r), aligns, "td")).join("")}</tbody>` : "";
  return '<div class="md-table" role="region" aria-label="Table" tabindex="0"><table><thead>' +
    `${row(cells(header), aligns, "th")}</thead>${body}</table></div>`;
}

// A bullet item's class and HTML: a task (`[ ]`, `[x]`) shows a disabled checkbox labelled by its text.
function item(text) {
  const task = TASK.exec(text);
  if (!task) return ["", renderInline(text)];
  const checked = task[1] !== " " ? " checked" : "";
  return ["md-task", `<label><input type="checkbox" disabled${checked}> ${renderInline(text.slice(task[0].length))}`];
}

// `quotes`: `>` lines make a blockquote (not inside one: quotes do not nest).
export function renderMarkdown(text, partial = false, quotes = true) {
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
    if (items.length) {
      const shown = items.map(([c, h]) => (c ? `<li class="${c}">${h}</label></li>` : `<li>${h}</li>`));
      out.push(`<${listTag}>${shown.join("")}</${listTag}>`);
    }
    items = [];
    listTag = "";
  };
  for (let i = 0; i < lines.length; i++) {
    let line = lines[i];
    if (quotes && QUOTE.test(line)) {
      flushParagraph(); flushList();
      const start = i;
      while (i < lines.length && QUOTE.test(lines[i])) i++;
      const inner = lines.slice(start, i).map((l) => l.slice(QUOTE.exec(l)[0].length)).join("\n");
      out.push(`<blockquote>${renderMarkdown(inner, partial && i > last, false)}</blockquote>`);
      i--;
      continue;
    }
    if (partial && i === last - 1 && PIPE_LED.test(line) && DELIMITER_TYPED.test(lines[last])) break; // a header?
    if (partial && i === last) {
      const typed = TASK_TYPED.exec(line);
      if (PIPE_LED.test(line)) line = ""; // a table row (or header) still being written
      else if (typed) line = typed[1]; // a task box being typed
      else line = FENCE_TYPED.test(line.trim()) ? "" : tidyPartial(line);
    }
    const fenced = fence(line);
    if (fenced) {
      flushParagraph(); flushList();
      const code = [];
      i++;
      for (; i < lines.length && !lines[i].trim().startsWith(fenced[0]); i++) {
        const typed = lines[i].trim();
        if (!(partial && i === last && typed && fenced[0].startsWith(typed))) code.push(lines[i]);
      }
      if (fenced[0] === "$$") {
        out.push(`<p><code class="md-math md-math-display">${esc(code.join("\n"))}</code></p>`);
        continue;
      }
      const cls = fenced[1] ? ` class="language-${esc(fenced[1])}"` : "";
      out.push(`<div class="code-block"><pre><code${cls}>${highlight(code.join("\n"), fenced[1])}</code></pre>${COPY_BUTTON}</div>`);
      continue;
    }
    const aligns = line.includes("|") && i + 1 < lines.length && !(partial && i + 1 === last) ? alignments(lines[i + 1]) : null;
    if (aligns && aligns.length === cells(line).length) {
      flushParagraph(); flushList();
      const rows = [];
      i += 2;
      for (; i < lines.length && lines[i].includes("|") && !(partial && i === last); i++) rows.push(lines[i]);
      if (!(partial && i === last && lines[i].includes("|"))) i--; // else the row still being written is held
      out.push(table(line, aligns, rows));
      continue;
    }
    const bullet = listItem(line, BULLET_OPEN);
    const number = bullet === null ? listItem(line, NUMBER_OPEN) : null;
    const title = heading(line);
    if (bullet !== null || number !== null) {
      flushParagraph();
      const tag = bullet !== null ? "ul" : "ol";
      if (listTag && listTag !== tag) flushList();
      listTag = tag;
      items.push(bullet !== null ? item(bullet) : ["", renderInline(number)]);
    } else if (!line.trim()) {
      flushParagraph(); flushList();
    } else if (title) {
      flushParagraph(); flushList();
      const level = Math.min(title[0] + 2, 6);
      out.push(`<h${level} class="md-h">${renderInline(title[1])}</h${level}>`);
    } else if (items.length && /^( {2}|\t)/.test(line)) {
      items[items.length - 1][1] += " " + renderInline(line.trim());
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
        const fenced = fence(line);
        if (fenced) this.fence = fenced[0];
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
