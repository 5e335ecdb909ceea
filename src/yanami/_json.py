"""JSON read from a user's source (a JSON Lines file, a side file): split and parsed so that a
hostile line is one clear error, never a traceback.

JSON Lines are split on ``\\n`` alone, as the format says: a raw U+2028, NEL or form feed inside
a string is data (`str.splitlines` would cut the line there). A number of more digits than
Python converts (4,300) and nesting deeper than the parser's recursion are errors of the line,
like bad syntax (`problem`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

ERRORS = (ValueError, RecursionError)
"""What `json.loads` raises on a hostile text (`json.JSONDecodeError` is a ValueError)."""


def lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` for every line of a JSON Lines text that is not blank (a ``\\r``
    before the ``\\n`` dropped)."""
    for n, line in enumerate(text.split("\n"), 1):
        if line.strip():
            yield n, line.removesuffix("\r")


def problem(exc: BaseException) -> str:
    """What is wrong with a text `json.loads` refused with ``exc`` (one of `ERRORS`), in a few words."""
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON ({exc.msg}, column {exc.colno})"
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply"
    return f"not readable JSON ({str(exc).split(';')[0]})"  # e.g. an integer of over 4,300 digits
