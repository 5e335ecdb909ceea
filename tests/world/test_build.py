"""Building world datasets: valid, deterministic, stateful, and true to their own checks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import snapshot
from yanami.contract import Capability, QuestionType, Scenario, UserError
from yanami.store import Dataset, validate_dataset
from yanami.world import build_world, parse_image, plan
from yanami.world._predicates import evaluate


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("world") / "tiny"
    build_world(out, preset="tiny", seed=7)
    return out


def test_tiny_build_is_valid(tiny: Path) -> None:
    assert validate_dataset(tiny) == []
    ds = Dataset(tiny)
    assert len(ds) == 8
    assert ds.manifest.generator.name == "world"


def test_every_dialogue_is_stateful(tiny: Path) -> None:
    for d in Dataset(tiny):
        assert len(set(d.capabilities)) >= 4
        assert sorted(q.type for q in d.questions) == sorted(QuestionType)
        targets = [t for t in d.turns if t.checks]
        assert len(targets) >= 3
        for t in targets:
            assert t.capabilities, t.index
            assert t.assistant.images()[-1].source.value == "assistant"
        ct = next(q for q in d.questions if q.type is QuestionType.CT)
        cu = next(q for q in d.questions if q.type is QuestionType.CU)
        assert ct.aligned_checks and cu.aligned_checks
        caps = {c.capability for t in d.turns for c in t.checks if c.capability}
        assert {Capability.CONSTRAINT, Capability.CORRECTION} <= caps
        assert all(t.hidden.state is not None and t.hidden.intent is not None for t in d.turns)


def test_ground_truth_images_pass_their_own_checks(tiny: Path) -> None:
    """Parse every target image and evaluate its checks: the exact judge's view of the truth."""
    ds = Dataset(tiny)
    checked = 0
    for d in ds:
        for t in d.turns:
            if not t.checks:
                continue
            state = t.hidden.state
            assert isinstance(state, dict)
            parsed = parse_image(ds.image_bytes(t.assistant.images()[-1]), state["azimuth"]).to_scene()
            for c in t.checks:
                assert evaluate(c.hidden.predicate, parsed, state["azimuth"]), (d.id, t.index, c.text)  # type: ignore[arg-type]
                checked += 1
    assert checked > 100


def test_same_seed_same_bytes_for_any_worker_count(tmp_path: Path) -> None:
    build_world(tmp_path / "one", per_scenario=2, seed=3, workers=1)
    build_world(tmp_path / "two", per_scenario=2, seed=3, workers=2)
    assert snapshot(tmp_path / "one") == snapshot(tmp_path / "two")


def test_the_build_balances_as_balancing_the_composed_dialogues_again_does(tiny: Path) -> None:
    """A build weighs the option sets its workers drew while composing; drawn again from the
    dialogues they composed (what `balance_questions` does on its own, then the letters dealt
    and the filter, `finish_questions`), they give the same questions."""
    from yanami.world._build import BALANCE_BLOCK
    from yanami.world._filter import finish_questions
    from yanami.world._scenarios import compose_for_build

    composed = [compose_for_build(s, did, 7)[0] for s, did in plan("tiny", None, None, list(Scenario))]
    built = {d.id: d for d in Dataset(tiny)}
    again = finish_questions(composed, 7, filtered=True, block=BALANCE_BLOCK)
    assert any(
        q.hidden.intent.get("candidates") and len(q.hidden.intent["candidates"]) > 3 for d in again for q in d.questions
    )  # type: ignore[union-attr, arg-type]
    for d in again:
        assert [q.model_dump() for q in d.questions] == [q.model_dump() for q in built[d.id].questions]


def test_exclude_refuses_overlap_and_writes_nothing(tiny: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="also occurs in"):
        build_world(tmp_path / "bench", preset="tiny", seed=7, exclude=tiny)
    assert not (tmp_path / "bench").exists()
    build_world(tmp_path / "bench", preset="tiny", seed=8, exclude=tiny)
    assert validate_dataset(tmp_path / "bench") == []


def test_plan_follows_presets_and_the_training_mix() -> None:
    assert len(plan("bench", None, None, list(Scenario))) == 400
    mix = plan("train", None, 100, list(Scenario))
    counts = {s: sum(1 for x, _ in mix if x is s) for s in Scenario}
    assert counts == {Scenario.FUSION: 36, Scenario.EDITING: 25, Scenario.WORLD_MODELING: 28, Scenario.REASONING: 11}
    only = plan("bench", 3, None, [Scenario.EDITING])
    assert [i for _, i in only] == [f"world-editing-{k:06d}" for k in range(3)]


def test_build_cli(cli: Callable[..., Any], tmp_path: Path) -> None:
    r = cli("build", "--out", tmp_path / "b", "--per-scenario", "1", "--scenarios", "editing,fusion")
    assert r.code == 0, r.err
    assert "2 dialogues" in r.out
    assert {d.scenario for d in Dataset(tmp_path / "b")} == {Scenario.EDITING, Scenario.FUSION}
    r = cli("build", "--out", tmp_path / "c", "--scenarios", "painting")
    assert r.code == 2 and "--scenarios" in r.err
    r = cli("build", "--out", tmp_path / "b", "--per-scenario", "1")
    assert r.code == 2 and "already exists" in r.err


def test_every_target_turn_is_irreducible(tiny: Path) -> None:
    """Replay each target turn's stateless reading from the stored states: some check fails on it."""
    from yanami.world import Scene, View, WorldObject, apply_op

    def view_of(state: dict[str, Any]) -> View:
        objs = tuple(WorldObject.model_validate(o) for o in state["scene"])
        return View(Scene(objects=objs), state["azimuth"], state["style"])

    targets = 0
    for d in Dataset(tiny):
        shown: list[View] = []
        for t in d.turns:
            state, intent = t.hidden.state, t.hidden.intent
            assert isinstance(state, dict) and isinstance(intent, dict)
            if t.checks:
                naive = apply_op(intent["stateless"], shown[-1], shown)
                assert any(not evaluate(c.hidden.predicate, naive.scene, naive.azimuth) for c in t.checks), (  # type: ignore[arg-type]
                    d.id,
                    t.index,
                )
                # ...while the full reading, from the true state before the turn, gives the stored state.
                before = view_of(d.turns[t.index - 1].hidden.state)  # type: ignore[arg-type]
                assert apply_op(intent["op"], before, shown).scene == view_of(state).scene
                targets += 1
            if t.user.images() or t.assistant.images():
                shown.append(view_of(state))
    assert targets >= 24
