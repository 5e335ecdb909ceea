"""How a run's chains go through the local threads: a dialogue's questions side by side, its turns
one after another, its pictures read ahead, and nothing left for the cyclic collector."""

from __future__ import annotations

import gc
from pathlib import Path

from yanami.contract import InputImage
from yanami.models.fake import FakeServer
from yanami.runner import _chains, evaluate
from yanami.store import Dataset


def _model(tmp_path: Path, srv: FakeServer, kind: str) -> Path:
    config = tmp_path / f"{kind}.yaml"
    config.write_text(f"kind: openai\n{kind}: m\nbase_url: {srv.url}/v1\nrequests_per_minute: 60000\n")
    return config


def _questions(bench: Path) -> int:
    return len(next(iter(Dataset(bench))).questions)


def test_a_dialogues_questions_are_asked_side_by_side(world_bench, tmp_path) -> None:
    """Questions show the dialogue up to their turn and never one another's answers: with one
    dialogue, every question is in flight at once."""
    n = _questions(world_bench)
    assert n >= 2
    with FakeServer(latency_s=0.5) as srv:
        s = evaluate(world_bench, str(_model(tmp_path, srv, "chat_model")), tmp_path / "run", limit=1, concurrency=8)
    assert s.written == n and srv.max_in_flight == min(n, _chains.SIDE_BY_SIDE)


def test_a_long_dialogues_questions_go_in_a_few_runs_of_consecutive_ones(world_dialogues) -> None:
    """Each run resolves the dialogue's history once: one run per question would make a dialogue
    of 10,000 turns cost 10,000 resolutions of a growing history."""
    d = world_dialogues[0]
    items = [_chains.Item(f"{d.id}/q{k}", d.id, "question", k % len(d.turns), f"q{k}") for k in range(42)]
    runs = _chains.side_by_side(_chains.Chain(d, items, {}, []))
    assert len(runs) == _chains.SIDE_BY_SIDE and [i for r in runs for i in r.todo] == items
    assert {len(r.todo) for r in runs} <= {10, 11}
    turn = [_chains.Item(f"{d.id}/t0", d.id, "turn", 0)]
    assert _chains.side_by_side(_chains.Chain(d, turn + items, {}, []))[0].todo == turn + items


def test_a_dialogues_turns_are_asked_one_after_another(world_bench, tmp_path) -> None:
    """A turn's request may show what the model gave before (Self-History), and under GT-History
    must not show a turn the model has not answered yet: never two of one dialogue at once."""
    with FakeServer(latency_s=0.05) as srv:
        s = evaluate(world_bench, str(_model(tmp_path, srv, "image_model")), tmp_path / "run", limit=1, concurrency=8)
    assert s.written >= 2 and srv.max_in_flight == 1


def test_the_pictures_a_chain_shows_are_read_before_a_thread_takes_it(world_bench, tmp_path, monkeypatch) -> None:
    """The reader reads ahead what the requests show, and only that: never a target turn's
    picture, which no request shows (the model's own stands there under Self-History)."""
    read: list[str] = []
    real = _chains.ChainRunner.bench_image

    def counting(self: _chains.ChainRunner, part) -> InputImage:  # type: ignore[no-untyped-def]
        read.append(part.sha256)
        return real(self, part)

    monkeypatch.setattr(_chains.ChainRunner, "bench_image", counting)
    d = next(iter(Dataset(world_bench)))
    targets = {p.sha256 for t in d.turns if t.checks for p in t.assistant.images()}
    shown = {p.sha256 for t in d.turns for p in t.user.images()}
    with FakeServer() as srv:
        evaluate(
            world_bench,
            str(_model(tmp_path, srv, "image_model")),
            tmp_path / "run",
            limit=1,
            history="self",
            concurrency=2,
        )
    assert shown <= set(read) and not (targets - shown) & set(read)


def test_a_finished_chain_leaves_nothing_to_the_cyclic_collector(world_bench, tmp_path) -> None:
    """A full sweep of the collector holds every thread; a chain's state is freed when it ends."""
    gc.collect()
    gc.disable()
    try:
        with FakeServer() as srv:
            evaluate(world_bench, str(_model(tmp_path, srv, "chat_model")), tmp_path / "run", concurrency=4)
        left = [o for o in gc.get_objects() if isinstance(o, _chains.Chat)]
    finally:
        gc.enable()
    assert left == []
