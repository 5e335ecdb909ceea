"""Placing objects so that every relation is unambiguous and every object is fully visible.

A scene is *valid* when, seen from the base azimuth and from each orbit by 90, 180 and 270
degrees: every object lies inside the image with a border, no two stacks (an object and
what rests on it) overlap on screen, and any two ground objects are at least `MARGIN`
apart along both camera axes. Stacks hold one small object on a large cube or cylinder,
in a different colour from its support, so the parser can tell them apart. No two
objects are identical in all four attributes, so words can always single one out.
"""

from __future__ import annotations

import random
from functools import lru_cache

import numpy as np

from yanami.world._camera import HEIGHT, WIDTH, Camera
from yanami.world._scene import (
    BASE_AZIMUTH,
    COLOURS,
    EXTENT,
    Scene,
    WorldObject,
    random_object,
    well_separated,
)

VIEWS = tuple(BASE_AZIMUTH + k * 90.0 for k in range(4))
"""The four azimuths a scene must look right from."""
GAP = 4
"""Minimum screen gap between two stacks, and between an object and the image border, in pixels."""


@lru_cache(maxsize=16)
def _camera(azimuth: float) -> Camera:
    return Camera(azimuth, WIDTH, HEIGHT)


def screen_box(o: WorldObject, base: float, azimuth: float) -> tuple[float, float, float, float]:
    """The object's projected bounding box (x0, y0, x1, y1) at the default image size."""
    h = o.half
    zs = (base, base + 2 * h)
    corners = np.array([[o.x + sx * h, o.y + sy * h, z] for sx in (-1, 1) for sy in (-1, 1) for z in zs])
    p = _camera(azimuth).project(corners)
    x0, y0 = p.min(axis=0)
    x1, y1 = p.max(axis=0)
    return float(x0), float(y0), float(x1), float(y1)


def stack_box(scene: Scene, root: WorldObject, azimuth: float) -> tuple[float, float, float, float]:
    """The union of the screen boxes of a ground object and everything stacked on it."""
    boxes = []
    o: WorldObject | None = root
    while o is not None:
        boxes.append(screen_box(o, scene.base_z(o), azimuth))
        o = scene.supported_by(o.id)
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def _apart(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[2] + GAP <= b[0] or b[2] + GAP <= a[0] or a[3] + GAP <= b[1] or b[3] + GAP <= a[1]


def _inside(b: tuple[float, float, float, float]) -> bool:
    return b[0] >= GAP and b[1] >= GAP and b[2] <= WIDTH - GAP and b[3] <= HEIGHT - GAP


def valid(scene: Scene) -> bool:
    """Whether the scene is valid (see the module's docstring)."""
    ground = scene.ground_objects()
    kinds = {(o.shape, o.colour, o.size, o.material) for o in scene.objects}
    if len(kinds) != len(scene.objects):
        return False  # two identical objects could not be told apart by words
    for o in scene.objects:
        if o.on is not None:
            support = scene.by_id(o.on)
            if (
                support.shape == "sphere"
                or support.on is not None
                or o.size != "small"
                or support.size != "large"
                or o.colour == support.colour
                or (o.x, o.y) != (support.x, support.y)
                or sum(1 for p in scene.objects if p.on == support.id) > 1
            ):
                return False
    for o in ground:
        if abs(o.x) > EXTENT or abs(o.y) > EXTENT or not well_separated(scene, o):
            return False
    for az in VIEWS:
        boxes = [stack_box(scene, o, az) for o in ground]
        if not all(_inside(b) for b in boxes):
            return False
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                if not _apart(boxes[i], boxes[j]):
                    return False
    return True


def place(scene: Scene, o: WorldObject, rng: random.Random, tries: int = 200) -> WorldObject | None:
    """``o`` moved to a random ground position where the scene stays valid, or None."""
    for _ in range(tries):
        x = round(rng.uniform(-EXTENT, EXTENT), 2)
        y = round(rng.uniform(-EXTENT, EXTENT), 2)
        moved = o.model_copy(update={"x": x, "y": y, "on": None})
        rest = tuple(p if p.id != o.id else moved for p in scene.objects)
        if o.id not in {p.id for p in scene.objects}:
            rest = (*rest, moved)
        # Anything stacked on ``o`` moves with it.
        rest = tuple(p.model_copy(update={"x": x, "y": y}) if p.on == o.id else p for p in rest)
        if valid(Scene(objects=rest)):
            return moved
    return None


def with_object(scene: Scene, o: WorldObject) -> Scene:
    """The scene with ``o`` added or replaced (by id); objects on it follow its position."""
    objs = [p for p in scene.objects if p.id != o.id]
    objs = [p.model_copy(update={"x": o.x, "y": o.y}) if p.on == o.id else p for p in objs]
    return Scene(objects=tuple(sorted([*objs, o], key=lambda p: p.id)))


def can_stack(scene: Scene, top: WorldObject, support: WorldObject) -> bool:
    """Whether ``top`` may rest on ``support`` (it is then valid)."""
    moved = top.model_copy(update={"x": support.x, "y": support.y, "on": support.id})
    return valid(with_object(Scene(objects=tuple(p for p in scene.objects if p.id != top.id)), moved))


def random_scene(rng: random.Random, n: int | None = None, stack_chance: float = 0.25) -> Scene:
    """A valid scene of ``n`` objects (3 to 6 when not given), sometimes with a stack."""
    n = n or rng.randint(3, 6)
    for _ in range(100):
        scene = Scene()
        for oid in range(n):
            o = random_object(rng, oid)
            if oid and rng.random() < stack_chance:
                supports = [
                    p
                    for p in scene.ground_objects()
                    if p.shape != "sphere" and p.size == "large" and scene.supported_by(p.id) is None
                ]
                if supports:
                    support = rng.choice(supports)
                    top = random_object(
                        rng,
                        oid,
                        size="small",
                        colour=rng.choice([c for c in COLOURS if c != support.colour]),
                    )
                    top = top.model_copy(update={"x": support.x, "y": support.y, "on": support.id})
                    if valid(with_object(scene, top)):
                        scene = with_object(scene, top)
                        continue
            placed = place(scene, o, rng)
            if placed is None:
                break
            scene = with_object(scene, placed)
        else:
            return scene
    raise RuntimeError("could not place a scene; this is a bug in the world's placement rules")
