"""The ``yanami`` command line: `app`, and `main`, its entry point.

Each module holds a group of commands; `yanami.cli._app.COMMANDS` says where each command lives
and its line in ``yanami --help`` (the order it lists them), and a command's module is loaded
when the command runs. Options that several commands share are declared once in `_options`, and
the progress bars and lines in `_progress`.
"""

from __future__ import annotations

import sys

from yanami.cli._app import app, err
from yanami.contract import UserError, printable


def main() -> None:
    """Entry point: user errors become one line on stderr and a non-zero exit, never a traceback."""
    try:
        app()
    except UserError as exc:
        err.print(f"error: {printable(str(exc))}", markup=False)
        sys.exit(exc.exit_code)


__all__ = ["app", "main"]
