"""Commands on world data: build (a dataset of world dialogues) and audit (a world bench's proofs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from yanami.cli._app import MAX_PROBLEMS_SHOWN, err, out
from yanami.cli._options import (
    ALL_SCENARIOS,
    Backend,
    BackendOpt,
    DialoguesOpt,
    NewDatasetOpt,
    OverwriteDatasetOpt,
    PerScenarioOpt,
    RayAddressOpt,
    ScenariosOpt,
    workers_option,
)
from yanami.cli._progress import progress
from yanami.contract import Preset, UserError, describe_presets, parse_scenarios
from yanami.runner import blind_audit, blind_text
from yanami.store import Dataset
from yanami.world import Parser, audit_bench, audit_text, build_world, plan, reparse_bench


def build(
    out_dir: NewDatasetOpt,
    preset: Annotated[Preset, typer.Option(help=describe_presets())] = Preset.BENCH,
    per_scenario: PerScenarioOpt = None,
    dialogues: DialoguesOpt = None,
    scenarios: ScenariosOpt = ALL_SCENARIOS,
    seed: Annotated[
        int | None,
        typer.Option(help="Seed; the same seed gives a byte-identical dataset.  [default: 42]", metavar="N"),
    ] = None,
    private: Annotated[
        bool,
        typer.Option(
            "--private",
            help="Draw a secret seed and record only its SHA-256: a fresh bench no model can have seen "
            "(nobody can rebuild it; keep the directory).",
        ),
    ] = False,
    workers: Annotated[int, workers_option("Processes that build dialogues.")] = 1,
    exclude: Annotated[
        Path | None, typer.Option(help="A training set whose images the build must not reuse.", metavar="TRAIN")
    ] = None,
    overwrite: OverwriteDatasetOpt = False,
    backend: BackendOpt = Backend.local,
    ray_address: RayAddressOpt = None,
) -> None:
    """The default bench (seed 42) is public: anyone can rebuild it from the code, so a model may
    have been trained on it. --private builds one nobody has seen (docs/evaluation.md,
    "Contamination").
    """
    if per_scenario is not None and dialogues is not None:
        raise UserError("--per-scenario and --dialogues: give one or the other")
    try:
        chosen = parse_scenarios(scenarios)
    except ValueError as exc:
        raise UserError(f"--scenarios: {exc}") from None
    total = len(plan(preset.value, per_scenario, dialogues, chosen))
    with progress("building", total) as advance:
        m = build_world(
            out_dir,
            preset=preset.value,
            per_scenario=per_scenario,
            dialogues=dialogues,
            scenarios=chosen,
            seed=seed,
            workers=workers,
            exclude=exclude,
            overwrite=overwrite,
            on_dialogue=advance,
            backend=backend.value,
            ray_address=ray_address,
            private=private,
        )
    c = m.counts
    out.print(
        f"{out_dir}: {c.dialogues} dialogues, {c.turns} turns, {c.images} images, {c.checks} checks", markup=False
    )


def audit(
    bench: Annotated[Path, typer.Argument(help="A world dataset directory.", metavar="BENCH")],
    draws: Annotated[
        int, typer.Option(min=1, help="Realizations of each turn's free choices to draw.", metavar="N")
    ] = 16,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    workers: Annotated[int, workers_option("Processes that parse pictures; never changes a result.")] = 1,
) -> None:
    """For each target turn, the turn's free choices (a substitute colour, a spot, how far)
    are drawn again DRAWS times; every check must hold on each realization. The stateless
    reading (the request applied to the latest image alone) must fail some check. Under
    Self-History, rollouts that make their own free choices must pass every check as the
    judge rebases it on their own earlier images. Every picture is parsed and compared with
    the scene its turn's hidden state says it shows (as `validate --deep`). Every request a
    run would send is built, and a sample goes through each adapter to a capturing server on
    loopback: nothing but the conversation may vary with the item. Exit 1 if any check is
    undecidable, any picture differs or any request field varies with the item.
    """
    ds = Dataset(bench)
    with progress("auditing", len(ds)) as advance:
        result = audit_bench(ds, draws, on_dialogue=advance)
    if not result.figures["dialogues"]:
        raise UserError(f"{bench}: no world dialogues to audit (yanami audit replays dialogues made by yanami build)")
    with Parser(workers) as parser, progress("re-parsing pictures", None) as advance:
        result.add_pictures(reparse_bench(ds, parser, on_image=advance))
    if result.others:
        err.print(f"warning: {result.others} dialogue(s) not made by the world were skipped", markup=False)
    with progress("sending requests to a capturing server", None):
        blind = blind_audit(ds, lambda turn, side, j, part: ds.image_bytes(part))
    if as_json:
        out.print(json.dumps({**result.figures, "requests": blind.summary()}, indent=2), markup=False)
    else:
        out.print(audit_text(str(bench), result), markup=False)
        out.print(blind_text(blind), markup=False)
    for line in result.problems(MAX_PROBLEMS_SHOWN):
        out.print(line, markup=False)
    if result.failed or blind.failed:
        raise typer.Exit(1)
