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
from collections.abc import Callable
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
    well_separated,
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
    ground = scene.ground_objects()
    if not distinct(scene):
        return False
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
    boxes = _root_boxes(scene, ground)  # (V, R, 4), every view at once
    inside = (boxes[..., 0] >= GAP) & (boxes[..., 1] >= GAP)
    inside &= (boxes[..., 2] <= WIDTH - GAP) & (boxes[..., 3] <= HEIGHT - GAP)
    if not inside.all():
        return False
    a, b = boxes[:, :, None, :], boxes[:, None, :, :]
    apart = (a[..., 2] + GAP <= b[..., 0]) | (b[..., 2] + GAP <= a[..., 0])
    apart |= (a[..., 3] + GAP <= b[..., 1]) | (b[..., 3] + GAP <= a[..., 1])
    return bool((apart | np.eye(len(ground), dtype=bool)[None]).all())


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


_CENTRE = np.array([WIDTH / 2, HEIGHT / 2])
_FOCAL = np.array([[1.0], [-1.0]]) * Camera(VIEWS[0], WIDTH, HEIGHT).focal
_LIMIT = np.array([WIDTH - GAP, HEIGHT - GAP])


@lru_cache(maxsize=4096)
def _stack_boxes(half: float, x: float, y: float, top_half: float | None) -> np.ndarray:
    """Screen boxes (V, 4) of a ground object of half-extent ``half`` at (x, y), with what it carries."""
    parts = ((half, 0.0),) if top_half is None else ((half, 0.0), (top_half, 2 * half))
    lo, hi = _screen_bounds(parts, np.array([[x, y]]))
    out = np.concatenate([lo[:, 0], hi[:, 0]], axis=1)
    out.flags.writeable = False
    return out


def _screen_bounds(parts: tuple[tuple[float, float], ...], xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Screen boxes of a stack of ``parts`` standing at each ground position (N, 2) in every
    view: the top-left and bottom-right corners, each (V, N, 2)."""
    corners, ground_rows = _profile(parts)
    c = corners[:, None, :, :] + (xy @ ground_rows)[:, :, :, None]  # (V, N, 3, P)
    screen = _FOCAL * (c[:, :, :2] / c[:, :, 2:])  # (V, N, 2, P), relative to the centre
    return _CENTRE + screen.min(axis=3), _CENTRE + screen.max(axis=3)


def _root_boxes(scene: Scene, roots: list[WorldObject]) -> np.ndarray:
    """Screen boxes (V, R, 4) of every stack in every view."""
    if not roots:
        return np.zeros((len(VIEWS), 0, 4))
    boxes = []
    for r in roots:
        top = scene.supported_by(r.id)
        boxes.append(_stack_boxes(r.half, r.x, r.y, None if top is None else top.half))
    return np.stack(boxes, axis=1)


def _fitter(scene: Scene, o: WorldObject) -> Callable[[np.ndarray], np.ndarray] | None:
    """A test of candidate ground positions (N, 2) for ``o`` (with what rests on it): which
    keep the scene valid. Only the pairs involving ``o`` are checked (the rest of the scene is
    assumed valid). None when no position can: ``o`` would duplicate another object."""
    others = [p for p in scene.objects if p.id != o.id and p.on != o.id]
    riders = [p for p in scene.objects if p.on == o.id]
    if (o.shape, o.colour, o.size, o.material) in {(p.shape, p.colour, p.size, p.material) for p in others}:
        return None
    rest = Scene.model_construct(objects=tuple(others))
    roots = rest.ground_objects()
    ground_axes = _ground_axes()
    root_rf = np.array([[p.x, p.y] for p in roots]).reshape(-1, 2) @ ground_axes  # (R, 2)
    fixed = _root_boxes(rest, roots)
    fixed_lo, fixed_hi = fixed[:, None, :, :2], fixed[:, None, :, 2:]  # (V, 1, R, 2)
    # The stack being placed: (half-extent, base height) of each of its parts.
    stack = [(o.half, 0.0)]
    z = o.height
    for r in riders:
        stack.append((r.half, z))
        z += r.height
    parts = tuple(stack)

    def fits(xy: np.ndarray) -> np.ndarray:
        ok = np.ones(len(xy), dtype=bool)
        if len(roots):  # the relation margin along both ground axes of the base view
            ok &= (np.abs((xy @ ground_axes)[:, None, :] - root_rf[None, :, :]) >= MARGIN).all(axis=(1, 2))
        idx = np.nonzero(ok)[0]  # project only the candidates the margins allow
        if len(idx):
            lo, hi = _screen_bounds(parts, xy[idx])  # (V, N, 2)
            inside = (lo >= GAP).all(axis=(0, 2)) & (hi <= _LIMIT).all(axis=(0, 2))
            if fixed.shape[1]:
                apart = (hi[:, :, None, :] + GAP <= fixed_lo) | (fixed_hi + GAP <= lo[:, :, None, :])
                inside &= np.all(np.any(apart, axis=3), axis=(0, 2))
            ok[idx] = inside
        return ok

    return fits


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
        ok = np.ones(batch, dtype=bool) if accept is None else accept(xy)
        idx = np.nonzero(ok)[0]
        if len(idx):
            ok[idx] = fits(xy[idx])
        hits = np.nonzero(ok)[0]
        if len(hits):
            x, y = xy[hits[0]]
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
            placed = place(scene, o, rng, tries=200)
            if placed is None:
                break
            scene = with_object(scene, placed)
        else:
            return scene
    raise NoRoom(f"could not place {n} objects")
