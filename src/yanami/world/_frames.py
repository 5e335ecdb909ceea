"""Reading a candidate as a person would: in the frame it was drawn in, and not as new when it is an old picture.

The world's floor looks the same from every side, so a picture does not say where its camera
stood: the parser reads ground positions for the azimuth it is given, and reading the same
picture for another azimuth turns every position about the scene's centre (exactly; see
`in_frame`). Two rules follow, both decided on scenes, so the exact judge (on parsed
pictures) and ``yanami audit`` (on the world's own scenes) apply the same ones:

- *a copy earns no change*: a candidate that reproduces a picture the dialogue showed
  earlier (the same objects at the same places, read in that picture's frame) is that
  picture, not a new one. Unless the turn asks for exactly that picture back, it gets no
  credit for a check that needs a change (one the latest picture shown fails): copying the
  first picture does not carry out a correction that happens to restore something in it;
- *the frame it was drawn in*: where the objects that the turn does not move stand where
  another viewpoint would show them (a quarter, half or three quarters around), the picture
  shows the scene from there, not from where the turn asked. Its relations read in the
  wrong view, and a position compared with where an object stood moves with the camera:
  checks of either kind get no credit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from yanami.contract import Dialogue
from yanami.world._ops import View
from yanami.world._predicates import Predicate, evaluate
from yanami.world._scene import Scene, WorldObject
from yanami.world._selfhistory import view_of

POSITION_TOLERANCE = 0.3
"""How far (world units) an object may stand from where it stood and still be the same picture
(well above the parser's error on a position, well under the relation margin)."""
FRAME_EVIDENCE = 2
"""How many more objects another viewpoint must explain than the asked one, to be the frame."""
FRAME_DEPENDENT = frozenset({"relation", "moved"})
"""Predicates whose truth depends on the viewpoint a picture is read from."""


def in_frame(scene: Scene, azimuth: float, other: float) -> Scene:
    """``scene`` as read from a camera at ``azimuth``, read instead as if from ``other``: every
    ground position turned by ``azimuth - other`` degrees about the scene's centre."""
    t = math.radians(azimuth - other)
    c, s = math.cos(t), math.sin(t)
    return Scene.model_construct(
        objects=tuple(o.model_copy(update={"x": o.x * c - o.y * s, "y": o.x * s + o.y * c}) for o in scene.objects)
    )


def _key(o: WorldObject, scene: Scene) -> tuple[str, str, str, str, tuple[str, ...] | None]:
    support = scene.by_id(o.on) if o.on is not None else None
    below = None if support is None else (support.shape, support.colour, support.size, support.material)
    return (o.shape, o.colour, o.size, o.material, below)


def matched(a: Scene, b: Scene, tolerance: float = POSITION_TOLERANCE) -> int:
    """How many objects of ``a`` have an object of ``b`` with the same attributes (and support)
    within ``tolerance`` of their place, each object of ``b`` used once."""
    free = list(b.objects)
    n = 0
    for o in a.objects:
        key = _key(o, a)
        near = [p for p in free if _key(p, b) == key and math.hypot(p.x - o.x, p.y - o.y) <= tolerance]
        if near:
            free.remove(min(near, key=lambda p: math.hypot(p.x - o.x, p.y - o.y)))
            n += 1
    return n


def same_picture(a: Scene, b: Scene, tolerance: float = POSITION_TOLERANCE) -> bool:
    """Whether two scenes show the same objects at the same places (read in the same frame)."""
    return len(a.objects) == len(b.objects) and matched(a, b, tolerance) == len(a.objects)


@dataclass(frozen=True)
class Shown:
    """A picture the dialogue showed before the target turn."""

    seen: Scene
    """What it shows, read in its own frame (the ground truth's scene, or the model's own image parsed)."""
    truth: View
    """The ground truth's view at that picture (what the dialogue meant it to show)."""


@dataclass(frozen=True)
class Reading:
    """How a candidate reads beside the dialogue's earlier pictures."""

    copies: int | None = None
    """The earlier picture (0-based, in the order shown) that the candidate reproduces, if any
    (never one the turn asks to have back)."""
    drawn_from: float | None = None
    """The azimuth the candidate shows the scene from, where it is another than the turn's."""

    def reason(self) -> str:
        """What the judge notes (empty when nothing applies)."""
        notes = []
        if self.copies is not None:
            notes.append(f"reproduces picture {self.copies + 1} of the dialogue: no credit for a change")
        if self.drawn_from is not None:
            notes.append(f"drawn from another viewpoint (azimuth {self.drawn_from:g}): no credit for relations")
        return "; ".join(notes)


def read_candidate(candidate: Scene, target: View, shown: Sequence[Shown]) -> Reading:
    """``candidate`` (read in the target's frame) beside the earlier pictures ``shown`` (see the module docstring)."""
    copies = None
    for k in range(len(shown) - 1, -1, -1):
        picture = shown[k]
        if picture.truth.azimuth == target.azimuth and same_picture(picture.truth.scene, target.scene):
            continue  # the turn asks for this picture back: a copy is right
        if same_picture(in_frame(candidate, target.azimuth, picture.truth.azimuth), picture.seen):
            copies = k
            break
    here = matched(candidate, target.scene)
    drawn_from = None
    best = here
    for quarter in (1, 2, 3):
        other = target.azimuth + 90 * quarter
        n = matched(in_frame(candidate, target.azimuth, other), target.scene)
        if n > best and n >= here + FRAME_EVIDENCE and 2 * n >= len(target.scene.objects):
            best, drawn_from = n, other % 360
    return Reading(copies, drawn_from)


def shown_before(d: Dialogue, turn: int, own: Mapping[int, Scene]) -> list[Shown]:
    """The pictures shown before ``turn``, in order: the model's own (``own``, by target turn,
    read in their frames) where it made them, else the ground truth's."""
    out = []
    for t in d.turns[:turn]:
        if not (t.user.images() or t.assistant.images()):
            continue
        truth = view_of(t)
        if truth is not None:
            out.append(Shown(own.get(t.index, truth.scene), truth))
    return out


def credited(
    predicates: dict[str, Predicate | None], passed: dict[str, bool | None], reading: Reading, latest: View
) -> dict[str, bool | None]:
    """The verdicts ``passed`` with the two rules applied: a copy of an earlier picture fails every
    check that needs a change (one the latest picture shown fails); a picture drawn from another
    viewpoint fails every check whose truth depends on the viewpoint."""
    out = dict(passed)
    for cid, pred in predicates.items():
        if pred is None or out.get(cid) is not True:
            continue
        copy_unchanged = reading.copies is not None and not evaluate(pred, latest.scene, latest.azimuth)
        other_view = reading.drawn_from is not None and pred["op"] in FRAME_DEPENDENT
        if copy_unchanged or other_view:
            out[cid] = False
    return out
