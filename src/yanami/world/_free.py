"""Free choices: what a user's words leave open, as data, and realizing them afresh.

"Not brown, then": any other colour will do; "put it somewhere free": any valid spot;
"push it a bit to the left": any spot mainly to the left by at least the relation margin.
The world picks one realization for its ground truth, but a check may only test what the
words fix. So every target turn records its free choices in its hidden intent
(``intent["free"]``, a list of *slots*), and `realize` draws the operation again with
other choices. The composer keeps only checks that hold on every realization it draws, and
``yanami audit`` draws more (see `audit`) to prove that every check is decidable.

Slots (each one rewrites part of the operation)::

    {"slot": "value", "choices": [...]}             a set's new value (a substitute colour)
    {"slot": "material", "choices": [...]}          an added object's material
    {"slot": "position", "accept": [rule, ...]}     an added object's spot, or a moved
                                                    object's new spot (with what rests on it)
    {"slot": "layout"}                              every item's spot in a composite

Position rules::

    {"side": "left", "of": {where}, "azimuth": 45.0}   strictly on that side of an object
    {"push": "left", "from": [x, y], "azimuth": 45.0, "least": 0.5}
                                                    at least ``least`` that way from (x, y),
                                                    and further that way than sideways

Draws are seeded by the dialogue's seed and id, the turn and the draw's number, so the
build and the audit draw the same first realizations (the audit then draws more).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from yanami.contract import seeded
from yanami.world._ops import Op, OpError, View, apply_op
from yanami.world._place import legible, place, side_mask, valid
from yanami.world._predicates import displacement, select
from yanami.world._scene import EXTENT, Scene, WorldObject

Slot = dict[str, Any]
"""A choice an operation leaves open, as JSON: ``{"slot": "position" | "value" | "material" | "layout", ...}``."""

BUILD_DRAWS = 6
"""Realizations the composer draws per target turn; a check must hold on all of them."""
AUDIT_DRAWS = 16
"""Realizations ``yanami audit`` draws per target turn (the build's first ones, then fresh ones)."""
PUSH_LEAST = 0.5
"""The least distance an admissible realization of "a bit <direction>" goes (the check's margin is 0.45)."""


def draw_rng(seed: int, dialogue_id: str, turn: int, k: int) -> random.Random:
    """The generator of realization ``k`` of a turn's free choices."""
    return seeded("free", seed, dialogue_id, turn, k)


def accept_rule(rules: list[dict[str, Any]], scene: Scene) -> Callable[[np.ndarray], np.ndarray] | None:
    """A test of candidate ground positions (N, 2) for the position rules, or None for none."""
    if not rules:
        return None

    def accept(xy: np.ndarray) -> np.ndarray:
        ok = np.ones(len(xy), dtype=bool)
        for rule in rules:
            if "side" in rule:
                found = select(scene, rule["of"])
                if len(found) != 1:
                    return np.zeros(len(xy), dtype=bool)
                ok &= side_mask(xy, found[0], rule["side"], float(rule["azimuth"]))
            else:
                along, sideways = displacement(xy[:, 0], xy[:, 1], rule["from"], rule["push"], float(rule["azimuth"]))
                ok &= (along >= float(rule["least"])) & (np.abs(sideways) < along * float(rule.get("ratio", 1.0)))
        return ok

    return accept


def _object_of(op: Op, scene: Scene) -> WorldObject:
    """The object whose spot a position slot chooses: the one added, or the one moved."""
    if op["op"] == "add":
        spec = {k: v for k, v in op["object"].items() if k not in ("x", "y", "on")}
        return WorldObject(id=scene.next_id(), x=0.0, y=0.0, **spec)
    found = select(scene, op["where"])
    if len(found) != 1:
        raise OpError(f"{op['where']} selects {len(found)} objects")
    return found[0]


def _layout(op: Op, view: View, images: Sequence[View], rng: random.Random) -> Op | None:
    items = []
    scene = Scene()
    for i, item in enumerate(op["items"]):
        src = select(images[int(item["image"]) - 1].scene, item["where"])
        if len(src) != 1:
            return None
        placed = place(scene, src[0].model_copy(update={"id": i, "on": None}), rng)
        if placed is None:
            return None
        scene = Scene.model_construct(objects=(*scene.objects, placed))
        items.append({**item, "x": placed.x, "y": placed.y})
    return {**op, "items": items}


_T = TypeVar("_T")


def copied(data: _T) -> _T:
    """``copy.deepcopy(data)`` for the JSON-like data of operations, without its per-object
    dispatch: dicts, lists and scalars are copied here, anything else by ``copy.deepcopy``
    (parts that appear twice stay shared, as there)."""
    result: _T = _copied(data, {})
    return result


def _copied(x: Any, memo: dict[int, Any]) -> Any:
    t = type(x)
    if t is str or t is float or t is int or t is bool or x is None:
        return x
    if t is dict:
        y = memo.get(id(x))
        if y is None:
            y = memo[id(x)] = {}
            for k, v in x.items():
                y[_copied(k, memo)] = _copied(v, memo)
        return y
    if t is list:
        y = memo.get(id(x))
        if y is None:
            y = memo[id(x)] = []
            for v in x:
                y.append(_copied(v, memo))
        return y
    return copy.deepcopy(x, memo)


def realize(
    op: Op, free: list[Slot], view: View, images: Sequence[View], rng: random.Random, tries: int = 6
) -> Op | None:
    """``op`` with its free choices drawn again from ``rng``; None when no valid one is found."""
    found = _realized(op, free, view, images, rng, tries)
    return None if found is None else found[0]


def _realized(
    op: Op, free: list[Slot], view: View, images: Sequence[View], rng: random.Random, tries: int = 6
) -> tuple[Op, View] | None:
    """`realize`'s operation with the view it leads to (worked out to check it anyway)."""
    for _ in range(tries):
        out: Op | None = copied(op)
        assert out is not None
        for slot in free:
            if slot["slot"] == "value":
                out["value"] = rng.choice(slot["choices"])
            elif slot["slot"] == "material":
                out["object"]["material"] = rng.choice(slot["choices"])
        for slot in free:
            if out is None:
                break
            if slot["slot"] == "position":
                o = _object_of(out, view.scene)
                placed = place(view.scene, o, rng, tries=600, accept=accept_rule(slot.get("accept", []), view.scene))
                if placed is None:
                    out = None
                    break
                target = out["object"] if out["op"] == "add" else out
                target["x"], target["y"] = placed.x, placed.y
            elif slot["slot"] == "layout":
                out = _layout(out, view, images, rng)
        if out is None:
            continue
        try:
            new = apply_op(out, view, images)
        except (OpError, ValueError):
            continue
        if valid(new.scene):
            return out, new
    return None


def realize_anywhere(op: Op, free: list[Slot], view: View, images: Sequence[View], rng: random.Random) -> Op | None:
    """``op`` with its free choices drawn as a model may make them where `realize` finds no room
    (its own earlier choices crowded the scene): the spot anywhere that keeps the picture
    `legible` in the current view and follows the position rules; None when none is found."""
    position = next((s for s in free if s["slot"] == "position"), None)
    if position is None or op.get("op") not in ("add", "move"):
        return None
    accept = accept_rule(position.get("accept", []), view.scene)
    oid = _object_of(op, view.scene).id
    for _ in range(400):
        x, y = round(rng.uniform(-EXTENT, EXTENT), 2), round(rng.uniform(-EXTENT, EXTENT), 2)
        if accept is not None and not accept(np.array([[x, y]]))[0]:
            continue
        out = copied(op)
        for slot in free:
            if slot["slot"] == "value":
                out["value"] = rng.choice(slot["choices"])
            elif slot["slot"] == "material":
                out["object"]["material"] = rng.choice(slot["choices"])
        target = out["object"] if out["op"] == "add" else out
        target["x"], target["y"] = x, y
        try:
            new = apply_op(out, view, images)
        except (OpError, ValueError):
            continue
        if legible(new.scene, new.azimuth, oid):
            return out
    return None


def loose(op: Op, free: list[Slot], view: View, after: Scene) -> tuple[set[int], dict[int, set[str]]]:
    """What the free choices leave open in the scene after ``op``: the ids of objects whose
    spot is free, and per object id the attributes that are free."""
    spots: set[int] = set()
    attrs: dict[int, set[str]] = {}
    for slot in free:
        kind = slot["slot"]
        if kind == "layout":
            spots |= {o.id for o in after.objects}
        elif kind == "material":
            attrs.setdefault(view.scene.next_id(), set()).add("material")
        elif kind == "value":
            target = select(view.scene, op["where"])
            if target:
                attrs.setdefault(target[0].id, set()).add(op["attr"])
        elif kind == "position":
            if op["op"] == "add":
                spots.add(view.scene.next_id())
            else:
                target = select(view.scene, op["where"])
                if target:
                    spots.add(target[0].id)
                    spots |= {o.id for o in after.objects if o.on == target[0].id}
    return spots, attrs


def realizations(
    op: Op, free: list[Slot], view: View, images: Sequence[View], seed: int, dialogue_id: str, turn: int, draws: int
) -> list[View]:
    """The views of up to ``draws`` fresh realizations of a turn's free choices (none when it has none)."""
    if not free:
        return []
    out = []
    for k in range(draws):
        found = _realized(op, free, view, images, draw_rng(seed, dialogue_id, turn, k))
        if found is not None:
            out.append(found[1])
    return out
