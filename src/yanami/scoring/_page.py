"""The report page as data (`Page`), and its one renderer: Jinja templates, autoescaped.

Every family's report is one `Page` rendered by ``templates/report.html.j2``; a table's markup
is ``templates/table.html.j2`` (`html_table` renders it alone). Nothing is computed here: what
a page shows is computed before (`yanami.scoring._scoreset`, `yanami.scoring._tables`); the page
only lays it out: its title, its contents (`Page.contents`), the comparability warnings, the
tables and figures, then the runs' provenance folded, then the samples.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from yanami.scoring._charts import Chart, Drawn
from yanami.scoring._runs import SHORT
from yanami.scoring._table import Table
from yanami.scoring._viewer import Sample, Viewer


@dataclass(frozen=True)
class RunLine:
    """A run in the page's list: its label, what it is in words, and its privileged mark's text
    (empty: the run is a model result)."""

    label: str
    details: str
    privileged: str = ""


@dataclass(frozen=True)
class Panel:
    """A figure of the page: a chart and the notes under it."""

    key: str
    chart: Chart
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Entry:
    """A line of the page's contents: the anchor it links to, its text, and the entries under it."""

    anchor: str
    text: str
    entries: tuple[Entry, ...] = ()


def contents_text(title: str) -> str:
    """A table's title as its line of the contents: up to its first parenthesis or semicolon
    (``Table 2: scores across the four scenarios``), the detail left to the caption."""
    return title.split(" (", 1)[0].split("; ", 1)[0].strip()


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class Page:
    """Everything one report page shows, as data."""

    title: str
    runs: list[RunLine]
    warnings: list[str]
    """Comparability warnings, one line each."""
    tables: list[Table]
    panels: list[Panel] = field(default_factory=list)
    audit: list[tuple[str, float]] = field(default_factory=list)
    """The irreducibility audit: (run label, share of target turns failed, %)."""
    viewer: Viewer | None = None
    """The per-sample viewer (None: the page has no Samples section)."""
    panels_title: str = "Figure 6"

    def contents(self) -> list[Entry]:
        """The page's sections in their order, each with the anchor of its heading; the tables
        each with their own (a table's key is its ``id``)."""
        out = []
        if self.warnings:
            out.append(Entry("comparability", f"Comparability ({_count(len(self.warnings), 'warning')})"))
        tables = tuple(Entry(t.key, contents_text(t.title)) for t in self.tables)
        out.append(Entry("tables", "Tables", tables))
        if self.audit:
            out.append(Entry("audit", "Irreducibility audit"))
        if self.panels:
            out.append(Entry("figures", self.panels_title))
        if self.runs:
            out.append(Entry("provenance", f"Provenance ({_count(len(self.runs), 'run')}, folded)"))
        if self.viewer is not None:
            shown = len(self.viewer.samples)
            out.append(Entry("samples", f"Samples ({_count(shown, 'dialogue')})" if shown else "Samples"))
        return out


def _text(value: object) -> Markup:
    """A table's text, escaped as `html.escape` does (quotes as ``&quot;`` and ``&#x27;``): the
    report's tables have always been escaped so, and their bytes stay the same."""
    return Markup(html.escape(str(value)))


@functools.cache
def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("yanami.scoring", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
    )
    env.filters["text"] = _text
    env.filters["scenario"] = lambda name: SHORT.get(name, name)  # as the tables head it
    return env


def render(page: Page) -> str:
    """The page as one self-contained HTML document."""
    return _environment().get_template("report.html.j2").render(page=page)


def html_table(t: Table) -> str:
    """A table as an HTML fragment, its notes in the table's foot (``templates/table.html.j2``)."""
    return _environment().get_template("table.html.j2").render(table=t)


def _notes(notes: object) -> list[str]:
    """A panel's notes, as a caller gave them (a list of texts, or none)."""
    return [str(n) for n in notes] if isinstance(notes, list | tuple) else []


def render_page(
    title: str,
    *,
    runs: list[dict[str, str]],
    warnings: list[str],
    table_list: list[Table],
    panels: Sequence[Mapping[str, object]] | None = None,
    audit: list[tuple[str, float]] | None = None,
    samples: list[Sample] | None = None,
    images: dict[str, str] | None = None,
    viewer_note: str | None = None,
    panels_title: str = "Figure 6",
) -> str:
    """One self-contained HTML page from the one report template (Jinja, autoescaped), for every
    family: the runs (``label``, ``details``, ``privileged``), comparability warnings, the tables,
    and what the family has beside them (panels ``{"key", "svg", "notes"}`` whose SVG escapes its
    own text, the irreducibility audit, samples). The same as `render` of the `Page` they make."""
    return render(
        Page(
            title,
            [RunLine(r["label"], r["details"], r.get("privileged", "")) for r in runs],
            list(warnings),
            list(table_list),
            [Panel(str(p["key"]), Drawn(str(p["svg"])), _notes(p.get("notes"))) for p in panels or []],
            list(audit or []),
            None if samples is None else Viewer(samples, images or {}, viewer_note),
            panels_title,
        )
    )
