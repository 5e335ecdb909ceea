"""From a judge's grading to the run format's `Verdict`: what the exact and the VLM judge share."""

from __future__ import annotations

from yanami.models import AnswerVerdict, ImageVerdict, JudgeError, Output
from yanami.run_format import CheckResult, Verdict
from yanami.schema import Dialogue, Question


def question_for(d: Dialogue, output: Output) -> Question:
    """The DSU question a ``question`` item asks (its id is the item id's last part)."""
    qid = output.item.rpartition("/")[2]
    q = next((q for q in d.questions if q.id == qid), None)
    if q is None:
        raise JudgeError(f"{output.item}: dialogue {d.id} has no question {qid!r}")
    return q


def answer_verdict(name: str, version: str, output: Output, q: Question, v: AnswerVerdict) -> Verdict:
    """The verdict on a reply to question ``q``, with the capability checks it aligns with."""
    return Verdict(
        item=output.item,
        judge=name,
        judge_version=version,
        status="ok",
        score=v.score,
        aligned=list(q.aligned_checks),
        reason=v.reason,
    )


def image_verdict(name: str, version: str, d: Dialogue, output: Output, iv: ImageVerdict) -> Verdict:
    """The verdict on a candidate image: every check of the turn, with what it tests."""
    turn = d.turns[output.turn]
    checks = [
        CheckResult(
            id=c.id,
            kind=c.kind.value,
            capability=c.capability.value if c.capability else None,
            passed=None if iv.checks[c.id] is None else bool(iv.checks[c.id]),  # None: undecidable for this model
            effect=effect_of(c.hidden.predicate),
        )
        for c in turn.checks
    ]
    return Verdict(
        item=output.item, judge=name, judge_version=version, status="ok", vq=iv.vq, checks=checks, reason=iv.reason
    )


def effect_of(predicate: object) -> str | None:
    """What an atomic check tests, where its data says (world checks: ``"effect"`` in the predicate)."""
    effect = predicate.get("effect") if isinstance(predicate, dict) else None
    return effect if effect in ("change", "preservation") else None
