"""Fixtures of the scoring tests: a demo-sized report, made by ``yanami demo`` itself."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def small_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``yanami demo --per-scenario 1``: a 4-dialogue world bench, every demo run and ``report.html``
    (read-only; a `yanami demo` on it resumes)."""
    from yanami.demo import run_demo

    out = tmp_path_factory.mktemp("demo") / "demo"
    run_demo(out, per_scenario=1, workers=1)
    return out
