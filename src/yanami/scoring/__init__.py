"""Scores, analyses, tables and the HTML report, computed from run directories alone."""

from yanami.scoring._report import figure6, grouped_bars, write_report
from yanami.scoring._scores import (
    GAP_CAPABILITIES,
    QTYPES,
    SCENARIOS,
    DialogueRecord,
    Run,
    RunScores,
    ScenarioScores,
    history_effect,
    load_run,
    pair_histories,
    progression,
    run_scores,
    scenario_scores,
    scene_score,
    understanding_realization_gap,
)
from yanami.scoring._tables import Table, html_table, irreducibility, latex, markdown, tables

__all__ = [
    "GAP_CAPABILITIES",
    "QTYPES",
    "SCENARIOS",
    "DialogueRecord",
    "Run",
    "RunScores",
    "ScenarioScores",
    "Table",
    "figure6",
    "grouped_bars",
    "history_effect",
    "html_table",
    "irreducibility",
    "latex",
    "load_run",
    "markdown",
    "pair_histories",
    "progression",
    "run_scores",
    "scenario_scores",
    "scene_score",
    "tables",
    "understanding_realization_gap",
    "write_report",
]
