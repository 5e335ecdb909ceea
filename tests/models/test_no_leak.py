"""No hidden annotation ever reaches a model: requests are a function of message parts alone."""

from __future__ import annotations

import pytest

from tests.helpers import scrambled
from yanami.contract import LAYOUTS, ImagePart
from yanami.runner import build_request, items_of
from yanami.store import Dataset


@pytest.mark.parametrize("layout", LAYOUTS)
def test_requests_do_not_depend_on_hidden_annotations(world_bench, world_dialogues, layout) -> None:
    bench = Dataset(world_bench)

    def image_bytes(turn, side, j, part):
        return bench.image_bytes(part)

    for d in world_dialogues:
        hidden_free = scrambled(d)
        for item in items_of(d):
            a = build_request(d, item, layout, image_bytes)
            b = build_request(hidden_free, item, layout, image_bytes)
            assert a == b, item.id
            text = " ".join(p.text for m in a.messages for p in m.parts if p.type == "text")
            for secret in ("LEAK", "predicate", '"op"'):
                assert secret not in text
            if item.kind == "turn":
                target = next(p for p in d.turns[item.turn].assistant.parts if isinstance(p, ImagePart))
                shown = {im.sha256 for im in a.images()}
                earlier = {
                    p.sha256
                    for t in d.turns[: item.turn]
                    for m in (t.user, t.assistant)
                    for p in m.parts
                    if isinstance(p, ImagePart)
                }
                if target.sha256 not in earlier:  # a turn may go back to an image shown before
                    assert target.sha256 not in shown
                assert a.messages[-1].role == "user"


def test_the_runner_hands_adapters_exactly_the_hidden_free_requests(
    world_bench, world_dialogues, tmp_path, monkeypatch
):
    """Through the whole runner, an adapter receives the requests built from message parts, nothing else."""
    from yanami.contract import Request
    from yanami.runner import _build, _run

    bench = Dataset(world_bench)
    seen: list[Request] = []

    class Recorder:
        name = "recorder"

        def answer(self, request: Request) -> str:
            seen.append(request)
            return "A"

        def generate(self, request: Request) -> bytes:
            seen.append(request)
            return request.images()[-1].data

    monkeypatch.setattr(_build, "load_model", lambda *a: Recorder())
    _run.evaluate(world_bench, "recorder", tmp_path / "run", limit=4, concurrency=3)
    by_id = {d.id: scrambled(d) for d in world_dialogues}
    assert len(seen) > 20
    for r in seen:
        dialogue_id = r.item.rpartition("/")[0]
        item = next(i for i in items_of(by_id[dialogue_id]) if i.id == r.item)
        assert r == build_request(by_id[dialogue_id], item, "yes-first", lambda t, s, j, p: bench.image_bytes(p))
