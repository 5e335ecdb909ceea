"""The paper's scores of one run, read from its records: equations (1)-(3), coverage and the interval.

Every function here is plain arithmetic over per-item records; records that are not
valid (refused, error, missing, or never judged) are excluded and counted as coverage.
State Consistency of a target image is passed / total over its atomic checks; a
scenario's SC is the mean over its target images, and its DSU type score the mean over
its questions of that type. The weights live in `yanami.scoring._weights`; the choices
made where a value is missing are listed in docs/evaluation.md ("Scoring choices").
The analyses across runs (equations 4-7, first vs last turn, the history effect) are in
`yanami.scoring._analyses`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from yanami.scoring._floor import Floor, above_floor, bench_facts, floor_of
from yanami.scoring._runs import QTYPES, SCENARIOS, SHORT, DialogueRecord, Run
from yanami.scoring._runs import SCENARIO_TITLES as SCENARIO_TITLES
from yanami.scoring._runs import build_run as build_run
from yanami.scoring._runs import load_run as load_run
from yanami.scoring._weights import generation_score, scene_score

BOOTSTRAP = 1000
MIN_INTERVAL_DIALOGUES = 5
"""Fewer dialogues than this in a scenario: no bootstrap interval (it would be a few resample values)."""
MIN_COVERAGE = 0.95
"""Below this share of valid items, a run's benchmark score (Avg.) and its interval are withheld."""
PRIVILEGED_NOTE = "reads the bench: not a model result"
"""What a privileged run's mark says: the runner handed the model the bench (hidden annotations and all)."""


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
    """Why there is no interval, e.g. ``n/a (2 dialogues in Fusion)`` (the scenario as its column is headed)."""
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
    privileged: bool = False
    """Whether the model read the bench (`Run.privileged`): its scores are not a model result."""
    withheld: str | None = None
    """Why the benchmark score (``average["scene"]``) and its interval are withheld, e.g.
    ``n/a, coverage 83 %`` (coverage under `MIN_COVERAGE`); None when they are shown."""
    failures_as_zero: float | None = None
    """The benchmark score with every item that has no valid record (refused, error, missing,
    unjudged) counted as 0, over the scenarios the run has items in (None: see its note)."""
    failures_as_zero_note: str | None = None
    """Why there is no failures-as-zero score, e.g. ``n/a, 12 items not run``."""
    bench: str = ""
    """Whether the bench is public (anyone can rebuild it: a model may have seen it) or private, in words."""
    floor: Floor | None = None
    """The bench's floor: the best trivial strategy over this run's scenarios, scored as this run
    is (`yanami.scoring._floor`); None where the bench records no floors."""
    above_floor: float | None = None
    """``(score - floor) / (100 - floor)`` on 0-100: how far the run is from the floor to a perfect score."""

    @property
    def average_text(self) -> str | float | None:
        """The benchmark score as a table prints it: the number, ``62.50 (2/4 scen.)`` over fewer
        scenarios than all, or why it is withheld (``n/a, coverage 83 %``)."""
        if self.withheld is not None:
            return self.withheld
        return self._over_scenarios(self.average["scene"])

    @property
    def failures_as_zero_text(self) -> str | float | None:
        """The failures-as-zero score as a table prints it (like `average_text`)."""
        if self.failures_as_zero is None and self.failures_as_zero_note is not None:
            return self.failures_as_zero_note
        return self._over_scenarios(self.failures_as_zero)

    def _over_scenarios(self, v: float | None) -> str | float | None:
        if v is None or self.all_scenarios:
            return v
        return f"{v:.2f} ({len(self.average_over)}/{len(SCENARIOS)} scen.)"

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
        "undecidable_checks": sum(r.undecidable for r in run.dialogues.values()),
        "calls_per_item": round(run.calls / sum(run.statuses.values()), 3) if run.statuses else None,
        "strategy": run.setting("strategy") or "none",
    }
    interval, note = None, None
    withheld = None
    if run.expected > 0 and run.valid < MIN_COVERAGE * run.expected:
        withheld = f"n/a, coverage {run.coverage_percent} %"
        average["scene"], note = None, withheld
    elif bootstrap:
        interval, note = _bootstrap({s: by[s] for s in present}, run.answers, bootstrap)
    unrun = run.expected - sum(run.statuses.values())
    zero, zero_note = None, None
    if unrun > 0:
        zero_note = f"n/a, {unrun} item{'s' if unrun != 1 else ''} not run"
    else:
        zero = _macro([failures_as_zero(by[s], run.answers) for s in present])
    facts = bench_facts(run.bench_path or "", run.bench_sha256)
    floor = floor_of(facts, present, run.answers)
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
        privileged=run.privileged,
        withheld=withheld,
        failures_as_zero=zero,
        failures_as_zero_note=zero_note,
        bench=facts.line,
        floor=floor,
        above_floor=above_floor(average["scene"], floor.score if floor else None),
    )


def failures_as_zero(records: list[DialogueRecord], answers: bool) -> float | None:
    """A scenario's scene score (equations 1-3) with every item that has no valid record counted as
    0: a question as score 0, a target turn as SC 0 and VQ 0. A run cannot raise it by refusing."""
    dsu = {
        t: _mean([100 * r.dsu.get(t, 0.0) for r in records if t in r.dsu or t in r.invalid_questions]) for t in QTYPES
    }
    understanding = None
    if answers and all(v is not None for v in dsu.values()):
        understanding = sum(v for v in dsu.values() if v is not None) / 4
    sc = _mean([s * 100 for r in records for s, _ in r.images.values() if s is not None]
               + [0.0 for r in records for _ in r.invalid_turns])  # fmt: skip
    vq = _mean([q * 10 for r in records for _, q in r.images.values() if q is not None]
               + [0.0 for r in records for _ in r.invalid_turns])  # fmt: skip
    if sc is None or vq is None or (answers and understanding is None):
        return None
    return scene_score(understanding, sc, vq)


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
        return None, f"n/a ({k} dialogue{'s' if k != 1 else ''} in {SHORT.get(s, s)})"
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
