"""The paper's scores, read from run directories: equations (1)-(7) and the analyses.

Every function here is plain arithmetic over per-item records; records that are not
valid (refused, error, missing, or never judged) are excluded and counted as coverage.
State Consistency of a target image is passed / total over its atomic checks; a
scenario's SC is the mean over its target images, and its DSU type score the mean over
its questions of that type. The weights live in `yanami.scoring._weights`; the choices
made where a value is missing are listed in docs/evaluation.md ("Scoring choices").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from yanami.bench import Prediction, RunManifest, Verdict, read_rows
from yanami.errors import UserError
from yanami.scenarios import FACTS
from yanami.scoring._weights import generation_score, image_generation_score, image_sc, scene_score

SCENARIOS = tuple(s.value for s in FACTS)
SCENARIO_TITLES = {s.value: f.title for s, f in FACTS.items()}
QTYPES = ("RR", "CR", "CT", "CU")
EFFECTS = ("change", "preservation")
"""What an atomic check tests: what the turn changes (or the history requires), or what stays."""
GAP_CAPABILITIES = {"CT": "constraint_adherence", "CU": "correction_updating"}
"""Understanding question type -> the capability-specific checks aligned with it."""
BOOTSTRAP = 1000
MIN_INTERVAL_DIALOGUES = 5
"""Fewer dialogues than this in a scenario: no bootstrap interval (it would be a few resample values)."""


@dataclass
class DialogueRecord:
    """One dialogue's valid records in one run."""

    id: str
    scenario: str
    dsu: dict[str, float] = field(default_factory=dict)
    """Question type -> score 0..1."""
    aligned: dict[str, list[str]] = field(default_factory=dict)
    """Question type -> its aligned capability-check ids."""
    images: dict[int, tuple[float | None, float | None]] = field(default_factory=dict)
    """Target turn -> (SC 0..1, VQ 0..10); None where the image has no atomic check (SC) or no VQ."""
    checks: dict[str, tuple[str | None, bool]] = field(default_factory=dict)
    """Check id -> (capability, passed), over every judged image."""
    effects: dict[int, dict[str, float]] = field(default_factory=dict)
    """Target turn -> {``change`` | ``preservation``: passed share of its atomic checks of that effect}."""
    failed_turns: int = 0
    """Target turns with at least one failed check (atomic or capability-specific)."""


@dataclass
class Run:
    """A run directory, loaded.

    Read the manifest through the properties below (``run.history``, ``run.limit``…): they
    work for the manifest as a plain dict and as the typed `RunManifest`.
    """

    path: Path
    manifest: dict[str, Any] | RunManifest
    dialogues: dict[str, DialogueRecord]
    statuses: dict[str, int]
    unjudged: int
    expected: int
    judge_name: str | None = None
    """The judge whose verdicts were loaded (None: the run's own)."""
    judge_versions: tuple[str, ...] = ()
    """The versions of that judge among the loaded verdicts (empty: not read; see `load_runs`)."""
    given_label: str | None = None
    """The label `label_runs` chose so that every run of a set is named apart."""
    calls: int = 0
    """Model calls over all recorded items (more than one per item under a test-time strategy)."""

    def setting(self, key: str) -> Any:
        """A manifest field by name (None when absent), from a dict or the typed manifest."""
        m = self.manifest
        return m.get(key) if isinstance(m, dict) else getattr(m, key, None)

    @property
    def history(self) -> str:
        """``gt`` or ``self``."""
        return str(self.setting("history"))

    @property
    def layout(self) -> str:
        """How images were placed in the input."""
        return str(self.setting("layout"))

    @property
    def model_spec(self) -> str:
        """The --model spec the run was made with."""
        return str(self.setting("model"))

    @property
    def model_name(self) -> str:
        """The model's name (a config's ``name``; the spec of a reference agent)."""
        return str(self.setting("model_name") or self.setting("model"))

    @property
    def bench_sha256(self) -> str:
        """The bench's identity: the SHA-256 of its manifest."""
        return str(self.setting("bench_sha256"))

    @property
    def bench_path(self) -> str | None:
        """Where the bench was when the run was made."""
        b = self.setting("bench")
        return None if b is None else str(b)

    @property
    def limit(self) -> int | None:
        """The run's --limit (None: the whole bench)."""
        v = self.setting("limit")
        return None if v is None else int(v)

    @property
    def recorded_judge(self) -> tuple[str, str]:
        """(name, version) of the judge the run was made with."""
        j = self.setting("judge")
        if j is None:
            return "-", ""
        if isinstance(j, dict):
            return str(j["name"]), str(j["version"])
        return str(j.name), str(j.version)

    @property
    def judge(self) -> str:
        """The name of the judge whose verdicts are scored."""
        return self.judge_name or self.recorded_judge[0]

    @property
    def judge_text(self) -> str:
        """The scored judge with its version(s), e.g. ``exact v2``."""
        versions = self.judge_versions
        if not versions:
            versions = (self.recorded_judge[1],) if self.judge == self.recorded_judge[0] else ()
        return self.judge + (" v" + "+v".join(v for v in versions if v) if any(versions) else "")

    @property
    def answers(self) -> bool:
        """Whether DSU is scored (equation 2) or not (equation 3)."""
        return bool(self.setting("answers"))

    @property
    def valid(self) -> int:
        """Items with a valid (ok and judged) record."""
        return self.statuses.get("ok", 0) - self.unjudged

    @property
    def coverage_percent(self) -> int:
        """Valid items out of the run's items, in whole percent rounded down (100 only when complete)."""
        return 100 if self.expected <= 0 else math.floor(100 * min(self.valid, self.expected) / self.expected)

    @property
    def departures(self) -> list[str]:
        """This run's own departures from a full, default run, as labels show them."""
        extra = [] if self.history == "gt" else ["Self-History"]
        if self.layout != "yes-first":
            extra.append(self.layout)
        if self.limit is not None:
            extra.append(f"limit {self.limit}")
        if self.coverage_percent < 100:
            extra.append(f"{self.coverage_percent} % coverage")
        return extra

    @property
    def base_label(self) -> str:
        """The model's name plus this run's `departures`."""
        return _compose(self.model_name, self.departures)

    @property
    def label(self) -> str:
        """How the run is named in tables (unique within a set once `label_runs` named it)."""
        return self.given_label or self.base_label


def label_runs(runs: list[Run]) -> None:
    """Name every run of a set apart: its `base_label`, plus the judge and the bench where the
    runs differ in them, plus the model spec, the run directory's name and finally a number
    for runs that would still share a label. Sets ``given_label`` on each run."""
    judges = {r.judge_text for r in runs}
    benches = {r.bench_sha256 for r in runs}
    parts: list[list[str]] = []
    for r in runs:
        p = []
        if len(judges) > 1:
            p.append(f"judge {r.judge_text}")
        if len(benches) > 1:
            p.append(f"bench {r.bench_sha256[:8]}")
        parts.append(p)

    def compose(k: int) -> str:
        return _compose(runs[k].model_name, runs[k].departures + parts[k])

    for extra in (lambda r: r.model_spec, lambda r: r.path.name or str(r.path)):
        labels = [compose(k) for k in range(len(runs))]
        for k, r in enumerate(runs):
            same = [j for j, lab in enumerate(labels) if lab == labels[k]]
            if len(same) > 1 and len({extra(runs[j]) for j in same}) > 1:
                parts[k].append(extra(r))
    for r, label in zip(runs, _distinct([compose(k) for k in range(len(runs))]), strict=True):
        r.given_label = label


def _compose(name: str, parts: list[str]) -> str:
    return name + (f" ({', '.join(parts)})" if parts else "")


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
    run: Path, manifest: RunManifest, predictions: dict[str, Prediction], verdicts: dict[str, Verdict]
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
            atomic = [bool(c.passed) for c in checks if c.kind == "atomic"]
            rec.images[p.turn] = (image_sc(atomic), None if v.vq is None else float(v.vq))
            for effect in EFFECTS:
                share = image_sc([bool(c.passed) for c in checks if c.kind == "atomic" and c.effect == effect])
                if share is not None:
                    rec.effects.setdefault(p.turn, {})[effect] = share
            for c in checks:
                rec.checks[c.id] = (c.capability, bool(c.passed))
            rec.failed_turns += any(not c.passed for c in checks)
    calls = sum(p.calls for p in predictions.values())
    return Run(run, manifest, dialogues, statuses, unjudged, manifest.items, calls=calls)


# Equations (1)-(3) --------------------------------------------------------------------


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
    sc_change: float | None = None
    """SC over the change checks alone (what copying the latest image cannot satisfy)."""
    sc_preservation: float | None = None
    """SC over the preservation checks alone."""


def scenario_scores(records: list[DialogueRecord], answers: bool) -> ScenarioScores:
    """Equations (1)-(3) over one scenario's dialogues.

    S_understanding needs all four DSU types: with one type without a valid question it is
    None ("-"), and so is the scene score (a mean of three types would drop the missing
    one's difficulty). SC is over the images that have atomic checks, VQ over those with a VQ.
    """
    dsu = {t: _mean([r.dsu[t] * 100 for r in records if t in r.dsu]) for t in QTYPES}
    understanding = None
    if answers and all(v is not None for v in dsu.values()):
        understanding = sum(v for v in dsu.values() if v is not None) / 4
    sc = _mean([s * 100 for r in records for s, _ in r.images.values() if s is not None])
    vq = _mean([q * 10 for r in records for _, q in r.images.values() if q is not None])
    scene = None
    if sc is not None and vq is not None and (understanding is not None or not answers):
        scene = scene_score(understanding, sc, vq)

    def cap_rate(cap: str) -> float | None:
        return _mean([100.0 * p for r in records for c, p in r.checks.values() if c == cap])

    def effect_sc(effect: str) -> float | None:
        return _mean([100.0 * e[effect] for r in records for e in r.effects.values() if effect in e])

    return ScenarioScores(
        dsu,
        understanding,
        sc,
        vq,
        scene,
        cap_rate("constraint_adherence"),
        cap_rate("correction_updating"),
        len(records),
        effect_sc("change"),
        effect_sc("preservation"),
    )


@dataclass
class RunScores:
    """A run's scores: per scenario, their macro-average, a bootstrap interval, coverage and settings."""

    label: str
    scenarios: dict[str, ScenarioScores]
    average: dict[str, float | None]
    """Macro-averages over the scenarios in `average_over` of every component."""
    interval: tuple[float, float] | None
    """Bootstrap 95 % interval of the benchmark score, resampling dialogues within scenarios
    (None when it would be degenerate: `interval_note` says why)."""
    coverage: dict[str, Any]
    failed_turn_share: float | None
    """Share of target turns with at least one failed check (the irreducibility audit, on the stateless agent)."""
    interval_note: str | None = None
    """Why there is no interval, e.g. ``n/a (2 dialogues in fusion)``."""
    average_over: list[str] = field(default_factory=list)
    """The scenarios the averages are over (fewer than four: a `--limit` below 4, or a scenario without valid items)."""
    path: str = ""
    model: str = ""
    """The model's name."""
    history: str = "gt"
    layout: str = "yes-first"
    bench_sha256: str = ""
    limit: int | None = None
    judge: str = ""
    """The scored judge and its version(s), e.g. ``exact v2``."""

    @property
    def interval_text(self) -> str:
        """The interval as a table prints it: ``lo-hi``, or the reason there is none."""
        if self.interval is None:
            return self.interval_note or "n/a"
        return f"{self.interval[0]:.2f}-{self.interval[1]:.2f}"

    @property
    def all_scenarios(self) -> bool:
        """Whether the averages cover every scenario."""
        return len(self.average_over) == len(SCENARIOS)


def _macro(values: list[float | None]) -> float | None:
    return (
        sum(v for v in values if v is not None) / len(values) if values and all(v is not None for v in values) else None
    )


def run_scores(run: Run, bootstrap: int = BOOTSTRAP) -> RunScores:
    """Every score of one run."""
    by = {s: [r for r in run.dialogues.values() if r.scenario == s] for s in SCENARIOS}
    present = [s for s in SCENARIOS if by[s]]
    per = {s: scenario_scores(by[s], run.answers) for s in present}
    keys = ("understanding", "sc", "vq", "scene", "constraint_keeping", "correction_updating", "sc_change",
            "sc_preservation")  # fmt: skip
    average: dict[str, float | None] = {k: _macro([getattr(per[s], k) for s in present]) for k in keys}
    for t in QTYPES:
        average[t] = _macro([per[s].dsu[t] for s in present])
    turns = sum(len(r.images) for r in run.dialogues.values())
    failed = sum(r.failed_turns for r in run.dialogues.values())
    coverage = {
        "expected": run.expected,
        "recorded": sum(run.statuses.values()),
        "valid": run.valid,
        "percent": run.coverage_percent,
        "statuses": dict(sorted(run.statuses.items())),
        "unjudged": run.unjudged,
        "calls_per_item": round(run.calls / sum(run.statuses.values()), 3) if run.statuses else None,
        "strategy": run.setting("strategy") or "none",
    }
    interval, note = None, None
    if bootstrap:
        interval, note = _bootstrap({s: by[s] for s in present}, run.answers, bootstrap)
    return RunScores(
        run.label,
        per,
        average,
        interval,
        coverage,
        failed / turns if turns else None,
        interval_note=note,
        average_over=present,
        path=str(run.path),
        model=run.model_name,
        history=run.history,
        layout=run.layout,
        bench_sha256=run.bench_sha256,
        limit=run.limit,
        judge=run.judge_text,
    )


def _bootstrap(
    groups: dict[str, list[DialogueRecord]], answers: bool, n: int
) -> tuple[tuple[float, float] | None, str | None]:
    """95 % percentile interval of the macro-averaged scene score, resampling dialogues per scenario.

    Degenerate intervals are not returned as a range: with fewer than
    `MIN_INTERVAL_DIALOGUES` dialogues in a scenario, or when every resample gives the same
    score, the result is None with a note saying which.
    """
    if not groups:
        return None, "n/a (no valid item)"
    few = {s: len(g) for s, g in groups.items() if len(g) < MIN_INTERVAL_DIALOGUES}
    if few:
        s, k = min(few.items(), key=lambda kv: kv[1])
        return None, f"n/a ({k} dialogue{'s' if k != 1 else ''} in {s})"
    rng = np.random.default_rng(42)
    samples = np.zeros(n)
    for records in groups.values():
        k = len(records)
        # per dialogue sums: DSU (score, count) per type, SC (sum, count) and VQ (sum, count)
        cols = []
        for t in QTYPES:
            cols += [[r.dsu.get(t, 0.0) for r in records], [float(t in r.dsu) for r in records]]
        cols += [
            [sum(s for s, _ in r.images.values() if s is not None) for r in records],
            [float(sum(s is not None for s, _ in r.images.values())) for r in records],
            [sum(q for _, q in r.images.values() if q is not None) for r in records],
            [float(sum(q is not None for _, q in r.images.values())) for r in records],
        ]
        table = np.array(cols)  # (C, k)
        idx = rng.integers(0, k, size=(n, k))
        sums = table[:, idx].sum(axis=2)  # (C, n)
        with np.errstate(invalid="ignore", divide="ignore"):
            dsu = np.stack([sums[2 * j] / sums[2 * j + 1] for j in range(4)]) * 100
            sc = sums[8] / sums[9] * 100
            vq = sums[10] / sums[11] * 10
            scene = scene_score(dsu.mean(axis=0), sc, vq) if answers else generation_score(sc, vq)
        samples += scene / len(groups)
    samples = samples[np.isfinite(samples)]
    if not len(samples):
        return None, "n/a (a component has no valid item)"
    lo, hi = float(np.percentile(samples, 2.5)), float(np.percentile(samples, 97.5))
    if float(samples.min()) == float(samples.max()):
        return None, f"n/a (every resample gives {lo:.2f})"
    return (lo, hi), None


# Analyses across runs ----------------------------------------------------------------


def understanding_realization_gap(runs: list[Run]) -> dict[str, Any]:
    """Equations (4)-(7) over the runs that answer questions: per capability and overall.

    ``gap`` is keyed by label; runs that share a label (not named apart by `label_runs`)
    get ``#2``, ``#3``… so that no run's gap is lost.
    """
    models = [r for r in runs if r.answers]
    labels = _distinct([r.label for r in models])
    out: dict[str, Any] = {"models": labels, "eligible": {}, "gap": {}}
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
        for label, r in zip(labels, models, strict=True):
            per_d = []
            for d in eligible:
                rec = r.dialogues[d]
                ys = [rec.checks[a][1] for a in rec.aligned[qtype] if a in rec.checks]
                per_d.append(sum(ys) / len(ys))  # equation (5)
            realization = sum(per_d) / len(per_d) if per_d else None  # equation (6)
            out["gap"].setdefault(label, {})[cap] = None if realization is None else 1 - realization  # (7)
    for gaps in out["gap"].values():
        vals = [gaps.get(c) for c in GAP_CAPABILITIES.values()]
        gaps["overall"] = (
            sum(v for v in vals if v is not None) / len(vals) if all(v is not None for v in vals) else None
        )
    return out


def _distinct(labels: list[str]) -> list[str]:
    """The labels, with ``#2``, ``#3``… added to repeats."""
    out: list[str] = []
    for lab in labels:
        name, k = lab, 1
        while name in out:
            k += 1
            name = f"{lab} #{k}"
        out.append(name)
    return out


def progression(run: Run) -> dict[str, float | int | None]:
    """First vs last generation turn (0.6 SC + 0.4 VQ) on dialogues with at least two such turns
    (turns whose image has both an SC and a VQ)."""
    first, last = [], []
    for rec in run.dialogues.values():
        scored = {t: image_generation_score(*rec.images[t]) for t in sorted(rec.images)}
        values = [v for v in scored.values() if v is not None]
        if len(values) >= 2:
            first.append(values[0])
            last.append(values[-1])
    f, lst = _mean(first), _mean(last)
    return {"dialogues": len(first), "first": f, "last": lst, "delta": None if f is None or lst is None else lst - f}


def history_effect(gt: Run, self_: Run) -> dict[str, float | int | None]:
    """Self- vs GT-History on the dialogues of the Self-History run: generation score 0.6 SC + 0.4 VQ.

    ``drop_points`` is the absolute drop GT - Self on 0-100 (the scale of the paper's tables);
    ``drop_percent`` the same drop relative to GT (100 (GT - Self) / GT).
    """

    def score(run: Run, ids: set[str]) -> float | None:
        vals = [
            v
            for d in ids
            if d in run.dialogues
            for sc, vq in run.dialogues[d].images.values()
            if (v := image_generation_score(sc, vq)) is not None
        ]
        return _mean(vals)

    ids = {d for d, rec in self_.dialogues.items() if rec.images} & set(gt.dialogues)
    g, s = score(gt, ids), score(self_, ids)
    points = None if g is None or s is None else g - s
    drop = None if g in (None, 0) or s is None else 100 * (g - s) / g  # type: ignore[operator]
    return {"dialogues": len(ids), "gt": g, "self": s, "drop_points": points, "drop_percent": drop}


def pair_histories(runs: list[Run]) -> list[tuple[Run, Run]]:
    """(GT-History run, Self-History run) pairs of the same model, layout, bench and judge."""
    out = []
    for s in runs:
        if s.history != "self":
            continue
        for g in runs:
            if g.history == "gt" and (g.model_spec, g.layout, g.bench_sha256, g.judge_text) == (
                s.model_spec,
                s.layout,
                s.bench_sha256,
                s.judge_text,
            ):
                out.append((g, s))
                break
    return out
