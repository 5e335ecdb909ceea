"""The ``yanami`` command line: `app`, and `main`, its entry point.

Each module holds a group of commands; they are registered here, in the order ``yanami --help``
lists them. Options that several commands share are declared once in `_options`, and the progress
bars and lines in `_progress`.
"""

from __future__ import annotations

import sys

from yanami.cli import construction, datasets, evaluation, judging, learning, reports, serving, world
from yanami.cli._app import app, err
from yanami.cli._progress import progress
from yanami.contract import UserError, printable
from yanami.review import review_app  # light: its commands load the web stack when they run

app.command()(datasets.schema)
app.command()(datasets.validate)
app.command()(datasets.stats)
app.command()(datasets.export)
app.command(name="import")(datasets.import_)
app.command()(datasets.leakage)
app.command()(world.build)
app.command()(world.audit)
app.command()(learning.train)
app.command()(construction.prepare)
app.command()(construction.construct)
app.command(name="eval")(evaluation.eval_)
app.command()(reports.score)
app.command()(reports.report)
app.command(name="judge")(judging.judge_)
app.command()(judging.agreement)
app.command()(judging.calibrate)
app.command()(evaluation.demo)
app.command()(serving.serve)
app.add_typer(learning.experiment_app, name="experiment")
app.command(name="serve-fake")(serving.serve_fake)
app.add_typer(review_app, name="review")


def _whole_short_help() -> None:
    """Each command's line in ``yanami --help`` is its docstring's first line, whole (click would
    cut it at 45 characters with "...")."""
    for info in app.registered_commands:
        doc = info.help or (info.callback.__doc__ if info.callback else None) or ""
        if info.short_help is None and doc.strip():
            info.short_help = doc.strip().splitlines()[0]


def main() -> None:
    """Entry point: user errors become one line on stderr and a non-zero exit, never a traceback."""
    _whole_short_help()
    try:
        app()
    except UserError as exc:
        err.print(f"error: {printable(str(exc))}", markup=False)
        sys.exit(exc.exit_code)


__all__ = ["app", "main", "progress"]
