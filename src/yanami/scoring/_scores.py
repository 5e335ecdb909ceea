"""The paper's scores, read from run directories: equations (1)-(7) and the analyses.

Every function here is plain arithmetic over per-item records; records that are not
valid (refused, error, missing, or never judged) are excluded and counted as coverage.
State Consistency of a target image is passed / total over its atomic checks; a
scenario's SC is the mean over its target images, and its DSU type score the mean over
its questions of that type. The weights live in `yanami.scoring._weights`; the choices
made where a value is missing are listed in docs/evaluation.md ("Scoring choices").
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from yanami.contract import FACTS, Prediction, RunManifest, UserError, Verdict, read_rows
from yanami.scoring._floor import Floor, above_floor, bench_facts, floor_of
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
MIN_COVERAGE = 0.95
"""Below this share of valid items, a run's benchmark score (Avg.) and its interval are withheld."""
GAP_MIN_UNDERSTANDING = 50.0
"""A run enters the understanding-realization gap's shared subset only if its S_understanding
(0-100, averaged over scenarios) is at least this: a run below it answers mostly by chance,
and equation (4) would leave its lucky guesses to decide the subset (see `gap_selection`)."""
PRIVILEGED_NOTE = "reads the bench: not a model result"
"""What a privileged run's mark says: the runner handed the model the bench (hidden annotations and all)."""


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
    undecidable: int = 0
    """Checks undecidable for this model (under Self-History, made ill-posed by its own
    admissible earlier choices): left out of every score, counted here."""
    invalid_questions: set[str] = field(default_factory=set)
    """Question types whose question has no valid record (refused, error, missing or unjudged)."""
    invalid_turns: set[int] = field(default_factory=set)
    """Target turns without a valid record."""


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
        shown = [v if not v[:1].isdigit() else f"v{v}" for v in versions if v]  # "vlm-v3" stays, "2" is v2
        return self.judge + (" " + "+".join(shown) if shown else "")

    @property
    def answers(self) -> bool:
        """Whether DSU is scored (equation 2) or not (equation 3)."""
        return bool(self.setting("answers"))

    @property
    def privileged(self) -> bool:
        """Whether the model read the bench (the manifest's ``privileged``): its scores are not a model result.

        A run of format 3 or older did not record it: for yanami's own reference agents it is
        asked again of the agent the spec names (`privileged_spec`); other old runs read as False.
        """
        v = self.setting("privileged")
        return privileged_spec(self.model_spec, self.setting("model_settings")) if v is None else bool(v)

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
            incomplete = sum(self.statuses.values()) < self.expected  # items not run yet, not items that failed
            extra.append(f"{self.coverage_percent} % coverage" + (", incomplete" if incomplete else ""))
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


def privileged_spec(spec: str, settings: dict[str, Any] | None = None) -> bool:
    """Whether the reference agent a run's spec (or config) names reads the bench, asked of the agent
    itself by the runner's own test (`yanami.models.reads_bench`); False for any other model.

    Only for runs that did not record ``privileged`` (run format 3 and older). Only yanami's own
    ``reference`` kind is rebuilt here (cheaply, without a bench); a plug-in is never loaded for it.
    """
    from yanami.models import looks_like_config

    if settings and settings.get("kind") == "reference":
        agent = str(settings.get("agent") or "")
    else:
        kind, _, agent = spec.partition(":")
        if looks_like_config(spec) or kind != "reference":
            return False
    return _reference_reads_bench(agent)


@functools.cache
def _reference_reads_bench(agent: str) -> bool:
    from yanami.models import ENTRY_POINTS, load_plugin, reads_bench

    try:
        return reads_bench(load_plugin(ENTRY_POINTS, "--model", f"reference:{agent}", "reference", agent))
    except UserError:
        return False


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
        valid = p.status == "ok" and v is not None and v.status == "ok"
        if not valid:
            if p.kind == "question" and p.qtype is not None:
                rec.invalid_questions.add(p.qtype)
            elif p.kind == "turn":
                rec.invalid_turns.add(p.turn)
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
            # a check undecidable for this model (passed None, no score) is left out and counted
            checks = [c for c in v.checks or [] if c.passed is not None or c.score is not None]
            rec.undecidable += len(v.checks or []) - len(checks)
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


@dataclass
class GapSelection:
    """The runs the understanding-realization gap is over (Table 21, Figure 6 a), and those left out."""

    runs: list[Run]
    left_out: list[tuple[Run, str]]
    """(run, why it is not in the set)."""

    def notes(self) -> list[str]:
        """What the set is, in words: the runs it is over and, apart, those left out and why."""
        over = ", ".join(r.label for r in self.runs) or "no run"
        lines = [f"Over {len(self.runs)} run{'s' if len(self.runs) != 1 else ''}: {over}."]
        if self.left_out:
            lines.append("Left out: " + "; ".join(f"{r.label} [{why}]" for r, why in self.left_out) + ".")
        return lines


def run_understanding(run: Run) -> float | None:
    """A run's S_understanding (equation 1), averaged over its scenarios (None: not every type answered)."""
    by = {s: [r for r in run.dialogues.values() if r.scenario == s] for s in SCENARIOS}
    return _macro([scenario_scores(g, run.answers).understanding for g in by.values() if g])


def gap_selection(runs: list[Run]) -> GapSelection:
    """Which runs form the gap's shared subset (equation 4): the one place that decides, for the
    terminal's Table 21, the report's Table 21 and Figure 6 (a), and ``score --json``.

    A run is in the set when it is a GT-History run that answers questions and understands at
    least `GAP_MIN_UNDERSTANDING` (S_understanding on 0-100). The subset holds the dialogues
    *every* run of the set understood, so a run that answers by chance (the trivial floor, a
    stateless reader) would leave its lucky guesses to decide it: with two guessing runs in the
    set, about one dialogue in sixteen would remain.
    """
    chosen: list[Run] = []
    left: list[tuple[Run, str]] = []
    for r in runs:
        if r.history != "gt":
            left.append((r, "not GT-History"))
            continue
        if not r.answers:
            left.append((r, "answers no questions"))
            continue
        u = run_understanding(r)
        if u is None:
            left.append((r, "no understanding score: a question type without a valid answer"))
        elif u < GAP_MIN_UNDERSTANDING:
            left.append((r, f"understanding {u:.2f} < {GAP_MIN_UNDERSTANDING:g}, mostly chance"))
        else:
            chosen.append(r)
    return GapSelection(chosen, left)


def shared_gap(runs: list[Run]) -> dict[str, Any]:
    """The understanding-realization gap over `gap_selection`'s runs: `understanding_realization_gap`'s
    result plus ``left_out`` (label -> why) and ``notes`` (the set in words)."""
    selection = gap_selection(runs)
    out = understanding_realization_gap(selection.runs)
    out["left_out"] = {r.label: why for r, why in selection.left_out}
    out["notes"] = selection.notes()
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
