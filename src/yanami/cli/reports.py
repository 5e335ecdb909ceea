"""Scores and reports of runs: score (the tables) and report (one HTML file, or the tables)."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from yanami.cli._app import err, out
from yanami.cli._options import JudgeNameOpt, RunsArg
from yanami.contract import STDOUT, is_stdout, write_output
from yanami.scoring import latex, markdown, scorer_for


class TableFormat(StrEnum):
    text = "text"
    md = "md"
    latex = "latex"


def score(
    runs: RunsArg,
    as_json: Annotated[bool, typer.Option("--json", help="Print every score as JSON.")] = False,
    format_: Annotated[
        TableFormat, typer.Option("--format", help="text (the main table), or every table in md or latex.")
    ] = TableFormat.text,
    judge: JudgeNameOpt = None,
    out_file: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Write to this file instead of standard output (- : standard output).", metavar="FILE"
        ),
    ] = None,
) -> None:
    """Rows that are not comparable (other bench, limit, judge or history; coverage under 100 %)
    are marked, and a warning on standard error says why.
    """
    scored = scorer_for(runs).score(runs, judge)
    for line in scored.warnings:
        err.print(f"warning: {line}", markup=False)
    if as_json:
        text = json.dumps(scored.data, indent=2)
    elif format_ == TableFormat.text:
        text = scored.summary
    else:
        render = markdown if format_ == TableFormat.md else latex
        text = "\n".join(render(t) for t in scored.tables)
    write_output(out_file if out_file is not None else STDOUT, text)


class ReportFormat(StrEnum):
    html = "html"
    md = "md"
    latex = "latex"


REPORT_SUFFIX = {ReportFormat.html: "html", ReportFormat.md: "md", ReportFormat.latex: "tex"}
"""The default output file of `report` per format: report.html, report.md, report.tex."""


def report(
    runs: RunsArg,
    out_file: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="The file to write (default report.html, report.md or report.tex; - : standard output).",
            metavar="FILE",
        ),
    ] = None,
    samples: Annotated[
        int, typer.Option(min=0, help="Dialogues per scenario in the per-sample viewer.", metavar="N")
    ] = 4,
    format_: Annotated[
        ReportFormat, typer.Option("--format", help="html: the whole report; md or latex: the tables alone.")
    ] = ReportFormat.html,
    judge: JudgeNameOpt = None,
    bench: Annotated[
        Path | None,
        typer.Option(help="The runs' bench, if it moved (its manifest's SHA-256 must match the run's).", metavar="DIR"),
    ] = None,
) -> None:
    scorer = scorer_for(runs)
    target = out_file if out_file is not None else Path(f"report.{REPORT_SUFFIX[format_]}")
    if format_ == ReportFormat.html:
        text, warnings = scorer.report(runs, judge, samples, bench)
    else:
        scored = scorer.score(runs, judge)
        render = markdown if format_ == ReportFormat.md else latex
        text, warnings = "\n".join(render(t) for t in scored.tables), scored.warnings
    for line in warnings:
        err.print(f"warning: {line}", markup=False)
    write_output(target, text)
    if not is_stdout(target):
        out.print(f"{target}: report of {len(runs)} run(s)", markup=False)
