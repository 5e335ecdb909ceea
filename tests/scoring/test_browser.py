"""The HTML report in a real browser: Debian's Chromium driven by Playwright (never a downloaded
browser). The checks and the docs' screenshot share one module, ``benchmarks/report_figure.py``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("playwright.sync_api", reason="playwright not installed")

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("report_figure", ROOT / "benchmarks" / "report_figure.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


report_figure = _load()
if report_figure.chromium_path() is None:
    pytest.skip("chromium not installed (apt-get install -y chromium)", allow_module_level=True)


def test_the_demo_report_loads_cleanly_and_its_figure_is_legible(small_demo: Path, tmp_path: Path) -> None:
    shot = tmp_path / "figure.png"
    seen = report_figure.inspect(small_demo / "report.html", shot)
    assert seen.console_errors == []
    assert seen.images > 20 and seen.broken_images == []  # every image loads (naturalWidth > 0)
    assert [c.key for c in seen.charts] == ["fig6a", "fig6b", "fig6c"]
    # (b) has a bar per GT-History run and turn, (c) two; (a) may have none on four dialogues
    # (no dialogue every run of Table 21's set understood), and then shows "n/a" in their place
    assert len(seen.charts[1].bars) >= 10 and len(seen.charts[2].bars) == 2
    for chart in seen.charts:
        assert chart.labels and len(chart.swatches) >= 2, chart.key
        # the legend covers no bar: the boxes the browser laid out, compared
        assert not any(bar.overlaps(chart.legend) for bar in chart.bars), chart.key
        # every swatch is outlined and lies in the legend, clear of every bar
        assert all(s not in ("", "none") for s in chart.swatch_strokes), chart.key
        assert all(sw.inside(chart.legend) and not any(sw.overlaps(b) for b in chart.bars) for sw in chart.swatches)
        # no label is clipped: each lies inside the figure
        assert all(box.inside(chart.svg) for _, box in chart.labels), chart.key
        assert chart.problems() == []
    assert shot.read_bytes().startswith(b"\x89PNG")


def test_the_checks_catch_what_they_look_for() -> None:
    box = report_figure.Box
    chart = report_figure.Chart(
        "fig",
        svg=box(0, 0, 700, 300),
        legend=box(500, 40, 100, 40),
        swatches=[box(500, 40, 12, 12)],
        swatch_strokes=["none"],
        bars=[box(520, 60, 30, 200), box(100, 100, 30, 160)],
        labels=[("reference:copy-input", box(-12, 270, 120, 40))],
    )
    problems = chart.problems()
    assert "fig: the legend covers bar 0" in problems and not any("bar 1" in p for p in problems)
    assert any("clipped" in p and "copy-input" in p for p in problems)
    assert any("no outline" in p for p in problems)


def _open(report: Path, javascript: bool = True):  # type: ignore[no-untyped-def]
    from playwright.sync_api import sync_playwright

    p = sync_playwright().start()
    browser = p.chromium.launch(executable_path=report_figure.chromium_path(), args=["--no-sandbox"])
    page = browser.new_context(java_script_enabled=javascript).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(report.resolve().as_uri(), wait_until="load")
    return p, browser, page, errors


def _shown(page) -> list[str]:  # type: ignore[no-untyped-def]
    return page.eval_on_selector_all("details.sample", "ds => ds.filter(d => !d.hidden).map(d => d.dataset.id)")


def test_the_sample_viewer_filters_by_scenario_id_run_and_failed_checks(small_demo: Path) -> None:
    p, browser, page, errors = _open(small_demo / "report.html")
    try:
        every = _shown(page)
        assert len(every) == 4 and page.text_content("#shown") == "4 of 4 shown"
        scenarios = page.eval_on_selector_all("details.sample", "ds => ds.map(d => d.dataset.scenario)")
        page.select_option("select[name=scenario]", scenarios[1])
        assert _shown(page) == [every[1]]
        page.select_option("select[name=scenario]", "")
        page.fill("input[name=id]", every[2][1:])  # a part of one id
        assert _shown(page) == [every[2]]
        page.fill("input[name=id]", "")
        # the oracle fails no check; the stateless agent fails some, in the dialogues the page marks
        page.check("input[name=failed]")
        page.select_option("select[name=run]", "reference:oracle")
        assert _shown(page) == []
        page.select_option("select[name=run]", "reference:stateless")
        failing = _shown(page)
        # each one shown has a failed check of that run on the page; each one hidden has none
        crosses = page.eval_on_selector_all(
            "details.sample",
            "ds => ds.map(d => [d.dataset.id, "
            "d.querySelectorAll('.output[data-run=\"reference:stateless\"] li.fail').length])",
        )
        assert failing and failing == [i for i, n in crosses if n > 0]
        # a run picked: only its outputs and answers are shown
        runs = page.eval_on_selector_all(
            "details.sample:not([hidden]) [data-run]", "os => os.filter(o => !o.hidden).map(o => o.dataset.run)"
        )
        assert runs and set(runs) == {"reference:stateless"}
        # and hidden on the screen, not only in the DOM: no output of another run is displayed
        displayed = page.eval_on_selector_all(
            "details.sample:not([hidden]) [data-run]",
            "os => os.filter(o => getComputedStyle(o).display !== 'none').map(o => o.dataset.run)",
        )
        assert displayed and set(displayed) == {"reference:stateless"}
        # the ✗ mark follows the run shown: the oracle's view marks no dialogue
        page.uncheck("input[name=failed]")
        page.select_option("select[name=run]", "reference:oracle")
        marks = page.eval_on_selector_all(".badge", "bs => bs.filter(b => getComputedStyle(b).display !== 'none')")
        assert marks == []
        page.select_option("select[name=run]", "")
        every_mark = page.eval_on_selector_all(".badge", "bs => bs.map(b => b.textContent)")
        assert every_mark and all(" of " in m and "run(s)" in m for m in every_mark)
        assert errors == []
    finally:
        browser.close()
        p.stop()


_LANDED = """id => {
  const r = document.getElementById(id).getBoundingClientRect();
  const bottom = Math.ceil(scrollY + innerHeight) >= document.documentElement.scrollHeight - 1;
  return {top: r.top, bottom, target: document.querySelector(":target")?.id ?? null};
}"""


def test_the_contents_links_land_on_their_sections_and_the_provenance_opens_only_when_asked(
    small_demo: Path,
) -> None:
    p, browser, page, errors = _open(small_demo / "report.html")
    try:
        page.set_viewport_size({"width": 1280, "height": 800})
        page.evaluate("scrollTo(0, 0)")
        # at the top: the contents, the warnings and the first table in the first screen
        for selector in ("nav#contents", "#comparability", "#comparability li", "table#table2 caption"):
            box = page.locator(selector).first.bounding_box()
            assert box is not None and 0 <= box["y"] < 800, selector
        # the runs' provenance is folded: its summary shows, its run lines do not
        assert page.eval_on_selector("#provenance", "d => d.open") is False
        assert page.is_visible("#provenance > summary") and not page.is_visible("#provenance li")
        anchors = page.eval_on_selector_all("nav#contents a", "as => as.map(a => a.getAttribute('href').slice(1))")
        assert {"comparability", "tables", "table2", "coverage", "figures", "provenance", "samples"} <= set(anchors)
        for anchor in anchors:
            page.evaluate("scrollTo(0, 0)")
            page.click(f'nav#contents a[href="#{anchor}"]')
            landed = page.evaluate(_LANDED, anchor)
            assert landed["target"] == anchor, anchor
            # its section starts at the top of the window, or the window is at the page's end with it in view
            assert abs(landed["top"]) <= 1 or (landed["bottom"] and 0 <= landed["top"] < 800), (anchor, landed)
        # the provenance link opened what it leads to: every run's line now shows
        assert page.eval_on_selector("#provenance", "d => d.open") is True
        assert page.locator("#provenance li").count() == 19 and page.is_visible("#provenance li")
        assert errors == []
    finally:
        browser.close()
        p.stop()


def test_the_provenance_opens_when_the_page_is_opened_at_it(small_demo: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=report_figure.chromium_path(), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto((small_demo / "report.html").resolve().as_uri() + "#provenance", wait_until="load")
            assert page.eval_on_selector("#provenance", "d => d.open") is True
        finally:
            browser.close()


def test_the_sample_viewer_shows_every_image_without_javascript(small_demo: Path) -> None:
    p, browser, page, _ = _open(small_demo / "report.html", javascript=False)
    try:
        assert page.is_hidden("#filters")  # the filters need JavaScript: without it, every sample shows
        # the provenance stays folded, one click on its summary from open
        assert page.is_visible("#provenance > summary") and not page.is_visible("#provenance li")
        page.eval_on_selector_all("details", "ds => ds.forEach(d => { d.open = true; })")
        loaded = page.eval_on_selector_all(
            "details.sample img",
            "is => Promise.all(is.map(i => i.decode().then(() => i.naturalWidth > 0, () => false)))",
        )
        assert len(loaded) > 20 and all(loaded)
    finally:
        browser.close()
        p.stop()
