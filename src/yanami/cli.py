"""The ``yanami`` command line."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from yanami import __version__
from yanami.errors import UserError

if TYPE_CHECKING:
    from yanami.store import DatasetStats

T = TypeVar("T")

app = typer.Typer(
    name="yanami",
    help="Build, verify, evaluate and report stateful multi-turn multimodal dialogue benchmarks.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

MAX_PROBLEMS_SHOWN = 50


@contextmanager
def progress(label: str, total: int | None) -> Iterator[Callable[[], None]]:
    """A Rich progress bar on stderr (silent when stderr is not a terminal); yields `advance`."""
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    with bar:
        task = bar.add_task(label, total=total)
        yield lambda: bar.advance(task)


def _version(value: bool) -> None:
    if value:
        out.print(f"yanami {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Build, verify, evaluate and report stateful multi-turn multimodal dialogue benchmarks."""


class SchemaOf(StrEnum):
    dialogue = "dialogue"
    manifest = "manifest"


@app.command()
def schema(
    of: Annotated[SchemaOf, typer.Option("--of", help="Which document to describe.")] = SchemaOf.dialogue,
) -> None:
    """Print the JSON Schema of a dialogue line or of the manifest."""
    from yanami.schema import Dialogue
    from yanami.store import Manifest

    model = Dialogue if of is SchemaOf.dialogue else Manifest
    out.print_json(json.dumps(model.model_json_schema()), indent=2)


@app.command()
def validate(
    directory: Annotated[Path, typer.Argument(help="The dataset directory.")],
    max_pixels: Annotated[int, typer.Option(help="Refuse images with more pixels than this.")] = 40_000_000,
) -> None:
    """Check a dataset directory and list every problem.

    Each problem is one line, path:line: field: message (the first 50, then a count).
    Exit 0 if the dataset is valid, 1 if it has problems, 2 if DIRECTORY is no dataset.
    """
    from yanami.store import Dataset, validate_dataset
    from yanami.store._reader import open_dataset_dir

    _, raw, _ = open_dataset_dir(directory)
    total = raw.get("counts", {}).get("dialogues") if isinstance(raw, dict) else None
    with progress("dialogues", total if isinstance(total, int) else None) as advance:
        problems = validate_dataset(directory, max_pixels=max_pixels, on_dialogue=advance)
    if problems:
        for p in problems[:MAX_PROBLEMS_SHOWN]:
            out.print(str(p), markup=False)
        if len(problems) > MAX_PROBLEMS_SHOWN:
            out.print(f"… and {len(problems) - MAX_PROBLEMS_SHOWN} more problems", markup=False)
        err.print(f"{directory}: {len(problems)} problem(s)", markup=False)
        raise typer.Exit(1)
    ds = Dataset(directory, max_pixels=max_pixels)
    c = ds.manifest.counts
    out.print(f"{directory}: valid ({c.dialogues} dialogues, {c.turns} turns, {c.images} images)", markup=False)


@app.command()
def stats(
    directory: Annotated[Path, typer.Argument(help="The dataset directory.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Print dataset statistics (the paper's Tables 7 and 8)."""
    from yanami.store import Dataset, dataset_stats

    ds = Dataset(directory)
    with progress("dialogues", len(ds)) as advance:
        s = dataset_stats(_counting(ds, advance))
    if as_json:
        out.print(s.model_dump_json(indent=2), markup=False)
        return
    _print_stats(s, str(directory))


def _counting(items: Iterable[T], advance: Callable[[], None]) -> Iterator[T]:
    for item in items:
        advance()
        yield item


def _print_stats(s: DatasetStats, title: str) -> None:
    t = Table(title=f"{title}: corpus and sequence statistics", title_justify="left")
    t.add_column("Statistic")
    t.add_column("Value", justify="right")
    for label, value in [
        ("Total dialogues", f"{s.dialogues:,}"),
        ("Total images", f"{s.images:,}"),
        ("Total dialogue turns", f"{s.turns:,}"),
        ("Total user messages", f"{s.user_messages:,}"),
        ("Total assistant messages", f"{s.assistant_messages:,}"),
        ("Total messages", f"{s.messages:,}"),
        ("Average images / dialogue", f"{s.images_per_dialogue:.2f}"),
        ("Average turns / dialogue", f"{s.turns_per_dialogue:.2f}"),
        ("Average messages / dialogue", f"{s.messages_per_dialogue:.2f}"),
        ("Maximum turns / dialogue", f"{s.max_turns}"),
        ("Maximum messages / dialogue", f"{s.max_messages}"),
        ("Images / dialogue turn", f"{s.images_per_turn:.2f}"),
        ("Dialogues with >= 4 capabilities", f"{s.dialogues_with_4_capabilities:,}"),
        ("Capability coverage", f"{100 * s.capability_coverage:.0f}%"),
        ("Target turns", f"{s.target_turns:,}"),
        ("Atomic checks", f"{s.atomic_checks:,}"),
        ("Atomic checks / dialogue", f"{s.atomic_checks_per_dialogue:.2f}"),
        ("Capability-specific checks", f"{s.capability_checks:,}"),
    ]:
        t.add_row(label, value)
    out.print(t)

    t = Table(title="Images per dialogue", title_justify="left")
    for col in ("Images", "Dialogues", "Share"):
        t.add_column(col, justify="right")
    for bucket, n in s.images_per_dialogue_distribution.items():
        t.add_row(bucket, f"{n:,}", f"{100 * s.images_per_dialogue_shares[bucket]:.2f}%")
    out.print(t)

    t = Table(title="By scenario (atomic checks exclude capability-specific ones)", title_justify="left")
    t.add_column("Scenario", no_wrap=True)
    for col in ("Dialogues", "Share", "Images", "Turns", "QAs", "Checks", "Avg."):
        t.add_column(col, justify="right", no_wrap=True)
    for name, row in s.by_scenario.items():
        t.add_row(
            name,
            f"{row.dialogues:,}",
            f"{100 * row.share:.1f}%",
            f"{row.images:,}",
            f"{row.turns:,}",
            f"{row.questions:,}",
            f"{row.atomic_checks:,}",
            f"{row.atomic_checks_per_dialogue:.2f}",
        )
    t.add_row(
        "total",
        f"{s.dialogues:,}",
        "100.0%" if s.dialogues else "0.0%",
        f"{s.images:,}",
        f"{s.turns:,}",
        f"{sum(s.questions.values()):,}",
        f"{s.atomic_checks:,}",
        f"{s.atomic_checks_per_dialogue:.2f}",
    )
    out.print(t)

    t = Table(title="Capabilities and questions", title_justify="left")
    t.add_column("Capability")
    t.add_column("Dialogues", justify="right")
    t.add_column("Question type")
    t.add_column("Questions", justify="right")
    caps = list(s.capability_dialogues.items())
    qs = list(s.questions.items())
    for i in range(max(len(caps), len(qs))):
        c = caps[i] if i < len(caps) else ("", "")
        q = qs[i] if i < len(qs) else ("", "")
        t.add_row(c[0], f"{c[1]:,}" if c[1] != "" else "", q[0], f"{q[1]:,}" if q[1] != "" else "")
    out.print(t)


class ExportFormat(StrEnum):
    parquet = "parquet"


@app.command()
def export(
    directory: Annotated[Path, typer.Argument(help="The dataset directory.")],
    out_dir: Annotated[Path, typer.Option("--out", help="Directory to write the export into.")],
    fmt: Annotated[ExportFormat, typer.Option("--format", help="Output format.")] = ExportFormat.parquet,
    overwrite: Annotated[bool, typer.Option(help="Replace an earlier export at --out.")] = False,
) -> None:
    """Export a dataset as Parquet for Hugging Face datasets."""
    from yanami.store import Dataset, export_parquet

    n = len(Dataset(directory))
    with progress("exporting", n) as advance:
        files = export_parquet(directory, out_dir, overwrite=overwrite, on_dialogue=advance)
    out.print(f"{out_dir}: {n} dialogues in {len(files)} {fmt.value} file(s)", markup=False)


@app.command(name="import")
def import_(
    source: Annotated[Path, typer.Argument(help="A Parquet export (directory or file).")],
    out_dir: Annotated[Path, typer.Option("--out", help="The dataset directory to create.")],
    overwrite: Annotated[bool, typer.Option(help="Replace an existing dataset at --out.")] = False,
) -> None:
    """Turn a Parquet export back into a dataset directory."""
    from yanami.store import Dataset, import_parquet

    with progress("importing", None) as advance:
        import_parquet(source, out_dir, overwrite=overwrite, on_dialogue=advance)
    c = Dataset(out_dir).manifest.counts
    out.print(f"{out_dir}: {c.dialogues} dialogues, {c.images} images", markup=False)


@app.command()
def leakage(
    train: Annotated[Path, typer.Argument(help="The training dataset directory.")],
    bench: Annotated[Path, typer.Argument(help="The benchmark dataset directory.")],
    threshold: Annotated[
        int, typer.Option(min=0, max=64, help="Perceptual-hash Hamming distance that counts as near.")
    ] = 8,
    workers: Annotated[int, typer.Option(min=1, help="Processes for perceptual hashing.")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Find images shared by a train set and a bench.

    Exact copies (same SHA-256) are listed and make the exit status 1; near-duplicates
    (perceptual hashes within --threshold bits) are listed for review without failing.
    """
    from yanami.store import find_leakage

    with progress("hashing images", None) as advance:
        report = find_leakage(train, bench, threshold=threshold, workers=workers, on_image=advance)
    if as_json:
        payload = {
            "exact": report.exact,
            "near": [{"bench": n.bench, "train": n.train, "distance": n.distance} for n in report.near],
            "bench_images": report.bench_images,
            "train_images": report.train_images,
            "unreadable": report.unreadable,
        }
        out.print(json.dumps(payload, indent=2), markup=False)
    else:
        for rel in report.exact:
            out.print(f"exact {rel} (in both {train} and {bench})", markup=False)
        for n in report.near[:MAX_PROBLEMS_SHOWN]:  # closest first; --json lists them all
            out.print(f"near  {bench}/{n.bench} ~ {train}/{n.train} (distance {n.distance})", markup=False)
        if len(report.near) > MAX_PROBLEMS_SHOWN:
            out.print(
                f"… and {len(report.near) - MAX_PROBLEMS_SHOWN} more near-duplicate pairs (--json lists all)",
                markup=False,
            )
        for rel in report.unreadable:
            err.print(f"unreadable {rel} (skipped for near-duplicates; run yanami validate)", markup=False)
        err.print(
            f"{len(report.exact)} exact, {len(report.near)} near-duplicate (<= {threshold}) among "
            f"{report.bench_images} bench and {report.train_images} train images",
            markup=False,
        )
    if report.exact:
        raise typer.Exit(1)


@app.command()
def build(
    out_dir: Annotated[Path, typer.Option("--out", help="The dataset directory to create.")],
    preset: Annotated[
        str, typer.Option(help="bench (100 per scenario), train (10,000 in the paper's mix) or tiny.")
    ] = "bench",
    per_scenario: Annotated[int | None, typer.Option(min=1, help="Dialogues per scenario.")] = None,
    dialogues: Annotated[int | None, typer.Option(min=1, help="Dialogues in all, in the training mix.")] = None,
    scenarios: Annotated[
        str, typer.Option(help="Comma-separated: fusion, editing, world_modeling, reasoning.")
    ] = "fusion,editing,world_modeling,reasoning",
    seed: Annotated[int, typer.Option(help="Seed; the same seed gives a byte-identical dataset.")] = 42,
    workers: Annotated[int, typer.Option(min=1, help="Processes that build dialogues.")] = 1,
    exclude: Annotated[Path | None, typer.Option(help="A training set whose images the build must not reuse.")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing dataset at --out.")] = False,
) -> None:
    """Build a dataset of world dialogues (offline, exact by construction)."""
    from yanami.schema import Scenario
    from yanami.world import build_world, plan

    if per_scenario is not None and dialogues is not None:
        raise UserError("--per-scenario and --dialogues: give one or the other")
    try:
        chosen = [Scenario(s.strip()) for s in scenarios.split(",") if s.strip()]
    except ValueError as exc:
        raise UserError(f"--scenarios: {exc}") from None
    total = len(plan(preset, per_scenario, dialogues, chosen)) if preset in ("bench", "train", "tiny") else None
    with progress("building", total) as advance:
        m = build_world(
            out_dir,
            preset=preset,
            per_scenario=per_scenario,
            dialogues=dialogues,
            scenarios=chosen,
            seed=seed,
            workers=workers,
            exclude=exclude,
            overwrite=overwrite,
            on_dialogue=advance,
        )
    c = m.counts
    out.print(
        f"{out_dir}: {c.dialogues} dialogues, {c.turns} turns, {c.images} images, {c.checks} checks", markup=False
    )


@app.command()
def demo(
    out_dir: Annotated[Path, typer.Option("--out", help="Where the demo writes its files.")] = Path("yanami-demo"),
    dialogues: Annotated[int, typer.Option(min=4, help="Dialogues to build (split evenly over the scenarios).")] = 40,
    seed: Annotated[int, typer.Option(help="Seed of the build.")] = 42,
) -> None:
    """Build a small world bench, validate it, print its statistics."""
    from yanami.store import Dataset, dataset_stats, validate_dataset
    from yanami.world import build_world

    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / "bench"
    per = max(1, dialogues // 4)
    with progress("building", 4 * per) as advance:
        build_world(target, per_scenario=per, seed=seed, overwrite=True, on_dialogue=advance)
    with progress("validating", 4 * per) as advance:
        problems = validate_dataset(target, on_dialogue=advance)
    if problems:
        raise UserError(f"{target}: the demo dataset has {len(problems)} problem(s): {problems[0]}", exit_code=1)
    out.print(f"{target}: built and validated", markup=False)
    _print_stats(dataset_stats(Dataset(target)), str(target))


def main() -> None:
    """Entry point: user errors become one line on stderr and a non-zero exit, never a traceback."""
    try:
        app()
    except UserError as exc:
        err.print(f"error: {exc}", markup=False)
        sys.exit(exc.exit_code)
