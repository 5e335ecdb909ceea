"""The pixel parser: a world-style image back to a scene.

It is the eyes of the exact judge, so it is built to be right rather than clever:

1. find the floor style (the empty floor of every style is known exactly) and mark as
   foreground every pixel that differs from it;
2. split the foreground into connected components: one per stack (an object, or a small
   object resting on a large one), since valid scenes never overlap on screen;
3. explain each component by synthesis: for every hypothesis (a single object of each
   shape and size, or a stack of each allowed pair), solve the ground position that puts
   its silhouette's bottom and centre where the component's are, ray-cast that silhouette,
   and keep the hypothesis whose silhouette best overlaps the component;
4. read each object's colour from the hue of its most saturated pixels, and its material
   from the mirror-like sky reflection metal shows on its upward faces.

Positions come back in world coordinates for the azimuth the caller names (the parser
cannot tell a view from its 90-degree orbits; relations read the same either way).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np
from PIL import Image

from yanami._files import atomic_write
from yanami.world._camera import HEIGHT, WIDTH, Camera
from yanami.world._render import STYLES, _intersect, ground_srgb
from yanami.world._scene import BASE_AZIMUTH, SIZES, Scene, WorldObject

FOREGROUND = 48
"""Summed absolute RGB difference from the floor above which a pixel is foreground."""
MIN_AREA = 40
"""Components smaller than this many pixels are noise."""
SHORTLIST = 4
"""Hypotheses (of 12) whose silhouettes are ray-cast, after ranking all by their box's fit."""
STACK_TIE = 0.01
"""Silhouette IoU within which a lone object and a stack on it explain an outline equally well."""


@dataclass(frozen=True)
class ParsedObject:
    """An object as the parser sees it."""

    shape: str
    colour: str
    size: str
    material: str
    x: float
    y: float
    on: int | None
    """Index (in the parse's object list) of the object this one rests on."""
    score: float
    """How well the best hypothesis explains the pixels (silhouette IoU, 0..1)."""


@dataclass(frozen=True)
class Parse:
    """What an image shows."""

    style: str
    objects: tuple[ParsedObject, ...]
    residual: float = 0.0
    """Mean absolute difference (0..255 per channel) between the floor's pixels and the known floor."""
    speckle: float = 0.0
    """Share of the image in foreground specks too small to be objects."""

    def to_scene(self) -> Scene:
        """The parse as a scene (ids are list positions)."""
        return Scene(
            objects=tuple(
                WorldObject(
                    id=i,
                    shape=o.shape,  # type: ignore[arg-type]
                    colour=o.colour,  # type: ignore[arg-type]
                    size=o.size,  # type: ignore[arg-type]
                    material=o.material,  # type: ignore[arg-type]
                    x=o.x,
                    y=o.y,
                    on=o.on,
                )
                for i, o in enumerate(self.objects)
            )
        )


def parse_image(data: bytes | Image.Image | np.ndarray, azimuth: float = BASE_AZIMUTH) -> Parse:
    """Parse an image (bytes, PIL image or RGB array) in the world's style."""
    rgb = _as_array(data)
    style = _style(rgb)
    diff = _floor_difference(rgb, style)
    mask = diff > FOREGROUND
    objects: list[ParsedObject] = []
    comps = _components(mask)
    if comps:
        cam = _camera(azimuth)
        anchors = np.array([_anchor(c) for c in comps])
        positions, dims = _solve_positions(cam, anchors)  # every component and hypothesis at once
        for k, comp in enumerate(comps):
            objects.extend(_explain(rgb, comp, cam, positions[k], dims[k], style, len(objects)))
    # Quality signals: a clean render has exactly the known floor around its objects, and no specks.
    near = mask.copy()
    for k in (1, 2):
        near[k:, :] |= mask[:-k, :]
        near[:-k, :] |= mask[k:, :]
        near[:, k:] |= mask[:, :-k]
        near[:, :-k] |= mask[:, k:]
    floor = ~near
    residual = float(diff[floor].mean()) / 3 if floor.any() else 255.0
    kept = sum(int(c.area) for c in comps)
    speckle = max(0, int(np.count_nonzero(mask)) - kept) / mask.size
    return Parse(style, tuple(objects), residual, speckle)


_PARSES: OrderedDict[tuple[str, float], Parse] = OrderedDict()
_PARSES_SIZE = 8192
_PARSES_LOCK = threading.Lock()


def parse_cached(data: bytes, azimuth: float = BASE_AZIMUTH, sha256: str | None = None) -> Parse:
    """`parse_image` of encoded bytes, remembered by content: the same image is parsed once per process."""
    key = (sha256 or hashlib.sha256(data).hexdigest(), float(azimuth))
    with _PARSES_LOCK:
        found = _PARSES.get(key)
        if found is not None:
            _PARSES.move_to_end(key)
            return found
    pool = _POOL
    found = pool.submit(parse_image, data, azimuth).result() if pool is not None else parse_image(data, azimuth)
    with _PARSES_LOCK:
        _PARSES[key] = found
        if len(_PARSES) > _PARSES_SIZE:
            _PARSES.popitem(last=False)
    return found


_POOL: ProcessPoolExecutor | None = None


@contextmanager
def parse_workers(n: int) -> Iterator[None]:
    """Within the block, `parse_cached` parses in ``n`` worker processes (``n`` <= 1: in the caller).

    The callers are threads (the runner's), which wait without holding the GIL while a worker
    parses, so the machine's cores share the parsing; results are the same as in-process.

    The workers die with this process however it ends (``kill -9`` included). Their parent
    is the forkserver, not this process, and the forkserver outlives it while any worker
    lives, so parent death alone would not do: each worker watches a pipe whose writing end
    only this process holds, and ends itself when the pipe closes (`_end_with_starter`).
    """
    global _POOL
    if n <= 1 or _POOL is not None:
        yield
        return
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    alive_r, alive_w = context.Pipe(duplex=False)  # the reading end goes to each worker; the writing end stays here
    pool = ProcessPoolExecutor(n, mp_context=context, initializer=_end_with_starter, initargs=(alive_r,))
    _POOL = pool
    try:
        yield
    finally:
        _POOL = None
        pool.shutdown(wait=True, cancel_futures=True)
        alive_w.close()
        alive_r.close()


def _end_with_starter(alive: Connection) -> None:
    """Pool initializer: end this worker when the process that started the pool ends.

    A daemon thread blocks on ``alive``, whose other end only the starting process holds:
    nothing is ever sent, so the read returns (end of file) only when that process has
    ended, and the worker then exits at once. On Linux the worker is also killed when its
    own parent (the forkserver) dies (``PR_SET_PDEATHSIG``).
    """
    if sys.platform == "linux":
        import ctypes
        import signal

        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1

    def watch() -> None:
        with contextlib.suppress(EOFError, OSError):
            alive.recv_bytes()
        os._exit(1)

    threading.Thread(target=watch, name="yanami-end-with-starter", daemon=True).start()


@lru_cache(maxsize=len(STYLES))
def _floor16(style: str) -> np.ndarray:
    out = ground_srgb(style, WIDTH, HEIGHT).astype(np.int16)
    out.flags.writeable = False
    return out


def _floor_difference(rgb: np.ndarray, style: str) -> np.ndarray:
    """Per pixel, the summed absolute RGB difference from the style's empty floor."""
    d = rgb.astype(np.int16)
    d -= _floor16(style)
    np.abs(d, out=d)
    return d[:, :, 0] + d[:, :, 1] + d[:, :, 2]


def _as_array(data: bytes | Image.Image | np.ndarray) -> np.ndarray:
    if isinstance(data, np.ndarray):
        img = Image.fromarray(data)
    elif isinstance(data, Image.Image):
        img = data
    else:
        img = Image.open(io.BytesIO(data))
    if img.mode != "RGB":
        img = img.convert("RGB")
    if img.size != (WIDTH, HEIGHT):
        img = img.resize((WIDTH, HEIGHT), Image.Resampling.BILINEAR)
    return np.asarray(img)


def _style(rgb: np.ndarray) -> str:
    """The style whose empty floor is closest to the image (objects are a small minority)."""
    small = rgb[::8, ::8].astype(np.int16)
    best, best_err = "", np.inf
    for name in STYLES:
        g = ground_srgb(name, WIDTH, HEIGHT)[::8, ::8].astype(np.int16)
        err = float(np.median(np.abs(small - g).sum(axis=2)))
        if err < best_err:
            best, best_err = name, err
    return best


@dataclass
class _Component:
    mask: np.ndarray
    """Boolean mask inside the box."""
    x0: int
    y0: int
    area: int
    """Foreground pixels before hole filling."""


def _components(mask: np.ndarray) -> list[_Component]:
    """8-connected components of a boolean mask, via runs and union-find, largest first."""
    h, w = mask.shape
    padded = np.zeros((h, w + 2), dtype=np.int8)
    padded[:, 1:-1] = mask
    edges = np.diff(padded, axis=1)
    rows_, cols_ = np.nonzero(edges)  # row-major: each run's start, then its end
    starts_r, starts_c, ends_c = rows_[0::2], cols_[0::2], cols_[1::2]
    runs = list(zip(starts_r.tolist(), starts_c.tolist(), ends_c.tolist(), strict=True))
    parent = list(range(len(runs)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    by_row: dict[int, list[int]] = {}
    for i, (r, _, _) in enumerate(runs):
        by_row.setdefault(r, []).append(i)
    for i, (r, c0, c1) in enumerate(runs):
        for j in by_row.get(r - 1, ()):
            _, d0, d1 = runs[j]
            if d0 <= c1 and c0 <= d1:  # 8-connected: touching diagonally counts
                a, b = find(i), find(j)
                if a != b:
                    parent[a] = b
    groups: dict[int, list[int]] = {}
    for i in range(len(runs)):
        groups.setdefault(find(i), []).append(i)
    out = []
    for members in groups.values():
        rows = [runs[i][0] for i in members]
        c0 = min(runs[i][1] for i in members)
        c1 = max(runs[i][2] for i in members)
        r0, r1 = min(rows), max(rows) + 1
        m = np.zeros((r1 - r0, c1 - c0), dtype=bool)
        for i in members:
            r, a, b = runs[i]
            m[r - r0, a - c0 : b - c0] = True
        area = int(m.sum())
        if area >= MIN_AREA:
            out.append(_Component(_fill_holes(m), c0, r0, area))
    out.sort(key=lambda c: -int(c.mask.sum()))
    return out


def _fill_holes(m: np.ndarray) -> np.ndarray:
    """Fill each row between its first and last foreground pixel, and each column likewise.

    Silhouettes of the world's objects and stacks are convex along rows and columns, so this
    closes highlights and reflections that happen to match the floor.
    """
    out = m.copy()
    for arr in (out, out.T):
        any_ = np.any(arr, axis=1)
        first = np.argmax(arr, axis=1)
        last = arr.shape[1] - 1 - np.argmax(arr[:, ::-1], axis=1)
        idx = np.arange(arr.shape[1])[None, :]
        arr |= any_[:, None] & (idx >= first[:, None]) & (idx <= last[:, None])
    return out


# Hypotheses ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Hypothesis:
    bottom: tuple[str, str]
    """(shape, size) of the object on the ground."""
    top: tuple[str, str] | None
    """(shape, size) of what rests on it, if anything."""


_HYPOTHESES = [_Hypothesis((s, z), None) for s in ("cube", "sphere", "cylinder") for z in ("small", "large")] + [
    _Hypothesis((s, "large"), (t, "small")) for s in ("cube", "cylinder") for t in ("cube", "sphere", "cylinder")
]


@lru_cache(maxsize=8)
def _camera(azimuth: float) -> Camera:
    return Camera(azimuth, WIDTH, HEIGHT)


@lru_cache(maxsize=8)
def _template(shape: str) -> np.ndarray:
    """Points bounding the silhouette of a unit-half-extent object whose base centre is the origin."""
    if shape == "sphere":
        u = np.linspace(0, 2 * np.pi, 16, endpoint=False)
        v = np.linspace(-np.pi / 2, np.pi / 2, 7)
        uu, vv = np.meshgrid(u, v)
        pts = np.stack([np.cos(vv) * np.cos(uu), np.cos(vv) * np.sin(uu), 1 + np.sin(vv)], axis=-1).reshape(-1, 3)
    elif shape == "cube":
        pts = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (0, 2)], dtype=float)
    else:
        u = np.linspace(0, 2 * np.pi, 24, endpoint=False)
        ring = np.stack([np.cos(u), np.sin(u)], axis=-1)
        pts = np.concatenate([np.column_stack([ring, np.zeros(24)]), np.column_stack([ring, np.full(24, 2.0)])])
    pts.flags.writeable = False
    return pts


@lru_cache(maxsize=64)
def _stack_template(h: _Hypothesis) -> np.ndarray:
    """Silhouette-bounding points of a hypothesis standing at the origin."""
    shape, size = h.bottom
    half = SIZES[size]  # type: ignore[index]
    pts = [_template(shape) * half]
    if h.top is not None:
        top_half = SIZES[h.top[1]]  # type: ignore[index]
        pts.append(_template(h.top[0]) * top_half + np.array([0.0, 0.0, 2 * half]))
    out = np.concatenate(pts)
    out.flags.writeable = False
    return out


@lru_cache(maxsize=1)
def _all_templates() -> tuple[np.ndarray, np.ndarray]:
    """Every hypothesis's template points, concatenated (N, 3), and where each one starts (H,)."""
    ts = [_stack_template(h) for h in _HYPOTHESES]
    points = np.concatenate(ts)
    starts = np.cumsum([0] + [len(t) for t in ts[:-1]])
    points.flags.writeable = False
    return points, starts


def _anchors(cam: Camera, pts: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per hypothesis: (centre x, bottom y) of its projected points, and (width, height).

    ``pts`` (..., N, 3) holds every hypothesis's points back to back, each starting at ``starts``.
    """
    p = cam.project(pts)
    lo = np.minimum.reduceat(p, starts, axis=-2)
    hi = np.maximum.reduceat(p, starts, axis=-2)
    return np.stack([(lo[..., 0] + hi[..., 0]) / 2, hi[..., 1]], axis=-1), hi - lo


def _anchor(comp: _Component) -> tuple[float, float]:
    """A component's bottom centre: (x centre of its box, y of its lowest row's bottom edge)."""
    w = comp.mask.shape[1]
    return comp.x0 + w / 2, comp.y0 + float(np.flatnonzero(comp.mask.any(axis=1))[-1]) + 1.0


def _solve_positions(cam: Camera, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For every target (C, 2) and hypothesis at once: the ground position (C, H, 2) whose
    silhouette has its bottom-centre at the target (x centre, y bottom), and the
    silhouette's (width, height) there (C, H, 2).

    Newton's method with each Jacobian taken once (the map is nearly linear over an
    object's size).
    """
    points, starts = _all_templates()
    n = len(starts)
    start = np.array([cam.ground_point(float(x), float(y)) for x, y in targets])  # (C, 2)
    xy = np.repeat(start[:, None, :], n, axis=1)  # (C, H, 2)
    goal = targets[:, None, :]
    owner = np.repeat(np.arange(n), np.diff(np.append(starts, len(points))))

    def at(xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        shift = np.concatenate([xy, np.zeros((*xy.shape[:-1], 1))], axis=-1)[:, owner, :]  # (C, N, 3)
        return _anchors(cam, points[None] + shift, starts)

    # The anchor moves with the object's base almost rigidly: the Jacobian of the base
    # centre's projection stands in for every hypothesis's.
    eps = 0.01
    base = np.concatenate([start, np.zeros((len(start), 1))], axis=-1)
    p0 = cam.project(base)
    jx = (cam.project(base + np.array([eps, 0.0, 0.0])) - p0) / eps
    jy = (cam.project(base + np.array([0.0, eps, 0.0])) - p0) / eps
    inv = np.linalg.inv(np.stack([jx, jy], axis=-1))[:, None]  # (C, 1, 2, 2)
    got, dims = at(xy)
    for _ in range(10):
        err = goal - got
        if np.abs(err).max() < 0.1:
            break
        xy = xy + np.einsum("chij,chj->chi", np.broadcast_to(inv, (*xy.shape[:2], 2, 2)), err)
        got, dims = at(xy)
    return xy, dims


def _silhouette(h: _Hypothesis, x: float, y: float, cam: Camera, d: tuple[np.ndarray, ...]) -> np.ndarray:
    """Which of the rays ``d`` (a pixel box's unit directions) hit the hypothesis standing at (x, y)."""
    pos = cam.basis[0]
    shape, size = h.bottom
    half = SIZES[size]  # type: ignore[index]
    hit = _covers(shape, x, y, half, 0.0, pos, d)
    if h.top is not None:
        hit |= _covers(h.top[0], x, y, SIZES[h.top[1]], 2 * half, pos, d)  # type: ignore[index]
    return hit


def _covers(
    shape: str, x: float, y: float, h: float, base: float, pos: np.ndarray, d: tuple[np.ndarray, ...]
) -> np.ndarray:
    """Whether each ray from ``pos`` hits the solid (a hit mask only: no depths, no normals)."""
    dx, dy, dz = d
    if shape == "sphere":
        ox, oy, oz = pos[0] - x, pos[1] - y, pos[2] - (base + h)
        b = dx * ox + dy * oy + dz * oz
        return b * b - (ox * ox + oy * oy + oz * oz - h * h) >= 0
    if shape == "cube":
        near = np.full_like(dx, -np.inf)
        far = np.full_like(dx, np.inf)
        with np.errstate(divide="ignore", invalid="ignore"):
            for axis, (lo, hi) in enumerate(((x - h, x + h), (y - h, y + h), (base, base + 2 * h))):
                inv = 1.0 / d[axis]
                t1 = (lo - pos[axis]) * inv
                t2 = (hi - pos[axis]) * inv
                np.maximum(near, np.minimum(t1, t2), out=near)
                np.minimum(far, np.maximum(t1, t2), out=far)
        return (near <= far) & (far > 0)
    top = base + 2 * h
    ox, oy = pos[0] - x, pos[1] - y
    a = dx * dx + dy * dy
    b = ox * dx + oy * dy
    disc = b * b - a * (ox * ox + oy * oy - h * h)
    with np.errstate(divide="ignore", invalid="ignore"):
        ts = (-b - np.sqrt(np.maximum(disc, 0))) / a
        z = pos[2] + ts * dz
        side = (disc >= 0) & (z >= base) & (z <= top) & (ts > 0)
        tt = (top - pos[2]) / dz
    px, py = ox + tt * dx, oy + tt * dy
    return side | ((tt > 0) & (px * px + py * py <= h * h))


def _explain(
    rgb: np.ndarray, comp: _Component, cam: Camera, positions: np.ndarray, dims: np.ndarray, style: str, offset: int
) -> list[ParsedObject]:
    m = comp.mask
    pad = 3
    box = (comp.x0 - pad, comp.y0 - pad, comp.x0 + m.shape[1] + pad, comp.y0 + m.shape[0] + pad)
    observed = np.zeros((m.shape[0] + 2 * pad, m.shape[1] + 2 * pad), dtype=bool)
    observed[pad:-pad, pad:-pad] = m
    # Every hypothesis's position is solved; ray-cast only the few whose box fits best.
    width, height = m.shape[1], m.shape[0]
    fit = np.abs(dims[:, 0] - width) + np.abs(dims[:, 1] - height)
    best: tuple[float, _Hypothesis, float, float] | None = None
    rays = cam.ray_components(*box)

    def score(k: int) -> tuple[float, _Hypothesis, float, float]:
        h, x, y = _HYPOTHESES[k], float(positions[k, 0]), float(positions[k, 1])
        predicted = _silhouette(h, x, y, cam, rays)
        inter = int(np.count_nonzero(predicted & observed))
        return inter / max(int(np.count_nonzero(predicted | observed)), 1), h, x, y

    for k in np.argsort(fit, kind="stable")[:SHORTLIST]:
        scored = score(int(k))
        if best is None or scored[0] > best[0]:
            best = scored
    assert best is not None
    iou, h, x, y = best
    shape, size = h.bottom
    # Appearance is read on the component's box, with a one-pixel empty border.
    y0, x0 = comp.y0 - 1, comp.x0 - 1
    crop = _crop(rgb, x0, y0, m.shape[1] + 2, m.shape[0] + 2)
    region = np.zeros((m.shape[0] + 2, m.shape[1] + 2), dtype=bool)
    region[1:-1, 1:-1] = m
    if h.top is None:
        colour, material = _appearance(crop, region, (shape,), style)
        return [ParsedObject(shape, colour, size, material, x, y, None, iou)]
    # Split the stack: the top object's silhouette, and the rest for its support.
    d = cam.ray_components(x0, y0, x0 + region.shape[1], y0 + region.shape[0])
    top_hit = _covers(h.top[0], x, y, SIZES[h.top[1]], 2 * SIZES[size], cam.basis[0], d)  # type: ignore[index]
    c0, m0 = _appearance(crop, region & ~top_hit, (shape, h.top[0]), style)
    c1, m1 = _appearance(crop, region & top_hit, (h.top[0],), style)
    if c0 == c1:
        # A small object on a large one near the camera can hide inside its support's
        # silhouette; then only colour tells them apart (a stack never shares one). When the
        # support alone explains the outline as well, there is nothing on top.
        alone = score(_HYPOTHESES.index(_Hypothesis(h.bottom, None)))
        if alone[0] >= iou - STACK_TIE:
            colour, material = _appearance(crop, region, (shape,), style)
            return [ParsedObject(shape, colour, size, material, alone[2], alone[3], None, alone[0])]
    return [
        ParsedObject(shape, c0, size, m0, x, y, None, iou),
        ParsedObject(h.top[0], c1, h.top[1], m1, x, y, offset, iou),
    ]


def _crop(rgb: np.ndarray, x0: int, y0: int, w: int, h: int) -> np.ndarray:
    """rgb[y0:y0+h, x0:x0+w], zero-padded where the box leaves the image."""
    out = np.zeros((h, w, 3), dtype=rgb.dtype)
    sy0, sx0 = max(y0, 0), max(x0, 0)
    sy1, sx1 = min(y0 + h, rgb.shape[0]), min(x0 + w, rgb.shape[1])
    out[sy0 - y0 : sy1 - y0, sx0 - x0 : sx1 - x0] = rgb[sy0:sy1, sx0:sx1]
    return out


# Appearance ---------------------------------------------------------------------------
#
# Colour and material are read by comparison with the renderer itself: for each style, a
# few single-object renders of every (shape, colour, material) give reference feature
# vectors, and an object takes the colour and material of its nearest reference of the
# same shape. The features are the mean colours of the region's pixels in four bands of
# brightness, which capture both hue and the way the surface takes light (metal mirrors a
# bright sky on its upward faces and a dark floor on its sides; matte shades smoothly).

_BANDS = ((0.0, 0.2), (0.2, 0.5), (0.5, 0.8), (0.8, 1.0))
_CALIBRATION_SPOTS = ((0.0, 0.0), (-2.2, 1.5), (2.0, -1.8))


def _features(rgb: np.ndarray, region: np.ndarray) -> np.ndarray | None:
    inner = region.copy()
    inner[1:, :] &= region[:-1, :]
    inner[:-1, :] &= region[1:, :]
    inner[:, 1:] &= region[:, :-1]
    inner[:, :-1] &= region[:, 1:]
    if np.count_nonzero(inner) >= 12:
        region = inner  # drop the anti-aliased rim, which mixes in the background
    px = rgb[region].astype(np.float32) / 255.0
    if len(px) < 4:
        return None
    lum = px @ np.array([0.3, 0.59, 0.11], dtype=np.float32)
    px = px[np.argsort(lum, kind="stable")]
    n = len(px)
    return np.concatenate([px[int(a * n) : max(int(b * n), int(a * n) + 1)].mean(axis=0) for a, b in _BANDS])


REFERENCES_FILE = Path(__file__).with_name("parser_references.npz")
"""The calibration shipped with the package (`calibrate` writes it; a test keeps it in step)."""


@lru_cache(maxsize=len(STYLES))
def _references(style: str) -> dict[tuple[str, ...], tuple[np.ndarray, list[tuple[str, str]]]]:
    """Reference features for one style: from the shipped calibration, computed when it lacks the style."""
    shipped = _shipped()
    if style in shipped:
        return shipped[style]
    return calibrate(style)


@lru_cache(maxsize=1)
def _shipped() -> dict[str, dict[tuple[str, ...], tuple[np.ndarray, list[tuple[str, str]]]]]:
    if not REFERENCES_FILE.is_file():
        return {}
    out: dict[str, dict[tuple[str, ...], tuple[np.ndarray, list[tuple[str, str]]]]] = {}
    with np.load(REFERENCES_FILE) as data:
        for name in data.files:
            if not name.endswith("|feats"):
                continue
            style, key = name.removesuffix("|feats").split("|", 1)
            labels = [tuple(x.split("/")) for x in data[f"{style}|{key}|labels"].tolist()]
            out.setdefault(style, {})[tuple(key.split(","))] = (data[name], labels)  # type: ignore[assignment]
    return out


def write_references(path: Path = REFERENCES_FILE) -> None:
    """Calibrate every style and write the result where the parser looks for it."""
    arrays: dict[str, np.ndarray] = {}
    for style in STYLES:
        for key, (feats, labels) in calibrate(style).items():
            arrays[f"{style}|{','.join(key)}|feats"] = feats
            arrays[f"{style}|{','.join(key)}|labels"] = np.array(["/".join(lb) for lb in labels])
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)  # type: ignore[arg-type]
    atomic_write(path, buf.getvalue())


def calibrate(style: str) -> dict[tuple[str, ...], tuple[np.ndarray, list[tuple[str, str]]]]:
    """Reference feature vectors and their (colour, material), per shape, for one style.

    Keys are ``(shape,)`` for an object seen whole, and ``(shape, top_shape)`` for the
    support of a stack, whose top face is partly hidden by what rests on it.
    """
    from yanami.world._render import render_array
    from yanami.world._scene import COLOURS

    floor = ground_srgb(style, WIDTH, HEIGHT).astype(np.int16)
    cam = _camera(BASE_AZIMUTH)
    out: dict[tuple[str, ...], tuple[list[np.ndarray], list[tuple[str, str]]]] = {}

    def add(key: tuple[str, ...], rgb: np.ndarray, region: np.ndarray, label: tuple[str, str]) -> None:
        f = _features(rgb, region)
        if f is not None:
            feats, labels = out.setdefault(key, ([], []))
            feats.append(f)
            labels.append(label)

    for colour in COLOURS:
        for material in ("matte", "metal"):
            for shape in ("cube", "sphere", "cylinder"):
                for size in ("small", "large"):
                    for k, (x, y) in enumerate(_CALIBRATION_SPOTS):
                        o = WorldObject(id=0, shape=shape, colour=colour, size=size, material=material, x=x, y=y)  # type: ignore[arg-type]
                        rgb = render_array(Scene(objects=(o,)), BASE_AZIMUTH + 90 * k, style)
                        region = np.abs(rgb.astype(np.int16) - floor).sum(axis=2) > FOREGROUND
                        add((shape,), rgb, region, (colour, material))
            for shape in ("cube", "cylinder"):
                for top_shape in ("cube", "sphere", "cylinder"):
                    for x, y in _CALIBRATION_SPOTS[:2]:
                        o = WorldObject(id=0, shape=shape, colour=colour, size="large", material=material, x=x, y=y)  # type: ignore[arg-type]
                        top = WorldObject(
                            id=1,
                            shape=top_shape,  # type: ignore[arg-type]
                            colour="red" if colour == "gray" else "gray",
                            size="small",
                            material="matte",
                            x=x,
                            y=y,
                            on=0,
                        )
                        rgb = render_array(Scene(objects=(o, top)), BASE_AZIMUTH, style)
                        region = np.abs(rgb.astype(np.int16) - floor).sum(axis=2) > FOREGROUND
                        d = cam.ray_components(0, 0, WIDTH, HEIGHT)
                        covered = np.isfinite(_intersect(top, o.height, cam.basis[0], d)[0])
                        add((shape, top_shape), rgb, region & ~covered, (colour, material))
    return {k: (np.stack(v[0]), v[1]) for k, v in out.items()}


def _appearance(rgb: np.ndarray, region: np.ndarray, key: tuple[str, ...], style: str) -> tuple[str, str]:
    """(colour, material) of the pixels in ``region``, against the references under ``key``."""
    f = _features(rgb, region)
    if f is None:
        return "gray", "matte"
    feats, labels = _references(style)[key]
    k = int(np.argmin(((feats - f) ** 2).sum(axis=1)))
    return labels[k]


if __name__ == "__main__":  # python -m yanami.world._parse: recalibrate after changing the renderer
    write_references()
    print(f"wrote {REFERENCES_FILE}")
