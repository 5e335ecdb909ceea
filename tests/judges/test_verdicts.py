"""`question_for`: a dialogue's questions indexed once, not scanned per item."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from yanami.contract import Dialogue, Output, Question
from yanami.judges import JudgeError
from yanami.judges._verdicts import _QUESTIONS, question_for


class _Counted(list[Any]):
    """A question list that counts how often it is walked."""

    walks = 0

    def __iter__(self) -> Any:
        type(self).walks += 1
        return super().__iter__()


def _dialogue(did: str, n: int, text: str = "Which?") -> Dialogue:
    """``n`` questions q0 … q(n-2), and q0 once more last."""
    ids = [f"q{i}" for i in range(n - 1)] + ["q0"]
    questions = _Counted(Question.model_construct(id=qid, text=f"{text} {i}") for i, qid in enumerate(ids))
    return Dialogue.model_construct(id=did, questions=questions)


def _ask(d: Dialogue, qid: str) -> Question:
    return question_for(d, Output(item=f"{d.id}/{qid}", kind="question", turn=0))


def test_questions_are_indexed_once_per_dialogue() -> None:
    _Counted.walks = 0
    d = _dialogue("long", 2000)
    got = [_ask(d, f"q{i}").text for i in range(1999)]
    assert got == [f"Which? {i}" for i in range(1999)]  # q0 is asked twice: the first one wins
    assert _Counted.walks == 1
    with pytest.raises(JudgeError, match=r"long/q5000: dialogue long has no question 'q5000'"):
        _ask(d, "q5000")


def test_a_later_dialogue_never_gets_an_earlier_ones_questions() -> None:
    for k in range(50):  # a freed dialogue's id() is often reused by the next one
        d = _dialogue("d", 3, text=f"round {k}")
        assert _ask(d, "q1").text == f"round {k} 1"
        key = id(d)
        assert key in _QUESTIONS
        del d
        gc.collect()
        assert key not in _QUESTIONS  # a dialogue's index goes with it
