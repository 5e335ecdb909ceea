"""``yanami demo``: the whole pipeline on the embedded world, end to end, in one call.

Build the world bench (or keep the one already there, if this yanami built it with these
settings), validate it, evaluate the reference agents on it (the trivial floor, the
stateless agent, the stateful agent and its four ablations, the oracle; the stateful agent
under Self-History too), write the HTML report, and return the loaded runs for the caller
to print. Every step resumes: a second call redoes only what is missing or out of date.
A picture that the bench or an earlier run holds already is stored once (`share_pictures`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from yanami import __version__
from yanami.contract import OUTPUTS, RUN_VERSION, History, UserError, read_manifest
from yanami.runner import evaluate
from yanami.scoring import Loaded, load_runs, tables, write_report
from yanami.store import Dataset, bench_sha256, validate_dataset
from yanami.world import Parser, build_world

FLOORS = (
    "reference:copy-input",
    "reference:copy-first",
    "reference:copy-previous",
    "reference:jitter-input",
    "reference:jitter-first",
    "reference:jitter-previous",
    "reference:union",
    "reference:collage",
    "reference:blank",
    "reference:noise",
    "reference:random",
)
"""The trivial strategies: each reads nothing but its request, and none may reach the stateless agent."""
DEMO_RUNS: tuple[tuple[str, History], ...] = (
    *((floor, History.GT) for floor in FLOORS),
    ("reference:stateless", History.GT),
    ("reference:no-constraints", History.GT),
    ("reference:no-corrections", History.GT),
    ("reference:no-coreference", History.GT),
    ("reference:no-retrieval", History.GT),
    ("reference:stateful", History.GT),
    ("reference:oracle", History.GT),
    ("reference:stateful", History.SELF),
)
"""(model, history) of every demo run, in the order of the tables: floor first."""
RUN_ORDER = (
    DEMO_RUNS.index(("reference:oracle", "gt")),
    *(k for k, run in enumerate(DEMO_RUNS) if run != ("reference:oracle", "gt")),
)
"""The order the runs are made in (indexes into `DEMO_RUNS`): the oracle first, so the ground-truth
images are parsed once and every later run that shows or copies them finds them parsed."""

Counter = Callable[[str, int | None], AbstractContextManager[Callable[[], None]]]
"""(label, total) -> a context that yields ``advance()``: a progress display that counts."""
Tracker = Callable[[str], AbstractContextManager[Callable[[int, int], None]]]
"""label -> a context that yields ``update(done, total)``."""


@dataclass
class Demo:
    """What a demo produced."""

    bench: Path
    dialogues: int
    built: bool
    """Whether this call built the bench (False: the one there was kept)."""
    loaded: Loaded
    report: Path
    size: int = 0
    """Bytes the demo's directory (the report's) takes on disk, each file once however many runs hold it."""

    def lines(self) -> list[str]:
        """What ``yanami demo`` prints: the bench, the main table, Tables 3, SC effects and 21,
        the irreducibility audit and where the report is."""
        from yanami.scoring import irreducibility, markdown, summary_table, tables

        how = "built and validated" if self.built else "already built by this yanami (kept)"
        runs, scores = self.loaded.runs, self.loaded.scores
        out = [f"{self.bench}: {self.dialogues} dialogues, {how}"]
        out.append(markdown(summary_table(scores), escaped=False).rstrip("\n"))  # for a terminal
        # Table 21 is over the runs `gap_selection` chooses, the same as the report's Table 21 and
        # Figure 6 (a); its notes say which runs, and which were left out and why.
        shown = [t for t in tables(runs, scores) if t.key in ("table3", "sc_effects", "table21")]
        out += ["\n" + markdown(t, escaped=False) for t in shown]
        out += [
            f"Irreducibility audit: {label} fails {share:.1f} % of target turns."
            for label, share in irreducibility(runs, scores)
        ]
        out.append(f"{self.report}: the full report (tables, Figure 6, per-sample viewer)")
        out.append(f"demo: {self.size / 1e6:.0f} MB on disk in {self.report.parent}")
        return out


@contextlib.contextmanager
def _silent_count(label: str, total: int | None) -> Iterator[Callable[[], None]]:
    yield lambda: None


@contextlib.contextmanager
def _silent_track(label: str) -> Iterator[Callable[[int, int], None]]:
    yield lambda done, total: None


def run_demo(
    out_dir: Path,
    *,
    per_scenario: int = 100,
    seed: int = 42,
    workers: int = 2,
    count: Counter = _silent_count,
    track: Tracker = _silent_track,
) -> Demo:
    """Build, validate, evaluate the reference agents and write ``out_dir/report.html``."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"{out_dir}: exists and is not a directory")
    if not out_dir.parent.is_dir():
        raise UserError(f"{out_dir.parent}: no such directory (yanami creates --out, not the folders above it)")
    out_dir.mkdir(exist_ok=True)
    target = out_dir / "bench"
    built = not _same_build(target, per_scenario, seed)
    if built:
        try:
            with count("building the bench", 4 * per_scenario) as advance:
                build_world(
                    target, per_scenario=per_scenario, seed=seed, workers=workers, overwrite=True, on_dialogue=advance
                )
        except (KeyboardInterrupt, UserError) as exc:
            if isinstance(exc, UserError) and exc.exit_code != 130:
                raise
            raise UserError(
                "interrupted while building the bench, which is written whole (about a minute): the same "
                "command builds it again, then evaluates",
                exit_code=130,
            ) from None
        with count("validating", 4 * per_scenario) as advance:
            problems = validate_dataset(target, on_dialogue=advance)
        if problems:
            raise UserError(f"{target}: the demo bench has {len(problems)} problem(s): {problems[0]}", exit_code=1)
    dataset = Dataset(target)
    loaded = (dataset, dataset.read_all())
    identity = bench_sha256(dataset)
    paths = [
        out_dir / "runs" / (spec.split(":")[1] + ("-self" if history == "self" else "")) for spec, history in DEMO_RUNS
    ]
    stored = _bench_pictures(target)
    with Parser(workers) as parser:  # one pool for every run, so each image is parsed once
        for k in RUN_ORDER:
            (spec, history), run = DEMO_RUNS[k], paths[k]
            _drop_outdated_run(run, identity)
            with track(f"{spec} ({history}-history)") as update:
                evaluate(target, spec, run, history=history, on_progress=update, loaded=loaded, parser=parser,
                         concurrency=2 * workers)  # fmt: skip
            share_pictures(run, stored)
    result = load_runs(paths)
    report = out_dir / "report.html"
    write_report(result.runs, result.scores, tables(result.runs, result.scores), report)
    return Demo(target, len(dataset), built, result, report, disk_usage(out_dir))


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _bench_pictures(bench: Path) -> dict[str, Path]:
    """The bench's picture files by SHA-256 (their names)."""
    return {p.stem: p for p in sorted((bench / "images").glob("??/*")) if _SHA256.fullmatch(p.stem) and p.is_file()}


def share_pictures(run: Path, stored: dict[str, Path]) -> int:
    """Hard-link each output picture of ``run`` whose bytes a file in ``stored`` (SHA-256 -> file)
    holds already to that file, and add the others to ``stored``; returns how many were linked.

    Copies return the bench's pictures, the oracle and the stateful agents mostly the bench's
    too, the jittered copies the same picture for the same input: stored once, the demo's
    runs take about a sixth of the room. Pictures are never written in place (a new one is
    written beside and renamed), so a file shared this way never changes under another run. On a
    file system without hard links every copy stays.
    """
    linked = 0
    for path in sorted((run / OUTPUTS).glob("??/*")):
        if not _SHA256.fullmatch(path.name):
            continue  # a temporary file a killed run left
        first = stored.setdefault(path.name, path)
        if first == path:
            continue
        try:
            a, b = first.stat(), path.stat()
            if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
                continue  # linked by an earlier demo
            if a.st_size != b.st_size or first.read_bytes() != path.read_bytes():
                continue  # not the same picture after all: both stay
            spare = path.with_name(f"{path.name}.{os.getpid()}.link")
            os.link(first, spare)
            os.replace(spare, path)
            linked += 1
        except OSError:
            continue
    return linked


def disk_usage(root: Path) -> int:
    """Bytes the files and folders under ``root`` take on disk, each file once however many links it has (as ``du``)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for folder, _, files in os.walk(root):
        for path in (folder, *(os.path.join(folder, f) for f in files)):
            st = os.lstat(path)
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512 if hasattr(st, "st_blocks") else st.st_size
    return total


def _drop_outdated_run(run: Path, identity: str) -> None:
    """A demo run made by another yanami (or run format), or on another bench, is redone, not resumed."""
    if not run.exists():
        return
    try:
        m = read_manifest(run)
        current = (m.version, m.yanami_version, m.bench_sha256) == (RUN_VERSION, __version__, identity)
    except UserError:
        current = False
    if not current:
        shutil.rmtree(run)


def _same_build(target: Path, per_scenario: int, seed: int) -> bool:
    """Whether ``target`` already holds the bench these settings build (so a re-run resumes)."""
    try:
        m = Dataset(target).manifest
    except UserError:
        return False
    if m.generator is None or m.generator.version != __version__:
        return False  # another yanami's world may build other dialogues from the same seed
    params = m.generator.params
    return params.get("seed") == seed and params.get("per_scenario") == per_scenario and params.get("preset") == "bench"
