"""Charts as inline SVG: grouped bars and lines, with a legend row, drawn from their data.

A chart is data until the page is rendered: `Bars` holds what `grouped_bars` draws, and
`Drawn` an SVG a caller drew itself (`yanami.scoring.render_page`'s panels).
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Protocol

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f")
MAX_BAR = 48.0
"""The widest a bar is drawn (px), so that a chart of one or two groups does not draw slabs."""
LABEL_CHARS = 40
"""Longer group labels are cut with an ellipsis (the bar's tooltip has the whole label)."""
_TILT = math.radians(30)
"""Group labels are drawn rotated by this much, so long labels do not run into each other."""


def text_width(text: str, size: float) -> float:
    """A generous estimate of a sans-serif text's width in px (at ``size`` px): margins are computed
    from it, so a label never runs out of the figure however the browser's font measures it."""
    return 0.62 * size * len(text)


def _heading(title: str, subtitle: str, names: list[str], left: float, key: str) -> tuple[list[str], float]:
    """A chart's title, subtitle and legend row (a swatch with a dark outline per series, so it never
    vanishes against a mark of its colour), and the y where the plot may start."""
    y = 18
    out = [f'<text x="8" y="{y}" font-size="14" font-weight="bold" class="title">{html.escape(title)}</text>']
    if subtitle:
        y += 17
        out.append(f'<text x="8" y="{y}" font-size="12" class="subtitle">{html.escape(subtitle)}</text>')
    y += 12
    out.append(f'<g class="legend" id="{key}-legend">')
    x = left
    for s, name in enumerate(names):
        out.append(
            f'<rect class="swatch" x="{x:.1f}" y="{y}" width="12" height="12" fill="{PALETTE[s % len(PALETTE)]}" '
            'stroke="#333" stroke-width="1"/>'
        )
        out.append(f'<text x="{x + 17:.1f}" y="{y + 10}" font-size="11">{html.escape(name)}</text>')
        x += 17 + text_width(name, 11) + 16
    out.append("</g>")
    return out, y + 12 + 14


def _y_grid(left: float, right: float, base: float, plot_h: float, ymax: float) -> list[str]:
    """Five horizontal grid lines from 0 to ``ymax``, labelled on the left."""
    out = []
    for k in range(5):
        ty = base - plot_h * k / 4
        out.append(f'<line x1="{left}" x2="{right}" y1="{ty:.1f}" y2="{ty:.1f}" stroke="#ddd"/>')
        label = f"{ymax * k / 4:.3g}"
        out.append(f'<text x="{left - 4:.1f}" y="{ty + 4:.1f}" font-size="10" text-anchor="end">{label}</text>')
    return out


def grouped_bars(
    title: str,
    groups: list[str],
    series: list[tuple[str, list[float | None]]],
    ymax: float,
    *,
    key: str = "chart",
    subtitle: str = "",
    width: int = 760,
) -> str:
    """An inline SVG grouped bar chart: one group per model, one bar per series.

    The legend is a row of its own between the title and the plot, so it never covers a bar,
    and every swatch has a dark outline (a swatch never vanishes against a bar of its colour).
    The left and bottom margins are computed from the longest tilted label, so no label is
    clipped. Elements carry classes for checks in a browser (`tests/scoring/test_browser.py`):
    ``bar`` (with ``data-group`` and ``data-series``), ``legend``, ``label``, ``na`` (no value).
    """
    n = max(1, len(groups))
    names = [g if len(g) <= LABEL_CHARS else g[: LABEL_CHARS - 1] + "…" for g in groups]
    longest = max((text_width(g, 10) for g in names), default=0.0)
    reach_x, reach_y = longest * math.cos(_TILT), longest * math.sin(_TILT) + 10
    left, right = 48.0, 12.0
    for _ in range(3):  # the first label's reach to the left depends on the group width, which depends on ``left``
        group_w = (width - left - right) / n
        left = max(48.0, reach_x - group_w / 2 + 6)
    group_w = (width - left - right) / n
    out, top = _heading(title, subtitle, [name for name, _ in series], left, key)
    plot_h = 190
    base = top + plot_h
    height = math.ceil(base + 6 + reach_y + 8)
    out += _y_grid(left, width - right, base, plot_h, ymax)
    bar_w = min(group_w * 0.8 / max(1, len(series)), MAX_BAR)
    for g, name in enumerate(groups):
        x0 = left + g * group_w + (group_w - bar_w * len(series)) / 2
        for s, (series_name, values) in enumerate(series):
            v = values[g]
            bx = x0 + s * bar_w
            if v is None:
                out.append(
                    f'<text class="na" x="{bx + bar_w * 0.45:.1f}" y="{base - 3:.1f}" font-size="9" '
                    f'text-anchor="middle" fill="#888">n/a<title>{html.escape(f"{name}, {series_name}")}: no value'
                    "</title></text>"
                )
                continue
            h = max(1.0, plot_h * max(0.0, min(v, ymax)) / ymax)  # a zero still shows, as a line
            out.append(
                f'<rect class="bar" data-group="{g}" data-series="{s}" x="{bx:.1f}" y="{base - h:.1f}" '
                f'width="{bar_w * 0.9:.1f}" height="{h:.1f}" fill="{PALETTE[s % len(PALETTE)]}">'
                f"<title>{html.escape(f'{name}, {series_name}')}: {v:.2f}</title></rect>"
            )
        cx = left + g * group_w + group_w / 2
        out.append(
            f'<text class="label" x="{cx:.1f}" y="{base + 14:.1f}" font-size="10" text-anchor="end" '
            f'transform="rotate(-30 {cx:.1f} {base + 14:.1f})">{html.escape(names[g])}</text>'
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" id="{key}" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}">' + "".join(out) + "</svg>"
    )


def line_chart(
    title: str,
    series: list[tuple[str, list[tuple[float, float]]]],
    ymax: float | None,
    *,
    key: str = "chart",
    subtitle: str = "",
    width: int = 760,
) -> str:
    """An inline SVG line chart: one polyline per series of (x, y) points, a legend row under the
    title (as `grouped_bars`), the y axis from 0 to ``ymax`` (None: the data's largest value)."""
    points = [xy for _, pts in series for xy in pts]
    top_y = ymax if ymax is not None else max((y for _, y in points), default=1.0) or 1.0
    max_x = max((x for x, _ in points), default=1.0) or 1.0
    left, right = 48.0, 16.0
    out, top = _heading(title, subtitle, [name for name, _ in series], left, key)
    plot_h, plot_w = 190, width - left - right
    base = top + plot_h
    out += _y_grid(left, width - right, base, plot_h, top_y)
    for k in range(5):
        tx = left + plot_w * k / 4
        out.append(
            f'<text x="{tx:.1f}" y="{base + 14:.1f}" font-size="10" text-anchor="middle">{max_x * k / 4:.0f}</text>'
        )
    for s, (name, pts) in enumerate(series):
        coords = " ".join(
            f"{left + plot_w * px / max_x:.1f},{base - plot_h * max(0.0, min(py, top_y)) / top_y:.1f}" for px, py in pts
        )
        out.append(
            f'<polyline class="line" data-series="{s}" fill="none" stroke="{PALETTE[s % len(PALETTE)]}" '
            f'stroke-width="2" points="{coords}"><title>{html.escape(name)}</title></polyline>'
        )
    height = math.ceil(base + 24)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" id="{key}" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}">' + "".join(out) + "</svg>"
    )


class Chart(Protocol):
    """What a panel of the page shows: anything that draws itself as one inline SVG."""

    def svg(self) -> str:
        """The chart as an inline SVG element."""
        ...


@dataclass(frozen=True)
class Bars:
    """A grouped bar chart as data: one group per run, one bar per series (see `grouped_bars`)."""

    title: str
    groups: list[str]
    series: list[tuple[str, list[float | None]]]
    ymax: float
    key: str
    subtitle: str = ""

    def svg(self) -> str:
        return grouped_bars(self.title, self.groups, self.series, self.ymax, key=self.key, subtitle=self.subtitle)


@dataclass(frozen=True)
class Drawn:
    """A chart its caller drew (an SVG element whose texts it escaped)."""

    text: str

    def svg(self) -> str:
        return self.text
