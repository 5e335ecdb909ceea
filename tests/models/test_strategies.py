"""Test-time strategies: what each asks the model, how many calls it takes, what it returns."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from yanami.contract import InputMessage, InputText, Request, UserError
from yanami.models._strategies import StrategyModel, final_answer, parse_strategy
from yanami.models.fake import plain_png

PICTURES = [plain_png(colour=(10 * k, 0, 0)) for k in range(8)]


class Scripted:
    """A model whose replies are scripted; it records every request."""

    name = "scripted"

    def __init__(self, verdicts: list[dict[str, Any]] | None = None, best: int = 1, answers: bool = True) -> None:
        self.asked: list[Request] = []
        self.drawn: list[Request] = []
        self.verdicts = list(verdicts or [])
        self.best = best
        self.answer = self._answer if answers else None
        self.generate = self._generate

    def _answer(self, r: Request) -> str:
        self.asked.append(r)
        text = " ".join(p.text for m in r.messages for p in m.parts if isinstance(p, InputText))
        if "acceptable" in text:
            return json.dumps(self.verdicts.pop(0))
        if "candidate answers" in text:
            return json.dumps({"best": self.best, "reason": "closest"})
        if "plan" in text:
            return "Make the lamp red; keep the sofa."
        return "Because the lamp was red in turn 2.\nAnswer: B"

    def _generate(self, r: Request) -> bytes:
        self.drawn.append(r)
        return PICTURES[len(self.drawn) - 1]


def request() -> Request:
    return Request("d1/t2", (InputMessage("user", (InputText("Now make the lamp red."),)),), seed=7, size=(512, 512))


def last_text(r: Request) -> str:
    return " ".join(p.text for p in r.messages[-1].parts if isinstance(p, InputText))


def test_cot_plans_before_drawing_and_reasons_before_answering() -> None:
    inner = Scripted()
    m = StrategyModel(inner, parse_strategy("cot"))
    assert m.generate is not None and m.answer is not None
    assert m.generate(request()) == PICTURES[0] and m.calls("d1/t2") == 2
    assert "Plan: Make the lamp red; keep the sofa." in last_text(inner.drawn[0])
    assert m.answer(request()) == "B" and m.calls("d1/t2") == 1
    assert final_answer("no marker here") == "no marker here"


def test_self_verify_redraws_with_its_own_feedback_up_to_n_rounds() -> None:
    inner = Scripted(verdicts=[{"acceptable": False, "feedback": "the lamp is still blue"}, {"acceptable": True}])
    m = StrategyModel(inner, parse_strategy("self-verify:3"))
    assert m.generate is not None
    assert m.generate(request()) == PICTURES[1]  # the accepted second draft
    assert m.calls("d1/t2") == 4  # draw, check, draw, check
    assert "Feedback on an earlier draft: the lamp is still blue" in last_text(inner.drawn[1])
    assert "feedback" not in last_text(inner.drawn[0]).lower()
    always_wrong = Scripted(verdicts=[{"acceptable": False, "feedback": "no"}] * 2)
    m = StrategyModel(always_wrong, parse_strategy("self-verify:2"))
    assert m.generate is not None and m.generate(request()) == PICTURES[1] and m.calls("d1/t2") == 4  # the last


def test_best_of_draws_n_with_their_own_seeds_and_keeps_the_pick() -> None:
    inner = Scripted(best=3)
    m = StrategyModel(inner, parse_strategy("best-of:3"))
    assert m.generate is not None
    assert m.generate(request()) == PICTURES[2] and m.calls("d1/t2") == 4
    seeds = [r.seed for r in inner.drawn]
    assert seeds[0] == 7 and len(set(seeds)) == 3
    again = Scripted(best=3)
    assert StrategyModel(again, parse_strategy("best-of:3")).generate(request()) == PICTURES[2]  # type: ignore[misc]
    assert [r.seed for r in again.drawn] == seeds  # the same item draws the same candidates
    # another item draws with the very same seeds: they follow the run's seed and the candidate's
    # number, never the item (issue 33: nothing outside the conversation varies with the item)
    other = Scripted(best=3)
    StrategyModel(other, parse_strategy("best-of:3")).generate(replace(request(), item="d9/t5"))  # type: ignore[misc]
    assert [r.seed for r in other.drawn] == seeds
    unseeded = Scripted(best=3)
    StrategyModel(unseeded, parse_strategy("best-of:3")).generate(replace(request(), seed=None))  # type: ignore[misc]
    drawn = [r.seed for r in unseeded.drawn]
    assert drawn[0] is None and len(set(drawn[1:])) == 2 and None not in drawn[1:]


@pytest.mark.parametrize("bad", ["best-of", "best-of:0", "self-verify:99", "beam:4", "cot:2"])
def test_a_bad_strategy_is_one_line(bad: str) -> None:
    with pytest.raises(UserError, match=f"--strategy {bad}"):
        parse_strategy(bad)


def test_a_model_that_cannot_answer_cannot_check_its_own_images() -> None:
    with pytest.raises(UserError, match="cannot answer"):
        StrategyModel(Scripted(answers=False), parse_strategy("self-verify:2"))
    assert parse_strategy("best-of:4@judge.yaml").picker == "judge.yaml"
