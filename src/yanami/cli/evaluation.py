"""Evaluating a model: eval (a bench, judged, stored per item) and demo (the whole world bench's story)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from yanami.cli._app import err, out
from yanami.cli._options import (
    Backend,
    BackendOpt,
    ProtocolSourceOpt,
    RayAddressOpt,
    cache_option,
    concurrency_option,
    judge_spec_option,
    workers_option,
)
from yanami.cli._progress import eval_progress, progress, resumable
from yanami.contract import History, Layout, UserError, printable
from yanami.demo import run_demo
from yanami.models import load_config, looks_like_config
from yanami.runner import evaluate
from yanami.scoring import markdown, scorer_for


def eval_(
    bench: Annotated[Path, typer.Argument(help="The bench dataset directory.", metavar="BENCH")],
    model: Annotated[
        str,
        typer.Option(
            help="A model config file (YAML; docs/models.md), or KIND:NAME such as reference:stateful.",
            metavar="SPEC",
        ),
    ],
    out_dir: Annotated[Path, typer.Option("--out", help="The run directory (created, or resumed).", metavar="DIR")],
    history: Annotated[
        History | None,
        typer.Option(
            help="gt: ground-truth earlier images; self: the model's own. Default: the bench family's (self for "
            "IMUG-Bench, which has no ground truth for its image turns; gt otherwise).",
            show_default=False,
        ),
    ] = None,
    layout: Annotated[
        Layout | None,
        typer.Option(help="How images are placed in the input (default: the model config's, else yes-first)."),
    ] = None,
    judge: Annotated[
        str,
        judge_spec_option(
            "exact: world data's exact judge, or a WEAVE or IMUG-Bench bench's own rules where no turn needs "
            "judgement; else a judge config file (a VLM judge)."
        ),
    ] = "exact",
    concurrency: Annotated[
        int | None,
        concurrency_option(
            "Items in flight at once (never changes a score). Default: 1, or twice --workers when --workers "
            "is above 1; with --backend ray, twice the cluster's CPUs.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Evaluate only the first N dialogues, taken round-robin over the scenarios. A run resumes with the "
            "same --limit, or a larger one (or none), which extends it.",
            metavar="N",
        ),
    ] = None,
    retry_errors: Annotated[bool, typer.Option(help="Re-attempt items whose prediction is an error.")] = False,
    strategy: Annotated[
        str,
        typer.Option(
            help="Test-time scaling: none, cot, self-verify:N or best-of:N (best-of:N@FILE: that config's "
            "model picks). Extra calls are cached and counted per item (docs/benchmarks.md).",
            metavar="NAME",
        ),
    ] = "none",
    cache: Annotated[
        Path | None, cache_option("Response cache file (default RUN/cache.sqlite); share one across runs.")
    ] = None,
    workers: Annotated[
        int, workers_option("Processes that parse images (exact judge, reference agents); never changes scores.")
    ] = 1,
    protocol_source: ProtocolSourceOpt = None,
    backend: BackendOpt = Backend.local,
    ray_address: RayAddressOpt = None,
) -> None:
    with eval_progress(f"evaluating {_model_label(model)}") as update:
        summary = evaluate(
            bench,
            model,
            out_dir,
            history=history,
            layout=layout,
            judge=judge,
            concurrency=concurrency,
            limit=limit,
            retry_errors=retry_errors,
            strategy=strategy,
            on_progress=update,
            cache=cache,
            workers=workers,
            protocol_source=protocol_source,
            backend=backend.value,
            ray_address=ray_address,
        )
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(summary.statuses.items())) or "nothing new"
    out.print(
        f"{out_dir}: {summary.items} items, {summary.skipped} already done, {summary.written} written ({statuses})",
        markup=False,
    )
    scored = scorer_for([out_dir]).score([out_dir], None)
    out.print(markdown(scored.main, escaped=False).rstrip("\n"), markup=False)
    valid, expected = scored.coverage
    if summary.first_error:
        err.print(
            f"warning: {summary.statuses.get('error', 0)} item(s) ended in error, the first: "
            f"{printable(summary.first_error or '')} "
            "(they are not scored; --retry-errors asks again)",
            markup=False,
        )
    if summary.first_judge_error:
        err.print(
            f"warning: the judge could not grade {summary.judge_errors} item(s), the first: "
            f"{summary.first_judge_error} (they are not scored; the same command grades them again)",
            markup=False,
        )
    if expected and not valid:
        check = "the judge's" if summary.judge_errors and not summary.first_error else "the model's"
        raise UserError(f"{out_dir}: no item of the run is valid; check {check} configuration", exit_code=1)


def _model_label(spec: str) -> str:
    """How progress names a model: the model a config file serves (with the file), else the spec."""
    if not looks_like_config(spec):
        return spec
    try:
        config = load_config(spec)
    except UserError:
        return spec  # the run itself says what is wrong with the file
    served = config.chat_model or config.image_model or config.name
    return f"{served} ({Path(spec).name})"


def demo(
    out_dir: Annotated[Path, typer.Option("--out", help="Where the demo writes its files.", metavar="DIR")] = Path(
        "yanami-demo"
    ),
    per_scenario: Annotated[int, typer.Option(min=1, help="Dialogues per scenario in the bench.", metavar="N")] = 100,
    seed: Annotated[int, typer.Option(help="Seed of the build.", metavar="N")] = 42,
    workers: Annotated[int, workers_option("Processes that build the bench and parse images.")] = 2,
) -> None:
    """The agents run from the floor up: every trivial strategy (copy, jitter, union, collage,
    blank, noise, random: none may reach the stateless agent), stateless, the four
    ablations of the stateful agent, stateful, oracle, and stateful under Self-History. A
    second call resumes: it rebuilds or reruns only what is missing or made by another yanami.
    """
    started = time.monotonic()
    with resumable():
        result = run_demo(
            out_dir, per_scenario=per_scenario, seed=seed, workers=workers, count=progress, track=eval_progress
        )
    for line in result.loaded.warnings:
        err.print(f"warning: {line}", markup=False)
    for line in result.lines():
        out.print(line, markup=False)
    minutes, seconds = divmod(round(time.monotonic() - started), 60)
    out.print(f"done in {minutes} min {seconds} s", markup=False)
