"""What the learned model reads and what it is taught: a request as tokens, a target picture as
objects matched to the ones the request shows. Plain numpy: no PyTorch here.

A request becomes one sequence. Text is split into words and punctuation (lower case, a
vocabulary fixed by the training set); each picture becomes a marker followed by one token
per object that the world's parser reads from its pixels (shape, colour, size, material,
whether it rests on another, and where it stands). The parser is a frozen perception module:
the model never sees a picture's pixels, and never anything the request does not hold.

Positions are read as the picture shows them: every picture is parsed in the default
camera's frame, whatever camera took it, and the model's own picture is drawn from that
camera. The judge reads it in the target's frame, so a scene seen from another side is a
scene the model must turn itself.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from yanami.contract import InputImage, InputMessage, InputText, Request
from yanami.world import COLOURS, EXTENT, MATERIALS, SHAPES, SIZES

SHAPE_NAMES: tuple[str, ...] = SHAPES
COLOUR_NAMES: tuple[str, ...] = tuple(COLOURS)
SIZE_NAMES: tuple[str, ...] = tuple(SIZES)
MATERIAL_NAMES: tuple[str, ...] = MATERIALS

PAD, WORD, PICTURE, OBJECT, SLOT = 0, 1, 2, 3, 4
"""Token kinds: padding, a word, a picture's marker, an object of a picture, a slot for an object
the model adds (generation requests end with `NEW_SLOTS` of them)."""
ROLES = {"system": 1, "user": 2, "assistant": 3}
MAX_LEN = 768
"""Tokens a request keeps, counted from its end (the earliest are dropped first)."""
MAX_TURNS = 15
"""Turn distances from the end beyond this share one embedding."""
MAX_NUMBER = 31
"""Turn numbers beyond this share one embedding."""
MAX_PICTURES = 15
"""Picture numbers beyond this share one embedding."""
MAX_OPTIONS = 7
"""Options A-G."""
NEW_SLOTS = 6
"""Objects a picture may have that no picture of the request shows (a scene drawn from words)."""
SPECIALS = ("<pad>", "<unk>")
_TOKEN = re.compile(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]")
_OPTION_LINE = re.compile(r"^([A-G])\. ", re.MULTILINE)

Shown = tuple[str, str, str, str, float, float, bool]
"""An object as the model reads it: shape, colour, size, material, x, y, whether it rests on another."""
Parsed = tuple[str, list[Shown]]
"""A picture as the parser reads it: its style, and each object's (shape, colour, size, material,
x, y, rests on another), positions in the default camera's frame."""
See = Callable[[InputImage], Parsed]


def words(text: str) -> list[str]:
    """The text's tokens: words and numbers in lower case, each punctuation mark on its own."""
    return [m.group(0).lower() for m in _TOKEN.finditer(text)]


def build_vocabulary(texts: Iterable[str], min_count: int = 2) -> list[str]:
    """The words seen at least ``min_count`` times, most frequent first (ties alphabetical)."""
    counts = Counter(w for t in texts for w in words(t))
    kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    # every attribute's name is a word, seen or not: objects are read through their names' vectors
    names = [n for group in (SHAPE_NAMES, COLOUR_NAMES, SIZE_NAMES, MATERIAL_NAMES) for n in group if n not in kept]
    return [*SPECIALS, *kept, *names]


@dataclass
class Encoded:
    """One request as the model reads it: per token, integer features and a position."""

    kind: np.ndarray
    word: np.ndarray
    role: np.ndarray
    turn: np.ndarray
    """Turns between this token's message and the request's last one (clipped)."""
    number: np.ndarray
    """The number of this token's turn as questions count them: 1 for the first user message and
    its reply, 2 for the next (clipped at `MAX_NUMBER`); 0 for a slot."""
    picture: np.ndarray
    """The number of the picture a picture or object token belongs to (1 = the first), else 0."""
    attrs: np.ndarray
    """(n, 5): shape, colour, size, material, stacked, each 1 + its index (0: not an object)."""
    xy: np.ndarray
    """(n, 2) float32: an object's position over `EXTENT`; a slot's, 0."""
    option: np.ndarray
    """1 + the option's index on each token of an option's line in a question (its letter
    and its words), else 0."""
    objects: list[tuple[int, Shown]] = field(default_factory=list)
    """Each object token's index in the sequence and the object it stands for."""
    pictures: list[tuple[int, str]] = field(default_factory=list)
    """Each picture marker's index and the picture's style."""
    slots: list[int] = field(default_factory=list)
    """The indices of the new-object slots."""
    options: int = 0
    """How many options the request's question offers (0: not a question)."""

    def __len__(self) -> int:
        return len(self.kind)

    def option_groups(self) -> list[list[int]]:
        """Per option (A first), the indices of its line's tokens."""
        return [[int(i) for i in np.flatnonzero(self.option == k)] for k in range(1, self.options + 1)]


def single_turn(request: Request) -> Request:
    """What a single-turn reformulation keeps of a request: the latest picture it shows and its
    last message (the current instruction or question), as one user message."""
    last = request.messages[-1]
    pictures = request.images()
    latest = [p for p in last.parts if isinstance(p, InputImage)]
    parts: tuple[InputText | InputImage, ...] = last.parts
    if pictures and not latest:
        parts = (pictures[-1], *last.parts)
    return Request(item=request.item, messages=(InputMessage("user", parts),), size=request.size, seed=request.seed)


class _Tokens:
    """The growing columns of an `Encoded`."""

    def __init__(self) -> None:
        self.cols: list[list[int]] = [[] for _ in range(7)]  # kind, word, role, turn, number, picture, option
        self.attrs: list[tuple[int, int, int, int, int]] = []
        self.xy: list[tuple[float, float]] = []

    def add(
        self,
        kind: int,
        role: int,
        turn: int,
        number: int = 0,
        *,
        word: int = 0,
        picture: int = 0,
        option: int = 0,
        attrs: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0),
        xy: tuple[float, float] = (0.0, 0.0),
    ) -> int:
        for col, v in zip(self.cols, (kind, word, role, turn, number, picture, option), strict=True):
            col.append(v)
        self.attrs.append(attrs)
        self.xy.append(xy)
        return len(self.xy) - 1


def encode(request: Request, vocabulary: dict[str, int], see: See, *, generate: bool) -> Encoded:
    """The request as tokens (see the module docstring); ``generate`` adds the new-object slots."""
    tokens = _Tokens()
    objects: list[tuple[int, Shown]] = []
    pictures: list[tuple[int, str]] = []
    unk = vocabulary["<unk>"]
    n_messages = len(request.messages)
    count = options = number = 0
    for m_index, message in enumerate(request.messages):
        role = ROLES[message.role]
        turn = min((n_messages - m_index) // 2, MAX_TURNS)
        number += message.role == "user"
        at = min(number, MAX_NUMBER)
        last = m_index == n_messages - 1
        for part in message.parts:
            if isinstance(part, InputText):
                lines = list(_OPTION_LINE.finditer(part.text)) if last else []
                ends = [part.text.find("\n", m.start()) % (len(part.text) + 1) for m in lines]
                spans = [(m.start(), e, ord(m.group(1)) - ord("A") + 1) for m, e in zip(lines, ends, strict=True)]
                for m in _TOKEN.finditer(part.text):
                    o = next((min(k, MAX_OPTIONS) for a, e, k in spans if a <= m.start() < e), 0)
                    options = max(options, o)
                    tokens.add(WORD, role, turn, at, word=vocabulary.get(m.group(0).lower(), unk), option=o)
                continue
            count += 1
            count_at = min(count, MAX_PICTURES)
            style, found = see(part)
            pictures.append((tokens.add(PICTURE, role, turn, at, picture=count_at), style))
            for obj in found:
                shape, colour, size, material, x, y, stacked = obj
                a = (
                    1 + SHAPE_NAMES.index(shape),
                    1 + COLOUR_NAMES.index(colour),
                    1 + SIZE_NAMES.index(size),
                    1 + MATERIAL_NAMES.index(material),
                    1 + int(stacked),
                )
                objects.append(
                    (tokens.add(OBJECT, role, turn, at, picture=count_at, attrs=a, xy=(x / EXTENT, y / EXTENT)), obj)
                )
    slots = [tokens.add(SLOT, ROLES["user"], 0, option=0) for _ in range(NEW_SLOTS)] if generate else []
    cut = max(0, len(tokens.xy) - MAX_LEN)
    kind, word, role_col, turn_col, number_col, picture, option = (
        np.array(c[cut:], dtype=np.int16) for c in tokens.cols
    )
    return Encoded(
        kind=kind,
        word=word,
        role=role_col,
        turn=turn_col,
        number=number_col,
        picture=picture,
        attrs=np.array(tokens.attrs[cut:], dtype=np.int16).reshape(-1, 5),
        xy=np.array(tokens.xy[cut:], dtype=np.float32).reshape(-1, 2),
        option=option,
        objects=[(i - cut, o) for i, o in objects if i >= cut],
        pictures=[(i - cut, s) for i, s in pictures if i >= cut],
        slots=[i - cut for i in slots],
        options=options,
    )


# Targets: the picture to draw, as keep / change / add -------------------------------------

KEEP_COST = (2.0, 0.5, 2.0, 1.0)
"""What a differing shape, colour, size and material cost when a target object is matched to an
object the request shows (a colour is what edits change most)."""
AGE_COST = 0.05
"""Per picture between a shown object's picture and the latest: the latest copy is preferred."""
NEW_COST = 3.0
"""What matching a target object to a new slot costs: one that no shown object explains."""


@dataclass
class Target:
    """What the model is taught for one generation request."""

    keep: np.ndarray
    """Per object token (in `Encoded.objects` order): 1 where the target keeps it."""
    slot_used: np.ndarray
    """Per new slot: 1 where it holds a target object."""
    rows: list[tuple[int, int, int, int, int, int, float, float]]
    """Per target object: the token it is matched to (sequence index), its shape, colour, size,
    material and stacked indices, and its position over `EXTENT`."""
    background: int
    """The index (in `Encoded.pictures`) of the latest picture in the target's style, or -1."""


def target_of(enc: Encoded, scene: Sequence[Shown], style: str) -> Target:
    """Match the target scene's objects to the request's object tokens and its new slots
    (a minimum-cost assignment, `KEEP_COST`, `AGE_COST`, `NEW_COST`)."""
    from scipy.optimize import linear_sum_assignment  # type: ignore[import-untyped]  # no stubs

    shown = enc.objects
    latest = max((enc.picture[i] for i, _ in shown), default=0)
    n, m = len(scene), len(shown) + len(enc.slots)
    cost = np.full((n, m), NEW_COST, dtype=np.float64)
    for i, t in enumerate(scene):
        for j, (index, o) in enumerate(shown):
            c = sum(w for w, a, b in zip(KEEP_COST, t[:4], o[:4], strict=True) if a != b)
            c += float(np.hypot(t[4] - o[4], t[5] - o[5])) / EXTENT
            c += AGE_COST * float(latest - enc.picture[index])
            cost[i, j] = c
    keep = np.zeros(len(shown), dtype=np.float32)
    used = np.zeros(len(enc.slots), dtype=np.float32)
    rows = []
    matched = set()
    for i, j in zip(*linear_sum_assignment(cost), strict=True):
        if j < len(shown) and cost[i, j] < NEW_COST:
            keep[j] = 1.0
            rows.append(_row(shown[j][0], scene[i]))
            matched.add(int(i))
    # The rest fill the new slots in a fixed order: back to front, then left to right.
    rest = sorted((t for i, t in enumerate(scene) if i not in matched), key=lambda t: (-t[5], t[4]))
    for k, t in enumerate(rest[: len(enc.slots)]):
        used[k] = 1.0
        rows.append(_row(enc.slots[k], t))
    background = -1
    for k, (_, s) in enumerate(enc.pictures):
        if s == style:
            background = k
    return Target(keep, used, rows, background)


def _row(index: int, t: Shown) -> tuple[int, int, int, int, int, int, float, float]:
    return (
        index,
        SHAPE_NAMES.index(t[0]),
        COLOUR_NAMES.index(t[1]),
        SIZE_NAMES.index(t[2]),
        MATERIAL_NAMES.index(t[3]),
        int(t[6]),
        t[4] / EXTENT,
        t[5] / EXTENT,
    )
