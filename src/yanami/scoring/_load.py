"""The one loader of ``yanami score`` and ``yanami report``: run directories in, scores out.

`load_runs` checks that each directory is a run (one line naming what it is otherwise),
applies ``--judge`` (one line naming the judges a run has when it lacks the one asked
for), names the runs apart, computes their scores and says which rows are not comparable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yanami.contract import RUN_MANIFEST, Results, RunManifest, UserError
from yanami.scoring._compare import warnings
from yanami.scoring._runs import Run, label_runs, load_run
from yanami.scoring._scores import BOOTSTRAP, RunScores, run_scores
from yanami.scoring._scoreset import score_set
from yanami.store import FORMAT_NAME as DATASET_FORMAT

RUN_FORMAT = str(RunManifest.model_fields["format"].default)
EXTRA_JUDGES = "judges.json"
"""Judges that graded a run again (`yanami judge`), by name."""
GIVE_A_RUN = "give a run directory made by yanami eval"


def check_run_dir(path: Path) -> None:
    """A `UserError` of one line unless ``path`` holds a run (its format version is checked on loading)."""
    if not path.exists():
        raise UserError(f"{path}: no such directory ({GIVE_A_RUN})")
    if not path.is_dir():
        raise UserError(f"{path}: not a directory ({GIVE_A_RUN})")
    manifest = path / RUN_MANIFEST
    if not manifest.is_file():
        raise UserError(f"{path}: not a yanami run (no {RUN_MANIFEST}; {GIVE_A_RUN})")
    try:
        raw = json.loads(manifest.read_bytes())
    except (ValueError, OSError):
        raw = None
    if not isinstance(raw, dict):
        raise UserError(f"{path}: not a yanami run (its {RUN_MANIFEST} is not a run manifest; {GIVE_A_RUN})")
    fmt = raw.get("format")
    if fmt == DATASET_FORMAT:
        raise UserError(f"{path}: a yanami dataset, not a run ({GIVE_A_RUN})")
    if fmt != RUN_FORMAT and not (fmt is None and "bench_sha256" in raw):
        raise UserError(f"{path}: not a yanami run ({GIVE_A_RUN})")


def run_judges(path: Path, versions_of: str | None = None) -> dict[str, dict[str, int]]:
    """The judges a run has: name -> {version: verdicts}, from its verdicts and ``judges.json``
    (a judge recorded there without verdicts maps to an empty dict). Versions are read for
    ``versions_of`` only; the other judges map to ``{"?": verdicts}``."""
    store = Results(path)
    try:
        out: dict[str, dict[str, int]] = {str(name): {"?": int(n)} for name, n in store.judges().items()}
        if versions_of is not None and versions_of in out:
            counts: dict[str, int] = {}
            for v in store.verdicts(versions_of).values():
                counts[str(v.judge_version)] = counts.get(str(v.judge_version), 0) + 1
            out[versions_of] = counts
    finally:
        store.close()
    extra = path / EXTRA_JUDGES
    if extra.is_file():
        try:
            known = json.loads(extra.read_text(encoding="utf-8"))
        except (ValueError, OSError):
            known = {}
        if isinstance(known, dict):
            for name in known:
                out.setdefault(str(name), {})
    return out


def _judges_text(judges: dict[str, dict[str, int]]) -> str:
    parts = []
    for name, versions in sorted(judges.items()):
        n = sum(versions.values())
        parts.append(f"{name} ({n} verdicts)" if n else f"{name} (no verdicts yet)")
    return "verdicts of " + ", ".join(parts) if parts else "no verdicts at all"


@dataclass
class Loaded:
    """Runs, their scores (in the order given) and the warnings about rows that are not comparable."""

    runs: list[Run]
    scores: list[RunScores]
    warnings: list[str]

    def as_json(self) -> dict[str, Any]:
        """Every score and analysis as JSON-ready data (`ScoreSet.as_json` of their `score_set`)."""
        return score_set(self.runs, self.scores, self.warnings).as_json()


def load_runs(paths: list[Path], judge: str | None = None, bootstrap: int = BOOTSTRAP) -> Loaded:
    """Load and score run directories, graded by ``judge`` (default: each run's own judge)."""
    runs = []
    for path in paths:
        check_run_dir(path)
        judges = run_judges(path, judge)
        if judge is not None and not judges.get(judge):
            hint = " (give a judge's name, as `yanami judge` recorded it, not its config file)"
            raise UserError(
                f"{path}: no verdicts of judge {judge!r}; the run has {_judges_text(judges)}"
                + (hint if judge.endswith((".yaml", ".yml", ".json")) else "")
            )
        run = load_run(path, judge)
        run.judge_name = judge
        if judge is None:
            judges = run_judges(path, run.judge)
        run.judge_versions = tuple(sorted(v for v in judges.get(run.judge, {}) if v != "?"))
        runs.append(run)
    label_runs(runs)
    scores = [run_scores(r, bootstrap) for r in runs]
    return Loaded(runs, scores, warnings(scores))
