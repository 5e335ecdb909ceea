"""Operations on world state: what a user's instruction does, as data.

Every user instruction of a world dialogue is recorded (in the turn's hidden ``intent``)
as one of these operations, fully specified (positions included), so applying it is
deterministic: the reference agents replay them, and the builder derives ground truth
from them. Objects are selected by ``where`` filters on attributes, resolved in the
scene the operation applies to.

    {"op": "add", "object": {shape, colour, size, material, x, y}}
    {"op": "remove", "where": {...}}                what rested on it falls to the ground
    {"op": "set", "where": {...}, "attr": "colour" | "material" | "size", "value": ...}
    {"op": "set", ..., "reverts": 3}               the same, naming the picture whose value it brings
                                                    back (a correction: under Self-History, the value
                                                    the model's own picture 3 shows, see _selfhistory)
    {"op": "move", "where": {...}, "x": .., "y": ..}  what rests on it moves along
    {"op": "swap", "a": {...}, "b": {...}}          exchange two ground objects' positions
    {"op": "stack", "where": {...}, "on": {...}}    put a small object on a large cube or cylinder
    {"op": "orbit", "azimuth": 135.0}               the camera moves; the scene does not
    {"op": "restore", "image": 2}                   back to the state shown in image 2 (1-based)
    {"op": "compose", "items": [{"image": 1, "where": {...}, "x": .., "y": ..}, ...], "style": "sand"}
                                                    a new scene of objects taken from earlier images
    {"op": "batch", "ops": [...]}                    several operations, in order
    {"op": "none"}                                  nothing changes (a refusal, a question)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from yanami.world._predicates import Where, select
from yanami.world._scene import Scene, WorldObject

Op = dict[str, Any]
"""An operation, as JSON (the forms above)."""


class OpError(ValueError):
    """An operation that does not apply to the scene (no unique target, say)."""


@dataclass(frozen=True)
class View:
    """What an image shows: a scene, from an azimuth, in a style."""

    scene: Scene
    azimuth: float
    style: str


def _one(scene: Scene, where: Where) -> WorldObject:
    found = select(scene, where)
    if len(found) != 1:
        raise OpError(f"{where} selects {len(found)} objects")
    return found[0]


def _replace(scene: Scene, objs: list[WorldObject]) -> Scene:
    return Scene.model_construct(objects=tuple(sorted(objs, key=lambda o: o.id)))  # already valid objects


def apply_op(op: Op, view: View, images: Sequence[View]) -> View:
    """The view after ``op``; ``images`` are the dialogue's earlier images, in order."""
    kind = op["op"]
    scene = view.scene
    objs = list(scene.objects)
    if kind == "none":
        return view
    if kind == "batch":
        for step in op["ops"]:
            view = apply_op(step, view, images)
        return view
    if kind == "orbit":
        return View(scene, float(op["azimuth"]), view.style)
    if kind == "restore":
        return images[int(op["image"]) - 1]
    if kind == "compose":
        out: list[WorldObject] = []
        for i, item in enumerate(op["items"]):
            src = _one(images[int(item["image"]) - 1].scene, item["where"])
            out.append(src.model_copy(update={"id": i, "x": float(item["x"]), "y": float(item["y"]), "on": None}))
        return View(Scene(objects=tuple(out)), view.azimuth, str(op.get("style", view.style)))
    if kind == "add":
        spec = dict(op["object"])
        on = spec.pop("on", None)
        support = _one(scene, on) if on else None
        o = WorldObject(id=scene.next_id(), on=support.id if support else None, **spec)
        return View(_replace(scene, [*objs, o]), view.azimuth, view.style)
    if kind == "remove":
        target = _one(scene, op["where"])
        kept = [o.model_copy(update={"on": None}) if o.on == target.id else o for o in objs if o.id != target.id]
        return View(_replace(scene, kept), view.azimuth, view.style)
    if kind == "set":
        target = _one(scene, op["where"])
        changed = target.model_copy(update={op["attr"]: op["value"]})
        return View(_replace(scene, [changed if o.id == target.id else o for o in objs]), view.azimuth, view.style)
    if kind == "move":
        target = _one(scene, op["where"])
        x, y = float(op["x"]), float(op["y"])
        moved = [o.model_copy(update={"x": x, "y": y}) if o.id == target.id or o.on == target.id else o for o in objs]
        if target.on is not None:  # lifted off its support onto the ground
            moved = [o.model_copy(update={"on": None}) if o.id == target.id else o for o in moved]
        return View(_replace(scene, moved), view.azimuth, view.style)
    if kind == "swap":
        a, b = _one(scene, op["a"]), _one(scene, op["b"])
        if a.on is not None or b.on is not None:
            raise OpError("only ground objects swap places")
        pos = {a.id: (b.x, b.y), b.id: (a.x, a.y)}
        root = {o.id: (o.on if o.on in pos else o.id) for o in objs}
        swapped = [
            o.model_copy(update={"x": pos[root[o.id]][0], "y": pos[root[o.id]][1]}) if root[o.id] in pos else o
            for o in objs
        ]
        return View(_replace(scene, swapped), view.azimuth, view.style)
    if kind == "stack":
        top, support = _one(scene, op["where"]), _one(scene, op["on"])
        stacked = [
            o.model_copy(update={"x": support.x, "y": support.y, "on": support.id}) if o.id == top.id else o
            for o in objs
        ]
        return View(_replace(scene, stacked), view.azimuth, view.style)
    raise OpError(f"unknown operation {kind!r}")
