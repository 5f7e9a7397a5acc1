"""The import graph and module sizes, checked: the pure core imports no framework, no module imports
another that imports it back (function-level and TYPE_CHECKING imports count too), and no module
is longer than MODULE_LINES."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("responses_app", "project", "bench")
MODULE_LINES = 450
SIZE_LIMITED = ("bench",)
SIZE_NOT_YET_LIMITED = ("responses_app", "project")  # modules still over the limit: switched on once split
CORE = "responses_app.streaming"
FRONTENDS = "responses_app.frontends"
CORE_FORBIDDEN = ("django", "channels", "daphne", "httpx", "asyncio", "asgiref", "responses_app")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    found = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            if "migrations" not in path.parts:
                found[module_name(path, root)] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every module `name` imports, resolved to absolute names."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            submodules = {f"{target}.{alias.name}" for alias in node.names} & known.keys()
            found |= submodules  # `from . import services` imports the module services
            if len(submodules) < len(node.names):
                found.add(target)
    return found


def graph(known: dict[str, Path]) -> dict[str, set[str]]:
    return {name: {m for m in imports_of(name, path, known) if m in known and m != name}
            for name, path in known.items()}


def test_the_core_imports_no_framework_and_nothing_of_the_shell() -> None:
    known = modules()
    offenders = []
    for name, path in known.items():
        if name == CORE or name.startswith(CORE + "."):
            for imported in imports_of(name, path, known):
                if imported.startswith(CORE):
                    continue
                if any(imported == f or imported.startswith(f + ".") for f in CORE_FORBIDDEN):
                    offenders.append(f"{name} imports {imported}")
    assert offenders == []


def test_the_front_end_protocols_import_no_framework_and_only_the_core() -> None:
    """responses_app/frontends translates views (the core's ones) and nothing else: no Django."""
    known = modules()
    offenders = []
    for name, path in known.items():
        if name.startswith(FRONTENDS + ".") or name == FRONTENDS:
            for imported in imports_of(name, path, known):
                if imported.startswith((FRONTENDS, CORE)):
                    continue
                if any(imported == f or imported.startswith(f + ".") for f in CORE_FORBIDDEN):
                    offenders.append(f"{name} imports {imported}")
    assert offenders == []


def cycles_in(known: dict[str, Path]) -> list[list[str]]:
    edges = graph(known)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return cycles


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert cycles_in(modules()) == []


def test_the_checker_sees_a_circle_held_together_by_a_function_level_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "hub.py").write_text("def f():\n    from .runner import R\n")
    (package / "runner.py").write_text("from . import hub\nfrom .clean import x\n")
    (package / "clean.py").write_text("import os\n")
    assert cycles_in(modules(tmp_path, ("pkg",))) == [["pkg.hub", "pkg.runner"]]


def oversized(packages: tuple[str, ...], root: Path = ROOT, limit: int = MODULE_LINES) -> list[str]:
    """Every module of `packages` longer than `limit` lines, with its length."""
    lengths = {name: len(path.read_text().splitlines()) for name, path in modules(root, packages).items()}
    return [f"{name}: {n} lines" for name, n in sorted(lengths.items()) if n > limit]


@pytest.mark.parametrize("package", [
    *SIZE_LIMITED,
    *(pytest.param(p, marks=pytest.mark.xfail(reason="not yet enforced", strict=False)) for p in SIZE_NOT_YET_LIMITED),
])
def test_no_module_is_longer_than_the_limit(package: str) -> None:
    assert oversized((package,)) == []


def test_the_size_check_names_a_long_module(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "short.py").write_text("x = 1\n" * 450)
    (package / "sub" / "long.py").write_text("x = 1\n" * 451)
    assert oversized(("pkg",), tmp_path) == ["pkg.sub.long: 451 lines"]
