"""Shared fixtures: small datasets built by yanami itself, and a way to run the CLI in-process."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from yanami.synthetic import write_synthetic


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., CliResult]:
    """Run ``yanami ARGS…`` through the real entry point, in this process."""
    from yanami.cli import main

    def run(*args: str | Path) -> CliResult:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["yanami", *map(str, args)])
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A valid 8-dialogue dataset (read-only: copy it before changing anything)."""
    path = tmp_path_factory.mktemp("built") / "ds"
    write_synthetic(path, 8, seed=7)
    return path


@pytest.fixture
def dataset(built: Path, tmp_path: Path) -> Path:
    """A fresh, writable copy of the 8-dialogue dataset."""
    dest = tmp_path / "ds"
    shutil.copytree(built, dest)
    return dest


@pytest.fixture(scope="session")
def world_bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small world bench: 2 dialogues per scenario (read-only)."""
    from yanami.world import build_world

    path = tmp_path_factory.mktemp("world") / "bench"
    build_world(path, per_scenario=2, seed=11)
    return path


@pytest.fixture(scope="session")
def world_dialogues(world_bench: Path) -> list:
    """The small world bench's dialogues."""
    from yanami.store import Dataset

    return list(Dataset(world_bench))


def _head_port() -> int:
    """A free port for a Ray head's GCS that no other component of the head is set to use: `ray start`
    refuses a port that one of its fixed ports holds ("the same port is used by multiple
    components": its workers' 10002-19999, its dashboard agent's 52365, which lies in the kernel's
    range of free ports, 32768-60999, so a port found by binding port 0 can be it)."""
    import random
    import socket

    for port in random.Random().sample(range(20000, 32768), 64):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-32767 for the Ray head")


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    """A Ray head on this machine (``ray start --head``, 2 CPUs) for the tests of ``--backend ray``,
    stopped at the end of the session. Tests that use it carry ``pytest.mark.xdist_group("ray")``,
    so they share one head in one worker. Only its own processes are stopped (``ray stop``
    would stop every Ray on the machine)."""
    import signal
    import subprocess
    import tempfile
    import time

    ray = Path(sys.executable).parent / "ray"
    port = _head_port()
    temp = tempfile.mkdtemp(prefix="yr-", dir="/tmp")  # short: Ray's sockets live under it
    # Token authentication, as docs/scale.md's recipe sets a cluster up (Ray 2.60's `ray start`
    # turns it on only where a token is at hand), for the head and this process alike (Ray reads
    # the mode when first imported). On a fresh machine there is no token yet: Ray's own command
    # makes one where every Ray process looks (~/.ray/auth_token), as the recipe's first step does,
    # so that drivers imported before this fixture ran find it too.
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    if not os.environ.get("RAY_AUTH_TOKEN") and not Path("~/.ray/auth_token").expanduser().is_file():
        made = subprocess.run([str(ray), "get-auth-token", "--generate"], capture_output=True, env=env, check=False)
        assert made.returncode == 0, made.stderr
    start = subprocess.Popen(
        [str(ray), "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
         "--disable-usage-stats", f"--temp-dir={temp}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )  # fmt: skip
    said, _ = start.communicate()
    assert start.returncode == 0, said
    try:
        yield f"127.0.0.1:{port}"
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in _in_session(start.pid):  # the head's processes, and the workers they started
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)
            time.sleep(1)
        shutil.rmtree(temp, ignore_errors=True)


def _in_session(sid: int) -> list[int]:
    """The processes of session ``sid`` (``ray start`` started in a session of its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[3]) == sid:
                    found.append(int(entry.name))
    return found
