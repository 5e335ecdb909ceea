"""Memory bounded by the work, not the input: peak RSS per command and per reference agent as the
bench grows, and items/s along one very long dialogue.

    python benchmarks/bench_memory.py                       # 10k and 100k dialogues, a 10,000-turn dialogue
    python benchmarks/bench_memory.py --million             # and 1,000,000 dialogues (minutes, ~0.7 GB of disk)
    python benchmarks/bench_memory.py --only long --turns 4000
    python benchmarks/bench_memory.py --only memory --commands export,import,validate
    python benchmarks/bench_memory.py --only agents --million

Targets (issue 24, deliverable 1):
  memory  peak RSS of `eval --limit 100`, `score`, `report`, `judge` (re-judging that run), `stats`,
          `export --format parquet`, `import` (of that export), `validate` and `audit` flat from
          10,000 to 1,000,000 dialogues: each command's figure at the largest size over its
          figure at 10,000 (the baseline, measured in the same run) stays near 1.0x;
          `python -c "import yanami.cli"` is printed as the floor
  agents  peak RSS and time of `eval --limit 100` with the reference agents that read the bench
          (`reference:oracle`, `reference:stateful`) and with `reference:visible` (which tracks
          the dialogue itself), beside `reference:copy-input` (reads nothing hidden: the
          baseline, measured in the same run) at 10,000, 100,000 and 1,000,000 dialogues
          (issue 38, deliverable 6): each agent's figure over the baseline's at the same size,
          and its figure at the largest size over its figure at 10,000, stay near 1.0x (while
          the oracle read the whole bench at bind_bench, issue 38 found it at 11.5 GB and 228 s
          at 1,000,000 dialogues, the baseline at 169 MB and 13 s)
  long    items/s constant along a 10,000-turn dialogue (a DSU question after every turn, so
          the k-th question's request shows k turns): the rate over the last quarter of the
          items over the rate over the second quarter (the first holds the run's start) stays
          near 1.0x

The benches are synthetic and as small as `yanami validate` accepts: one user turn with one
tiny image shared by every dialogue, one assistant text reply, one multiple-choice DSU
question; scenarios in turn. They are kept in `--cache` (default /tmp/yanami-bench-memory)
and reused by later runs (a million dialogues take about half a minute to write).
`reference:copy-input` (which reads nothing hidden) is the model of `memory`, and the exact
judge grades; in `agents` the agents answer the questions only (no turn asks for a picture),
the oracle's and the stateful agent's answers read from the bench, which is what is measured.
Each command runs in its own process, measured by the kernel's peak RSS of that process
(getrusage of the child). `audit` replays world dialogues only: on these benches it reads them
all and refuses (exit 2), which still measures its reading. The long dialogue is run twice:
with a model that answers at once (the runner's own cost, which is what the target is about)
and with `reference:copy-input`.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

from yanami.store import Counts, Generator, Manifest, image_relpath, images_digest
from yanami.store._manifest import SHARD_SIZE

SCENARIOS = ("fusion", "editing", "world_modeling", "reasoning")


def _tiny_png() -> tuple[bytes, str]:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 120, 40)).save(buf, format="PNG")
    data = buf.getvalue()
    return data, hashlib.sha256(data).hexdigest()


def _turn(index: int, image: str) -> dict[str, object]:
    user = [
        {"type": "text", "text": f"Put a red cube left of the blue ball, number {index}."},
        {"type": "image", "sha256": image, "format": "png", "width": 8, "height": 8, "source": "user"},
    ]
    return {
        "index": index,
        "user": {"role": "user", "parts": user},
        "assistant": {"role": "assistant", "parts": [{"type": "text", "text": "Done: the cube is left of the ball."}]},
    }


def _question(qid: str, after: int) -> dict[str, object]:
    return {
        "id": qid,
        "type": "RR",
        "after_turn": after,
        "text": "Which object stands left of the ball?",
        "answer": "the cube",
        "choices": ["the cube", "the ball"],
        "answer_letters": ["A"],
    }


def _dialogue(did: str, scenario: str, turns: int, image: str) -> str:
    d = {
        "id": did,
        "scenario": scenario,
        "capabilities": [],
        "turns": [_turn(t, image) for t in range(turns)],
        "questions": [_question(f"q{t}", t) for t in range(turns)],
        "meta": {"generator": "bench_memory", "version": "1"},
    }
    return json.dumps(d, separators=(",", ":"))


BENCH_VERSION = "1"
"""What `write_bench` writes: a bench in the cache of another version is written again."""


def cached_bench(cache: Path, dialogues: int) -> Path:
    """The bench of ``dialogues`` one-turn dialogues in ``cache``, written there first unless an
    earlier run left it (its manifest, written last, names this size and `BENCH_VERSION`)."""
    path = cache / f"bench-{dialogues}"
    with contextlib.suppress(OSError, ValueError):
        generator = json.loads((path / "manifest.json").read_text())["generator"]
        if generator["version"] == BENCH_VERSION and generator["params"] == {"dialogues": dialogues, "turns": 1}:
            return path
    t = time.perf_counter()
    cache.mkdir(parents=True, exist_ok=True)
    write_bench(path, dialogues)
    print(f"    (bench written in {time.perf_counter() - t:.1f} s, kept in {cache})")
    return path


def write_bench(path: Path, dialogues: int, turns: int = 1) -> Path:
    """A valid bench of ``dialogues`` dialogues of ``turns`` turns each (a question after every
    turn), written straight as JSON lines (the fields left out take their defaults)."""
    if path.exists():
        shutil.rmtree(path)
    image, sha = _tiny_png()
    (path / "dialogues").mkdir(parents=True)
    target = path / image_relpath(sha, "png")
    target.parent.mkdir(parents=True)
    target.write_bytes(image)
    shards: dict[str, str] = {}
    for start in range(0, dialogues, SHARD_SIZE):
        rel = f"dialogues/{start // SHARD_SIZE:05d}.jsonl"
        lines = []
        for i in range(start, min(start + SHARD_SIZE, dialogues)):
            lines.append(_dialogue(f"d{i:07d}", SCENARIOS[i % len(SCENARIOS)], turns, sha) + "\n")
        data = "".join(lines).encode()
        (path / rel).write_bytes(data)
        shards[rel] = hashlib.sha256(data).hexdigest()
    manifest = Manifest(
        split="bench",
        generator=Generator(
            name="bench_memory", version=BENCH_VERSION, params={"dialogues": dialogues, "turns": turns}
        ),
        counts=Counts(dialogues=dialogues, turns=dialogues * turns, images=1, questions=dialogues * turns, checks=0),
        shards=shards,
        images_sha256=images_digest([sha]),
    )
    (path / "manifest.json").write_text(json.dumps(manifest.model_dump(mode="json"), indent=2) + "\n")
    return path


def measure(args: list[str], cap_gb: float) -> tuple[float, float, int]:
    """`peak_rss` of one command, run through a fresh interpreter so the figure is its own."""
    code = (
        "import resource, subprocess, sys, time\n"
        f"cap = {int(cap_gb * 2**30)}\n"
        "t = time.perf_counter()\n"
        "p = subprocess.run([sys.executable, '-m', 'yanami', *sys.argv[1:]], capture_output=True, text=True,\n"
        "    preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (cap, cap)))\n"
        "s = time.perf_counter() - t\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, s, p.returncode)\n"
        "print(p.stderr[-300:], file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    kb, seconds, rc = proc.stdout.split()
    if rc != "0":
        print(f"    yanami {' '.join(args)}: exit {rc}: {proc.stderr.strip()[-300:]}")
    return int(kb) / 1024, float(seconds), int(rc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["memory", "agents", "long"])
    ap.add_argument("--sizes", default="10000,100000", help="bench sizes, comma-separated")
    ap.add_argument("--million", action="store_true", help="also 1,000,000 dialogues")
    ap.add_argument(
        "--commands",
        help="measure only these commands, comma-separated (eval first for score, "
        "report and judge; export first for import)",
    )
    ap.add_argument("--turns", type=int, default=10_000, help="turns of the long dialogue")
    ap.add_argument("--cap-gb", type=float, default=6.0, help="address-space cap of each command")
    ap.add_argument("--agents", default=",".join(AGENTS), help="reference agents of `agents`, comma-separated")
    ap.add_argument("--keep", type=Path, help="write the runs and outputs here and keep them")
    ap.add_argument("--cache", type=Path, default=CACHE, help="where the benches are kept between runs")
    a = ap.parse_args()
    work = a.keep or Path(tempfile.mkdtemp(prefix="bench-memory-"))
    sizes = [int(s) for s in a.sizes.split(",")] + ([1_000_000] if a.million else [])
    try:
        if a.only in (None, "memory"):
            bench_memory(work, a.cache, sizes, a.cap_gb, set(a.commands.split(",")) if a.commands else None)
        if a.only in (None, "agents"):
            bench_agents(work, a.cache, sizes, a.cap_gb, a.agents.split(","))
        if a.only in (None, "long"):
            bench_long(work, a.turns)
    finally:
        if a.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def _commands(bench: Path, run: Path, out: Path) -> dict[str, list[str]]:
    """Each command measured, in order (`import` reads what `export` wrote; `judge` re-judges
    the verdicts of `eval`'s run, which are removed first, so it grades every item again)."""
    return {
        "eval": ["eval", str(bench), "--model", "reference:copy-input", "--out", str(run), "--limit", "100"],
        "score": ["score", str(run)],
        "report": ["report", str(run), "--out", str(out / "report.html")],
        "judge": ["judge", str(run), "--judge", "exact"],
        "stats": ["stats", str(bench)],
        "export": ["export", str(bench), "--format", "parquet", "--out", str(out / "parquet")],
        "import": ["import", str(out / "parquet"), "--out", str(out / "imported")],
        "validate": ["validate", str(bench)],
        "audit": ["audit", str(bench)],
    }


def _forget_verdicts(run: Path) -> None:
    """Remove a run's verdicts, so `yanami judge` grades every item again."""
    with contextlib.closing(sqlite3.connect(run / "results.sqlite")) as db, db:
        db.execute("DELETE FROM verdicts")


def _shown(got: tuple[float, float, int], cap_gb: float) -> str:
    """A peak RSS, or that the command ran into the cap."""
    rss, _, rc = got
    return f"{rss:8.0f} MB" if rc == 0 or rss < cap_gb * 1024 * 0.95 else f"over {cap_gb:.0f} GB"


def bench_memory(work: Path, cache: Path, sizes: list[int], cap_gb: float, commands: set[str] | None = None) -> None:
    floor, _, _ = measure(["--version"], cap_gb)
    print(f"memory: peak RSS per command (MB); the interpreter with yanami imported: {floor:.0f} MB")
    figures: dict[str, dict[int, tuple[float, float, int]]] = {}
    for n in sizes:
        print(f"  {n:>9,} dialogues:")
        bench = cached_bench(cache, n)
        run, out = work / f"run-{n}", work / f"out-{n}"
        out.mkdir(exist_ok=True)
        for name, args in _commands(bench, run, out).items():
            if commands is not None and name not in commands:
                continue
            if name == "judge" and (run / "results.sqlite").is_file():
                _forget_verdicts(run)
            figures.setdefault(name, {})[n] = got = measure(args, cap_gb)
            _, seconds, rc = got
            print(f"    {name:<9} {_shown(got, cap_gb)}  {seconds:7.1f} s" + ("" if rc == 0 else f"  (exit {rc})"))
        shutil.rmtree(run, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
    base, top = sizes[0], sizes[-1]
    print(f"  ratio of peak RSS at {top:,} to {base:,} dialogues (target: ~1.0x):")
    for name, by in figures.items():
        print(f"    {name:<9} {by[top][0] / by[base][0]:.2f}x")


CACHE = Path(tempfile.gettempdir()) / "yanami-bench-memory"
BASELINE = "copy-input"
AGENTS = ("oracle", "stateful", "visible")
"""The reference agents `bench_agents` measures beside the `BASELINE`: the two kinds that read the
bench (the oracle, the stateful agent and its ablations alike) and the one that tracks the dialogue."""


def bench_agents(work: Path, cache: Path, sizes: list[int], cap_gb: float, agents: list[str]) -> None:
    """Peak RSS and time of `eval --limit 100` per reference agent and bench size, against the
    baseline's at the same size, measured in the same run."""
    kinds = [BASELINE, *(k for k in agents if k != BASELINE)]
    print(f"agents: `yanami eval BENCH --model reference:KIND --limit 100`, peak RSS and time; "
          f"{BASELINE} (reads nothing hidden) is the baseline")  # fmt: skip
    figures: dict[str, dict[int, tuple[float, float, int]]] = {}
    for n in sizes:
        print(f"  {n:>9,} dialogues:")
        bench = cached_bench(cache, n)
        for kind in kinds:
            run = work / f"run-{kind}-{n}"
            args = ["eval", str(bench), "--model", f"reference:{kind}", "--out", str(run), "--limit", "100"]
            figures.setdefault(kind, {})[n] = got = measure(args, cap_gb)
            shutil.rmtree(run, ignore_errors=True)
            rss, seconds, rc = got
            base = figures[BASELINE][n]
            line = f"    {kind:<11} {_shown(got, cap_gb)}  {seconds:7.1f} s"
            if kind != BASELINE:
                line += f"  {rss / base[0]:5.2f}x the baseline's RSS, {seconds / base[1]:5.2f}x its time"
            print(line + ("" if rc == 0 else f"  (exit {rc})"))
    base, top = sizes[0], sizes[-1]
    print(f"  ratios at {top:,} dialogues (target: ~1.0x): over the same agent at {base:,}; over the baseline")
    for kind, by in figures.items():
        line = f"    {kind:<11} RSS {by[top][0] / by[base][0]:.2f}x, time {by[top][1] / by[base][1]:.2f}x"
        if kind != BASELINE:
            over = figures[BASELINE][top]
            line += f"; RSS {by[top][0] / over[0]:.2f}x, time {by[top][1] / over[1]:.2f}x"
        print(line)


_LONG = """
import sys, time
from yanami.runner import _build, evaluate

class Instant:
    \"\"\"Answers at once, reading only the last message: the runner's own cost alone.\"\"\"
    name = "instant"
    generate = None
    def answer(self, request):
        return "A"

if sys.argv[3] == "instant":
    _build.load_model = lambda *a: Instant()
marks = []
tick = lambda done, total: marks.append((time.perf_counter(), done))
evaluate(sys.argv[1], "reference:copy-input", sys.argv[2], on_progress=tick)
print(" ".join(f"{t:.4f}:{d}" for t, d in marks))
"""


def bench_long(work: Path, turns: int) -> None:
    bench = write_bench(work / "long", 1, turns)
    print(f"long: one dialogue of {turns:,} turns (its image in every user turn), a question after each turn")
    for model in ("instant", "reference:copy-input"):
        run = work / f"run-long-{model.replace(':', '-')}"
        t = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", _LONG, str(bench), str(run), model], capture_output=True, text=True, check=False
        )
        seconds = time.perf_counter() - t
        shutil.rmtree(run, ignore_errors=True)
        if proc.returncode != 0:
            print(f"  {model}: failed: {proc.stderr.strip()[-500:]}")
            continue
        marks = [(float(t), int(d)) for t, d in (m.split(":") for m in proc.stdout.split())]
        total = marks[-1][1]
        quarter = max(1, total // 4)
        # the first quarter holds the run's start (its threads, the judge's and the model's first
        # use): the early rate is the second quarter's
        first, last = _rate(marks, quarter, 2 * quarter), _rate(marks, total - quarter, total)
        print(
            f"  {model:<21} {total:,} items in {seconds:.1f} s; items/s over the second quarter: {first:,.0f}, "
            f"over the last quarter: {last:,.0f}; last / early {last / first:.2f}x (target ~1.0x)"
        )
    shutil.rmtree(bench)


def _rate(marks: list[tuple[float, int]], lo: int, hi: int) -> float:
    inside = [(t, d) for t, d in marks if lo <= d <= hi]
    (t0, d0), (t1, d1) = inside[0], inside[-1]
    return (d1 - d0) / (t1 - t0) if t1 > t0 else float("inf")


if __name__ == "__main__":
    main()
