// Applies websocket frames with the browser's wire.js, for tests/streaming/test_wire_parity.py.
// Usage: node wire_parity.mjs CASES.json > RESULT.json
// CASES: [{"name", "snapshot": view, "frames": ["...", ...]}]. Each result: the view reached by
// applying every frame in order (a frame of no known shape: {"error": message}), and for each
// frame whether it applied (the revision rule).
import { readFileSync } from "node:fs";

const base = new URL("../../responses_app/static/responses_app/chat/", import.meta.url);
const { applyPatch, decode } = await import(new URL("wire.js", base));

const cases = JSON.parse(readFileSync(process.argv[2], "utf8"));
const results = cases.map((c) => {
  const view = structuredClone(c.snapshot);
  const applied = [];
  for (const frame of c.frames) {
    let message;
    try {
      message = decode(frame);
    } catch (error) {
      applied.push({ error: String(error.message) });
      continue;
    }
    applied.push(message.type === "patch" ? applyPatch(view, message) : message.type);
  }
  return { name: c.name, view, applied };
});
process.stdout.write(JSON.stringify(results));
