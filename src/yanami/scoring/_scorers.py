"""A family's scorer: what `yanami eval`, `score` and `report` ask of runs, whatever their family.

The command line looks the runs' family up once (`scorer_for`) and calls its scorer; it
never asks which family it holds. YANAMI's is `YANAMI_SCORER` (the paper's tables, Figure 6,
the per-sample viewer); WEAVE's and IMUG-Bench's are in their folders (`yanami.families`);
a plug-in family names its own in its `FamilyFacts.scorer`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from yanami.contract import UnknownFamily, UserError, family_of
from yanami.scoring._table import Table


@dataclass(frozen=True)
class Scored:
    """What a scorer makes of some runs: its main table (what `yanami eval` prints), every table,
    the warnings for standard error, every score as JSON-ready data, and the coverage (valid,
    expected items)."""

    main: Table
    tables: list[Table]
    warnings: list[str]
    data: dict[str, Any]
    coverage: tuple[int, int]
    summary: str
    """What `yanami score` prints by default: the main table, with a line on what else there is."""


@runtime_checkable
class Scorer(Protocol):
    """Scores and the HTML report of runs of one family."""

    def score(self, runs: list[Path], judge: str | None) -> Scored:
        """The runs' scores (``judge``: score that judge's verdicts, by name)."""
        ...

    def report(self, runs: list[Path], judge: str | None, samples: int, bench: Path | None) -> tuple[str, list[str]]:
        """One self-contained HTML page, and the warnings for standard error."""
        ...


def scorer_for(runs: list[Path]) -> Scorer:
    """The scorer of the runs' family; a one-line error for runs of different families."""
    from yanami.contract import read_manifest
    from yanami.scoring._load import check_run_dir

    for r in runs:
        check_run_dir(r)
    families = sorted({read_manifest(r).family for r in runs})
    if len(families) > 1:
        raise UserError(f"runs of different families ({', '.join(families)}) are not comparable: score them apart")
    try:
        scorer = family_of(families[0]).hook("scorer")
    except UnknownFamily as exc:
        raise UserError(f"{runs[0]}: {exc}") from None
    if not isinstance(scorer, Scorer):
        raise UserError(f"the {families[0]} family's scorer does not score runs (score, report)")
    return scorer


class _Yanami:
    """YANAMI's scoring: the paper's tables, analyses across runs, Figure 6 and the viewer.

    Both commands go the same way: load the runs (`load_runs`), compute their one `ScoreSet`,
    build the tables from it as data, and only then print or render."""

    def score(self, runs: list[Path], judge: str | None) -> Scored:
        from yanami.scoring._load import load_runs
        from yanami.scoring._scoreset import score_set
        from yanami.scoring._table import markdown
        from yanami.scoring._tables import build_tables, summary_table

        loaded = load_runs(runs, judge)
        value = score_set(loaded.runs, loaded.scores, loaded.warnings)
        table_list = build_tables(value)
        main = summary_table(value.scores)
        available = [t.title.split(":")[0].split(" (")[0] for t in table_list if t.rows]
        summary = (
            markdown(main, escaped=False)
            + f"\nTables for these runs: {', '.join(available)}. Print them with --format md or --format latex; "
            "every score with --json; an HTML report (tables, Figure 6, samples) with `yanami report`."
        )
        coverage = (sum(s.coverage["valid"] for s in value.scores), sum(s.coverage["expected"] for s in value.scores))
        return Scored(main, table_list, list(value.warnings), value.as_json(), coverage, summary)

    def report(self, runs: list[Path], judge: str | None, samples: int, bench: Path | None) -> tuple[str, list[str]]:
        from yanami.scoring._load import load_runs
        from yanami.scoring._page import render
        from yanami.scoring._report import report_page
        from yanami.scoring._scoreset import score_set
        from yanami.scoring._tables import build_tables
        from yanami.scoring._viewer import load_viewer

        loaded = load_runs(runs, judge)
        value = score_set(loaded.runs, loaded.scores, loaded.warnings)
        table_list = build_tables(value)
        viewer = load_viewer(loaded.runs, samples, bench)
        return render(report_page(value, table_list, viewer)), list(value.warnings)


YANAMI_SCORER: Scorer = _Yanami()
