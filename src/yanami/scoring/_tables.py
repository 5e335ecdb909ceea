"""The paper's tables for a set of runs, built as data (`Table`) from their `ScoreSet`.

Their forms are elsewhere: Markdown and LaTeX in `yanami.scoring._table`, HTML in the
templates (`yanami.scoring._page`).
"""

from __future__ import annotations

from yanami.contract import FACTS
from yanami.scoring._compare import MARK, PRIVILEGED_MARK, caveats
from yanami.scoring._floor import CHANCE_DSU, FLOOR_LABEL
from yanami.scoring._page import html_table as html_table
from yanami.scoring._runs import QTYPES, SCENARIO_TITLES, SCENARIOS, SHORT, Run
from yanami.scoring._scores import MIN_COVERAGE, PRIVILEGED_NOTE, RunScores
from yanami.scoring._scoreset import ScoreSet, score_set
from yanami.scoring._table import Table as Table
from yanami.scoring._table import latex as latex
from yanami.scoring._table import markdown as markdown
from yanami.scoring._weights import generation_formula

DASH_NOTE = "A dash (-) means no value: no valid item of that component or scenario (see the coverage table)."


FAILURES_AS_ZERO = "Avg. failures as 0"
"""The header of the failures-as-zero column, beside the benchmark score (Avg.)."""
FAILURES_AS_ZERO_NOTE = (
    f"{FAILURES_AS_ZERO}: the same average with every item that has no valid record (refused, error, missing, "
    "unjudged) counted as 0, so refusing items never raises it. Avg. counts valid items only (the paper's rule); "
    f"below {100 * MIN_COVERAGE:g} % coverage it and its interval are withheld (n/a, coverage N %)."
)
PRIVILEGED_TABLE_NOTE = (
    f"{PRIVILEGED_MARK} {PRIVILEGED_NOTE}: the runner handed the model the bench, hidden annotations and all."
)


def _average_cell(s: RunScores, key: str) -> str | float | None:
    """A macro-average, with the number of scenarios it is over when that is fewer than all; the
    benchmark score (``scene``) reads ``n/a, coverage N %`` when it is withheld."""
    if key == "scene":
        return s.average_text
    v = s.average[key]
    if v is None or s.all_scenarios:
        return v
    return f"{v:.2f} ({len(s.average_over)}/{len(SCENARIOS)} scen.)"


def _marked(t: Table, scores: list[RunScores]) -> Table:
    """Mark the rows of ``t`` whose runs are not comparable with the other rows (`MARK`), and say
    why; mark the rows of privileged runs (`PRIVILEGED_MARK`: they read the bench)."""
    by = {s.label: s for s in scores}
    present = [by[row[0]] for row in t.rows if isinstance(row[0], str) and row[0] in by]
    why = caveats(present)
    privileged = False
    for row in t.rows:
        label = row[0]
        if not isinstance(label, str):
            continue
        reasons = why.get(label, [])
        if reasons:
            t.notes.append(f"{MARK} {label}: {'; '.join(reasons)}")
            row[0] = f"{row[0]} {MARK}"
        if label in by and by[label].privileged:
            row[0] = f"{row[0]} {PRIVILEGED_MARK}"
            privileged = True
    if privileged:
        t.notes.append(PRIVILEGED_TABLE_NOTE)
    if any(c is None for row in t.rows for c in row):
        t.notes.append(DASH_NOTE)
    return t


ABOVE_FLOOR = "Above floor"
"""The header of the column that places each run between the bench's floor and 100."""


def _floor_rows(t: Table, scores: list[RunScores], columns: list[str]) -> Table:
    """Say whether the bench is public or private, and add its floor to ``t``: its own row (the best
    trivial strategy, scored as the first run that has a floor is) and a column placing each run
    above it, ``(score - floor) / (100 - floor)``; no floor where no run's bench records floors.
    ``columns`` names what the floor row holds in each of the table's columns after the label: a
    scenario, ``avg``, ``dsu``, ``sc``, ``vq``, or anything else (a dash)."""
    benches = sorted({s.bench for s in scores if s.bench})
    if benches:
        t.notes.append(f"Bench: {'; '.join(benches)}.")
    with_floor = [s for s in scores if s.floor is not None]
    if not with_floor:
        return t
    ref = with_floor[0]
    floor = ref.floor
    assert floor is not None
    t.header.append(ABOVE_FLOOR)
    for row, s in zip(t.rows, scores, strict=True):
        row.append(s.above_floor)
    values = {"avg": floor.score, "dsu": floor.dsu, "sc": floor.sc, "vq": floor.vq, **floor.scenarios}
    t.rows.append([f"{FLOOR_LABEL} ({floor.strategy})", *[values.get(c) for c in columns], 0.0])
    differs = [s.label for s in with_floor if s.floor != floor]
    t.notes.append(
        f"{FLOOR_LABEL}: the best trivial strategy on this bench (copies and jittered copies of an input, their "
        "union, a blank or noise picture), played as the exact judge reads it under GT-History with the DSU "
        f"questions answered at chance ({CHANCE_DSU:g}), scored as {ref.label} is. {ABOVE_FLOOR}: (Avg. - floor) "
        "/ (100 - floor), 0-100: how far a run is from the floor to a perfect score."
        + (f" Other runs' floors differ (their scenarios or equation): {', '.join(differs)}." if differs else "")
    )
    return t


def summary_table(scores: list[RunScores]) -> Table:
    """The main table printed by ``eval``, ``score`` and ``demo``: Table 2's shape plus DSU, SC, VQ and
    coverage, the bench's floor as a row of its own and each run's score above it."""
    return _floor_rows(
        _marked(
            Table(
                "summary",
                "Scores (0-100; Avg. is the macro-average over scenarios; 95 % bootstrap interval)",
                [
                    "Model",
                    *[SHORT[s] for s in SCENARIOS],
                    "Avg.",
                    FAILURES_AS_ZERO,
                    "95 % CI",
                    "DSU",
                    "SC",
                    "VQ",
                    "valid/items",
                ],
                [
                    [
                        s.label,
                        *[s.scenarios[sc].scene if sc in s.scenarios else None for sc in SCENARIOS],
                        _average_cell(s, "scene"),
                        s.failures_as_zero_text,
                        s.interval_text,
                        s.average["understanding"],
                        s.average["sc"],
                        s.average["vq"],
                        f"{s.coverage['valid']}/{s.coverage['expected']}",
                    ]
                    for s in scores
                ],
                [FAILURES_AS_ZERO_NOTE],
            ),
            scores,
        ),
        scores,
        [*SCENARIOS, "avg", "avg", "-", "dsu", "sc", "vq", "-"],
    )


def build_tables(value: ScoreSet) -> list[Table]:
    """Tables 2, 3, 11-21 of the paper (in their shape) plus the History effect and coverage, from
    the set's scores (nothing is computed here but the tables' marks and notes).

    Rows that are not comparable with the others in a table are marked (`MARK`) with a note.
    """
    scores = value.scores
    out: list[Table] = []
    out.append(
        _floor_rows(
            Table(
                "table2",
                "Table 2: scores across the four scenarios (0-100; Avg. is the macro-average; 95 % bootstrap interval)",
                ["Model", *[SHORT[s] for s in SCENARIOS], "Avg.", FAILURES_AS_ZERO, "95 % CI"],
                [
                    [
                        s.label,
                        *[s.scenarios[sc].scene if sc in s.scenarios else None for sc in SCENARIOS],
                        _average_cell(s, "scene"),
                        s.failures_as_zero_text,
                        s.interval_text,
                    ]
                    for s in scores
                ],
                [FAILURES_AS_ZERO_NOTE],
            ),
            scores,
            [*SCENARIOS, "avg", "avg", "-"],
        )
    )
    if any(s.coverage.get("strategy", "none") != "none" for s in scores):
        out.append(
            scaling_table(
                [(s.label, s.coverage["strategy"], s.coverage["calls_per_item"], s.average_text) for s in scores],
                "benchmark score, 0-100",
            )
        )
    answering = [s for f, s in zip(value.runs, scores, strict=True) if f.answers]
    out.append(
        Table(
            "table3",
            "Table 3: dialogue-state understanding, averaged over scenarios",
            ["Model", *QTYPES, "Avg."],
            [[s.label, *[_average_cell(s, t) for t in QTYPES], _average_cell(s, "understanding")] for s in answering],
        )
    )
    out.append(
        Table(
            "table11",
            "Table 11: dialogue-state understanding per scenario",
            ["Model", *[SHORT[s] for s in SCENARIOS], "Avg."],
            [
                [
                    s.label,
                    *[s.scenarios[sc].understanding if sc in s.scenarios else None for sc in SCENARIOS],
                    _average_cell(s, "understanding"),
                ]
                for s in answering
            ],
        )
    )
    for f in sorted(FACTS.values(), key=lambda f: f.dsu_table):
        sc, a, b = f.scenario.value, f.dsu_table, f.realization_table
        title = SCENARIO_TITLES[sc]
        out.append(
            Table(
                f"table{a}",
                f"Table {a}: dialogue-state understanding, {title}",
                ["Model", *QTYPES, "DSU Avg."],
                [
                    [s.label, *[s.scenarios[sc].dsu[t] for t in QTYPES], s.scenarios[sc].understanding]
                    for s in answering
                    if sc in s.scenarios
                ],
            )
        )
        out.append(
            Table(
                f"table{b}",
                f"Table {b}: understanding and visual realization, {title}",
                ["Model", "DSU", "SC", "VQ", "CK", "CBU", "Overall"],
                [
                    [
                        s.label,
                        s.scenarios[sc].understanding,
                        s.scenarios[sc].sc,
                        s.scenarios[sc].vq,
                        s.scenarios[sc].constraint_keeping,
                        s.scenarios[sc].correction_updating,
                        s.scenarios[sc].scene,
                    ]
                    for s in scores
                    if sc in s.scenarios
                ],
            )
        )
    out.append(
        Table(
            "table20",
            f"Table 20: first vs last generation turn under GT-History ({generation_formula()}; dialogues with >= 2)",
            ["Model", "Dialogues", "First", "Last", "Delta"],
            [
                [p.run.label, p.figures.dialogues, p.figures.first, p.figures.last, p.figures.delta]
                for p in value.analyses.progression
            ],
        )
    )
    gap = value.analyses.gap
    eligible = gap.eligible
    out.append(
        Table(
            "table21",
            "Table 21: understanding-realization gap on shared subsets (lower is better; "
            f"{eligible.get('constraint_adherence', 0)} CK and {eligible.get('correction_updating', 0)} CU dialogues)",
            ["Model", "CK", "CU", "Overall"],
            [
                [label, g.get("constraint_adherence"), g.get("correction_updating"), g.get("overall")]
                for label, g in gap.gap.items()
            ],
            list(gap.notes),
        )
    )
    out.append(
        Table(
            "history",
            f"History effect: GT-History vs Self-History ({generation_formula()} on the Self-History dialogues; "
            "Drop = GT - Self in points on 0-100, as the paper's tables; Drop % = that drop relative to GT)",
            ["Model", "Dialogues", "GT-History", "Self-History", "Drop", "Drop %"],
            [
                [h.gt.label, e.dialogues, e.gt, e.self_, e.drop_points, e.drop_percent]
                for h in value.analyses.history
                for e in [h.effect]
            ],
        )
    )
    split = [s for s in scores if any(s.average.get(k) is not None for k in ("sc_change", "sc_preservation"))]
    if split:
        out.append(
            Table(
                "sc_effects",
                "State consistency by what a check tests (0-100): change, what the turn changes or the history"
                " requires (which a copy of the latest image cannot satisfy), and preservation, what must stay",
                ["Model", "SC", "SC change", "SC preservation"],
                [[s.label, s.average["sc"], s.average["sc_change"], s.average["sc_preservation"]] for s in split],
            )
        )
    out.append(
        Table(
            "coverage",
            "Coverage: valid records out of the run's items; refused, error and missing records are excluded",
            [
                "Model",
                "Dialogues",
                "Items",
                "Valid",
                "Valid %",
                "ok",
                "refused",
                "error",
                "missing",
                "Unjudged",
                "Turns failing a check %",
            ],
            [
                [
                    s.label,
                    "all" if s.limit is None else f"--limit {s.limit}",
                    s.coverage["expected"],
                    s.coverage["valid"],
                    s.coverage["percent"],
                    *[s.coverage["statuses"].get(k, 0) for k in ("ok", "refused", "error", "missing")],
                    s.coverage["unjudged"],
                    None if s.failed_turn_share is None else 100 * s.failed_turn_share,
                ]
                for s in scores
            ],
        )
    )
    return [_marked(t, scores) for t in out]


def tables(runs: list[Run], scores: list[RunScores]) -> list[Table]:
    """The tables of runs and their scores (`build_tables` of their `score_set`)."""
    return build_tables(score_set(runs, scores))


def scaling_table(rows: list[tuple[str, str, float | None, str | float | None]], score: str) -> Table:
    """Test-time scaling: each run's strategy, its model calls per item and its score."""
    return Table(
        "scaling",
        "Test-time scaling: score against model calls per item",
        ["Run", "Strategy", "Calls / item", "Score"],
        [list(r) for r in rows],
        [
            f"Score: the {score}. Calls / item: every model call of the run (drafts, checks, candidates, picks) "
            "over its recorded items; the runs are comparable when they share bench, judge and history."
        ],
    )
