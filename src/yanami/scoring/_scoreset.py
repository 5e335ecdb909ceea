"""One value holding every score a report of YANAMI runs shows: `ScoreSet`, computed once.

``yanami score`` and ``yanami report`` load the runs (`yanami.scoring.load_runs`), compute
their `ScoreSet` here (`score_set`), build the tables from it (`yanami.scoring._tables`) and
render (`yanami.scoring._report`); nothing after this step computes a score.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from yanami.scoring._analyses import (
    HistoryEffect,
    Progression,
    history_effect_of,
    pair_histories,
    progression_of,
    shared_gap,
)
from yanami.scoring._compare import PRIVILEGED_MARK, caveats, warnings
from yanami.scoring._runs import Run, label_runs
from yanami.scoring._scores import PRIVILEGED_NOTE, RunScores


@dataclass(frozen=True)
class RunFacts:
    """What the report says of a run beside its scores: its settings and coverage, in its own words."""

    label: str
    shown: str
    """The label as figures show it: with `PRIVILEGED_MARK` for a run that read the bench."""
    path: str
    bench_path: str | None
    bench_sha256: str
    limit: int | None
    valid: int
    expected: int
    coverage_percent: int
    history: str
    layout: str
    judge: str
    """The scored judge with its version(s), e.g. ``exact v2``."""
    yanami_version: str
    model_spec: str
    answers: bool
    privileged: bool

    @classmethod
    def of(cls, r: Run) -> RunFacts:
        return cls(
            label=r.label,
            shown=f"{r.label} {PRIVILEGED_MARK}" if r.privileged else r.label,
            path=str(r.path),
            bench_path=r.bench_path,
            bench_sha256=r.bench_sha256,
            limit=r.limit,
            valid=r.valid,
            expected=r.expected,
            coverage_percent=r.coverage_percent,
            history=r.history,
            layout=r.layout,
            judge=r.judge_text,
            yanami_version=f"{r.setting('yanami_version') or '-'}",
            model_spec=r.model_spec,
            answers=r.answers,
            privileged=r.privileged,
        )


@dataclass(frozen=True)
class Gap:
    """The understanding-realization gap (equations 4-7) over the runs `gap_selection` chose."""

    models: list[str]
    """The labels of the runs it is over (named apart with ``#2``… if two share a label)."""
    eligible: dict[str, int]
    """Capability -> dialogues in the shared subset."""
    gap: dict[str, dict[str, float | None]]
    """Label -> capability (and ``overall``) -> gap, 0-1."""
    left_out: dict[str, str]
    """Label -> why the run is not in the set."""
    notes: list[str]
    """The set in words (`GapSelection.notes`)."""

    def as_json(self) -> dict[str, object]:
        return {
            "models": self.models,
            "eligible": self.eligible,
            "gap": self.gap,
            "left_out": self.left_out,
            "notes": self.notes,
        }


@dataclass(frozen=True)
class RunProgression:
    """A GT-History run's first vs last generation turn (Table 20, Figure 6 b)."""

    run: RunFacts
    figures: Progression


@dataclass(frozen=True)
class HistoryPair:
    """A model's GT-History run against its Self-History run (the History effect table, Figure 6 c)."""

    gt: RunFacts
    self_: RunFacts
    effect: HistoryEffect


@dataclass(frozen=True)
class Analyses:
    """What is computed across the runs of a set rather than per run."""

    gap: Gap
    progression: list[RunProgression]
    """One per GT-History run, in the set's order."""
    history: list[HistoryPair]


@dataclass(frozen=True)
class ScoreSet:
    """Every score of a set of runs that a table, a figure or ``score --json`` shows."""

    runs: list[RunFacts]
    scores: list[RunScores]
    """Per run, in the same order as `runs`."""
    warnings: list[str]
    """Why rows are not comparable, one line per kind of difference (empty: all are)."""
    comparability: dict[str, list[str]]
    """Label -> why that run's row is not comparable with the others of the set."""
    analyses: Analyses
    audit: list[tuple[str, float]]
    """The irreducibility audit: (label, share of target turns failed, %) per stateless run."""

    def as_json(self) -> dict[str, object]:
        """Every score and analysis as JSON-ready data (``yanami score --json``)."""
        a = self.analyses
        return {
            "runs": [dataclasses.asdict(s) for s in self.scores],
            "gap": a.gap.as_json(),
            "progression": {p.run.label: p.figures.as_dict() for p in a.progression},
            "history_effect": {h.gt.label: h.effect.as_dict() for h in a.history},
            "comparability": {
                "warnings": self.warnings,
                "rows": self.comparability,
                "privileged": {s.label: PRIVILEGED_NOTE for s in self.scores if s.privileged},
            },
        }


def analyses(runs: list[Run], facts: list[RunFacts] | None = None) -> Analyses:
    """The analyses across ``runs``: the gap over `gap_selection`'s set, each GT-History run's
    progression, and each GT- against Self-History pair (``facts``: the runs' `RunFacts`, if made)."""
    by = {id(r): f for r, f in zip(runs, facts or [RunFacts.of(r) for r in runs], strict=True)}
    gap = shared_gap(runs)
    return Analyses(
        Gap(list(gap["models"]), dict(gap["eligible"]), dict(gap["gap"]), dict(gap["left_out"]), list(gap["notes"])),
        [RunProgression(by[id(r)], progression_of(r)) for r in runs if r.history == "gt"],
        [HistoryPair(by[id(g)], by[id(s)], history_effect_of(g, s)) for g, s in pair_histories(runs)],
    )


def irreducibility(runs: list[Run], scores: list[RunScores]) -> list[tuple[str, float]]:
    """The irreducibility audit: share (%) of target turns the stateless agent fails, per stateless run."""
    return [
        (s.label, 100 * s.failed_turn_share)
        for r, s in zip(runs, scores, strict=True)
        if r.model_spec == "reference:stateless" and s.failed_turn_share is not None
    ]


def ensure_labels(runs: list[Run], scores: list[RunScores]) -> None:
    """Name the runs apart if their labels collide (callers that did not use `load_runs`)."""
    if len({s.label for s in scores}) < len(scores):
        label_runs(runs)
        for r, s in zip(runs, scores, strict=True):
            s.label = r.label


def score_set(runs: list[Run], scores: list[RunScores], warned: list[str] | None = None) -> ScoreSet:
    """The `ScoreSet` of runs and their scores (`run_scores`, in the same order): the one place a
    report's scores are computed. ``warned``: the comparability warnings, if the loader made them."""
    ensure_labels(runs, scores)
    facts = [RunFacts.of(r) for r in runs]
    return ScoreSet(
        facts,
        list(scores),
        warnings(scores) if warned is None else list(warned),
        caveats(scores),
        analyses(runs, facts),
        irreducibility(runs, scores),
    )
