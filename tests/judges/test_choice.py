"""Grading replies: IMUG-Bench's option matching with format weights, and value matching."""

from __future__ import annotations

import pytest

from yanami.judges import choice_score, format_weight, normalize, value_score

CHOICES = ["red", "blue", "green", "yellow"]


@pytest.mark.parametrize(
    ("reply", "expected", "score"),
    [
        ("B", ["B"], 1.0),
        ("  B\n", ["B"], 1.0),
        ("B.", ["B"], 0.75),
        ("B) blue", ["B"], 0.75),
        ("Answer: B", ["B"], 0.75),
        ("B, because the user banned red in turn 2", ["B"], 0.5),
        ("A", ["B"], 0.0),
        ("A B", ["B"], 0.0),  # one right, one wrong: max(0, (1 - 1) / 1)
        ("AB", ["A", "B"], 1.0),
        ("A", ["A", "B"], 0.5),
        ("A, B", ["A", "B"], 0.75),
        ("blue", ["B"], 0.0),  # no option letter at all
        ("", ["B"], 0.0),
        ("Option B is correct", ["B"], 0.75),
    ],
)
def test_choice_score(reply: str, expected: list[str], score: float) -> None:
    assert choice_score(reply, expected, CHOICES)[0] == pytest.approx(score)


def test_format_weight_ignores_the_options_own_text() -> None:
    assert format_weight("C: green", CHOICES) == 0.75
    assert format_weight("C: green, I think", CHOICES) == 0.5


@pytest.mark.parametrize(
    ("reply", "answer", "score"),
    [
        ("Red.", "red", 1.0),
        ("It is the red one", "red", 1.0),
        ("the large blue cube", "large blue cube", 1.0),
        ("reddish", "red", 0.0),
        ("blue", "red", 0.0),
    ],
)
def test_value_score(reply: str, answer: str, score: float) -> None:
    assert value_score(reply, answer)[0] == score


def test_normalize() -> None:
    assert normalize("  The RED, metal  cube! ") == "red metal cube"
