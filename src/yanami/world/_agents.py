"""Reference agents for world data: they make the benchmark run anywhere and prove it discriminates.

They are the model kind ``reference`` (``--model reference:stateful``), registered in the
``yanami.models`` entry point group like any plug-in. Unlike a plug-in, they read the
bench: the runner hands them its directory through ``bind_bench`` before any request, and
they read a dialogue of it when a request first names it (`BenchDialogues`), so their memory
follows the run (``--limit 100`` of a million dialogues reads about a hundred), not the bench.

An agent sees the images of its request through the world's pixel parser, reads the
user's hidden *intent* for the turn (what the words mean, as data), never the dialogue
state, and draws its answer with the world's renderer:

- ``oracle`` returns the ground-truth target image and the reference answer;
- ``stateful`` applies what the user meant, given the whole dialogue, to the latest image,
  making its own free choices (from its own seed) where the words leave one open;
- ``stateless`` applies the current instruction read alone to the latest image (no
  constraints, no corrections, no history) and guesses on questions about the state;
- ``no-constraints``, ``no-corrections``, ``no-coreference``, ``no-retrieval`` are the
  stateful agent with one capability removed: where a turn or question exercises it,
  they do what a model lacking it would (recorded by the world as alternatives) or guess;
  elsewhere they make the stateful agent's own free choices.

Trivial agents measure the floor, and read nothing hidden (they never see the bench):

- ``copy-input`` returns the latest image of its request unchanged and answers the first
  option;
- ``copy-first`` and ``copy-previous`` return the first image of the request, or the one
  before the latest; ``collage`` lays every image of the request over the others (what each
  drew on its floor, where it stands, the latest on top); ``union`` draws the latest image
  with every object of the earlier ones added (read through the parser, placed where they
  fit), and returns it unchanged where they show nothing it lacks; ``blank`` is a white
  picture and ``noise`` one of 64 pictures of random colours in 4-pixel squares: each answers
  a random option;
- ``jitter-input``, ``jitter-first`` and ``jitter-previous`` redraw the image that the copy of
  the same name returns with every object shifted together by 0.2 to 1.0 units in a random
  direction drawn from the request's first picture (every relation holds, and the picture is no
  longer the same one; every picture of a dialogue is shifted the same way, by all three), and
  answer a random option;
- ``random`` answers a random option and shows a random valid scene (one of 64), from its own seed.

One agent reads nothing hidden either and aims for the top: ``visible`` (`yanami.world._visible`)
reads its request as a model must, the words through an interpreter for the world's language
and the pictures through the parser, keeps the dialogue's state itself, and carries out what
the user means with free choices of its own; it answers the questions from that state.
"""

from __future__ import annotations

import io
import math
import random
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import Generic, TypeVar, overload

import numpy as np
from PIL import Image

from yanami.contract import (
    CHOICE_LETTERS,
    Dialogue,
    ImagePart,
    InputImage,
    InputText,
    Request,
    UserError,
    derived,
    seeded,
    sha256_hex,
)
from yanami.store import MANIFEST, Dataset, Location
from yanami.world._free import realize, realize_anywhere
from yanami.world._hidden import ABLATIONS, QUESTION_CAPABILITY, question_intent, turn_intent
from yanami.world._ops import Op, OpError, View, apply_op
from yanami.world._parse import IN_PROCESS, Parse, Parser
from yanami.world._place import VIEWS, place, random_scene
from yanami.world._render import DEFAULT_STYLE, STYLES, ground_srgb, png_bytes, png_pixels, render_png
from yanami.world._scene import BASE_AZIMUTH, EXTENT, Scene
from yanami.world._selfhistory import read_in_history, view_of

AGENTS = ("oracle", "stateful", "stateless", *sorted(ABLATIONS.values()))
"""The agents that read the bench's hidden intents."""
JITTERED = ("jitter-input", "jitter-first", "jitter-previous")
"""The copies redrawn with every object shifted a little (`jittered`): of the latest, the first and
the previous image, as ``copy-input``, ``copy-first`` and ``copy-previous`` pick them."""
TRIVIAL = ("copy-input", "copy-first", "copy-previous", *JITTERED, "collage", "union", "blank", "noise", "random")
"""The floor: agents that read nothing but their request."""
VISIBLE = ("visible",)
"""The agent that reads nothing but its request and tracks the dialogue's state (`yanami.world._visible`)."""
T = TypeVar("T")
_OPTION = re.compile(r"^([A-G])\. ", re.MULTILINE)
ABLATION_OF_TYPE = {qtype: ABLATIONS[cap] for qtype, cap in QUESTION_CAPABILITY.items()}
"""The ablation that lacks what each type of DSU question tests."""


def see(data: bytes, sha: str, azimuth: float, parser: Parser = IN_PROCESS) -> View:
    """What an image shows, as a view, through the world's parser."""

    parse = parser.cached(data, azimuth, sha)  # shared with the exact judge: each image is parsed once
    return View(parse.to_scene(), azimuth, parse.style)


def draw(view: View, parser: Parser = IN_PROCESS) -> bytes:
    """The PNG of a view, drawn in the parser's worker processes where it has them (`Parser.offload`),
    as the floors' pictures are: the same view is drawn once (`DRAWN` are kept)."""
    return _DRAWN.get(view, partial(parser.offload, render_png, view.scene, view.azimuth, view.style))


def image_azimuths(d: Dialogue, before_turn: int) -> list[float]:
    """The camera azimuth of every image shown before ``before_turn``, replayed from the intents."""
    out: list[float] = []
    current = VIEWS[0]
    for t in d.turns[:before_turn]:
        for p in t.user.parts:
            if isinstance(p, ImagePart):
                out.append(VIEWS[0])  # users share pictures taken from the default viewpoint
                current = VIEWS[0]
        op = turn_intent(t).op
        if isinstance(op, dict):
            current = _azimuth_after(op, current, out)
        out += [current for p in t.assistant.parts if isinstance(p, ImagePart)]
    return out


def _azimuth_after(op: Op, current: float, azimuths: list[float]) -> float:
    kind = op.get("op")
    if kind == "orbit":
        return float(op["azimuth"])
    if kind == "restore":
        return azimuths[int(op["image"]) - 1]
    if kind == "batch":
        for step in op["ops"]:
            current = _azimuth_after(step, current, azimuths)
    return current


class _Seen(Sequence[View]):
    """The request's images as views, parsed only when an operation looks at them.

    An image that is the bench's own picture of that point in the dialogue (GT-History, the
    user's pictures) is read from the scene it was rendered from: the parser reads world
    renders exactly, so this only saves the parse. Any other (the model's own, under
    Self-History) goes through the parser."""

    def __init__(
        self, request: Request, azimuths: list[float], truth: list[tuple[str, View | None]], parser: Parser
    ) -> None:
        self.parser = parser
        self.images = request.images()
        self.azimuths = azimuths
        self.truth = truth
        if len(self.images) != len(azimuths):
            raise UserError(
                f"{request.item}: reference agents read images one by one; use --layout yes-first or yes-front"
            )

    def __len__(self) -> int:
        return len(self.images)

    @overload
    def __getitem__(self, k: int) -> View: ...

    @overload
    def __getitem__(self, k: slice) -> Sequence[View]: ...

    def __getitem__(self, k: int | slice) -> View | Sequence[View]:
        if isinstance(k, slice):
            raise TypeError("the request's images are read one at a time")
        im = self.images[k]
        if k < len(self.truth) and self.truth[k][0] == im.sha256 and (known := self.truth[k][1]) is not None:
            return known
        return see(im.data, im.sha256, self.azimuths[k], self.parser)


def _pictures(d: Dialogue, before_turn: int) -> list[tuple[str, View | None]]:
    """The bench's image (sha256) of each turn before ``before_turn`` that shows one, with its scene."""
    return [
        (p.sha256, view_of(t))
        for t in d.turns[:before_turn]
        for m in (t.user, t.assistant)
        for p in m.parts
        if isinstance(p, ImagePart)
    ]


PARSED = 64
"""How many dialogues `BenchDialogues` keeps parsed, the most recently asked first: more than a run
has chains in flight (each asks for its one dialogue again at every item), so each is parsed once."""


class BenchDialogues:
    """A bench's dialogues by id, each read when it is first asked for: memory follows the run, not the bench.

    The bench is read in order only as far as the dialogue asked for (a run asks for the ones it
    chose, which `yanami.store.Selection` took from the bench's start), and where each dialogue
    read lies is kept (its id and `Location`), so a dialogue asked for again after it left the
    `PARSED` kept in memory is read alone, one line. Where a dialogue id is used twice, the
    first is the one read, as the runner's. Safe to share among threads (the runner's chains) and
    agents (the demo runs seven on one bench).
    """

    def __init__(self, root: Path, parsed: int = PARSED) -> None:
        self.dataset = Dataset(root)
        self.parsed = parsed
        self._lock = threading.Lock()
        self._located: dict[str, Location] = {}
        self._ahead: Iterator[tuple[Location, Dialogue]] | None = self.dataset.located()
        self._kept: OrderedDict[str, Dialogue] = OrderedDict()

    @property
    def read(self) -> int:
        """How many of the bench's dialogues were read so far (from its start, in order)."""
        return len(self._located)

    @property
    def kept(self) -> int:
        """How many dialogues are in memory now (at most `parsed`)."""
        return len(self._kept)

    def get(self, dialogue_id: str) -> Dialogue | None:
        """The dialogue of that id, or None where the bench has none (then read to its end)."""
        with self._lock:
            d = self._kept.get(dialogue_id)
            if d is not None:
                self._kept.move_to_end(dialogue_id)
                return d
            where = self._located.get(dialogue_id)
            d = self.dataset.read_at(where) if where is not None else self._read_to(dialogue_id)
            if d is not None:
                self._kept[dialogue_id] = d
                if len(self._kept) > self.parsed:
                    self._kept.popitem(last=False)
            return d

    def _read_to(self, dialogue_id: str) -> Dialogue | None:
        """Read on from where the last reading stopped, up to the dialogue of that id."""
        if self._ahead is None:
            return None
        for where, d in self._ahead:
            self._located.setdefault(d.id, where)
            if d.id == dialogue_id:
                return d
        self._ahead = None
        return None


@lru_cache(maxsize=4)
def bench_dialogues(root: Path, manifest_sha256: str) -> BenchDialogues:
    """The one `BenchDialogues` of a bench in this process (the demo runs seven agents on one bench)."""
    return BenchDialogues(root)


RANDOM_SCENES = 64
"""``random`` draws among this many valid scenes: as uninformed as any draw, and each is parsed once."""


@lru_cache(maxsize=RANDOM_SCENES)
def _random_picture(k: int) -> bytes:
    return draw(View(random_scene(seeded("reference", "random", "scene", k)), VIEWS[0], DEFAULT_STYLE))


class TrivialAgent:
    """One of the trivial strategies (see the module docstring): a floor any model should clear."""

    layouts = ("yes-first", "yes-front", "concatenate")

    def __init__(self, kind: str, parser: Parser = IN_PROCESS) -> None:
        self.kind = kind
        self.parser = parser
        self.name = f"reference:{kind}"
        self.answer = self._answer
        self.generate = self._generate

    def _rng(self, request: Request) -> random.Random:
        return seeded(self.name, request.seed, request.item)

    def _generate(self, request: Request) -> bytes:
        images = request.images()
        kind = self.kind
        if kind == "random" or not images:
            return _random_picture(self._rng(request).randrange(RANDOM_SCENES))
        if kind in JITTERED:
            copy, first = _copied(kind.replace("jitter", "copy"), images), images[0].sha256
            return _JITTERS.get((copy.sha256, first), partial(jitter, copy, self.parser, first))
        if kind.startswith("copy-"):
            return _copied(kind, images).data
        if kind == "collage":
            return collage(images, request.size, self.parser)
        if kind == "union":
            return union(images, self._rng(request), self.parser)
        if kind == "blank":
            return _blank(request.size)
        return noise(request.size, self._rng(request).randrange(NOISE_PICTURES))

    def _answer(self, request: Request) -> str:
        last = request.messages[-1]
        text = " ".join(p.text for p in last.parts if isinstance(p, InputText))
        letters: list[str] = _OPTION.findall(text) or ["A"]
        return letters[0] if self.kind == "copy-input" else self._rng(request).choice(letters)


def _copied(kind: str, images: Sequence[InputImage]) -> InputImage:
    """The image ``copy-input``, ``copy-first`` or ``copy-previous`` returns."""
    if kind == "copy-first":
        return images[0]
    if kind == "copy-previous" and len(images) > 1:
        return images[-2]
    return images[-1]


JITTER = (0.2, 1.0)
"""The least and the most by which the ``jitter-*`` strategies shift a picture's objects (world units)."""


def jittered(scene: Scene, rng: random.Random, least: float = JITTER[0], most: float = JITTER[1]) -> Scene:
    """``scene`` with every object shifted together by one displacement of ``least`` to ``most``
    units in a random direction (so every relation between them holds), every centre kept on
    the table; a shorter one toward the centre where no direction leaves room."""
    objs = scene.objects
    for _ in range(64):
        length, angle = rng.uniform(least, most), rng.uniform(0, 2 * math.pi)
        dx, dy = length * math.cos(angle), length * math.sin(angle)
        if all(abs(o.x + dx) <= EXTENT and abs(o.y + dy) <= EXTENT for o in objs):
            break
    else:
        cx, cy = (sum(o.x for o in objs) / len(objs), sum(o.y for o in objs) / len(objs)) if objs else (0.0, 0.0)
        norm = math.hypot(cx, cy) or 1.0
        dx, dy = -least * cx / norm, -least * cy / norm
    return Scene.model_construct(
        objects=tuple(o.model_copy(update={"x": round(o.x + dx, 3), "y": round(o.y + dy, 3)}) for o in objs)
    )


def _read(image: InputImage, parser: Parser) -> Parse:
    """An image of the request as the parser reads it in the default frame (parsed once per process:
    the bench's pictures are parsed already by the time the floors run in the demo)."""
    return parser.cached(image.data, BASE_AZIMUTH, image.sha256)


def jitter(image: InputImage, parser: Parser = IN_PROCESS, shift: str | None = None) -> bytes:
    """A ``jitter-*`` strategy's picture: ``image`` read through the parser and redrawn `jittered`,
    by a shift drawn from ``shift`` (a SHA-256: the strategies pass the request's first picture's;
    by default the picture's own). In a dialogue every picture is shifted the same way, so an object
    that stays where it was is drawn, and read, as it was in the picture before (the renderer's
    and the parser's caches keep it), and the same picture is jittered the same way whichever
    strategy returns it (each is drawn, and judged, once per turn's view). Drawn in the parser's
    worker processes where it has them (`Parser.offload`)."""
    return parser.offload(_jitter_drawn, _read(image, parser), shift or image.sha256)


def _jitter_drawn(seen: Parse, shift: str) -> bytes:
    rng = seeded("reference", "jitter", shift)
    return render_png(jittered(seen.to_scene(), rng), BASE_AZIMUTH, seen.style)


@lru_cache(maxsize=4)
def _blank(size: tuple[int, int]) -> bytes:
    return _png(Image.new("RGB", size, "white"))


NOISE_PICTURES = 64
"""``noise`` draws among this many pictures of noise: as uninformed as any draw, each one stored and
parsed once per run instead of a fresh picture at every item."""
NOISE_BLOCK = 4
"""The side (pixels) of a square of one random colour in a ``noise`` picture: finer than any object of
the world, coarse enough that a picture takes 55 kB as a PNG (random pixels: 590 kB)."""


@lru_cache(maxsize=NOISE_PICTURES)
def noise(size: tuple[int, int], k: int) -> bytes:
    """The ``noise`` strategy's picture number ``k``: uniform random colours in `NOISE_BLOCK`-pixel squares."""
    width, height = size
    rng = np.random.default_rng(derived("reference", "noise", "picture", k, bits=64))
    grid = rng.integers(0, 256, (-(-height // NOISE_BLOCK), -(-width // NOISE_BLOCK), 3), dtype=np.uint8)
    pixels = grid.repeat(NOISE_BLOCK, axis=0).repeat(NOISE_BLOCK, axis=1)[:height, :width]
    return _png(Image.fromarray(np.ascontiguousarray(pixels)))


def _png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def collage(images: Sequence[InputImage], size: tuple[int, int], parser: Parser = IN_PROCESS) -> bytes:
    """Every image laid over the others, in order, on the latest one's empty floor: each one's
    `cutout` (what it drew on its floor) pasted where it stands, the latest on top.

    Everything every picture showed, at once and each thing at its own place, like a multiple
    exposure. Every pixel is one that a picture of the request drew, so the exact judge reads it
    as it reads a render (tiled thumbnails, which this strategy drew before, took it ten times as
    long: no tone, scale or crop to search for). Drawn in the parser's worker processes where it
    has them (`Parser.offload`), as the jittered copies and the union are: laid in the runner's
    process, the collages kept that one process busy while the workers waited (in the demo, 11.4 s
    of its CPU against 8.7 s of theirs, the run as slow as the stateless agent's)."""
    return parser.offload(_collage_drawn, list(images), size)


def _collage_drawn(images: list[InputImage], size: tuple[int, int]) -> bytes:
    """`collage` in the process that draws it (its cutouts kept there: a runner thread's calls go to
    one worker, so a dialogue's pictures are cut out once)."""
    width, height = size
    cutouts = [_CUTOUTS.get((im.sha256, size), partial(cutout, im, size)) for im in images]
    lines = np.zeros((height, 1 + 3 * width), np.uint8)  # PNG scanlines: a filter byte, then the row
    sheet = lines[:, 1:].reshape(height, width, 3)  # a view
    np.copyto(sheet, ground_srgb(cutouts[-1].style, width, height))
    for c in cutouts:
        sheet[c.rows, c.cols] = c.pixels
    return png_bytes(lines)


@dataclass(frozen=True)
class Cutout:
    """What a picture drew on its floor."""

    style: str
    """The style whose empty floor it was drawn on."""
    rows: np.ndarray
    """The row of each pixel that differs from that floor (a render's objects and shadows)."""
    cols: np.ndarray
    """Its column."""
    pixels: np.ndarray
    """Its colour: (len(rows), 3) uint8."""


def cutout(image: InputImage, size: tuple[int, int], parser: Parser = IN_PROCESS) -> Cutout:
    """What ``image``, brought to ``size``, drew on its floor: every pixel that differs from its style's
    empty floor (a world render: its objects and their shadows; any other picture: about all of it)."""
    width, height = size
    pixels = png_pixels(image.data)  # a render's file, read without a general decoder (the same pixels)
    if pixels is None or pixels.shape[:2] != (height, width):
        with Image.open(io.BytesIO(image.data)) as im:
            rgb = im.convert("RGB")
            if rgb.size != size:
                rgb = rgb.resize(size, Image.Resampling.BILINEAR)
        pixels = np.asarray(rgb)
    # The renderer draws nothing on the top line: the style whose floor that line is, without a
    # parse; for a picture that is not a render, the style the parser reads.
    exact = (k for k in STYLES if np.array_equal(pixels[0], ground_srgb(k, width, height)[0]))
    style = next(exact, None) or parser.cached(image.data, BASE_AZIMUTH, image.sha256).style
    differ = pixels != ground_srgb(style, width, height)
    rows, cols = np.nonzero(differ[..., 0] | differ[..., 1] | differ[..., 2])  # 10x faster than any(axis=2)
    return Cutout(style, rows, cols, pixels[rows, cols])


class _Recent(Generic[T]):
    """Pictures' derived values remembered by key, the least recently used dropped first: a dialogue's
    pictures come back in every later request of it (safe to share among the runner's threads)."""

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self._lock = threading.Lock()
        self._values: OrderedDict[Hashable, T] = OrderedDict()

    def get(self, key: Hashable, make: Callable[[], T]) -> T:
        """The value of ``key``, made by ``make()`` where it is not kept (two threads may both make it)."""
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
        made = make()
        with self._lock:
            self._values[key] = made
            while len(self._values) > self.kept:
                self._values.popitem(last=False)
        return made


KEPT = 256
"""How many cutouts and jittered copies the floors keep (more than a dialogue has pictures)."""
_CUTOUTS: _Recent[Cutout] = _Recent(KEPT)
_JITTERS: _Recent[bytes] = _Recent(KEPT)
DRAWN = 4096
"""How many drawn views `draw` keeps (a run's agents draw the same view again: a redraw, an ablation's turn)."""
_DRAWN: _Recent[bytes] = _Recent(DRAWN)


def union(images: Sequence[InputImage], rng: random.Random, parser: Parser = IN_PROCESS) -> bytes:
    """The ``union`` strategy's picture: the latest image with every object the earlier ones show
    and it lacks added where it fits (everything ever mentioned, nothing decided); the latest
    image itself, unchanged, where nothing is added (as the audit plays it, `union_of`)."""
    earlier = [_read(im, parser) for im in images[:-1]]
    drawn = parser.offload(_union_drawn, _read(images[-1], parser), earlier, rng)  # drawn beside the parsing
    return images[-1].data if drawn is None else drawn


def _union_drawn(latest: Parse, earlier: list[Parse], rng: random.Random) -> bytes | None:
    """The union drawn, or None where it adds nothing to ``latest``."""
    seen = latest.to_scene()
    scene = union_of(seen, [p.to_scene() for p in earlier], rng)
    return None if scene is seen else render_png(scene, BASE_AZIMUTH, latest.style)


def union_of(latest: Scene, earlier: Sequence[Scene], rng: random.Random) -> Scene:
    """``latest`` with each object of ``earlier`` it lacks (by its attributes) placed where it fits
    (``latest`` itself where none is placed)."""
    scene = latest
    have: set[tuple[str, ...]] = {(o.shape, o.colour, o.size, o.material) for o in scene.objects}
    for other in earlier:
        for o in other.objects:
            key = (o.shape, o.colour, o.size, o.material)
            if key in have:
                continue
            placed = place(scene, o.model_copy(update={"id": scene.next_id(), "on": None}), rng)
            if placed is not None:
                scene = Scene.model_construct(objects=(*scene.objects, placed))
                have.add(key)
    return scene


REDRAWS = 8
"""How many of its own free choices the stateful agent tries in each of two ways (the world's
placement, then anywhere legible) before it gives up on one that reads back."""


def _reads_back(png: bytes, view: View, parser: Parser = IN_PROCESS) -> bool:
    """Whether the picture parses as the scene drawn (the same objects, the same stacks)."""

    def key(scene: Scene) -> list[tuple[str, ...]]:
        return sorted((o.shape, o.colour, o.size, o.material, str(o.on is not None)) for o in scene.objects)

    return key(see(png, sha256_hex(png), view.azimuth, parser).scene) == key(view.scene)


class ReferenceAgent:
    """One of the reference agents (see the module docstring)."""

    def __init__(self, kind: str, parser: Parser = IN_PROCESS) -> None:
        if kind not in AGENTS:
            names = ", ".join(AGENTS + TRIVIAL + VISIBLE)
            raise UserError(f"--model reference:{kind}: no such reference agent (choose from {names})")
        self.kind = kind
        self.parser = parser
        self.name = f"reference:{kind}"
        # An ablation is the stateful agent less one capability, free choices included: where a
        # turn does not need what it lacks, it draws the stateful agent's picture (the demo stores
        # that picture once), so only the capability separates their scores.
        self.chooser = "reference:stateful" if kind in ABLATIONS.values() else self.name
        """Whose seed the free choices come from."""
        self.layouts = ("yes-first", "yes-front")  # images one by one: not from a composite
        self.dialogues: BenchDialogues | None = None
        self.answer = self._answer
        self.generate = self._generate

    @property
    def bench(self) -> Dataset | None:
        """The bench whose hidden intents the agent follows (None before `bind_bench`)."""
        return self.dialogues.dataset if self.dialogues is not None else None

    def bind_bench(self, bench: Path) -> None:
        """Open the bench whose hidden intents the agent follows; a dialogue of it is read when a
        request first names it (`BenchDialogues`)."""
        root = Path(bench).resolve()
        self.dialogues = bench_dialogues(root, sha256_hex((root / MANIFEST).read_bytes()))

    def _locate(self, request: Request) -> tuple[Dialogue, str]:
        dialogue_id, _, local = request.item.rpartition("/")
        d = self.dialogues.get(dialogue_id) if self.dialogues is not None else None
        if d is None:
            raise UserError(f"{self.name}: {request.item} is not in the bench it was given")
        return d, local

    def _generate(self, request: Request) -> bytes:
        d, local = self._locate(request)
        turn = d.turns[int(local.removeprefix("t"))]
        if self.kind == "oracle":
            assert self.bench is not None
            target = next(p for p in turn.assistant.parts if isinstance(p, ImagePart))
            return self.bench.image_bytes(target)
        intent = turn_intent(turn)
        op = intent.operation(self.kind)
        images = _Seen(request, image_azimuths(d, turn.index), _pictures(d, turn.index), self.parser)
        latest = images[len(images) - 1]
        # The user's references read against the images the agent was shown: under Self-History
        # its own, where its earlier free choices may differ from the ground truth's.
        free = list(intent.free) if op is intent.op else []
        op, free = read_in_history(d, turn, op, free, images)
        if free and isinstance(op, dict):
            # Where the words leave a choice open, the agent makes its own, from its own seed:
            # it never copies a pick of the world's that the model could not know. Like a careful
            # painter it looks at what it drew, and draws another choice if the picture does not
            # read back as the scene it meant (two objects of one colour touching on screen).
            rng = seeded(self.chooser, request.seed, request.item)
            for k in range(2 * REDRAWS):
                # the world's own placement first; where its own earlier choices left that no room
                # (or no picture that reads back), anywhere the picture stays legible
                choose = realize if k < REDRAWS else realize_anywhere
                mine = choose(op, free, latest, images, rng)
                if mine is None:
                    continue
                new = apply_op(mine, latest, images)
                png = draw(new, self.parser)
                if _reads_back(png, new, self.parser):
                    return png
        try:
            new = apply_op(op, latest, images)
        except (OpError, IndexError):
            new = latest  # what it took the words to mean is not in the picture: leave it as it is
        return draw(new, self.parser)

    def _answer(self, request: Request) -> str:
        d, local = self._locate(request)
        q = next(q for q in d.questions if q.id == local)
        answer = q.answer
        lacking = ABLATION_OF_TYPE[q.type]
        if self.kind in (lacking, "stateless"):
            answer = question_intent(q).alternatives.get(lacking) or self._guess(q.id, d.id, q.choices or [answer])
        if q.choices and answer in q.choices:
            return CHOICE_LETTERS[q.choices.index(answer)]
        return answer

    def _guess(self, qid: str, dialogue_id: str, choices: list[str]) -> str:
        return choices[derived(self.name, dialogue_id, qid, bits=8) % len(choices)]
