"""Editing a question's options and answer, and reverting to an earlier version, on SQLite and
PostgreSQL: each change is a new version, and a change that would break the dialogue is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa

from tests.review.conftest import Review
from yanami.contract import Dialogue
from yanami.review import Conflict, ReviewError
from yanami.review._db import T, User
from yanami.store import dialogue_problems

TEXT = "turns.0.user.parts.0.text"


def _setup(review: Review) -> tuple[User, str, int, dict[str, Any]]:
    """ann1, a dialogue of theirs, and its first question with four options and one correct letter."""
    ann1 = next(u for u in review.db.users() if u.name == "ann1")
    did = review.db.table()[0]["id"]
    data, _ = review.db.dialogue(did)
    k, q = next((k, q) for k, q in enumerate(data["questions"]) if len(q["choices"]) == 4)
    assert len(q["answer_letters"]) == 1 and q["answer"] == q["choices"]["ABCD".index(q["answer_letters"][0])]
    return ann1, did, k, q


def _valid(data: dict[str, Any]) -> bool:
    return dialogue_problems(Dialogue.model_validate(data)) == []


def test_changing_the_letter_moves_the_answer_text_with_it(review: Review) -> None:
    db = review.db
    ann1, did, k, q = _setup(review)
    new = next(x for x in "ABCD" if x not in q["answer_letters"])
    assert db.edit(ann1, did, 0, f"questions.{k}.answer_letters", new.lower()) == 1
    data, _ = db.dialogue(did)
    moved = data["questions"][k]
    assert moved["answer_letters"] == [new] and moved["answer"] == q["choices"]["ABCD".index(new)]
    assert _valid(data)
    [edit] = db.edits(did)
    assert edit.before == f"{q['answer_letters'][0]}\n(answer: {q['answer']})"
    assert edit.after == f"{new}\n(answer: {moved['answer']})"
    # editing the correct option's text carries the answer along; an option's text is kept as written
    i = "ABCD".index(new)
    assert db.edit(ann1, did, 1, f"questions.{k}.choices.{i}", "a corrected option") == 2
    assert db.dialogue(did)[0]["questions"][k]["answer"] == "a corrected option"
    # the options as a whole, one a line: a fifth one can then be the correct one
    options = "\n".join([*db.dialogue(did)[0]["questions"][k]["choices"], "  a fifth option  ", ""])
    assert db.edit(ann1, did, 2, f"questions.{k}.choices", options) == 3
    assert db.edit(ann1, did, 3, f"questions.{k}.answer_letters", "E") == 4
    final = db.dialogue(did)[0]["questions"][k]
    assert final["choices"][4] == "a fifth option" and final["answer"] == "a fifth option"
    # a free-worded answer is the annotator's: changing the letter then leaves it alone
    assert db.edit(ann1, did, 4, f"questions.{k}.answer", "the fifth, in my words") == 5
    assert db.edit(ann1, did, 5, f"questions.{k}.answer_letters", "A") == 6
    assert db.dialogue(did)[0]["questions"][k]["answer"] == "the fifth, in my words"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("answer_letters", "E", "'E' is not one of the options ABCD"),
        ("answer_letters", "B or C", "'B or C' is not option letters"),
        ("answer_letters", "", "a question with choices needs answer letters"),
        ("answer", "OTHER", "is option {other}'s text but the correct option(s) are {right}"),
        ("choices", "one", "at least two options"),
        ("choices", "one\ntwo", "is not one of the options AB"),  # the correct option removed
        ("choices", "same\nsame\nthird\nfourth", "option B repeats option A"),
        ("choices", "\n".join("abcdefgh"), "at most 7 items"),
        ("choices.0", "", "option A is empty"),
        ("choices.9", "x", "no such field"),
    ],
)
def test_an_edit_that_breaks_the_question_is_refused_with_one_message(
    review: Review, field: str, value: str, message: str
) -> None:
    db = review.db
    ann1, did, k, q = _setup(review)
    right = q["answer_letters"][0]
    other = next(x for x in "ABCD" if x != right)
    if value == "OTHER":
        value = q["choices"]["ABCD".index(other)]
    if field == "choices" and value == "one" and right == "A":  # a lone option A would still be correct
        db.edit(ann1, did, 0, f"questions.{k}.answer_letters", "D")
        right = "D"
    before = db.dialogue(did)
    n = len(db.edits(did))
    with pytest.raises(ReviewError) as caught:
        db.edit(ann1, did, before[1], f"questions.{k}.{field}", value)
    assert caught.value.status == 422
    assert message.format(other=other, right=right) in str(caught.value)
    assert "\n" not in str(caught.value)
    assert db.dialogue(did) == before and len(db.edits(did)) == n


def test_revert_makes_a_new_version_with_the_old_content(review: Review) -> None:
    db = review.db
    ann1, did, k, q = _setup(review)
    ann2 = next(u for u in db.users() if u.name == "ann2")
    original, _ = db.dialogue(did)
    db.edit(ann1, did, 0, TEXT, "first")
    one, _ = db.dialogue(did)
    db.edit(ann1, did, 1, f"questions.{k}.answer_letters", next(x for x in "ABCD" if x != q["answer_letters"][0]))
    assert db.revert(ann2, did, 2, 0) == 3
    assert db.dialogue(did) == (original, 3)
    assert db.revert(ann2, did, 3, 1) == 4
    assert db.dialogue(did) == (one, 4)
    edits = db.edits(did)
    assert [e.path for e in edits] == [TEXT, f"questions.{k}.answer_letters", "revert:0", "revert:1"]
    assert edits[2].user == "ann2" and f"{TEXT}: first" in edits[2].before
    assert f"{TEXT}: {original['turns'][0]['user']['parts'][0]['text']}" in edits[2].after
    assert db.revert(ann2, did, 4, 1) == 4  # already that content: no new version
    with pytest.raises(Conflict) as caught:
        db.revert(ann1, did, 3, 0)
    assert (caught.value.current_version, caught.value.by) == (4, "ann2")
    for bad in (4, 9, -1):
        with pytest.raises(ReviewError, match=r"no version .* to revert to \(0-3\)") as refused:
            db.revert(ann1, did, 4, bad)
        assert refused.value.status == 422
    assert db.dialogue(did) == (one, 4)


def test_revert_replays_edits_made_before_snapshots_were_kept(review: Review) -> None:
    """A database from schema version 1 has edits but no snapshots: a revert rebuilds them."""
    db = review.db
    ann1, did, _, _ = _setup(review)
    for n in range(3):
        db.edit(ann1, did, n, TEXT, f"text {n + 1}")
    wanted = json.loads(json.dumps(db.dialogue(did)[0]))
    wanted["turns"][0]["user"]["parts"][0]["text"] = "text 2"
    with db.begin() as conn:
        conn.execute(T["snapshots"].delete())
    assert db.revert(ann1, did, 3, 2) == 4
    assert db.dialogue(did)[0] == wanted
    with db.begin() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(T["snapshots"])).scalar_one() == 1
