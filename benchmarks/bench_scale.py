"""The Ray backend against the local one, in the same run (issue 26), and a projection to 400K dialogues.

    python benchmarks/bench_scale.py [--only build|eval] [--per-scenario N] [--eval-per-scenario N]

  build  `build_world` with 1 local worker, 2 local workers, and on a local Ray (this machine's
         CPUs, 2 here), the same seed and plan: images/s over each whole call, Ray's start-up
         excluded (Ray started and warmed by a small build first, timed apart). The outputs
         are compared byte for byte.
         Targets: Ray >= 1.7x the one-worker local rate, and within 15 % of local --workers 2.
  eval   `evaluate` of DSU questions through the openai adapter against the scripted server in
         its own process answering after 100 ms, --concurrency 16: local threads, then Ray
         actors. Rates over the middle of the run (20 % to 90 % of the items: actors starting
         and the last chains draining excluded) and for the whole call.
         Target: Ray >= 85 % of the ideal 160 requests/s (issue 38).

Then a projection of wall time and CPU cost for 402,639 dialogues (YANAMI-400K's size) on N
workers, from the per-item costs measured here (docs/scale.md carries it).
"""

from __future__ import annotations

import argparse
import contextlib
import filecmp
import os
import tempfile
import time
from pathlib import Path

from bench_api import CONCURRENCY, IDEAL, _config, server  # the script's folder is on sys.path
from yanami.runner import evaluate
from yanami.world import build_world

DIALOGUES_400K = 402_639
CPU_HOUR_PRICE = 0.05
"""An on-demand cloud vCPU-hour in US dollars (general-purpose instances, 2026): the projection's assumption."""


class _Marks:
    """Progress marks: (time, done)."""

    def __init__(self) -> None:
        self.marks: list[tuple[float, int]] = []

    def items(self, done: int, total: int) -> None:
        self.marks.append((time.perf_counter(), done))
        self.total = total

    def middle(self, total: int) -> float:
        """Items per second between 20 % and 90 % of ``total``."""
        a = next(m for m in self.marks if m[1] >= 0.2 * total)
        b = next(m for m in self.marks if m[1] >= 0.9 * total)
        return (b[1] - a[1]) / (b[0] - a[0])


def _same_tree(a: Path, b: Path) -> bool:
    fa = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    fb = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    return fa == fb and all(filecmp.cmp(a / f, b / f, shallow=False) for f in fa)


def bench_build(per_scenario: int, tmp: Path) -> dict[str, float]:
    """Rates of whole calls: local with 1 and 2 workers (their pools started inside the call),
    then Ray, in a Ray session started and warmed beforehand (start-up excluded: Ray's start
    and its workers' first imports, timed apart)."""
    from yanami.scale import ray_session

    rates: dict[str, float] = {}
    outs = {}
    images_per_dialogue = 0.0
    for label in ("local, 1 worker", "local, 2 workers", "ray, local Ray"):
        out = tmp / label.replace(" ", "").replace(",", "-")
        with contextlib.ExitStack() as stack:
            kw: dict[str, object] = {"workers": 1 if "1" in label else 2}
            if label.startswith("ray"):
                t = time.perf_counter()
                stack.enter_context(ray_session(None))
                build_world(tmp / "warm", per_scenario=2, seed=99, backend="ray")  # every worker up, imports done
                print(f"build, Ray start-up (ray.init and a first small build): {time.perf_counter() - t:.1f} s")
                kw = {"backend": "ray"}
            t = time.perf_counter()
            m = build_world(out, per_scenario=per_scenario, seed=3, **kw)  # type: ignore[arg-type]
            whole = time.perf_counter() - t
        images_per_dialogue = m.counts.images / m.counts.dialogues
        rates[label] = m.counts.images / whole
        outs[label] = out
        print(f"build, {label}: {rates[label]:,.0f} images/s ({m.counts.dialogues} dialogues, {m.counts.images}"
              f" images in {whole:.1f} s)")  # fmt: skip
    one, two, ray = rates["local, 1 worker"], rates["local, 2 workers"], rates["ray, local Ray"]
    same = _same_tree(outs["local, 1 worker"], outs["ray, local Ray"])
    print(
        f"build, Ray with {os.cpu_count()} CPUs: {ray / one:.2f}x the one-worker local rate (target >= 1.7),"
        f" {100 * ray / two:.0f} % of local --workers 2 (target >= 85 %); byte-identical to local: {same}"
    )
    return {"compose_s": 1 / one, "images_per_dialogue": images_per_dialogue, "ray_vs_local2": ray / two}


def bench_eval(per_scenario: int, tmp: Path) -> dict[str, float]:
    import yaml

    bench = tmp / "eval-bench"
    build_world(bench, per_scenario=per_scenario, seed=4, workers=os.cpu_count() or 1)
    found: dict[str, float] = {}
    with server() as url:
        answers = tmp / "answers.yaml"
        answers.write_text(yaml.safe_dump(_config(url, chat_model="c")))
        for backend in ("local", "ray"):
            marks = _Marks()
            t = time.perf_counter()
            s = evaluate(bench, str(answers), tmp / f"run-{backend}", concurrency=CONCURRENCY,
                         on_progress=marks.items, backend=backend)  # fmt: skip
            whole = s.written / (time.perf_counter() - t)
            middle = marks.middle(s.items)
            found[backend] = middle
            target = "   target >= 85 %" if backend == "ray" else ""
            print(
                f"eval, {backend}: {middle:.1f} requests/s over 20-90 % of the run ="
                f" {100 * middle / IDEAL:.0f} % of the ideal {IDEAL:.0f} ({s.written} DSU questions, 100 ms server,"
                f" concurrency {CONCURRENCY}); the whole call {whole:.1f}/s = {100 * whole / IDEAL:.0f} %{target}"
            )
    return {"eval_rate": found["ray"]}


def projection(costs: dict[str, float]) -> None:
    """Wall time and CPU cost of building 402,639 dialogues on N workers, from measured costs."""
    compose = costs["compose_s"] * costs["images_per_dialogue"]  # CPU-s per dialogue on one worker
    # the driver writes every dialogue itself: its rate bounds the build, whatever N
    writer = costs.get("writer_dialogues_s", 0.0)
    print(f"\nprojection for {DIALOGUES_400K:,} dialogues ({costs['images_per_dialogue']:.1f} images each, as"
          f" measured): {compose * 1000:.1f} CPU-ms per dialogue on one worker; the driver's writer"
          f" {1 / writer if writer else float('inf'):,.0f} dialogues/s at most")  # fmt: skip
    print(f"| workers | wall time | vCPU-hours | cost at ${CPU_HOUR_PRICE:.2f} per vCPU-hour |")
    print("|---|---|---|---|")
    for n in (2, 8, 32, 128):
        seconds = max(DIALOGUES_400K * compose / n, DIALOGUES_400K * writer)
        hours = seconds * (n + 1) / 3600  # the workers and the driver, held for the whole run
        print(f"| {n} | {seconds / 3600:.2f} h | {hours:,.1f} | ${hours * CPU_HOUR_PRICE:,.2f} |")


def bench_writer(per_scenario: int, tmp: Path) -> float:
    """Seconds per dialogue the driver spends writing (compose excluded): the dialogues composed
    first, then written through the same writer and balancer as a build."""
    from yanami.contract import PRESETS, Scenario
    from yanami.store import DatasetWriter, Generator
    from yanami.world import plan
    from yanami.world._build import _one
    from yanami.world._shortcuts import Balancer

    # the floors a bench build measures per dialogue are compose's share, not the writer's
    scenarios = list(Scenario)
    todo = [(s, did, 9, False) for s, did in plan("bench", per_scenario, None, scenarios)]
    results = [_one(t) for t in todo]
    t = time.perf_counter()
    with DatasetWriter(tmp / "writer", split=PRESETS["bench"]["split"], generator=Generator(name="world")) as w:
        balancer = Balancer()
        for d, images, sets, _ in results:
            parts = {p.sha256: p for p in d.images()}
            for sha, data in images.items():
                w.add_encoded(parts[sha], data)
            w.add_dialogue(balancer.balance(d, sets))
        w.commit()
    per = (time.perf_counter() - t) / len(results)
    print(f"writer alone (the driver's share of a build): {1 / per:,.0f} dialogues/s")
    return per


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=("build", "eval"))
    ap.add_argument("--per-scenario", type=int, default=100)
    ap.add_argument("--eval-per-scenario", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        costs: dict[str, float] = {}
        if args.only in (None, "build"):
            costs |= bench_build(args.per_scenario, Path(tmp))
            costs["writer_dialogues_s"] = bench_writer(args.per_scenario, Path(tmp))
        if args.only in (None, "eval"):
            costs |= bench_eval(args.eval_per_scenario, Path(tmp))
        if "compose_s" in costs:
            projection(costs)


if __name__ == "__main__":
    main()
