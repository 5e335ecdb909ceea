"""The ``yanami`` app itself: its root, its two consoles, and help that names arguments plainly."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from typer.core import TyperArgument

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

app = typer.Typer(
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
