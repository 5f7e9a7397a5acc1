"""A `{# … #}` comment is one line in Django: one that spans lines is printed as text (it once put
a stray line into the composer's grid and moved Send). Every template's comments close on their line."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = [*ROOT.glob("responses_app/templates/**/*.html"), *ROOT.glob("templates/**/*.html")]


def test_no_template_comment_spans_lines() -> None:
    assert TEMPLATES
    offenders = [f"{path.relative_to(ROOT)}:{number}" for path in TEMPLATES
                 for number, line in enumerate(path.read_text().splitlines(), 1)
                 if re.search(r"\{#(?!.*#\})", line)]
    assert offenders == []
