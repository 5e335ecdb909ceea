"""The author's plan: yanami's own checks before any image is made, and the world's plans as the reference."""

from __future__ import annotations

import hashlib
import json

from yanami.construct._plan import Plan, plan_dialogue, plan_problems
from yanami.construct._standins import (
    StandIns,
    break_constraint,
    parse_instruction,
    scene_differences,
    scene_instruction,
    world_plan,
    world_pool,
)
from yanami.contract import DialogueMeta, ImagePart, ImageSource, Scenario
from yanami.world import compose_dialogue, render_png
from yanami.world._selfhistory import view_of


def _world(scenario: Scenario = Scenario.EDITING) -> tuple[dict, list[bytes]]:
    entries = [e for e in world_pool(1, 7) if e.scenario == scenario.value]
    offered = [e.data for e in entries if e.data is not None]
    group = entries[0].group
    did, seed = group.split("@")
    return world_plan(scenario.value, did, int(seed), offered), offered


def test_a_world_plan_passes_every_check_and_becomes_the_world_dialogue() -> None:
    for scenario in Scenario:
        raw, offered = _world(scenario)
        plan = Plan.model_validate(raw)
        assert plan_problems(plan, len(offered), bench=True) == []
        pool = [
            ImagePart(sha256=hashlib.sha256(b).hexdigest(), width=512, height=384, source=ImageSource.USER)
            for b in offered
        ]
        made = {}
        for i, t in enumerate(plan.turns):
            if t.image is not None:
                view = parse_instruction(t.image.instruction)
                data = render_png(view.scene, view.azimuth, view.style)
                made[i] = ImagePart(
                    sha256=hashlib.sha256(data).hexdigest(), width=512, height=384, source=ImageSource.ASSISTANT
                )
        d = plan_dialogue(plan, "c-1", scenario, pool, made, DialogueMeta(generator="construct"))
        world, _ = compose_dialogue(scenario, f"world-{scenario.value}-000000", 7)
        # the same conversation, checks and questions; images realized from the instructions alone
        assert [t.user.text() for t in d.turns] == [t.user.text() for t in world.turns]
        assert [c.text for c in d.checks()] == [c.text for c in world.checks()]
        assert [im.sha256 for im in d.images()] == [im.sha256 for im in world.images()]


def test_an_instruction_describes_its_scene_exactly() -> None:
    world, _ = compose_dialogue(Scenario.WORLD_MODELING, "world-world_modeling-000001", 3)
    for t in world.turns:
        view = view_of(t)
        if view is None:
            continue
        back = parse_instruction(scene_instruction(view))
        assert back is not None and back.scene == view.scene and back.azimuth == view.azimuth
        assert scene_differences(view.scene, back.scene) == []


def test_plan_problems_name_the_field() -> None:
    raw, offered = _world()
    bad = json.loads(json.dumps(raw))
    bad["turns"][0]["pool_images"] = [9]
    target = next(i for i, t in enumerate(bad["turns"]) if t["image"])
    bad["turns"][target]["image"]["inputs"] = ["turn:99"]
    bad["questions"][0]["answer"] = "G"
    bad["capabilities"] = bad["capabilities"][:3]
    problems = plan_problems(Plan.model_validate(bad), len(offered), bench=True)
    text = "\n".join(problems)
    assert "turns[0].pool_images: 9 is not an offered image" in text
    assert f"turns[{target}].image.inputs[0]: 'turn:99'" in text
    assert "questions[0].answer: G is not one of the 4 options" in text
    assert "capabilities: 3 listed, at least 4" in text


def test_a_plan_that_breaks_its_own_constraint_is_refused_before_any_image() -> None:
    for scenario in (Scenario.FUSION, Scenario.REASONING):
        raw, offered = _world(scenario)
        if not any(c["forbid"] for c in raw["constraints"]):
            continue
        broken = break_constraint(json.loads(json.dumps(raw)))
        # with the ban's words declared, yanami's own check finds it
        for c, original in zip(broken["constraints"], raw["constraints"], strict=True):
            c["forbid"] = original["forbid"]
        problems = plan_problems(Plan.model_validate(broken), len(offered), bench=True)
        assert any("forbids" in p for p in problems), problems
        # without them, the world-backed reviewer finds the instruction disagrees with the state
        hidden = break_constraint(json.loads(json.dumps(raw)))
        reply = json.loads(StandIns().review(f'<plan-ab12>\n{json.dumps(hidden)}\n</plan-ab12>\n"passed"'))
        assert reply["passed"] is False and "disagrees with the state" in reply["problems"][0]["problem"]
        clean = json.loads(StandIns().review(f'<plan-ab12>\n{json.dumps(raw)}\n</plan-ab12>\n"passed"'))
        assert clean == {"passed": True, "problems": []}
        return
    raise AssertionError("no world plan with a colour ban")


def test_the_stand_ins_draw_what_an_instruction_says_and_the_verifier_sees_a_fault() -> None:
    from yanami.construct._standins import REVISION_MARK, image_fault

    raw, _ = _world(Scenario.WORLD_MODELING)
    instruction = next(t["image"]["instruction"] for t in raw["turns"] if t["image"])
    view = parse_instruction(instruction)
    clean = StandIns().draw(instruction, "512x384")
    assert clean == render_png(view.scene, view.azimuth, view.style)
    ask = f'<request-ab12>\n{instruction}\n</request-ab12>\ns0: The image shows what was asked.\n"verdicts"'
    assert json.loads(StandIns().check(ask, clean)) == {"verdicts": {"s0": True}, "reason": ""}
    # every instruction gets a fault at rate 1; the revision request gets a clean image
    faulty = StandIns(fault_rate=1.0)
    assert image_fault(instruction, 1.0) in ("wrong-colour", "missing-object")
    bad = faulty.draw(instruction, "512x384")
    verdict = json.loads(StandIns().check(ask, bad))
    assert verdict["verdicts"] == {"s0": False} and verdict["reason"]
    assert faulty.draw(f"{instruction}\n\n{REVISION_MARK} by a reviewer.", "512x384") == clean
