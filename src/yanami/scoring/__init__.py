"""Scores, analyses, tables and the HTML report, computed from run directories alone.

A report goes in steps: load the runs (`load_runs`), compute their one `ScoreSet`
(`score_set`), build the tables as data (`build_tables`: `Table`), then render: Markdown and
LaTeX are functions of a table (`markdown`, `latex`), HTML is the Jinja templates
(`render` of a `Page`; `render_page` for any family)."""

from yanami.scoring._agreement import (
    agreement,
    agreement_lines,
    calibrate_with_humans,
    check_verdicts,
    compare_with_humans,
    human_agreement_lines,
    is_ratings_csv,
    item_scores,
    read_human,
    read_review,
    run_agreement,
    run_human_agreement,
)
from yanami.scoring._analyses import (
    GAP_CAPABILITIES,
    GAP_MIN_UNDERSTANDING,
    GapSelection,
    HistoryEffect,
    Progression,
    gap_selection,
    history_effect,
    pair_histories,
    progression,
    shared_gap,
    understanding_realization_gap,
)
from yanami.scoring._charts import Bars, grouped_bars, line_chart
from yanami.scoring._compare import MARK, PRIVILEGED_MARK, caveats, warnings
from yanami.scoring._load import Loaded, check_run_dir, load_runs, run_judges
from yanami.scoring._page import Entry, Page, Panel, RunLine, html_table, render, render_page
from yanami.scoring._report import figure6, figure_panels, render_report, report_page, write_report
from yanami.scoring._runs import QTYPES, SCENARIOS, SHORT, DialogueRecord, Run, label_runs, load_run
from yanami.scoring._scorers import YANAMI_SCORER, Scored, Scorer, scorer_for
from yanami.scoring._scores import (
    MIN_COVERAGE,
    PRIVILEGED_NOTE,
    RunScores,
    ScenarioScores,
    failures_as_zero,
    run_scores,
    scenario_scores,
)
from yanami.scoring._scoreset import ScoreSet, irreducibility, score_set
from yanami.scoring._table import Table, latex, markdown
from yanami.scoring._tables import PRIVILEGED_TABLE_NOTE, build_tables, scaling_table, summary_table, tables
from yanami.scoring._viewer import Viewer, load_viewer, viewer_bench
from yanami.scoring._weights import (
    WEIGHTS,
    Weights,
    generation_score,
    image_generation_score,
    image_sc,
    scene_score,
)

__all__ = [
    "GAP_CAPABILITIES",
    "GAP_MIN_UNDERSTANDING",
    "MARK",
    "MIN_COVERAGE",
    "PRIVILEGED_MARK",
    "PRIVILEGED_NOTE",
    "PRIVILEGED_TABLE_NOTE",
    "QTYPES",
    "SCENARIOS",
    "SHORT",
    "WEIGHTS",
    "YANAMI_SCORER",
    "Bars",
    "DialogueRecord",
    "Entry",
    "GapSelection",
    "HistoryEffect",
    "Loaded",
    "Page",
    "Panel",
    "Progression",
    "Run",
    "RunLine",
    "RunScores",
    "ScenarioScores",
    "ScoreSet",
    "Scored",
    "Scorer",
    "Table",
    "Viewer",
    "Weights",
    "agreement",
    "agreement_lines",
    "build_tables",
    "calibrate_with_humans",
    "caveats",
    "check_run_dir",
    "check_verdicts",
    "compare_with_humans",
    "failures_as_zero",
    "figure6",
    "figure_panels",
    "gap_selection",
    "generation_score",
    "grouped_bars",
    "history_effect",
    "html_table",
    "human_agreement_lines",
    "image_generation_score",
    "image_sc",
    "irreducibility",
    "is_ratings_csv",
    "item_scores",
    "label_runs",
    "latex",
    "line_chart",
    "load_run",
    "load_runs",
    "load_viewer",
    "markdown",
    "pair_histories",
    "progression",
    "read_human",
    "read_review",
    "render",
    "render_page",
    "render_report",
    "report_page",
    "run_agreement",
    "run_human_agreement",
    "run_judges",
    "run_scores",
    "scaling_table",
    "scenario_scores",
    "scene_score",
    "score_set",
    "scorer_for",
    "shared_gap",
    "summary_table",
    "tables",
    "understanding_realization_gap",
    "viewer_bench",
    "warnings",
    "write_report",
]
