// Renders a corpus with the browser's modules, for tests/web/test_render_parity.py.
// Usage: node render_parity.mjs CORPUS.json > RESULT.json
// CORPUS: {"vocabulary": {...}, "texts": ["markdown", ...], "badges": [[status, view], ...],
//          "adds": [[blocks, block], ...], "wholes": ["markdown", ...]}.
// Each text gives its whole rendering; its rendering streamed through a MarkdownStream in chunks
// of 1..97 characters; and, cut at every position, the rendering of the text so far as still being
// written (`partial`), once rendered whole and once as a MarkdownStream fed one character at a
// time shows it. Each badge case gives the badge key and its words; each add the blocks after the
// "add" op's reducer put the block among them. Each of "wholes" (long texts) gives its whole
// rendering only.
import { readFileSync } from "node:fs";

const base = new URL("../../responses_app/static/responses_app/chat/", import.meta.url);
const { configure } = await import(new URL("vocab.js", base));
const { badgeKey, badgeText } = await import(new URL("state.js", base));
const { addBlock } = await import(new URL("wire.js", base));
const { MarkdownStream, renderMarkdown } = await import(new URL("markdown.js", base));

const corpus = JSON.parse(readFileSync(process.argv[2], "utf8"));
configure(corpus.vocabulary);

function streamed(text, size) {
  const stream = new MarkdownStream();
  let html = "";
  let tail = "";
  for (let end = Math.min(size, text.length); ; end = Math.min(end + size, text.length)) {
    const [fresh, last] = stream.update(text.slice(0, end));
    html += fresh;
    tail = last;
    if (end >= text.length) break;
  }
  return html + tail;
}

function cuts(text) {
  const whole = [];
  const live = [];
  const stream = new MarkdownStream();
  let html = "";
  const points = Array.from(text); // cut between characters, as Python counts them
  for (let end = 0; end <= points.length; end++) {
    const prefix = points.slice(0, end).join("");
    whole.push(renderMarkdown(prefix, true));
    const [fresh, tail] = stream.update(prefix, true);
    html += fresh;
    live.push(html + tail);
  }
  return { whole, live };
}

const result = {
  texts: corpus.texts.map((text) => ({
    whole: renderMarkdown(text),
    streamed: [1, 2, 7, 31, 97].map((size) => streamed(text, size)),
    cuts: cuts(text),
  })),
  badges: (corpus.badges || []).map(([status, view]) => {
    const key = badgeKey(status, view);
    return [key, badgeText(key, view)];
  }),
  adds: (corpus.adds || []).map(([blocks, added]) => { addBlock(blocks, added); return blocks; }),
  wholes: (corpus.wholes || []).map((text) => renderMarkdown(text)),
};
process.stdout.write(JSON.stringify(result));
