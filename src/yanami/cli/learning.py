"""The learned model (the train extra): train, and the experiments of `yanami experiment`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from yanami.cli._app import out
from yanami.cli._options import BatchOpt, workers_option
from yanami.cli._progress import stages
from yanami.contract import UserError
from yanami.learned import Setting, TrainSettings, experiment_table, require_torch, run_experiment
from yanami.learned import train as run_training


def train(
    train_set: Annotated[
        Path, typer.Argument(help="A world training set (`yanami build --preset train`).", metavar="TRAIN")
    ],
    out_dir: Annotated[Path, typer.Option("--out", help="The checkpoint directory to write.", metavar="CKPT")],
    control: Annotated[
        str,
        typer.Option(
            help="stateful (the whole conversation) or single-turn (the latest picture and the current message).",
            metavar="NAME",
        ),
    ] = "stateful",
    steps: Annotated[int, typer.Option(min=1, help="Optimizer steps.", metavar="N")] = 600,
    batch: BatchOpt = 16,
    seed: Annotated[int, typer.Option(help="Seed; the same seed gives the same checkpoint.", metavar="N")] = 0,
    workers: Annotated[int, workers_option("Processes that read the pictures.")] = 1,
) -> None:
    """Writes a checkpoint (model.safetensors, config.json) that `yanami eval --model
    checkpoint:CKPT` evaluates like any model; an interrupted run resumes with the same command.
    """
    require_torch()

    settings = TrainSettings(steps=steps, batch=batch, seed=seed, control=control)
    with stages() as update:
        config = run_training(train_set, out_dir, settings, workers=workers, on_stage=update)
    last = config["curve"][-1] if config["curve"] else {}
    figures = ", ".join(f"{k} {v:.1f}" for k, v in last.items() if k.startswith("accuracy_"))
    out.print(
        f"{out_dir}: {config['parameters']:,} parameters, {config['step']} steps on {config['train']['examples']} "
        f"examples ({control}); held out: {figures or 'none'}",
        markup=False,
    )


experiment_app = typer.Typer(help="Experiments that train and evaluate (needs the train extra).", no_args_is_help=True)


@experiment_app.command(name="train-vs-control")
def train_vs_control(
    out_dir: Annotated[Path, typer.Option("--out", help="The experiment's directory.", metavar="DIR")],
    bench: Annotated[
        Path | None,
        typer.Option(help="A world bench (default: one built in DIR, --per-scenario each).", metavar="BENCH"),
    ] = None,
    per_scenario: Annotated[
        int, typer.Option(min=1, help="The built bench's dialogues per scenario.", metavar="N")
    ] = 10,
    train_dialogues: Annotated[int, typer.Option(min=20, help="Training dialogues.", metavar="N")] = 300,
    steps: Annotated[int, typer.Option(min=1, help="Optimizer steps per model.", metavar="N")] = 500,
    batch: BatchOpt = 16,
    seed: Annotated[int, typer.Option(help="Seed of the training set and the models.", metavar="N")] = 0,
    workers: Annotated[int, workers_option("Processes that build and read pictures.")] = 1,
    tag: Annotated[
        str,
        typer.Option(
            help="Score DIR's checkpoints on a further --bench: runs-TAG/, report-TAG.html, experiment-TAG.json.",
            metavar="TAG",
        ),
    ] = "",
    self_history: Annotated[bool, typer.Option(help="Also evaluate under Self-History.")] = True,
) -> None:
    """Train the stateful model and the single-turn control on the same data and compare them.

    Builds a training set excluded from the bench, trains both models, evaluates them, the
    untrained model and the best learned text-only reader, and writes DIR/report.html (the
    table with intervals, the learning curves) and DIR/experiment.json. The same command resumes.
    """
    require_torch()

    if tag and (bench is None or not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", tag)):
        raise UserError("--tag: letters, digits, - and _ (at most 40), with the --bench it scores")
    setting = Setting(per_scenario, train_dialogues, steps, batch, seed, workers)
    with stages() as update:
        figures = run_experiment(out_dir, setting, bench, update, tag=tag, self_history=self_history)
    header, rows = experiment_table(figures)
    out.print(" | ".join(header), markup=False)
    for row in rows:
        out.print(" | ".join(row), markup=False)
    report = out_dir / (f"report-{tag}.html" if tag else "report.html")
    out.print(f"{report}: the table and the learning curves", markup=False)
