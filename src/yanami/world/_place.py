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
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

from yanami.world._camera import HEIGHT, WIDTH, Camera
from yanami.world._scene import (
    BASE_AZIMUTH,
    COLOURS,
    EXTENT,
    MARGIN,
    Scene,
    WorldObject,
    axes,
    random_object,
)


class NoRoom(RuntimeError):
    """No valid scene of that many objects was found."""


VIEWS = tuple(BASE_AZIMUTH + k * 90.0 for k in range(4))
"""The four azimuths a scene must look right from."""
GAP = 4
"""Minimum screen gap between two stacks, and between an object and the image border, in pixels."""


@lru_cache(maxsize=16)
def _camera(azimuth: float) -> Camera:
    return Camera(azimuth, WIDTH, HEIGHT)


def screen_box(o: WorldObject, base: float, azimuth: float) -> tuple[float, float, float, float]:
    """The object's projected bounding box (x0, y0, x1, y1) at the default image size."""
    return _box(o.half, o.x, o.y, base, azimuth)


@lru_cache(maxsize=8192)
def _box(h: float, x: float, y: float, base: float, azimuth: float) -> tuple[float, float, float, float]:
    zs = (base, base + 2 * h)
    corners = np.array([[x + sx * h, y + sy * h, z] for sx in (-1, 1) for sy in (-1, 1) for z in zs])
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


def valid(scene: Scene) -> bool:
    """Whether the scene is valid (see the module's docstring)."""
    if not distinct(scene):
        return False
    objs = scene.objects
    for o in objs:
        if o.on is not None:
            support = scene.by_id(o.on)
            if (
                support.shape == "sphere"
                or support.on is not None
                or o.size != "small"
                or support.size != "large"
                or o.colour == support.colour
                or (o.x, o.y) != (support.x, support.y)
                or sum(1 for p in objs if p.on == support.id) > 1
            ):
                return False
    # A handful of objects: plain Python on cached boxes beats numpy's per-call cost here. The
    # sums and comparisons are the ones `well_separated` and the screen boxes make.
    ground = [o for o in objs if o.on is None]
    (rx, ry), (fx, fy) = axes(BASE_AZIMUTH)
    coords = []
    for o in ground:
        if abs(o.x) > EXTENT or abs(o.y) > EXTENT:
            return False
        coords.append((o.id, o.x * rx + o.y * ry, o.x * fx + o.y * fy))
    for i, (oid, r, f) in enumerate(coords):
        for pid, pr, pf in coords[i + 1 :]:
            if pid != oid and (abs(pr - r) < MARGIN or abs(pf - f) < MARGIN):
                return False
    tops = _tops(objs)
    boxes = [_stack_rows(r.half, r.x, r.y, _top_half(tops, r.id)) for r in ground]
    for views in boxes:
        for x0, y0, x1, y1 in views:
            if not (x0 >= GAP and y0 >= GAP and x1 <= WIDTH - GAP and y1 <= HEIGHT - GAP):
                return False
    for i, mine in enumerate(boxes):
        for theirs in boxes[i + 1 :]:
            for (ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1) in zip(mine, theirs, strict=True):
                if not (ax1 + GAP <= bx0 or bx1 + GAP <= ax0 or ay1 + GAP <= by0 or by1 + GAP <= ay0):
                    return False
    return True


def _tops(objs: tuple[WorldObject, ...] | list[WorldObject]) -> dict[int, WorldObject]:
    """Per support id, the first object resting on it (as `Scene.supported_by` finds it)."""
    tops: dict[int, WorldObject] = {}
    for o in objs:
        if o.on is not None and o.on not in tops:
            tops[o.on] = o
    return tops


def _top_half(tops: dict[int, WorldObject], oid: int) -> float | None:
    top = tops.get(oid)
    return None if top is None else top.half


def distinct(scene: Scene) -> bool:
    """Whether no two objects are identical in all four attributes (words can single each one out)."""
    return len({(o.shape, o.colour, o.size, o.material) for o in scene.objects}) == len(scene.objects)


def legible(scene: Scene, azimuth: float, oid: int) -> bool:
    """Whether a picture of ``scene`` from ``azimuth`` shows object ``oid`` (with what rests on it)
    readably, a looser test than `valid`: no two identical objects, its stack inside the
    image and apart from every other stack on screen. The relation margin and the other
    three views are not required, as a model placing an object where the world's own
    placement finds no room would not require them."""
    if not distinct(scene):
        return False
    root = next(o for o in scene.objects if o.id == oid)
    while root.on is not None:
        root = scene.by_id(root.on)
    x0, y0, x1, y1 = stack_box(scene, root, azimuth)
    if x0 < GAP or y0 < GAP or x1 > WIDTH - GAP or y1 > HEIGHT - GAP:
        return False
    for o in scene.ground_objects():
        if o.id != root.id:
            u0, v0, u1, v1 = stack_box(scene, o, azimuth)
            if not (x1 + GAP <= u0 or u1 + GAP <= x0 or y1 + GAP <= v0 or v1 + GAP <= y0):
                return False
    return True


def side_mask(xy: np.ndarray, anchor: WorldObject, rel: str, azimuth: float) -> np.ndarray:
    """Which candidate positions (N, 2) lie ``rel`` (left, right, front, behind) of ``anchor``."""
    right, forward = axes(azimuth)
    axis = right if rel in ("left", "right") else forward
    mine = xy[:, 0] * axis[0] + xy[:, 1] * axis[1]
    theirs = anchor.x * axis[0] + anchor.y * axis[1]
    return mine < theirs if rel in ("left", "front") else mine > theirs


@lru_cache(maxsize=1)
def _view_bases() -> tuple[np.ndarray, np.ndarray]:
    """Positions (V, 3) and stacked right/up/forward rows (V, 3, 3) of the four views' cameras."""
    cams = [_camera(az) for az in VIEWS]
    pos = np.array([c.basis[0] for c in cams])
    rows = np.array([[c.basis[1], c.basis[2], c.basis[3]] for c in cams])
    return pos, rows


@lru_cache(maxsize=1)
def _ground_axes() -> np.ndarray:
    """Columns: the base camera's right and forward directions on the ground, (2, 2)."""
    right, forward = axes(BASE_AZIMUTH)
    return np.array([[right[0], forward[0]], [right[1], forward[1]]])


@lru_cache(maxsize=64)
def _profile(parts: tuple[tuple[float, float], ...]) -> tuple[np.ndarray, np.ndarray]:
    """For a stack of (half-extent, base height) parts centred at the origin: its corners
    relative to each view's camera, in that camera's right/up/forward frame, (V, 3, P); and
    what a ground translation (x, y) adds in each frame, as (V, 2, 3) matrices."""
    pos, rows = _view_bases()
    rel = np.array(
        [[sx * h, sy * h, base + sz * 2 * h] for h, base in parts for sx in (-1, 1) for sy in (-1, 1) for sz in (0, 1)]
    )
    framed = (rel[None, :, :] - pos[:, None, :]) @ rows.transpose(0, 2, 1)
    return np.ascontiguousarray(framed.transpose(0, 2, 1)), rows.transpose(0, 2, 1)[:, :2, :]


@lru_cache(maxsize=64)
def _profile_t(parts: tuple[tuple[float, float], ...]) -> np.ndarray:
    """`_profile`'s corners laid out for `_signed_boxes`: (P, 3, V, 1)."""
    out = np.ascontiguousarray(_profile(parts)[0].transpose(2, 1, 0))[..., None]
    out.flags.writeable = False
    return out


_CENTRE = np.array([WIDTH / 2, HEIGHT / 2])
_FOCAL = np.array([[1.0], [-1.0]]) * Camera(VIEWS[0], WIDTH, HEIGHT).focal


@lru_cache(maxsize=4096)
def _stack_boxes(half: float, x: float, y: float, top_half: float | None) -> np.ndarray:
    """Screen boxes (V, 4) of a ground object of half-extent ``half`` at (x, y), with what it carries."""
    parts = ((half, 0.0),) if top_half is None else ((half, 0.0), (top_half, 2 * half))
    _, ground_rows = _profile(parts)
    box = _signed_boxes(_profile_t(parts), (np.array([[x, y]]) @ ground_rows).transpose(2, 0, 1))[:, :, 0]
    out = np.concatenate([-box[2:].T, box[:2].T], axis=1)  # (V, 4): x0, y0, x1, y1
    out.flags.writeable = False
    return out


Box = tuple[float, float, float, float]


@lru_cache(maxsize=4096)
def _stack_rows(half: float, x: float, y: float, top_half: float | None) -> tuple[Box, ...]:
    """`_stack_boxes` as Python floats, one (x0, y0, x1, y1) per view."""
    return tuple((a, b, c, d) for a, b, c, d in _stack_boxes(half, x, y, top_half).tolist())


def _fitter(scene: Scene, o: WorldObject) -> Fits | None:
    """A test of candidate ground positions (N, 2) for ``o`` (with what rests on it): which
    keep the scene valid. Only the pairs involving ``o`` are checked (the rest of the scene is
    assumed valid). None when no position can: ``o`` would duplicate another object."""
    if not scene.objects:  # the first object of a scene or a composite: only its size matters
        empty = _EMPTY_FITTERS.get(o.half)
        if empty is None:
            empty = _EMPTY_FITTERS[o.half] = _new_fitter(scene, o)
        return empty
    key = (id(scene), o.id, o.shape, o.colour, o.size, o.material)
    known = _FITTERS.get(key)
    if known is not None and known[0] is scene:  # the same scene: realizations place one object again and again
        return known[1]
    fits = _new_fitter(scene, o)
    if len(_FITTERS) >= 64:
        _FITTERS.clear()
    _FITTERS[key] = (scene, fits)  # the scene is held, so its id is not reused while cached
    return fits


Fits = Callable[[np.ndarray], np.ndarray]
_FITTERS: dict[tuple[int, int, str, str, str, str], tuple[Scene, Fits | None]] = {}
"""The latest fitters, by scene (identity) and the object's id and attributes: all a fitter depends on."""
_EMPTY_FITTERS: dict[float, Fits | None] = {}
"""Fitters for an empty scene, by the object's half-extent."""


def _new_fitter(scene: Scene, o: WorldObject) -> Fits | None:
    others = [p for p in scene.objects if p.id != o.id and p.on != o.id]
    riders = [p for p in scene.objects if p.on == o.id]
    if (o.shape, o.colour, o.size, o.material) in {(p.shape, p.colour, p.size, p.material) for p in others}:
        return None
    roots = [p for p in others if p.on is None]
    ground_axes = _ground_axes()
    root_rf = np.array([[p.x, p.y] for p in roots]).reshape(-1, 2) @ ground_axes  # (R, 2)
    # The stack being placed: (half-extent, base height) of each of its parts.
    stack = [(o.half, 0.0)]
    z = o.height
    for r in riders:
        stack.append((r.half, z))
        z += r.height
    parts = tuple(stack)
    _, ground_rows = _profile(parts)
    corners_t = _profile_t(parts)
    # Every array below puts the candidates last and reduces over leading axes: numpy is slow
    # at reducing many short innermost rows, fast at combining whole rows. The arithmetic is
    # element for element the same as projecting each candidate alone (only the matrix
    # products, whose rounding may depend on their shapes, are kept exactly as they were).
    n_roots = len(roots)
    if n_roots:
        root_t = np.ascontiguousarray(root_rf.T)[:, :, None]  # (2, R, 1)
        tops = _tops(others)
        # (4, V, R, 1): per view and root, what a candidate's signed box plus `_GAP4` must not
        # exceed in at least one row to stay apart from that root's stack.
        apart_limits = np.array([_apart_limits(r.half, r.x, r.y, _top_half(tops, r.id)) for r in roots])
        apart_limits = apart_limits.transpose(1, 2, 0)[..., None]

    def fits(xy: np.ndarray) -> np.ndarray:
        if not len(xy):
            return np.zeros(0, dtype=bool)
        if not n_roots:
            box = _signed_boxes(corners_t, (xy @ ground_rows).transpose(2, 0, 1))  # (4, V, N)
            return _every(box <= _INSIDE4)
        ok = _every(np.abs((xy @ ground_axes).T[:, None, :] - root_t) >= MARGIN)  # the relation margin
        idx = ok.nonzero()[0]  # project only the candidates the margins allow
        if len(idx):
            box = _signed_boxes(corners_t, (xy[idx] @ ground_rows).transpose(2, 0, 1))  # (4, V, M)
            apart = ((box + _GAP4)[:, :, None, :] <= apart_limits).any(axis=0)  # (V, R, M)
            ok[idx] = _every(box <= _INSIDE4) & _every(apart)
        return ok

    return fits


def _every(a: np.ndarray) -> np.ndarray:
    """Per candidate (the last axis), whether all of ``a`` is true for it."""
    return np.asarray(a.reshape(-1, a.shape[-1]).all(axis=0))


# A screen box (x0, y0, x1, y1) is handled in its *signed* form (x1, y1, -x0, -y0): every test
# on it is then "this row is at most that" (x0 >= GAP is -x0 <= -GAP), and both corners come
# from one maximum over the stack's corners (a minimum is minus the maximum of the negated
# values). Negating a float is exact, so the numbers compared are those of the plain box.
_XYXY = [0, 1, 0, 1]
_SIGN4 = np.array([1.0, 1.0, -1.0, -1.0])
_FOCAL4 = (_FOCAL[:, 0][_XYXY] * _SIGN4).reshape(1, 4, 1, 1)
_CENTRE4 = (_CENTRE[_XYXY] * _SIGN4).reshape(4, 1, 1)
_INSIDE4 = np.array([WIDTH - GAP, HEIGHT - GAP, -GAP, -GAP], dtype=float).reshape(4, 1, 1)
_GAP4 = np.array([GAP, GAP, 0, 0], dtype=float).reshape(4, 1, 1)


def _signed_boxes(corners_t: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """Signed screen boxes (4, V, M) of a stack standing at each of M ground positions in every
    view, from its corners in each view's camera frame (`_profile_t`, (P, 3, V, 1)) and what
    each position adds to them (the positions times `_profile`'s ground rows, (3, V, M))."""
    c = corners_t + shift[None]  # (P, 3, V, M)
    result: np.ndarray = _CENTRE4 + (_FOCAL4 * (c[:, _XYXY] / c[:, 2:])).max(axis=0)
    return result


@lru_cache(maxsize=4096)
def _apart_limits(half: float, x: float, y: float, top_half: float | None) -> np.ndarray:
    """(4, V), for a stack others keep `GAP` away from: its box's left and top sides, then minus
    its right and bottom sides and the gap. A signed box plus `_GAP4` at most these in some row
    lies apart from it: x1 + GAP <= its x0, or its x1 + GAP <= x0 (as -x0 <= -(its x1 + GAP)),
    or the same along y."""
    box = _stack_boxes(half, x, y, top_half)
    out = np.concatenate([box[:, :2].T, -(box[:, 2:].T + GAP)])
    out.flags.writeable = False
    return out


def place(
    scene: Scene,
    o: WorldObject,
    rng: random.Random,
    tries: int = 200,
    accept: Callable[[np.ndarray], np.ndarray] | None = None,
) -> WorldObject | None:
    """``o`` moved to a random ground position where the scene stays valid, or None.

    Random candidates are tested a batch at a time, in numpy; the first that fits (and that
    ``accept`` allows, given the batch's positions) wins.
    """
    fits = _fitter(scene, o)
    if fits is None:
        return None
    gen = np.random.default_rng(rng.getrandbits(64))  # numpy draws, seeded from the caller's rng
    # Candidates are drawn in batches that double in size. The first valid candidate in draw
    # order wins, and the draws form one stream, so batching never changes the result: it
    # only makes a crowded scene (many rejected candidates) cheap to give up on.
    done, batch, total = 0, 32, -(-tries // 32) * 32  # whole batches of 32, as ever
    while done < total:
        batch = min(batch, total - done)
        done += batch
        xy = gen.uniform(-EXTENT, EXTENT, (batch, 2)).round(2)
        if accept is None:
            ok = fits(xy)  # the same as testing xy[all indices], without the copy
        else:
            ok = accept(xy)
            idx = np.nonzero(ok)[0]
            if len(idx):
                ok[idx] = fits(xy[idx])
        first = int(ok.argmax())  # the first candidate that fits, if any does
        if ok[first]:
            x, y = xy[first]
            return o.model_copy(update={"x": float(x), "y": float(y), "on": None})
        batch *= 2
    return None


def free_positions(scene: Scene, o: WorldObject, rng: random.Random, n: int) -> np.ndarray:
    """Of ``n`` random ground positions, those (k, 2) where ``o`` keeps the scene valid, in draw order."""
    fits = _fitter(scene, o)
    gen = np.random.default_rng(rng.getrandbits(64))
    xy = gen.uniform(-EXTENT, EXTENT, (n, 2)).round(2)
    return xy[fits(xy)] if fits is not None else xy[:0]


def with_object(scene: Scene, o: WorldObject) -> Scene:
    """The scene with ``o`` added or replaced (by id); objects on it follow its position."""
    objs = [p for p in scene.objects if p.id != o.id]
    objs = [p.model_copy(update={"x": o.x, "y": o.y}) if p.on == o.id else p for p in objs]
    return Scene.model_construct(objects=tuple(sorted([*objs, o], key=lambda p: p.id)))


def random_scene(
    rng: random.Random, n: int | None = None, stack_chance: float = 0.25, colours: Sequence[str] | None = None
) -> Scene:
    """A valid scene of ``n`` objects (3 to 6 when not given), sometimes with a stack; its
    objects take only ``colours`` where given (else any colour)."""
    n = n or rng.randint(3, 6)
    palette = list(colours) if colours is not None else list(COLOURS)
    for _ in range(100):
        scene = Scene()
        for oid in range(n):
            o = random_object(rng, oid) if colours is None else random_object(rng, oid, colour=rng.choice(palette))
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
                        colour=rng.choice([c for c in palette if c != support.colour]),
                    )
                    top = top.model_copy(update={"x": support.x, "y": support.y, "on": support.id})
                    if valid(with_object(scene, top)):
                        scene = with_object(scene, top)
                        continue
            placed = place(scene, o, rng, tries=200)
            if placed is None:
                break
            scene = with_object(scene, placed)
        else:
            return scene
    raise NoRoom(f"could not place {n} objects")
