// Renders a corpus of views with the browser's modules, for tests/test_render_parity.py.
// Usage: node render_parity.mjs CORPUS.json > RESULT.json
// CORPUS: {"vocabulary": {...}, "cases": [{"name", "status", "view", "thought_s"}],
//          "texts": ["markdown", ...], "notices": [[error, reason, view], ...], "adds": [[blocks, block], ...]}. Each case gives the HTML of
// every grouped entry and the badge; each text its whole rendering and its rendering streamed in
// chunks of 1..97 characters; each notice the line under an ended answer; each add the blocks after
// the "add" op's reducer put the block among them.
import { readFileSync } from "node:fs";

const base = new URL("../../responses_app/static/responses_app/chat/", import.meta.url);
const { configure } = await import(new URL("vocab.js", base));
const { badgeKey, groupBlocks, noticeHtml, renderEntry } = await import(new URL("render.js", base));
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

const result = {
  cases: corpus.cases.map((c) => ({
    name: c.name,
    badge: badgeKey(c.status, c.view),
    entries: groupBlocks(c.view.blocks, c.thought_s).map((entry) => renderEntry(entry)),
  })),
  texts: corpus.texts.map((text) => ({
    whole: renderMarkdown(text),
    streamed: [1, 2, 7, 31, 97].map((size) => streamed(text, size)),
  })),
  notices: (corpus.notices || []).map(([error, reason, view]) => noticeHtml(error, reason, view)),
  adds: (corpus.adds || []).map(([blocks, added]) => { addBlock(blocks, added); return blocks; }),
};
process.stdout.write(JSON.stringify(result));
