"""The report page's layout: it opens with its title, its contents (a link to every section and
table), the warnings that change how a number reads and the tables; how each run was made is
folded under them (`<details id="provenance">`, closed). The browser half is in test_browser.py."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from yanami.scoring import SHORT, Entry, Page, Panel, RunLine, Table, Viewer, render, render_page
from yanami.scoring._charts import Drawn
from yanami.scoring._page import contents_text

TABLE_2 = "Table 2: scores across the four scenarios"
COVERAGE = "Coverage: valid records out of the run's items"
TABLE_12 = "Table 12: dialogue-state understanding, Multi-Image Fusion"


@pytest.mark.parametrize(
    ("title", "text"),
    [
        (f"{TABLE_2} (0-100; Avg. is the macro-average)", TABLE_2),
        (f"{COVERAGE}; refused, error and missing records are excluded", COVERAGE),
        (TABLE_12, TABLE_12),  # nothing to cut
        ("Toy: accuracy", "Toy: accuracy"),
    ],
)  # fmt: skip
def test_a_table_is_listed_by_its_title_up_to_the_detail(title: str, text: str) -> None:
    assert contents_text(title) == text


def _page(warnings: list[str], runs: int = 2, viewer: Viewer | None = None) -> Page:
    tables = [
        Table("table2", "Table 2: scores (0-100)", ["Model", "Avg."], [["a", 1.0]]),
        Table("coverage", "Coverage: valid records; refused excluded", ["Model", "Valid"], [["a", 3]]),
    ]
    return Page(
        "yanami report",
        [RunLine(f"run{i}", f"runs/run{i}: judge exact v6", "‡ reads the bench" if i else "") for i in range(runs)],
        warnings,
        tables,
        [Panel("fig6a", Drawn("<svg></svg>"))],
        [("run1", 40.0)],
        viewer,
    )


def test_the_contents_list_every_section_and_table_in_the_order_of_the_page() -> None:
    page = _page(["rows are not comparable: different history; marked †"], viewer=Viewer([], {}, "none asked for"))
    assert page.contents() == [
        Entry("comparability", "Comparability (1 warning)"),
        Entry("tables", "Tables", (Entry("table2", "Table 2: scores"), Entry("coverage", "Coverage: valid records"))),
        Entry("audit", "Irreducibility audit"),
        Entry("figures", "Figure 6"),
        Entry("provenance", "Provenance (2 runs, folded)"),
        Entry("samples", "Samples"),
    ]
    # a page without warnings, runs or viewer lists none of them
    assert [e.anchor for e in _page([], runs=0).contents()] == ["tables", "audit", "figures"]


class _Outline(HTMLParser):
    """What a page holds, in order: each element's id and its ``open`` state if it is a `details`,
    the links' targets, the text of each heading, and which texts are inside a `details`."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.links: list[str] = []
        self.open: dict[str, bool] = {}
        self.headings: list[str] = []
        self.folded: list[str] = []
        self.texts: list[str] = []
        self._details = 0
        self._heading: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(str(a["id"]))
        if tag == "a" and str(a.get("href", "")).startswith("#"):
            self.links.append(str(a["href"])[1:])
        if tag == "details":
            self._details += 1
            if a.get("id"):
                self.open[str(a["id"])] = "open" in a
        if tag in ("h1", "h2"):
            self._heading = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "details":
            self._details -= 1
        if tag in ("h1", "h2") and self._heading is not None:
            self.headings.append("".join(self._heading).strip())
            self._heading = None

    def handle_data(self, data: str) -> None:
        self.texts.append(data)
        if self._details:
            self.folded.append(data)
        if self._heading is not None:
            self._heading.append(data)


def _outline(html: str) -> _Outline:
    o = _Outline()
    o.feed(html)
    return o


def test_a_page_opens_with_its_contents_and_warnings_and_folds_how_its_runs_were_made() -> None:
    warning = "rows are not comparable: different history (run1: Self-History); marked †"
    html = render(_page([warning]))
    o = _outline(html)
    assert o.headings == [
        "yanami report", "Contents", "Comparability", "Tables", "Irreducibility audit", "Figure 6", "Provenance",
    ]  # fmt: skip
    # every link of the contents lands on one element of the page
    assert o.links == ["comparability", "tables", "table2", "coverage", "audit", "figures", "provenance"]
    assert all(o.ids.count(anchor) == 1 for anchor in o.links)
    # the warning is read before any table, and is not folded
    assert html.index(warning) < html.index('<table id="table2">') and warning not in " ".join(o.folded)
    # the runs are listed after the last table and the figure, folded (closed)
    assert o.open == {"provenance": False}
    folded = "".join(o.folded)
    assert all(f"runs/run{i}: judge exact v6" in folded for i in (0, 1)) and "‡ reads the bench" in folded
    assert html.index('id="provenance"') > html.index('id="fig6a-panel"') > html.index('<table id="coverage">')


def test_a_plug_in_page_keeps_its_call_and_gains_the_same_layout() -> None:
    """`render_page` as tests/test_family_plugin.py calls it: no warnings, no figure, no samples."""
    t = Table("toy", "Toy: accuracy", ["Run", "Accuracy", "Items"], [["run", 50.0, 2]])
    html = render_page("Toy report", runs=[{"label": "run", "details": "a toy run", "privileged": ""}],
                       warnings=[], table_list=[t])  # fmt: skip
    o = _outline(html)
    assert "<h1>Toy report</h1>" in html and 'id="comparability"' not in html
    assert o.headings == ["Toy report", "Contents", "Tables", "Provenance"]
    assert o.links == ["tables", "toy", "provenance"] and o.open == {"provenance": False}
    assert "a toy run" in "".join(o.folded)


def test_the_demo_report_links_every_table_and_names_its_scenarios_as_its_columns(small_demo: Path) -> None:
    html = (small_demo / "report.html").read_text()
    o = _outline(html)
    assert len(o.ids) == len(set(o.ids))  # no anchor is ambiguous
    tables = re.findall(r'<table id="([^"]+)">', html)
    assert len(tables) >= 15
    nav = html[html.index('<nav id="contents"') : html.index("</nav>")]
    assert re.findall(r'href="#([^"]+)"', nav) == [
        "comparability", "tables", *tables, "audit", "figures", "provenance", "samples",
    ]  # fmt: skip
    assert all(o.ids.count(anchor) == 1 for anchor in o.links)
    # opened at the top: the title, the contents, the warnings, then the tables; the runs folded
    # after the figure and before the samples
    assert o.headings[:4] == ["yanami report", "Contents", "Comparability", "Tables"]
    assert o.open["provenance"] is False
    assert html.index('<table id="table2">') < html.index('id="provenance"') < html.index('id="samples"')
    provenance = html[html.index('<details id="provenance">') : html.index('<h2 id="samples">')]
    assert provenance.count("<li><b>reference:") == 19 and "judge exact" in provenance
    # the viewer names each scenario as the tables head it: Modeling, never world_modeling
    scenarios = re.findall(r'<option value="(\w+)">([^<]+)</option>', html)
    assert scenarios and all(text == SHORT[value] for value, text in scenarios)
    assert "(world_modeling)" not in html and "(Modeling)" in html
    assert not re.search(r"\bin (fusion|editing|world_modeling|reasoning)\)", html)
