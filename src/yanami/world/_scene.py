"""The scene model of the procedural world: objects on a ground plane, stacking, relations.

World coordinates: ``x`` and ``y`` on the ground, ``z`` up, in abstract units. Every object
is axis-aligned (no yaw), so the look of a cube depends only on the camera. Relations
(left, right, front, behind) are defined as in CLEVR, relative to the camera: along the
camera's right vector and its forward vector projected on the ground. Scenes are placed
with a margin along both of those axes, so no relation is ever ambiguous, in the base view
or after any orbit by a multiple of 90 degrees (which only swaps and flips the two axes).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Shape = Literal["cube", "sphere", "cylinder"]
Colour = Literal["gray", "red", "blue", "green", "brown", "purple", "cyan", "yellow"]
Size = Literal["small", "large"]
Material = Literal["matte", "metal"]

SHAPES: tuple[Shape, ...] = ("cube", "sphere", "cylinder")
COLOURS: dict[Colour, tuple[int, int, int]] = {
    "gray": (87, 87, 87),
    "red": (173, 35, 35),
    "blue": (42, 75, 215),
    "green": (29, 105, 20),
    "brown": (129, 74, 25),
    "purple": (129, 38, 192),
    "cyan": (41, 208, 208),
    "yellow": (255, 238, 51),
}
"""CLEVR's eight colours, as sRGB."""
SIZES: dict[Size, float] = {"small": 0.35, "large": 0.7}
"""Half-extent: a sphere's radius, half a cube's side, a cylinder's radius (its height is twice that)."""
MATERIALS: tuple[Material, ...] = ("matte", "metal")

EXTENT = 3.0
"""Object centres stay within [-EXTENT, EXTENT] on both ground axes."""
MARGIN = 0.45
"""Minimum distance between two ground objects along each camera axis."""

BASE_AZIMUTH = 45.0
"""The default camera looks at the scene diagonally, so cubes show two side faces and the top."""


class WorldObject(BaseModel):
    """One object of a scene."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: int = Field(ge=0)
    """Stable identity across the turns of a dialogue."""
    shape: Shape
    colour: Colour
    size: Size
    material: Material
    x: float
    y: float
    on: int | None = None
    """The id of the object this one rests on; None on the ground."""

    @property
    def half(self) -> float:
        """Half-extent in world units."""
        return SIZES[self.size]

    @property
    def height(self) -> float:
        """Height above its base."""
        return 2 * self.half

    def describe(self) -> str:
        """``large red metal cube``."""
        return f"{self.size} {self.colour} {self.material} {self.shape}"


class Scene(BaseModel):
    """Objects on the ground or on one another."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    objects: tuple[WorldObject, ...] = ()

    def by_id(self, oid: int) -> WorldObject:
        """The object with id ``oid``."""
        for o in self.objects:
            if o.id == oid:
                return o
        raise KeyError(oid)

    def base_z(self, o: WorldObject) -> float:
        """Height of the object's bottom: 0 on the ground, else the top of its support."""
        z = 0.0
        while o.on is not None:
            o = self.by_id(o.on)
            z += o.height
        return z

    def ground_objects(self) -> list[WorldObject]:
        """Objects standing on the ground."""
        return [o for o in self.objects if o.on is None]

    def supported_by(self, oid: int) -> WorldObject | None:
        """The object resting on ``oid``, if any."""
        return next((o for o in self.objects if o.on == oid), None)

    def next_id(self) -> int:
        """An id no object has."""
        return max((o.id for o in self.objects), default=-1) + 1


@lru_cache(maxsize=64)
def axes(azimuth: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """The camera's right and forward directions on the ground for a camera at ``azimuth`` degrees."""
    a = math.radians(azimuth)
    right = (math.cos(a), -math.sin(a))
    forward = (math.sin(a), math.cos(a))
    return right, forward


def camera_coords(o: WorldObject, azimuth: float) -> tuple[float, float]:
    """An object's ground position along the camera's right and forward axes."""
    (rx, ry), (fx, fy) = axes(azimuth)
    return o.x * rx + o.y * ry, o.x * fx + o.y * fy


Relation = Literal["left", "right", "front", "behind"]


def relation(a: WorldObject, b: WorldObject, azimuth: float) -> tuple[Relation, Relation]:
    """Where ``a`` is relative to ``b`` as the camera sees it: (left|right, front|behind)."""
    ar, af = camera_coords(a, azimuth)
    br, bf = camera_coords(b, azimuth)
    return ("left" if ar < br else "right"), ("front" if af < bf else "behind")


def pairs(scene: Scene) -> Iterator[tuple[WorldObject, WorldObject]]:
    """Ordered pairs of distinct objects that have spatial relations (stacked pairs excluded)."""
    objs = scene.objects
    roots = [_root(scene, o) for o in objs]  # once per object, not once per pair
    for a, ra in zip(objs, roots, strict=True):
        for b, rb in zip(objs, roots, strict=True):
            if a.id != b.id and ra != rb:
                yield a, b


def _root(scene: Scene, o: WorldObject) -> int:
    while o.on is not None:
        o = scene.by_id(o.on)
    return o.id


def well_separated(scene: Scene, candidate: WorldObject) -> bool:
    """Whether ``candidate`` (on the ground) keeps the relation margin to every ground object."""
    r, f = camera_coords(candidate, BASE_AZIMUTH)
    for o in scene.ground_objects():
        if o.id == candidate.id:
            continue
        orr, of = camera_coords(o, BASE_AZIMUTH)
        if abs(orr - r) < MARGIN or abs(of - f) < MARGIN:
            return False
    return True


def random_object(rng: random.Random, oid: int, **fixed: object) -> WorldObject:
    """An object with random attributes (any given in ``fixed`` are kept) at the origin."""
    attrs: dict[str, object] = {
        "shape": rng.choice(SHAPES),
        "colour": rng.choice(list(COLOURS)),
        "size": rng.choice(list(SIZES)),
        "material": rng.choice(MATERIALS),
    }
    attrs.update(fixed)
    return WorldObject.model_validate({"id": oid, "x": 0.0, "y": 0.0, **attrs})
