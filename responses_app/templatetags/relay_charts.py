"""`{% load relay_charts %}`: the analytics page's inline SVG charts (web/charts.py)."""

from __future__ import annotations

from django import template

from ..web import charts

register = template.Library()
register.simple_tag(charts.stacked_bars, name="stacked_bars")
register.simple_tag(charts.hbars, name="hbars")
register.simple_tag(charts.latency_bars, name="latency_bars")
register.filter("get_item", charts.get_item)
