"""Making a dataset with models: prepare (stage a, the image pool) and construct (stages b and c)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from yanami.cli._app import err, out
from yanami.cli._options import (
    ALL_SCENARIOS,
    Backend,
    BackendOpt,
    DialoguesOpt,
    PerScenarioOpt,
    RayAddressOpt,
    ScenariosOpt,
    cache_option,
    concurrency_option,
)
from yanami.cli._progress import stages
from yanami.construct import construct as run_construct
from yanami.construct import prepare as run_prepare
from yanami.contract import UserError, parse_scenarios


class PoolFormatOpt(StrEnum):
    auto = "auto"
    folder = "folder"
    parquet = "parquet"
    webdataset = "webdataset"


def prepare(
    pool: Annotated[
        Path,
        typer.Argument(
            help="A folder of images (sub-folders or groups.jsonl name groups), a Parquet export, or WebDataset tars.",
            metavar="POOL",
        ),
    ],
    out_dir: Annotated[
        Path, typer.Option("--out", help="The prepared pool (created, or continued).", metavar="POOLDIR")
    ],
    filter_spec: Annotated[
        str, typer.Option("--filter", help="The filter VLM: a model config file (docs/models.md).", metavar="FILE")
    ],
    repair_spec: Annotated[
        str | None,
        typer.Option(
            "--repair", help="The image-edit model that repairs rejected images (a config file).", metavar="FILE"
        ),
    ] = None,
    routes: Annotated[
        Path | None,
        typer.Option(
            help="A JSON or YAML mapping from group to scenario (else the filter VLM routes).", metavar="FILE"
        ),
    ] = None,
    rounds: Annotated[int, typer.Option(min=0, help="Repair rounds per rejected image, at most.", metavar="N")] = 2,
    pool_format: Annotated[PoolFormatOpt, typer.Option("--format", help="How to read POOL.")] = PoolFormatOpt.auto,
    image_column: Annotated[
        str | None, typer.Option(help="Parquet: the image column (default: image, images or img).", metavar="NAME")
    ] = None,
    group_column: Annotated[
        str | None,
        typer.Option(help="Parquet: the group column (default: group; else a row is a group).", metavar="NAME"),
    ] = None,
    max_pixels: Annotated[
        int, typer.Option(min=1, help="Images with more pixels are rejected undecoded.", metavar="N")
    ] = 40_000_000,
    max_bytes: Annotated[int, typer.Option(min=1, help="Files larger than this are rejected unread.", metavar="N")] = 64
    * 1024
    * 1024,
    concurrency: Annotated[int, concurrency_option("Model calls in flight at once.")] = 4,
    cache: Annotated[Path | None, cache_option("Response cache file (default POOLDIR/cache.sqlite).")] = None,
) -> None:
    with stages() as update:
        summary = run_prepare(
            pool,
            out_dir,
            filter_spec=filter_spec,
            repair_spec=repair_spec,
            routes=routes,
            rounds=rounds,
            fmt=pool_format.value,
            image_column=image_column,
            group_column=group_column,
            max_pixels=max_pixels,
            max_bytes=max_bytes,
            concurrency=concurrency,
            cache=cache,
            on_progress=update,
        )
    for line in summary.lines():
        out.print(line, markup=False)
    if summary.errors:
        err.print(
            f"warning: {summary.errors} model call(s) failed (recorded as rejections; the same command asks again)",
            markup=False,
        )


def construct(
    pooldir: Annotated[Path, typer.Argument(help="A pool prepared by yanami prepare.", metavar="POOLDIR")],
    out_dir: Annotated[
        Path,
        typer.Option(
            "--out", help="The dataset (written when the run ends; the store is OUT.construct).", metavar="DIR"
        ),
    ],
    author: Annotated[
        str, typer.Option(help="The author LLM: a config file (docs/models.md), or stand-ins.", metavar="FILE")
    ],
    image_model: Annotated[
        str, typer.Option(help="The image model that generates and edits: a config file, or stand-ins.", metavar="FILE")
    ],
    verifier: Annotated[
        str,
        typer.Option(help="The VLM that reviews plans and checks images: a config file, or stand-ins.", metavar="FILE"),
    ],
    preset: Annotated[str, typer.Option(help="bench (questions and checks) or train.", metavar="NAME")] = "bench",
    per_scenario: PerScenarioOpt = None,
    dialogues: DialoguesOpt = None,
    scenarios: ScenariosOpt = ALL_SCENARIOS,
    seed: Annotated[
        int, typer.Option(help="Draws the groups and the capabilities; seeds the image model.", metavar="N")
    ] = 42,
    rounds: Annotated[
        int, typer.Option(min=0, help="Revisions per plan and new attempts per image, at most.", metavar="N")
    ] = 2,
    budget: Annotated[
        float | None,
        typer.Option(
            min=0, help="Stop cleanly before the construction's spending would pass this amount.", metavar="AMOUNT"
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Make a small sample and estimate the cost and time of the whole.")
    ] = False,
    sample: Annotated[int, typer.Option(min=1, help="With --dry-run: the dialogues to make.", metavar="N")] = 8,
    concurrency: Annotated[int, concurrency_option("Dialogues in the making at once.")] = 4,
    templates: Annotated[
        Path | None, typer.Option(help="A folder of templates that replace the package's.", metavar="DIR")
    ] = None,
    probe: Annotated[
        bool,
        typer.Option("--irreducibility-probe", help="Keep a target turn only if a history-free attempt fails it."),
    ] = False,
    faults: Annotated[
        float,
        typer.Option(
            min=0, max=1, help="Stand-ins only: the share of plans and images given a known fault.", metavar="RATE"
        ),
    ] = 0.0,
    backend: BackendOpt = Backend.local,
    ray_address: RayAddressOpt = None,
) -> None:
    try:
        chosen = parse_scenarios(scenarios)
    except ValueError as exc:
        raise UserError(f"--scenarios: {exc}") from None
    if per_scenario is not None and dialogues is not None:
        raise UserError("--per-scenario and --dialogues: choose one")
    with stages() as update:
        s = run_construct(
            pooldir,
            out_dir,
            author=author,
            image_model=image_model,
            verifier=verifier,
            preset=preset,
            per_scenario=per_scenario,
            dialogues=dialogues,
            scenarios=chosen,
            seed=seed,
            rounds=rounds,
            budget=budget,
            dry_run=dry_run,
            concurrency=concurrency,
            templates=templates,
            probe=probe,
            faults=faults,
            sample=sample,
            on_progress=update,
            backend=backend.value,
            ray_address=ray_address,
        )
    for line in s.lines():
        out.print(line, markup=False)
    if s.errors:
        err.print(
            f"warning: {s.errors} dialogue(s) failed for now (their calls failed); the same command retries them",
            markup=False,
        )
    if s.stopped == "budget":
        err.print(
            f"stopped before the budget ({s.budget:g}) would be passed: {s.pending} dialogue(s) not made; "
            "rerun with a larger --budget to continue",
            markup=False,
        )
        raise typer.Exit(3)
    if not s.estimate and s.accepted == 0 and s.planned:
        raise UserError(f"{out_dir}: no dialogue was accepted (see the reasons above)", exit_code=1)
    if s.errors:
        raise typer.Exit(1)  # some dialogues failed for now: the warning above says the same command retries them
