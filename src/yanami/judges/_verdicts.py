"""From a judge's grading to the run format's `Verdict`: what the exact and the VLM judge share."""

from __future__ import annotations

import weakref

from yanami.contract import AnswerVerdict, CheckResult, Dialogue, ImageVerdict, JudgeError, Output, Question, Verdict


def question_for(d: Dialogue, output: Output) -> Question:
    """The DSU question a ``question`` item asks (its id is the item id's last part).

    The dialogue's questions are indexed by id once per dialogue (`_questions_of`), not
    scanned per item: a dialogue of 10,000 questions is graded at a steady rate.
    """
    qid = output.item.rpartition("/")[2]
    q = _questions_of(d).get(qid)
    if q is None:
        raise JudgeError(f"{output.item}: dialogue {d.id} has no question {qid!r}")
    return q


_QUESTIONS: dict[int, tuple[weakref.ref[Dialogue], dict[str, Question]]] = {}
"""Each live dialogue's questions by id, keyed by the dialogue object's ``id()`` (its entry
goes when the dialogue does, so an id is never mistaken for a later object's)."""


def _questions_of(d: Dialogue) -> dict[str, Question]:
    """``d``'s questions by id (the first of an id wins), built once while ``d`` lives.

    Judges grade from several threads: an entry is one tuple, set and read whole; two threads
    may build the same index at once, which costs time, never a wrong answer."""
    key = id(d)
    hit = _QUESTIONS.get(key)
    if hit is not None and hit[0]() is d:
        return hit[1]
    index: dict[str, Question] = {}
    for q in d.questions:
        index.setdefault(q.id, q)

    def forget(ref: weakref.ref[Dialogue]) -> None:
        if (entry := _QUESTIONS.get(key)) is not None and entry[0] is ref:
            _QUESTIONS.pop(key, None)

    _QUESTIONS[key] = (weakref.ref(d, forget), index)
    return index


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
            kind=str(c.kind),
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
