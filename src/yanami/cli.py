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
    from yanami.scoring import RunScores
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


def _bar() -> Progress:
    """A Rich progress bar on stderr (silent when stderr is not a terminal)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )


@contextmanager
def progress(label: str, total: int | None) -> Iterator[Callable[[], None]]:
    """A progress bar that counts; yields `advance`."""
    bar = _bar()
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


class HistoryOpt(StrEnum):
    gt = "gt"
    self = "self"


class LayoutOpt(StrEnum):
    yes_first = "yes-first"
    yes_front = "yes-front"
    concatenate = "concatenate"


class TableFormat(StrEnum):
    text = "text"
    md = "md"
    latex = "latex"


@contextmanager
def _eval_progress(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar set to (done, total); Ctrl-C becomes one line saying how to resume."""
    bar = _bar()
    try:
        with bar:
            task = bar.add_task(label, total=None)
            yield lambda done, total: bar.update(task, completed=done, total=total)
    except KeyboardInterrupt:
        raise UserError("interrupted: what finished is kept; the same command resumes", exit_code=130) from None


@app.command(name="eval")
def eval_(
    bench: Annotated[Path, typer.Argument(help="The bench dataset directory.")],
    model: Annotated[
        str, typer.Option(help="reference:<agent> (oracle, stateful, stateless, no-...), or a model config file.")
    ],
    out_dir: Annotated[Path, typer.Option("--out", help="The run directory (created, or resumed).")],
    history: Annotated[HistoryOpt, typer.Option(help="gt: ground-truth earlier images; self: the model's own.")] = (
        HistoryOpt.gt
    ),
    layout: Annotated[
        LayoutOpt | None,
        typer.Option(help="How images are placed in the input (default: the model config's, else yes-first)."),
    ] = None,
    judge: Annotated[str, typer.Option(help="exact (world data), or a judge config file (a VLM judge).")] = "exact",
    concurrency: Annotated[int, typer.Option(min=1, help="Items in flight at once (never changes a score).")] = 1,
    limit: Annotated[int | None, typer.Option(min=1, help="Evaluate only this many dialogues.")] = None,
    retry_errors: Annotated[bool, typer.Option(help="Re-attempt items whose prediction is an error.")] = False,
    cache: Annotated[
        Path | None, typer.Option(help="Response cache file (default RUN/cache.sqlite); share one across runs.")
    ] = None,
    workers: Annotated[
        int,
        typer.Option(min=1, help="Processes that parse images (exact judge, reference agents); never changes scores."),
    ] = 1,
) -> None:
    """Evaluate a model on a bench: target turns and DSU questions, judged, stored per item, resumable."""
    from yanami.bench import evaluate
    from yanami.scoring import load_run, run_scores

    with _eval_progress(f"evaluating {model}") as update:
        summary = evaluate(
            bench,
            model,
            out_dir,
            history=history.value,  # type: ignore[arg-type]
            layout=layout.value if layout else None,  # type: ignore[arg-type]
            judge=judge,
            concurrency=concurrency,
            limit=limit,
            retry_errors=retry_errors,
            on_progress=update,
            cache=cache,
            workers=workers,
        )
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(summary.statuses.items())) or "nothing new"
    out.print(
        f"{out_dir}: {summary.items} items, {summary.skipped} already done, {summary.written} written ({statuses})",
        markup=False,
    )
    scores = run_scores(load_run(out_dir))
    _print_scores([scores])
    if summary.first_error:
        err.print(
            f"warning: {summary.statuses.get('error', 0)} item(s) ended in error, the first: {summary.first_error} "
            "(they are not scored; --retry-errors asks again)",
            markup=False,
        )
    if scores.coverage["expected"] and not scores.coverage["valid"]:
        raise UserError(f"{out_dir}: no item of the run is valid; check the model's configuration", exit_code=1)


def _print_scores(scores: list[RunScores]) -> None:
    """The main table (Table 2's shape, plus DSU, SC, VQ and coverage) as Markdown, which reads anywhere."""
    from yanami.scoring import SCENARIOS

    header = ["Model", *SCENARIOS, "Avg.", "95 % CI", "DSU", "SC", "VQ", "valid/items"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for s in scores:
        cells = [s.scenarios[sc].scene if sc in s.scenarios else None for sc in SCENARIOS]
        cells.append(s.average["scene"])
        ci = "-" if s.interval is None else f"{s.interval[0]:.2f}-{s.interval[1]:.2f}"
        rest = [s.average["understanding"], s.average["sc"], s.average["vq"]]
        row = [s.label, *[_num(c) for c in cells], ci, *[_num(c) for c in rest]]
        row.append(f"{s.coverage['valid']}/{s.coverage['expected']}")
        lines.append("| " + " | ".join(row) + " |")
    out.print("\n".join(lines), markup=False)


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


@app.command()
def score(
    runs: Annotated[list[Path], typer.Argument(help="Run directories.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print every score as JSON.")] = False,
    format_: Annotated[TableFormat, typer.Option("--format", help="text, md or latex tables.")] = TableFormat.text,
    judge: Annotated[str | None, typer.Option(help="Use this judge's verdicts (default: each run's own).")] = None,
) -> None:
    """Scores of one or more runs: the paper's tables, analyses across runs, coverage."""
    import dataclasses

    from yanami.scoring import latex, load_run, markdown, run_scores, tables, understanding_realization_gap

    loaded = [load_run(r, judge) for r in runs]
    scores = [run_scores(r) for r in loaded]
    if as_json:
        data = {
            "runs": [{"path": str(r.path), **dataclasses.asdict(s)} for r, s in zip(loaded, scores, strict=True)],
            "gap": understanding_realization_gap([r for r in loaded if r.manifest["history"] == "gt"]),
        }
        out.print_json(json.dumps(data))
        return
    if format_ == TableFormat.text:
        _print_scores(scores)
        return
    render = markdown if format_ == TableFormat.md else latex
    for t in tables(loaded, scores):
        out.print(render(t), markup=False)


@app.command()
def report(
    runs: Annotated[list[Path], typer.Argument(help="Run directories.")],
    out_file: Annotated[Path, typer.Option("--out", help="The HTML file to write.")] = Path("report.html"),
    samples: Annotated[int, typer.Option(min=0, help="Dialogues per scenario in the per-sample viewer.")] = 4,
    format_: Annotated[
        str, typer.Option("--format", help="html (default), or md / latex for the tables alone.")
    ] = "html",
    judge: Annotated[str | None, typer.Option(help="Use this judge's verdicts (default: each run's own).")] = None,
) -> None:
    """Write a report of one or more runs: one self-contained HTML file (or the tables in md / LaTeX)."""
    from yanami.scoring import latex, load_run, markdown, run_scores, tables, write_report

    loaded = [load_run(r, judge) for r in runs]
    scores = [run_scores(r) for r in loaded]
    table_list = tables(loaded, scores)
    if format_ == "html":
        write_report(loaded, scores, table_list, out_file, samples)
    elif format_ in ("md", "latex"):
        render = markdown if format_ == "md" else latex
        tmp = out_file.with_name(f".{out_file.name}.tmp")
        tmp.write_text("\n".join(render(t) for t in table_list), encoding="utf-8")
        tmp.replace(out_file)
    else:
        raise UserError(f"--format {format_}: choose html, md or latex")
    out.print(f"{out_file}: report of {len(loaded)} run(s)", markup=False)


@app.command(name="judge")
def judge_(
    run: Annotated[Path, typer.Argument(help="A run directory.")],
    judge: Annotated[str, typer.Option(help="A judge config file (or exact).")],
    bench: Annotated[Path | None, typer.Option(help="The bench, if it moved since the run.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Items judged at once.")] = 1,
    cache: Annotated[Path | None, typer.Option(help="Response cache file (default RUN/cache.sqlite).")] = None,
) -> None:
    """Judge a run's stored predictions again with another judge, without calling the model."""
    from yanami.bench import rejudge

    with _eval_progress(f"judging {run}") as update:
        s = rejudge(run, judge, bench=bench, concurrency=concurrency, cache=cache, on_progress=update)
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(s.statuses.items())) or "nothing new"
    out.print(f"{run}: {s.items} judged items, {s.skipped} already done ({statuses})", markup=False)


@app.command()
def agreement(
    run: Annotated[Path, typer.Argument(help="A run directory.")],
    judge: Annotated[list[str], typer.Option(help="A judge name (give two to compare judges).")],
    human: Annotated[Path | None, typer.Option(help="CSV of human ratings: item,score[,check,passed].")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Judge reliability: Pearson (95 % bootstrap interval), Spearman and Cohen's kappa against humans or a judge."""
    from yanami.bench import read_rows
    from yanami.scoring._agreement import agreement as agree
    from yanami.scoring._agreement import check_verdicts, item_scores, read_human

    if not (run / "manifest.json").is_file():
        raise UserError(f"{run}: not a yanami run (no manifest.json)")
    raters = {}
    for name in judge:
        predictions, verdicts, _ = read_rows(run, name)
        if not verdicts:
            raise UserError(f"{run}: no verdicts of judge {name!r} (see `yanami judge`)")
        raters[name] = (item_scores(predictions, verdicts), check_verdicts(verdicts))
    if human is not None:
        raters["human"] = read_human(human)
    if len(raters) < 2:
        raise UserError("agreement needs two raters: two --judge, or a --judge and --human")
    names = list(raters)
    results = {
        f"{a} vs {b}": agree(raters[a][0], raters[b][0], raters[a][1], raters[b][1])
        for i, a in enumerate(names)
        for b in names[i + 1 :]
    }
    if as_json:
        out.print_json(json.dumps(results))
        return
    for pair, r in results.items():
        ci = r["pearson_95ci"]
        ci_text = "-" if ci is None else f"{ci[0]:.3f}-{ci[1]:.3f}"  # type: ignore[index]
        out.print(
            f"{pair}: {r['items']} items, Pearson {_num3(r['pearson'])} (95 % CI {ci_text}), "
            f"Spearman {_num3(r['spearman'])}; {r['checks']} checks, kappa {_num3(r['kappa'])}",
            markup=False,
        )


def _num3(v: object) -> str:
    return "-" if v is None else f"{v:.3f}"


@app.command()
def calibrate(
    bench: Annotated[Path, typer.Argument(help="A world bench.")],
    judge: Annotated[str, typer.Option(help="The judge config file to calibrate.")],
    limit: Annotated[int, typer.Option(min=1, help="Dialogues to use (round-robin over scenarios).")] = 20,
    concurrency: Annotated[int, typer.Option(min=1, help="Items judged at once.")] = 4,
    out_file: Annotated[Path | None, typer.Option("--out", help="Write the report as JSON here.")] = None,
    cache: Annotated[Path | None, typer.Option(help="Response cache file.")] = None,
) -> None:
    """Calibrate a judge on world data: its verdicts against the exact judge's, on corrupted and injected candidates."""
    from yanami.bench import select_dialogues
    from yanami.bench._run import load_judge
    from yanami.judges._calibration import calibrate as run_calibration
    from yanami.models import ResponseCache
    from yanami.store import Dataset

    dataset = Dataset(bench)
    dialogues = select_dialogues(list(dataset), limit)
    responses = ResponseCache(cache) if cache else None
    the_judge = load_judge(judge, dataset, responses)
    with progress("calibrating", None) as advance:
        result = run_calibration(the_judge, dialogues, concurrency=concurrency, on_progress=advance).summary()
    if responses:
        responses.close()
    if out_file is not None:
        tmp = out_file.with_name(f".{out_file.name}.tmp")
        tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        tmp.replace(out_file)
    for section in ("checks_by_kind", "checks_by_candidate", "answers"):
        for key, r in result[section].items():
            out.print(f"{section} {key}: {r['agree']}/{r['total']} agree ({100 * r['accuracy']:.1f} %)", markup=False)
    out.print(
        f"injection: {result['injection_flips']} of {result['injection_checks']} check verdicts flipped; "
        f"judge errors: {result['judge_errors']}",
        markup=False,
    )


DEMO_RUNS: tuple[tuple[str, str], ...] = (
    ("reference:oracle", "gt"),
    ("reference:stateful", "gt"),
    ("reference:stateless", "gt"),
    ("reference:no-constraints", "gt"),
    ("reference:no-corrections", "gt"),
    ("reference:no-coreference", "gt"),
    ("reference:no-retrieval", "gt"),
    ("reference:stateful", "self"),
)


@app.command()
def demo(
    out_dir: Annotated[Path, typer.Option("--out", help="Where the demo writes its files.")] = Path("yanami-demo"),
    per_scenario: Annotated[int, typer.Option(min=1, help="Dialogues per scenario in the bench.")] = 100,
    seed: Annotated[int, typer.Option(help="Seed of the build.")] = 42,
    workers: Annotated[int, typer.Option(min=1, help="Processes that build the bench and parse images.")] = 2,
) -> None:
    """Build the world bench, evaluate the reference agents, write the report, print the main table."""
    from yanami.scoring import load_run, markdown, run_scores, tables, write_report
    from yanami.store import Dataset, validate_dataset
    from yanami.world import build_world, parse_workers

    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / "bench"
    if not _same_build(target, per_scenario, seed):
        with progress("building the bench", 4 * per_scenario) as advance:
            build_world(
                target, per_scenario=per_scenario, seed=seed, workers=workers, overwrite=True, on_dialogue=advance
            )
        with progress("validating", 4 * per_scenario) as advance:
            problems = validate_dataset(target, on_dialogue=advance)
        if problems:
            raise UserError(f"{target}: the demo bench has {len(problems)} problem(s): {problems[0]}", exit_code=1)
    out.print(f"{target}: {4 * per_scenario} dialogues, built and validated", markup=False)
    dataset = Dataset(target)
    loaded = (dataset, list(dataset))
    paths = []
    with parse_workers(workers):  # one pool for every run, so each image is parsed once
        _demo_runs(out_dir, target, loaded, workers, paths)
    runs = [load_run(p) for p in paths]
    scores = [run_scores(r) for r in runs]
    table_list = tables(runs, scores)
    report_path = out_dir / "report.html"
    write_report(runs, scores, table_list, report_path)
    _print_scores(scores)
    for t in table_list:
        if t.key in ("table3", "table21"):
            out.print(markdown(t), markup=False)
    from yanami.scoring import irreducibility

    for label, share in irreducibility(runs, scores):
        out.print(f"Irreducibility audit: {label} fails {share:.1f} % of target turns.", markup=False)
    out.print(f"{report_path}: the full report (tables, Figure 6, per-sample viewer)", markup=False)


def _demo_runs(out_dir: Path, target: Path, loaded: object, workers: int, paths: list[Path]) -> None:
    import hashlib

    from yanami.bench import evaluate
    from yanami.store import MANIFEST

    bench_sha256 = hashlib.sha256((target / MANIFEST).read_bytes()).hexdigest()
    for spec, hist in DEMO_RUNS:
        name = spec.split(":")[1] + ("-self" if hist == "self" else "")
        run = out_dir / "runs" / name
        _drop_outdated_run(run, bench_sha256)
        with _eval_progress(f"{spec} ({hist}-history)") as update:
            evaluate(
                target,
                spec,
                run,
                history=hist,
                on_progress=update,
                loaded=loaded,
                concurrency=2 * workers,  # type: ignore[arg-type]
            )
        paths.append(run)


def _drop_outdated_run(run: Path, bench_sha256: str) -> None:
    """The demo's own run directories made by another yanami (or run format), or on another
    bench, are redone, not resumed."""
    import shutil

    from yanami.bench import RunManifest

    path = run / "manifest.json"
    if path.is_file():
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            raw = {}
        made = (raw.get("version"), raw.get("yanami_version"), raw.get("bench_sha256"))
        if made != (RunManifest.model_fields["version"].default, __version__, bench_sha256):
            shutil.rmtree(run)


def _same_build(target: Path, per_scenario: int, seed: int) -> bool:
    """Whether ``target`` already holds the bench these settings build (so a re-run resumes)."""
    from yanami.store import Dataset

    try:
        m = Dataset(target).manifest
    except UserError:
        return False
    if m.generator is None or m.generator.version != __version__:
        return False  # another yanami's world may build other dialogues from the same seed
    params = m.generator.params
    return params.get("seed") == seed and params.get("per_scenario") == per_scenario and params.get("preset") == "bench"


def main() -> None:
    """Entry point: user errors become one line on stderr and a non-zero exit, never a traceback."""
    try:
        app()
    except UserError as exc:
        err.print(f"error: {exc}", markup=False)
        sys.exit(exc.exit_code)
