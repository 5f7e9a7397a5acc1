// Times the browser's Markdown renderer on long texts, for tests/web/test_markdown_linear.py and
// `python -m bench markdown`.
// Usage: node markdown_linear.mjs SPEC.json > TIMES.json
// SPEC: {"cases": {name: [[unit, share], ...]}, "sizes": [n, ...]}: a text of n characters is each
// unit repeated to fill its share of n (a share of 0: the unit once). TIMES: {name: {n: {"whole":
// seconds, "partial": seconds}}}, the best of two runs below 512 Ki characters.
import { readFileSync } from "node:fs";

const base = new URL("../../responses_app/static/responses_app/chat/", import.meta.url);
const { renderMarkdown } = await import(new URL("markdown.js", base));

function build(segments, n) {
  return segments.map(([unit, share]) => (share ? unit.repeat(Math.ceil((n * share) / unit.length)) : unit)).join("");
}

function seconds(run, n) {
  let best = Infinity;
  for (let i = 0; i < (n < 512 * 1024 ? 2 : 1); i++) {
    const start = performance.now();
    run();
    best = Math.min(best, (performance.now() - start) / 1000);
  }
  return best;
}

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
const times = {};
for (const [name, segments] of Object.entries(spec.cases)) {
  times[name] = {};
  for (const n of spec.sizes) {
    const text = build(segments, n);
    times[name][n] = { whole: seconds(() => renderMarkdown(text), n), partial: seconds(() => renderMarkdown(text, true), n) };
  }
}
process.stdout.write(JSON.stringify(times));
