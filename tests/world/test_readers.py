"""Learned text-only readers and the build's filter against them; letters dealt in balanced blocks."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import snapshot
from yanami.contract import Dialogue, DialogueMeta, Message, Question, QuestionHidden, QuestionType, TextPart, Turn
from yanami.store import Dataset
from yanami.world import build_world
from yanami.world._audit_text import _reader_lines
from yanami.world._filter import FilterReport, Letters, deal_letters, filter_questions
from yanami.world._readers import Figure, Reader, TextReader, audit_readers, best_text_reader, featurize, wilson

COLOURS = ["gray", "red", "blue", "green", "brown", "purple", "cyan", "yellow"]


def _message(role: str, text: str) -> Message:
    return Message(role=role, parts=[TextPart(text=text)])  # type: ignore[arg-type]


def _planted(n: int) -> list[Dialogue]:
    """Dialogues whose one CT question has a planted tell: the answer is one of the colours the
    assistant notes (the others only the user names), and its three options start as colours
    the user named. Three other candidates are noted too, so a filter can hide it."""
    out = []
    for i in range(n):
        rng = random.Random(i)
        c = rng.sample(COLOURS, 8)
        answer, noted, plain = c[0], c[0:4], c[4:8]
        rng.shuffle(noted)
        turns = [
            Turn(
                index=0,
                user=_message("user", f"Hello. I see {plain[0]} and {plain[1]} here. Also {plain[2]}."),
                assistant=_message("assistant", " ".join(f"Noted {x}." for x in noted)),
            ),
            Turn(
                index=1,
                user=_message("user", f"Now {plain[3]}, please."),
                assistant=_message("assistant", "Done."),
            ),
        ]
        options = [answer, *plain[1:4]]
        q = Question(
            id="q0",
            type=QuestionType.CT,
            after_turn=1,
            text="Which colour is ruled out?",
            answer=answer,
            choices=options,
            answer_letters=["A"],
            hidden=QuestionHidden(intent={"candidates": [x for x in c if x != answer]}),
        )
        out.append(Dialogue(id=f"d{i:03d}", turns=turns, questions=[q], meta=DialogueMeta(generator="world", seed=0)))
    return out


def test_the_filter_hides_a_planted_tell_from_held_out_readers() -> None:
    """Planted, the tell gives every answer away; filtered (answers and letters kept, options
    from the candidates), no reader trained afresh on another split beats the bar."""
    planted = deal_letters(_planted(200), Letters(5))
    fresh = (Reader("logistic"), Reader("trees"))
    report = FilterReport()
    filtered = filter_questions(planted, seed=5, report=report)
    for d0, d1 in zip(planted, filtered, strict=True):
        q0, q1 = d0.questions[0], d1.questions[0]
        assert q1.answer == q0.answer and q1.answer_letters == q0.answer_letters
        assert set(q1.choices) - {q1.answer} <= set(q1.hidden.intent["candidates"])  # type: ignore[index, call-overload]
    after = audit_readers(filtered, fresh)
    assert all(per["CT"].accuracy <= 0.30 for per in after.values()), after
    assert all(per["CT"] > 0.9 for per in report.rounds[0].values()) and report.changed > 0  # planted: found


def test_letters_are_dealt_in_balanced_blocks_per_type() -> None:
    """Each block of four questions of a type takes every letter once; the types draw apart,
    so two questions of a dialogue share a letter about a quarter of the time."""
    letters = Letters(42)
    places = [[letters.place(t) for t in ("RR", "CR", "CT", "CU")] for _ in range(4000)]
    for k in range(4):
        column = [row[k] for row in places]
        assert all(sorted(column[b : b + 4]) == [0, 1, 2, 3] for b in range(0, 4000, 4))
    same = sum(row[i] == row[j] for row in places for i in range(4) for j in range(i + 1, 4)) / (6 * 4000)
    assert abs(same - 0.25) < 0.02
    follows = sum(places[n][0] == places[n + 1][0] for n in range(3999)) / 3999
    assert follows < 0.3  # two dialogues in a row rarely share it (never within a block)
    assert [Letters(42).place("RR") for _ in range(1)] == [places[0][0]]


def test_letter_shares_are_exact_on_a_small_build(tmp_path: Path) -> None:
    build_world(tmp_path / "b", per_scenario=2, seed=3)
    per_type: dict[str, Counter[str]] = {}
    for d in Dataset(tmp_path / "b"):
        for q in d.questions:
            assert q.answer_letters == ["ABCD"[q.choices.index(q.answer)]]
            per_type.setdefault(q.type.value, Counter())[q.answer_letters[0]] += 1
    assert set(per_type) == {"RR", "CR", "CT", "CU"}
    assert all(counts == Counter({"A": 2, "B": 2, "C": 2, "D": 2}) for counts in per_type.values())


def test_a_filtered_build_is_the_same_for_any_worker_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The filter runs (on a block it would otherwise leave alone) and the bytes do not depend on the workers."""
    import yanami.world._filter as filt

    monkeypatch.setattr(filt, "FILTER_FROM", 8)
    monkeypatch.setattr(filt, "ROUNDS", 1)
    monkeypatch.setattr(filt, "FILTER_READERS", (Reader("logistic"),))  # the trees' threads are pinned to one
    report = FilterReport()
    real = filt.filter_questions
    monkeypatch.setattr(filt, "filter_questions", lambda *a, **k: real(*a, **k, report=report))
    build_world(tmp_path / "one", per_scenario=2, seed=3, workers=1)
    build_world(tmp_path / "two", per_scenario=2, seed=3, workers=2)
    assert snapshot(tmp_path / "one") == snapshot(tmp_path / "two")
    assert report.rounds  # it ran


def test_a_text_reader_fitted_on_one_set_answers_another() -> None:
    """`TextReader` as a model: trained where the tell holds, it answers new dialogues with it."""
    train, test = deal_letters(_planted(60), Letters(1)), deal_letters(_planted(80)[60:], Letters(2))
    reader = TextReader(Reader("logistic")).fit(train)
    right = [reader.answer(d, d.questions[0]) == d.questions[0].answer_letters[0] for d in test]
    assert np.mean(right) > 0.9
    assert featurize(test[0], test[0].questions[0]).shape[0] == 4
    best = best_text_reader(train)
    assert np.mean([best.answer(d, d.questions[0]) == d.questions[0].answer_letters[0] for d in test]) > 0.9


def test_wilson_interval_and_the_audit_lines() -> None:
    low, high = wilson(25, 100)
    assert low < 0.25 < high and abs(low - 0.176) < 0.005 and abs(high - 0.343) < 0.005
    assert wilson(0, 0) == (0.0, 1.0)
    text = _reader_lines({"trees": {"CT": Figure(0.42, 0.37, 0.47, 400), "CU": Figure(0.25, 0.21, 0.29, 400)}})
    assert "learned text-only readers" in text and "CT 42.0% [37.0%, 47.0%]" in text
    assert "learned shortcut: trees answers CT 42.0%, above 30%" in text
