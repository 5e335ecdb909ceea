"""Memory follows the work: eval reads only the dialogues it evaluates, after its configuration
is checked, and a long dialogue's history is resolved once, not once per item."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from PIL import Image

from yanami.contract import Dialogue, ImageSource, read_rows
from yanami.runner import _run, evaluate
from yanami.runner._items import Conversation, build_request, items_of
from yanami.store import Dataset, DatasetWriter, DialogueWalk, Generator, Selection, _fast, _reader, select_dialogues

SCENARIOS = ("fusion", "editing", "world_modeling", "reasoning")


def _dialogue(did: str, scenario: str, turns: int = 1, image: dict | None = None) -> Dialogue:
    """The smallest dialogue eval takes: user turns (text, and an image if given), text replies,
    a multiple-choice question after every turn."""
    user = [{"type": "text", "text": f"Put the cube left of the ball ({did})."}]
    if image is not None:
        user.append(image)
    return Dialogue.model_validate(
        {
            "id": did,
            "scenario": scenario,
            "capabilities": [],
            "turns": [
                {
                    "index": t,
                    "user": {"role": "user", "parts": user},
                    "assistant": {"role": "assistant", "parts": [{"type": "text", "text": f"Done {t}."}]},
                }
                for t in range(turns)
            ],
            "questions": [
                {
                    "id": f"q{t}",
                    "type": "RR",
                    "after_turn": t,
                    "text": "Which stands left?",
                    "answer": "the cube",
                    "choices": ["the cube", "the ball"],
                    "answer_letters": ["A"],
                }
                for t in range(turns)
            ],
            "meta": {"generator": "test"},
        }
    )


def _bench(path: Path, groups: list[str]) -> Path:
    """A bench whose i-th dialogue has the scenario ``groups[i]``, in shards of 500."""
    with DatasetWriter(path, split="bench", generator=Generator(name="test"), shard_size=500) as w:
        for i, g in enumerate(groups):
            w.add_dialogue(_dialogue(f"d{i:05d}", g))
    return path


@pytest.fixture(scope="module")
def big_bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3,000 one-turn dialogues, the scenarios in turn."""
    return _bench(tmp_path_factory.mktemp("big") / "bench", [SCENARIOS[i % 4] for i in range(3000)])


@dataclass
class Reads:
    """The ids of the dialogues the store reads from now on."""

    scanned: list[str] = field(default_factory=list)
    """Read on the fast path (`Dataset.scanned`), no `Dialogue` made."""
    made: list[str] = field(default_factory=list)
    """Made `Dialogue`s (pydantic)."""

    def clear(self) -> None:
        self.scanned.clear()
        self.made.clear()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Reads:
    seen = Reads()

    class Counting(Dialogue):
        @classmethod
        def model_validate_json(cls, line: str | bytes, **kw: object) -> Dialogue:  # type: ignore[override]
            d = Dialogue.model_validate_json(line)
            seen.made.append(d.id)
            return d

    def fast_walk(line: bytes) -> DialogueWalk | None:
        walk = _fast.fast_walk(line)
        assert walk is not None  # (these benches are valid)
        seen.scanned.append(walk.dialogue.id)
        return walk

    monkeypatch.setattr(_reader, "Dialogue", Counting)
    monkeypatch.setattr(_reader, "fast_walk", fast_walk)
    return seen


def test_eval_with_a_limit_reads_only_the_dialogues_it_needs(big_bench, tmp_path, reads) -> None:
    s = evaluate(big_bench, "reference:copy-input", tmp_path / "run", limit=10)
    assert s.items == s.written == 10
    # read once, to choose (the first 12: every scenario has its share of the 3 rounds); the 10 chosen
    # are kept from that read for the exact judge's check that it can grade them, and made Dialogues
    # once each, to run them
    assert reads.scanned == [f"d{i:05d}" for i in range(12)]
    assert sorted(reads.made) == [f"d{i:05d}" for i in range(10)]  # three rounds of the four scenarios
    reads.clear()
    s = evaluate(big_bench, "reference:copy-input", tmp_path / "run", limit=20)  # extended
    assert (s.skipped, s.written) == (10, 10)
    assert reads.scanned == [f"d{i:05d}" for i in range(20)] and sorted(reads.made) == reads.scanned
    assert read_rows(tmp_path / "run").manifest.limit == 20


def test_a_selection_larger_than_it_keeps_reads_each_chosen_dialogue_again_when_needed(
    big_bench, tmp_path, reads, monkeypatch
) -> None:
    monkeypatch.setattr("yanami.store._select.KEPT", 5)
    s = evaluate(big_bench, "reference:copy-input", tmp_path / "run", limit=10)
    assert s.items == s.written == 10
    # read to choose, then each chosen one again by its offset for the exact judge's check, and to run it
    assert reads.scanned == [f"d{i:05d}" for i in range(12)]
    assert len(reads.made) == 2 * 10 and set(reads.made) < set(reads.scanned)
    reads.clear()
    s = evaluate(big_bench, "reference:copy-input", tmp_path / "run2")  # the whole bench: 3,000 > 5
    # scanned to count, scanned again for the judge's check; made Dialogues once, to run them
    assert s.written == 3000 and len(reads.scanned) == 2 * 3000 and len(reads.made) == 3000


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param([SCENARIOS[i % 4] for i in range(40)], id="in-turn"),
        pytest.param(["fusion"] * 30 + ["editing"] * 5 + ["reasoning"] * 4 + ["world_modeling"], id="one-late"),
        pytest.param(["fusion"] * 20 + ["editing"] * 20, id="two-scenarios"),
        pytest.param(["editing", "fusion", "editing"] * 10 + ["reasoning", "world_modeling"] * 3, id="few-late"),
    ],
)
@pytest.mark.parametrize("limit", [1, 3, 4, 7, 12, 40, 100, None])
def test_the_streamed_selection_is_the_rule_on_the_whole_bench(tmp_path, layout, limit) -> None:
    """Whatever the order of the scenarios, stopping early chooses what the rule chooses on every
    dialogue, in the same order (a resumed run relies on it)."""
    dataset = Dataset(_bench(tmp_path / "bench", layout))
    everything = list(dataset)
    chosen = Selection(dataset, limit, lambda d: 2)
    expected = [d.id for d in select_dialogues(everything, limit)]
    assert [d.id for d in chosen] == expected and chosen.items == 2 * len(expected)


@pytest.mark.parametrize("limit", [3, None])
def test_a_released_dialogue_is_no_longer_kept_by_the_selection(tmp_path, limit) -> None:
    import gc
    import weakref

    dataset = Dataset(_bench(tmp_path / "bench", [SCENARIOS[i % 4] for i in range(8)]))
    chosen = Selection(dataset, limit, lambda d: 2)
    ids = [d.id for d in chosen]
    handed = chosen.release()
    first = next(handed)
    gone = weakref.ref(first)
    del first
    gc.collect()
    assert gone() is None  # freed once the run let it go, before the run ends
    assert [d.id for d in handed] == ids[1:]
    assert [d.id for d in chosen] == ids  # iterated again: read again from the bench


@pytest.mark.parametrize("limit", [3, None])
def test_dialogues_read_before_the_run_are_made_once(tmp_path, reads, limit) -> None:
    """A judge that reads the run's dialogues before it runs (a family's, checking its rules grade
    them all) makes each `Dialogue` once: the run is handed the same objects, not new ones."""
    dataset = Dataset(_bench(tmp_path / "bench", [SCENARIOS[i % 4] for i in range(8)]))
    chosen = Selection(dataset, limit, lambda d: 2)
    assert reads.made == [] and reads.scanned  # chosen on the fast path
    before = list(chosen)
    assert sorted(reads.made) == sorted(d.id for d in before)
    assert all(a is b for a, b in zip(chosen.release(), before, strict=True))
    assert sorted(reads.made) == sorted(d.id for d in before)  # none made again


@pytest.mark.parametrize("limit", [3, None])
def test_dialogues_the_caller_handed_over_are_kept_through_a_release(tmp_path, limit) -> None:
    dataset = Dataset(_bench(tmp_path / "bench", [SCENARIOS[i % 4] for i in range(8)]))
    given = dataset.read_all()
    chosen = Selection(dataset, limit, lambda d: 2, loaded=given)
    ids = [d.id for d in chosen]
    assert [d.id for d in chosen.release()] == ids
    assert [d.id for d in chosen] == ids  # iterated again: still the caller's, nothing to read back
    assert all(a is b for a, b in zip(chosen, [d for d in given if d.id in ids], strict=True))


def test_a_configuration_problem_is_found_before_any_dialogue_is_read(
    big_bench, tmp_path, reads, monkeypatch, cli
) -> None:
    monkeypatch.delenv("YANAMI_TEST_NO_SUCH_KEY", raising=False)
    config = tmp_path / "model.yaml"
    config.write_text(
        "kind: openai\nbase_url: http://127.0.0.1:9/v1\nchat_model: m\napi_key_env: YANAMI_TEST_NO_SUCH_KEY\n"
    )
    r = cli("eval", big_bench, "--model", config, "--out", tmp_path / "run")
    assert r.code == 2 and "YANAMI_TEST_NO_SUCH_KEY" in r.err
    judge = tmp_path / "no.yaml"
    r = cli("eval", big_bench, "--model", "reference:copy-input", "--judge", judge, "--out", tmp_path / "run")
    assert r.code == 2 and "no.yaml" in r.err
    assert reads.scanned == reads.made == [] and not (tmp_path / "run").exists()


def test_a_duplicate_id_among_what_a_limited_run_reads_is_refused(tmp_path) -> None:
    bench = _bench(tmp_path / "bench", [SCENARIOS[i % 4] for i in range(8)])
    shard = bench / "dialogues" / "00000.jsonl"
    lines = shard.read_text().splitlines(keepends=True)
    other = json.loads(lines[1])
    other["id"] = json.loads(lines[0])["id"]
    lines[1] = json.dumps(other) + "\n"
    from tests.runner.test_run_dir import _reseal

    shard.write_text("".join(lines))
    _reseal(bench)
    with pytest.raises(_run.UserError, match=r"used more than once .*00000\.jsonl:1 and dialogues/00000\.jsonl:2"):
        evaluate(bench, "reference:copy-input", tmp_path / "run", limit=2)


def _png() -> dict:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 120, 40)).save(buf, format="PNG")
    return {"data": buf.getvalue()}


@pytest.mark.parametrize("selfh", [False, True])
def test_a_long_dialogue_resolves_each_turn_once_and_asks_what_build_request_asks(tmp_path, selfh) -> None:
    """Every request of a 300-turn chain equals `build_request`'s, and the history's images are
    read once in all, not once per request that shows them (which made a long dialogue quadratic)."""
    with DatasetWriter(tmp_path / "bench", split="bench", generator=Generator(name="test")) as w:
        part = w.add_image(_png()["data"], ImageSource.USER)
        w.add_dialogue(_dialogue("long", "fusion", turns=300, image=part.model_dump(mode="json")))
    dataset = Dataset(tmp_path / "bench")
    (d,) = list(dataset)
    shown = []

    def image_bytes(turn: int, side: str, j: int, p: object) -> bytes:
        shown.append(turn)
        return dataset.image_bytes(p)  # type: ignore[arg-type]

    def own_reply(turn: int) -> None:
        return None

    conversation = Conversation(d, "yes-first", image_bytes, own_reply if selfh else None)
    items = items_of(d)
    for item in items:
        request, fallbacks = conversation.request(item)
        assert request == build_request(d, item, "yes-first", lambda t, s, j, p: dataset.image_bytes(p))
        assert fallbacks == 0
    assert sorted(shown) == list(range(300))  # each turn's image: once
