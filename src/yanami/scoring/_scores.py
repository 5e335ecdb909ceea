"""The paper's scores, read from run directories: equations (1)-(7) and the analyses.

Every function here is plain arithmetic over per-item records; records that are not
valid (refused, error, missing, or never judged) are excluded and counted as coverage.
State Consistency of a target image is passed / total over its atomic checks; a
scenario's SC is the mean over its target images, and its DSU type score the mean over
its questions of that type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from yanami.bench import Prediction, Verdict, read_rows
from yanami.errors import UserError

SCENARIOS = ("fusion", "editing", "world_modeling", "reasoning")
SCENARIO_TITLES = {
    "fusion": "Multi-Image Fusion",
    "editing": "Image Editing",
    "world_modeling": "World Modeling",
    "reasoning": "Visual Reasoning",
}
QTYPES = ("RR", "CR", "CT", "CU")
GAP_CAPABILITIES = {"CT": "constraint_adherence", "CU": "correction_updating"}
"""Understanding question type -> the capability-specific checks aligned with it."""
BOOTSTRAP = 1000


@dataclass
class DialogueRecord:
    """One dialogue's valid records in one run."""

    id: str
    scenario: str
    dsu: dict[str, float] = field(default_factory=dict)
    """Question type -> score 0..1."""
    aligned: dict[str, list[str]] = field(default_factory=dict)
    """Question type -> its aligned capability-check ids."""
    images: dict[int, tuple[float, float]] = field(default_factory=dict)
    """Target turn -> (SC 0..1, VQ 0..10)."""
    checks: dict[str, tuple[str | None, bool]] = field(default_factory=dict)
    """Check id -> (capability, passed), over every judged image."""
    failed_turns: int = 0
    """Target turns with at least one failed check (atomic or capability-specific)."""


@dataclass
class Run:
    """A run directory, loaded."""

    path: Path
    manifest: dict[str, Any]
    dialogues: dict[str, DialogueRecord]
    statuses: dict[str, int]
    unjudged: int
    expected: int

    @property
    def label(self) -> str:
        """How the run is named in tables."""
        m = self.manifest
        extra = [] if m["history"] == "gt" else ["Self-History"]
        if m["layout"] != "yes-first":
            extra.append(m["layout"])
        return m["model"] + (f" ({', '.join(extra)})" if extra else "")

    @property
    def answers(self) -> bool:
        """Whether DSU is scored (equation 2) or not (equation 3)."""
        return bool(self.manifest["answers"])


def load_run(path: str | Path, judge: str | None = None) -> Run:
    """Load a run directory's valid records, graded by ``judge`` (default: the judge of the run)."""
    run = Path(path)
    if not (run / "manifest.json").is_file():
        raise UserError(f"{run}: not a yanami run (no manifest.json)")
    try:
        predictions, verdicts, manifest = read_rows(run, judge)
    except (ValueError, KeyError) as exc:
        raise UserError(f"{run}: unreadable run ({exc})") from None
    return build_run(run, manifest, predictions, verdicts)


def build_run(
    run: Path, manifest: dict[str, Any], predictions: dict[str, Prediction], verdicts: dict[str, Verdict]
) -> Run:
    """A `Run` from its rows."""
    dialogues: dict[str, DialogueRecord] = {}
    statuses: dict[str, int] = {}
    unjudged = 0
    for item, p in predictions.items():
        statuses[p.status] = statuses.get(p.status, 0) + 1
        rec = dialogues.setdefault(p.dialogue, DialogueRecord(p.dialogue, p.scenario))
        v = verdicts.get(item)
        if p.status != "ok":
            continue
        if v is None or v.status != "ok":
            unjudged += 1
            continue
        if p.kind == "question":
            assert p.qtype is not None and v.score is not None
            rec.dsu[p.qtype] = v.score
            rec.aligned[p.qtype] = list(v.aligned or [])
        else:
            checks = v.checks or []
            atomic = [c for c in checks if c[1] == "atomic"]
            sc = sum(c[3] for c in atomic) / len(atomic) if atomic else 1.0
            rec.images[p.turn] = (sc, float(v.vq or 0.0))
            for cid, _, cap, passed in checks:
                rec.checks[cid] = (cap, bool(passed))
            rec.failed_turns += any(not c[3] for c in checks)
    return Run(run, manifest, dialogues, statuses, unjudged, int(manifest.get("items", len(predictions))))


# Equations (1)-(3) --------------------------------------------------------------------


def scene_score(understanding: float | None, sc100: float, vq100: float) -> float:
    """Equation (2) for models that answer questions, (3) for generation-only models."""
    if understanding is None:
        return 0.6 * sc100 + 0.4 * vq100
    return 0.4 * understanding + 0.4 * sc100 + 0.2 * vq100


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


@dataclass
class ScenarioScores:
    """A scenario's components on 0-100."""

    dsu: dict[str, float | None]
    understanding: float | None
    sc: float | None
    vq: float | None
    scene: float | None
    constraint_keeping: float | None
    correction_updating: float | None
    dialogues: int


def scenario_scores(records: list[DialogueRecord], answers: bool) -> ScenarioScores:
    """Equations (1)-(3) over one scenario's dialogues."""
    dsu = {t: _mean([r.dsu[t] * 100 for r in records if t in r.dsu]) for t in QTYPES}
    understanding = None
    if answers and all(v is not None for v in dsu.values()):
        understanding = sum(v for v in dsu.values() if v is not None) / 4
    sc = _mean([s * 100 for r in records for s, _ in r.images.values()])
    vq = _mean([q * 10 for r in records for _, q in r.images.values()])
    scene = None
    if sc is not None and vq is not None and (understanding is not None or not answers):
        scene = scene_score(understanding, sc, vq)

    def cap_rate(cap: str) -> float | None:
        return _mean([100.0 * p for r in records for c, p in r.checks.values() if c == cap])

    return ScenarioScores(
        dsu,
        understanding,
        sc,
        vq,
        scene,
        cap_rate("constraint_adherence"),
        cap_rate("correction_updating"),
        len(records),
    )


@dataclass
class RunScores:
    """A run's scores: per scenario, their macro-average, a bootstrap interval and coverage."""

    label: str
    scenarios: dict[str, ScenarioScores]
    average: dict[str, float | None]
    """Macro-averages over scenarios of every component."""
    interval: tuple[float, float] | None
    """Bootstrap 95 % interval of the benchmark score, resampling dialogues within scenarios."""
    coverage: dict[str, Any]
    failed_turn_share: float | None
    """Share of target turns with at least one failed check (the irreducibility audit, on the stateless agent)."""


def _macro(values: list[float | None]) -> float | None:
    return (
        sum(v for v in values if v is not None) / len(values) if values and all(v is not None for v in values) else None
    )


def run_scores(run: Run, bootstrap: int = BOOTSTRAP) -> RunScores:
    """Every score of one run."""
    by = {s: [r for r in run.dialogues.values() if r.scenario == s] for s in SCENARIOS}
    present = [s for s in SCENARIOS if by[s]]
    per = {s: scenario_scores(by[s], run.answers) for s in present}
    keys = ("understanding", "sc", "vq", "scene", "constraint_keeping", "correction_updating")
    average: dict[str, float | None] = {k: _macro([getattr(per[s], k) for s in present]) for k in keys}
    for t in QTYPES:
        average[t] = _macro([per[s].dsu[t] for s in present])
    valid = run.statuses.get("ok", 0) - run.unjudged
    turns = sum(len(r.images) for r in run.dialogues.values())
    failed = sum(r.failed_turns for r in run.dialogues.values())
    coverage = {
        "expected": run.expected,
        "recorded": sum(run.statuses.values()),
        "valid": valid,
        "statuses": dict(sorted(run.statuses.items())),
        "unjudged": run.unjudged,
    }
    interval = _bootstrap([by[s] for s in present], run.answers, bootstrap) if bootstrap else None
    return RunScores(run.label, per, average, interval, coverage, failed / turns if turns else None)


def _bootstrap(groups: list[list[DialogueRecord]], answers: bool, n: int) -> tuple[float, float] | None:
    """95 % percentile interval of the macro-averaged scene score, resampling dialogues per scenario."""
    rng = np.random.default_rng(42)
    samples = np.zeros(n)
    for records in groups:
        k = len(records)
        # per dialogue sums: DSU (score, count) per type, SC and VQ (sum, count)
        cols = []
        for t in QTYPES:
            cols += [[r.dsu.get(t, 0.0) for r in records], [float(t in r.dsu) for r in records]]
        cols += [
            [sum(s for s, _ in r.images.values()) for r in records],
            [sum(q for _, q in r.images.values()) for r in records],
            [float(len(r.images)) for r in records],
        ]
        table = np.array(cols)  # (C, k)
        idx = rng.integers(0, k, size=(n, k))
        sums = table[:, idx].sum(axis=2)  # (C, n)
        with np.errstate(invalid="ignore", divide="ignore"):
            dsu = np.stack([sums[2 * j] / sums[2 * j + 1] for j in range(4)]) * 100
            sc = sums[8] / sums[10] * 100
            vq = sums[9] / sums[10] * 10
        scene = 0.4 * dsu.mean(axis=0) + 0.4 * sc + 0.2 * vq if answers else 0.6 * sc + 0.4 * vq
        samples += scene / len(groups)
    samples = samples[np.isfinite(samples)]
    if not len(samples):
        return None
    return float(np.percentile(samples, 2.5)), float(np.percentile(samples, 97.5))


# Analyses across runs ----------------------------------------------------------------


def understanding_realization_gap(runs: list[Run]) -> dict[str, Any]:
    """Equations (4)-(7) over the runs that answer questions: per capability and overall."""
    models = [r for r in runs if r.answers]
    out: dict[str, Any] = {"models": [r.label for r in models], "eligible": {}, "gap": {}}
    if not models:
        return out
    common = set.intersection(*(set(r.dialogues) for r in models))
    for qtype, cap in GAP_CAPABILITIES.items():
        eligible = []
        for d in sorted(common):
            ok = True
            for r in models:
                rec = r.dialogues[d]
                aligned = [a for a in rec.aligned.get(qtype, []) if a in rec.checks]
                if rec.dsu.get(qtype) != 1.0 or not aligned:
                    ok = False
                    break
            if ok:
                eligible.append(d)
        out["eligible"][cap] = len(eligible)
        for r in models:
            per_d = []
            for d in eligible:
                rec = r.dialogues[d]
                ys = [rec.checks[a][1] for a in rec.aligned[qtype] if a in rec.checks]
                per_d.append(sum(ys) / len(ys))  # equation (5)
            realization = sum(per_d) / len(per_d) if per_d else None  # equation (6)
            out["gap"].setdefault(r.label, {})[cap] = None if realization is None else 1 - realization  # (7)
    for gaps in out["gap"].values():
        vals = [gaps.get(c) for c in GAP_CAPABILITIES.values()]
        gaps["overall"] = (
            sum(v for v in vals if v is not None) / len(vals) if all(v is not None for v in vals) else None
        )
    return out


def progression(run: Run) -> dict[str, float | int | None]:
    """First vs last generation turn (0.6 SC + 0.4 VQ) on dialogues with at least two generation turns."""
    first, last = [], []
    for rec in run.dialogues.values():
        if len(rec.images) >= 2:
            turns = sorted(rec.images)
            for pick, into in ((turns[0], first), (turns[-1], last)):
                sc, vq = rec.images[pick]
                into.append(0.6 * sc * 100 + 0.4 * vq * 10)
    f, lst = _mean(first), _mean(last)
    return {"dialogues": len(first), "first": f, "last": lst, "delta": None if f is None or lst is None else lst - f}


def history_effect(gt: Run, self_: Run) -> dict[str, float | int | None]:
    """Self- vs GT-History on the dialogues of the Self-History run: generation score 0.6 SC + 0.4 VQ."""

    def score(run: Run, ids: set[str]) -> float | None:
        vals = [
            0.6 * sc * 100 + 0.4 * vq * 10
            for d in ids
            if d in run.dialogues
            for sc, vq in run.dialogues[d].images.values()
        ]
        return _mean(vals)

    ids = {d for d, rec in self_.dialogues.items() if rec.images} & set(gt.dialogues)
    g, s = score(gt, ids), score(self_, ids)
    drop = None if g in (None, 0) or s is None else 100 * (g - s) / g
    return {"dialogues": len(ids), "gt": g, "self": s, "drop_percent": drop}


def pair_histories(runs: list[Run]) -> list[tuple[Run, Run]]:
    """(GT-History run, Self-History run) pairs of the same model, layout and bench."""
    out = []
    for s in runs:
        if s.manifest["history"] != "self":
            continue
        for g in runs:
            m, n = g.manifest, s.manifest
            if m["history"] == "gt" and (m["model"], m["layout"], m["bench_sha256"]) == (
                n["model"],
                n["layout"],
                n["bench_sha256"],
            ):
                out.append((g, s))
                break
    return out
