"""The command line: help, version, schema, demo, and errors without tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from yanami import __version__
from yanami.demo import disk_usage
from yanami.store import validate_dataset

COMMANDS = ["schema", "validate", "stats", "export", "import", "leakage", "build", "eval", "score", "report", "demo"]


def test_help_lists_every_command_with_a_description(cli: Callable[..., Any]) -> None:
    r = cli("--help")
    assert r.code == 0
    for name in COMMANDS:
        line = next((ln for ln in r.out.splitlines() if ln.strip().startswith(name + " ")), None)
        assert line is not None, name
        assert len(line.split()) > 2, line  # a one-line description follows the name


def test_version(cli: Callable[..., Any]) -> None:
    r = cli("--version")
    assert r.code == 0 and r.out.strip() == f"yanami {__version__}"


def test_schema_is_json_schema(cli: Callable[..., Any]) -> None:
    r = cli("schema")
    schema = json.loads(r.out)
    assert schema["title"] == "Dialogue"
    assert "turns" in schema["properties"]
    r = cli("schema", "--of", "manifest")
    assert json.loads(r.out)["title"] == "Manifest"


def test_usage_errors_exit_2(cli: Callable[..., Any]) -> None:
    r = cli("validate")
    assert r.code == 2
    r = cli("leakage", "a", "b", "--threshold", "99")
    assert r.code == 2


def test_demo_builds_and_validates(cli: Callable[..., Any], tmp_path: Path) -> None:
    r = cli("demo", "--out", tmp_path / "demo", "--per-scenario", "1")
    assert r.code == 0, r.err
    assert "built and validated" in r.out
    assert "reference:oracle" in r.out and "Irreducibility audit" in r.out
    assert (tmp_path / "demo" / "report.html").is_file()
    assert validate_dataset(tmp_path / "demo" / "bench") == []
    assert f"demo: {disk_usage(tmp_path / 'demo') / 1e6:.0f} MB on disk in {tmp_path / 'demo'}" in r.out
    copies = list((tmp_path / "demo" / "runs" / "copy-input" / "outputs").glob("??/*"))
    assert copies and all(p.stat().st_nlink > 1 for p in copies)  # the bench's pictures, stored once
    # What an older yanami left there is redone, not resumed (nor refused).
    bench, run = tmp_path / "demo" / "bench" / "manifest.json", tmp_path / "demo" / "runs" / "oracle" / "manifest.json"
    for path, key in ((bench, "generator"), (run, None)):
        m = json.loads(path.read_text())
        if key:
            m[key]["version"] = "0.0.1"
        else:
            m["yanami_version"] = "0.0.1"
        path.write_text(json.dumps(m))
    r = cli("demo", "--out", tmp_path / "demo", "--per-scenario", "1")
    assert r.code == 0, r.err
    assert json.loads(bench.read_text())["generator"]["version"] == __version__
    assert json.loads(run.read_text())["yanami_version"] == __version__


def test_real_entry_point_has_no_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "yanami", "stats", str(tmp_path / "nope")], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {tmp_path / 'nope'}: no such directory"
    assert proc.stdout == ""


def test_an_interrupted_eval_says_how_to_resume(world_bench: Path, tmp_path: Path) -> None:
    import os
    import signal
    import sqlite3
    import time

    cmd = [sys.executable, "-m", "yanami", "eval", str(world_bench), "--model", "reference:stateless"]
    # SIGINT as a terminal delivers it, even where the suite runs in the background (SIGINT ignored)
    proc = subprocess.Popen(
        [*cmd, "--out", str(tmp_path / "run")],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    db = tmp_path / "run" / "results.sqlite"
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        try:
            if sqlite3.connect(db).execute("SELECT count(*) FROM predictions").fetchone()[0] >= 1:
                break
        except sqlite3.Error:
            pass
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    if proc.returncode != 0:  # (it may have finished before the signal arrived)
        assert proc.returncode == 130
        assert "the same command resumes" in stderr and "Traceback" not in stderr


def test_help_names_arguments_plainly_and_shows_choices(cli) -> None:
    """Every command's help: plain argument names, no typer type labels, and the choices of enum options."""
    import re

    from yanami.cli._app import COMMANDS

    names = list(COMMANDS)
    assert {"eval", "score", "report", "build", "serve-fake", "demo", "review", "experiment"} <= set(names)
    for name in names:
        r = cli(name, "--help")
        assert r.code == 0, name
        assert not re.search(r"\{\w+\}|<list\[|<path>|<str>|<int", r.out), (name, r.out)
    assert "RUN..." in cli("score", "--help").out
    assert "<html|md|latex>" in cli("report", "--help").out
    assert "<bench|train|tiny>" in cli("build", "--help").out


def test_help_lists_every_command_whole_without_loading_one() -> None:
    """``yanami --help`` lists each command with its whole summary, in `COMMANDS`' order, from the
    table alone: no command module is imported (so the command modules import at their top)."""
    from yanami.cli._app import COMMANDS

    script = (
        "import sys\nsys.argv = ['yanami', '--help']\nfrom yanami.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('LOADED', sorted(m for m in sys.modules if m.startswith('yanami.cli.') and m != 'yanami.cli._app'))\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=_wide())
    assert r.returncode == 0, r.stderr
    help_text, loaded = r.stdout.split("LOADED")
    assert loaded.strip() == "[]"
    listed = [line.split()[0] for line in help_text.split("Commands:")[1].splitlines() if line.startswith("  ") and
              not line.startswith("   ")]  # fmt: skip
    assert listed == list(COMMANDS)
    listing = " ".join(help_text.split("Commands:")[1].split())
    assert "..." not in listing
    for command in COMMANDS.values():
        assert command.summary in listing


def test_demo_help_names_every_kind_of_floor_it_runs(cli: Callable[..., Any]) -> None:
    from yanami.demo import FLOORS

    text = " ".join(cli("demo", "--help").out.split())
    kinds = {f.removeprefix("reference:").split("-")[0] for f in FLOORS}
    assert kinds and all(k in text for k in kinds), (kinds, text)


def _wide() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "400"}


def test_an_error_never_sends_a_control_sequence_to_the_terminal(cli: Callable[..., Any], tmp_path: Path) -> None:
    """A path (or a server's message) holding escape sequences is printed with them written out."""
    r = cli("validate", tmp_path / "no\x1b]0;pwned\x07such\x1b[2J\x9b31m")
    assert r.code == 2 and "\\x1b]0;pwned\\x07such\\x1b[2J\\x9b31m" in r.err
    assert not any(ch in r.err for ch in "\x1b\x07\x9b") and len(r.err.strip().splitlines()) == 1
