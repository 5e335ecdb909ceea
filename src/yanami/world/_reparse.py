"""Every picture of a world bench read again against the hidden state that says what it shows:
what ``yanami validate --deep`` and ``yanami audit`` check.

A picture is stored under its hash and the manifest vouches for the names, so a picture
changed and re-hashed consistently (mirrored, its file renamed, the dialogue and manifest
updated) passes ``yanami validate``; only its content can tell. The world wrote, for every
turn that shows a picture, the scene, camera and style that picture shows (`view_of`). The
exact judge's parser reads each picture in that turn's camera frame, and it must show the same
objects at the same places (`same_picture`, the judge's own test of one picture being another)
in the same style; a picture that does not is named, with what differs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pydantic import ValidationError

from yanami.contract import ImagePart
from yanami.store import Dataset, image_relpath
from yanami.world._frames import POSITION_TOLERANCE, _key, same_picture
from yanami.world._ops import View
from yanami.world._parse import Parse, Parser
from yanami.world._scene import WorldObject
from yanami.world._selfhistory import view_of

WORLD = "world"
"""The generator of a world dialogue (its ``meta.generator``): the dialogues whose pictures are re-read."""


@dataclass(frozen=True)
class Disagreement:
    """A picture that does not show what its turn's hidden state says (or a hidden state that
    says nothing a picture can show), where ``yanami validate`` names a problem."""

    shard: str
    """The shard of the dialogue (``dialogues/00000.jsonl``)."""
    line: int
    field: str
    """The picture's field in the dialogue (``turns.3.assistant.parts.1``), or the hidden state's."""
    message: str
    image: str = ""
    """The picture's file (``images/ab/….png``); empty where the hidden state cannot be read."""

    def __str__(self) -> str:
        return f"{self.shard}:{self.line}: {self.field}: {self.message}"


@dataclass
class Reparsed:
    """What re-reading a bench's pictures found."""

    world: int = 0
    """World dialogues (whose pictures were read)."""
    others: int = 0
    """Dialogues not made by the world: no hidden scene to read their pictures against."""
    pictures: int = 0
    """Pictures read: each image once per camera frame it is shown in."""
    disagreements: list[Disagreement] = field(default_factory=list)
    """One per place a disagreeing picture is shown."""

    @property
    def images(self) -> list[str]:
        """The image files that disagree, each once, in the order first found."""
        return list(dict.fromkeys(d.image for d in self.disagreements if d.image))


@dataclass(frozen=True)
class _Shown:
    """A place a picture is shown: where, the picture, and what it must show."""

    shard: str
    line: int
    dialogue: str
    turn: int
    side: str
    index: int
    part: ImagePart
    truth: View

    @property
    def field(self) -> str:
        return f"turns.{self.turn}.{self.side}.parts.{self.index}"

    @property
    def frame(self) -> tuple[str, float]:
        """The picture and the camera it is read from: each is read once."""
        return self.part.sha256, self.truth.azimuth


def reparse_bench(ds: Dataset, parser: Parser, on_image: Callable[[], None] | None = None) -> Reparsed:
    """Read every picture of the world dialogues of ``ds`` with ``parser`` (in as many threads as it
    has worker processes) and compare it with its turn's hidden state (see the module docstring).
    Raises `yanami.store.ImageFileError` for a picture that cannot be read (run ``yanami validate``)."""
    found = Reparsed()
    shown = list(_shown(ds, found))
    parts = {s.frame: s.part for s in shown}

    def read(frame: tuple[str, float]) -> Parse:
        return parser.cached(ds.image_bytes(parts[frame]), frame[1], frame[0])

    parses: dict[tuple[str, float], Parse] = {}
    with ThreadPoolExecutor(max(1, parser.workers)) as threads:  # each waits on a worker, the GIL released
        for frame, parse in zip(parts, threads.map(read, parts), strict=True):
            parses[frame] = parse
            if on_image is not None:
                on_image()
    found.pictures = len(parses)
    for s in shown:
        differs = difference(parses[s.frame], s.truth)
        if differs:
            image = image_relpath(s.part.sha256, s.part.format)
            where = f"{s.dialogue} turn {s.turn}"
            message = f"{image}: parsed scene differs from the hidden state ({where}): {differs}"
            found.disagreements.append(Disagreement(s.shard, s.line, s.field, message, image))
    return found


def _shown(ds: Dataset, found: Reparsed) -> Iterator[_Shown]:
    """Every place a world dialogue of ``ds`` shows a picture (counting the dialogues in ``found``)."""
    for shard, line, _, d in ds.records():
        if d.meta.generator != WORLD:
            found.others += 1
            continue
        found.world += 1
        for turn in d.turns:
            state = f"turns.{turn.index}.hidden.state"
            pictures = [
                (side, index, part)
                for side, said in (("user", turn.user), ("assistant", turn.assistant))
                for index, part in enumerate(said.parts)
                if isinstance(part, ImagePart)
            ]
            try:
                truth = view_of(turn)
            except ValidationError as exc:  # the hidden state is free JSON to the dataset's own checks
                first = exc.errors()[0]
                what = f"{'.'.join(map(str, first['loc'])) or '-'}: {first['msg']}"
                found.disagreements.append(Disagreement(shard, line, state, f"not a world scene ({d.id}): {what}"))
                continue
            if truth is None and pictures:  # every turn of the world that shows a picture says what it shows
                message = f"{d.id} turn {turn.index} shows a picture but holds no scene"
                found.disagreements.append(Disagreement(shard, line, state, message))
                continue
            for side, index, part in pictures:
                assert truth is not None
                yield _Shown(shard, line, d.id, turn.index, side, index, part, truth)


def difference(parse: Parse, truth: View) -> str:
    """What a parsed picture shows otherwise than ``truth`` (empty when it shows it): its style,
    then each object of the truth missing or elsewhere (``large red matte cube#2 moved 1.4``),
    then each object it shows that the truth does not hold."""
    seen = parse.to_scene()
    if parse.style == truth.style and same_picture(seen, truth.scene):
        return ""
    notes = [] if parse.style == truth.style else [f"style {parse.style}, not {truth.style}"]
    free = list(seen.objects)
    for o in truth.scene.objects:
        alike = [p for p in free if _key(p, seen) == _key(o, truth.scene)]
        if not alike:
            notes.append(f"{_name(o)} missing")
            continue
        nearest = min(alike, key=lambda p: math.hypot(p.x - o.x, p.y - o.y))
        free.remove(nearest)
        off = math.hypot(nearest.x - o.x, nearest.y - o.y)
        if off > POSITION_TOLERANCE:
            notes.append(f"{_name(o)} moved {off:.1f}")
    notes += [f"an extra {p.size} {p.colour} {p.material} {p.shape}" for p in free]
    return "; ".join(notes) or "the objects are the same but stand otherwise"


def _name(o: WorldObject) -> str:
    return f"{o.size} {o.colour} {o.material} {o.shape}#{o.id}"
