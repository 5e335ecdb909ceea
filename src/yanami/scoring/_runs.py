"""Run directories, loaded: each dialogue's valid records, the run's settings and its label.

A `Run` is what every score and analysis reads (`yanami.scoring._scores`,
`yanami.scoring._analyses`): the per-item records of one run directory, valid ones only
(refused, error, missing or unjudged records are counted, not kept), and its manifest.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yanami.contract import FACTS, Prediction, RunManifest, UserError, Verdict, read_rows
from yanami.scoring._weights import image_sc

SCENARIOS = tuple(s.value for s in FACTS)
SCENARIO_TITLES = {s.value: f.title for s, f in FACTS.items()}
SHORT = {s.value: f.short for s, f in FACTS.items()}
"""Each scenario's name wherever one is printed: the paper's column heading (``Modeling``, never
``world_modeling``), in every table, note and form of the report (terminal, Markdown, LaTeX, HTML)."""
QTYPES = ("RR", "CR", "CT", "CU")
EFFECTS = ("change", "preservation")
"""What an atomic check tests: what the turn changes (or the history requires), or what stays."""


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

    extras: tuple[Callable[[Run], str], ...] = (lambda r: r.model_spec, lambda r: r.path.name or str(r.path))
    for extra in extras:
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
