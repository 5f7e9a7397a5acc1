"""Small inline SVG charts for the analytics page, and its series colours: numbers and escaped labels only.

`{% load relay_charts %}` registers them as tags."""

from __future__ import annotations

from typing import Any

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

PALETTE = {
    "completed": "#16a34a", "failed": "#dc2626", "error": "#b91c1c", "incomplete": "#d97706",
    "cancelled": "#6b7280", "unknown": "#7c3aed", "streaming": "#2563eb", "pending": "#94a3b8",
}
_SERIES = ["#2563eb", "#16a34a", "#d97706", "#7c3aed", "#dc2626", "#0891b2", "#db2777", "#65a30d"]


def series_color(name: str, index: int) -> str:
    """A status's own colour, else the index's: the palette first, then hues a golden angle
    apart, so every series of a chart (each model) has a colour of its own."""
    if name in PALETTE:
        return PALETTE[name]
    if index < len(_SERIES):
        return _SERIES[index]
    return f"hsl({(index - len(_SERIES)) * 137.508 + 20:.1f} 65% 42%)"


def stacked_bars(days: list[dict[str, Any]], keys: list[str], title: str = "") -> SafeString:
    """Stacked bars per day: `days` = [{"day": date, "counts": {key: n}}], one colour per key."""
    width, height, pad_left, pad_bottom = 640, 180, 32, 22
    top = max([sum(d["counts"].values()) for d in days] + [1])
    inner_w, inner_h = width - pad_left - 4, height - pad_bottom - 8
    slot = inner_w / max(len(days), 1)
    bar = max(min(slot * 0.7, 36), 2)
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">']
    for frac in (0, 0.5, 1):
        y = 8 + inner_h * (1 - frac)
        parts.append(f'<line x1="{pad_left}" x2="{width - 4}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                     f'<text x="{pad_left - 4}" y="{y + 4:.1f}" class="axis" text-anchor="end">'
                     f"{round(top * frac)}</text>")
    label_every = max(1, len(days) // 8)
    for i, day in enumerate(days):
        x = pad_left + slot * i + (slot - bar) / 2
        y = 8 + inner_h
        for k, key in enumerate(keys):
            n = day["counts"].get(key, 0)
            if not n:
                continue
            h = inner_h * n / top
            y -= h
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                         f'fill="{series_color(key, k)}"><title>{escape(day["day"])} · {escape(key)}: {n}'
                         f"</title></rect>")
        if i % label_every == 0:
            parts.append(f'<text x="{x + bar / 2:.1f}" y="{height - 6}" class="axis" text-anchor="middle">'
                         f'{day["day"].strftime("%m-%d")}</text>')
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - numbers and escaped labels only


def hbars(rows: list[tuple[str, float]], unit: str = "", title: str = "", width: int = 640,
          label_w: int = 150) -> SafeString:
    """Horizontal bars: [(label, value)]."""
    row_h = 26
    height = row_h * max(len(rows), 1) + 6
    top = max([v for _, v in rows] + [1])
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">']
    for i, (label, value) in enumerate(rows):
        y = 4 + i * row_h
        w = (width - label_w - 90) * (value / top)
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 16}" class="axis" text-anchor="end">{escape(label)}</text>'
            f'<rect x="{label_w}" y="{y + 3}" width="{max(w, 1):.1f}" height="{row_h - 8}" rx="3" '
            f'fill="{series_color(label, i)}"/>'
            f'<text x="{label_w + max(w, 1) + 6:.1f}" y="{y + 16}" class="value">{value:,.0f}{escape(unit)}</text>')
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - numbers and escaped labels only


def get_item(mapping: dict[str, Any], key: str) -> Any:
    return mapping.get(key) if isinstance(mapping, dict) else None


def latency_bars(p: dict[str, Any]) -> SafeString:
    rows = [(key, float(p[key])) for key in ("p50", "p90", "p99") if p.get(key) is not None]
    if not rows:
        return format_html('<p class="muted small">{}</p>', "No samples yet.")
    return hbars(rows, " ms", "Percentiles", width=340, label_w=40)
