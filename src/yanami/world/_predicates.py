"""Check predicates: the machine-readable form of a visual check, evaluated on a scene.

A predicate is a small JSON object. Objects are selected by a ``where`` filter on their
attributes (``shape``, ``colour``, ``size``, ``material``); relations are read in the
camera frame of the azimuth the image was rendered from, as the parser reports them.

    {"op": "exists", "where": {...}}                      at least one object matches
    {"op": "absent", "where": {...}}                      none matches
    {"op": "count", "where": {...}, "n": 3}               exactly n match
    {"op": "total", "n": 5}                               exactly n objects in all
    {"op": "attribute", "where": {...}, "attr": "colour", "value": "blue"}
                                                          exactly one object matches where,
                                                          and its attr has that value
    {"op": "relation", "a": {...}, "b": {...}, "rel": "left" | "right" | "front" | "behind"}
                                                          a and b each match exactly one object
    {"op": "on", "a": {...}, "b": {...}}                  a rests on b
    {"op": "on_ground", "a": {...}}                       a rests on the ground
    {"op": "not_attribute", "where": {...}, "attr": "colour", "values": ["brown", "red"]}
                                                          exactly one object matches where,
                                                          and its attr is none of values (a
                                                          refused colour; the value it had before)
    {"op": "moved", "where": {...}, "from": [x, y], "direction": "left", "margin": 0.45,
     "tolerance": 0.1}                                    exactly one object matches where, and
                                                          from its earlier ground position (shown
                                                          in the previous image) it went at least
                                                          margin in direction, in the camera frame,
                                                          and further that way than sideways, both
                                                          up to tolerance (the parser's error on a
                                                          position, so that a push just at the
                                                          limit is not judged by noise)
    {"op": "stays", "where": {...}, "at": [x, y], "frame": [{"where": {...}, "at": [x, y]}, ...],
     "most": 5, "tolerance": 0.12, "roll": 2.5}
                                                          exactly one object matches where, and it
                                                          stands at the ground position "at" (where
                                                          it stood, or the place the words fix for
                                                          it) up to tolerance, once the picture's
                                                          roll (its turn about its own centre, at
                                                          most roll degrees) is undone: the turn is
                                                          read from it and from the "frame" objects
                                                          (the others whose places the words fix)
                                                          found once each (see `placed`); where
                                                          "most" is given, the picture holds at
                                                          most that many objects (nothing added
                                                          beside what stays)

Where the user leaves a choice open (a substitute for a refused colour, a spot on a side,
how far "a bit" is), a check states the requirement with these, never the world's own pick.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from yanami.world._camera import Camera
from yanami.world._scene import Scene, WorldObject, axes, relation

Where = dict[str, Any]
"""A ``where`` filter, as JSON: attribute (or ``id``) -> the value an object must have."""
Predicate = dict[str, Any]
"""A predicate, as JSON (the forms above)."""

ATTRIBUTES = ("shape", "colour", "size", "material")


def select(scene: Scene, where: Where) -> list[WorldObject]:
    """The objects whose attributes match every key of ``where``."""
    items = where.items()
    out = []
    for o in scene.objects:  # called a great deal: a plain loop, no generator per object
        for k, v in items:
            if getattr(o, k) != v:
                break
        else:
            out.append(o)
    return out


def _one(scene: Scene, where: Where) -> WorldObject | None:
    found = select(scene, where)
    return found[0] if len(found) == 1 else None


def evaluate(predicate: Predicate, scene: Scene, azimuth: float) -> bool:
    """Whether ``scene`` (seen from ``azimuth``) satisfies ``predicate``."""
    op = predicate["op"]
    if op == "exists":
        return bool(select(scene, predicate["where"]))
    if op == "absent":
        return not select(scene, predicate["where"])
    if op == "count":
        n: int = predicate["n"]
        return len(select(scene, predicate["where"])) == n
    if op == "total":
        total: int = predicate["n"]
        return len(scene.objects) == total
    if op == "attribute":
        o = _one(scene, predicate["where"])
        return o is not None and getattr(o, predicate["attr"]) == predicate["value"]
    if op in ("relation", "on"):
        a, b = _one(scene, predicate["a"]), _one(scene, predicate["b"])
        if a is None or b is None or a.id == b.id:
            return False
        if op == "on":
            return a.on == b.id
        if a.on == b.id or b.on == a.id:
            return False
        horizontal, depth = relation(a, b, azimuth)
        return predicate["rel"] in (horizontal, depth)
    if op == "not_attribute":
        o = _one(scene, predicate["where"])
        return o is not None and getattr(o, predicate["attr"]) not in predicate["values"]
    if op == "moved":
        o = _one(scene, predicate["where"])
        if o is None:
            return False
        along, sideways = displacement(o.x, o.y, predicate["from"], predicate["direction"], azimuth)
        slack = float(predicate.get("tolerance", 0.0))
        return bool(along >= predicate["margin"] - slack and abs(sideways) < along + slack)
    if op == "stays":
        return placed(predicate, scene, azimuth)
    if op == "on_ground":
        a = _one(scene, predicate["a"])
        return a is not None and a.on is None
    raise ValueError(f"unknown predicate op {op!r}")


DIRECTIONS: dict[str, tuple[int, int]] = {"left": (-1, 0), "right": (1, 0), "front": (0, -1), "behind": (0, 1)}
"""Each relation as a unit step along the camera's (right, forward) axes: "front" is toward the camera."""


def displacement(x: Any, y: Any, start: Any, direction: str, azimuth: float) -> tuple[Any, Any]:
    """How far (x, y) lies from ``start`` along ``direction`` and sideways to it, in the camera
    frame of ``azimuth`` (works on numpy arrays of positions too)."""
    (rx, ry), (fx, fy) = axes(azimuth)
    dx, dy = x - start[0], y - start[1]
    right, forward = dx * rx + dy * ry, dx * fx + dy * fy
    sr, sf = DIRECTIONS[direction]
    if sr:
        return right * sr, forward
    return forward * sf, right


def map_relation(rel: str, from_azimuth: float, to_azimuth: float) -> str:
    """The relation word, in the camera frame of ``to_azimuth``, for the side ``rel`` names
    in the frame of ``from_azimuth`` (exact for orbits by multiples of 90 degrees)."""
    (r0x, r0y), (f0x, f0y) = axes(from_azimuth)
    sr, sf = DIRECTIONS[rel]
    vx, vy = sr * r0x + sf * f0x, sr * r0y + sf * f0y
    (r1x, r1y), (f1x, f1y) = axes(to_azimuth)
    right, forward = vx * r1x + vy * r1y, vx * f1x + vy * f1y
    if abs(right) >= abs(forward):
        return "right" if right > 0 else "left"
    return "behind" if forward > 0 else "front"


STAY_TOLERANCE = 0.12
"""How far (world units) an object the turn leaves in place may stand from where it stood: the
parser's error on a position (under 0.05 on a clean render, through JPEG, tone, crops and
resizing alike) twice over (a model redraws from its own reading of the earlier picture), and
well under the 0.2 by which a redrawn copy's objects are displaced at the least."""
STAY_ROLL = 2.5
"""The largest turn of the whole picture about its centre (degrees) that `placed` undoes: a
photographed or re-encoded picture may be turned by a degree or two, which shifts every ground
position the parser reads by up to 0.25, all together and all one way round the centre."""


def placed(predicate: Predicate, scene: Scene, azimuth: float) -> bool:
    """Whether a ``stays`` predicate holds (see the module docstring).

    Positions are compared in the picture: each ground position is projected by the camera of
    ``azimuth``, the turn about the picture's centre that brings each expected position onto
    the found one is measured (for the object and for each frame object found once), the
    median of those turns (within ``roll``) is undone, and the object's distance from its
    expected place is measured back on the ground. A turn of the whole picture is one number
    for every object; objects displaced each their own way, or all shifted one way, are not
    explained by it."""
    o = _one(scene, predicate["where"])
    if o is None or len(scene.objects) > int(predicate.get("most", len(scene.objects))):
        return False
    tolerance = float(predicate["tolerance"])
    if math.hypot(o.x - predicate["at"][0], o.y - predicate["at"][1]) <= tolerance:
        return True  # where it stood, whatever the others say about the picture's turn
    pairs = [(o, predicate["at"])]
    for entry in predicate.get("frame", []):
        other = _one(scene, entry["where"])
        if other is not None and all(other.id != p.id for p, _ in pairs):
            pairs.append((other, entry["at"]))
    heights = [_centre_height(p, scene) for p, _ in pairs]
    want = np.array([[*at, h] for (_, at), h in zip(pairs, heights, strict=True)], dtype=float)
    got = np.array([[p.x, p.y, h] for (p, _), h in zip(pairs, heights, strict=True)], dtype=float)
    # the turn is read from the frame where there is one: the object is not its own witness
    off = residuals(want, got, azimuth, float(predicate.get("roll", 0.0)), slice(1, None) if len(pairs) > 1 else None)
    return bool(off[0] <= tolerance)


def _centre_height(o: WorldObject, scene: Scene) -> float:
    """The height of an object's centre (on the ground, or on its support)."""
    below = scene.by_id(o.on) if o.on is not None else None
    return o.half + (below.height if below is not None else 0.0)


def residuals(
    want: np.ndarray, got: np.ndarray, azimuth: float, roll: float, witnesses: slice | None = None
) -> np.ndarray:
    """Per object, the ground distance between where it stands (``got``, rows x, y, centre
    height) and where it should (``want``), once the picture's turn about its centre is undone:
    the median of the turns that bring each of the ``witnesses`` (rows; all by default) onto
    where it stands, weighted by its squared distance from the centre, at most ``roll`` degrees
    (an object out of place does not drag the others with it)."""
    cam = Camera(azimuth)
    centre = np.array([cam.width / 2, cam.height / 2])
    p, q = cam.project(want) - centre, cam.project(got) - centre
    w = slice(None) if witnesses is None else witnesses
    angles = np.arctan2(p[w, 0] * q[w, 1] - p[w, 1] * q[w, 0], np.sum(p[w] * q[w], axis=1))
    # weighted by the squared distance from the centre: near it, the parser's error is a large angle
    weights = np.sum(p[w] ** 2, axis=1)
    order = np.argsort(angles)
    cumulative = np.cumsum(weights[order])
    turn = float(angles[order][int(np.searchsorted(cumulative, cumulative[-1] / 2))])
    limit = math.radians(roll)
    turn = min(max(turn, -limit), limit)
    c, s = math.cos(turn), math.sin(turn)
    turned = np.stack([c * p[:, 0] - s * p[:, 1], s * p[:, 0] + c * p[:, 1]], axis=1) + centre
    out = []
    for (x, y), (gx, gy, h) in zip(turned, got, strict=True):
        ex, ey = cam.ground_point(float(x), float(y), float(h))
        out.append(math.hypot(gx - ex, gy - ey))
    return np.array(out)
