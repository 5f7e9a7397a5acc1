"""The app's colours (theme.css): every colour chat.css and chat-tools.css use is one of its custom
properties; the dark set exists once for the system and once for the explicit choice, the same
both times, with a dark value for every light one; and each pair the pages put text on (badges of
every outcome, tool states, code, errors, notices, buttons) is AA, 4.5:1, in both themes, with
focus rings at 3:1 against what they sit on. Plain file reads; the browser test
(tests/browser/test_dark_mode.py) runs axe-core on the pages themselves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

STATIC = Path(__file__).resolve().parents[2] / "responses_app" / "static" / "responses_app"
THEME = (STATIC / "theme.css").read_text()
SHEETS = {name: (STATIC / name).read_text() for name in ("chat.css", "chat-tools.css", "admin.css")}
LOCAL = {"--radius", "--composer-h"}  # sizes chat.css keeps for itself, not colours
HOST_SET = {"--relay-sticky-top"}  # set by the host page (docs/chat-page.md), read with a fallback

DECLARATION = re.compile(r"(--[a-z0-9-]+)\s*:\s*([^;]+);")
COMMENT = re.compile(r"/\*.*?\*/", re.S)


def block(selector: str, text: str = THEME) -> dict[str, str]:
    """The custom properties declared in the first rule whose selector is exactly `selector`."""
    found = re.search(r"(?m)^\s*" + re.escape(selector) + r"\s*\{([^}]*)\}", COMMENT.sub("", text))
    assert found, f"no rule {selector!r} in theme.css"
    return {name: value.strip() for name, value in DECLARATION.findall(found.group(1))}


LIGHT = block(".relay")
DARK = block(".relay[data-theme=dark]")
SYSTEM_DARK = block(".relay:not([data-theme=light])")
THEMES = {"light": LIGHT, "dark": DARK}

# (text, background) pairs the pages draw; each must be AA for normal-size text.
TEXT_PAIRS = [
    ("text", "bg"), ("text", "surface"), ("text", "surface-sunk"), ("text", "user"), ("text", "accent-soft"),
    ("text", "notice-bg"), ("text", "danger-bg"), ("muted", "bg"), ("muted", "surface"), ("muted", "surface-sunk"),
    ("text-soft", "code-bg"), ("text-soft", "surface-sunk"), ("text", "code-bg"), ("accent", "bg"),
    ("accent", "surface"), ("on-button", "button"), ("on-button", "button-hover"), ("on-button", "approve"),
    ("on-button", "approve-hover"), ("danger", "danger-bg"), ("danger", "surface"), ("danger-strong", "surface"),
    ("danger-strong", "danger-bg"), ("pre-text", "pre-bg"), ("mark-text", "mark"), ("info-text", "info-bg"),
    ("refusal-text", "refusal-bg"), ("ok-text", "surface"), ("amber", "orange-bg"),
    *[(f"hl-{kind}", "pre-bg") for kind in ("keyword", "string", "comment", "number")],
    ("text-soft", "bg"), ("text-soft", "surface"),
    *[(f"tool-{kind}", f"tool-{kind}-bg") for kind in ("active", "ok", "bad", "ask", "off", "hidden")],
    *[(hue, f"{hue}-bg") for hue in ("slate", "gray", "blue", "violet", "sky", "yellow", "green", "red", "pink",
                                      "orange", "amber", "purple")],
]
# A focus ring (or the stop mark) against what it is drawn on: 3:1 for what is not text.
RING_PAIRS = [("focus", "bg"), ("focus", "surface"), ("focus", "surface-sunk"), ("focus", "pre-bg"),
              ("stop-mark", "surface")]


def luminance(colour: str) -> float:
    digits = colour.lstrip("#")
    assert re.fullmatch(r"[0-9a-fA-F]{6}", digits), f"not a #rrggbb colour: {colour}"
    channels = [int(digits[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(one: str, other: str) -> float:
    high, low = sorted((luminance(one), luminance(other)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_dark_set_is_the_same_for_the_system_and_the_choice_and_complete() -> None:
    assert DARK == SYSTEM_DARK
    assert set(DARK) == set(LIGHT), f"light only: {set(LIGHT) - set(DARK)}; dark only: {set(DARK) - set(LIGHT)}"
    assert "@media (prefers-color-scheme: dark)" in THEME
    assert re.search(r"\.relay\[data-theme=light\]|:not\(\[data-theme=light\]\)", THEME)


def test_the_stylesheets_use_no_colour_of_their_own() -> None:
    literal = re.compile(r"#[0-9a-fA-F]{3,8}\b|\brgba?\(|\bhsla?\(|:\s*(?:white|black)\b")
    for name, text in SHEETS.items():
        found = literal.findall(COMMENT.sub("", text))
        assert not found, f"{name} has colours outside theme.css: {found}"


def test_every_property_the_stylesheets_read_is_defined() -> None:
    for name, text in SHEETS.items():
        used = set(re.findall(r"var\((--[a-z0-9-]+)", text))
        missing = used - set(LIGHT) - LOCAL - HOST_SET
        assert not missing, f"{name} reads undefined properties: {missing}"
        for prop in used & HOST_SET:
            assert re.findall(rf"var\({prop}\)", text) == [], f"{name} reads {prop} without a fallback"


def test_theme_css_styles_nothing_outside_the_app() -> None:
    selectors = re.findall(r"(?m)^\s*([^@/{}\s][^{}]*)\{", COMMENT.sub("", THEME))
    for selector in selectors:
        for part in selector.split(","):
            assert part.strip().startswith(".relay"), f"theme.css reaches outside .relay: {part.strip()}"


@pytest.mark.parametrize("theme", THEMES)
def test_every_text_pair_is_aa(theme: str) -> None:
    colours = THEMES[theme]
    weak = [f"{fg} on {bg}: {contrast(colours[f'--{fg}'], colours[f'--{bg}']):.2f}" for fg, bg in TEXT_PAIRS
            if contrast(colours[f"--{fg}"], colours[f"--{bg}"]) < 4.5]
    assert not weak, weak


@pytest.mark.parametrize("theme", THEMES)
def test_focus_rings_and_marks_stand_out(theme: str) -> None:
    colours = THEMES[theme]
    weak = [f"{fg} on {bg}: {contrast(colours[f'--{fg}'], colours[f'--{bg}']):.2f}" for fg, bg in RING_PAIRS
            if contrast(colours[f"--{fg}"], colours[f"--{bg}"]) < 3]
    assert not weak, weak
