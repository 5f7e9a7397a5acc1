"""The documentation holds to the code: every setting and check id documented, no dead link, a
short README. Plain file reads; no database, no server."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from responses_app.conf import SETTINGS

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
CONFIGURATION = DOCS / "configuration.md"
CHECKS = ROOT / "responses_app" / "checks.py"
README_MAX_BYTES = 15 * 1024

# `RELAY_*` names the docs may mention that are environment variables, not settings: each is read
# from os.environ by the code (or the tests) named here.
ENVIRONMENT_ONLY = {
    "RELAY_COMPILED": ROOT / "responses_app" / "native.py",
    "RELAY_SCREENSHOT": ROOT / "tests" / "browser" / "test_safety_page.py",
}

SETTING_NAME = re.compile(r"\bRELAY_[A-Z0-9_]*[A-Z0-9]\b")
CHECK_ID = re.compile(r"\bresponses_app\.[EW]\d{3}\b")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _documented_names() -> dict[str, list[str]]:
    """Every RELAY_* name the README and docs/ mention, with the pages that mention it."""
    found: dict[str, list[str]] = {}
    for page in _pages():
        for name in set(SETTING_NAME.findall(_text(page))):
            found.setdefault(name, []).append(page.relative_to(ROOT).as_posix())
    return found


def test_every_documented_setting_exists() -> None:
    known = {spec.setting for spec in SETTINGS} | set(ENVIRONMENT_ONLY)
    unknown = {name: pages for name, pages in _documented_names().items() if name not in known}
    assert not unknown, f"documented but not in responses_app.conf.SETTINGS: {unknown}"


def test_every_setting_is_documented_in_configuration_page() -> None:
    page = _text(CONFIGURATION)
    missing = [spec.setting for spec in SETTINGS if f"`{spec.setting}`" not in page]
    assert not missing, f"settings missing from docs/configuration.md: {missing}"


def test_environment_only_names_are_read_where_said() -> None:
    settings = {spec.setting for spec in SETTINGS}
    for name, path in ENVIRONMENT_ONLY.items():
        assert name in _text(path), f"{name} is documented as read by {path.relative_to(ROOT)}, which never names it"
        assert name not in settings, f"{name} is a setting now: drop it from ENVIRONMENT_ONLY"


def test_configuration_tables_are_generated_from_the_settings() -> None:
    done = subprocess.run([sys.executable, str(DOCS / "gen_configuration.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr


def _checks_docstring() -> str:
    docstring = ast.get_docstring(ast.parse(_text(CHECKS)))
    assert docstring
    return docstring


def test_every_check_id_is_documented() -> None:
    listed = set(CHECK_ID.findall(_checks_docstring()))
    assert listed, "responses_app/checks.py's docstring lists no check id"
    page = _text(CONFIGURATION)
    missing = sorted(check_id for check_id in listed if check_id not in page)
    assert not missing, f"check ids missing from docs/configuration.md: {missing}"


def test_every_check_id_in_the_code_is_listed_in_the_docstring() -> None:
    code = _text(CHECKS)
    used = {f"responses_app.{short}" for short in re.findall(r"_error\(\s*\"([EW]\d{3})\"", code)}
    used |= set(re.findall(r"id=\"(responses_app\.[EW]\d{3})\"", code))
    assert used, "no check id found in responses_app/checks.py"
    unlisted = sorted(used - set(CHECK_ID.findall(_checks_docstring())))
    assert not unlisted, f"check ids raised but not listed in checks.py's docstring: {unlisted}"


def test_documented_check_ids_exist() -> None:
    listed = set(CHECK_ID.findall(_checks_docstring()))
    for page in _pages():
        stray = set(CHECK_ID.findall(_text(page))) - listed
        assert not stray, f"{page.relative_to(ROOT)} names check ids checks.py does not have: {sorted(stray)}"


def test_readme_is_short() -> None:
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; at most {README_MAX_BYTES}: move details to docs/"


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    anchors = set()
    seen: dict[str, int] = {}
    for line in FENCE.sub("", _text(path)).splitlines():
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _links(page: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", _text(page)))


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_point_to_files_that_exist(page: Path) -> None:
    broken = []
    for target in _links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{page.relative_to(ROOT)} links to what does not exist: {broken}"
