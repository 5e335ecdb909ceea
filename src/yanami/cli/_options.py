"""Options and arguments that several commands share, each declared once.

An ``Annotated`` alias serves commands whose option reads the same in every help; where only the
sentence differs (what ``--workers`` processes do, which file ``--cache`` defaults to), a
function declares the option's shape once and takes the command's sentence.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from typer.models import OptionInfo

from yanami.contract import Scenario


class Backend(StrEnum):
    local = "local"
    ray = "ray"


BackendOpt = Annotated[
    Backend,
    typer.Option(help="Where the work runs: this machine's processes, or Ray Data (the ray extra; docs/scale.md)."),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="The Ray cluster to join (HOST:6379 or ray://HOST:10001); without it --backend ray starts one here.",
        metavar="ADDR",
    ),
]
ProtocolSourceOpt = Annotated[
    Path | None,
    typer.Option(
        help="WEAVE, IMUG-Bench: your checkout of the benchmark's repository; the judge asks its own prompts, "
        "read from there (without it, yanami's own prompts: not comparable with published numbers).",
        metavar="DIR",
    ),
]
"""``--protocol-source`` of `eval` and `judge`."""

DatasetArg = Annotated[Path, typer.Argument(help="The dataset directory.", metavar="DIR")]
NewDatasetOpt = Annotated[Path, typer.Option("--out", help="The dataset directory to create.", metavar="DIR")]
OverwriteDatasetOpt = Annotated[bool, typer.Option(help="Replace an existing dataset at --out.")]
RunArg = Annotated[Path, typer.Argument(help="A run directory.", metavar="RUN")]
RunsArg = Annotated[list[Path], typer.Argument(help="Run directories.", metavar="RUN")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]

ALL_SCENARIOS = ",".join(Scenario)
"""The default of ``--scenarios``: every scenario."""
ScenariosOpt = Annotated[
    str, typer.Option(metavar="<name,...>", help=f"Comma-separated, any of: {', '.join(Scenario)}.")
]
PerScenarioOpt = Annotated[int | None, typer.Option(min=1, help="Dialogues per scenario.", metavar="N")]
DialoguesOpt = Annotated[int | None, typer.Option(min=1, help="Dialogues in all, in the training mix.", metavar="N")]

JudgeNameOpt = Annotated[
    str | None,
    typer.Option(help="Score this judge's verdicts, by name (default: each run's own judge).", metavar="NAME"),
]
JudgedAtOnceOpt = Annotated[int, typer.Option(min=1, help="Items judged at once.", metavar="N")]
BatchOpt = Annotated[int, typer.Option(min=1, help="Examples per step.", metavar="N")]
PortOpt = Annotated[
    int, typer.Option(min=0, max=65535, help="The port on 127.0.0.1 (0: any free port).", metavar="PORT")
]


def workers_option(what: str) -> OptionInfo:
    """``--workers N`` (at least 1): the processes; `what` says what they do."""
    option: OptionInfo = typer.Option(min=1, help=what, metavar="N")
    return option


def concurrency_option(what: str, *, show_default: bool = True) -> OptionInfo:
    """``--concurrency N`` (at least 1): what is in flight at once, as `what` says."""
    option: OptionInfo = typer.Option(min=1, show_default=show_default, help=what, metavar="N")
    return option


def cache_option(what: str) -> OptionInfo:
    """``--cache FILE``: the response cache; `what` says where it is by default."""
    option: OptionInfo = typer.Option(help=what, metavar="FILE")
    return option


def judge_spec_option(what: str) -> OptionInfo:
    """``--judge SPEC``: a judge config file (or exact); `what` says which judge it is."""
    option: OptionInfo = typer.Option(help=what, metavar="SPEC")
    return option
