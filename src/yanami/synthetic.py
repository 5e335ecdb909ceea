"""Synthetic dialogues of realistic shape (not meaning) for tests, benchmarks and the demo.

A synthetic dialogue has the size of a YANAMI dialogue (about 7 turns, 5 images, 20 checks
and the four questions) and passes every consistency rule, but its words and pictures are
placeholders: coloured shapes on a plain ground. The procedural world builds the real
thing; this module exists so the storage layer can be exercised on its own.
"""

from __future__ import annotations

import io
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from PIL import Image, ImageDraw
from pydantic import JsonValue

from yanami import __version__
from yanami.contract import (
    CHOICE_LETTERS,
    Capability,
    Check,
    CheckCategory,
    CheckHidden,
    CheckKind,
    Dialogue,
    DialogueMeta,
    ImageFormat,
    ImagePart,
    ImageSource,
    Message,
    Question,
    QuestionType,
    Scenario,
    TextPart,
    Turn,
    TurnHidden,
    seeded,
)
from yanami.world import COLOURS as WORLD_COLOURS
from yanami.world import SHAPES as WORLD_SHAPES

if TYPE_CHECKING:
    from yanami.store import Manifest

_RGB: dict[str, tuple[int, int, int]] = {str(k): v for k, v in WORLD_COLOURS.items()}
COLOURS = list(_RGB)
SHAPES = list(WORLD_SHAPES)


def render_placeholder(rng: random.Random, width: int, height: int) -> bytes:
    """Draw a few coloured shapes on a plain ground and return PNG bytes."""
    ground = tuple(rng.randrange(150, 230) for _ in range(3))
    img = Image.new("RGB", (width, height), ground)
    draw = ImageDraw.Draw(img)
    for _ in range(rng.randrange(2, 6)):
        x, y = rng.randrange(width), rng.randrange(height)
        r = rng.randrange(max(2, width // 20), max(3, width // 6))
        fill = _RGB[rng.choice(COLOURS)]
        if rng.random() < 0.5:
            draw.ellipse((x - r, y - r, x + r, y + r), fill=fill)
        else:
            draw.rectangle((x - r, y - r, x + r, y + r), fill=fill)
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False)
    return buf.getvalue()


def _random_object(rng: random.Random) -> dict[str, JsonValue]:
    return {
        "shape": rng.choice(SHAPES),
        "colour": rng.choice(COLOURS),
        "size": rng.choice(["small", "large"]),
        "material": rng.choice(["matte", "metal"]),
        "x": round(rng.uniform(-3, 3), 3),
        "y": round(rng.uniform(-3, 3), 3),
        "on": None,
    }


def synthetic_dialogue(
    index: int,
    seed: int,
    image_for: dict[str, tuple[str, int, int]] | None = None,
    *,
    scenario: Scenario | None = None,
) -> tuple[Dialogue, dict[str, bytes]]:
    """Build synthetic dialogue number ``index`` and the images it references.

    Returns the dialogue and a map from SHA-256 to PNG bytes. When ``image_for`` is
    given, images are not drawn: each image slot ``"t{turn}-{side}"`` takes the
    (sha256, width, height) found there, or a fixed dummy reference, which is what the
    parsing benchmark needs.
    """
    from yanami.contract import sha256_hex  # local: store imports nothing from here

    rng = seeded(seed, index)
    scen = scenario or list(Scenario)[index % len(Scenario)]
    n_turns = rng.choice([5, 6, 6, 7, 7, 7, 8, 9])  # mean 6.9
    caps = rng.sample(list(Capability), rng.randrange(4, 7))
    images: dict[str, bytes] = {}
    width, height = rng.choice([(96, 64), (64, 96), (80, 80)])

    def image(slot: str, source: ImageSource) -> ImagePart:
        if image_for is not None:
            sha, w, h = image_for.get(slot, ("0" * 64, width, height))
        else:
            data = render_placeholder(rng, width, height)
            sha, w, h = sha256_hex(data), width, height
            images[sha] = data
        return ImagePart(sha256=sha, format=ImageFormat.PNG, width=w, height=h, source=source)

    turns: list[Turn] = []
    check_no = 0
    capability_checks: dict[Capability, str] = {}
    # About 5 images in about 7 turns: one user image to start, a few generated ones.
    target_turns = set(rng.sample(range(1, n_turns), min(n_turns - 1, rng.choice([3, 4, 4, 5]))))
    n_atomic = 20
    per_target = [n_atomic // len(target_turns)] * len(target_turns)
    for k in range(n_atomic % len(target_turns)):
        per_target[k] += 1
    objects = [_random_object(rng) for _ in range(rng.randrange(3, 6))]
    for t in range(n_turns):
        colour, shape = rng.choice(COLOURS), rng.choice(SHAPES)
        if rng.random() < 0.5 and len(objects) < 8:
            objects.append(_random_object(rng))
        user_parts: list[TextPart | ImagePart] = [
            TextPart(
                text=f"For turn {t}, could you put a {colour} {shape} to the left of the one we kept earlier, "
                "and keep everything else exactly as it was?"
            )
        ]
        if t == 0:
            user_parts.append(image(f"t{t}-user", ImageSource.USER))
        asst_parts: list[TextPart | ImagePart] = [
            TextPart(text=f"Sure. I placed the {colour} {shape} as asked and left the rest of the scene unchanged.")
        ]
        checks: list[Check] = []
        if t in target_turns:
            asst_parts.append(image(f"t{t}-assistant", ImageSource.ASSISTANT))
            for _ in range(per_target.pop()):
                obj = rng.choice(objects)
                checks.append(
                    Check(
                        id=f"c{check_no}",
                        kind=CheckKind.ATOMIC,
                        text=f"There is a {obj['size']} {obj['colour']} {obj['material']} {obj['shape']}.",
                        category=rng.choice([CheckCategory.EXISTENCE, CheckCategory.ATTRIBUTE]),
                        hidden=CheckHidden(
                            predicate={"op": "exists", "where": {"colour": obj["colour"], "shape": obj["shape"]}}
                        ),
                    )
                )
                check_no += 1
            for cap in (Capability.CONSTRAINT, Capability.CORRECTION):
                if cap in caps and rng.random() < 0.5:
                    checks.append(
                        Check(id=f"c{check_no}", kind=CheckKind.CAPABILITY, capability=cap, text=f"Keeps {cap.value}.")
                    )
                    capability_checks.setdefault(cap, f"c{check_no}")
                    check_no += 1
        turn_caps = [c for c in caps if rng.random() < 0.5] or [caps[0]]
        turns.append(
            Turn(
                index=t,
                user=Message(role="user", parts=user_parts),
                assistant=Message(role="assistant", parts=asst_parts),
                capabilities=turn_caps,
                checks=checks,
                hidden=TurnHidden(
                    state={"objects": [dict(o) for o in objects], "constraints": [], "view": 0},
                    intent={"op": "add", "colour": colour, "shape": shape},
                ),
            )
        )
    questions = []
    for k, qtype in enumerate(QuestionType):
        choices = rng.sample(COLOURS, 4)
        right = rng.randrange(4)
        aligned = {QuestionType.CT: Capability.CONSTRAINT, QuestionType.CU: Capability.CORRECTION}.get(qtype)
        questions.append(
            Question(
                id=f"q{k}",
                type=qtype,
                after_turn=rng.randrange(n_turns),
                text=f"Which colour did the user settle on ({qtype.value})?",
                answer=choices[right],
                choices=choices,
                answer_letters=[CHOICE_LETTERS[right]],
                aligned_checks=[capability_checks[aligned]] if aligned in capability_checks else [],
            )
        )
    dialogue = Dialogue(
        id=f"synthetic-{scen.value}-{index:06d}",
        scenario=scen,
        capabilities=caps,
        turns=turns,
        questions=questions,
        meta=DialogueMeta(generator="synthetic", version=__version__, seed=seed, params={"index": index}),
    )
    return dialogue, images


def synthetic_dialogues(n: int, seed: int = 0) -> Iterator[tuple[Dialogue, dict[str, bytes]]]:
    """Yield ``n`` synthetic dialogues with their images, in order."""
    for i in range(n):
        yield synthetic_dialogue(i, seed)


def write_synthetic(
    out: str | Path,
    n: int,
    *,
    seed: int = 0,
    split: str = "bench",
    overwrite: bool = False,
    on_dialogue: Callable[[], None] | None = None,
) -> Manifest:
    """Write ``n`` synthetic dialogues and their images as a dataset directory."""
    from yanami.store import DatasetWriter, Generator

    generator = Generator(name="synthetic", version=__version__, params={"dialogues": n, "seed": seed})
    with DatasetWriter(out, split=split, generator=generator, overwrite=overwrite) as w:
        for dialogue, images in synthetic_dialogues(n, seed):
            for data in images.values():
                w.add_image(data, ImageSource.USER)
            w.add_dialogue(dialogue)
            if on_dialogue is not None:
                on_dialogue()
        return w.commit()
