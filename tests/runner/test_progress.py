"""Progress off a terminal: plain lines on stderr every few seconds (a fake clock; no sleeping)."""

from __future__ import annotations

import re

from yanami.cli import _progress

LINE = re.compile(r"^(?P<label>.+): (?P<done>\d+)/(?P<total>\d+) \((?P<pct>\d+) %\), (?P<rate>[\d.]+)/s, \d+ s$")


class FakeClock:
    """Each reading moves time on by ``step`` seconds."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_a_counting_progress_prints_a_line_every_interval(monkeypatch, capsys) -> None:
    monkeypatch.setattr(_progress, "_clock", FakeClock(1.0))
    assert _progress.PROGRESS_EVERY_S == 5.0
    with _progress.progress("building", 22) as advance:
        for _ in range(22):
            advance()
    lines = capsys.readouterr().err.splitlines()
    matched = [LINE.match(line) for line in lines]
    assert all(matched), lines
    # one line per 5 s of the clock (a reading per advance), then the last count at the end
    assert [m["done"] for m in matched if m] == ["5", "10", "15", "20", "22"]
    assert next(m["rate"] for m in matched if m) == "1.0"


def test_a_quick_command_stays_quiet(monkeypatch, capsys) -> None:
    monkeypatch.setattr(_progress, "_clock", FakeClock(0.001))
    with _progress.progress("dialogues", 100) as advance:
        for _ in range(100):
            advance()
    assert capsys.readouterr().err == ""


def test_eval_off_a_terminal_prints_lines_of_progress(cli, world_bench, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(_progress, "PROGRESS_EVERY_S", 0.0)  # a line at every item
    r = cli("eval", world_bench, "--model", "reference:oracle", "--out", tmp_path / "run", "--limit", "2")
    assert r.code == 0, r.err
    lines = [LINE.match(line) for line in r.err.splitlines()]
    assert lines and all(lines), r.err
    assert {m["label"] for m in lines if m} == {"evaluating reference:oracle"}
    done = [int(m["done"]) for m in lines if m]
    total = int(lines[-1]["total"])  # type: ignore[index]
    # from the start (0 done) to the last item, rising (items finished together are counted together)
    assert done[0] == 0 and done[-1] == total and done == sorted(set(done)) and len(done) > 2
    # resumed: the count starts at what was done, and the rate counts only what this call did
    again = cli("eval", world_bench, "--model", "reference:oracle", "--out", tmp_path / "run", "--limit", "2")
    assert again.code == 0, again.err
    resumed = [LINE.match(line) for line in again.err.splitlines()]
    assert resumed and all(m and m["done"] == m["total"] and m["rate"] == "0.0" for m in resumed), again.err


def test_eval_progress_reports_the_rate_of_this_call(monkeypatch, capsys) -> None:
    monkeypatch.setattr(_progress, "_clock", FakeClock(2.0))
    with _progress.eval_progress("evaluating m") as update:
        update(40, 100)  # a resumed run: 40 items were done before
        for done in range(41, 51):
            update(done, 100)
    matched = [LINE.match(line) for line in capsys.readouterr().err.splitlines()]
    assert all(matched)
    last = matched[-1]
    assert last is not None and last["done"] == "50" and last["pct"] == "50"
    # 10 new items in 24 s of the fake clock (2 s a reading: the start, 11 updates, the end)
    assert last["rate"] == f"{10 / 24:.1f}"
