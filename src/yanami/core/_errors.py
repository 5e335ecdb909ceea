"""Errors a user can cause: reported as one line, without a traceback."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class UserError(Exception):
    """A problem with the user's input (a file, a flag, a directory): one clear line.

    ``exit_code`` is what the command line exits with (2 unless a command says otherwise).
    """

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def printable(text: str) -> str:
    """``text`` with every control character but tab and newline written as its ``\\xNN``
    escape: what a server or a file name says cannot move the cursor, retitle or clear the
    terminal it is printed on (ESC and CSI sequences, a bell, C1 codes)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
