"""Grading replies: YANAMI's option reading, IMUG-Bench's option matching with format weights, value matching."""

from __future__ import annotations

import pytest

from yanami.contract import CHOICE_LETTERS, InputMessage, InputText, Request
from yanami.judges import (
    ExactJudge,
    choice_score,
    format_weight,
    normalize,
    option_score,
    read_option,
    read_options,
    value_score,
)

CHOICES = ["red", "blue", "green", "yellow"]


@pytest.mark.parametrize(
    ("reply", "expected", "score"),
    [
        ("B", ["B"], 1.0),
        ("  B\n", ["B"], 1.0),
        ("B.", ["B"], 0.75),
        ("B) blue", ["B"], 0.75),
        ("Answer: B", ["B"], 0.5),  # IMUG-Bench's case C: any text beyond the options
        ("The answer is B.", ["B"], 0.5),
        ("B, because the user banned red in turn 2", ["B"], 0.5),
        ("A", ["B"], 0.0),
        ("A B", ["B"], 0.0),  # one right, one wrong: max(0, (1 - 1) / 1)
        ("AB", ["A", "B"], 1.0),
        ("A", ["A", "B"], 0.5),
        ("A, B", ["A", "B"], 0.75),
        ("blue", ["B"], 0.0),  # no option letter at all
        ("", ["B"], 0.0),
        ("Option B is correct", ["B"], 0.5),
        ("B: blue", ["B"], 0.75),  # case B: the option's own text is not text beyond the options
        ("A and B", ["A", "B"], 0.5),
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


# YANAMI: an answer to lettered options read as a person reads it ----------------------------

SCENE = ["the blue sphere", "a cylinder was moved", "the red cube", "nothing changed"]
"""Option A's letter is also the article: "A red cube" is option C's text, not option A."""
NESTED = ["red cube", "large red cube", "blue sphere", "none"]
"""Option B's text contains option A's."""
SEVEN = ["red", "blue", "green", "yellow", "cyan", "gray", "brown"]
"""Letters A-G, so the "e" and "g" of "e.g." would be option letters if read as letters."""

READINGS = [
    # a leading letter, however framed
    ("B", CHOICES, "B"),
    ("  B\n", CHOICES, "B"),
    ("B.", CHOICES, "B"),
    ("B)", CHOICES, "B"),
    ("(B)", CHOICES, "B"),
    ("[B]", CHOICES, "B"),
    ("**B**", CHOICES, "B"),
    ("\u201cB\u201d", CHOICES, "B"),
    ("B - blue", CHOICES, "B"),
    ("B\nThe user asked for it in turn 4.", CHOICES, "B"),
    ("Answer: B", CHOICES, "B"),
    ("The answer is B.", CHOICES, "B"),
    ("Option B", CHOICES, "B"),
    ("I choose B because the user asked for it in turn 4", CHOICES, "B"),
    ("I'd say B", CHOICES, "B"),  # the d of "I'd" is no letter
    ("C", CHOICES, "C"),
    ("A", CHOICES, "A"),
    ("A.", CHOICES, "A"),
    ("E", CHOICES, None),  # not one of the four options
    # lower case
    ("b", CHOICES, "B"),
    ("b.", CHOICES, "B"),
    ("(b)", CHOICES, "B"),
    ("answer: b", CHOICES, "B"),
    ("a", CHOICES, "A"),
    ("The answer is a.", CHOICES, "A"),
    # "A" the letter against "a" the article
    ("A red cube", SCENE, "C"),
    ("a red cube", SCENE, "C"),
    ("Answer: A red cube", SCENE, "C"),
    ("A cylinder was moved.", SCENE, "B"),
    ("B. A cylinder was moved", SCENE, "B"),
    ("A. The blue sphere", SCENE, "A"),
    ("A is correct", SCENE, "A"),
    ("A because the user meant the sphere", SCENE, "A"),
    ("I think A is right", SCENE, "A"),
    ("Option A fits best", SCENE, "A"),  # mid-sentence, a capital is the letter
    ("A\nThe user meant it.", SCENE, "A"),
    # an option's text without its letter
    ("blue", CHOICES, "B"),
    ("BLUE.", CHOICES, "B"),
    ("The user asked for blue.", CHOICES, "B"),
    ("bluish", CHOICES, None),
    ("the cylinder was moved", SCENE, "B"),
    ("moved, a cylinder was", SCENE, "B"),  # its exact words in another order
    ("the large red cube", NESTED, "B"),  # the longest option, not also "red cube" inside it
    ("Large red cube.", NESTED, "B"),
    ("cube red large", NESTED, "B"),
    ("the red cube", NESTED, "A"),
    ("B. the large red cube", NESTED, "B"),
    ("None.", NESTED, "D"),
    ("B, e.g. the blue one", SEVEN, "B"),  # "e.g." names neither E nor G
    # two options named: wrong, not partial
    ("B or C", CHOICES, None),
    ("A, B", CHOICES, None),
    ("B, not C", CHOICES, None),
    ("B: red", CHOICES, None),
    ("B because the user ruled out red", CHOICES, None),
    ("red or blue", CHOICES, None),
    ("A. the large red cube", NESTED, None),
    ("the red cube or the large red cube", NESTED, None),
    # nothing readable
    ("", CHOICES, None),
    ("   ", CHOICES, None),
    ("I don't know.", CHOICES, None),
    ("purple", CHOICES, None),
]
"""(reply, options, the option it names or None): the reading `read_option` must give, and the
table the exact judge and the VLM judge over the scripted server must agree on (test_vlm.py).
A row scores 1 when the option it names is the right one, else 0."""
ANSWER = "B"
"""The right option in the tests of reasons."""


@pytest.mark.parametrize(("reply", "choices", "read"), READINGS)
def test_read_option(reply: str, choices: list[str], read: str | None) -> None:
    k = read_option(reply, choices)
    assert (None if k is None else CHOICE_LETTERS[k]) == read


@pytest.mark.parametrize(("reply", "choices", "read"), READINGS)
def test_option_score_is_full_credit_or_none(reply: str, choices: list[str], read: str | None) -> None:
    for answer in CHOICE_LETTERS[: len(choices)]:
        score, reason = option_score(reply, answer, choices)
        assert score == (1.0 if read == answer else 0.0)
        assert reason.endswith(f"expected {answer}")


@pytest.mark.parametrize(
    ("reply", "choices", "reason"),
    [
        ("", CHOICES, "names no option (no option letter, no option's text)"),
        ("purple", CHOICES, "names no option"),
        ("B or C", CHOICES, "names several options (B, C)"),
        ("B: red", CHOICES, "names several options (A, B)"),
        ("b", CHOICES, "chose B (by its letter)"),
        ("blue", CHOICES, "chose B (by its text)"),
        ("B - blue", CHOICES, "chose B (by its letter and text)"),
        ("A red cube", SCENE, "chose C (by its text)"),
    ],
)
def test_option_score_says_what_it_read(reply: str, choices: list[str], reason: str) -> None:
    assert option_score(reply, ANSWER, choices)[1].startswith(reason)


def test_two_options_with_the_same_text_are_both_named() -> None:
    # a reply matching both cannot tell them apart: ambiguous, not the first one
    assert read_options("the red cube", ["a red cube", "the red cube", "blue", "green"]) == [0, 1]


def test_the_exact_judge_reads_yanami_questions_and_keeps_imug_matching_for_several_letters(
    world_dialogues,
) -> None:
    d = world_dialogues[0]
    q = next(q for q in d.questions if len(q.answer_letters) == 1)
    right = q.answer_letters[0]
    judge = ExactJudge()
    assert judge.judge_answer(d, q, f"The answer is {right}.").score == 1.0  # IMUG's weight would give 0.75
    assert judge.judge_answer(d, q, q.choices[CHOICE_LETTERS.index(right)]).score == 1.0  # its text alone
    other = next(x for x in CHOICE_LETTERS[: len(q.choices)] if x != right)
    assert judge.judge_answer(d, q, f"{right} or {other}").score == 0.0
    several = q.model_copy(update={"answer_letters": [right, other]})
    assert judge.judge_answer(d, several, right).score == 0.5  # IMUG-Bench's rule: one of two letters


@pytest.mark.parametrize("agent", ["reference:copy-input", "reference:random"])
def test_the_trivial_agents_score_as_before(world_dialogues, agent: str) -> None:
    """Their replies are bare letters: the reading scores them as IMUG-Bench's matching did."""
    from yanami.models import question_prompt
    from yanami.world import reference_agent

    model = reference_agent(agent.partition(":")[2])
    judge = ExactJudge()
    for d in world_dialogues:
        for q in d.questions:
            message = InputMessage("user", (InputText(question_prompt(q)),))
            reply = model.answer(Request(f"{d.id}/{q.id}", (message,), seed=7, size=(512, 512)))
            assert reply in CHOICE_LETTERS[: len(q.choices)]
            before = choice_score(reply, list(q.answer_letters), list(q.choices))[0]
            assert judge.judge_answer(d, q, reply).score == before
