"""The paper's tables for a set of runs, as data, rendered to Markdown, LaTeX or HTML."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from yanami.contract import FACTS, printable
from yanami.scoring._compare import MARK, PRIVILEGED_MARK, caveats
from yanami.scoring._floor import CHANCE_DSU, FLOOR_LABEL
from yanami.scoring._scores import (
    MIN_COVERAGE,
    PRIVILEGED_NOTE,
    QTYPES,
    SCENARIO_TITLES,
    SCENARIOS,
    Run,
    RunScores,
    history_effect,
    label_runs,
    pair_histories,
    progression,
    shared_gap,
)
from yanami.scoring._weights import generation_formula


@dataclass
class Table:
    """A titled table: a header, rows of cells (None prints as a dash) and notes under it.

    A row whose run is not comparable with the others has `MARK` after its label, and a
    note saying why (see `yanami.scoring._compare`).
    """

    key: str
    title: str
    header: list[str]
    rows: list[list[str | float | int | None]]
    notes: list[str] = field(default_factory=list)


def _cell(v: str | float | int | None, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


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


def _ensure_labels(runs: list[Run], scores: list[RunScores]) -> None:
    """Name the runs apart if their labels collide (callers that did not use `load_runs`)."""
    if len({s.label for s in scores}) < len(scores):
        label_runs(runs)
        for r, s in zip(runs, scores, strict=True):
            s.label = r.label


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
                ["Model", *SCENARIOS, "Avg.", FAILURES_AS_ZERO, "95 % CI", "DSU", "SC", "VQ", "valid/items"],
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


def tables(runs: list[Run], scores: list[RunScores]) -> list[Table]:
    """Tables 2, 3, 11-21 of the paper (in their shape) plus the History effect and coverage.

    Rows that are not comparable with the others in a table are marked (`MARK`) with a note.
    """
    _ensure_labels(runs, scores)
    out: list[Table] = []
    short = {s.value: f.short for s, f in FACTS.items()}
    out.append(
        _floor_rows(
            Table(
                "table2",
                "Table 2: scores across the four scenarios (0-100; Avg. is the macro-average; 95 % bootstrap interval)",
                ["Model", *[short[s] for s in SCENARIOS], "Avg.", FAILURES_AS_ZERO, "95 % CI"],
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
    answering = [(r, s) for r, s in zip(runs, scores, strict=True) if r.answers]
    out.append(
        Table(
            "table3",
            "Table 3: dialogue-state understanding, averaged over scenarios",
            ["Model", *QTYPES, "Avg."],
            [
                [s.label, *[_average_cell(s, t) for t in QTYPES], _average_cell(s, "understanding")]
                for _, s in answering
            ],
        )
    )
    out.append(
        Table(
            "table11",
            "Table 11: dialogue-state understanding per scenario",
            ["Model", *[short[s] for s in SCENARIOS], "Avg."],
            [
                [
                    s.label,
                    *[s.scenarios[sc].understanding if sc in s.scenarios else None for sc in SCENARIOS],
                    _average_cell(s, "understanding"),
                ]
                for _, s in answering
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
                    for _, s in answering
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
    gt_runs = [r for r in runs if r.history == "gt"]
    prog = [(r, progression(r)) for r in gt_runs]
    out.append(
        Table(
            "table20",
            f"Table 20: first vs last generation turn under GT-History ({generation_formula()}; dialogues with >= 2)",
            ["Model", "Dialogues", "First", "Last", "Delta"],
            [[r.label, p["dialogues"], p["first"], p["last"], p["delta"]] for r, p in prog],
        )
    )
    gap = shared_gap(runs)
    eligible = gap["eligible"]
    out.append(
        Table(
            "table21",
            "Table 21: understanding-realization gap on shared subsets (lower is better; "
            f"{eligible.get('constraint_adherence', 0)} CK and {eligible.get('correction_updating', 0)} CU dialogues)",
            ["Model", "CK", "CU", "Overall"],
            [
                [label, g.get("constraint_adherence"), g.get("correction_updating"), g.get("overall")]
                for label, g in gap["gap"].items()
            ],
            list(gap["notes"]),
        )
    )
    pairs = pair_histories(runs)
    out.append(
        Table(
            "history",
            f"History effect: GT-History vs Self-History ({generation_formula()} on the Self-History dialogues; "
            "Drop = GT - Self in points on 0-100, as the paper's tables; Drop % = that drop relative to GT)",
            ["Model", "Dialogues", "GT-History", "Self-History", "Drop", "Drop %"],
            [
                [g.label, e["dialogues"], e["gt"], e["self"], e["drop_points"], e["drop_percent"]]
                for g, s in pairs
                for e in [history_effect(g, s)]
            ],
        )
    )
    split = [s for s in scores if any(s.average.get(k) is not None for k in ("sc_change", "sc_preservation"))]
    if split:
        out.append(
            Table(
                "sc_effects",
                "State consistency by what a check tests: change (what the turn changes or the history requires,"
                " which a copy of the latest image cannot satisfy) and preservation (what must stay), 0-100",
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


def irreducibility(runs: list[Run], scores: list[RunScores]) -> list[tuple[str, float]]:
    """The irreducibility audit: share (%) of target turns the stateless agent fails, per stateless run."""
    return [
        (s.label, 100 * s.failed_turn_share)
        for r, s in zip(runs, scores, strict=True)
        if r.model_spec == "reference:stateless" and s.failed_turn_share is not None
    ]


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


_MARKDOWN = {"&": "&amp;", "<": "&lt;", ">": "&gt;"} | {ch: "\\" + ch for ch in "\\`*_[]|#"}
"""Every character of a text that Markdown could read as markup or as HTML (a run's label, a
config's name), written so that it shows as itself."""


def _markdown_escape(s: str) -> str:
    return "".join(_MARKDOWN.get(ch, ch) for ch in s)


def markdown(t: Table, *, escaped: bool = True) -> str:
    """A table in GitHub Markdown, its notes under it; every text escaped (`_markdown_escape`).

    ``escaped=False`` is the same layout for a terminal, which renders no Markdown: texts as they
    are but for a cell's ``|``, control characters written out (`yanami.errors.printable`)."""

    def text(s: str) -> str:
        return _markdown_escape(s) if escaped else printable(s)

    def cell(c: str | float | int | None) -> str:
        return text(_cell(c)) if escaped else text(_cell(c)).replace("|", "\\|")

    lines = [f"**{text(t.title)}**", "", "| " + " | ".join(map(text, t.header)) + " |"]
    lines.append("|" + "---|" * len(t.header))
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in t.rows]
    if t.notes:
        lines += ["", "  \n".join(map(text, t.notes))]
    return "\n".join(lines) + "\n"


_LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "_": r"\_",
    "#": r"\#",
    "$": r"\$",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    MARK: r"\textsuperscript{\dag}",
    PRIVILEGED_MARK: r"\textsuperscript{\ddag}",
}


def _latex_escape(s: str) -> str:
    """``s`` as LaTeX text: each special character escaped, and a control character (a newline
    included: a blank line would end the paragraph inside a tabular) as a space."""
    return "".join(_LATEX.get(ch, " " if ch < " " or ch == "\x7f" else ch) for ch in s)


def latex(t: Table) -> str:
    """A table as a LaTeX tabular (booktabs), its notes under it."""
    cols = "l" + "r" * (len(t.header) - 1)
    lines = [
        "\\begin{table}[t]\\centering",
        f"\\caption{{{_latex_escape(t.title)}}}",
        f"\\begin{{tabular}}{{{cols}}}",
        "\\toprule",
        " & ".join(_latex_escape(h) for h in t.header) + " \\\\",
        "\\midrule",
    ]
    lines += [" & ".join(_latex_escape(_cell(c)) for c in row) + " \\\\" for row in t.rows]
    lines += ["\\bottomrule", "\\end{tabular}"]
    if t.notes:
        lines.append("\\par\\smallskip{\\footnotesize " + " \\\\ ".join(_latex_escape(n) for n in t.notes) + "}")
    lines.append("\\end{table}")
    return "\n".join(lines) + "\n"


def html_table(t: Table) -> str:
    """A table as an HTML fragment, its notes in the table's foot."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(c))}</td>" for c in row) + "</tr>" for row in t.rows)
    foot = ""
    if t.notes:
        foot = (
            "<tfoot>"
            + "".join(f'<tr><td class="note" colspan="{len(t.header)}">{html.escape(n)}</td></tr>' for n in t.notes)
            + "</tfoot>"
        )
    return f'<table id="{t.key}"><caption>{html.escape(t.title)}</caption><tr>{head}</tr>{body}{foot}</table>'
