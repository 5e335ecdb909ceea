"""A trained checkpoint as a model under test: it reads only its request (the words, and the
pictures through the world's parser), answers with a letter and draws with the world's renderer."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import torch

from yanami.contract import CHOICE_LETTERS, InputImage, Request
from yanami.learned._features import (
    COLOUR_NAMES,
    MATERIAL_NAMES,
    SHAPE_NAMES,
    SIZE_NAMES,
    Encoded,
    Parsed,
    encode,
    single_turn,
)
from yanami.learned._net import Batch, Outputs
from yanami.learned._train import choice_logits, collate, load_net, parsed_of
from yanami.world import (
    BASE_AZIMUTH,
    DEFAULT_STYLE,
    EXTENT,
    IN_PROCESS_PARSER,
    Parser,
    Scene,
    WorldObject,
    render_png,
)

SAME_PLACE = 0.35
"""Two predicted objects on the same level nearer than this (world units): the likelier one stays."""


class CheckpointModel:
    """See the module docstring."""

    def __init__(self, ckpt: Path, parser: Parser = IN_PROCESS_PARSER) -> None:
        self.net, self.checkpoint = load_net(ckpt)
        self.vocabulary = {w: k for k, w in enumerate(self.checkpoint["vocabulary"])}
        self.control = self.checkpoint["control"]
        self.parser = parser
        self.name = f"checkpoint:{ckpt}"
        self._lock = threading.Lock()  # one forward pass at a time: torch uses every core for each
        self.answer = self._answer
        self.generate = self._generate

    def _see(self, image: InputImage) -> Parsed:
        return parsed_of(self.parser.cached(image.data, BASE_AZIMUTH, image.sha256))

    def _read(self, request: Request, generate: bool) -> tuple[Batch, Outputs, Encoded]:
        if self.control == "single-turn":
            request = single_turn(request)
        enc = encode(request, self.vocabulary, self._see, generate=generate)
        from yanami.learned._train import Example

        batch = collate([Example(enc, request.item)])
        with self._lock, torch.no_grad():
            out = self.net(batch)
        return batch, out, enc

    def _answer(self, request: Request) -> str:
        _, out, enc = self._read(request, generate=False)
        groups = enc.option_groups()
        if not groups:
            return "A"
        return CHOICE_LETTERS[int(choice_logits(out["answer"], 0, groups).argmax())]

    def _generate(self, request: Request) -> bytes:
        _, out, enc = self._read(request, generate=True)
        keep = torch.sigmoid(out["keep"][0])
        attrs = [logits[0].argmax(-1) for logits in out["attrs"]]
        candidates = []
        base = enc.xy
        for index in [i for i, _ in enc.objects] + list(enc.slots):
            p = float(keep[index])
            if p <= 0.5:
                continue
            x, y = (base[index] + out["xy"][0, index].numpy()) * EXTENT
            shape, colour, size, material, stacked = (int(a[index]) for a in attrs)
            candidates.append(
                (
                    p,
                    SHAPE_NAMES[shape],
                    COLOUR_NAMES[colour],
                    SIZE_NAMES[size],
                    MATERIAL_NAMES[material],
                    float(x),
                    float(y),
                    bool(stacked),
                )
            )
        scene = _scene(candidates)
        style = DEFAULT_STYLE
        if enc.pictures:
            scores = out["background"][0, [i for i, _ in enc.pictures]]
            style = enc.pictures[int(scores.argmax())][1]
        width, height = request.size
        return render_png(scene, BASE_AZIMUTH, style, width, height)


def _scene(candidates: list[tuple[float, str, str, str, str, float, float, bool]]) -> Scene:
    """The objects to draw: the likeliest first, none on the same spot as a likelier one of its
    level; an object that rests on another stands on the nearest ground object (or the ground)."""
    ground: list[WorldObject] = []
    tops: list[tuple[str, str, str, str, float, float]] = []
    for _, shape, colour, size, material, x, y, stacked in sorted(candidates, key=lambda c: -c[0]):
        x, y = float(np.clip(x, -EXTENT, EXTENT)), float(np.clip(y, -EXTENT, EXTENT))
        if stacked:
            tops.append((shape, colour, size, material, x, y))
            continue
        if any(np.hypot(o.x - x, o.y - y) < SAME_PLACE for o in ground):
            continue
        ground.append(_object(len(ground), (shape, colour, size, material), x, y))
    objects = list(ground)
    taken: set[int] = set()
    for shape, colour, size, material, x, y in tops:
        free = [o for o in ground if o.id not in taken and o.shape != "sphere"]
        if not free:
            continue
        below = min(free, key=lambda o: np.hypot(o.x - x, o.y - y))
        taken.add(below.id)
        objects.append(_object(len(objects), (shape, colour, size, material), below.x, below.y, below.id))
    return Scene(objects=tuple(objects))


def _object(oid: int, what: tuple[str, str, str, str], x: float, y: float, on: int | None = None) -> WorldObject:
    shape, colour, size, material = what
    fields = {"id": oid, "shape": shape, "colour": colour, "size": size, "material": material, "x": x, "y": y, "on": on}
    return WorldObject.model_validate(fields)
