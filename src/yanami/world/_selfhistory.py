"""Self-History: checks on values an earlier free choice set, judged against the model's own choice.

"Not brown, then": the world picks purple for its ground truth, a model may pick green,
and both follow the words. Under GT-History the next turns show the ground truth's pick,
so a later check "there is a small purple metal cube" is decidable. Under Self-History the
model sees its own earlier image, with its green cube; the fair check is then "a small
*green* metal cube". This module tracks, through a dialogue, which values are *open*
(set by a free choice and not fixed since), and rebases a check on the model's own
earlier images:

- an open attribute (a substitute colour, an added object's material) takes the value the
  object has in the model's image of the turn that chose it; the object is found there by
  its other attributes;
- an open spot (a spot chosen freely, every spot of a composite) takes the object's
  position in that image: relations are read again from it (which side of the sphere the
  cube stands on), and "moved from" starts there;
- a selector that the substitution makes ambiguous is extended with the object's other
  attributes.

The exact judge rebases a turn's checks under Self-History (`rebase_checks`); the stateful
reference agent reads the user's references the same way (`rebase_op`), through the images
of its request; ``yanami audit`` counts the checks that depend on an earlier choice (`exposed`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from yanami.contract import Dialogue, Turn
from yanami.world._free import Slot, loose
from yanami.world._hidden import turn_intent, turn_state
from yanami.world._ops import Op, View, apply_op
from yanami.world._predicates import ATTRIBUTES, Predicate, Where, evaluate, select
from yanami.world._scene import Scene, WorldObject, relation

Spot = tuple[int, int]
"""Where an open spot comes from: (the turn that chose it, the object whose spot it was then)."""


@dataclass
class Open:
    """The values earlier free choices set and nothing has fixed since."""

    spots: dict[int, Spot] = field(default_factory=dict)
    """Object id -> where its spot was chosen."""
    attrs: dict[int, dict[str, int]] = field(default_factory=dict)
    """Object id -> attribute -> the turn that chose its value."""

    def copy(self) -> Open:
        return Open(dict(self.spots), {k: dict(v) for k, v in self.attrs.items()})

    def __bool__(self) -> bool:
        return bool(self.spots) or any(self.attrs.values())


@dataclass(frozen=True)
class Tracked:
    """What is open around one turn."""

    before: Open
    """Before the turn (what its previous image left open)."""
    carried: Open
    """After the turn's operation, before its own free choices (what its checks may depend on)."""
    after: Open
    """After the turn, its own free choices included."""


def view_of(turn: Turn) -> View | None:
    """A world turn's hidden state as a view (None where the turn has none)."""
    if not isinstance(turn.hidden.state, dict):
        return None
    state = turn_state(turn)
    objs = tuple(WorldObject.model_validate(o) for o in state.scene)
    return View(Scene.model_construct(objects=objs), state.azimuth, state.style)


def carry(op: Any, before: View, opened: Open, images: list[Open]) -> Open:
    """What stays open after a fixed operation ``op`` (it fixes what it sets)."""
    out = opened.copy()
    if not isinstance(op, dict):
        return out
    kind = op.get("op")
    scene = before.scene
    if kind == "batch":
        view = before
        for step in op["ops"]:
            out = carry(step, view, out, images)
            view = apply_op(step, view, [])
        return out
    if kind == "restore":
        k = int(op["image"]) - 1
        return images[k].copy() if k < len(images) else out
    if kind == "compose":
        return Open()
    found = select(scene, op["where"]) if "where" in op else []
    if kind == "set" and found:
        attrs = out.attrs.setdefault(found[0].id, {})
        attrs.pop(op["attr"], None)
        back = int(op.get("reverts", 0)) - 1
        if 0 <= back < len(images):  # back to a value: open again if it was open in that picture
            chosen = images[back].attrs.get(found[0].id, {}).get(op["attr"])
            if chosen is not None:
                attrs[op["attr"]] = chosen
    elif kind == "move" and found:
        out.spots.pop(found[0].id, None)
        for o in scene.objects:
            if o.on == found[0].id:
                out.spots.pop(o.id, None)
    elif kind == "remove" and found:
        out.spots.pop(found[0].id, None)
        out.attrs.pop(found[0].id, None)
    elif kind == "swap":
        a, b = select(scene, op["a"]), select(scene, op["b"])
        if a and b:
            sa, sb = opened.spots.get(a[0].id), opened.spots.get(b[0].id)
            for k, spot in ((a[0].id, sb), (b[0].id, sa)):  # each takes the other's spot
                if spot is None:
                    out.spots.pop(k, None)
                else:
                    out.spots[k] = spot
    elif kind == "stack" and found:
        support = select(scene, op["on"])
        spot = opened.spots.get(support[0].id) if support else None
        if spot is None:
            out.spots.pop(found[0].id, None)
        else:
            out.spots[found[0].id] = spot
    return out


_TRACKED: dict[int, tuple[Dialogue, dict[int, Tracked]]] = {}
"""`track` of the dialogues last asked about, by ``id()`` (the dialogue is kept with it, so the
id cannot be reused): every item of a dialogue asks again, the judge and the agent alike."""


def track(d: Dialogue) -> dict[int, Tracked]:
    """What is open around each world turn of a dialogue, by turn index (read-only: shared)."""
    known = _TRACKED.get(id(d))
    if known is not None and known[0] is d:
        return known[1]
    out = _track(d)
    if len(_TRACKED) >= 1024:
        _TRACKED.clear()
    _TRACKED[id(d)] = (d, out)
    return out


def _track(d: Dialogue) -> dict[int, Tracked]:
    out: dict[int, Tracked] = {}
    before: View | None = None
    opened = Open()
    at_image: list[Open] = []
    for t in d.turns:
        after = view_of(t)
        if after is None:
            continue
        intent = turn_intent(t)
        start = opened
        carried = opened
        if before is not None and isinstance(intent.op, dict):
            carried = carry(intent.op, before, opened, at_image)
            spots, attrs = loose(intent.op, list(intent.free), before, after.scene)
            opened = carried.copy()
            for k in spots:
                opened.spots[k] = (t.index, k)
            for k, names in attrs.items():
                opened.attrs.setdefault(k, {}).update(dict.fromkeys(names, t.index))
        elif t.user.images():
            opened = carried = Open()  # a picture the user shares fixes everything in it
        out[t.index] = Tracked(start, carried, opened)
        if t.user.images() or t.assistant.images():
            at_image.append(opened)
        before = after
    return out


def _named(pred: Predicate) -> list[Where]:
    names = [pred[k] for k in ("where", "a", "b") if isinstance(pred.get(k), dict)]
    return names[:1] if pred["op"] == "moved" else names


def exposed(pred: Predicate, scene: Scene, tracked: Tracked) -> bool:
    """Whether a check names a value that an earlier free choice set (GT-History shows the
    ground truth's pick; under Self-History the model's own may differ)."""
    opened = tracked.before if pred["op"] == "moved" else tracked.carried
    for where in _named(pred):
        for o in select(scene, where):
            if set(where) & set(opened.attrs.get(o.id, {})):
                return True
            if pred["op"] in ("relation", "on", "moved", "stays") and o.id in opened.spots:
                return True
    return False


@dataclass
class Own:
    """The model's own values for the ground truth's open ones, by ground-truth object id."""

    attrs: dict[int, dict[str, str]] = field(default_factory=dict)
    spots: dict[int, tuple[float, float]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.spots) or any(self.attrs.values())


def _assign(gt: Scene, opened: Open, own: Scene, spots: dict[int, tuple[float, float]]) -> dict[int, WorldObject]:
    """Which object of the model's own image is which of the ground truth's (by id): first the
    objects with no open attribute, by all their attributes; then the others by their fixed
    attributes among what is left, the nearest to where they should stand where several are
    (their own spot, ``spots``, where it is open)."""
    out: dict[int, WorldObject] = {}
    taken: set[int] = set()
    ordered = sorted(gt.objects, key=lambda o: bool(opened.attrs.get(o.id)))
    for o in ordered:
        fixed = {a: getattr(o, a) for a in ATTRIBUTES if a not in opened.attrs.get(o.id, {})}
        found = [c for c in select(own, fixed) if c.id not in taken]
        if len(found) > 1:
            x, y = spots.get(o.id, (o.x, o.y))
            found.sort(key=lambda c: (c.x - x) ** 2 + (c.y - y) ** 2)
            found = found[:1]
        if len(found) == 1:
            out[o.id] = found[0]
            taken.add(found[0].id)
    return out


def own_values(d: Dialogue, opened: Open, own: Mapping[int, Scene], tracks: dict[int, Tracked]) -> Own:
    """The model's own value for each open one, read from its image of the turn that chose it
    (values whose turn has no image of the model's, or whose object is not found there, stay)."""
    out = Own()
    assigned: dict[int, dict[int, WorldObject]] = {}

    def found(turn: int, obj: int) -> WorldObject | None:
        if turn not in assigned:
            assigned[turn] = {}
            view = view_of(d.turns[turn])
            scene = own.get(turn)
            if scene is not None and view is not None:
                after = tracks[turn].after
                older = {k: spot for k, spot in after.spots.items() if spot[0] < turn}  # chosen before
                earlier = own_values(d, Open(older, {}), own, tracks) if older else Own()
                assigned[turn] = _assign(view.scene, after, scene, earlier.spots)
        return assigned[turn].get(obj)

    for obj, names in opened.attrs.items():
        for name, turn in names.items():
            o = found(turn, obj)
            if o is not None:
                out.attrs.setdefault(obj, {})[name] = str(getattr(o, name))
    for obj, (turn, source) in opened.spots.items():
        o = found(turn, source)
        if o is not None:
            out.spots[obj] = (o.x, o.y)
    return out


def _rebased(scene: Scene, own: Own) -> Scene:
    """The ground truth's scene with the model's own values in place of the open ones."""
    objs = []
    for o in scene.objects:
        update: dict[str, Any] = dict(own.attrs.get(o.id, {}))
        if o.id in own.spots:
            update["x"], update["y"] = own.spots[o.id]
        objs.append(o.model_copy(update=update) if update else o)
    return Scene.model_construct(objects=tuple(objs))


def _selector(
    where: Where, gt: Scene, rebased: Scene, own: Own, also: Scene | None = None, own_also: Own | None = None
) -> Where:
    """A selector naming, with the model's own values, what it names in the ground truth (or,
    for what a turn removed, in the scene before it, ``also``, with the values open then)."""
    found = select(gt, where)
    values_of = own
    if not found and also is not None:
        found = select(also, where)  # what a turn removed: named as it was before
        values_of = own_also or Own()
    if len(found) != 1:
        return where
    values = values_of.attrs.get(found[0].id, {})
    out = {k: values.get(k, v) for k, v in where.items()}
    if len(select(rebased, out)) > 1:  # the model's values make it ambiguous: say more
        target = next(o for o in rebased.objects if o.id == found[0].id)
        out = {a: getattr(target, a) for a in ATTRIBUTES}
    return out


def rebase_predicate(
    pred: Predicate, gt: View, before: View | None, own: Own, own_before: Own | None = None
) -> Predicate:
    """``pred`` (a check on ``gt``, the ground truth after the turn) with the model's own values.

    ``own`` holds the values open after the turn's operation, ``own_before`` those open
    before it (where a "moved" check starts and what a refused value was)."""
    if not own and not own_before:
        return pred
    rebased = _rebased(gt.scene, own)
    prior = before.scene if before is not None else None
    out = copy.deepcopy(pred)
    op = pred["op"]
    for key in ("where", "a", "b"):
        if isinstance(pred.get(key), dict):
            out[key] = _selector(pred[key], gt.scene, rebased, own, prior, own_before)
    one = select(gt.scene, pred["where"]) if isinstance(pred.get("where"), dict) else []
    if op == "attribute" and len(one) == 1:
        value = own.attrs.get(one[0].id, {}).get(pred["attr"])
        if value is not None and getattr(one[0], pred["attr"]) == pred["value"]:
            out["value"] = value
    elif op == "not_attribute" and len(one) == 1 and own_before is not None and prior is not None:
        was = [o for o in prior.objects if o.id == one[0].id]
        value = own_before.attrs.get(one[0].id, {}).get(pred["attr"])
        if was and value is not None:
            old = getattr(was[0], pred["attr"])
            out["values"] = [value if v == old else v for v in pred["values"]]
    elif op == "relation":
        a, b = select(gt.scene, pred["a"]), select(gt.scene, pred["b"])
        if len(a) == 1 and len(b) == 1 and (a[0].id in own.spots or b[0].id in own.spots):
            ra = next(o for o in rebased.objects if o.id == a[0].id)
            rb = next(o for o in rebased.objects if o.id == b[0].id)
            horizontal, depth = relation(ra, rb, gt.azimuth)
            out["rel"] = horizontal if pred["rel"] in ("left", "right") else depth
    elif op == "moved" and len(one) == 1 and own_before is not None and one[0].id in own_before.spots:
        out["from"] = [*own_before.spots[one[0].id]]
    elif op == "stays":
        # an object whose spot an earlier free choice set stays where the model's own picture put it
        if len(one) == 1 and one[0].id in own.spots:
            out["at"] = [*own.spots[one[0].id]]
        frame = []
        for entry in pred.get("frame", []):
            found = select(gt.scene, entry["where"])
            at = own.spots.get(found[0].id) if len(found) == 1 else None
            where = _selector(entry["where"], gt.scene, rebased, own)
            frame.append({"where": where, "at": [*at] if at is not None else entry["at"]})
        out["frame"] = frame
    return out


def rebase_checks(d: Dialogue, turn: Turn, own: Mapping[int, Scene]) -> dict[str, Predicate | None]:
    """The predicates of a target turn's checks under Self-History, by check id: each as the
    model's own earlier images (``own``: parsed, by target turn) make it fair.

    None marks a check the model's own admissible choices made ill-posed: it fails even on
    the scene that following every instruction with those choices shows (its words name two
    objects that are now the same, say, or a value the model's own pick already had). Such a
    check is undecidable for this model: left out of its score and counted, never failed.

    A ``stays`` check on an object that keeps its place is read from where the model's own
    previous picture shows it, where that is within the tolerance of where it should stand: a
    model that redraws what it reads drifts by the parser's error at every turn, and that drift
    is no move (a displacement beyond the tolerance still fails, as under GT-History)."""
    out = _rebase_checks(d, turn, own)
    if not own:
        return out
    shown = [t.index for t in d.turns[: turn.index] if t.user.images() or t.assistant.images()]
    previous = own.get(shown[-1]) if shown and shown[-1] in own else None
    gt = view_of(turn)
    before = next((view_of(t) for t in reversed(d.turns[: turn.index]) if view_of(t) is not None), None)
    if previous is None or gt is None or before is None:
        return out
    for cid, pred in out.items():
        if pred is None or pred["op"] != "stays":
            continue
        original = next(c.hidden.predicate for c in turn.checks if c.id == cid)
        found = select(gt.scene, cast(Where, original["where"])) if isinstance(original, dict) else []
        was = [o for o in before.scene.objects if len(found) == 1 and o.id == found[0].id]
        if not was or (was[0].x, was[0].y) != (found[0].x, found[0].y):
            continue  # sent to a place the words fix, not left where it stood
        mine = select(previous, pred["where"])
        if len(mine) == 1:
            x, y = mine[0].x, mine[0].y
            if ((x - pred["at"][0]) ** 2 + (y - pred["at"][1]) ** 2) ** 0.5 <= float(pred["tolerance"]):
                out[cid] = {**pred, "at": [x, y]}
    return out


def _rebase_checks(d: Dialogue, turn: Turn, own: Mapping[int, Scene]) -> dict[str, Predicate | None]:
    """`rebase_checks` but for where the model's own previous picture shows what stays."""
    checks: dict[str, Predicate | None] = {
        c.id: c.hidden.predicate for c in turn.checks if isinstance(c.hidden.predicate, dict)
    }
    if not own:
        return checks
    tracks = track(d)
    tracked = tracks.get(turn.index)
    gt = view_of(turn)
    if tracked is None or gt is None or not (tracked.carried or tracked.before):
        return checks
    previous = [t for t in d.turns[: turn.index] if t.index in tracks]
    before = view_of(previous[-1]) if previous else None
    mine = own_values(d, tracked.carried, own, tracks)
    mine_before = own_values(d, tracked.before, own, tracks)
    if not mine and not mine_before:
        return checks
    expected = _rebased(gt.scene, mine)  # what following every instruction with its own choices shows
    out: dict[str, Predicate | None] = {}
    for cid, p in checks.items():
        assert p is not None
        rebased = rebase_predicate(p, gt, before, mine, mine_before)
        out[cid] = rebased if evaluate(rebased, expected, gt.azimuth) else None
    return out


def rebase_op(op: Any, before: View, own: Own) -> Any:
    """An operation whose selectors (resolved in the ground truth's scene ``before``) name the
    model's own values instead: the user's words read against the model's own history."""
    if not own or not isinstance(op, dict):
        return op
    rebased = _rebased(before.scene, own)
    if op.get("op") == "batch":
        out_ops, view = [], before
        for step in op["ops"]:
            out_ops.append(rebase_op(step, view, own))
            view = apply_op(step, view, [])
        return {**op, "ops": out_ops}
    out = dict(op)
    for key in ("where", "a", "b", "on"):
        if isinstance(op.get(key), dict):
            out[key] = _selector(op[key], before.scene, rebased, own)
    if isinstance(op.get("object"), dict) and isinstance(op["object"].get("on"), dict):
        out["object"] = {**op["object"], "on": _selector(op["object"]["on"], before.scene, rebased, own)}
    return out


def read_in_history(d: Dialogue, turn: Turn, op: Any, free: list[Slot], seen: Sequence[View]) -> tuple[Any, list[Slot]]:
    """An operation of ``turn`` and its free slots, with the user's references read against the
    images of the request (``seen``: one per earlier turn that shows an image, in order): under
    Self-History the model's own, whose free choices may differ from the ground truth's.
    Under GT-History the images are the ground truth's and nothing changes."""
    tracks = track(d)
    tracked = tracks.get(turn.index)
    previous = [t for t in d.turns[: turn.index] if t.index in tracks]
    if tracked is None or not previous or not isinstance(op, dict):
        return op, free
    if not tracked.before and "reverts" not in op:
        return op, free
    before = view_of(previous[-1])
    assert before is not None
    position: dict[int, int] = {}
    for t in d.turns[: turn.index]:
        if t.user.images() or t.assistant.images():
            position[t.index] = len(position)
    shown = {t: k for t, k in position.items() if k < len(seen)}
    scenes = Scenes(shown, lambda t: seen[shown[t]].scene)
    op = _own_revert(d, op, before, position, scenes, tracks)
    mine = own_values(d, tracked.before, scenes, tracks)
    if not mine:
        return op, free
    rebased = _rebased(before.scene, mine)
    slots = []
    for slot in free:
        rules = []
        for rule in slot.get("accept", []):
            rule = dict(rule)
            if isinstance(rule.get("of"), dict):
                rule["of"] = _selector(rule["of"], before.scene, rebased, mine)
            if "from" in rule and isinstance(op.get("where"), dict):
                moved = select(before.scene, op["where"])
                if len(moved) == 1 and moved[0].id in mine.spots:
                    rule["from"] = [*mine.spots[moved[0].id]]
            rules.append(rule)
        slots.append({**slot, "accept": rules} if "accept" in slot else slot)
    return rebase_op(op, before, mine), slots


def _own_revert(
    d: Dialogue,
    op: Op,
    before: View,
    position: dict[int, int],
    scenes: Mapping[int, Scene],
    tracks: dict[int, Tracked],
) -> Op:
    """A correction that brings a value back (``"reverts": k``): where that value was a free
    choice in picture k, the model's own choice, read from its own image of the choosing turn."""
    back = int(op.get("reverts", 0)) - 1
    turn = next((t for t, k in position.items() if k == back), None)
    found = select(before.scene, op["where"]) if op.get("op") == "set" and "where" in op else []
    if turn is None or len(found) != 1:
        return op
    chosen = tracks[turn].after.attrs.get(found[0].id, {}).get(op["attr"])
    if chosen is None:
        return op
    value = own_values(d, Open({}, {found[0].id: {op["attr"]: chosen}}), scenes, tracks).attrs.get(found[0].id, {})
    return {**op, "value": value.get(op["attr"], op["value"])}


class Scenes(Mapping[int, Scene]):
    """The scenes of the model's own images by the turn that showed them, each read (parsed)
    on first use: a turn with nothing open needs none of them."""

    def __init__(self, turns: Iterable[int], read: Callable[[int], Scene]) -> None:
        self.turns, self.read = list(turns), read
        self.known: dict[int, Scene] = {}

    def __getitem__(self, turn: int) -> Scene:
        if turn not in self.turns:
            raise KeyError(turn)
        if turn not in self.known:
            self.known[turn] = self.read(turn)
        return self.known[turn]

    def __iter__(self) -> Iterator[int]:
        return iter(self.turns)

    def __len__(self) -> int:
        return len(self.turns)
