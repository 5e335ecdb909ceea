"""Scenes, placement rules, relations and operations."""

from __future__ import annotations

import random

import pytest

from yanami.world import VIEWS, Scene, View, WorldObject, apply_op, random_scene, relation, valid
from yanami.world._ops import OpError
from yanami.world._place import stack_box
from yanami.world._scene import MARGIN, camera_coords, pairs


def obj(oid: int, **kw: object) -> WorldObject:
    base = {"shape": "cube", "colour": "red", "size": "large", "material": "matte", "x": 0.0, "y": 0.0}
    base.update(kw)
    return WorldObject(id=oid, **base)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(12))
def test_random_scenes_are_valid_and_unambiguous(seed: int) -> None:
    scene = random_scene(random.Random(seed), n=random.Random(seed).randint(3, 6), stack_chance=0.4)
    assert valid(scene)
    for a, b in pairs(scene):
        if a.on is None and b.on is None:
            ar, af = camera_coords(a, VIEWS[0])
            br, bf = camera_coords(b, VIEWS[0])
            assert abs(ar - br) >= MARGIN and abs(af - bf) >= MARGIN
    kinds = [(o.shape, o.colour, o.size, o.material) for o in scene.objects]
    assert len(set(kinds)) == len(kinds)
    for az in VIEWS:
        boxes = [stack_box(scene, o, az) for o in scene.ground_objects()]
        for i, a in enumerate(boxes):
            assert a[0] >= 0 and a[2] <= 512 and a[1] >= 0 and a[3] <= 384
            for b in boxes[i + 1 :]:
                assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]


def test_relations_flip_with_a_half_orbit() -> None:
    a, b = obj(0, x=-2.0, y=-1.0), obj(1, colour="blue", x=2.0, y=1.5)
    first = relation(a, b, VIEWS[0])
    opposite = relation(a, b, VIEWS[2])
    assert {first[0], opposite[0]} == {"left", "right"}
    assert {first[1], opposite[1]} == {"front", "behind"}


def test_invalid_scenes() -> None:
    twins = Scene(objects=(obj(0, x=-2, y=-2), obj(1, x=2, y=2)))
    assert not valid(twins)  # identical objects cannot be told apart
    on_sphere = Scene(objects=(obj(0, shape="sphere"), obj(1, size="small", colour="blue", on=0)))
    assert not valid(on_sphere)
    same_colour_stack = Scene(objects=(obj(0), obj(1, size="small", on=0)))
    assert not valid(same_colour_stack)


def test_operations() -> None:
    scene = Scene(
        objects=(
            obj(0, x=-2.0, y=-1.0),
            obj(1, shape="sphere", colour="blue", size="small", x=-2.0, y=-1.0, on=None),
            obj(2, shape="cylinder", colour="green", x=2.0, y=1.5),
        )
    )
    scene = Scene(
        objects=(
            scene.objects[0],
            scene.objects[2],
            obj(3, shape="cube", colour="cyan", size="small", x=-2.0, y=-1.0, on=0),
        )
    )
    v = View(scene, VIEWS[0], "studio")
    removed = apply_op({"op": "remove", "where": {"shape": "cube", "size": "large"}}, v, [])
    fallen = next(o for o in removed.scene.objects if o.colour == "cyan")
    assert fallen.on is None and (fallen.x, fallen.y) == (-2.0, -1.0)
    moved = apply_op({"op": "move", "where": {"colour": "red"}, "x": 0.5, "y": 0.5}, v, [])
    top = next(o for o in moved.scene.objects if o.colour == "cyan")
    assert (top.x, top.y, top.on) == (0.5, 0.5, 0)
    recoloured = apply_op({"op": "set", "where": {"shape": "cylinder"}, "attr": "colour", "value": "yellow"}, v, [])
    assert any(o.colour == "yellow" for o in recoloured.scene.objects)
    orbit = apply_op({"op": "orbit", "azimuth": 135.0}, v, [])
    assert orbit.azimuth == 135.0 and orbit.scene == scene
    assert apply_op({"op": "restore", "image": 1}, orbit, [v]) == v
    with pytest.raises(OpError):
        apply_op({"op": "remove", "where": {"size": "large"}}, v, [])  # two match
