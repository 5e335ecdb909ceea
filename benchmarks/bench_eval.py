"""The evaluation side: exact-judge throughput and the runner's own overhead per item.

    python benchmarks/bench_eval.py                  # both, on a freshly built 400-dialogue bench
    python benchmarks/bench_eval.py --only judge --per-scenario 50

Targets (issue 4):
  judge    >= 200 candidate images per second, parsing included (distinct candidates: no
           cache hits), with the machine's processes; PNG decode alone is the baseline
  runner   <= 2 ms of the runner's own time per item, with an instant model and an instant judge;
           the bare results-store write per item is the baseline
"""

from __future__ import annotations

import argparse
import io
import multiprocessing as mp
import os
import random
import tempfile
import time
from pathlib import Path

from PIL import Image

from yanami.judges import AnswerVerdict, ExactJudge, ImageVerdict
from yanami.schema import ImagePart
from yanami.store import Dataset
from yanami.world import build_world, render_png
from yanami.world._scene import Scene, WorldObject


def _candidates(bench: Path) -> list[tuple[str, int, bytes]]:
    """(dialogue id, turn, candidate bytes): every target turn, with a candidate that differs
    from the ground truth (one object moved a little), so no candidate is a cached parse."""
    ds = Dataset(bench)
    rng = random.Random(0)
    out = []
    for d in ds:
        for t in d.turns:
            if not t.checks:
                continue
            state = t.hidden.state
            objs = [WorldObject.model_validate(o) for o in state["scene"]]
            k = rng.randrange(len(objs))
            if objs[k].on is None:
                objs[k] = objs[k].model_copy(update={"x": objs[k].x + rng.uniform(-0.05, 0.05)})
            out.append((d.id, t.index, render_png(Scene(objects=tuple(objs)), state["azimuth"], state["style"])))
    return out


_WORK: dict[str, object] = {}


def _init(bench: str) -> None:
    _WORK["dialogues"] = {d.id: d for d in Dataset(bench)}
    _WORK["judge"] = ExactJudge()
    from yanami.world._parse import _references
    from yanami.world._render import STYLES

    for s in STYLES:
        _references(s)


def _judge_chunk(chunk: list[tuple[str, int, bytes]]) -> int:
    dialogues, judge = _WORK["dialogues"], _WORK["judge"]
    for did, turn, data in chunk:
        d = dialogues[did]  # type: ignore[index]
        judge.judge_image(d, d.turns[turn], data)  # type: ignore[attr-defined]
    return len(chunk)


def bench_judge(bench: Path) -> None:
    cands = _candidates(bench)
    t = time.perf_counter()
    for _, _, data in cands:
        Image.open(io.BytesIO(data)).load()
    decode = len(cands) / (time.perf_counter() - t)
    ctx = mp.get_context("forkserver")
    for workers in sorted({1, os.cpu_count() or 1}):
        chunks = [cands[i :: workers * 8] for i in range(workers * 8)]
        with ctx.Pool(workers, initializer=_init, initargs=(str(bench),)) as pool:
            pool.map(_judge_chunk, [[c] for c in cands[:workers]])  # warm each worker
            t = time.perf_counter()
            n = sum(pool.map(_judge_chunk, chunks))
            rate = n / (time.perf_counter() - t)
        print(f"exact judge, {workers} process(es): {rate:.0f} candidate images/s over {n} distinct candidates")
    print(f"  baseline: PNG decode alone {decode:.0f} images/s (one process)")


class _Instant:
    name = "instant"

    def __init__(self, image: bytes) -> None:
        self.image = image

    def answer(self, request: object) -> str:
        return "A"

    def generate(self, request: object) -> bytes:
        return self.image


class _InstantJudge:
    name = "instant"
    version = "0"

    def judge_answer(self, d: object, q: object, reply: str) -> AnswerVerdict:
        return AnswerVerdict(1.0, "")

    def judge_image(self, d: object, turn: object, image: bytes) -> ImageVerdict:
        return ImageVerdict({c.id: True for c in turn.checks}, 10.0, "")  # type: ignore[attr-defined]


def bench_runner(bench: Path) -> None:
    from yanami.bench import Prediction, Results, _run

    ds = Dataset(bench)
    dialogues = list(ds)
    first = next(p for t in dialogues[0].turns for p in t.user.parts if isinstance(p, ImagePart))
    image = ds.image_bytes(first)
    _run.load_model = lambda *a: _Instant(image)  # type: ignore[assignment]
    _run.load_judge = lambda *a: _InstantJudge()  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        s = _run.evaluate(bench, "instant", Path(tmp) / "run", loaded=(ds, dialogues))
        per_item = (time.perf_counter() - t) / s.items * 1000
        (Path(tmp) / "bare").mkdir()
        store = Results(Path(tmp) / "bare")
        t = time.perf_counter()
        for k in range(s.items):
            p = Prediction(
                item=f"x/{k}", dialogue="x", scenario="editing", kind="question", turn=0, qtype="RR", status="ok",
                text="A", seed=0,
            )  # fmt: skip
            store.write(p, None)
        bare = (time.perf_counter() - t) / s.items * 1000
        store.close()
    print(f"runner overhead, instant model and judge: {per_item:.3f} ms per item over {s.items} items")
    print(f"  baseline: the bare results-store write {bare:.3f} ms per item")


def bench_in_runner(bench: Path) -> None:
    """The exact judge inside `yanami eval` (a fresh process each time, so nothing is cached)."""
    import subprocess
    import sys

    turns = sum(1 for d in Dataset(bench) for t in d.turns if t.checks)
    for workers, concurrency in ((1, 1), (os.cpu_count() or 1, 2 * (os.cpu_count() or 1))):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "yanami", "eval", str(bench), "--model", "reference:oracle", "--out",
                   f"{tmp}/run", "--workers", str(workers), "--concurrency", str(concurrency)]  # fmt: skip
            t = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            rate = turns / (time.perf_counter() - t)
        print(
            f"yanami eval, oracle, --workers {workers} --concurrency {concurrency}: {rate:.0f} target images judged/s"
            " (whole command, questions and start-up included)"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["judge", "runner", "eval"])
    ap.add_argument("--per-scenario", type=int, default=100)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench = Path(tmp) / "bench"
        build_world(bench, per_scenario=args.per_scenario, seed=3, workers=os.cpu_count() or 1)
        if args.only in (None, "judge"):
            bench_judge(bench)
        if args.only in (None, "runner"):
            bench_runner(bench)
        if args.only in (None, "eval"):
            bench_in_runner(bench)


if __name__ == "__main__":
    main()
