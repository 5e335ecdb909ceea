"""The paper's tables for a set of runs, as data, rendered to Markdown, LaTeX or HTML."""

from __future__ import annotations

import html
from dataclasses import dataclass

from yanami.scoring._scores import (
    QTYPES,
    SCENARIO_TITLES,
    SCENARIOS,
    Run,
    RunScores,
    history_effect,
    pair_histories,
    progression,
    understanding_realization_gap,
)


@dataclass
class Table:
    """A titled table: a header and rows of cells (None prints as a dash)."""

    key: str
    title: str
    header: list[str]
    rows: list[list[str | float | int | None]]


def _cell(v: str | float | int | None, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def tables(runs: list[Run], scores: list[RunScores]) -> list[Table]:
    """Tables 2, 3, 11-21 of the paper (in their shape) plus coverage and the irreducibility audit."""
    out: list[Table] = []
    short = {"fusion": "Fusion", "editing": "Editing", "world_modeling": "Modeling", "reasoning": "Reasoning"}
    out.append(
        Table(
            "table2",
            "Table 2: scores across the four scenarios (0-100; Avg. is the macro-average; 95 % bootstrap interval)",
            ["Model", *[short[s] for s in SCENARIOS], "Avg.", "95 % CI"],
            [
                [
                    s.label,
                    *[s.scenarios[sc].scene if sc in s.scenarios else None for sc in SCENARIOS],
                    s.average["scene"],
                    None if s.interval is None else f"{s.interval[0]:.2f}-{s.interval[1]:.2f}",
                ]
                for s in scores
            ],
        )
    )
    answering = [(r, s) for r, s in zip(runs, scores, strict=True) if r.answers]
    out.append(
        Table(
            "table3",
            "Table 3: dialogue-state understanding, averaged over scenarios",
            ["Model", *QTYPES, "Avg."],
            [[s.label, *[s.average[t] for t in QTYPES], s.average["understanding"]] for _, s in answering],
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
                    s.average["understanding"],
                ]
                for _, s in answering
            ],
        )
    )
    numbers = {"reasoning": (12, 13), "editing": (14, 15), "world_modeling": (16, 17), "fusion": (18, 19)}
    for sc in ("reasoning", "editing", "world_modeling", "fusion"):
        a, b = numbers[sc]
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
    gt_runs = [r for r in runs if r.manifest["history"] == "gt"]
    prog = [(r, progression(r)) for r in gt_runs]
    out.append(
        Table(
            "table20",
            "Table 20: first vs last generation turn under GT-History (0.6 SC + 0.4 VQ; dialogues with >= 2)",
            ["Model", "Dialogues", "First", "Last", "Delta"],
            [[r.label, p["dialogues"], p["first"], p["last"], p["delta"]] for r, p in prog],
        )
    )
    gap = understanding_realization_gap(gt_runs)
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
        )
    )
    pairs = pair_histories(runs)
    out.append(
        Table(
            "history",
            "GT-History vs Self-History (0.6 SC + 0.4 VQ on the Self-History dialogues)",
            ["Model", "Dialogues", "GT-History", "Self-History", "Drop %"],
            [
                [g.label, e["dialogues"], e["gt"], e["self"], e["drop_percent"]]
                for g, s in pairs
                for e in [history_effect(g, s)]
            ],
        )
    )
    out.append(
        Table(
            "coverage",
            "Coverage: valid records out of the run's items; refused, error and missing records are excluded",
            ["Model", "Items", "Valid", "ok", "refused", "error", "missing", "Unjudged", "Turns failing a check %"],
            [
                [
                    s.label,
                    s.coverage["expected"],
                    s.coverage["valid"],
                    *[s.coverage["statuses"].get(k, 0) for k in ("ok", "refused", "error", "missing")],
                    s.coverage["unjudged"],
                    None if s.failed_turn_share is None else 100 * s.failed_turn_share,
                ]
                for s in scores
            ],
        )
    )
    return out


def irreducibility(runs: list[Run], scores: list[RunScores]) -> list[tuple[str, float]]:
    """The irreducibility audit: share (%) of target turns the stateless agent fails, per stateless run."""
    return [
        (s.label, 100 * s.failed_turn_share)
        for r, s in zip(runs, scores, strict=True)
        if r.manifest["model"] == "reference:stateless" and s.failed_turn_share is not None
    ]


def markdown(t: Table) -> str:
    """A table in GitHub Markdown."""
    lines = [f"**{t.title}**", "", "| " + " | ".join(t.header) + " |", "|" + "---|" * len(t.header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in t.rows]
    return "\n".join(lines) + "\n"


def _latex_escape(s: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#"), ("$", r"\$")):
        s = s.replace(a, b)
    return s


def latex(t: Table) -> str:
    """A table as a LaTeX tabular (booktabs)."""
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
    lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}"]
    return "\n".join(lines) + "\n"


def html_table(t: Table) -> str:
    """A table as an HTML fragment."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(c))}</td>" for c in row) + "</tr>" for row in t.rows)
    return f'<table id="{t.key}"><caption>{html.escape(t.title)}</caption><tr>{head}</tr>{body}</table>'
