"""The learned model (issue 34): the small experiment's wall time, and the score against the
number of training dialogues, on the public default bench and on a private one.

    python benchmarks/bench_learned.py                          # all: the small setting, then the sizes
    python benchmarks/bench_learned.py --only small
    python benchmarks/bench_learned.py --only sizes --sizes 150,300,600,1200 --per-scenario 15
    python benchmarks/bench_learned.py --only sizes --out /tmp/learned   # keep (and resume) the runs

  small  `yanami experiment train-vs-control` with its defaults (a 40-dialogue bench, 300
         training dialogues, 500 steps per model) on this machine's cores: the whole command's
         wall time. Target: <= 15 minutes on 2 cores.
  sizes  the same experiment for each training-set size (steps: 2 per training dialogue, at
         least 500), on the default bench's first --per-scenario dialogues per scenario (seed 42,
         public) and on a private bench of the same size (`build --private`): the checkpoints
         are trained once per size (on a training set built with --exclude of the public bench,
         checked to share no picture with the private one) and evaluated on both, GT-History;
         per size and bench, overall, DSU, CT and CU of the stateful model, the control and the
         untrained model, with 95 % bootstrap intervals. The aim (issue 34): the stateful model >= 20 points above the
         control on CT and CU and >= 10 overall, intervals apart. The figures are printed as
         they are, whatever they are.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from yanami.learned._experiment import Setting, run_experiment
from yanami.world import build_world


def small(workers: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "yanami", "experiment", "train-vs-control", "--out", f"{tmp}/exp",
               "--workers", str(workers)]  # fmt: skip
        t = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        seconds = time.perf_counter() - t
        if done.returncode != 0:
            print(done.stderr[-2000:])
            raise SystemExit(1)
        print(done.stdout.strip())
        print(f"small setting: {seconds / 60:.1f} minutes on {workers} workers   target <= 15 minutes on 2 cores")


def _fmt(row: dict[str, object], key: str) -> str:
    v, ci = row.get(key), row.get(f"{key}_ci")
    if v is None:
        return "-"
    text = f"{v:.1f}"
    if ci:
        text += f" [{ci[0]:.1f}, {ci[1]:.1f}]"  # type: ignore[index]
    return text


def sizes(out: Path, sizes: list[int], per_scenario: int, workers: int) -> None:
    public, private = out / "bench-public", out / "bench-private"
    out.mkdir(parents=True, exist_ok=True)
    if not (public / "manifest.json").is_file():
        build_world(public, per_scenario=per_scenario, seed=42, workers=workers)
    if not (private / "manifest.json").is_file():
        build_world(private, per_scenario=per_scenario, seed=None, private=True, workers=workers)
    print(f"{'bench':<8} {'train':>6} {'steps':>6}  {'model':<20} {'overall':>20} {'DSU':>6} {'CT':>18} {'CU':>18}")
    for n in sizes:
        steps = max(500, 2 * n)
        where = out / f"size-{n}"
        setting = Setting(train_dialogues=n, steps=steps, workers=workers)
        t = time.perf_counter()
        for name, bench, tag in (("public", public, ""), ("private", private, "private")):
            figures = run_experiment(where, setting, bench, tag=tag, self_history=False)
            for row in figures["rows"]:
                print(f"{name:<8} {n:>6} {steps:>6}  {row['label'][:20]:<20} {_fmt(row, 'overall'):>20} "
                      f"{_fmt(row, 'dsu'):>6} {_fmt(row, 'CT'):>18} {_fmt(row, 'CU'):>18}", flush=True)  # fmt: skip
        print(f"  ({(time.perf_counter() - t) / 60:.1f} minutes; {where}/report.html, report-private.html)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["small", "sizes"])
    ap.add_argument("--sizes", default="150,300,600,1200", help="training dialogues, comma-separated")
    ap.add_argument("--per-scenario", type=int, default=15, help="the benches' dialogues per scenario")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", type=Path, help="keep the runs here (default: a temporary directory)")
    args = ap.parse_args()
    if args.only in (None, "small"):
        small(args.workers)
    if args.only in (None, "sizes"):
        counts = [int(x) for x in args.sizes.split(",")]
        if args.out is not None:
            sizes(args.out, counts, args.per_scenario, args.workers)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                sizes(Path(tmp), counts, args.per_scenario, args.workers)


if __name__ == "__main__":
    main()
