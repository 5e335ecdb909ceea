"""A change earns credit only as asked: what the turn leaves in place stays there (``stays``)."""

from __future__ import annotations

import io
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from yanami.store import Dataset
from yanami.world import build_world, parse_image, render_png
from yanami.world._agents import jittered
from yanami.world._camera import Camera
from yanami.world._hidden import turn_intent
from yanami.world._language import full_where
from yanami.world._place import random_scene
from yanami.world._predicates import STAY_ROLL, STAY_TOLERANCE, evaluate
from yanami.world._scene import Scene, WorldObject
from yanami.world._selfhistory import view_of

AZIMUTH = 45.0


def _obj(oid: int, x: float, y: float, **kw: Any) -> WorldObject:
    attrs: dict[str, Any] = {"shape": "cube", "colour": "red", "size": "large", "material": "matte"} | kw
    return WorldObject(id=oid, x=x, y=y, **attrs)


SCENE = Scene(
    objects=(
        _obj(0, -2.6, -2.4),
        _obj(1, 2.6, -1.0, shape="sphere", colour="blue", size="small"),
        _obj(2, 0.6, 2.7, shape="cylinder", colour="green", material="metal"),
        _obj(3, -1.0, 0.9, shape="sphere", colour="yellow"),
    )
)


def _stays(scene: Scene, listed: tuple[int, ...] = (0, 1, 2), others: int | None = 1) -> dict[str, Any]:
    objs = [o for o in scene.objects if o.id in listed]
    pred: dict[str, Any] = {
        "op": "stays",
        "objects": [{"where": {"shape": o.shape, "colour": o.colour}, "at": [o.x, o.y]} for o in objs],
        "tolerance": STAY_TOLERANCE,
        "roll": STAY_ROLL,
    }
    if others is not None:
        pred["others"] = others
    return pred


def _moved(scene: Scene, shift: dict[int, tuple[float, float]]) -> Scene:
    return Scene.model_construct(
        objects=tuple(
            o.model_copy(update={"x": o.x + shift.get(o.id, (0, 0))[0], "y": o.y + shift.get(o.id, (0, 0))[1]})
            for o in scene.objects
        )
    )


def test_what_the_turn_leaves_in_place_must_stay_and_the_asked_move_passes() -> None:
    pred = _stays(SCENE)
    assert evaluate(pred, SCENE, AZIMUTH)
    # the object the turn moves (3) is not listed: moving it as asked passes
    assert evaluate(pred, _moved(SCENE, {3: (1.0, -0.7)}), AZIMUTH)
    # "others" counts what else is there: nothing added, nothing taken away
    assert not evaluate(pred, Scene.model_construct(objects=SCENE.objects[:3]), AZIMUTH)
    assert not evaluate(pred, Scene.model_construct(objects=(*SCENE.objects, _obj(9, 2.5, 2.5, colour="cyan"))), AZIMUTH)
    assert evaluate(_stays(SCENE, others=None), Scene.model_construct(objects=SCENE.objects[:3]), AZIMUTH)
    # each listed object must be there, once
    assert not evaluate(pred, Scene.model_construct(objects=SCENE.objects[1:]), AZIMUTH)


@pytest.mark.parametrize("k", range(12))
def test_a_jittered_copy_fails_preservation(k: int) -> None:
    """Every object displaced by 0.2 (the least a jittered copy moves them), each its own way or
    all together: no turn of the picture explains it."""
    rng = random.Random(k)
    pred = _stays(SCENE, listed=(0, 1, 2, 3), others=0)
    own = {o.id: rng.uniform(0, 2 * math.pi) for o in SCENE.objects}
    each = _moved(SCENE, {i: (0.2 * math.cos(a), 0.2 * math.sin(a)) for i, a in own.items()})
    assert not evaluate(pred, each, AZIMUTH)
    assert not evaluate(pred, jittered(SCENE, rng), AZIMUTH)  # the jitter-* strategies' shift
    # a single object nudged by 0.2 fails too
    assert not evaluate(pred, _moved(SCENE, {k % 4: (0.2 * math.cos(own[0]), 0.2 * math.sin(own[0]))}), AZIMUTH)


@pytest.mark.parametrize("degrees", [-2.0, -1.0, 1.0, 2.0])
def test_a_picture_turned_about_its_centre_still_passes(degrees: float) -> None:
    """A whole picture turned by up to 2 degrees (as a photographed print may be) shifts every
    position the parser reads by up to 0.25, all one way round: the check undoes the turn."""
    cam = Camera(AZIMUTH)
    centre = np.array([cam.width / 2, cam.height / 2])
    t = math.radians(degrees)
    rot = np.array([[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]])
    objs = []
    for o in SCENE.objects:
        px = cam.project(np.array([o.x, o.y, o.half])) - centre
        x, y = cam.ground_point(*(rot @ px + centre), o.half)
        objs.append(o.model_copy(update={"x": x, "y": y}))
    turned = Scene.model_construct(objects=tuple(objs))
    shift = max(math.hypot(a.x - b.x, a.y - b.y) for a, b in zip(SCENE.objects, objs, strict=True))
    if abs(degrees) == 2.0:
        assert shift > STAY_TOLERANCE  # more than the tolerance alone allows
    assert evaluate(_stays(SCENE, listed=(0, 1, 2, 3), others=0), turned, AZIMUTH)


def test_through_the_parser_a_turned_picture_passes_and_a_jittered_one_fails() -> None:
    scene = random_scene(random.Random(4))
    png = render_png(scene, AZIMUTH, "studio")
    pred = {
        "op": "stays",
        "objects": [{"where": full_where(o), "at": [o.x, o.y]} for o in scene.objects],
        "others": 0,
        "tolerance": STAY_TOLERANCE,
        "roll": STAY_ROLL,
    }
    assert evaluate(pred, parse_image(png, AZIMUTH).to_scene(), AZIMUTH)
    with Image.open(io.BytesIO(png)) as im:
        for degrees in (-2, 2):
            buf = io.BytesIO()
            im.convert("RGB").rotate(degrees, resample=Image.Resampling.BICUBIC).save(buf, format="PNG")
            assert evaluate(pred, parse_image(buf.getvalue(), AZIMUTH).to_scene(), AZIMUTH), degrees
    shifted = render_png(jittered(scene, random.Random(0), 0.2, 0.2), AZIMUTH, "studio")
    assert not evaluate(pred, parse_image(shifted, AZIMUTH).to_scene(), AZIMUTH)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("stays") / "small"
    build_world(out, per_scenario=2, seed=5)
    return out


def test_target_turns_check_that_what_they_leave_stays(small: Path) -> None:
    """Most target turns carry a ``stays`` check; the ground truth passes it, a jittered copy of
    the ground truth fails it, and so does the latest picture jittered."""
    turns = with_stays = 0
    for d in Dataset(small).read_all():
        before = None
        for t in d.turns:
            view = view_of(t)
            if t.checks and before is not None and isinstance(turn_intent(t).op, dict):
                turns += 1
                preds = [c.hidden.predicate for c in t.checks if c.hidden.predicate["op"] == "stays"]  # type: ignore[index]
                for pred in preds:
                    assert isinstance(pred, dict) and view is not None
                    with_stays += 1
                    assert evaluate(pred, view.scene, view.azimuth)
                    rng = random.Random(t.index)
                    assert not evaluate(pred, jittered(view.scene, rng, 0.2, 0.2), view.azimuth)
                    assert not evaluate(pred, jittered(before.scene, rng, 0.2, 0.2), view.azimuth)
            if view is not None:
                before = view
    assert with_stays >= 0.75 * turns > 0
