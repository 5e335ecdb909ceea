"""The report page as data (`Page`), and its one renderer: Jinja templates, autoescaped.

Every family's report is one `Page` rendered by ``templates/report.html.j2``; a table's markup
is ``templates/table.html.j2`` (`html_table` renders it alone). Nothing is computed here: what
a page shows is computed before (`yanami.scoring._scoreset`, `yanami.scoring._tables`).
"""

from __future__ import annotations

import functools
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from yanami.scoring._charts import Chart, Drawn
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
