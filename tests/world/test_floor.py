"""The floor: every trivial strategy stays below the stateless agent, through the real runner and judge;
and the text-only battery finds a shortcut where there is one."""

from __future__ import annotations

import hashlib
import io
import os
import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from yanami.contract import Dialogue, InputImage, InputMessage, InputText, Request
from yanami.runner import evaluate
from yanami.scoring import load_runs
from yanami.store import Dataset
from yanami.world import TRIVIAL, Parser, build_world, parse_image, reference_agent
from yanami.world._agents import collage, cutout, noise
from yanami.world._render import ground_srgb
from yanami.world._shortcuts import Reading, candidates, distractors_from, ranks, run_battery

STRATEGIES = [k for k in TRIVIAL if k != "random"]


MARGIN = 2.0
"""How far (SC points) every trivial strategy stays below the stateless agent."""


@pytest.fixture(scope="module")
def floor_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    root = tmp_path_factory.mktemp("floor")
    bench = root / "bench"
    build_world(bench, per_scenario=2, seed=3)
    runs = {}
    for agent in (*STRATEGIES, "stateless"):
        runs[agent] = root / agent
        evaluate(bench, f"reference:{agent}", runs[agent])
    return bench, runs


def _sc(runs: dict[str, Path]) -> dict[str, float]:
    loaded = load_runs(list(runs.values()))
    sc = {s.label.removeprefix("reference:").split(" ")[0]: s.average["sc"] for s in loaded.scores}
    assert all(v is not None for v in sc.values())
    return sc  # type: ignore[return-value]


def test_every_trivial_strategy_stays_below_the_stateless_agent(floor_runs: tuple[Path, dict[str, Path]]) -> None:
    _, runs = floor_runs
    sc = _sc(runs)
    for agent in STRATEGIES:
        assert sc[agent] <= sc["stateless"] - MARGIN, (agent, sc)
    loaded = load_runs(list(runs.values()))
    for s in loaded.scores:
        if s.label.startswith("reference:copy"):  # a copy earns (almost) no change
            assert s.average["sc_change"] is not None and s.average["sc_change"] < 15.0, (s.label, s.average)


def test_under_self_history_too(floor_runs: tuple[Path, dict[str, Path]], tmp_path: Path) -> None:
    """Each strategy's own earlier pictures make its history: the stateless agent's, wrong where
    it read a request alone, and a jittered copy's, shifted again at every turn."""
    bench, _ = floor_runs
    runs = {}
    for agent in (*STRATEGIES, "stateless"):
        runs[agent] = tmp_path / agent
        evaluate(bench, f"reference:{agent}", runs[agent], history="self")
    sc = _sc(runs)
    for agent in STRATEGIES:
        assert sc[agent] <= sc["stateless"] - MARGIN, (agent, sc)


def test_trivial_strategies_read_nothing_but_their_request() -> None:
    for kind in TRIVIAL:
        agent = reference_agent(kind)
        assert not hasattr(agent, "bind_bench")  # never privileged: it cannot see the bench


def test_a_collage_lays_every_picture_over_the_others(floor_runs: tuple[Path, dict[str, Path]]) -> None:
    """Each pixel of a collage is one a picture of the request drew, the latest on top; it shows more
    than the latest picture; a collage of one render is that render, byte for byte."""
    bench, _ = floor_runs
    ds = Dataset(bench)
    d = next(iter(ds))
    pictures = [_input(ds.image_path(p).read_bytes()) for p in d.images()[:4]]
    laid = collage(pictures, (512, 384))
    pixels = np.asarray(Image.open(io.BytesIO(laid)).convert("RGB"))
    latest = cutout(pictures[-1], (512, 384))
    assert (pixels[latest.rows, latest.cols] == latest.pixels).all()
    drawn = [np.asarray(Image.open(io.BytesIO(p.data)).convert("RGB")) for p in pictures]
    floor = ground_srgb(latest.style, 512, 384)
    assert all(((pixels == floor) | np.logical_or.reduce([pixels == a for a in drawn])).all(axis=2).ravel())
    assert len(parse_image(laid).objects) > len(parse_image(pictures[-1].data).objects)
    assert collage(pictures[:1], (512, 384)) == pictures[0].data


def test_noise_reads_as_nothing_and_stays_small() -> None:
    pictures = {noise((512, 384), k) for k in range(8)}
    assert len(pictures) == 8  # each draw its own picture
    for data in pictures:
        assert len(data) < 100_000  # a PNG of random squares; of random pixels, 590 kB
        assert parse_image(data).objects == ()  # mostly foreground: nothing in it is read as an object
    per_pixel = np.random.default_rng(0).integers(0, 256, (384, 512, 3)).astype(np.uint8)
    assert parse_image(per_pixel).objects == ()


def _input(data: bytes) -> InputImage:
    return InputImage(data, hashlib.sha256(data).hexdigest(), 512, 384)


def test_a_region_larger_than_any_stack_is_not_an_object() -> None:
    """A block of noise over a fifth of an empty floor is no object of the world: it is not
    explained as one, and its pixels count as specks (so Visual Quality falls)."""
    from yanami.world import render_array
    from yanami.world._scene import Scene

    floor = render_array(Scene(), 0.0, "studio")
    block = floor.copy()
    block[100:300, 100:300] = np.random.default_rng(1).integers(0, 256, (200, 200, 3)).astype(np.uint8)
    parsed = parse_image(block, 0.0)
    assert parsed.objects == ()
    assert parsed.speckle > 0.15


def test_the_battery_finds_a_shortcut_planted_in_the_options(floor_runs: tuple[Path, dict[str, Path]]) -> None:
    """Where the answer is always the option mentioned latest, the battery says so; on the
    world's own questions, no rule comes near."""
    bench, _ = floor_runs
    dialogues = Dataset(bench).read_all()
    planted: list[Dialogue] = []
    for d in dialogues:
        questions = []
        for q in d.questions:
            # the answer becomes whatever option the visible text mentions last
            from yanami.world._shortcuts import features, visible

            x = features(visible(d, q))
            latest = int(np.nanargmax(np.nan_to_num(x[:, 2], nan=-1.0)))
            wrong = q.choices[latest]
            questions.append(q.model_copy(update={"answer": wrong, "answer_letters": ["ABCD"[latest]]}))
        planted.append(d.model_copy(update={"questions": questions}))
    assert run_battery(planted).strongest()[2] == 1.0
    honest = run_battery(dialogues)
    assert honest.strongest()[2] < 1.0 and all(n == len(dialogues) for n in honest.questions.values())


def test_distractors_are_chosen_so_the_answers_rank_lands_on_the_draw() -> None:
    """The answer is mentioned last of all; with candidates mentioned before and after it, the
    chosen distractors put it at every rank over many draws (not always last)."""
    messages = [(0, "user", "I like red and blue and green."), (1, "assistant", "Purple, then yellow, gray and cyan.")]
    reading = Reading(messages, "Which colour?")
    pool = ["red", "blue", "green", "yellow", "gray", "cyan"]
    seen = set()
    for k in range(40):
        chosen = distractors_from(reading, "purple", candidates(reading, "purple", pool), random.Random(k))
        assert len(chosen) == 3 and "purple" not in chosen
        seen.add(int(ranks(reading.features(["purple", *chosen]))[2]))  # its rank by last mention
    assert seen == {0, 1, 2, 3}


def test_balancing_a_bench_keeps_letters_and_candidates_and_spreads_the_answers_place(
    floor_runs: tuple[Path, dict[str, Path]],
) -> None:
    """A build balances its questions together: every option still comes from the question's
    candidates, the answer keeps its letter, the result is the same every time, and the
    answer's place in the order of a feature is spread over the places (not stuck in one)."""
    from yanami.world._shortcuts import FEATURES, balance_questions, features, visible

    bench, _ = floor_runs
    dialogues = Dataset(bench).read_all()
    again = balance_questions(dialogues)
    assert [d.model_dump() for d in again] == [d.model_dump() for d in balance_questions(dialogues)]
    places = []
    for before, after in zip(dialogues, again, strict=True):
        for q0, q1 in zip(before.questions, after.questions, strict=True):
            assert q1.answer == q0.answer and q1.answer_letters == q0.answer_letters
            cands = q1.hidden.intent["candidates"]  # type: ignore[index]
            assert set(q1.choices) - {q1.answer} <= set(cands)  # type: ignore[arg-type]
            x = features(visible(after, q1))
            last = np.nan_to_num(x[:, FEATURES.index("last")], nan=-1.0)
            places.append(int((last < last[q1.choices.index(q1.answer)]).sum()))
    assert len(set(places)) >= 3


class Counted(Parser):
    """A parser that names each piece of work handed to `Parser.offload`."""

    def __init__(self, workers: int) -> None:
        super().__init__(workers)
        self.handed: list[str] = []

    def offload(self, work, *args):  # type: ignore[no-untyped-def]
        self.handed.append(work.__name__)
        return super().offload(work, *args)


def test_the_floors_drawn_in_worker_processes_are_the_pictures_drawn_in_the_caller() -> None:
    """The ``jitter-*``, ``union`` and ``collage`` floors draw in the parser's worker processes where
    it has them (`Parser.offload`): byte for byte what they draw without workers."""
    from yanami.world import VIEWS, random_scene, render_png
    from yanami.world._agents import _CUTOUTS, _JITTERS, collage, jitter, union

    pictures = [_input(render_png(random_scene(random.Random(40 + k), n=2 + k), VIEWS[0])) for k in range(3)]
    here = [jitter(p) for p in pictures] + [union(pictures, random.Random(9)), collage(pictures, (512, 384))]
    _JITTERS._values.clear()
    _CUTOUTS._values.clear()
    with Counted(2) as parser:
        drawn = [jitter(p, parser) for p in pictures]
        drawn += [union(pictures, random.Random(9), parser), collage(pictures, (512, 384), parser)]
        assert drawn == here
        assert parser.handed[-1] == "_collage_drawn" and "_jitter_drawn" in parser.handed
        assert parser.offload(os.getpid) != os.getpid()  # (work handed to it runs in a worker)
    assert len(set(here)) == len(here) and all(h not in {p.data for p in pictures} for h in here)


def test_the_reference_agents_draw_in_worker_processes_as_the_floors_do() -> None:
    """What the stateful, stateless and visible agents draw (`draw`) is drawn in the parser's worker
    processes where it has them, byte for byte the caller's picture, and a view drawn once is not
    drawn again: the floors are compared with agents that use the same cores."""
    from yanami.world import VIEWS, View, random_scene, render_png
    from yanami.world._agents import _DRAWN, draw

    views = [View(random_scene(random.Random(70 + k), n=3), VIEWS[k % 2], "studio") for k in range(3)]
    _DRAWN._values.clear()  # (none drawn by an earlier test in this process)
    with Counted(2) as parser:
        drawn = [draw(v, parser) for v in views]
        assert parser.handed == ["render_png"] * 3
        assert [draw(v, parser) for v in views] == drawn and len(parser.handed) == 3  # (kept)
    assert drawn == [render_png(v.scene, v.azimuth, v.style) for v in views]


def test_the_union_adds_what_earlier_pictures_show_and_otherwise_returns_the_latest_unchanged() -> None:
    """What `union_of` plays in the audit: the latest picture with each object it lacks placed
    where it fits, or, where the earlier ones show nothing it lacks, the latest picture itself."""
    from yanami.world import VIEWS, Scene, random_scene, render_png
    from yanami.world._agents import union

    def key(scene: Scene) -> list[tuple[str, ...]]:
        return sorted((o.shape, o.colour, o.size, o.material) for o in scene.objects)

    big = random_scene(random.Random(41), n=4)
    small = Scene.model_construct(objects=big.objects[:2])
    latest = _input(render_png(big, VIEWS[0]))
    assert union([_input(render_png(small, VIEWS[0])), latest], random.Random(9)) == latest.data
    assert union([latest], random.Random(9)) == latest.data  # (nothing earlier)
    grown = union([latest, _input(render_png(small, VIEWS[0]))], random.Random(9))
    assert grown != latest.data and key(parse_image(grown).to_scene()) == key(big)


def test_every_picture_of_a_dialogue_is_jittered_the_same_way() -> None:
    """The ``jitter-*`` strategies shift by a displacement drawn from the request's first picture:
    an object that stays where it was in the dialogue's next picture is drawn where its jittered
    copy was before (so the renderer and the parser find it drawn and read already), and another
    dialogue's pictures move another way."""
    from yanami.world import VIEWS, Scene, random_scene, render_png
    from yanami.world._agents import TrivialAgent

    rng = random.Random(5)
    scene = random_scene(rng, n=3)
    moved = scene.objects[0].model_copy(update={"x": round(scene.objects[0].x * 0.5, 3)})
    later = Scene(objects=(moved, *scene.objects[1:]))
    first, second = (_input(render_png(s, VIEWS[0])) for s in (scene, later))
    other = _input(render_png(random_scene(random.Random(6), n=2), VIEWS[0]))
    agent = TrivialAgent("jitter-input")

    def jittered_last(*pictures: InputImage) -> list[tuple[float, float]]:
        message = InputMessage("user", (*pictures, InputText("Move it.")))
        drawn = agent.generate(Request("d/t3", (message,), size=(512, 384)))
        return [(o.x, o.y) for o in parse_image(drawn).objects]

    def shift(before: Sequence[tuple[float, float]], after: Sequence[tuple[float, float]]) -> set[tuple[float, float]]:
        return {(round(b[0] - a[0], 1), round(b[1] - a[1], 1)) for a, b in zip(before, after, strict=True)}

    seen = [(o.x, o.y) for o in parse_image(second.data).objects]
    here = shift(seen, jittered_last(first, second))
    assert len(here) == 1 and here != {(0.0, 0.0)}  # everything moved together
    assert shift(seen, jittered_last(first, first, second)) == here  # a later turn of the same dialogue
    assert shift(seen, jittered_last(other, second)) != here  # the same picture in another dialogue
