"""The build's fast paths give exactly what the plain formulations they replaced give.

Placement, naming, selection and the sprites' rays were rewritten for speed (the world build
spends most of its own time there). A dataset must stay byte for byte what the same seed gave
before, so each fast path is checked here against the former formulation, kept below as the
reference: the same decisions, the same numbers, the same draws from the random generator.
"""

from __future__ import annotations

import copy
import itertools
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from yanami.world import VIEWS, Scene, View, WorldObject, apply_op, random_scene, valid
from yanami.world._camera import HEIGHT, WIDTH
from yanami.world._free import copied, draw_rng, realizations, realize
from yanami.world._language import full_where, minimal_where, names_one
from yanami.world._place import (
    _CENTRE,
    _FOCAL,
    GAP,
    _fitter,
    _ground_axes,
    _profile,
    _stack_boxes,
    free_positions,
    place,
)
from yanami.world._predicates import select
from yanami.world._render import _rays, camera
from yanami.world._scene import EXTENT, MARGIN, pairs, random_object, well_separated

# The former formulations ------------------------------------------------------------------


def _ref_screen_bounds(parts: tuple[tuple[float, float], ...], xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    corners, ground_rows = _profile(parts)
    c = corners[:, None, :, :] + (xy @ ground_rows)[:, :, :, None]  # (V, N, 3, P)
    screen = _FOCAL * (c[:, :, :2] / c[:, :, 2:])
    return _CENTRE + screen.min(axis=3), _CENTRE + screen.max(axis=3)


def _ref_stack_boxes(half: float, x: float, y: float, top_half: float | None) -> np.ndarray:
    parts = ((half, 0.0),) if top_half is None else ((half, 0.0), (top_half, 2 * half))
    lo, hi = _ref_screen_bounds(parts, np.array([[x, y]]))
    return np.concatenate([lo[:, 0], hi[:, 0]], axis=1)


def _ref_root_boxes(scene: Scene, roots: list[WorldObject]) -> np.ndarray:
    if not roots:
        return np.zeros((len(VIEWS), 0, 4))
    boxes = []
    for r in roots:
        top = scene.supported_by(r.id)
        boxes.append(_ref_stack_boxes(r.half, r.x, r.y, None if top is None else top.half))
    return np.stack(boxes, axis=1)


def _ref_fitter(scene: Scene, o: WorldObject) -> Callable[[np.ndarray], np.ndarray] | None:
    others = [p for p in scene.objects if p.id != o.id and p.on != o.id]
    riders = [p for p in scene.objects if p.on == o.id]
    if (o.shape, o.colour, o.size, o.material) in {(p.shape, p.colour, p.size, p.material) for p in others}:
        return None
    rest = Scene.model_construct(objects=tuple(others))
    roots = rest.ground_objects()
    ground_axes = _ground_axes()
    root_rf = np.array([[p.x, p.y] for p in roots]).reshape(-1, 2) @ ground_axes
    fixed = _ref_root_boxes(rest, roots)
    fixed_lo, fixed_hi = fixed[:, None, :, :2], fixed[:, None, :, 2:]
    stack = [(o.half, 0.0)]
    z = o.height
    for r in riders:
        stack.append((r.half, z))
        z += r.height
    parts = tuple(stack)
    limit = np.array([WIDTH - GAP, HEIGHT - GAP])

    def fits(xy: np.ndarray) -> np.ndarray:
        ok = np.ones(len(xy), dtype=bool)
        if len(roots):
            ok &= np.all(np.abs((xy @ ground_axes)[:, None, :] - root_rf[None, :, :]) >= MARGIN, axis=(1, 2))
        idx = np.nonzero(ok)[0]
        if len(idx):
            lo, hi = _ref_screen_bounds(parts, xy[idx])
            inside = (lo >= GAP).all(axis=(0, 2)) & (hi <= limit).all(axis=(0, 2))
            if fixed.shape[1]:
                apart = (hi[:, :, None, :] + GAP <= fixed_lo) | (fixed_hi + GAP <= lo[:, :, None, :])
                inside &= np.all(np.any(apart, axis=3), axis=(0, 2))
            ok[idx] = inside
        return ok

    return fits


def _ref_valid(scene: Scene) -> bool:
    ground = scene.ground_objects()
    if len({(o.shape, o.colour, o.size, o.material) for o in scene.objects}) != len(scene.objects):
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
    boxes = _ref_root_boxes(scene, ground)
    inside = (boxes[..., 0] >= GAP) & (boxes[..., 1] >= GAP)
    inside &= (boxes[..., 2] <= WIDTH - GAP) & (boxes[..., 3] <= HEIGHT - GAP)
    if not inside.all():
        return False
    a, b = boxes[:, :, None, :], boxes[:, None, :, :]
    apart = (a[..., 2] + GAP <= b[..., 0]) | (b[..., 2] + GAP <= a[..., 0])
    apart |= (a[..., 3] + GAP <= b[..., 1]) | (b[..., 3] + GAP <= a[..., 1])
    return bool((apart | np.eye(len(ground), dtype=bool)[None]).all())


def _ref_names_one(where: dict[str, Any], o: WorldObject, scene: Scene, loose: dict[int, set[str]] | None) -> bool:
    loose = loose or {}
    if any(k in loose.get(o.id, set()) or getattr(o, k) != v for k, v in where.items()):
        return False
    for p in scene.objects:
        free = loose.get(p.id, set())
        if p.id != o.id and all(k in free or getattr(p, k) == v for k, v in where.items()):
            return False
    return True


def _ref_minimal_where(
    o: WorldObject, scene: Scene, rng: random.Random, loose: dict[int, set[str]] | None
) -> dict[str, Any]:
    loose = loose or {}
    mine = loose.get(o.id, set())
    for n in range(1, 5):
        options = []
        for keys in itertools.combinations(("colour", "size", "material"), n - 1):
            if mine & set(keys):
                continue
            where = {k: getattr(o, k) for k in ("shape", *keys)}
            if _ref_names_one(where, o, scene, loose):
                options.append(where)
        if options:
            return rng.choice(options)
    return {k: v for k, v in full_where(o).items() if k not in mine}


def _ref_pairs(scene: Scene) -> list[tuple[WorldObject, WorldObject]]:
    def root(o: WorldObject) -> int:
        while o.on is not None:
            o = scene.by_id(o.on)
        return o.id

    return [(a, b) for a in scene.objects for b in scene.objects if a.id != b.id and root(a) != root(b)]


# Scenes to test on: random ones, crowded ones, stacks, and the same scenes slightly broken --


def _scenes(seed: int, count: int) -> list[Scene]:
    rng = random.Random(seed)
    out: list[Scene] = []
    while len(out) < count:
        try:
            scene = random_scene(rng, n=rng.randint(1, 7), stack_chance=0.5)
        except RuntimeError:
            continue
        out.append(scene)
        p = rng.choice(scene.objects)
        x, y = round(rng.uniform(-EXTENT, EXTENT), 2), round(rng.uniform(-EXTENT, EXTENT), 2)
        moved = tuple(q.model_copy(update={"x": x, "y": y}) if p.id in (q.id, q.on) else q for q in scene.objects)
        out.append(Scene.model_construct(objects=moved))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_placement_decides_as_the_plain_formulation(seed: int) -> None:
    rng = random.Random(seed)
    for scene in _scenes(seed, 40):
        movers = [random_object(rng, scene.next_id()), *scene.objects]
        for o in movers:
            fast, plain = _fitter(scene, o), _ref_fitter(scene, o)
            assert (fast is None) == (plain is None)
            if fast is None or plain is None:
                continue
            gen = np.random.default_rng(rng.getrandbits(64))
            for n in (1, 2, 3, 32, 61):  # a single candidate takes another path in numpy's matrix product
                xy = gen.uniform(-EXTENT, EXTENT, (n, 2)).round(2)
                assert fast(xy).tolist() == plain(xy).tolist()


@pytest.mark.parametrize("seed", range(3))
def test_validity_and_boxes_as_the_plain_formulation(seed: int) -> None:
    rng = random.Random(seed)
    for scene in _scenes(seed + 10, 60):
        assert valid(scene) == _ref_valid(scene)
        assert [(a.id, b.id) for a, b in pairs(scene)] == [(a.id, b.id) for a, b in _ref_pairs(scene)]
    for _ in range(300):
        half = rng.choice([0.35, 0.7])
        top = rng.choice([None, 0.35]) if half == 0.7 else None
        x, y = round(rng.uniform(-EXTENT, EXTENT), 2), round(rng.uniform(-EXTENT, EXTENT), 2)
        assert np.array_equal(_stack_boxes(half, x, y, top), _ref_stack_boxes(half, x, y, top))


def test_place_and_free_positions_keep_their_draws() -> None:
    """The first fitting candidate of the same stream wins, whichever way the batch is tested."""
    rng = random.Random(5)
    for scene in _scenes(20, 30):
        o = random_object(rng, scene.next_id())
        plain = _ref_fitter(scene, o)
        seed = rng.getrandbits(32)
        placed = place(scene, o, random.Random(seed), tries=600)
        if plain is None:
            assert placed is None
            continue
        gen = np.random.default_rng(random.Random(seed).getrandbits(64))
        expected = None
        for batch in (32, 64, 128, 256, 128):
            xy = gen.uniform(-EXTENT, EXTENT, (batch, 2)).round(2)
            hits = np.nonzero(plain(xy))[0]
            if len(hits):
                expected = (float(xy[hits[0], 0]), float(xy[hits[0], 1]))
                break
        assert (None if placed is None else (placed.x, placed.y)) == expected
        found = free_positions(scene, o, random.Random(seed), 64)
        xy = np.random.default_rng(random.Random(seed).getrandbits(64)).uniform(-EXTENT, EXTENT, (64, 2)).round(2)
        assert found.tolist() == xy[plain(xy)].tolist()


@pytest.mark.parametrize("seed", range(3))
def test_naming_as_the_plain_search(seed: int) -> None:
    """The same filters, the same draw among them, a fresh dict each time."""
    rng = random.Random(seed)
    for scene in _scenes(seed + 30, 40):
        for _ in range(3):
            loose: dict[int, set[str]] = {}
            for o in scene.objects:
                if rng.random() < 0.3:
                    loose[o.id] = set(rng.sample(["shape", "colour", "size", "material"], rng.randint(1, 2)))
            for o in scene.objects:
                for _repeat in range(2):  # the second time from what the first kept
                    state = rng.getstate()
                    fast = minimal_where(o, scene, rng, loose or None)
                    after = rng.getstate()
                    rng.setstate(state)
                    assert fast == _ref_minimal_where(o, scene, rng, loose or None)
                    assert rng.getstate() == after
                    fast["shape"] = "changed"  # the caller owns it
                where = {k: v for k, v in full_where(o).items() if rng.random() < 0.6}
                assert names_one(where, o, scene, loose) == _ref_names_one(where, o, scene, loose)
                assert names_one(where, o, scene) == _ref_names_one(where, o, scene, None)
                expected = [p for p in scene.objects if all(getattr(p, k) == v for k, v in where.items())]
                assert select(scene, where) == expected


def test_copied_is_a_deep_copy() -> None:
    shared = {"shape": "cube", "colour": "red"}
    op = {"op": "swap", "a": shared, "b": shared, "items": [{"x": 1.0, "where": shared}], "at": (1, [2])}
    out = copied(op)
    assert out == copy.deepcopy(op)
    assert out["a"] is out["b"] is out["items"][0]["where"] and out["a"] is not shared
    out["a"]["colour"] = "blue"
    out["items"][0]["x"] = 2.0
    assert op == {"op": "swap", "a": shared, "b": shared, "items": [{"x": 1.0, "where": shared}], "at": (1, [2])}
    assert shared["colour"] == "red"


def test_realizations_are_the_views_of_the_realized_operations() -> None:
    rng = random.Random(8)
    scene = random_scene(rng, n=4, stack_chance=0.0)
    view = View(scene, VIEWS[0], "studio")
    o = scene.objects[0]
    cases: list[tuple[dict[str, Any], list[dict[str, Any]]]] = [
        ({"op": "move", "where": full_where(o), "x": o.x, "y": o.y}, [{"slot": "position", "accept": []}]),
        (
            {"op": "set", "where": full_where(o), "attr": "colour", "value": "red"},
            [{"slot": "value", "choices": ["gray", "cyan", "yellow"]}],
        ),
    ]
    for op, free in cases:
        views = realizations(op, free, view, [view], 3, "d", 2, 6)
        expected = []
        for k in range(6):
            alt = realize(op, free, view, [view], draw_rng(3, "d", 2, k))
            if alt is not None:
                expected.append(apply_op(alt, view, [view]))
        assert views == expected and views


@pytest.mark.parametrize("azimuth", [*VIEWS, 10.0])
def test_sprite_rays_are_the_cameras_rays(azimuth: float) -> None:
    rng = random.Random(int(azimuth))
    for width, height in ((512, 384), (256, 192)):
        table = _rays(azimuth, width, height)
        for _ in range(20):
            x0, y0 = rng.randrange(width - 1), rng.randrange(height - 1)
            x1, y1 = rng.randint(x0 + 1, width), rng.randint(y0 + 1, height)
            block = camera(azimuth, width, height).ray_components(x0, y0, x1, y1)
            for a, b in zip(table, block, strict=True):
                assert np.array_equal(a[y0:y1, x0:x1], b)
