"""The pixel parser: a world-style image back to a scene.

It is the eyes of the exact judge, so it is built to be right rather than clever. It reads
a picture as a person would, so a correct picture whose pixels are not the renderer's own
(another brightness, white balance, gamma or hue, JPEG, a blur, another size, a border, a
frame, lines along its edges, a crop, a slight turn, a watermark in a corner) reads the same:

1. bring the picture to the renderer's frame: strip borders, frames, letterbox bars and
   lines along the edges (bands of one colour, of any width, that end in a step), and
   resize what is left to 512 x 384;
2. bring it to the renderer's tone: the style is the one whose floor tint is nearest, and
   a per-channel map (gain and offset) is fitted from that style's known empty floor to
   the picture's floor pixels; a clean render fits exactly, with the identity. A picture
   that is not a clean render also tries every plausible style and a few curvatures
   (gamma), and keeps the map under which its objects look most like the renderer's
   (the floor spans too few grey levels to fix the map for dark colours, and a strong
   white balance can make one floor look like another);
3. mark as foreground every pixel that differs from the known floor, and split it into
   connected components: one per stack (an object, or a small object resting on a large
   one), since valid scenes never overlap on screen;
4. explain each component by synthesis: for every hypothesis (a single object of each
   shape and size, or a stack of each allowed pair), solve the ground position that puts
   its silhouette's bottom and centre where the component's are, ray-cast that silhouette,
   and keep the hypothesis whose silhouette best overlaps the component. A component in the
   margin that reads as no object (a watermark, a logo, a turn's filled corner) is drawn
   over the picture and left out (`_overlay`); one inside an object's explained silhouette
   is a piece of that object. Objects come in
   two sizes, so their areas against their silhouettes tell whether the picture was
   cropped: if so, it is scaled back about its centre and steps 2-4 run again;
5. read each object's colour and material against reference renders (see Appearance).

Positions come back in world coordinates for the azimuth the caller names (the parser
cannot tell a view from its 90-degree orbits; relations read the same either way);
`parse_views` reads one picture in several camera frames, normalising it once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TypeVar, cast

import numpy as np
from PIL import Image

from yanami._regions import regions
from yanami._workers import quiet_worker, starting_workers
from yanami.contract import atomic_write
from yanami.world._camera import HEIGHT, WIDTH, Camera
from yanami.world._render import STYLES, _intersect, ground_srgb, png_pixels
from yanami.world._scene import (
    BASE_AZIMUTH,
    EXTENT,
    MATERIALS,
    SHAPES,
    SIZES,
    Colour,
    Material,
    Scene,
    Shape,
    Size,
    WorldObject,
)

FOREGROUND = 48
"""Summed absolute RGB difference from the floor above which a pixel is foreground."""
MIN_AREA = 40
"""Components smaller than this many pixels are noise."""
MAX_SHARE = 0.15
"""No stack of the world covers more than this share of the picture (the largest seen on a
bench's ground truth covers under 6 %): a larger component is not an object (noise, a
texture, a picture pasted in) and is not explained as one; its pixels count as specks."""
MAX_FOREGROUND = 0.5
"""Where more of the picture than this differs from the floor, nothing in it is read as an
object (a world scene leaves most of its floor in view: at most about 12 % is foreground)."""
SHORTLIST = 4
"""Hypotheses (of 12) whose silhouettes are ray-cast, after ranking all by their box's fit."""
STACK_TIE = 0.01
"""Silhouette IoU within which a lone object and a stack on it explain an outline equally well."""
CORNER = (0.3, 0.25)
"""A corner's share of the picture's width and height where a watermark may lie (a box of 7.5 %)."""
OVERLAY_FIT = 0.6
"""Silhouette IoU under which no hypothesis explains a component (a world object's is 0.75 or more,
JPEG'd, blurred or resized; a letter's, a line's or a corner's under 0.4)."""
OVERLAY_REACH = 0.5
"""How far (world units) beyond the floor's area (`EXTENT`) a component in the margin may stand, an object."""
OVERLAY_PAD = 6
"""Pixels around a thing drawn over the picture that count with it (a letter's specks, a logo's rim)."""


@dataclass(frozen=True)
class ParsedObject:
    """An object as the parser sees it."""

    shape: Shape
    colour: Colour
    size: Size
    material: Material
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
    """Mean absolute difference (0..255 per channel) between the floor's pixels and the known
    floor, once the picture's tone map is undone (noise, smudges, a painted-over part)."""
    speckle: float = 0.0
    """Share of the image in foreground specks too small to be objects."""
    misfits: tuple[float, ...] = ()
    """Per foreground component (an object or a stack), how far its outline as a person sees it
    (where its contrast with the floor is half that of the object: blurred or not, an edge
    lies there) strays from the silhouette of the hypothesis that explains it, in pixels on
    average along the silhouette's boundary. A clean render's are within about a pixel; a
    broken, smeared or doubled object's are several."""
    spread: float = 0.0
    """How wide the objects' edges are, in pixels: per component, the pixels its contrast says it
    covers in part (a tenth to nine tenths) per pixel of its silhouette's boundary, the median over
    the components. A clean render's are about 1, a JPEG'd, resized or slightly blurred one's (sigma
    up to 1.5) under 4, a blur of sigma 3 or 4 spreads them to 5 to 7."""
    content: tuple[int, int, int, int] | None = None
    """Where the picture lies in the image (left, top, right, bottom), once uniform borders and
    letterbox bars are stripped; it was then resized to the renderer's frame."""
    zoom: float = 1.0
    """How much larger the objects appeared than the renderer draws them (a crop); undone before synthesis."""
    gain: tuple[float, float, float] = (1.0, 1.0, 1.0)
    offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    gamma: float = 1.0
    """The tone map undone, per channel: observed = gain * 255 (rendered / 255) ** gamma + offset."""

    def to_scene(self) -> Scene:
        """The parse as a scene (ids are list positions)."""
        return Scene(
            objects=tuple(
                WorldObject(
                    id=i,
                    shape=o.shape,
                    colour=o.colour,
                    size=o.size,
                    material=o.material,
                    x=o.x,
                    y=o.y,
                    on=o.on,
                )
                for i, o in enumerate(self.objects)
            )
        )


def parse_image(data: bytes | Image.Image | np.ndarray, azimuth: float = BASE_AZIMUTH) -> Parse:
    """Parse an image (bytes, PIL image or RGB array) in the world's style."""
    return _parse_all(data, [float(azimuth)])[float(azimuth)]


def parse_views(data: bytes, azimuths: Sequence[float], sha256: str | None = None) -> dict[float, Parse]:
    """The image parsed in several camera frames at once, in this process: ``{azimuth: Parse}``
    (`Parser.views` of an in-process parser; see there)."""
    return IN_PROCESS.views(data, azimuths, sha256)


_PARSES: OrderedDict[tuple[str, float], Parse] = OrderedDict()
_PARSES_SIZE = 8192
_PARSES_LOCK = threading.Lock()


def parse_cached(data: bytes, azimuth: float = BASE_AZIMUTH, sha256: str | None = None) -> Parse:
    """`parse_image` of encoded bytes, remembered by content: the same image is parsed once per process."""
    return IN_PROCESS.cached(data, azimuth, sha256)


def _parse_all(data: bytes | Image.Image | np.ndarray, azimuths: list[float]) -> dict[float, Parse]:
    """Normalise once, then synthesise in each camera frame (the first one also checks the tone and scale)."""
    raw = _decode(data)
    frame, content, tone = _frame(raw)
    prep = _prepare(frame, tone, content, 1.0)
    if tone.exact and _halo(prep) > HALO_MAX:
        # The renderer's floor but not its objects: a blur leaves a smooth floor exactly as it
        # was and spreads every edge. Read it as any other changed picture (the map stays the identity).
        tone = prep.tone = dataclasses.replace(tone, exact=False)
    first, reads = _synthesise(prep, azimuths[0])
    if not tone.exact:
        # Not the renderer's own pixels: the objects' sizes say whether the picture was
        # cropped, and the objects, read under each plausible tone map, which map it went through.
        zoom = _zoom(reads, azimuths[0])
        if zoom != 1.0:
            prep, first, reads = _rescaled(frame, tone, content, zoom, azimuths[0])
        better = _choose_tone(prep.frame, prep.tone, reads)
        if better != prep.tone:
            prep = _prepare(prep.frame, better, content, prep.zoom)
            first, reads = _synthesise(prep, azimuths[0])
    out = {azimuths[0]: first}
    for az in azimuths[1:]:
        out[az] = _synthesise(prep, az)[0]
    return out


@dataclass
class _Prepared:
    """An image brought to the renderer's frame and tone, its foreground split into components."""

    frame: np.ndarray
    """The picture in the renderer's frame, in its own tone."""
    rgb: np.ndarray
    """The same in the renderer's tone."""
    tone: _Tone
    diff: np.ndarray
    """Per pixel, the summed |RGB| difference from the style's empty floor."""
    comps: list[_Component]
    residual: float
    speckle: float
    content: tuple[int, int, int, int]
    zoom: float
    mask: np.ndarray
    """The foreground: pixels that differ from the floor by more than `FOREGROUND`."""
    floor: np.ndarray
    """The pixels the residual is measured on: two pixels clear of the foreground."""


def _prepare(frame: np.ndarray, tone: _Tone, content: tuple[int, int, int, int], zoom: float) -> _Prepared:
    rgb = _apply_tone(frame, tone)
    diff = _floor_difference(rgb, tone.style)
    mask = diff > FOREGROUND
    too_big = MAX_SHARE * mask.size
    comps = [] if np.count_nonzero(mask) > MAX_FOREGROUND * mask.size else _components(mask)
    comps = [c for c in comps if c.area <= too_big]
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
    return _Prepared(frame, rgb, tone, diff, comps, residual, speckle, content, zoom, mask, floor)


HALO_MAX = 0.5
"""Faint pixels (off the floor, under `FOREGROUND`) per pixel of the foreground's rim above which
the objects' edges are spread (a clean render's are under 0.25, a blur's of 1 pixel 1.6 or more)."""


def _eroded(mask: np.ndarray) -> np.ndarray:
    """``mask`` less its outermost pixels (a pixel stays where its four neighbours are in the mask too)."""
    inner = mask.copy()
    inner[1:, :] &= mask[:-1, :]
    inner[:-1, :] &= mask[1:, :]
    inner[:, 1:] &= mask[:, :-1]
    inner[:, :-1] &= mask[:, 1:]
    return inner


def _halo(prep: _Prepared) -> float:
    """How many faint pixels lie around the foreground, per pixel of its rim."""
    mask = prep.mask
    inner = _eroded(mask)
    rim = int(np.count_nonzero(mask & ~inner))
    return int(np.count_nonzero((prep.diff > 0) & ~mask)) / max(rim, 1)


def _synthesise(prep: _Prepared, azimuth: float) -> tuple[Parse, list[_Read]]:
    """Explain every component by the hypothesis whose silhouette fits it best, in one camera frame.

    Returns the parse and the reads made. In the renderer's own pixels (an exact tone) a
    component explained before, anywhere in this process, is not read again (`_explained`):
    its reads are not among those returned (only a picture that is not a clean render needs
    them, to find its scale and tone)."""
    objects: list[ParsedObject] = []
    reads: list[_Read] = []
    misfits: list[float] = []
    spreads: list[float] = []
    comps = prep.comps
    residual, speckle = prep.residual, prep.speckle
    if comps:
        cam = _camera(azimuth)
        exact = prep.tone.exact
        keys = [_explained_key(prep, c, azimuth) if exact else b"" for c in comps]
        known = [_explained_get(k) if k else None for k in keys]
        todo = [k for k, e in enumerate(known) if e is None]
        edges = {k: _edges(prep.diff, comps[k]) for k in todo}
        anchors = np.array([_anchor(comps[k]) if exact else _outline_anchor(comps[k], edges[k]) for k in todo])
        positions, dims = _solve_positions(cam, anchors.reshape(-1, 2))  # every component and hypothesis at once
        row = {k: i for i, k in enumerate(todo)}
        overlays = []
        claimed = np.zeros(prep.mask.shape, dtype=bool)  # the silhouettes explained so far, grown by `CLAIM_GROW`
        for k, comp in enumerate(comps):  # largest first
            h, w = comp.mask.shape
            if np.count_nonzero(claimed[comp.y0 : comp.y0 + h, comp.x0 : comp.x0 + w] & comp.mask) * 2 >= comp.area:
                continue  # a piece of an object already explained, come apart (a blur, a reflection like the floor)
            seen = known[k]
            if seen is None:
                i = row[k]
                found, read = _explain(prep, comp, edges[k], cam, positions[i], dims[i], len(objects))
                seen = _Explained.of(comp, found, read, len(objects))
                if exact:
                    _explained_put(keys[k], seen)
                if not seen.overlay:
                    reads.append(read)
            if seen.overlay:
                overlays.append(comp)
                continue
            objects.extend(seen.placed(len(objects)))
            misfits.append(seen.misfit)
            spreads.append(seen.spread)
            _claim(claimed, seen.silhouette(), comp.x0 - _PAD, comp.y0 - _PAD)
        if overlays:
            residual, speckle = _discounted(prep, overlays)
    tone = prep.tone
    parse = Parse(
        tone.style,
        tuple(objects),
        residual,
        speckle,
        misfits=tuple(misfits),
        spread=float(np.median(spreads)) if spreads else 0.0,
        content=prep.content,
        zoom=prep.zoom,
        gain=tone.gain,
        offset=tone.offset,
        gamma=tone.gamma,
    )
    return parse, reads


@dataclass(frozen=True)
class _Explained:
    """What the synthesis made of one component: all that the parse keeps of it."""

    objects: tuple[ParsedObject, ...]
    """The objects it holds, ``on`` counted from the first of them."""
    overlay: bool
    """Whether it is something drawn over the picture (`_overlay`), not objects."""
    misfit: float
    spread: float
    shape: tuple[int, int]
    packed: bytes
    """The explaining silhouette (in the component's box padded by `_PAD`), its bits packed."""

    @staticmethod
    def of(comp: _Component, found: list[ParsedObject], read: _Read, offset: int) -> _Explained:
        local = tuple(dataclasses.replace(o, on=None if o.on is None else o.on - offset) for o in found)
        sil = read.silhouette
        return _Explained(
            local, _overlay(comp, read, found[0]), _misfit(read), _spread(read), sil.shape, np.packbits(sil).tobytes()
        )

    def placed(self, offset: int) -> list[ParsedObject]:
        """Its objects as the parse lists them, the first at index ``offset``."""
        return [o if o.on is None else dataclasses.replace(o, on=o.on + offset) for o in self.objects]

    def silhouette(self) -> np.ndarray:
        h, w = self.shape
        bits = np.unpackbits(np.frombuffer(self.packed, np.uint8), count=h * w)
        return bits.reshape(h, w).astype(bool)


EXPLAINED = 8192
"""How many components' explanations a process keeps (about a kilobyte each)."""
_EXPLAINED: OrderedDict[bytes, _Explained] = OrderedDict()
_EXPLAINED_LOCK = threading.Lock()


def _explained_key(prep: _Prepared, comp: _Component, azimuth: float) -> bytes:
    """Everything a component's explanation depends on, in a clean render: the camera, the style,
    where the component lies, its mask, and the pixels of its box padded by `_PAD` (its edges and
    its appearance are read there; its position is solved from its own anchor, `_solve_positions`)."""
    h, w = comp.mask.shape
    crop = _crop(prep.rgb, comp.x0 - _PAD, comp.y0 - _PAD, w + 2 * _PAD, h + 2 * _PAD)
    digest = hashlib.blake2b(digest_size=20)
    digest.update(f"{azimuth!r} {prep.tone.style} {comp.x0} {comp.y0} {h} {w} {crop.dtype}".encode())
    digest.update(np.packbits(comp.mask).tobytes())
    digest.update(np.ascontiguousarray(crop).tobytes())
    return digest.digest()


def _explained_get(key: bytes) -> _Explained | None:
    with _EXPLAINED_LOCK:
        found = _EXPLAINED.get(key)
        if found is not None:
            _EXPLAINED.move_to_end(key)
        return found


def _explained_put(key: bytes, explained: _Explained) -> None:
    with _EXPLAINED_LOCK:
        _EXPLAINED[key] = explained
        while len(_EXPLAINED) > EXPLAINED:
            _EXPLAINED.popitem(last=False)


CLAIM_GROW = 2
"""Pixels by which an explained silhouette is grown to claim the pieces of its object that came apart."""


def _claim(claimed: np.ndarray, silhouette: np.ndarray, x0: int, y0: int) -> None:
    """Mark ``silhouette`` (whose box starts at ``x0``, ``y0``), grown by `CLAIM_GROW`, in ``claimed``."""
    g = CLAIM_GROW
    h, w = silhouette.shape
    wide = np.zeros((h, w + 2 * g), dtype=bool)  # grown sideways, then up and down
    for d in range(2 * g + 1):
        wide[:, d : d + w] |= silhouette
    grown = np.zeros((h + 2 * g, w + 2 * g), dtype=bool)
    for d in range(2 * g + 1):
        grown[d : d + h] |= wide
    x0, y0 = x0 - g, y0 - g
    sy0, sx0 = max(y0, 0), max(x0, 0)
    sy1, sx1 = min(y0 + grown.shape[0], claimed.shape[0]), min(x0 + grown.shape[1], claimed.shape[1])
    claimed[sy0:sy1, sx0:sx1] |= grown[sy0 - y0 : sy1 - y0, sx0 - x0 : sx1 - x0]


def _overlay(comp: _Component, read: _Read, found: ParsedObject) -> bool:
    """Whether a component is something drawn over the picture (a watermark, a logo, a line along
    an edge, a corner a turn left empty) rather than an object of the world.

    Only in the margin: a component that touches the picture's edge (the renderer keeps every
    object `EDGE_CLEAR` pixels inside) or lies wholly in a corner (`CORNER`, where watermarks
    go). There, one that no hypothesis explains (`OVERLAY_FIT`: letters, lines, slivers), or
    whose best hypothesis would stand off the floor's area (`EXTENT`; a logo shaped like an
    object but where no object can be), is not an object. Elsewhere every component is one: a
    smear or a pasted patch in the picture is damage, charged to Visual Quality, not discounted.
    """
    h, w = comp.mask.shape
    x0, y0, x1, y1 = comp.x0, comp.y0, comp.x0 + w, comp.y0 + h
    edge = x0 <= 1 or y0 <= 1 or x1 >= WIDTH - 1 or y1 >= HEIGHT - 1
    cw, ch = CORNER[0] * WIDTH, CORNER[1] * HEIGHT
    corner = (x1 <= cw or x0 >= WIDTH - cw) and (y1 <= ch or y0 >= HEIGHT - ch)
    if not (edge or corner):
        return False
    return read.iou < OVERLAY_FIT or max(abs(found.x), abs(found.y)) > EXTENT + OVERLAY_REACH


def _discounted(prep: _Prepared, overlays: list[_Component]) -> tuple[float, float]:
    """The residual and speckle with what is drawn over the picture (and `OVERLAY_PAD` around it) left out."""
    out = np.zeros(prep.mask.shape, dtype=bool)
    for c in overlays:
        h, w = c.mask.shape
        p = OVERLAY_PAD
        out[max(c.y0 - p, 0) : c.y0 + h + p, max(c.x0 - p, 0) : c.x0 + w + p] = True
    floor = prep.floor & ~out
    residual = float(prep.diff[floor].mean()) / 3 if floor.any() else 255.0
    kept = sum(int(c.area) for c in prep.comps if not any(c is o for o in overlays))
    speckle = max(0, int(np.count_nonzero(prep.mask & ~out)) - kept) / prep.mask.size
    return residual, speckle


T = TypeVar("T")


class Parser:
    """Parses encoded images in ``workers`` processes (``workers`` <= 1: in the caller's thread).

    Whoever parses with worker processes is handed a parser (the runner gives the exact judge
    one made from ``--workers``); the module's `parse_cached` and `parse_views` use an
    in-process one. Every parser shares the process's cache (by content and azimuth), so an
    image is parsed once whichever parser meets it first, and results are the same whatever
    the worker count. The callers are threads (the runner's), which wait without holding the
    GIL while a worker parses, so the machine's cores share the parsing; each thread has a worker
    of its own while that one is not much busier than the others (`_worker`).

    The worker processes start with the first parse and end with `close` (or the ``with``
    block). They die with this process however it ends (``kill -9`` included): their parent
    is the forkserver, not this process, and the forkserver outlives it while any worker
    lives, so parent death alone would not do: each worker watches a pipe whose writing end
    only this process holds, and ends itself when the pipe closes (`_end_with_starter`).
    """

    def __init__(self, workers: int = 1) -> None:
        self.workers = workers
        self._pools: list[ProcessPoolExecutor] = []
        self._alive: tuple[Connection, Connection] | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.local()
        """``home``: the calling thread's own worker (`_worker`); it ends with the thread."""
        self._given = 0
        """How many threads have been given a worker (the next one gets ``_given % workers``)."""
        self._busy: list[int] = []
        """How many calls each worker has in hand."""

    def views(self, data: bytes, azimuths: Sequence[float], sha256: str | None = None) -> dict[float, Parse]:
        """The image parsed in several camera frames at once: ``{azimuth: Parse}``.

        Normalisation (borders, size, tone, scale), style, foreground and components are found
        once; only the synthesis (the hypotheses' silhouettes and the ground positions they
        solve) is done per azimuth. Each parse equals `parse_image`'s for that azimuth.
        """
        wanted = list(dict.fromkeys(float(a) for a in azimuths))
        sha = sha256 or hashlib.sha256(data).hexdigest()
        out: dict[float, Parse] = {}
        with _PARSES_LOCK:
            for az in wanted:
                found = _PARSES.get((sha, az))
                if found is not None:
                    _PARSES.move_to_end((sha, az))
                    out[az] = found
        missing = [az for az in wanted if az not in out]
        if missing:
            fresh = self.offload(_parse_all, data, missing)
            with _PARSES_LOCK:
                for az, found in fresh.items():
                    _PARSES[(sha, az)] = found
                while len(_PARSES) > _PARSES_SIZE:
                    _PARSES.popitem(last=False)
            out.update(fresh)
        return {az: out[az] for az in wanted}

    def cached(self, data: bytes, azimuth: float = BASE_AZIMUTH, sha256: str | None = None) -> Parse:
        """`parse_image` of encoded bytes, remembered by content (see `views`)."""
        return self.views(data, (azimuth,), sha256)[float(azimuth)]

    def offload(self, work: Callable[..., T], *args: object) -> T:
        """``work(*args)`` in one of the worker processes (in the caller without them): what a
        reference agent draws is drawn there, beside the parsing, so the caller's threads, which
        share one interpreter, are left the rest. ``work`` is a module's function, ``args`` and
        its result picklable; it returns what it would return in the caller. (Parsing goes the same way.)"""
        picked = self._worker()
        if picked is None:
            return work(*args)
        k, pool = picked
        try:
            with starting_workers():  # a submit may start the worker (and the forkserver)
                future = pool.submit(work, *args)
            return future.result()
        finally:
            with self._lock:
                if k < len(self._busy):
                    self._busy[k] -= 1

    def _worker(self) -> tuple[int, ProcessPoolExecutor] | None:
        """The worker a call from this thread goes to (its index and its one-process pool, the pools
        started on first use), counted as busy with it; None for an in-process or closed parser.

        Each calling thread has a worker of its own, given in turn, so the pictures of one
        dialogue (a runner's thread works through a dialogue's items in order) are read and
        drawn where the pictures before them were: the kept components (`_explained`) and the
        renderer's sprites are the process's. A call goes elsewhere only when that worker has
        more than `SLACK` calls more in hand than another (the least busy then), so no worker
        waits long while another has a queue.
        """
        if self.workers <= 1 or self._closed:
            return None
        with self._lock:
            if self._closed:
                return None
            if not self._pools:
                import multiprocessing

                context = multiprocessing.get_context("forkserver")
                alive_r, alive_w = context.Pipe(duplex=False)  # read by each worker, written by none
                self._alive = (alive_r, alive_w)
                self._pools = [
                    ProcessPoolExecutor(1, mp_context=context, initializer=_end_with_starter, initargs=(alive_r,))
                    for _ in range(self.workers)
                ]
                self._busy = [0] * self.workers
            home: int | None = getattr(self._thread, "home", None)
            if home is None:
                home = self._thread.home = self._given % self.workers
                self._given += 1
            k = home if self._busy[home] <= min(self._busy) + SLACK else self._busy.index(min(self._busy))
            self._busy[k] += 1
            return k, self._pools[k]

    def close(self) -> None:
        """End the worker processes (a later parse runs in the caller)."""
        with self._lock:
            self._closed = True
            pools, alive, self._pools, self._alive = self._pools, self._alive, [], None
            self._busy = []
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)
        for pool in pools:
            pool.shutdown(wait=True)
        if alive is not None:
            for end in alive:
                end.close()

    def __enter__(self) -> Parser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


SLACK = 1
"""How many calls more than the least busy worker a thread's own worker may have in hand before a
call of the thread goes to that one instead. On the demo bench (two workers, four threads), against a
shared queue (each call to whichever worker was free) in three comparisons on one machine, the
workers spent 3-21 % less CPU on the oracle's run, 7-17 % less on ``jitter-input``'s and 11-14 % less
on the stateless agent's; the runs' times moved by less than the machine's own spread."""


IN_PROCESS = Parser()
"""The parser of `parse_cached` and `parse_views`: in the caller, no worker processes."""


def _end_with_starter(alive: Connection) -> None:
    """Pool initializer: end this worker when the process that started the pool ends.

    A daemon thread blocks on ``alive``, whose other end only the starting process holds:
    nothing is ever sent, so the read returns (end of file) only when that process has
    ended, and the worker then exits at once. On Linux the worker is also killed when its
    own parent (the forkserver) dies (``PR_SET_PDEATHSIG``). It leaves Ctrl-C to that process.
    """
    quiet_worker()
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


def _decode(data: bytes | Image.Image | np.ndarray) -> np.ndarray:
    """The image as an RGB uint8 array at its own size."""
    if isinstance(data, np.ndarray) and data.ndim == 3 and data.shape[2] == 3 and data.dtype == np.uint8:
        return data
    if isinstance(data, np.ndarray):
        img = Image.fromarray(data)
    elif isinstance(data, Image.Image):
        img = data
    elif (pixels := png_pixels(data)) is not None:
        return pixels  # the renderer's own file: read without Pillow, the same pixels
    else:
        img = Image.open(io.BytesIO(data))
    if img.mode != "RGB":
        img = img.convert("RGB")
    return np.asarray(img)


def _frame(raw: np.ndarray) -> tuple[np.ndarray, tuple[int, int, int, int], _Tone]:
    """The picture in the renderer's frame (borders, lines and a frame stripped, resized, a turn
    undone), where it lay, and its first tone map."""
    h, w = raw.shape[:2]
    if (h, w) == (HEIGHT, WIDTH):
        tone = _identity_if_exact(raw)
        if tone is not None:  # the renderer's own floor: nothing to strip, nothing to map
            return raw, (0, 0, w, h), tone
    content = _content_box(raw)
    left, top, right, bottom = content
    frame = raw
    if (h, w) == (HEIGHT, WIDTH) and (left != w - right or top != h - bottom):
        # Lines drawn over some edges of a picture in the renderer's own frame (not the same on
        # opposite sides, as a frame padded around it and resized back is): the picture keeps the
        # renderer's geometry, so the lines are covered with its own edge rather than stretched
        # away, which would move every object (a stays check measures where they stand).
        inner = raw[top:bottom, left:right]
        frame = np.pad(inner, ((top, h - bottom), (left, w - right), (0, 0)), mode="edge")
    elif content != (0, 0, w, h) or (h, w) != (HEIGHT, WIDTH):
        img = Image.fromarray(np.ascontiguousarray(raw[top:bottom, left:right]))
        frame = np.asarray(img.resize((WIDTH, HEIGHT), Image.Resampling.BILINEAR))
    tone = _fit_tone(frame, _style(frame), 1.0)
    return frame, content, tone


# Geometry: borders, lines along an edge, letterbox bars, a crop -------------------------

BORDER_MAX = 0.3
"""A border or bar covers at most this share of the image's height (width)."""
BAND_STEP = 8
"""Smallest change over two lines (summed |RGB| of their means over 8-pixel blocks, the median
over the blocks) that ends a band: a line of the floor's colour along an edge differs from the
shaded floor by more, a JPEG block edge or the floor's own shading by less."""
BAND_FLAT = 30
"""A band's lines are one colour: each block within this (summed |RGB|) of the band's first line."""


def _content_box(rgb: np.ndarray) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of the picture once uniform borders, lines along its edges and
    letterbox bars are stripped: on each side, a band of lines of one colour that ends in a step."""
    h, w = rgb.shape[:2]
    cols = rgb.transpose(1, 0, 2)
    top, bottom = _band(rgb), _band(rgb[::-1])
    left, right = _band(cols), _band(cols[::-1])
    if h - top - bottom < h // 2 or w - left - right < w // 2:
        return 0, 0, w, h
    return left, top, w - right, h - bottom


def _band(lines: np.ndarray) -> int:
    """How many of ``lines`` (``lines[0]`` outermost) form a band of one colour that ends in a step:
    a border, a letterbox bar, a frame or a line drawn along the edge, of any colour and width.

    Lines are compared by their means over 8-pixel blocks (noise and JPEG average out), the
    median over the blocks (an object crossing a few blocks does not count). The world's floor
    never makes a band: it changes slowly from line to line, with no step, and objects keep
    clear of the edges.
    """
    n = lines.shape[0]
    limit = int(n * BORDER_MAX)
    if limit < 2:
        return 0
    m = lines.shape[1] // 8 * 8
    head = lines[: limit + 4, :m].astype(np.float32).reshape(limit + 4, m // 8, 8, 3).mean(axis=2)
    from_first = np.median(np.abs(head - head[0]).sum(axis=2), axis=1)  # each line against the outermost
    # steps[k]: line k to line k + 2 (a step blended over two lines by a resize counts whole)
    steps = np.median(np.abs(head[2:] - head[:-2]).sum(axis=2), axis=1)
    baseline = float(np.median(steps[limit // 2 : limit]))  # the floor's own change (and noise)
    threshold = max(BAND_STEP, 3.0 * baseline)
    jumps = np.flatnonzero(steps[:limit] >= threshold)
    if len(jumps) == 0:
        return 0
    k = int(jumps[0]) + 1  # lines 0 .. k - 1 before the first step
    if from_first[k - 1] > max(BAND_FLAT / 3, 2.0 * baseline):
        return 0  # the lines before the step are not one band
    if (np.abs(head[0] - np.median(head[0], axis=0)).sum(axis=1) <= BAND_FLAT).mean() < 0.8:
        return 0  # the outermost line is not one colour
    beyond = min(k + 4, len(head) - 1)
    if from_first[beyond] < threshold:
        return 0  # no lasting step: the band's colour comes back
    # The picture starts at the first line that is the picture's: a line blended from the band
    # and the picture (a frame resized) belongs to the band.
    while k < limit and np.median(np.abs(head[k] - head[beyond]).sum(axis=1)) >= threshold:
        k += 1
    return k


ZOOM_MIN = 0.015
"""A scale the objects put within this of 1 is taken as 1 (clean, JPEG'd or resized renders read within 1 %)."""
ZOOMS = np.round(np.arange(0.9, 1.1501, 0.005), 3)
"""The scales a picture is tried at: a crop of up to about 6 % off each edge, or a margin as wide."""
ZOOM_KNOTS = (0.9, 1.0, 1.05, 1.1, 1.15)
"""The scales at which hypotheses' boxes are solved exactly (`ZOOMS` are interpolated)."""
ZOOM_REFINE = 0.003
"""A rescaled picture is refined until its objects' areas put its scale within this of right."""
ZOOM_FIT = 0.8
"""Only components that a hypothesis explains at least this well (IoU) refine the scale."""


def _zoom(reads: list[_Read], azimuth: float) -> float:
    """How much larger than the renderer would draw them the objects appear: a crop's magnification.

    The world has two sizes, so a picture's scale is known from its objects. Cropping about
    the centre and resizing is the same as a longer focal length, and every outline seen
    through it is the outline seen through the renderer's camera scaled about the centre;
    so each scale is tried by scaling the outlines' boxes back and asking how well the best
    hypothesis explains each box. Together the components fix the scale even where one alone
    fits a wrong hypothesis at the wrong scale (an enlarged object looks like a stack).
    Outlines are taken at half contrast, so a blur does not make objects look larger.
    """
    boxes = np.array([box for read in reads if (box := read.edges.outline_box()) is not None])
    if len(boxes) == 0:
        return 1.0
    centre = np.array([WIDTH / 2, HEIGHT / 2])
    # A hypothesis's box changes smoothly with where it stands: solved at a few scales, it is
    # interpolated in between (an anchor moves linearly in 1 / scale).
    knots = 1 / np.array(ZOOM_KNOTS)
    anchors = centre + (boxes[None, :, :2] - centre) * knots[:, None, None]
    _, dims = _solve_positions(_camera(azimuth), anchors.reshape(-1, 2))
    dims = dims.reshape(len(knots), len(boxes), -1, 2)
    inverse = 1 / ZOOMS
    at = np.clip(np.searchsorted(-knots, -inverse) - 1, 0, len(knots) - 2)
    t = ((inverse - knots[at]) / (knots[at + 1] - knots[at]))[:, None, None, None]
    predicted = dims[at] + t * (dims[at + 1] - dims[at])  # (Z, C, H, 2)
    seen = boxes[None, :, None, 2:] * inverse[:, None, None, None]
    misfit = np.abs(predicted - seen).sum(axis=-1).min(axis=-1).sum(axis=-1)
    best = int(np.argmin(misfit))
    # A picture is rescaled only when its objects say so clearly: better by a pixel per object.
    if misfit[ZOOMS.tolist().index(1.0)] - misfit[best] < len(boxes) or abs(ZOOMS[best] - 1.0) < ZOOM_MIN:
        return 1.0
    return float(ZOOMS[best])


_PAD = 3
"""Pixels around a component's box that its synthesis and edge measures look at."""


@dataclass
class _Edges:
    """A component's difference from the floor around its edge, in its box padded by `_PAD`."""

    x0: int
    y0: int
    """Where the box starts in the image."""
    diff: np.ndarray
    inner: np.ndarray
    """The component's solid interior (its outline, holes filled, eroded by 2 pixels)."""
    contrast: np.ndarray
    """Per pixel, the largest interior difference within 4 pixels (0 where none)."""

    def share(self) -> np.ndarray:
        """How much of each pixel the object covers, as its contrast says: interior pixels
        wholly, others by their difference against the interior next to them."""
        out = self.inner.astype(np.float32)
        edge = ~self.inner & (self.contrast > 0)
        out[edge] = np.minimum(1.0, self.diff[edge] / self.contrast[edge])
        return out

    def outline_box(self) -> tuple[float, float, float, float] | None:
        """(x centre, bottom, width, height) of the outline at half contrast, in image pixels."""
        outline = self.share() >= 0.5
        rows, cols = np.flatnonzero(outline.any(axis=1)), np.flatnonzero(outline.any(axis=0))
        if len(rows) == 0:
            return None
        x0, x1, y1 = self.x0 + cols[0], self.x0 + cols[-1] + 1, self.y0 + rows[-1] + 1
        return (x0 + x1) / 2, y1, x1 - x0, y1 - (self.y0 + rows[0])


def _edges(diff: np.ndarray, comp: _Component) -> _Edges:
    h, w = comp.mask.shape
    d = _crop(diff[..., None], comp.x0 - _PAD, comp.y0 - _PAD, w + 2 * _PAD, h + 2 * _PAD)[..., 0].astype(np.float32)
    inner = np.zeros(d.shape, dtype=bool)
    inner[_PAD:-_PAD, _PAD:-_PAD] = comp.mask
    for k in (1, 2):
        m = inner.copy()
        inner[k:, :] &= m[:-k, :]
        inner[:-k, :] &= m[k:, :]
        inner[:, k:] &= m[:, :-k]
        inner[:, :-k] &= m[:, k:]
    # The largest interior contrast within 4 pixels: a separable maximum over 9-pixel windows.
    contrast = np.zeros((d.shape[0] + 8, d.shape[1]), dtype=np.float32)
    contrast[4:-4] = np.where(inner, d, 0.0)
    rows = _window_max(contrast, axis=0)
    contrast = np.zeros((d.shape[0], d.shape[1] + 8), dtype=np.float32)
    contrast[:, 4:-4] = rows
    return _Edges(comp.x0 - _PAD, comp.y0 - _PAD, d, inner, _window_max(contrast, axis=1))


def _window_max(a: np.ndarray, axis: int) -> np.ndarray:
    """The maximum over each run of 9 consecutive values along ``axis`` (length n - 8): the same
    numbers as a sliding window's, by doubling (windows of 2, 4, 8, then 9), each step one
    vectorised maximum over the whole array instead of a short reduction per window."""
    b = np.moveaxis(a, axis, 0)
    two = np.maximum(b[:-1], b[1:])
    four = np.maximum(two[:-2], two[2:])
    eight = np.maximum(four[:-4], four[4:])
    return np.moveaxis(np.maximum(eight[:-1], b[8:]), 0, axis)


def _misfit(read: _Read) -> float:
    """How far, on average in pixels, the component's outline at half contrast lies from the
    silhouette that explains it: the pixels where they disagree per pixel of the silhouette's
    boundary (a clean render's are within about a pixel; a blur spreads both sides alike)."""
    outline = read.edges.share() >= 0.5
    silhouette = read.silhouette
    inside = _eroded(silhouette)
    boundary = int(np.count_nonzero(silhouette & ~inside))
    return int(np.count_nonzero(outline ^ silhouette)) / max(boundary, 1)


def _spread(read: _Read) -> float:
    """How wide the component's edge is (see `Parse.spread`)."""
    share = read.edges.share()
    silhouette = read.silhouette
    inside = _eroded(silhouette)
    boundary = int(np.count_nonzero(silhouette & ~inside))
    return int(np.count_nonzero((share > 0.1) & (share < 0.9))) / max(boundary, 1)


def _rescaled(
    frame: np.ndarray, tone: _Tone, content: tuple[int, int, int, int], zoom: float, azimuth: float
) -> tuple[_Prepared, Parse, list[_Read]]:
    """The picture scaled back by ``zoom``, refined by its objects' areas, and parsed.

    Boxes fix the scale to about 1 %; once the hypotheses are right, each well-explained
    component's area against its silhouette's gives the rest (the square of the error),
    measured at half contrast so that the resampling's blur does not count.
    """
    for _ in range(3):
        scaled = _unzoom(frame, zoom, tone)
        prep = _prepare(scaled, _fit_tone(scaled, tone.style, tone.gamma), content, zoom)
        first, reads = _synthesise(prep, azimuth)
        ratios = [
            r.edges.share().sum() / n for r in reads if r.iou >= ZOOM_FIT and (n := np.count_nonzero(r.silhouette))
        ]
        step = float(np.sqrt(np.median(ratios))) if ratios else 1.0
        if abs(step - 1.0) < ZOOM_REFINE:
            break
        zoom *= step
    return prep, first, reads


def _unzoom(frame: np.ndarray, zoom: float, tone: _Tone) -> np.ndarray:
    """The frame shrunk (grown) by ``zoom`` about its centre, as the uncropped picture was.

    A crop's centre is taken to be the picture's (nothing in the world fixes it). Where the
    crop cut the picture off, the known floor is drawn, in the picture's own tone.
    """
    h, w = frame.shape[:2]
    coefficients = (zoom, 0.0, w / 2 * (1 - zoom), 0.0, zoom, h / 2 * (1 - zoom))
    bilinear = Image.Resampling.BILINEAR
    out = Image.fromarray(frame).transform((w, h), Image.Transform.AFFINE, coefficients, resample=bilinear)
    inside = Image.new("L", (w, h), 255).transform((w, h), Image.Transform.AFFINE, coefficients, resample=bilinear)
    cover = np.asarray(inside, dtype=np.float32)[..., None] / 255.0
    floor = _forward(ground_srgb(tone.style, WIDTH, HEIGHT).astype(np.float32), tone)
    blended = np.asarray(out, dtype=np.float32) * cover + floor * (1.0 - cover)
    result: np.ndarray = np.clip(blended + 0.5, 0, 255).astype(np.uint8)
    return result


# Tone: the style and the map from its floor ---------------------------------------------

TONE_STEP = 8
"""Spacing of the pixels the tone map is fitted on."""
GAIN_RANGE = (0.5, 2.0)
"""A fitted gain outside this range is no camera's tone change: the fit keeps an offset only."""
GAMMAS = (0.71, 0.8, 0.89, 1.0, 1.12, 1.25, 1.41)
"""Curvatures a tone map is tried with (a floor alone cannot tell them apart: it spans too few grey levels)."""
GAMMA_FIRST = (1.0, 0.8, 1.25)
"""The curvatures every plausible style is tried with first; the best one's neighbours in `GAMMAS` follow."""
MAP_FORMS = ("free", "gain", "offset")
"""The forms a map is fitted in: a free gain and offset per channel; a gain alone (a white
balance, an exposure); an offset alone (a brightness change). The floor spans some 25 grey levels
per channel, so the free form's gain is pinned only by the floor's shading, and a lossy encoding
that shifts the floor's colour by a few levels unevenly along it (JPEG's coarse chroma) bends it
far: carried to a dark object 150 levels away, red reads brown. The objects choose (`_choose_tone`).
"""
TINT_SLACK = 0.25
"""Styles whose floor tint lies within this of the nearest are tried too (a white balance of
+-10 % moves a tint about 0.2)."""


@dataclass(frozen=True)
class _Tone:
    """How the picture's tones relate to the renderer's: observed = gain * 255 (rendered / 255) ** gamma + offset."""

    style: str
    gamma: float
    gain: tuple[float, float, float]
    offset: tuple[float, float, float]
    spread: float
    """Mean summed |RGB| residual of the floor pixels the map was fitted on (0 on a clean render)."""
    exact: bool = False
    """The picture shows the renderer's own floor pixels: the map is the identity."""
    form: str = "free"
    """Which of `MAP_FORMS` the map was fitted in."""


@lru_cache(maxsize=len(STYLES))
def _style_chroma(style: str) -> np.ndarray:
    result: np.ndarray = np.median(_chroma(ground_srgb(style, WIDTH, HEIGHT)[2::8, 2::8].reshape(-1, 3)), axis=0)
    return result


def _chroma(px: np.ndarray) -> np.ndarray:
    """Each pixel's colour relative to its own grey level: a floor pixel's is its style's tint
    wherever it lies (the floor is one colour times a shading), and a brightness, contrast or
    gamma change moves it little."""
    px = px.astype(np.float32)
    result: np.ndarray = px / np.maximum(px.mean(axis=-1, keepdims=True), 1.0) - 1.0
    return result


def _tints(rgb: np.ndarray) -> dict[str, float]:
    """How far the image's typical tint (objects are a minority) lies from each style's floor tint."""
    tint = np.median(_chroma(rgb[2::8, 2::8].reshape(-1, 3)), axis=0)
    return {name: float(np.abs(tint - _style_chroma(name)).sum()) for name in STYLES}


def _style(rgb: np.ndarray) -> str:
    """The style whose floor tint is nearest the image's."""
    tints = _tints(rgb)
    return min(tints, key=lambda name: tints[name])


@lru_cache(maxsize=len(STYLES))
def _floor_samples(style: str) -> np.ndarray:
    out = ground_srgb(style, WIDTH, HEIGHT)[2::TONE_STEP, 2::TONE_STEP].reshape(-1, 3).astype(np.float32)
    out.flags.writeable = False
    return out


EDGE_CLEAR = 4
"""The renderer keeps every object this many pixels clear of the picture's edges (`GAP`)."""


def _identity_if_exact(rgb: np.ndarray) -> _Tone | None:
    """The identity map, when most sampled pixels are exactly one style's floor and so is every
    pixel along the edges, where the renderer draws nothing else (a clean render; a line drawn
    along an edge is stripped first)."""
    seen = rgb[2::TONE_STEP, 2::TONE_STEP].reshape(-1, 3)
    for style in STYLES:
        if np.count_nonzero((seen == _floor_samples(style)).all(axis=1)) * 2 > len(seen):
            floor, e = ground_srgb(style, WIDTH, HEIGHT), EDGE_CLEAR
            edges = (np.s_[:e, :], np.s_[-e:, :], np.s_[:, :e], np.s_[:, -e:])
            if all(np.array_equal(rgb[at], floor[at]) for at in edges):
                return _Tone(style, 1.0, (1.0, 1.0, 1.0), (0.0, 0.0, 0.0), 0.0, exact=True)
            return None
    return None


def _fit_tone(rgb: np.ndarray, style: str, gamma: float) -> _Tone:
    """Per channel, the gain and offset that best map the style's floor, bent by ``gamma``,
    onto the image's floor."""
    return _fit_samples(_samples(rgb), style, (gamma,))[0][0]


def _samples(rgb: np.ndarray) -> np.ndarray:
    return rgb[2::TONE_STEP, 2::TONE_STEP].reshape(-1, 3).astype(np.float32)


def _fit_samples(
    seen: np.ndarray, style: str, gammas: Sequence[float], forms: Sequence[str] = ("free",)
) -> tuple[list[_Tone], np.ndarray]:
    """`_fit_tone` for each of ``gammas`` and each of the map's ``forms`` (see `MAP_FORMS`; the
    first gamma is fitted in the free form, every other tone reuses its floor pixels).

    Fitted on a grid of pixels, trimming those that are not floor (objects, specks) by their
    residual, which leaves the floor: it is most of every picture. Returns the tones and the
    pixels kept as floor.
    """
    known = _bent(_floor_samples(style), gammas[0])
    gain = np.ones(3, dtype=np.float32)
    offset = np.median(seen - known, axis=0)
    keep = np.ones(len(seen), dtype=bool)
    for _ in range(3):
        r = np.abs(seen - (known * gain + offset)).sum(axis=1)
        kept = r <= max(3.0 * float(np.median(r)), 3.0)
        if np.count_nonzero(kept) < 32:
            break
        keep = kept
        gain, offset = _regress(known[keep], seen[keep])
    first = _tone(style, gammas[0], gain, offset, seen[keep], known[keep])
    others = _refit(seen, style, gammas[:1], keep, [f for f in forms if f != "free"])
    return [first, *others, *_refit(seen, style, gammas[1:], keep, forms)], keep


def _refit(
    seen: np.ndarray, style: str, gammas: Sequence[float], keep: np.ndarray, forms: Sequence[str] = ("free",)
) -> list[_Tone]:
    """Tones for other curvatures (and forms), fitted on the floor pixels an earlier fit kept."""
    out = []
    for gamma in gammas:
        bent = _bent(_floor_samples(style), gamma)[keep]
        for form in forms:
            out.append(_tone(style, gamma, *_regress(bent, seen[keep], form), seen[keep], bent, form))
    return out


def _bent(known: np.ndarray, gamma: float) -> np.ndarray:
    return known if gamma == 1.0 else 255.0 * (known / 255.0) ** np.float32(gamma)


def _regress(known: np.ndarray, seen: np.ndarray, form: str = "free") -> tuple[np.ndarray, np.ndarray]:
    """Per channel, the least-squares gain and offset from ``known`` to ``seen`` in one of
    `MAP_FORMS` (a free gain is kept in `GAIN_RANGE`)."""
    km, om = known.mean(axis=0), seen.mean(axis=0)
    if form == "gain":
        g = (known * seen).sum(axis=0) / np.maximum((known * known).sum(axis=0), 1e-3)
        g = np.where((g >= GAIN_RANGE[0]) & (g <= GAIN_RANGE[1]), g, 1.0)
        return g.astype(np.float32), np.zeros(3, dtype=np.float32)
    if form == "offset":
        return np.ones(3, dtype=np.float32), (om - km).astype(np.float32)
    var = ((known - km) ** 2).mean(axis=0)
    g = np.where(var > 1e-3, ((known - km) * (seen - om)).mean(axis=0) / np.maximum(var, 1e-3), 1.0)
    g = np.where((g >= GAIN_RANGE[0]) & (g <= GAIN_RANGE[1]), g, 1.0)
    return g.astype(np.float32), (om - g * km).astype(np.float32)


def _tone(
    style: str,
    gamma: float,
    gain: np.ndarray,
    offset: np.ndarray,
    seen: np.ndarray,
    known: np.ndarray,
    form: str = "free",
) -> _Tone:
    """A fitted tone, its spread measured on the floor pixels it was fitted on."""
    spread = float(np.abs(seen - (known * gain + offset)).sum(axis=1).mean()) if len(seen) else 0.0
    g = (float(gain[0]), float(gain[1]), float(gain[2]))
    return _Tone(style, gamma, g, (float(offset[0]), float(offset[1]), float(offset[2])), spread, form=form)


def _forward(rendered: np.ndarray, tone: _Tone) -> np.ndarray:
    """Rendered values (float) as the picture shows them."""
    if tone.gamma != 1.0:
        rendered = 255.0 * (rendered / 255.0) ** np.float32(tone.gamma)
    return rendered * np.array(tone.gain, dtype=np.float32) + np.array(tone.offset, dtype=np.float32)


def _luts(tone: _Tone) -> np.ndarray:
    """(3, 256) uint8: per channel, the rendered value of each observed value (the map undone)."""
    v = np.arange(256, dtype=np.float64)[None, :]
    lin = np.clip((v - np.array(tone.offset)[:, None]) / np.array(tone.gain)[:, None], 0.0, 255.0)
    if tone.gamma != 1.0:
        lin = 255.0 * (lin / 255.0) ** (1.0 / tone.gamma)
    result: np.ndarray = np.clip(np.round(lin), 0, 255).astype(np.uint8)
    return result


def _apply_tone(rgb: np.ndarray, tone: _Tone) -> np.ndarray:
    """The image with the tone map undone."""
    if tone.exact:
        return rgb
    luts = _luts(tone)
    out = np.empty_like(rgb)
    for c in range(3):
        out[..., c] = luts[c][rgb[..., c]]
    return out


@dataclass
class _Component:
    mask: np.ndarray
    """Boolean mask inside the box."""
    x0: int
    y0: int
    area: int
    """Foreground pixels before hole filling."""


def _components(mask: np.ndarray) -> list[_Component]:
    """8-connected components of a boolean mask, via runs, largest first."""
    parts = [_Component(m, x0, y0, int(m.sum())) for m, x0, y0 in regions(mask)]
    filled = {i: _fill_holes(p.mask) for i, p in enumerate(parts) if p.area >= MIN_AREA}
    order = sorted(filled, key=lambda i: -int(filled[i].sum()))
    # A part wholly inside an object's outline belongs to it, however it came apart (a
    # highlight ringed by a blend that happens to match the floor): objects never overlap.
    # What touches the picture's edge is no object's outline (a line along the edges would
    # hold the whole picture).
    owner = np.zeros(mask.shape, dtype=np.int32)
    h, w = mask.shape
    for i in reversed(order):  # the largest outline is drawn last and wins
        p = parts[i]
        if p.x0 <= 0 or p.y0 <= 0 or p.x0 + p.mask.shape[1] >= w or p.y0 + p.mask.shape[0] >= h:
            continue
        owner[p.y0 : p.y0 + p.mask.shape[0], p.x0 : p.x0 + p.mask.shape[1]][filled[i]] = i + 1
    area = {i: parts[i].area for i in order}
    inside = set()
    for i, p in enumerate(parts):
        seen = owner[p.y0 : p.y0 + p.mask.shape[0], p.x0 : p.x0 + p.mask.shape[1]][p.mask]
        host = int(seen[0]) - 1
        if host >= 0 and host != i and bool((seen == host + 1).all()):
            area[host] += p.area
            inside.add(i)
    return [_Component(filled[i], parts[i].x0, parts[i].y0, area[i]) for i in order if i not in inside]


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
    bottom: tuple[Shape, Size]
    """(shape, size) of the object on the ground."""
    top: tuple[Shape, Size] | None
    """(shape, size) of what rests on it, if anything."""


_SIZE_NAMES: tuple[Size, ...] = ("small", "large")
_SUPPORTS: tuple[Shape, ...] = ("cube", "cylinder")
"""The shapes another object can rest on."""
_HYPOTHESES = [_Hypothesis((s, z), None) for s in SHAPES for z in _SIZE_NAMES] + [
    _Hypothesis((s, "large"), (t, "small")) for s in _SUPPORTS for t in SHAPES
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
    half = SIZES[size]
    pts = [_template(shape) * half]
    if h.top is not None:
        top_half = SIZES[h.top[1]]
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
    p = _project(cam, pts)
    lo = np.minimum.reduceat(p, starts, axis=-2)
    hi = np.maximum.reduceat(p, starts, axis=-2)
    return np.stack([(lo[..., 0] + hi[..., 0]) / 2, hi[..., 1]], axis=-1), hi - lo


def _project(cam: Camera, points: np.ndarray) -> np.ndarray:
    """`Camera.project` in element-wise arithmetic: each point's image position is the same bits
    however many points are projected with it (a matrix product's need not be)."""
    pos, right, up, fwd = cam.basis
    d = [points[..., k] - pos[k] for k in range(3)]
    z = d[0] * fwd[0] + d[1] * fwd[1] + d[2] * fwd[2]
    x = cam.width / 2 + cam.focal * (d[0] * right[0] + d[1] * right[1] + d[2] * right[2]) / z
    y = cam.height / 2 - cam.focal * (d[0] * up[0] + d[1] * up[1] + d[2] * up[2]) / z
    return np.stack([x, y], axis=-1)


def _outline_anchor(comp: _Component, edges: _Edges) -> tuple[float, float]:
    """`_anchor` of the component's outline at half contrast (the threshold's where it has none)."""
    box = edges.outline_box()
    return _anchor(comp) if box is None else (box[0], box[1])


def _anchor(comp: _Component) -> tuple[float, float]:
    """A component's bottom centre: (x centre of its box, y of its lowest row's bottom edge)."""
    w = comp.mask.shape[1]
    return comp.x0 + w / 2, comp.y0 + float(np.flatnonzero(comp.mask.any(axis=1))[-1]) + 1.0


def _solve_positions(cam: Camera, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For every target (C, 2) and hypothesis at once: the ground position (C, H, 2) whose
    silhouette has its bottom-centre at the target (x centre, y bottom), and the
    silhouette's (width, height) there (C, H, 2).

    Newton's method with each Jacobian taken once (the map is nearly linear over an
    object's size). Each target is solved as if alone: it stops when its own hypotheses are
    within 0.1 pixel, and all the arithmetic is element-wise, so a component's solution is
    the same bits whatever else the picture holds (`_explained` relies on it).
    """
    points, starts = _all_templates()
    n = len(starts)
    start = np.array([cam.ground_point(float(x), float(y)) for x, y in targets]).reshape(-1, 2)  # (C, 2)
    xy = np.repeat(start[:, None, :], n, axis=1)  # (C, H, 2)
    goal = targets[:, None, :]
    owner = np.repeat(np.arange(n), np.diff(np.append(starts, len(points))))

    def at(xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        shift = np.concatenate([xy, np.zeros((*xy.shape[:-1], 1))], axis=-1)[:, owner, :]  # (c, N, 3)
        return _anchors(cam, points[None] + shift, starts)

    # The anchor moves with the object's base almost rigidly: the Jacobian of the base
    # centre's projection stands in for every hypothesis's, inverted in closed form.
    eps = 0.01
    base = np.concatenate([start, np.zeros((len(start), 1))], axis=-1)
    p0 = _project(cam, base)
    jx = (_project(cam, base + np.array([eps, 0.0, 0.0])) - p0) / eps
    jy = (_project(cam, base + np.array([0.0, eps, 0.0])) - p0) / eps
    det = jx[:, 0] * jy[:, 1] - jy[:, 0] * jx[:, 1]
    inv = np.stack([jy[:, 1], -jy[:, 0], -jx[:, 1], jx[:, 0]], axis=-1)[:, None, :] / det[:, None, None]  # (C, 1, 4)
    got, dims = at(xy)
    active = np.arange(len(xy))
    for _ in range(10):
        err = goal[active] - got[active]
        moving = np.abs(err).max(axis=(1, 2)) >= 0.1
        active, err = active[moving], err[moving]
        if len(active) == 0:
            break
        m = inv[active]
        xy[active] += np.stack([m[..., 0] * err[..., 0] + m[..., 1] * err[..., 1],
                                m[..., 2] * err[..., 0] + m[..., 3] * err[..., 1]], axis=-1)  # fmt: skip
        got[active], dims[active] = at(xy[active])
    return xy, dims


def _silhouette(h: _Hypothesis, x: float, y: float, cam: Camera, d: tuple[np.ndarray, ...]) -> np.ndarray:
    """Which of the rays ``d`` (a pixel box's unit directions) hit the hypothesis standing at (x, y)."""
    pos = cam.basis[0]
    shape, size = h.bottom
    half = SIZES[size]
    hit = _covers(shape, x, y, half, 0.0, pos, d)
    if h.top is not None:
        hit |= _covers(h.top[0], x, y, SIZES[h.top[1]], 2 * half, pos, d)
    return hit


def _covers(
    shape: str, x: float, y: float, h: float, base: float, pos: np.ndarray, d: tuple[np.ndarray, ...]
) -> np.ndarray:
    """Whether each ray from ``pos`` hits the solid (a hit mask only: no depths, no normals)."""
    dx, dy, dz = d
    if shape == "sphere":
        ox, oy, oz = pos[0] - x, pos[1] - y, pos[2] - (base + h)
        b = dx * ox + dy * oy + dz * oz
        covered: np.ndarray = b * b - (ox * ox + oy * oy + oz * oz - h * h) >= 0
        return covered
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
    result: np.ndarray = side | ((tt > 0) & (px * px + py * py <= h * h))
    return result


_Job = tuple[int, int, np.ndarray, tuple[str, ...]]
"""An appearance read: (left, top, region, reference key), in image coordinates."""


@dataclass
class _Read:
    """How one component was explained, for the checks that follow the synthesis."""

    iou: float
    """Of the best hypothesis's silhouette with the component."""
    silhouette: np.ndarray
    """That silhouette, in the component's box padded by `_PAD`."""
    edges: _Edges
    """The component's contrast with the floor in the same box."""
    jobs: list[_Job]
    """The appearance reads made."""


def _explain(
    prep: _Prepared,
    comp: _Component,
    edges: _Edges,
    cam: Camera,
    positions: np.ndarray,
    dims: np.ndarray,
    offset: int,
) -> tuple[list[ParsedObject], _Read]:
    rgb, style = prep.rgb, prep.tone.style
    m = comp.mask
    pad = _PAD
    box = (comp.x0 - pad, comp.y0 - pad, comp.x0 + m.shape[1] + pad, comp.y0 + m.shape[0] + pad)
    observed = np.zeros((m.shape[0] + 2 * pad, m.shape[1] + 2 * pad), dtype=bool)
    observed[pad:-pad, pad:-pad] = m
    width, height = m.shape[1], m.shape[0]
    if not prep.tone.exact:
        # Not the renderer's pixels: where a blur or JPEG spreads an edge, the threshold's
        # outline grows; the outline at half contrast stays where the edge is.
        observed = _fill_holes(edges.share() >= 0.5)
        outline = edges.outline_box()
        if outline is not None:
            width, height = outline[2], outline[3]
    # Every hypothesis's position is solved; ray-cast only the few whose box fits best.
    fit = np.abs(dims[:, 0] - width) + np.abs(dims[:, 1] - height)
    best: tuple[float, _Hypothesis, float, float, np.ndarray] | None = None
    rays = cam.ray_components(*box)

    def score(k: int) -> tuple[float, _Hypothesis, float, float, np.ndarray]:
        h, x, y = _HYPOTHESES[k], float(positions[k, 0]), float(positions[k, 1])
        predicted = _silhouette(h, x, y, cam, rays)
        inter = int(np.count_nonzero(predicted & observed))
        return inter / max(int(np.count_nonzero(predicted | observed)), 1), h, x, y, predicted

    for k in np.argsort(fit, kind="stable")[:SHORTLIST]:
        scored = score(int(k))
        if best is None or scored[0] > best[0]:
            best = scored
    assert best is not None
    iou, h, x, y, silhouette = best
    shape, size = h.bottom
    # Appearance is read on the component's box, with a one-pixel empty border.
    y0, x0 = comp.y0 - 1, comp.x0 - 1
    crop = _crop(rgb, x0, y0, m.shape[1] + 2, m.shape[0] + 2)
    region = np.zeros((m.shape[0] + 2, m.shape[1] + 2), dtype=bool)
    region[1:-1, 1:-1] = m
    if not prep.tone.exact:
        # Where a blur or JPEG spreads the object into the floor around it, the threshold's
        # region takes in a halo of mixed pixels: the silhouette that explains it says which are the object's.
        inside = region & silhouette[pad - 1 : 1 - pad, pad - 1 : 1 - pad]
        if np.count_nonzero(inside) >= 12:
            region = inside
    if h.top is None:
        colour, material = _appearance(crop, region, (shape,), style)
        read = _Read(iou, silhouette, edges, [(x0, y0, region, (shape,))])
        return [ParsedObject(shape, colour, size, material, x, y, None, iou)], read
    # Split the stack: the top object's silhouette, and the rest for its support.
    d = cam.ray_components(x0, y0, x0 + region.shape[1], y0 + region.shape[0])
    top_hit = _covers(h.top[0], x, y, SIZES[h.top[1]], 2 * SIZES[size], cam.basis[0], d)
    c0, m0 = _appearance(crop, region & ~top_hit, (shape, h.top[0]), style)
    c1, m1 = _appearance(crop, region & top_hit, (h.top[0],), style)
    if c0 == c1:
        # A small object on a large one near the camera can hide inside its support's
        # silhouette; then only colour tells them apart (a stack never shares one). When the
        # support alone explains the outline as well, there is nothing on top.
        alone = score(_HYPOTHESES.index(_Hypothesis(h.bottom, None)))
        if alone[0] >= iou - STACK_TIE:
            colour, material = _appearance(crop, region, (shape,), style)
            read = _Read(alone[0], alone[4], edges, [(x0, y0, region, (shape,))])
            return [ParsedObject(shape, colour, size, material, alone[2], alone[3], None, alone[0])], read
    jobs: list[_Job] = [(x0, y0, region & ~top_hit, (shape, h.top[0])), (x0, y0, region & top_hit, (h.top[0],))]
    read = _Read(iou, silhouette, edges, jobs)
    return [
        ParsedObject(shape, c0, size, m0, x, y, None, iou),
        ParsedObject(h.top[0], c1, h.top[1], m1, x, y, offset, iou),
    ], read


def _crop(rgb: np.ndarray, x0: int, y0: int, w: int, h: int) -> np.ndarray:
    """rgb[y0:y0+h, x0:x0+w], zero-padded where the box leaves the image."""
    out = np.zeros((h, w, 3), dtype=rgb.dtype)
    sy0, sx0 = max(y0, 0), max(x0, 0)
    sy1, sx1 = min(y0 + h, rgb.shape[0]), min(x0 + w, rgb.shape[1])
    out[sy0 - y0 : sy1 - y0, sx0 - x0 : sx1 - x0] = rgb[sy0:sy1, sx0:sx1]
    return out


# The tone map, chosen by the objects ------------------------------------------------------

TONE_CAP = 0.08
"""An object's distance to its nearest reference counts at most this much (one odd object cannot decide)."""
TONE_SPREAD_WEIGHT = 0.02
"""Cost per grey level of the floor fit's mean residual (a style whose floor pattern fits worse)."""
TONE_GAMMA_WEIGHT = 0.05
"""Cost per unit of |ln gamma|: a curved map must explain the objects clearly better than a straight one."""
TONE_FORM_COST = 0.02
"""Cost of a map in a constrained form (`MAP_FORMS`): the free fit stands unless the objects clearly
prefer another (without it, a hue turned by 10 degrees read red objects as brown a little more often
than before the forms existed, as the objects found the gain-only form a shade closer to a wrong colour)."""


def _choose_tone(frame: np.ndarray, first: _Tone, reads: list[_Read]) -> _Tone:
    """The tone map under which the picture's objects look most like the renderer's.

    The floor fixes a map only near the floor's own grey levels, and a strong white balance
    can make one style's floor look like another's. So every plausible style (by floor tint)
    and curvature is fitted to the floor, and each candidate is scored by how close the
    objects, undone by it, come to their nearest reference render (plus small costs for a
    worse floor fit and for curvature). Without objects, the floor's first fit stands.
    """
    jobs = [j for j in (_job_pixels(frame, job) for read in reads for job in read.jobs) if j is not None]
    if not jobs:
        return first
    tints = _tints(frame)
    nearest = min(tints.values())
    seen = _samples(frame)

    def cost(tone: _Tone) -> float:
        luts = _luts(tone)
        total = TONE_SPREAD_WEIGHT * tone.spread + TONE_GAMMA_WEIGHT * abs(float(np.log(tone.gamma)))
        total += TONE_FORM_COST * (tone.form != "free")
        refs = _references(tone.style)
        for px, (starts, ends), key in jobs:
            sums = np.zeros((len(px) + 1, 3))
            np.cumsum(np.stack([luts[c][px[:, c]] for c in range(3)], axis=1), axis=0, out=sums[1:])
            f = ((sums[ends] - sums[starts]) / (ends - starts)[:, None] / 255.0).ravel()
            total += min(TONE_CAP, float(((refs[key][0] - f) ** 2).sum(axis=1).min()))
        return total

    # Every plausible style with a straight map and the two curvatures the grid ends near,
    # then the best one's neighbouring curvatures.
    scored: dict[tuple[str, float, str], tuple[float, _Tone]] = {}
    floors: dict[str, np.ndarray] = {}
    for style in STYLES:
        if tints[style] <= nearest + TINT_SLACK:
            tones, floors[style] = _fit_samples(seen, style, GAMMA_FIRST, MAP_FORMS)
            for tone in tones:
                scored[style, tone.gamma, tone.form] = (cost(tone), tone)
    style, gamma, _ = min(scored, key=lambda k: scored[k][0])
    at = GAMMAS.index(gamma)
    around = [g for g in GAMMAS[max(at - 1, 0) : at + 2] if (style, g, "free") not in scored]
    for tone in _refit(seen, style, around, floors[style], MAP_FORMS):
        scored[style, tone.gamma, tone.form] = (cost(tone), tone)
    best = min(scored.values(), key=lambda ct: ct[0])[1]
    if (best.style, best.gamma, best.form) == (first.style, first.gamma, first.form):
        return first
    return best


def _job_pixels(
    frame: np.ndarray, job: _Job
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray], tuple[str, ...]] | None:
    """An appearance read's pixels in the frame, in the order of brightness the features use,
    with the bounds of the features' bands of brightness."""
    x0, y0, region, key = job
    px = _feature_pixels(_crop(frame, x0, y0, region.shape[1], region.shape[0]), region)
    if px is None:
        return None
    n = len(px)
    starts = np.array([int(a * n) for a, _ in _BANDS])
    ends = np.array([max(int(b * n), int(a * n) + 1) for a, b in _BANDS])
    lum = px.astype(np.float32) @ np.array([0.3, 0.59, 0.11], dtype=np.float32)
    return px[np.argsort(lum, kind="stable")], (starts, ends), key


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
    px = _feature_pixels(rgb, region)
    if px is None:
        return None
    f = px.astype(np.float32) / 255.0
    return _band_means(f[np.argsort(f @ np.array([0.3, 0.59, 0.11], dtype=np.float32), kind="stable")])


def _feature_pixels(rgb: np.ndarray, region: np.ndarray) -> np.ndarray | None:
    """The region's pixels that the features read: without its anti-aliased rim where it is big enough."""
    inner = _eroded(region)
    if np.count_nonzero(inner) >= 12:
        region = inner  # drop the anti-aliased rim, which mixes in the background
    px = rgb[region]
    return px if len(px) >= 4 else None


def _band_means(px: np.ndarray) -> np.ndarray:
    """The mean colour of each band of brightness of pixels (0..1) sorted from dark to bright."""
    n = len(px)
    return np.concatenate([px[int(a * n) : max(int(b * n), int(a * n) + 1)].mean(axis=0) for a, b in _BANDS])


_Label = tuple[Colour, Material]
"""A reference's (colour, material)."""

REFERENCES_FILE = Path(__file__).with_name("parser_references.npz")
"""The calibration shipped with the package (`calibrate` writes it; a test keeps it in step)."""


@lru_cache(maxsize=len(STYLES))
def _references(style: str) -> dict[tuple[str, ...], tuple[np.ndarray, list[_Label]]]:
    """Reference features for one style: from the shipped calibration, computed when it lacks the style."""
    shipped = _shipped()
    if style in shipped:
        return shipped[style]
    return calibrate(style)


@lru_cache(maxsize=1)
def _shipped() -> dict[str, dict[tuple[str, ...], tuple[np.ndarray, list[_Label]]]]:
    if not REFERENCES_FILE.is_file():
        return {}
    out: dict[str, dict[tuple[str, ...], tuple[np.ndarray, list[_Label]]]] = {}
    with np.load(REFERENCES_FILE) as data:
        for name in data.files:
            if not name.endswith("|feats"):
                continue
            style, key = name.removesuffix("|feats").split("|", 1)
            # The file is `write_references`'s: each label a colour and a material.
            labels = cast(list[_Label], [tuple(x.split("/")) for x in data[f"{style}|{key}|labels"].tolist()])
            out.setdefault(style, {})[tuple(key.split(","))] = (data[name], labels)
    return out


def write_references(path: Path = REFERENCES_FILE) -> None:
    """Calibrate every style and write the result where the parser looks for it."""
    arrays: dict[str, np.ndarray] = {}
    for style in STYLES:
        for key, (feats, labels) in calibrate(style).items():
            arrays[f"{style}|{','.join(key)}|feats"] = feats
            arrays[f"{style}|{','.join(key)}|labels"] = np.array(["/".join(lb) for lb in labels])
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)  # type: ignore[arg-type]  # numpy's stub: **arrays could reach allow_pickle
    atomic_write(path, buf.getvalue())


def calibrate(style: str) -> dict[tuple[str, ...], tuple[np.ndarray, list[_Label]]]:
    """Reference feature vectors and their (colour, material), per shape, for one style.

    Keys are ``(shape,)`` for an object seen whole, and ``(shape, top_shape)`` for the
    support of a stack, whose top face is partly hidden by what rests on it.
    """
    from yanami.world._render import render_array
    from yanami.world._scene import COLOURS

    floor = ground_srgb(style, WIDTH, HEIGHT).astype(np.int16)
    cam = _camera(BASE_AZIMUTH)
    out: dict[tuple[str, ...], tuple[list[np.ndarray], list[_Label]]] = {}

    def add(key: tuple[str, ...], rgb: np.ndarray, region: np.ndarray, label: _Label) -> None:
        f = _features(rgb, region)
        if f is not None:
            feats, labels = out.setdefault(key, ([], []))
            feats.append(f)
            labels.append(label)

    for colour in COLOURS:
        for material in MATERIALS:
            for shape in SHAPES:
                for size in _SIZE_NAMES:
                    for k, (x, y) in enumerate(_CALIBRATION_SPOTS):
                        o = WorldObject(id=0, shape=shape, colour=colour, size=size, material=material, x=x, y=y)
                        rgb = render_array(Scene(objects=(o,)), BASE_AZIMUTH + 90 * k, style)
                        region = np.abs(rgb.astype(np.int16) - floor).sum(axis=2) > FOREGROUND
                        add((shape,), rgb, region, (colour, material))
            for shape in _SUPPORTS:
                for top_shape in SHAPES:
                    for x, y in _CALIBRATION_SPOTS[:2]:
                        o = WorldObject(id=0, shape=shape, colour=colour, size="large", material=material, x=x, y=y)
                        top = WorldObject(
                            id=1,
                            shape=top_shape,
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


def _appearance(rgb: np.ndarray, region: np.ndarray, key: tuple[str, ...], style: str) -> _Label:
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
