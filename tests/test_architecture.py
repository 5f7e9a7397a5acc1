"""The import graph and module sizes, checked: the pure core imports no framework, no module imports
another that imports it back (function-level and TYPE_CHECKING imports count too), no room of the
app imports a room above it (LAYERS), and no module is longer than MODULE_LINES. Comments and
docstrings of the app and the site carry no lab notes: no benchmark figures, dates, machines or
issue numbers (those belong in bench/README.md)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("responses_app", "project", "bench")
MODULE_LINES = 450
SIZE_LIMITED = ("responses_app", "project", "bench")
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


# The rooms of responses_app, low to high: a room imports only rooms of its own layer or below.
# A room is a package, or a top-level module placed by TOP_LEVEL (the storage layer unless named).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("streaming",),  # the pure core
    ("frontends", "simulator"),  # pure too: AG-UI and the AI SDK from the core's views; the simulator
    ("settings",),  # conf and what it reads
    ("upstream",),  # how bytes arrive: clients the relay drives, never the models
    ("storage", "ops"),  # models, services (writes), selectors (reads)...; metrics, analytics, tracing, logs
    ("safety",),  # the checks the gate asks for (through the upstream)
    ("relay",),  # the runner and what it owns
    ("viewers",),  # the one viewer protocol: cursor, sender, follow
    ("doors",),  # what starts and stops requests, and what names their addresses
    ("sockets", "web"),  # the edges: the websockets (a socket may stop a request), HTTP, the Python API
    ("wiring",),  # what Django finds by name: urls, apps, admin, checks, template tags, commands
)
TOP_LEVEL = {
    "conf": "settings", "conf_values": "settings", "providers": "settings", "input_items": "settings",
    "sniff": "streaming",  # what an attachment is, from its bytes: pure as the core (the simulator reads it too)
    "redact": "settings", "compat": "settings",  # compat: reach-ins to private APIs, a leaf any layer uses
    "health": "ops", "metrics": "ops", "logcontext": "ops",  # the public names of ops/ modules (docs/)
    "limits": "relay",  # counts on the relay's database threads
    "wsthreads": "relay",  # consumers off the thread-sensitive thread, the runner channel's too
    # the websocket consumers live beside the protocol they speak, but are an edge like the pages
    "viewers.request": "sockets", "viewers.conversation": "sockets", "viewers.guard": "sockets",
    "submission": "doors", "addresses": "web", "api": "web", "routing": "sockets",
    "templatetags": "wiring", "management": "wiring", "urls": "wiring", "apps": "wiring", "admin": "wiring",
    "admin_inlines": "wiring",
    "checks": "wiring", "native": "wiring", "native_build": "wiring", "": "wiring",
}


def room(name: str, known: dict[str, Path], app: str = "responses_app") -> str:
    """The layer of a module of `app`: its own if TOP_LEVEL places it, else its package's, or its
    top-level module's."""
    parts = name.split(".")[1:]
    top = parts[0] if parts else ""
    is_package = bool(parts) and (len(parts) > 1 or known[name].name == "__init__.py")
    placed = TOP_LEVEL.get(".".join(parts[:2])) or TOP_LEVEL.get(top)
    if placed:
        return placed
    return top if is_package else "storage"


def upward_imports(known: dict[str, Path], layers: tuple[tuple[str, ...], ...] = LAYERS,
                   app: str = "responses_app") -> list[str]:
    """Every import of a module of `app` from a room above its own, and every room no layer holds."""
    rank = {name: level for level, names in enumerate(layers) for name in names}
    found = []
    for name, imported in sorted(graph(known).items()):
        if name != app and not name.startswith(app + "."):
            continue
        here = room(name, known, app)
        if here not in rank:
            found.append(f"{name}: its room {here!r} is in no layer")
            continue
        for target in sorted(imported):
            if target.startswith(app + ".") and rank.get(room(target, known, app), -1) > rank[here]:
                found.append(f"{name} -> {target}")
    return found


def test_no_room_imports_a_room_above_it() -> None:
    assert upward_imports(modules()) == [], "upward imports (LAYERS orders the rooms)"


def test_the_layer_check_names_an_upward_import_and_an_unplaced_room(tmp_path: Path) -> None:
    app = tmp_path / "responses_app"
    for package in ("streaming", "relay", "web", "attic"):
        (app / package).mkdir(parents=True)
        (app / package / "__init__.py").write_text("")
    (app / "__init__.py").write_text("")
    (app / "models.py").write_text("from .streaming import core\n")
    (app / "streaming" / "core.py").write_text("def f():\n    from ..relay import runner\n")
    (app / "relay" / "runner.py").write_text("from .. import models\nfrom ..streaming import core\n")
    (app / "web" / "pages.py").write_text("from ..relay import runner\n")
    (app / "attic" / "old.py").write_text("")
    layers = (("streaming",), ("storage",), ("relay",), ("web",), ("wiring",))
    assert upward_imports(modules(tmp_path, ("responses_app",)), layers) == [
        "responses_app.attic: its room 'attic' is in no layer",
        "responses_app.attic.old: its room 'attic' is in no layer",
        "responses_app.streaming.core -> responses_app.relay.runner",
    ]


def oversized(packages: tuple[str, ...], root: Path = ROOT, limit: int = MODULE_LINES) -> list[str]:
    """Every module of `packages` longer than `limit` lines, with its length."""
    lengths = {name: len(path.read_text().splitlines()) for name, path in modules(root, packages).items()}
    return [f"{name}: {n} lines" for name, n in sorted(lengths.items()) if n > limit]


@pytest.mark.parametrize("package", SIZE_LIMITED)
def test_no_module_is_longer_than_the_limit(package: str) -> None:
    assert oversized((package,)) == []


def test_the_size_check_names_a_long_module(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "short.py").write_text("x = 1\n" * 450)
    (package / "sub" / "long.py").write_text("x = 1\n" * 451)
    assert oversized(("pkg",), tmp_path) == ["pkg.sub.long: 451 lines"]


# What a measurement leaves behind when it is written into code instead of bench/README.md: an issue
# number, a date, a machine, a profiler's count, a time per event, a memory figure per stream, a
# ratio or a percentage against something. A setting's value or a limit stated as the contract
# ("up to 16 KiB", "every 100 ms", "up to 4x") is not one.
LAB_NOTE = re.compile(
    r"(?i:\bissue\s*#?\d+|\bfor the [\w-]+ issue\b)|(?<![&\w])#\d+\b"
    r"|\b20[0-4]\d\b"
    r"|(?i:\b(?:EPYC|Xeon|Ryzen|Graviton|callgrind|cachegrind|py-spy|heaptrack|perf stat)\b)"
    r"|\bMeasured\b|\bmeasured (?:at|with|for|on|here)\b|\(measured\)|, measured\)|\bTried:|(?i:\brounds? ago\b)"
    r"|\d\s*(?:µs|us|ns)\b|\d\s*m?s of CPU\b|\d(?:\.\d+)?k instructions\b"
    r"|(?:about|~)\s*\d[\d.,]*\s*(?:KiB|MiB|KB|MB)\b"
    r"|\d[\d.,]*\s*(?:KiB|MiB|KB|MB)\s+(?:each|per|of|against|instead|on average)\b"
    r"|\d(?:\.\d+)?(?:[-–]\d+(?:\.\d+)?)?\s*[x×]\s+(?:the|its|cheaper|less|more|fewer|faster|slower"
    r"|smaller|larger|instead|against|vs)\b"
    r"|\d\s*%"
    r"|bench/results/|\(bench [a-z]+[,)]|\bREADME\s*[\"“']|\bthe README, [A-Z]"
)
NOTE_FREE = ("responses_app", "project")


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """The comments and docstrings of a module, line by line, in order: never a string literal that
    is data."""
    source = path.read_text()
    lines = [(token.start[0], token.string) for token in tokenize.generate_tokens(io.StringIO(source).readline)
             if token.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source, str(path))):
        # A string standing alone as a statement: a module's, class's or function's docstring, or an
        # attribute's.
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            lines += [(node.lineno + offset, line) for offset, line in enumerate(node.value.value.splitlines())]
    yield from sorted(lines)


def lab_notes(packages: tuple[str, ...] = NOTE_FREE, root: Path = ROOT) -> list[str]:
    return [f"{path.relative_to(root)}:{line}: {text.strip()}"
            for path in sorted(modules(root, packages).values())
            for line, text in prose(path) if LAB_NOTE.search(text)]


def test_comments_and_docstrings_carry_no_benchmark_figures_dates_or_issue_numbers() -> None:
    """A measurement that decided something is named in one line pointing to bench/README.md, where
    its figures are; the code states the contract and the reason."""
    assert lab_notes() == []


# The tests say what they hold to, not where a change came from: no issue number, no date.
TEST_NOTE = re.compile(r"(?i:\bissues?\s*#?\d+)|(?<![&\w])#\d+\b|\b20\d\d-\d\d-\d\d\b")


def test_the_tests_carry_no_issue_numbers_or_dates() -> None:
    notes = [f"{path.relative_to(ROOT)}:{line}: {text.strip()}"
             for path in sorted((ROOT / "tests").rglob("*.py")) if "fixtures" not in path.parts
             for line, text in prose(path) if TEST_NOTE.search(text)]
    assert notes == []


def test_the_lab_note_check_reads_comments_and_docstrings_not_data(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "notes.py").write_text(
        '"""Measured at 100 streams: 14 µs per delta (issue #13)."""\n'
        "\n"
        "LIMIT = 16 * 1024  # a chunk is up to 16 KiB; a flush every 100 ms, up to 4x while short of CPU\n"
        "SAMPLE = '3.4 µs per event on an AMD EPYC, 2026-12-04'  # data, not prose\n"
        "\n"
        "\n"
        "def f() -> None:\n"
        "    # one table for all: a bound method per stream was 7 KiB of each stream's memory (bench storage)\n"
        '    """zstd: 3.2-3.7x less than the text, see bench/results/storage.md."""\n')
    assert [note.split(": ", 1)[0] for note in lab_notes(("pkg",), tmp_path)] == [
        "pkg/notes.py:1", "pkg/notes.py:8", "pkg/notes.py:9"]
