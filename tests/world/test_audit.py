"""Decidable checks, a measured floor and balanced answer letters: what `yanami audit` proves."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from yanami.contract import CHOICE_LETTERS, Check, CheckHidden, CheckKind, Scenario, Turn
from yanami.store import Dataset, dataset_stats
from yanami.world import build_world
from yanami.world._audit import audit, audit_dialogue
from yanami.world._free import loose, realize
from yanami.world._hidden import turn_intent, turn_state
from yanami.world._language import lint
from yanami.world._ops import View, apply_op
from yanami.world._place import valid
from yanami.world._predicates import evaluate, map_relation
from yanami.world._scenarios import compose_dialogue
from yanami.world._scenarios.world_modeling import ORBIT_WORDS
from yanami.world._scene import Scene, WorldObject, relation
from yanami.world._shortcuts import answer_place


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("audit") / "small"
    build_world(out, per_scenario=4, seed=11)
    return out


def _obj(oid: int, x: float, y: float, **kw: Any) -> WorldObject:
    attrs: dict[str, Any] = {"shape": "cube", "colour": "red", "size": "large", "material": "matte"} | kw
    return WorldObject(id=oid, x=x, y=y, **attrs)


def test_every_check_is_decidable_and_every_target_turn_irreducible(small: Path) -> None:
    report = audit(Dataset(small), draws=8)
    figures = report.summary()
    assert figures["undecidable_checks"] == 0, report.undecidable[:5]
    assert figures["irreducible_share"] == 1.0
    assert figures["turns_with_free_choices"] > 10 and figures["realizations_drawn"] > 50
    # a copy of the latest image passes at most half of any target image's atomic checks
    assert report.copy_majority == []
    assert figures["copy_share"] <= 0.5
    # known gap: under Self-History some checks name what an earlier free choice set
    assert 0 < figures["self_history_exposed_checks"] < figures["checks"]
    # the bench's shape is counted the way `yanami stats` counts it (an image shown again once)
    shape = dataset_stats(Dataset(small))
    assert figures["per_dialogue"]["images"] == pytest.approx(shape.images_per_dialogue)
    assert figures["per_dialogue"]["turns"] == pytest.approx(shape.turns_per_dialogue)
    assert figures["per_dialogue"]["atomic_checks"] == pytest.approx(shape.atomic_checks_per_dialogue)


def test_every_floor_stays_two_points_below_the_stateless_reading(small: Path) -> None:
    """The audit's floors, jittered copies among them, each at least 2 points of SC below the
    stateless reading (GT-History, on the world's own scenes)."""
    floors = audit(Dataset(small), draws=2).floors()
    assert {"jitter-input", "jitter-first", "jitter-previous"} <= set(floors)
    stateless = floors.pop("stateless")["sc"]
    for name, f in floors.items():
        assert f["sc"] <= stateless - 2.0, (name, f["sc"], stateless)


def test_every_atomic_check_says_what_it_tests(small: Path) -> None:
    for d in Dataset(small):
        for t in d.turns:
            for c in t.checks:
                pred = c.hidden.predicate
                assert isinstance(pred, dict)
                if c.kind is CheckKind.ATOMIC:
                    assert pred["effect"] in ("change", "preservation"), (d.id, t.index, c.text)
            effects = Counter(
                c.hidden.predicate["effect"]  # type: ignore[index,call-overload]
                for c in t.checks
                if c.kind is CheckKind.ATOMIC
            )
            assert effects["change"] >= effects["preservation"], (d.id, t.index)


def test_the_audit_finds_a_check_on_a_choice_the_words_leave_open() -> None:
    """A check on the world's own substitute colour (what 0.2.0 wrote) is undecidable."""

    def only_one(t: Turn) -> bool:
        """Whether the free colour is on the edited object alone (else another object has it anyway)."""
        op = turn_intent(t).op
        assert isinstance(op, dict) and isinstance(t.hidden.state, dict)
        return sum(o["colour"] == op["value"] for o in t.hidden.state["scene"]) == 1  # type: ignore[index, union-attr]

    for i in range(40):
        d, _ = compose_dialogue(Scenario.WORLD_MODELING, f"world-world_modeling-{i:06d}", 5)
        free = (t for t in d.turns if any(s["slot"] == "value" for s in turn_intent(t).free))
        turn = next((t for t in free if only_one(t)), None)
        if turn is not None:
            break
    else:
        pytest.fail("no turn with a free colour")
    assert audit_dialogue(d).undecidable == []
    op = turn_intent(turn).op
    assert isinstance(op, dict)
    exact = Check(
        id="c999",
        kind=CheckKind.ATOMIC,
        text=f"The object is {op['value']}.",
        hidden=CheckHidden(predicate={"op": "exists", "where": {"colour": op["value"]}}),
    )
    turn.checks.append(exact)
    found = audit_dialogue(d, draws=12).undecidable
    assert [(u.turn, u.check) for u in found] == [(turn.index, "c999")]


def test_every_question_has_four_options_and_its_letter(small: Path) -> None:
    for d in Dataset(small):
        for q in d.questions:
            assert q.choices and len(q.choices) == 4 and len(set(q.choices)) == 4
            assert q.answer_letters == [CHOICE_LETTERS[q.choices.index(q.answer)]]


def test_answer_letters_are_drawn_independently_per_question() -> None:
    """Each letter is the answer a quarter of the time, and one question's letter says nothing
    of another's in the same dialogue (the old rotation gave all four away from one)."""
    places = [[answer_place(42, f"world-editing-{i:06d}", f"q{k}", 4) for k in range(4)] for i in range(4000)]
    counts = Counter(p for row in places for p in row)
    assert all(abs(n / 16000 - 0.25) < 0.015 for n in counts.values()) and len(counts) == 4
    same = sum(row[0] == row[k] for row in places for k in (1, 2, 3)) / 12000
    assert abs(same - 0.25) < 0.02  # independent: a quarter, as by chance
    follows = sum((row[0] + 1) % 4 == row[1] for row in places) / 4000
    assert abs(follows - 0.25) < 0.03  # no rotation either


def test_free_choices_are_realized_other_ways() -> None:
    scene = Scene(objects=(_obj(0, -2.0, -1.0), _obj(1, 2.0, 1.0, colour="blue", shape="sphere", size="small")))
    assert valid(scene)
    view = View(scene, 45.0, "studio")
    op = {"op": "set", "where": {"shape": "cube"}, "attr": "colour", "value": "green"}
    free = [{"slot": "value", "choices": ["green", "gray", "purple"]}]
    values = {realize(op, free, view, [view], random.Random(k))["value"] for k in range(30)}  # type: ignore[index]
    assert values == {"green", "gray", "purple"}
    assert loose(op, free, view, apply_op(op, view, []).scene) == (set(), {0: {"colour"}})
    push = {"op": "move", "where": {"shape": "sphere"}, "x": 2.0, "y": 1.0}
    rule = {"push": "left", "from": [2.0, 1.0], "azimuth": 45.0, "least": 0.5}
    moved = {"op": "moved", "where": {"shape": "sphere"}, "from": [2.0, 1.0], "direction": "left", "margin": 0.45}
    for k in range(10):
        alt = realize(push, [{"slot": "position", "accept": [rule]}], view, [view], random.Random(k))
        assert alt is not None
        after = apply_op(alt, view, [])
        assert evaluate(moved, after.scene, 45.0)
        assert not evaluate({**moved, "direction": "right"}, after.scene, 45.0)
    assert not evaluate(moved, scene, 45.0)  # not moved at all


def test_new_predicates() -> None:
    scene = Scene(objects=(_obj(0, 0.0, 0.0, colour="gray"), _obj(1, 2.0, 2.0, shape="sphere")))
    pred = {"op": "not_attribute", "where": {"shape": "cube"}, "attr": "colour", "values": ["red", "brown"]}
    assert evaluate(pred, scene, 45.0)
    assert not evaluate({**pred, "values": ["gray"]}, scene, 45.0)
    assert not evaluate({**pred, "where": {"size": "large"}}, scene, 45.0)  # not one object
    # A sideways slide is not a push that way; a push that goes far enough is.
    moved = {"op": "moved", "where": {"shape": "cube"}, "direction": "right", "margin": 0.45}
    right = (0.7071, -0.7071)  # the camera's right at azimuth 45
    assert evaluate({**moved, "from": [-right[0] * 0.6, -right[1] * 0.6]}, scene, 45.0)
    assert not evaluate({**moved, "from": [-right[0] * 0.3, -right[1] * 0.3]}, scene, 45.0)
    assert not evaluate({**moved, "from": [right[0] * 0.6, right[1] * 0.6]}, scene, 45.0)


@pytest.mark.parametrize("quarters", [1, 2, 3])
def test_a_walk_around_the_table_reads_one_way(quarters: int) -> None:
    """A positive azimuth turns the camera clockwise seen from above, to its own left: what
    was on our left then faces us (is in front)."""
    a, b = _obj(0, 0.0, 0.0), _obj(1, 1.0, 0.5, colour="blue")
    before, after = 45.0, 45.0 + 90 * quarters
    left_one, right_one = (a, b) if relation(a, b, before)[0] == "left" else (b, a)
    words = " ".join(ORBIT_WORDS[quarters])
    if quarters == 1:
        assert "clockwise" in words and "counter-clockwise" not in words and "our left" in words
        assert relation(left_one, right_one, after)[1] == "front"
    elif quarters == 3:
        assert "counter-clockwise" in words and "our right" in words
        assert relation(right_one, left_one, after)[1] == "front"
    else:
        assert "opposite side" in words
        assert relation(left_one, right_one, after)[0] == "right"
    assert map_relation("left", before, after) == {1: "front", 2: "right", 3: "behind"}[quarters]


def test_audit_cli(cli: Callable[..., Any], small: Path) -> None:
    r = cli("audit", small, "--draws", "4", "--json")
    assert r.code == 0, r.err
    figures = json.loads(r.out)
    assert figures["undecidable_checks"] == 0 and figures["irreducible_share"] == 1.0
    assert abs(sum(figures["answer_letter_shares"].values()) - 1) < 1e-9
    rules = figures["text_only_rules"]
    assert set(rules["questions"]) == {"RR", "CR", "CT", "CU"} and rules["questions_with_fewer_options"] == 0
    assert all(0 <= acc <= 1 for _, acc in rules["best_single"].values())
    readers = figures["learned_readers"]  # held out, with an interval
    assert set(readers) == {"logistic", "trees"} and set(readers["trees"]) == {"RR", "CR", "CT", "CU"}
    assert all(f["low"] <= f["accuracy"] <= f["high"] for per in readers.values() for f in per.values())
    assert set(rules["answer_letters_by_type"]) == {"RR", "CR", "CT", "CU"}
    assert figures["self_history_undecidable_checks"] == 0 and figures["self_history_checks"] > 0
    assert figures["language_findings"] == 0 and figures["messages_linted"] == 2 * sum(
        len(d.turns) for d in Dataset(small)
    )


def test_no_message_a_reviewer_would_flag(small: Path) -> None:
    findings = []
    for d in Dataset(small):
        kinds = frozenset(k.kind for t in d.turns for k in turn_state(t).constraints)
        for t in d.turns:
            for m in (t.user, t.assistant):
                findings += lint(m.text(), kinds)
    assert findings == []


@pytest.mark.parametrize(
    ("text", "kinds", "flagged"),
    [
        ("Alright. scratch what I said in my fourth message.", set(), True),
        ("Sure. Sure, the cube is red now.", set(), True),
        ("So, and add the cylinder from picture 1 as well.", set(), True),
        ("This is the scene seen from to the opposite side of where we were.", set(), True),
        ("Got it, the cylinder goes behind the cylinder instead.", set(), True),
        ("Make the the cube red.", set(), True),
        ("The goal: no cubes left, except what my rule protects.", {"forbid_colour"}, True),
        ("The goal: no cubes left, except what my rule protects.", {"protect"}, False),
        ("I can see 4 objects. What would you like to do? Over to you.", set(), True),
        ("Here is the combination: the cube from the first picture and the cube from picture 2.", set(), False),
        ("Okay, put the large cube to the left of the small cube. :)", set(), False),
    ],
)
def test_the_language_lint(text: str, kinds: set[str], flagged: bool) -> None:
    assert bool(lint(text, kinds)) is flagged


def test_audit_of_a_dataset_without_world_dialogues_is_one_line(cli, built) -> None:
    r = cli("audit", built)
    assert r.code == 2 and r.err.count("\n") == 1 and "no world dialogues to audit" in r.err


def test_the_stateful_agent_makes_its_own_free_choices_and_still_passes_every_check(world_bench, tmp_path) -> None:
    """It draws what the words leave open from its own seed (never the world's pick), and every check holds."""
    from yanami.contract import ImagePart, read_rows
    from yanami.runner import evaluate
    from yanami.store import Dataset

    evaluate(world_bench, "reference:stateful", tmp_path / "run")
    rows = read_rows(tmp_path / "run")
    by_id = {d.id: d for d in Dataset(world_bench)}
    own = 0
    for item, p in rows.predictions.items():
        if p.kind != "turn":
            continue
        v = rows.verdicts[item]
        assert p.status == "ok" and v.checks and all(c.passed for c in v.checks), item
        turn = by_id[p.dialogue].turns[p.turn]
        truth = next(x for x in turn.assistant.parts if isinstance(x, ImagePart)).sha256
        own += bool(isinstance(turn.hidden.intent, dict) and turn.hidden.intent.get("free")) and p.image != truth
    assert own > 0  # some free choices were its own, and unlike the ground truth's


def test_sc_splits_into_change_and_preservation_and_copying_earns_no_change(world_bench, tmp_path, cli) -> None:
    from yanami.runner import evaluate
    from yanami.scoring import load_runs, tables

    for agent in ("copy-input", "stateful"):
        evaluate(world_bench, f"reference:{agent}", tmp_path / agent)
    loaded = load_runs([tmp_path / "copy-input", tmp_path / "stateful"])
    copy, stateful = (s.average for s in loaded.scores)
    assert stateful["sc_change"] == stateful["sc_preservation"] == 100.0
    assert copy["sc_preservation"] is not None and copy["sc_change"] is not None
    assert copy["sc_change"] < 20.0 < copy["sc_preservation"]  # a copy satisfies what stays, not what changes
    table = next(t for t in tables(loaded.runs, loaded.scores) if t.key == "sc_effects")
    assert [row[0] for row in table.rows] == ["reference:copy-input", "reference:stateful ‡"]  # ‡: reads the bench
    r = cli("score", tmp_path / "copy-input", "--format", "md")
    assert "SC preservation" in r.out
