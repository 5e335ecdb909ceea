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
"""

from __future__ import annotations

from typing import Any

from yanami.world._scene import Scene, WorldObject, relation

ATTRIBUTES = ("shape", "colour", "size", "material")


def select(scene: Scene, where: dict[str, Any]) -> list[WorldObject]:
    """The objects whose attributes match every key of ``where``."""
    return [o for o in scene.objects if all(getattr(o, k) == v for k, v in where.items())]


def _one(scene: Scene, where: dict[str, Any]) -> WorldObject | None:
    found = select(scene, where)
    return found[0] if len(found) == 1 else None


def evaluate(predicate: dict[str, Any], scene: Scene, azimuth: float) -> bool:
    """Whether ``scene`` (seen from ``azimuth``) satisfies ``predicate``."""
    op = predicate["op"]
    if op == "exists":
        return bool(select(scene, predicate["where"]))
    if op == "absent":
        return not select(scene, predicate["where"])
    if op == "count":
        return len(select(scene, predicate["where"])) == predicate["n"]
    if op == "total":
        return len(scene.objects) == predicate["n"]
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
    if op == "on_ground":
        a = _one(scene, predicate["a"])
        return a is not None and a.on is None
    raise ValueError(f"unknown predicate op {op!r}")
