"""``reference:visible`` reads nothing but its request, and the bench is decidable from it: it scores
full marks on a small world bench under both histories, and the audit's entry point finds no miss."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import scrambled
from yanami.contract import Dialogue, InputImage, InputText, Request
from yanami.models import reads_bench
from yanami.runner import build_request, evaluate, items_of
from yanami.scoring import load_runs
from yanami.store import Dataset
from yanami.world import reference_agent
from yanami.world._visible import VisibleAgent, read_request, visible_misses


def test_it_is_a_model_that_never_sees_the_bench() -> None:
    agent = reference_agent("visible")
    assert isinstance(agent, VisibleAgent)
    assert not hasattr(agent, "bind_bench") and not reads_bench(agent)  # never privileged


def test_its_answers_depend_on_the_request_alone(world_bench: Path, tmp_path: Path) -> None:
    """Requests built from dialogues with every hidden field scrambled, from a copy of the bench that is
    gone before the agent answers: the same answers, and the reference's letters."""
    copy = tmp_path / "bench"
    shutil.copytree(world_bench, copy)
    bench = Dataset(copy)
    requests: list[tuple[Request, list[str]]] = []
    for d in bench:
        hidden_free = scrambled(d)
        for item in items_of(d, turns=False):
            request = build_request(hidden_free, item, "yes-first", lambda t, s, j, p: bench.image_bytes(p))
            q = next(q for q in d.questions if q.id == item.question)
            requests.append((request, q.answer_letters))
    shutil.rmtree(copy)
    agent = VisibleAgent()
    for request, letters in requests:
        assert [agent.answer(request)] == letters, request.item


def test_a_yes_front_request_reads_as_the_same_messages(world_bench: Path, world_dialogues: list[Dialogue]) -> None:
    bench = Dataset(world_bench)
    d = world_dialogues[0]
    item = next(i for i in items_of(d) if i.kind == "question")
    said = {}
    for layout in ("yes-first", "yes-front"):
        request = build_request(d, item, layout, lambda t, s, j, p: bench.image_bytes(p))
        messages, images = read_request(request)
        said[layout] = ([(m.role, m.text, m.pictures) for m in messages], [im.sha256 for im in images])
    assert said["yes-first"] == said["yes-front"]
    front = build_request(d, item, "yes-front", lambda t, s, j, p: bench.image_bytes(p))
    assert isinstance(front.messages[0].parts[0], InputText) and isinstance(front.messages[0].parts[1], InputImage)


def test_the_audit_entry_point_finds_no_miss(world_dialogues: list[Dialogue]) -> None:
    """On the ground truth's scenes (GT-History, no parsing), every check passes and every answer is right."""
    for d in world_dialogues:
        assert visible_misses(d) == [], d.id


@pytest.mark.parametrize("history", ["gt", "self"])
def test_full_marks_through_the_runner_and_the_exact_judge(world_bench: Path, tmp_path: Path, history: str) -> None:
    out = tmp_path / history
    evaluate(world_bench, "reference:visible", out, history=history)  # type: ignore[arg-type]
    (score,) = load_runs([out]).scores
    assert not score.privileged
    assert score.average["scene"] is not None and score.average["scene"] >= 99.5, score.average
    assert score.average["understanding"] == 100.0, score.average
