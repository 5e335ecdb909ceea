"""Errors a user can cause: reported as one line, without a traceback."""

from __future__ import annotations


class UserError(Exception):
    """A problem with the user's input (a file, a flag, a directory): one clear line.

    ``exit_code`` is what the command line exits with (2 unless a command says otherwise).
    """

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code
