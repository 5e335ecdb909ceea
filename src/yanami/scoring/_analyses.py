"""Analyses across the runs of a set: the understanding-realization gap (equations 4-7) over the
runs `gap_selection` chooses, first vs last generation turn, and GT- against Self-History."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from yanami.scoring._runs import SCENARIOS, Run, _distinct
from yanami.scoring._scores import _macro, _mean, scenario_scores
from yanami.scoring._weights import image_generation_score

GAP_CAPABILITIES = {"CT": "constraint_adherence", "CU": "correction_updating"}
"""Understanding question type -> the capability-specific checks aligned with it."""
GAP_MIN_UNDERSTANDING = 50.0
"""A run enters the understanding-realization gap's shared subset only if its S_understanding
(0-100, averaged over scenarios) is at least this: a run below it answers mostly by chance,
and equation (4) would leave its lucky guesses to decide the subset (see `gap_selection`)."""


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


@dataclass(frozen=True)
class Progression:
    """First vs last generation turn of one run (Table 20, Figure 6 b)."""

    dialogues: int
    """Dialogues with at least two generation turns that have both an SC and a VQ."""
    first: float | None
    last: float | None
    delta: float | None

    def as_dict(self) -> dict[str, float | int | None]:
        """As `progression` gives it (``score --json``)."""
        return {"dialogues": self.dialogues, "first": self.first, "last": self.last, "delta": self.delta}


def progression_of(run: Run) -> Progression:
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
    return Progression(len(first), f, lst, None if f is None or lst is None else lst - f)


def progression(run: Run) -> dict[str, float | int | None]:
    """`progression_of` as a dict: ``dialogues``, ``first``, ``last``, ``delta``."""
    return progression_of(run).as_dict()


@dataclass(frozen=True)
class HistoryEffect:
    """GT- against Self-History of one model on the Self-History run's dialogues (generation score)."""

    dialogues: int
    gt: float | None
    self_: float | None
    drop_points: float | None
    """GT - Self on 0-100 (the scale of the paper's tables)."""
    drop_percent: float | None
    """The same drop relative to GT: 100 (GT - Self) / GT."""

    def as_dict(self) -> dict[str, float | int | None]:
        """As `history_effect` gives it (``score --json``)."""
        return {
            "dialogues": self.dialogues,
            "gt": self.gt,
            "self": self.self_,
            "drop_points": self.drop_points,
            "drop_percent": self.drop_percent,
        }


def history_effect_of(gt: Run, self_: Run) -> HistoryEffect:
    """Self- vs GT-History on the dialogues of the Self-History run: generation score 0.6 SC + 0.4 VQ."""

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
    drop = None if g is None or g == 0 or s is None else 100 * (g - s) / g
    return HistoryEffect(len(ids), g, s, points, drop)


def history_effect(gt: Run, self_: Run) -> dict[str, float | int | None]:
    """Self- vs GT-History on the dialogues of the Self-History run: generation score 0.6 SC + 0.4 VQ.

    ``drop_points`` is the absolute drop GT - Self on 0-100 (the scale of the paper's tables);
    ``drop_percent`` the same drop relative to GT (100 (GT - Self) / GT).
    """
    return history_effect_of(gt, self_).as_dict()


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
