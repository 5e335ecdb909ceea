"""Self-History: a check on a value an earlier free choice set is judged against the model's own choice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from yanami.contract import Dialogue, Scenario
from yanami.store import Dataset
from yanami.world import _audit as audit_module
from yanami.world import _compose, build_world, evaluate
from yanami.world._audit import audit
from yanami.world._hidden import turn_intent
from yanami.world._place import valid
from yanami.world._scenarios import compose_dialogue
from yanami.world._scene import Scene
from yanami.world._selfhistory import exposed, rebase_checks, track, view_of


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("selfhistory") / "small"
    build_world(out, per_scenario=4, seed=11)
    return out


def _substitutes(d: Dialogue) -> list[tuple[int, int, int, str, list[str]]]:
    """(choosing turn, later turn, object id, attribute, admissible values) for each later turn
    whose checks name a substitute value the choosing turn picked freely."""
    tracks = track(d)
    out = []
    for t in d.turns:
        tr = tracks.get(t.index)
        if tr is None:
            continue
        for obj, names in tr.carried.attrs.items():
            for attr, chosen_at in names.items():
                slots = [s for s in turn_intent(d.turns[chosen_at]).free if s["slot"] in ("value", "material")]
                if slots and any(
                    isinstance(c.hidden.predicate, dict) and exposed(c.hidden.predicate, view_of(t).scene, tr)  # type: ignore[union-attr]
                    for c in t.checks
                ):
                    out.append((chosen_at, t.index, obj, attr, [str(v) for v in slots[0]["choices"]]))
    return out


def test_a_check_on_an_earlier_substitute_names_the_models_own_pick(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model picked another admissible colour than the ground truth: the later check that
    named the ground truth's pick names the model's, and holds on the model's consistent scene
    (here: a correction that brings the substitute back, in editing and fusion dialogues)."""
    monkeypatch.setattr(_compose, "render_png", lambda scene, azimuth, style: repr((scene, azimuth, style)).encode())
    dialogues = [compose_dialogue(s, f"world-{s.value}-{i:06d}", 11)[0] for s in (EDITING, FUSION) for i in range(16)]
    cases = 0
    for d in dialogues:
        for chosen_at, later, obj, attr, choices in _substitutes(d):
            gt_then = view_of(d.turns[chosen_at])
            gt_later = view_of(d.turns[later])
            assert gt_then is not None and gt_later is not None
            truth = next(getattr(o, attr) for o in gt_then.scene.objects if o.id == obj)
            for pick in (c for c in choices if c != truth):
                mine_then = _with(gt_then.scene, obj, attr, pick)
                mine_later = _with(gt_later.scene, obj, attr, pick)
                between = [view_of(t) for t in d.turns[chosen_at : later + 1]]
                if not all(valid(_with(v.scene, obj, attr, pick)) for v in between if v is not None):
                    continue  # that pick would make two objects the same on the way: words could not tell them apart
                rebased = rebase_checks(d, d.turns[later], {chosen_at: mine_then})
                plain = {c.id: c.hidden.predicate for c in d.turns[later].checks}
                az = gt_later.azimuth
                # every check holds on the model's consistent scene once rebased (or its own pick made
                # it ill-posed: None, left out of the score) ...
                decided = [p for p in rebased.values() if p is not None]
                assert decided and all(evaluate(p, mine_later, az) for p in decided), (d.id, later, pick)
                # ... where some did not as the ground truth wrote them (which the ground truth passes)
                assert all(evaluate(p, gt_later.scene, az) for p in plain.values())  # type: ignore[arg-type]
                cases += not all(evaluate(p, mine_later, az) for p in plain.values())  # type: ignore[arg-type]
                break
    assert cases >= 3


EDITING, FUSION = Scenario.EDITING, Scenario.FUSION


def _with(scene: Scene, obj: int, attr: str, value: str) -> Scene:
    objs = tuple(o.model_copy(update={attr: value}) if o.id == obj else o for o in scene.objects)
    return Scene.model_construct(objects=objs)


def test_nothing_changes_without_the_models_own_images(small: Path) -> None:
    for d in Dataset(small):
        for t in d.turns:
            if t.checks:
                assert rebase_checks(d, t, {}) == {c.id: c.hidden.predicate for c in t.checks}


def test_self_history_rollouts_pass_every_rebased_check(small: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit plays each dialogue as a model with its own free choices would under
    Self-History: 0 undecidable checks; judged as the ground truth wrote them, many fail."""
    dialogues = Dataset(small).read_all()
    figures = audit(dialogues, draws=2).summary()
    assert figures["self_history_checks"] > 1000 and figures["self_history_exposed_checks"] > 0
    assert figures["self_history_undecidable_checks"] == 0
    assert figures["self_history_rollouts_cut_short"] < figures["dialogues"] * figures["self_history_rollouts"] // 4

    def unrebased(d: Dialogue, turn: Any, own: Any) -> dict[str, Any]:
        return {c.id: c.hidden.predicate for c in turn.checks}

    monkeypatch.setattr(audit_module, "rebase_checks", unrebased)
    assert audit(dialogues, draws=2).summary()["self_history_undecidable_checks"] > 0


def test_the_exact_judge_grades_a_self_history_run_against_the_models_own_images(
    small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stateful agent makes its own free choices and follows them under Self-History: the
    judge that reads its own images fails far fewer of its checks than one that does not."""
    from yanami.contract import read_rows
    from yanami.judges import ExactJudge
    from yanami.runner import evaluate as run_eval

    def failed(run: Path) -> int:
        rows = read_rows(run)
        return sum(not c.passed for v in rows.verdicts.values() for c in v.checks or [])

    run_eval(small, "reference:stateful", tmp_path / "own", history="self")
    monkeypatch.setattr(
        ExactJudge, "judge_image_in_history", lambda self, d, t, image, own: self.judge_image(d, t, image)
    )
    run_eval(small, "reference:stateful", tmp_path / "plain", history="self")
    mine, plain = failed(tmp_path / "own"), failed(tmp_path / "plain")
    assert plain >= 5 and mine * 4 <= plain, (mine, plain)


def test_where_the_worlds_placement_finds_no_room_a_model_may_place_anywhere_legible() -> None:
    """A new object goes anywhere that keeps the picture readable in the current view and
    follows the words (here: left of the cube); an object drawn over another is not legible."""
    import random

    from yanami.world._free import realize_anywhere
    from yanami.world._ops import View, apply_op
    from yanami.world._place import legible
    from yanami.world._scene import WorldObject, relation

    cube = WorldObject(id=0, shape="cube", colour="red", size="large", material="matte", x=0.0, y=0.0)
    sphere = WorldObject(id=1, shape="sphere", colour="gray", size="small", material="metal", x=1.5, y=1.5)
    view = View(Scene(objects=(cube, sphere)), 45.0, "studio")
    new = {"shape": "cylinder", "colour": "blue", "size": "small", "material": "metal", "x": 0.0, "y": 0.0}
    op = {"op": "add", "object": new}
    assert not legible(apply_op(op, view, [view]).scene, 45.0, 2)  # on top of the cube
    free = [{"slot": "position", "accept": [{"side": "left", "of": {"shape": "cube"}, "azimuth": 45.0}]}]
    for seed in range(5):
        mine = realize_anywhere(op, free, view, [view], random.Random(seed))
        assert mine is not None
        after = apply_op(mine, view, [view]).scene
        assert legible(after, 45.0, 2)
        added = next(o for o in after.objects if o.id == 2)
        assert relation(added, cube, 45.0)[0] == "left"
