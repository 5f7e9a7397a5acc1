// wire.js: the websocket wire format, protocol 2 (responses_app/streaming/wire.py), and the view
// reducer (responses_app/streaming/view.py apply_op). No DOM: node runs it in the parity tests.
//
// A patch is an array [revision, n, op, ...]: from revision - n to revision. An op is either a bare
// string, text appended to the view's last block, or ["append", id, text], ["add", block],
// ["set", id, fields], ["meta", fields]. Every other message is an object with a `type`; a
// protocol-1 patch object ({"type": "patch", base, revision, ops}) reads the same way.

export const PROTOCOL = 2;

export function decode(text) {
  // The message as an object; a patch as {type: "patch", base, revision, ops}. Throws on a frame
  // of no known shape.
  const message = JSON.parse(text);
  if (Array.isArray(message)) {
    const [revision, count] = message;
    if (!Number.isInteger(revision) || !Number.isInteger(count) || count <= 0) throw new Error("not a patch");
    return { type: "patch", base: revision - count, revision, ops: message.slice(2) };
  }
  if (message === null || typeof message !== "object" || typeof message.type !== "string") {
    throw new Error("not a message");
  }
  return message;
}

function find(view, id) {
  const blocks = view.blocks;
  for (let i = blocks.length - 1; i >= 0; i--) if (blocks[i].id === id) return blocks[i];
  throw new Error(`no block ${id}`);
}

export function addBlock(blocks, added) {
  const { after, ...block } = added;
  const existing = blocks.find((b) => b.id === block.id);
  if (existing) { Object.assign(existing, block); return "existing"; }
  const at = after == null ? -1 : blocks.findIndex((b) => b.id === after);
  if (at < 0 || at === blocks.length - 1) { blocks.push(block); return "appended"; }
  blocks.splice(at + 1, 0, block);
  return "inserted";
}

export function applyOp(view, op) {
  // Applies one op; returns [the id of the block it touched or null, whether its text was replaced,
  // whether a block was placed before the last one (an add naming an earlier block `after`),
  // whether more than its text changed (an add, a set of other fields)].
  if (typeof op === "string") {
    const block = view.blocks[view.blocks.length - 1];
    if (!block) throw new Error("text for no block");
    block.text = (block.text || "") + op;
    return [block.id, false, false, false];
  }
  const kind = op[0];
  if (kind === "append") {
    const block = find(view, op[1]);
    block.text = (block.text || "") + op[2];
    return [op[1], false, false, false];
  }
  if (kind === "set") {
    Object.assign(find(view, op[1]), op[2]);
    return [op[1], "text" in op[2], false, Object.keys(op[2]).some((key) => key !== "text")];
  }
  if (kind === "add") {
    const placed = addBlock(view.blocks, op[1]);
    return [op[1].id, placed === "existing", placed === "inserted", true];
  }
  if (kind === "meta") {
    Object.assign(view.meta, op[1]);
    return [null, false, false, false];
  }
  throw new Error(`unknown op ${kind}`);
}

export function applyPatch(view, patch) {
  // The revision rule: true when the patch continued the view (applied), false otherwise.
  if (patch.base !== view.revision) return false;
  for (const op of patch.ops) applyOp(view, op);
  view.revision = patch.revision;
  return true;
}
