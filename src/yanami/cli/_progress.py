"""Progress on stderr: a Rich bar on a terminal, plain lines every few seconds off one (a log, a
pipe); Ctrl-C becomes one line that says what was kept and that the same command goes on."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from yanami.cli._app import err
from yanami.contract import UserError

T = TypeVar("T")

PROGRESS_EVERY_S = 5.0
"""Off a terminal (a log, a pipe), a plain line of progress on stderr at most this often."""
_clock: Callable[[], float] = time.monotonic
"""The progress lines' clock (tests replace it)."""

RESUMES = "interrupted: what finished is kept; the same command resumes"
STARTS_AGAIN = "interrupted: nothing was written (it is written whole when it is done); the same command starts again"


class _Lines:
    """Progress as plain lines on stderr, for when it is not a terminal and a bar cannot show.

    Nothing is printed until `PROGRESS_EVERY_S` has passed (a quick command stays quiet);
    then a line (label, done/total, rate) at most that often, and a last one at the end.
    The rate counts what this call did (a resumed run starts past its finished items).
    """

    def __init__(self, label: str, total: int | None, base: int | None = None) -> None:
        self.label, self.total = label, total
        self.start = self.last = _clock()
        self.done = 0
        self.base = base
        """Where this call started counting (None: at the first update)."""
        self.shown: int | None = None

    def update(self, done: int, total: int | None) -> None:
        if self.base is None:
            self.base = done
        self.done, self.total = done, total
        now = _clock()
        if now - self.last >= PROGRESS_EVERY_S:
            self.last = now
            self._line(now)

    def finish(self) -> None:
        if self.shown is not None and self.shown != self.done:
            self._line(_clock())

    def _line(self, now: float) -> None:
        elapsed = now - self.start
        new = self.done - (self.base or 0)
        rate = f"{new / elapsed:.1f}/s" if elapsed > 0 else "-/s"
        count = f"{self.done}" if self.total is None else f"{self.done}/{self.total}"
        if self.total:
            count += f" ({100 * self.done / self.total:.0f} %)"
        err.print(f"{self.label}: {count}, {rate}, {elapsed:.0f} s", markup=False)
        self.shown = self.done


def _bar() -> Progress:
    """A Rich progress bar on stderr (silent when stderr is not a terminal: see `_Lines`)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )


@contextmanager
def progress(label: str, total: int | None) -> Iterator[Callable[[], None]]:
    """A progress bar that counts (plain lines off a terminal); yields `advance`. Ctrl-C becomes
    one line: what such a command makes is written whole at its end, so nothing was written."""
    try:
        if not err.is_terminal:
            lines = _Lines(label, total, base=0)
            count = 0

            def advance() -> None:
                nonlocal count
                count += 1
                lines.update(count, total)

            yield advance
            lines.finish()
            return
        bar = _bar()
        with bar:
            task = bar.add_task(label, total=total)
            yield lambda: bar.advance(task)
    except KeyboardInterrupt:
        raise UserError(STARTS_AGAIN, exit_code=130) from None


def counting(items: Iterable[T], advance: Callable[[], None]) -> Iterator[T]:
    """The items, calling `advance` as each is taken."""
    for item in items:
        advance()
        yield item


@contextmanager
def stages() -> Iterator[Callable[[str, int, int], None]]:
    """Progress for a command of several stages: one bar (or plain lines) per stage; a total
    of 0 means not known yet. Ctrl-C becomes one line saying that the same command resumes."""
    bar = _bar() if err.is_terminal else None
    tasks: dict[str, TaskID] = {}
    lines: dict[str, _Lines] = {}

    def update(stage: str, done: int, total: int) -> None:
        if bar is not None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total or None)
            bar.update(tasks[stage], completed=done, total=total or None)
            return
        if stage not in lines:
            for previous in lines.values():
                previous.finish()
            lines[stage] = _Lines(stage, total or None, base=0)
        lines[stage].update(done, total or None)

    try:
        if bar is None:
            yield update
            for previous in lines.values():
                previous.finish()
            return
        with bar:
            yield update
    except KeyboardInterrupt:
        raise UserError(RESUMES, exit_code=130) from None


@contextmanager
def resumable() -> Iterator[None]:
    """Ctrl-C becomes one line saying that the same command resumes (exit 130)."""
    try:
        yield
    except KeyboardInterrupt:
        raise UserError(RESUMES, exit_code=130) from None


@contextmanager
def eval_progress(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar set to (done, total) (plain lines off a terminal); Ctrl-C becomes one line
    saying how to resume."""
    try:
        if not err.is_terminal:
            lines = _Lines(label, None)
            yield lines.update
            lines.finish()
            return
        bar = _bar()
        with bar:
            task = bar.add_task(label, total=None)
            yield lambda done, total: bar.update(task, completed=done, total=total)
    except KeyboardInterrupt:
        raise UserError(RESUMES, exit_code=130) from None
