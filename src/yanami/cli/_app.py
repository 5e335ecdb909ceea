"""The ``yanami`` app itself: its root, its commands (where each lives, its line in ``yanami
--help``), its two consoles, and help that names arguments plainly.

A command's module is imported when the command runs (or its help is asked for), not before:
``yanami --help`` lists the commands from `COMMANDS` alone, so the command modules import what
they use at their top, and the list stays quick.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Annotated, Any

import typer
import typer.main
from rich.console import Console
from typer.core import TyperArgument, TyperGroup
from typer.models import CommandInfo, TyperInfo

from yanami import __version__

MAX_PROBLEMS_SHOWN = 50
"""Problems (and near-duplicates) a command lists before it gives the count of the rest."""


def _plain_arguments() -> None:
    """Arguments in help as click writes them: ``RUN...`` in the usage line and ``RUN`` in the
    list, not typer's ``{RUN}`` and ``RUN <list[Path]>`` (the help text says what each one is)."""

    def usage(self: TyperArgument) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")

    def no_type(self: TyperArgument, ctx: object) -> None:
        return None

    methods = {"_usage_display_name": usage, "display_type_rich": no_type}
    if all(hasattr(TyperArgument, name) for name in methods):
        for name, method in methods.items():
            setattr(TyperArgument, name, method)  # typer's own methods, replaced on its class


_plain_arguments()


@dataclass(frozen=True)
class Command:
    """A command of ``yanami``: the function (or the typer app of a group) that is it, as
    ``module:name`` under `yanami.cli`, and its summary, the first line of its help."""

    where: str
    summary: str

    def load(self, name: str) -> Any:  # typer's command or group (its click classes are private)
        module, attr = self.where.split(":")
        target = getattr(importlib.import_module(module if "." in module else f"yanami.cli.{module}"), attr)
        if isinstance(target, typer.Typer):  # a group: plain help, whole lines, as the root's
            group = TyperInfo(target, name=name, help=self.summary, cls=WholeLines)
            return typer.main.get_group_from_info(group, pretty_exceptions_short=False, suggest_commands=True,
                                                  rich_markup_mode=None)  # fmt: skip
        body = inspect.getdoc(target)
        help = self.summary + (f"\n\n{body}" if body else "")
        info = CommandInfo(name=name, callback=target, help=help, short_help=self.summary)
        return typer.main.get_command_from_info(info, pretty_exceptions_short=False, rich_markup_mode=None)


COMMANDS: dict[str, Command] = {
    "schema": Command(
        "datasets:schema",
        "Print the JSON Schema of a dialogue line, of the manifest or of an author's plan (construct).",
    ),
    "validate": Command("datasets:validate", "Check a dataset directory and list every problem."),
    "stats": Command("datasets:stats", "Print dataset statistics (the paper's Tables 7 and 8)."),
    "export": Command(
        "datasets:export", "Export a dataset: Parquet (read back by `yanami import`), LLaVA, BAGEL or WebDataset."
    ),
    "import": Command(
        "datasets:import_",
        "Make a dataset directory from a Parquet export, WEAVE's test.json or IMUG-Bench's data folder.",
    ),
    "leakage": Command("datasets:leakage", "Find images shared by a train set and a bench."),
    "build": Command("world:build", "Build a dataset of world dialogues (offline, exact by construction)."),
    "audit": Command("world:audit", "Prove a world bench's checks decidable and its target turns irreducible."),
    "train": Command(
        "learning:train",
        "Train the small learned model on world dialogues (needs the train extra: PyTorch on the CPU).",
    ),
    "prepare": Command(
        "construction:prepare",
        "Stage a: screen a pool of images with a filter VLM, repair what may be, route groups to scenarios.",
    ),
    "construct": Command(
        "construction:construct",
        "Stages b and c: an author LLM writes dialogues over a prepared pool; images made, verified, repaired.",
    ),
    "eval": Command(
        "evaluation:eval_",
        "Evaluate a model on a bench: target turns and DSU questions, judged, stored per item, resumable.",
    ),
    "score": Command(
        "reports:score", "Scores of one or more runs: the paper's tables, analyses across runs, coverage."
    ),
    "report": Command(
        "reports:report",
        "Write a report of one or more runs: one self-contained HTML file (or the tables in md / LaTeX).",
    ),
    "judge": Command(
        "judging:judge_", "Judge a run's stored predictions again with another judge, without calling the model."
    ),
    "agreement": Command(
        "judging:agreement",
        "Judge reliability: Pearson (95 % bootstrap interval), Spearman and Cohen's kappa against humans or a judge.",
    ),
    "calibrate": Command(
        "judging:calibrate",
        "Calibrate a judge on world data: its verdicts against the exact judge's, on corrupted and injected "
        "candidates.",
    ),
    "demo": Command(
        "evaluation:demo",
        "Build the world bench, evaluate the reference agents, write the report, print the main table.",
    ),
    "serve": Command(
        "serving:serve", "Serve a model over IMUG-Bench's /infer protocol on loopback (a checkpoint, or any model)."
    ),
    "serve-fake": Command(
        "serving:serve_fake",
        "Serve a scripted model on loopback: OpenAI-compatible (/v1) and IMUG's /infer, for dry runs.",
    ),
    "experiment": Command("learning:experiment_app", "Experiments that train and evaluate (needs the train extra)."),
    "review": Command(
        "yanami.review:review_app", "Human review of a dataset by annotators in a web app (SQLite or PostgreSQL)."
    ),
}
"""Every command, in the order ``yanami --help`` lists them."""


class _Loaded(MutableMapping[str, Any]):
    """A group's commands by name, in `COMMANDS`' order, each loaded when first looked up."""

    def __init__(self, loaded: MutableMapping[str, Any]) -> None:
        self.loaded = dict(loaded)

    def __getitem__(self, name: str) -> Any:
        if name not in self.loaded:
            if name not in COMMANDS:
                raise KeyError(name)
            self.loaded[name] = COMMANDS[name].load(name)
        return self.loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self.loaded[name]

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from (k for k in self.loaded if k not in COMMANDS)

    def __len__(self) -> int:
        return len(set(COMMANDS) | set(self.loaded))


class WholeLines(TyperGroup):
    """A group whose help lists each command with its whole first line (click would cut it at
    45 characters, with "...")."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [(name, self.summary(name)) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def summary(self, name: str) -> str:
        command = self.commands[name]
        return command.short_help or (command.help or "").strip().split("\n")[0]


class _Root(WholeLines):
    """``yanami`` itself: its commands come from `COMMANDS`, each loaded when it runs."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands = _Loaded(self.commands)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names alone: none is loaded

    def summary(self, name: str) -> str:
        return COMMANDS[name].summary if name in COMMANDS else super().summary(name)


app = typer.Typer(
    cls=_Root,
    name="yanami",
    help="Build, verify, evaluate and report stateful multi-turn multimodal dialogue benchmarks.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def _version(value: bool) -> None:
    if value:
        out.print(f"yanami {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Build, verify, evaluate and report stateful multi-turn multimodal dialogue benchmarks."""
