"""The report's Figure 6 as a browser draws it: layout checks and a screenshot, with Playwright and
the system's Chromium (never a downloaded browser: `playwright install` is not needed).

    python benchmarks/report_figure.py REPORT.html [--out docs/report-figure6.png]
    python benchmarks/report_figure.py --demo DIR [--per-scenario N] [--out docs/report-figure6.png]

The first inspects an existing report; the second runs `yanami demo --out DIR` first (it resumes
what is there) and inspects its ``report.html``. Either prints what the browser saw (console
errors, images that did not load, every chart's legend against its bars and labels against the
figure's edges), exits 1 if anything is wrong, and with ``--out`` saves a PNG of the figure area.
``tests/scoring/test_browser.py`` runs the same `inspect` on a demo-sized report.

Figure 6 is inline SVG, so each bar (``rect.bar``), the legend (``g.legend``) and each group label
(``text.label``) is a DOM element whose box the browser reports: the checks compare the boxes the
browser laid out, not the numbers the report wrote.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
"""Debian's Chromium (``apt-get install -y chromium``)."""
VIEWPORT = {"width": 1280, "height": 900}


def chromium_path() -> str | None:
    """The system's Chromium, or None when it is not installed."""
    found = shutil.which("chromium") or (CHROMIUM if Path(CHROMIUM).is_file() else None)
    return found


@dataclass(frozen=True)
class Box:
    """An element's box in page coordinates (CSS px)."""

    x: float
    y: float
    width: float
    height: float

    @property
    def right(self) -> float:
        return self.x + self.width

    @property
    def bottom(self) -> float:
        return self.y + self.height

    def overlaps(self, other: Box) -> bool:
        """Whether the two boxes share any area (touching edges do not count)."""
        return self.x < other.right and other.x < self.right and self.y < other.bottom and other.y < self.bottom

    def inside(self, other: Box, slack: float = 0.5) -> bool:
        """Whether this box lies within ``other`` (give or take ``slack`` px of rounding)."""
        return (
            self.x >= other.x - slack
            and self.y >= other.y - slack
            and self.right <= other.right + slack
            and self.bottom <= other.bottom + slack
        )


@dataclass
class Chart:
    """One chart of Figure 6 as laid out: its boxes, and the swatches' outline colours."""

    key: str
    svg: Box
    legend: Box
    swatches: list[Box]
    swatch_strokes: list[str]
    bars: list[Box]
    labels: list[tuple[str, Box]]

    def problems(self) -> list[str]:
        """What is wrong with the chart's layout (empty: nothing)."""
        out = []
        for k, bar in enumerate(self.bars):
            if bar.overlaps(self.legend):
                out.append(f"{self.key}: the legend covers bar {k}")
        for text, box in self.labels:
            if not box.inside(self.svg):
                out.append(f"{self.key}: the label {text!r} is clipped by the figure's edge")
        if not self.legend.inside(self.svg):
            out.append(f"{self.key}: the legend is clipped by the figure's edge")
        for k, stroke in enumerate(self.swatch_strokes):
            if stroke in ("", "none"):
                out.append(f"{self.key}: legend swatch {k} has no outline (it can vanish against a bar)")
        return out


@dataclass
class Inspection:
    """What a browser saw on a report page."""

    console_errors: list[str] = field(default_factory=list)
    images: int = 0
    broken_images: list[str] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)

    def problems(self) -> list[str]:
        out = [f"console: {e}" for e in self.console_errors]
        out += [f"image did not load: {i}" for i in self.broken_images]
        for chart in self.charts:
            out += chart.problems()
        return out


_LAYOUT_JS = """
() => {
  const box = (el) => { const r = el.getBoundingClientRect();
    return [r.x + window.scrollX, r.y + window.scrollY, r.width, r.height]; };
  return Array.from(document.querySelectorAll("svg.chart")).map((svg) => ({
    key: svg.id,
    svg: box(svg),
    legend: box(svg.querySelector(".legend")),
    swatches: Array.from(svg.querySelectorAll(".legend .swatch")).map(box),
    strokes: Array.from(svg.querySelectorAll(".legend .swatch")).map((s) => getComputedStyle(s).stroke),
    bars: Array.from(svg.querySelectorAll("rect.bar")).map(box),
    labels: Array.from(svg.querySelectorAll("text.label")).map((t) => [t.textContent, box(t)]),
  }));
}
"""

_IMAGES_JS = """
async () => {
  document.querySelectorAll("details").forEach((d) => { d.open = true; });
  const images = Array.from(document.images);
  await Promise.all(images.map((i) => i.decode().catch(() => null)));
  return images.map((i) => [i.alt + " " + (i.dataset.sha || i.src.slice(0, 40)), i.complete && i.naturalWidth > 0]);
}
"""


def inspect(report: Path, screenshot: Path | None = None, executable: str | None = None) -> Inspection:
    """Open ``report`` in headless Chromium; collect console errors, images that did not load and
    Figure 6's layout; with ``screenshot``, save a PNG of the figure area (before the samples are opened)."""
    from playwright.sync_api import sync_playwright

    browser_path = executable or chromium_path()
    if browser_path is None:
        raise RuntimeError("chromium not installed (apt-get install -y chromium)")
    seen = Inspection()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.on("console", lambda m: seen.console_errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: seen.console_errors.append(str(e)))
            page.goto(report.resolve().as_uri(), wait_until="load")
            for c in page.evaluate(_LAYOUT_JS):
                seen.charts.append(
                    Chart(
                        c["key"],
                        Box(*c["svg"]),
                        Box(*c["legend"]),
                        [Box(*b) for b in c["swatches"]],
                        list(c["strokes"]),
                        [Box(*b) for b in c["bars"]],
                        [(t, Box(*b)) for t, b in c["labels"]],
                    )
                )
            if screenshot is not None:
                top = page.locator("h2", has_text="Figure 6").bounding_box()
                last = page.locator("figure.panel").last.bounding_box()
                if top is None or last is None:
                    raise RuntimeError(f"{report}: no Figure 6 on the page")
                height = last["y"] + last["height"] - top["y"]
                width = min(VIEWPORT["width"], max(c.svg.right for c in seen.charts) + 24) if seen.charts else 800
                clip = {"x": 0, "y": top["y"], "width": width, "height": height}
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshot), clip=clip, full_page=True)
            images = page.evaluate(_IMAGES_JS)
            seen.images = len(images)
            seen.broken_images = [name for name, ok in images if not ok]
        finally:
            browser.close()
    return seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", nargs="?", type=Path, help="a report.html")
    parser.add_argument("--demo", type=Path, metavar="DIR", help="run `yanami demo --out DIR` and use its report")
    parser.add_argument("--per-scenario", type=int, default=100, metavar="N", help="the demo bench's size")
    parser.add_argument("--out", type=Path, metavar="PNG", help="save a screenshot of the figure area here")
    args = parser.parse_args()
    if (args.report is None) == (args.demo is None):
        parser.error("give a REPORT or --demo DIR")
    if args.demo is not None:
        from yanami.contract import UserError
        from yanami.demo import run_demo

        try:
            report = run_demo(args.demo, per_scenario=args.per_scenario).report
        except UserError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    else:
        report = args.report
    if not report.is_file():
        print(f"{report}: no such file", file=sys.stderr)
        return 2
    if chromium_path() is None:
        print("chromium not installed (apt-get install -y chromium)", file=sys.stderr)
        return 2
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        print("playwright not installed (pip install -e '.[test]')", file=sys.stderr)
        return 2
    seen = inspect(report, args.out)
    bars = sum(len(c.bars) for c in seen.charts)
    print(f"{report}: {len(seen.charts)} charts, {bars} bars, {seen.images} images, "
          f"{len(seen.console_errors)} console errors")  # fmt: skip
    for line in seen.problems():
        print(f"  {line}")
    if args.out is not None:
        print(f"{args.out}: the figure area")
    return 1 if seen.problems() else 0


if __name__ == "__main__":
    sys.exit(main())
