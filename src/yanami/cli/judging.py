"""Judging runs again and judging the judges: judge, agreement and calibrate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from yanami.cli._app import err, out
from yanami.cli._options import (
    Backend,
    BackendOpt,
    JsonOpt,
    JudgedAtOnceOpt,
    ProtocolSourceOpt,
    RayAddressOpt,
    RunArg,
    cache_option,
    judge_spec_option,
)
from yanami.cli._progress import eval_progress, progress
from yanami.contract import is_stdout, write_output
from yanami.judges import JudgeContext, calibration_lines, own_judge
from yanami.judges import calibrate as run_calibration
from yanami.models import ResponseCache
from yanami.runner import rejudge
from yanami.scoring import (
    agreement_lines,
    calibrate_with_humans,
    human_agreement_lines,
    is_ratings_csv,
    read_review,
    run_agreement,
    run_human_agreement,
)
from yanami.store import (
    Dataset,
    select_dialogues,
)


def judge_(
    run: RunArg,
    judge: Annotated[str, judge_spec_option("A judge config file (or exact).")],
    bench: Annotated[Path | None, typer.Option(help="The bench, if it moved since the run.", metavar="DIR")] = None,
    concurrency: JudgedAtOnceOpt = 1,
    cache: Annotated[Path | None, cache_option("Response cache file (default RUN/cache.sqlite).")] = None,
    protocol_source: ProtocolSourceOpt = None,
    backend: BackendOpt = Backend.local,
    ray_address: RayAddressOpt = None,
) -> None:
    with eval_progress(f"judging {run}") as update:
        s = rejudge(
            run,
            judge,
            bench=bench,
            concurrency=concurrency,
            cache=cache,
            on_progress=update,
            protocol_source=protocol_source,
            backend=backend.value,
            ray_address=ray_address,
        )
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(s.statuses.items())) or "nothing new"
    out.print(f"{run}: {s.items} judged items, {s.skipped} already done ({statuses})", markup=False)


def agreement(
    run: RunArg,
    judge: Annotated[list[str], typer.Option(help="A judge name (give two to compare judges).", metavar="NAME")],
    human: Annotated[
        str | None,
        typer.Option(
            help="Human ratings: a CSV (item,score[,check,passed]), or a review database (a SQLite file or "
            "postgresql:// URL of `yanami review`), whose check verdicts are compared on the turns whose picture "
            "is the dataset's own.",
            metavar="CSV|REVIEW_DB",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    if human is not None and not is_ratings_csv(human):
        results = run_human_agreement(run, judge, human)
        lines = human_agreement_lines(results)
    else:
        results = run_agreement(run, judge, Path(human) if human is not None else None)
        lines = agreement_lines(results)
    if as_json:
        out.print_json(json.dumps(results))
        return
    for line in lines:
        out.print(line, markup=False)


def calibrate(
    bench: Annotated[Path, typer.Argument(help="A world bench.", metavar="BENCH")],
    judge: Annotated[str, judge_spec_option("The judge config file to calibrate.")],
    limit: Annotated[int, typer.Option(min=1, help="Dialogues to use (round-robin over scenarios).", metavar="N")] = 20,
    concurrency: JudgedAtOnceOpt = 4,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="Write the report as JSON here.", metavar="FILE")
    ] = None,
    cache: Annotated[Path | None, cache_option("Response cache file.")] = None,
    human: Annotated[
        str | None,
        typer.Option(
            help="A review database of BENCH (SQLite file or postgresql:// URL): also report the judge's agreement "
            "with the annotators' check verdicts, judging the dataset's own pictures of the first N reviewed "
            "dialogues.",
            metavar="REVIEW_DB",
        ),
    ] = None,
) -> None:
    dataset = Dataset(bench)
    if human is not None:
        read_review(human)  # a bad --human is one line before any judging
    dialogues = select_dialogues(dataset.read_all(), limit)
    responses = ResponseCache(cache) if cache else None
    the_judge = own_judge(judge, JudgeContext(dataset, responses))
    with progress("calibrating", None) as advance:
        result = run_calibration(the_judge, dialogues, concurrency=concurrency, on_progress=advance).summary()
    if human is not None:
        with progress("judging the reviewed pictures", None) as advance:
            result["human"] = calibrate_with_humans(
                the_judge, dataset, human, limit=limit, concurrency=concurrency, on_progress=advance
            )
    if responses:
        responses.close()
    if out_file is not None:
        write_output(out_file, json.dumps(result, indent=2) + "\n")
    show = err if is_stdout(out_file) else out  # with --out -, standard output carries the JSON alone
    for line in calibration_lines(result):
        show.print(line, markup=False)
    if "human" in result:
        for line in human_agreement_lines({f"{the_judge.name} vs human": result["human"]}):
            show.print(line, markup=False)
