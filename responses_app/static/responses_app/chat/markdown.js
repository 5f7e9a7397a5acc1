// markdown.js: safe Markdown for model output, the same algorithm as responses_app/markdown.py.
//
// Every line is escaped first; only then does a small subset become markup (paragraphs, bold, em,
// code, fences, lists, small headings, http(s) links). Pure: no DOM, importable from Node.
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

export function renderMarkdown(text) {
  const lines = String(text || "").replace(/\r\n?/g, "\n").split("\n");
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
    const line = lines[i];
    const fence = FENCE.exec(line);
    if (fence) {
      flushParagraph(); flushList();
      const code = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) code.push(lines[i++]);
      const cls = fence[2] ? ` class="language-${esc(fence[2])}"` : "";
      out.push(`<pre><code${cls}>${esc(code.join("\n"))}</code></pre>`);
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
  // previous call; after any other change, call reset() first.
  update(text) {
    if (text.includes("\r")) { // line ends the scan below does not model: render it whole
      const html = renderMarkdown(text.slice(this.stable));
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
    return [fresh, renderMarkdown(text.slice(cut))];
  }
}
