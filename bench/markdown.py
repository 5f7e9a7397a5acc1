"""Markdown's cost on hostile text: seconds per render as the text grows, both renderers.

Each case repeats one delimiter or bracket kind (or a run the old regexes backtracked over) to
fill a text of n characters; each is rendered whole and as a text still being written (`partial`),
by the server (`responses_app/markdown.py`, and `plain_text`, the title of a prompt) and by the
browser's module (`chat/markdown.js` in node). Linear time reads as seconds x4 per size x4.

    python -m bench markdown [--sizes 16384,65536,262144,1048576] [--baseline REF] [--limit 20]

`--baseline REF` times the renderers of an older commit beside this tree's (a case that takes
more than `--limit` seconds reads `>limit`). Tests hold the bound: tests/web/test_markdown_linear.py.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVER = "responses_app/markdown.py"
BROWSER = "responses_app/static/responses_app/chat/markdown.js"
NODE_SCRIPT = ROOT / "tests" / "js" / "markdown_linear.mjs"

# name: [(unit, share of the text)], a share of 0 being the unit once.
Segments = list[tuple[str, float]]
CASES: dict[str, Segments] = {
    "bold": [("**a ", 1)], "em *": [("*a ", 1)], "em _": [("_a ", 1)], "closers *": [("a* ", 1)],
    "closers _": [("a_ ", 1)], "stars": [("*", 1), ("a", 0)], "underscores": [("_", 1), ("a", 0)],
    "ticks": [("`", 1)], "code open": [("``a", 1)], "brackets": [("[", 1)], "closing brackets": [("]", 1)],
    "nested brackets": [("[", 0.5), ("]", 0.5)], "label ends": [("](", 1)], "links open": [("[a](https://x.org/", 1)],
    "links": [("[*a*](https://x.org/) ", 1)], "parens": [("(", 0.5), (")", 0.5)],
    "tildes": [("~", 1)], "hashes": [("#", 1)], "quotes": [(">", 1)], "dashes": [("-", 1)],
    "bullets": [("- ", 1)], "heading padding": [("# a", 0), (" ", 1), ("x", 0)],
    "heading hashes": [("# a ", 0), ("#", 1), ("x", 0)], "fence padding": [("```", 0), (" ", 1), ("x y", 0)],
    "bold lines": [("**a \n", 1)], "items": [("- *a\n", 1)], "fences": [("```\n", 1)],
    "mixed": [("**a *b _c `d [e](f ~ # > - ", 1)],
    "pipes": [("|", 1)], "pipe lines": [("| a | b |\n", 1)], "escaped pipes": [("\\|", 1)],
    "table": [("| a | b |\n|:-|-:|\n", 0), ("| *a* | $b$ |\n", 1)], "wide row": [("| a |\n|-|\n", 0), ("a|", 1)],
    "delimiters": [("a|b\n", 0), ("-|", 1)], "quote lines": [("> *a\n", 1)], "tasks": [("- [x] a\n", 1)],
    "dollars": [("$", 1)], "math fences": [("$$\n", 1)], "math open": [("$a ", 1)], "math": [("$a$ ", 1)],
    "python code": [("```python\n", 0), ("if x == 'a': # b 1.5\n", 1)], "code quotes": [("```py\n", 0), ('"', 1)],
    "code escapes": [("```js\n'", 0), ("\\", 1)], "code numbers": [("```sh\n", 0), ("1.", 1)],
}
MODES = ("whole", "partial", "plain")


def build(segments: Segments, n: int) -> str:
    return "".join(unit * -(-int(n * share) // len(unit)) if share else unit for unit, share in segments)


def child() -> None:
    """In a child process: time the server renderer at the path given, print {case: {n: {mode: s}}}."""
    import importlib.util

    spec = json.loads(sys.stdin.read())
    # inside the package, so its relative imports (the highlighter) resolve
    loader = importlib.util.spec_from_file_location("responses_app._markdown_timed", spec["module"])
    assert loader is not None and loader.loader is not None
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    runs = {"whole": module.render_html, "partial": lambda t: module.render_html(t, partial=True),
            "plain": module.plain_text}
    times: dict[str, dict[int, dict[str, float]]] = {}
    for name, segments in spec["cases"].items():
        times[name] = {}
        for n in spec["sizes"]:
            text = build(segments, n)
            times[name][n] = {}
            for mode in spec["modes"]:
                best = float("inf")
                for _ in range(2 if n < 512 * 1024 else 1):
                    start = time.perf_counter()
                    runs[mode](text)
                    best = min(best, time.perf_counter() - start)
                times[name][n][mode] = best
    print(json.dumps(times))


def server_times(cases: dict[str, Segments], sizes: list[int], *, module: Path = ROOT / SERVER,
                 modes: tuple[str, ...] = MODES, timeout: float = 300) -> dict[str, Any]:
    """Raises subprocess.TimeoutExpired past `timeout` seconds (all cases together)."""
    done = subprocess.run([sys.executable, "-c", "from bench.markdown import child; child()"], cwd=ROOT,
                          input=json.dumps({"module": str(module), "cases": cases, "sizes": sizes,
                                            "modes": list(modes)}),
                          capture_output=True, text=True, timeout=timeout, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def browser_times(node: str, cases: dict[str, Segments], sizes: list[int], *, script: Path = NODE_SCRIPT,
                  timeout: float = 300) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.json"
        path.write_text(json.dumps({"cases": cases, "sizes": sizes}))
        done = subprocess.run([node, str(script), str(path)], capture_output=True, text=True, timeout=timeout,
                              check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _baseline_tree(ref: str, tmp: Path) -> tuple[Path, Path]:
    """The older commit's two renderers laid out as this tree lays them out (node imports by path)."""
    for path in (SERVER, BROWSER, "tests/js/markdown_linear.mjs"):
        source = ROOT / path if path.startswith("tests/") else None
        target = tmp / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if source is not None:
            shutil.copy(source, target)
        else:
            target.write_text(subprocess.run(["git", "show", f"{ref}:{path}"], cwd=ROOT, capture_output=True,
                                             text=True, check=True).stdout)
    return tmp / SERVER, tmp / "tests/js/markdown_linear.mjs"


def _server_cell(name: str, n: int, mode: str, module: Path, limit: float) -> str:
    try:
        times = server_times({name: CASES[name]}, [n], module=module, modes=(mode,), timeout=limit)
    except subprocess.TimeoutExpired:
        return f">{limit:g}"
    return f"{times[name][str(n)][mode]:.3f}"


def _browser_cells(node: str, name: str, n: int, script: Path, limit: float) -> list[str]:
    try:
        times = browser_times(node, {name: CASES[name]}, [n], script=script, timeout=limit)[name][str(n)]
    except subprocess.TimeoutExpired:
        return [f">{limit:g}"] * 2
    return [f"{times[mode]:.3f}" for mode in ("whole", "partial")]


def table(node: str | None, sizes: list[int], *, module: Path, script: Path, limit: float) -> list[str]:
    head = "| case | chars | " + " | ".join(f"server {m}" for m in MODES) + (" | browser whole | browser partial |"
                                                                             if node else " |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    print("\n".join(lines), flush=True)
    for name in CASES:
        for n in sizes:
            cells = [_server_cell(name, n, mode, module, limit) for mode in MODES]
            if node:
                cells += _browser_cells(node, name, n, script, limit)
            lines.append(f"| {name} | {n:,} | " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
            if any(c.startswith(">") for c in cells):
                break  # larger sizes would only time out too
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench markdown", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="16384,65536,262144,1048576")
    parser.add_argument("--baseline", help="a commit whose renderers are timed beside this tree's")
    parser.add_argument("--limit", type=float, default=20.0, help="seconds before a case reads as >limit")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    node = shutil.which("node")
    print(f"# this tree{'' if node else ' (no node: server only)'}")
    table(node, sizes, module=ROOT / SERVER, script=NODE_SCRIPT, limit=args.limit)
    if args.baseline:
        with tempfile.TemporaryDirectory() as tmp:
            module, script = _baseline_tree(args.baseline, Path(tmp))
            print(f"\n# {args.baseline}")
            table(node, sizes, module=module, script=script, limit=args.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
