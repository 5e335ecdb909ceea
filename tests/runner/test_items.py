"""Items, seeds, the output frame, and the three input layouts."""

from __future__ import annotations

import io
import math

import pytest
from PIL import Image

from yanami.contract import ImagePart, InputImage, InputText, output_frame
from yanami.models import question_prompt
from yanami.runner import build_request, generation_turns, items_of
from yanami.store import Dataset


@pytest.mark.parametrize(
    ("size", "frame"),
    [((512, 384), (512, 384)), ((1024, 768), (512, 384)), ((300, 500), (304, 512)), ((1000, 1000), (512, 512)),
     ((1920, 1080), (512, 288)), ((640, 427), (512, 336))],
)  # fmt: skip
def test_output_frame_keeps_aspect_long_edge_512_multiples_of_16(size, frame) -> None:
    assert output_frame(*size) == frame
    assert all(v % 16 == 0 for v in frame) and max(frame) == 512


def test_nothing_outside_the_conversation_varies_with_the_item(world_bench, world_dialogues) -> None:
    """The seed is the run's, the frame follows the latest picture shown: a request's fields other
    than its messages are the same for items whose conversations show pictures of one size."""
    bench = Dataset(world_bench)
    fields = set()
    for d in world_dialogues:
        for item in items_of(d):
            r = build_request(d, item, "yes-first", lambda t, s, j, p: bench.image_bytes(p), seed=5)
            fields.add((r.seed, r.size, r.max_tokens, r.temperature, r.json_schema is None, item.kind == "question"))
    assert fields == {(5, (512, 512), 512, 0.0, True, True), (5, (512, 384), 512, 0.0, True, False)}


def test_items_are_target_turns_then_questions(world_dialogues) -> None:
    for d in world_dialogues:
        items = items_of(d)
        turns = [i for i in items if i.kind == "turn"]
        assert [i.turn for i in turns] == generation_turns(d)
        assert all(d.turns[i.turn].checks for i in turns)
        assert [i.question for i in items if i.kind == "question"] == [q.id for q in d.questions]


def _requests(world_bench, d, layout):
    bench = Dataset(world_bench)
    return [build_request(d, i, layout, lambda t, s, j, p: bench.image_bytes(p)) for i in items_of(d)]


def test_yes_first_interleaves_images_where_they_were_shown(world_bench, world_dialogues) -> None:
    d = world_dialogues[0]
    item = items_of(d)[0]
    r = _requests(world_bench, d, "yes-first")[0]
    # the messages mirror the dialogue before the target turn, part by part
    expected = [p for t in d.turns[: item.turn] for m in (t.user, t.assistant) for p in m.parts]
    expected += list(d.turns[item.turn].user.parts)
    got = [p for m in r.messages for p in m.parts]
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        if isinstance(e, ImagePart):
            assert isinstance(g, InputImage) and g.sha256 == e.sha256
        else:
            assert isinstance(g, InputText) and g.text == e.text
    assert [m.role for m in r.messages] == ["user", "assistant"] * item.turn + ["user"]


def test_yes_front_puts_every_image_first_and_numbers_them(world_bench, world_dialogues) -> None:
    d = world_dialogues[0]
    first = _requests(world_bench, d, "yes-first")[-1]
    front = _requests(world_bench, d, "yes-front")[-1]
    n = len(first.images())
    assert [im.sha256 for im in front.images()] == [im.sha256 for im in first.images()]
    head = front.messages[0].parts[: 2 * n]
    assert [p.text for p in head[0::2]] == [f"[Image {k}]" for k in range(1, n + 1)]
    assert all(isinstance(p, InputImage) for p in head[1::2])
    later = [p for m in front.messages for p in m.parts][2 * n :]
    assert not any(isinstance(p, InputImage) for p in later)
    assert sum(isinstance(p, InputText) and p.text.startswith("[Image ") for p in later) == n


def test_concatenate_gives_one_numbered_composite(world_bench, world_dialogues) -> None:
    d = world_dialogues[0]
    first = _requests(world_bench, d, "yes-first")[-1]
    cat = _requests(world_bench, d, "concatenate")[-1]
    n = len(first.images())
    (composite,) = cat.images()
    img = Image.open(io.BytesIO(composite.data))
    cols = math.ceil(math.sqrt(n))
    assert img.size == (cols * 256, math.ceil(n / cols) * 192)
    # the first tile is the first image, scaled down
    tile = img.crop((0, 0, 256, 192)).convert("RGB")
    ref = Image.open(io.BytesIO(first.images()[0].data)).convert("RGB").resize((256, 192))
    diff = sum(abs(a - b) for a, b in zip(tile.getpixel((200, 150)), ref.getpixel((200, 150)), strict=True))
    assert diff < 30


def test_questions_list_their_options_with_letters(world_dialogues) -> None:
    q = world_dialogues[0].questions[0]
    text = question_prompt(q)
    assert q.text in text
    for letter, choice in zip("ABCD", q.choices or [], strict=False):
        assert f"{letter}. {choice}" in text
