"""The view model: a render-oriented projection of an assembled response, and its patches.

A view is `meta` (response id, status, error, usage ...) plus ordered `blocks` (message text with
citations, refusal, reasoning, one block per tool call with its honest state). Every change is an
*op*, a small JSON-ready list, and every op bumps `revision` by one:

    ["add", block]                 a new block (a dict with at least "id" and "kind"); with an
                                   "after" block id (not kept in the block) it goes right after
                                   that block, else (or when there is none) at the end
    ["append", block_id, text]     text appended to block["text"]
    ["set", block_id, fields]      fields of a block replaced
    ["meta", fields]               fields of meta replaced

`apply_op` is the reducer: applying a view's ops, in order, to an empty view yields the same view
(tests hold the assembler to this, and the browser's wire.js implements the same cases). A batch
of ops is a patch `{"base": r0, "revision": r1, "ops": [...]}`; a client holding revision r0
applies it, anything else is a duplicate (r1 <= held) or a gap (ask for a snapshot). On the
websocket a patch travels in wire.py's terser form, which `wire.decode` turns back into this one.

Pure: no Django, no I/O.
"""

from __future__ import annotations

from typing import Any

from .textbuf import Piece, join

Block = dict[str, Any]
Op = list[Any]


class ViewModel:
    """Blocks and meta, with text kept as chunk lists so appending stays O(delta)."""

    __slots__ = ("meta", "_blocks", "_order", "_chunks", "ops", "_ops_base")

    def __init__(self) -> None:
        self.meta: dict[str, Any] = {"response_id": None, "status": None}
        self._blocks: dict[str, Block] = {}
        self._order: list[str] = []
        self._chunks: dict[str, list[Piece]] = {}
        # The ops since the last take_ops, in order: the writers below append to it, and so does the
        # assembler's text path (an append with its block's pieces, without a call per delta).
        self.ops: list[Op] = []
        self._ops_base = 0  # the revision they apply on

    @property
    def revision(self) -> int:
        """One more for every op ever made."""
        return self._ops_base + len(self.ops)

    @revision.setter
    def revision(self, revision: int) -> None:
        # A takeover's jump past revisions the runner before may have sent (transcript.restore).
        self._ops_base = revision - len(self.ops)

    # --- writers (used by the assembler) --------------------------------------------------

    def add(self, block: Block) -> None:
        block_id = block["id"]
        if block_id in self._blocks:
            self.set(block_id, {k: v for k, v in block.items() if k not in ("id", "after")})
            return
        stored = dict(block)
        text = stored.pop("text", "")
        after = stored.pop("after", None)
        self._blocks[block_id] = stored
        if after is not None and after in self._blocks:
            self._order.insert(self._order.index(after) + 1, block_id)
        else:
            self._order.append(block_id)
        self._chunks[block_id] = [text] if text else []
        self.ops.append(["add", dict(block, text=text)])

    def append(self, block_id: str, text: str) -> None:
        if not text:
            return
        self._chunks[block_id].append(text)
        self.ops.append(["append", block_id, text])

    def set(self, block_id: str, fields: dict[str, Any]) -> None:
        """Replace fields, emitting an op only for those that change."""
        block = self._blocks[block_id]
        changed: dict[str, Any] = {}
        for key, value in fields.items():
            if key == "text":
                if self.text(block_id) != value:
                    # In place: a block's chunk list keeps its identity (the assembler's delta
                    # fast path holds its `append`).
                    self._chunks[block_id][:] = [value] if value else ()
                    changed[key] = value
            elif block.get(key, _MISSING) != value:
                block[key] = value
                changed[key] = value
        if changed:
            self.ops.append(["set", block_id, changed])

    def set_meta(self, fields: dict[str, Any]) -> None:
        changed = {k: v for k, v in fields.items() if self.meta.get(k, _MISSING) != v}
        if changed:
            self.meta.update(changed)
            self.ops.append(["meta", changed])

    # --- the assembler's text path ---------------------------------------------------------
    # `append` split into its parts, for the assembler's text deltas: it appends each text to
    # `pieces(id)` (bound once per part) and `["append", id, text]` to `ops`.

    def pieces(self, block_id: str) -> list[Piece]:
        """The block's text pieces: the list itself, which keeps its identity for the block's life."""
        return self._chunks[block_id]

    # --- readers ----------------------------------------------------------------------------

    def has(self, block_id: str) -> bool:
        return block_id in self._blocks

    def last_block_id(self) -> str | None:
        return self._order[-1] if self._order else None

    def block(self, block_id: str) -> Block:
        return self._blocks[block_id]

    def order(self) -> list[str]:
        """The block ids in order (the list itself: read, never change it)."""
        return self._order

    def text(self, block_id: str) -> str:
        return join(self._chunks[block_id])  # later reads start from the one piece it leaves

    def take_ops(self) -> tuple[int, list[Op]]:
        """The ops since the last call and the revision they apply on top of."""
        base, ops = self._ops_base, self.ops
        self.ops = []
        self._ops_base = base + len(ops)
        return base, ops

    def to_dict(self) -> dict[str, Any]:
        blocks = []
        for block_id in self._order:
            block = dict(self._blocks[block_id])
            block["text"] = self.text(block_id)
            blocks.append(block)
        return {"revision": self.revision, "meta": dict(self.meta), "blocks": blocks}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ViewModel:
        view = cls()
        view.meta = dict(data.get("meta") or {})
        for block in data.get("blocks") or ():
            stored = dict(block)
            text = stored.pop("text", "")
            view._blocks[stored["id"]] = stored
            view._order.append(stored["id"])
            view._chunks[stored["id"]] = [text] if text else []
        view._ops_base = int(data.get("revision", 0))
        return view


_MISSING = object()


def apply_op(view: dict[str, Any], op: Op | str) -> None:
    """The reducer on the plain-dict form of a view (`ViewModel.to_dict()`).

    It does not touch the revision. A bare string is the wire's shorthand (wire.py) for text
    appended to the last block."""
    if isinstance(op, str):
        view["blocks"][-1]["text"] += op
        return
    kind = op[0]
    if kind == "append":
        _find(view, op[1])["text"] += op[2]
    elif kind == "set":
        _find(view, op[1]).update(op[2])
    elif kind == "add":
        existing = [b for b in view["blocks"] if b["id"] == op[1]["id"]]
        block = dict(op[1])
        after = block.pop("after", None)
        if existing:
            existing[0].update(block)
        else:
            blocks = view["blocks"]
            at = next((i + 1 for i, b in enumerate(blocks) if b["id"] == after), len(blocks)) if after else len(blocks)
            blocks.insert(at, block)
    elif kind == "meta":
        view["meta"].update(op[1])
    else:
        raise ValueError(f"unknown view op {kind!r}")


def apply_patch(view: dict[str, Any], patch: dict[str, Any]) -> bool:
    """Apply a patch if it continues the view's revision; False when it is stale or leaves a gap."""
    if patch["base"] != view["revision"]:
        return False
    for op in patch["ops"]:
        apply_op(view, op)
    view["revision"] = patch["revision"]
    return True


def _find(view: dict[str, Any], block_id: str) -> Block:
    for block in reversed(view["blocks"]):
        if block["id"] == block_id:
            return block  # type: ignore[no-any-return]
    raise KeyError(f"no block {block_id!r} in view")
