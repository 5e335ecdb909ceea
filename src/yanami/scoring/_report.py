"""YANAMI's self-contained HTML report, in steps: the runs' `ScoreSet` (computed once), its tables
(data), the per-sample viewer (read from the bench), Figure 6's three panels (chart data), then
one render of the `Page` they make (`yanami.scoring._page`)."""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from yanami.contract import atomic_write
from yanami.scoring._charts import Bars
from yanami.scoring._compare import PRIVILEGED_MARK
from yanami.scoring._page import Page, Panel, RunLine, render
from yanami.scoring._runs import Run
from yanami.scoring._scores import PRIVILEGED_NOTE, RunScores
from yanami.scoring._scoreset import Analyses, RunFacts, ScoreSet, analyses, score_set
from yanami.scoring._table import Table
from yanami.scoring._viewer import Viewer, load_viewer
from yanami.scoring._weights import generation_formula

TITLE = "yanami report"


def figure_panels(runs: list[RunFacts], found: Analyses) -> list[Panel]:
    """Figure 6's panels as chart data: (a) the understanding-realization gap over the runs
    `gap_selection` chooses (as Table 21), (b) first vs last turn, (c) GT vs Self."""
    gap = found.gap
    labels = list(gap.gap)
    shown = {r.label: r.shown for r in runs}
    privileged = [f"{PRIVILEGED_MARK} {PRIVILEGED_NOTE}."] if any(r.privileged for r in runs) else []
    ck, cu = gap.eligible.get("constraint_adherence", 0), gap.eligible.get("correction_updating", 0)
    capabilities = (("CK", "constraint_adherence"), ("CU", "correction_updating"), ("Overall", "overall"))
    fig6a = Bars(
        "(a) Understanding-realization gap (lower is better)",
        [shown.get(m, m) for m in labels],
        [(name, [gap.gap[m].get(k) for m in labels]) for name, k in capabilities],
        1.0,
        key="fig6a",
        subtitle=(
            f"{ck} CK and {cu} CU dialogues, understood by all {len(labels)} runs of the set (as Table 21)"
            if labels
            else "no run in the set (see below)"
        ),
    )
    prog = found.progression
    counts = sorted({p.figures.dialogues for p in prog})
    span = "" if not counts else str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    fig6b = Bars(
        f"(b) First vs last generation turn, GT-History ({generation_formula()})",
        [p.run.shown for p in prog],
        [("First", [p.figures.first for p in prog]), ("Last", [p.figures.last for p in prog])],
        100.0,
        key="fig6b",
        subtitle=f"{span or 0} dialogues with two or more judged generation turns per run (as Table 20)",
    )
    pairs = found.history
    dialogues = sorted({h.effect.dialogues for h in pairs})
    fig6c = Bars(
        f"(c) GT-History vs Self-History ({generation_formula()})",
        [h.gt.shown for h in pairs],
        [("GT-History", [h.effect.gt for h in pairs]), ("Self-History", [h.effect.self_ for h in pairs])],
        100.0,
        key="fig6c",
        subtitle=f"{', '.join(map(str, dialogues)) or 0} Self-History dialogues (as the History effect table)",
    )
    return [
        Panel("fig6a", fig6a, [*gap.notes, *privileged]),
        Panel("fig6b", fig6b, privileged),
        Panel("fig6c", fig6c, privileged),
    ]


class FigurePanel(TypedDict):
    """A panel of Figure 6, drawn (`figure6`)."""

    key: str
    svg: str
    notes: list[str]


def figure6(runs: list[Run]) -> list[FigurePanel]:
    """Figure 6's panels of ``runs``, drawn: each ``{"key", "svg", "notes"}`` (see `figure_panels`)."""
    facts = [RunFacts.of(r) for r in runs]
    return [{"key": p.key, "svg": p.chart.svg(), "notes": p.notes} for p in figure_panels(facts, analyses(runs, facts))]


def run_line(r: RunFacts) -> RunLine:
    """A run as the page lists it: where it and its bench are, its coverage and settings."""
    return RunLine(
        r.label,
        f"{r.path}: bench {r.bench_path or '-'} (sha256 {r.bench_sha256[:12]}…), "
        + ("the whole bench" if r.limit is None else f"--limit {r.limit}")
        + f", {r.valid}/{r.expected} items valid ({r.coverage_percent} %), {r.history}-history, "
        f"{r.layout}, judge {r.judge}, yanami {r.yanami_version}",
        f"{PRIVILEGED_MARK} {PRIVILEGED_NOTE}" if r.privileged else "",
    )


def report_page(value: ScoreSet, table_list: list[Table], viewer: Viewer) -> Page:
    """The report's page: the runs, the comparability warnings, the tables, Figure 6, the
    irreducibility audit and the viewer."""
    return Page(
        TITLE,
        [run_line(r) for r in value.runs],
        list(value.warnings),
        table_list,
        figure_panels(value.runs, value.analyses),
        list(value.audit),
        viewer,
    )


def render_report(
    runs: list[Run],
    scores: list[RunScores],
    table_list: list[Table],
    samples: int = 4,
    bench: str | Path | None = None,
) -> str:
    """The report as one self-contained HTML page (``bench``: where the runs' bench is now, if it moved)."""
    value = score_set(runs, scores)
    return render(report_page(value, table_list, load_viewer(runs, samples, bench)))


def write_report(
    runs: list[Run],
    scores: list[RunScores],
    table_list: list[Table],
    out: Path,
    samples: int = 4,
    bench: str | Path | None = None,
) -> None:
    """Write the report to ``out`` atomically (see `render_report`)."""
    atomic_write(out, render_report(runs, scores, table_list, samples, bench))
