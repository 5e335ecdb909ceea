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
  they do what a model lacking it would (recorded by the world as alternatives) or guess.

Trivial agents measure the floor, and read nothing hidden (they never see the bench):

- ``copy-input`` returns the latest image of its request unchanged and answers the first
  option;
- ``copy-first`` and ``copy-previous`` return the first image of the request, or the one
  before the latest; ``collage`` tiles every image of the request into one picture;
  ``union`` draws the latest image with every object of the earlier ones added (read
  through the parser, placed where they fit); ``blank`` is a white picture and ``noise`` a
  picture of random pixels: each answers a random option;
- ``jitter-input``, ``jitter-first`` and ``jitter-previous`` redraw the image that the copy of
  the same name returns with every object shifted together by 0.2 to 1.0 units in a random
  direction (every relation holds, and the picture is no longer the same one), and answer a
  random option;
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
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import overload

import numpy as np
from PIL import Image

from yanami.contract import (
    CHOICE_LETTERS,
    Dialogue,
    ImagePart,
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
from yanami.world._parse import IN_PROCESS, Parser, parse_image
from yanami.world._place import VIEWS, place, random_scene
from yanami.world._render import DEFAULT_STYLE, render_png
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
_OPTION = re.compile(r"^([A-G])\. ", re.MULTILINE)
ABLATION_OF_TYPE = {qtype: ABLATIONS[cap] for qtype, cap in QUESTION_CAPABILITY.items()}
"""The ablation that lacks what each type of DSU question tests."""


def see(data: bytes, sha: str, azimuth: float, parser: Parser = IN_PROCESS) -> View:
    """What an image shows, as a view, through the world's parser."""

    parse = parser.cached(data, azimuth, sha)  # shared with the exact judge: each image is parsed once
    return View(parse.to_scene(), azimuth, parse.style)


@lru_cache(maxsize=4096)
def draw(view: View) -> bytes:
    """The PNG of a view (the same view is drawn once)."""
    return render_png(view.scene, view.azimuth, view.style)


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

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.name = f"reference:{kind}"
        self.answer = self._answer
        self.generate = self._generate

    def _rng(self, request: Request) -> random.Random:
        return seeded(self.name, request.seed, request.item)

    def _generate(self, request: Request) -> bytes:
        images = [im.data for im in request.images()]
        kind = self.kind
        if kind == "random" or not images:
            return _random_picture(self._rng(request).randrange(RANDOM_SCENES))
        if kind in JITTERED:
            return jitter(_copied(kind.replace("jitter", "copy"), images), self._rng(request))
        if kind.startswith("copy-"):
            return _copied(kind, images)
        if kind == "collage":
            return collage(images, request.size)
        if kind == "union":
            return union(images, self._rng(request))
        if kind == "blank":
            return _png(Image.new("RGB", request.size, "white"))
        pixels = np.random.default_rng(self._rng(request).getrandbits(64)).integers(0, 256, (*request.size[::-1], 3))
        return _png(Image.fromarray(pixels.astype(np.uint8)))

    def _answer(self, request: Request) -> str:
        last = request.messages[-1]
        text = " ".join(p.text for p in last.parts if isinstance(p, InputText))
        letters: list[str] = _OPTION.findall(text) or ["A"]
        return letters[0] if self.kind == "copy-input" else self._rng(request).choice(letters)


def _copied(kind: str, images: Sequence[bytes]) -> bytes:
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


def jitter(data: bytes, rng: random.Random) -> bytes:
    """A ``jitter-*`` strategy's picture: ``data`` read through the parser and redrawn `jittered`."""
    seen = parse_image(data)
    return render_png(jittered(seen.to_scene(), rng), BASE_AZIMUTH, seen.style)


def _png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def collage(images: Sequence[bytes], size: tuple[int, int]) -> bytes:
    """Every image tiled, in order, into one picture of ``size`` (a grid as square as it goes)."""
    cols = math.ceil(math.sqrt(len(images)))
    rows = math.ceil(len(images) / cols)
    width, height = size
    sheet = Image.new("RGB", size, "white")
    for k, data in enumerate(images):
        with Image.open(io.BytesIO(data)) as im:
            tile = im.convert("RGB").resize((width // cols, height // rows), Image.Resampling.BILINEAR)
        sheet.paste(tile, ((k % cols) * (width // cols), (k // cols) * (height // rows)))
    return _png(sheet)


def union(images: Sequence[bytes], rng: random.Random) -> bytes:
    """The ``union`` strategy's picture: the latest image with every object the earlier ones show
    and it lacks added where it fits (everything ever mentioned, nothing decided)."""
    latest = parse_image(images[-1])
    scene = union_of(latest.to_scene(), [parse_image(data).to_scene() for data in images[:-1]], rng)
    return render_png(scene, BASE_AZIMUTH, latest.style)


def union_of(latest: Scene, earlier: Sequence[Scene], rng: random.Random) -> Scene:
    """``latest`` with each object of ``earlier`` it lacks (by its attributes) placed where it fits."""
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
            rng = seeded(self.name, request.seed, request.item)
            for k in range(2 * REDRAWS):
                # the world's own placement first; where its own earlier choices left that no room
                # (or no picture that reads back), anywhere the picture stays legible
                choose = realize if k < REDRAWS else realize_anywhere
                mine = choose(op, free, latest, images, rng)
                if mine is None:
                    continue
                new = apply_op(mine, latest, images)
                png = draw(new)
                if _reads_back(png, new, self.parser):
                    return png
        try:
            new = apply_op(op, latest, images)
        except (OpError, IndexError):
            new = latest  # what it took the words to mean is not in the picture: leave it as it is
        return draw(new)

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
