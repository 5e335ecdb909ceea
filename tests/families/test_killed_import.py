"""A killed ``yanami import`` leaves its work directory behind; the next import of the same --out
removes it, so nothing hidden stays beside the dataset or in it."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.families.samples import write_imug, write_weave

KILLED_MIDWAY = """
import os, signal, sys
from yanami.store import DatasetWriter

real, added = DatasetWriter.add_dialogue, []

def add_dialogue(self, dialogue):
    if added:  # the second dialogue: the work directory holds images and a dialogue
        os.kill(os.getpid(), signal.SIGKILL)
    added.append(dialogue.id)
    return real(self, dialogue)

DatasetWriter.add_dialogue = add_dialogue
sys.argv = ["yanami", *sys.argv[1:]]
from yanami.cli import main
main()
"""


@pytest.mark.parametrize(("family", "write"), [("weave", write_weave), ("imug", write_imug)])
def test_a_killed_import_leaves_no_temporary_directory_after_the_next_run(
    tmp_path: Path, cli: Callable[..., Any], family: str, write: Callable[[Path], Path]
) -> None:
    src = write(tmp_path / "src")
    runs = tmp_path / "runs"
    runs.mkdir()
    out = runs / "ds"
    cmd = [sys.executable, "-c", KILLED_MIDWAY, "import", family, str(src), "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == -signal.SIGKILL, r.stderr
    left = sorted(p.name for p in runs.iterdir())
    assert not out.exists() and any(name.startswith(".ds.tmp-") for name in left), left  # what the kill left

    r = cli("import", family, src, "--out", out)
    assert r.code == 0, r.err
    assert sorted(p.name for p in runs.iterdir()) == ["ds"]
    assert [p.relative_to(out) for p in out.rglob(".*")] == []
