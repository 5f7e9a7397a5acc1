"""The RFC 6902 JSON Patch that turns one JSON document into another (AG-UI's STATE_DELTA).

`diff(old, new)` returns operations that, applied in order, turn `old` into `new`: objects are
compared key by key, lists index by index (items appended are `add`s, items dropped `remove`s from
the end, so every index is valid when its operation applies), anything else that differs is a
`replace`. Not minimal: a list with an item inserted in the middle costs a replace per shifted
item, which the view's append-only blocks make rare.

Pure: no Django, no I/O.
"""

from __future__ import annotations

from typing import Any


def pointer(tokens: list[str | int]) -> str:
    """An RFC 6901 JSON Pointer (`~` and `/` escaped)."""
    return "".join("/" + str(t).replace("~", "~0").replace("/", "~1") for t in tokens)


def diff(old: Any, new: Any, path: list[str | int] | None = None) -> list[dict[str, Any]]:
    path = path or []
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[dict[str, Any]] = []
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": pointer([*path, key])})
        for key, value in new.items():
            if key not in old:
                ops.append({"op": "add", "path": pointer([*path, key]), "value": value})
            elif old[key] != value:
                ops.extend(diff(old[key], value, [*path, key]))
        return ops
    if isinstance(old, list) and isinstance(new, list):
        ops = []
        for index in range(min(len(old), len(new))):
            if old[index] != new[index]:
                ops.extend(diff(old[index], new[index], [*path, index]))
        for index in range(len(old) - 1, len(new) - 1, -1):
            ops.append({"op": "remove", "path": pointer([*path, index])})
        for index in range(len(old), len(new)):
            ops.append({"op": "add", "path": pointer([*path, index]), "value": new[index]})
        return ops
    if old == new and type(old) is type(new):
        return []
    return [{"op": "replace", "path": pointer(path), "value": new}]


def apply(document: Any, ops: list[dict[str, Any]]) -> Any:
    """Apply `diff`'s operations (add, remove, replace) to a copy-free document; for tests and
    for clients written in Python."""
    for op in ops:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        if not tokens:
            document = op["value"]
            continue
        parent = document
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last: Any = tokens[-1]
        if isinstance(parent, list):
            last = len(parent) if last == "-" else int(last)
        if op["op"] == "remove":
            del parent[last]
        elif op["op"] == "add" and isinstance(parent, list):
            parent.insert(last, op["value"])
        else:
            parent[last] = op["value"]
    return document
