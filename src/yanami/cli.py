"""The ``yanami`` command line."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from yanami import __version__
from yanami.contract import History, Layout, Preset, Scenario, UserError, describe_presets, parse_scenarios, printable
from yanami.review import review_app  # light: its commands load the web stack when they run

T = TypeVar("T")


def _plain_arguments() -> None:
    """Arguments in help as click writes them: ``RUN...`` in the usage line and ``RUN`` in the
    list, not typer's ``{RUN}`` and ``RUN <list[Path]>`` (the help text says what each one is)."""
    from typer.core import TyperArgument

    def usage(self: TyperArgument) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")

    if hasattr(TyperArgument, "_usage_display_name") and hasattr(TyperArgument, "display_type_rich"):
        TyperArgument._usage_display_name = usage  # type: ignore[method-assign]
        TyperArgument.display_type_rich = lambda self, ctx: None  # type: ignore[method-assign,assignment]


_plain_arguments()

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


PROGRESS_EVERY_S = 5.0
"""Off a terminal (a log, a pipe), a plain line of progress on stderr at most this often."""
_clock: Callable[[], float] = time.monotonic
"""The progress lines' clock (tests replace it)."""


class _Lines:
    """Progress as plain lines on stderr, for when it is not a terminal and a bar cannot show.

    Nothing is printed until `PROGRESS_EVERY_S` has passed (a quick command stays quiet);
    then a line (label, done/total, rate) at most that often, and a last one at the end.
    The rate counts what this call did (a resumed run starts past its finished items).
    """

    def __init__(self, label: str, total: int | None, base: int | None = None) -> None:
        self.label, self.total = label, total
        self.start = self.last = _clock()
        self.done = 0
        self.base = base
        """Where this call started counting (None: at the first update)."""
        self.shown: int | None = None

    def update(self, done: int, total: int | None) -> None:
        if self.base is None:
            self.base = done
        self.done, self.total = done, total
        now = _clock()
        if now - self.last >= PROGRESS_EVERY_S:
            self.last = now
            self._line(now)

    def finish(self) -> None:
        if self.shown is not None and self.shown != self.done:
            self._line(_clock())

    def _line(self, now: float) -> None:
        elapsed = now - self.start
        new = self.done - (self.base or 0)
        rate = f"{new / elapsed:.1f}/s" if elapsed > 0 else "-/s"
        count = f"{self.done}" if self.total is None else f"{self.done}/{self.total}"
        if self.total:
            count += f" ({100 * self.done / self.total:.0f} %)"
        err.print(f"{self.label}: {count}, {rate}, {elapsed:.0f} s", markup=False)
        self.shown = self.done


def _bar() -> Progress:
    """A Rich progress bar on stderr (silent when stderr is not a terminal: see `_Lines`)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )


RESUMES = "interrupted: what finished is kept; the same command resumes"
STARTS_AGAIN = "interrupted: nothing was written (it is written whole when it is done); the same command starts again"


@contextmanager
def progress(label: str, total: int | None) -> Iterator[Callable[[], None]]:
    """A progress bar that counts (plain lines off a terminal); yields `advance`. Ctrl-C becomes
    one line: what such a command makes is written whole at its end, so nothing was written."""
    try:
        if not err.is_terminal:
            lines = _Lines(label, total, base=0)
            count = 0

            def advance() -> None:
                nonlocal count
                count += 1
                lines.update(count, total)

            yield advance
            lines.finish()
            return
        bar = _bar()
        with bar:
            task = bar.add_task(label, total=total)
            yield lambda: bar.advance(task)
    except KeyboardInterrupt:
        raise UserError(STARTS_AGAIN, exit_code=130) from None


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


class Backend(StrEnum):
    local = "local"
    ray = "ray"


BackendOpt = Annotated[
    Backend,
    typer.Option(help="Where the work runs: this machine's processes, or Ray Data (the ray extra; docs/scale.md)."),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="The Ray cluster to join (HOST:6379 or ray://HOST:10001); without it --backend ray starts one here.",
        metavar="ADDR",
    ),
]


class SchemaOf(StrEnum):
    dialogue = "dialogue"
    manifest = "manifest"
    plan = "plan"


@app.command()
def schema(
    of: Annotated[SchemaOf, typer.Option("--of", help="Which document to describe.")] = SchemaOf.dialogue,
) -> None:
    """Print the JSON Schema of a dialogue line, of the manifest or of an author's plan (construct)."""
    from yanami.construct import plan_schema
    from yanami.contract import Dialogue
    from yanami.store import Manifest

    schemas = {SchemaOf.dialogue: Dialogue.model_json_schema, SchemaOf.manifest: Manifest.model_json_schema,
               SchemaOf.plan: plan_schema}  # fmt: skip
    out.print_json(json.dumps(schemas[of]()), indent=2)


@app.command()
def validate(
    directory: Annotated[Path, typer.Argument(help="The dataset directory.", metavar="DIR")],
    max_pixels: Annotated[
        int, typer.Option(help="Refuse images with more pixels than this.", metavar="N")
    ] = 40_000_000,
    deep: Annotated[
        bool,
        typer.Option(
            "--deep",
            help="Also parse every picture of a world bench and compare it with the scene its turn's hidden state "
            "says it shows.",
        ),
    ] = False,
    workers: Annotated[
        int, typer.Option(min=1, help="Processes that parse pictures (--deep); never changes a result.", metavar="N")
    ] = 1,
) -> None:
    """Check a dataset directory and list every problem.

    Each problem is one line, path:line: field: message (the first 50, then a count).
    --deep also re-parses every picture of a world bench against its turn's hidden state, a
    problem line for each that differs (a picture changed and re-hashed consistently passes
    the plain check). Exit 0 if the dataset is valid, 1 if it has problems, 2 if DIR is no dataset.
    """
    from yanami.store import Dataset, Problem, open_dataset_dir, validate_dataset

    _, raw, _ = open_dataset_dir(directory)
    counts = raw.get("counts") if isinstance(raw, dict) else None
    total = counts.get("dialogues") if isinstance(counts, dict) else None
    with progress("dialogues", total if isinstance(total, int) else None) as advance:
        problems = validate_dataset(directory, max_pixels=max_pixels, on_dialogue=advance)
    reparsed = None
    if deep and problems:
        err.print("--deep: the pictures were not re-parsed (the dataset has the problems below)", markup=False)
    elif deep:
        from yanami.world import Parser, reparse_bench

        with Parser(workers) as parser, progress("re-parsing pictures", None) as advance:
            reparsed = reparse_bench(Dataset(directory, max_pixels=max_pixels), parser, on_image=advance)
        problems = [Problem(d.shard, d.line, d.field, d.message) for d in reparsed.disagreements]
    if problems:
        for p in problems[:MAX_PROBLEMS_SHOWN]:
            out.print(str(p), markup=False)
        if len(problems) > MAX_PROBLEMS_SHOWN:
            out.print(f"… and {len(problems) - MAX_PROBLEMS_SHOWN} more problems", markup=False)
        err.print(f"{directory}: {len(problems)} problem(s)", markup=False)
        raise typer.Exit(1)
    from yanami.judges import supported_judges

    ds = Dataset(directory, max_pixels=max_pixels)
    c = ds.manifest.counts
    out.print(f"{directory}: valid ({c.dialogues} dialogues, {c.turns} turns, {c.images} images)", markup=False)
    if reparsed is not None and reparsed.world:
        out.print(f"--deep: {reparsed.pictures} pictures re-parsed, each shows its hidden state", markup=False)
    elif reparsed is not None:
        out.print("--deep: nothing to re-parse (no dialogue made by the world holds a scene its pictures show)",
                  markup=False)  # fmt: skip
    judges = supported_judges(ds)
    out.print(f"judges: {judges}", markup=False)


@app.command()
def stats(
    directory: Annotated[Path, typer.Argument(help="The dataset directory.", metavar="DIR")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Print dataset statistics (the paper's Tables 7 and 8)."""
    from yanami.store import Dataset, dataset_stats, stats_tables

    ds = Dataset(directory)
    with progress("dialogues", len(ds)) as advance:
        s = dataset_stats(_counting(ds, advance))
    if as_json:
        out.print(s.model_dump_json(indent=2), markup=False)
        return
    out.print(f"{directory}:", markup=False)
    for table in stats_tables(s):
        out.print(table)


def _counting(items: Iterable[T], advance: Callable[[], None]) -> Iterator[T]:
    for item in items:
        advance()
        yield item


class ExportFormat(StrEnum):
    parquet = "parquet"
    llava = "llava"
    bagel = "bagel"
    webdataset = "webdataset"


@app.command()
def export(
    directory: Annotated[Path, typer.Argument(help="The dataset directory.", metavar="DIR")],
    out_dir: Annotated[Path, typer.Option("--out", help="Directory to write the export into.", metavar="DIR")],
    fmt: Annotated[ExportFormat, typer.Option("--format", help="Output format.")] = ExportFormat.parquet,
    overwrite: Annotated[bool, typer.Option(help="Replace an earlier export at --out.")] = False,
    bagel_root: Annotated[
        str | None,
        typer.Option(
            "--bagel-root",
            help="bagel: the path the export will have where BAGEL trains (default: --out's absolute path); "
            "BAGEL's dataset_info and parquet_info name files under it.",
            metavar="PATH",
        ),
    ] = None,
) -> None:
    """Export a dataset: Parquet for Hugging Face datasets (lossless, `yanami import` reads it back),
    LLaVA conversation JSON, BAGEL's unified_edit and vlm_sft layouts, or WebDataset tar shards
    (lossless). Each export's README.md says what its format cannot carry and where that went."""
    from yanami.store import Dataset, export_bagel, export_llava, export_parquet, export_webdataset

    if bagel_root is not None and fmt is not ExportFormat.bagel:
        raise UserError(f"--bagel-root: only for --format bagel, not {fmt.value}")
    n = len(Dataset(directory))
    with progress("exporting", n) as advance:
        if fmt is ExportFormat.parquet:
            files = export_parquet(directory, out_dir, overwrite=overwrite, on_dialogue=advance)
        elif fmt is ExportFormat.llava:
            export_llava(directory, out_dir, overwrite=overwrite, on_dialogue=advance)
        elif fmt is ExportFormat.bagel:
            export_bagel(directory, out_dir, overwrite=overwrite, root=bagel_root, on_dialogue=advance)
        else:
            export_webdataset(directory, out_dir, overwrite=overwrite, on_dialogue=advance)
    if fmt is ExportFormat.parquet:
        out.print(f"{out_dir}: {n} dialogues in {len(files)} {fmt.value} file(s)", markup=False)
    else:
        out.print(
            f"{out_dir}: {n} dialogues as {fmt.value}; what it cannot carry and where that went: "
            f"{out_dir / 'README.md'}",
            markup=False,
        )


@app.command(name="import")
def import_(
    kind_or_source: Annotated[
        str,
        typer.Argument(
            help="parquet, or a family with an importer: weave, imug or a plug-in's (or, alone, a Parquet export).",
            metavar="[KIND]",
        ),
    ],
    out_dir: Annotated[Path, typer.Option("--out", help="The dataset directory to create.", metavar="DIR")],
    source: Annotated[
        Path | None, typer.Argument(help="The source: a folder or file in KIND's layout.", metavar="SOURCE")
    ] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing dataset at --out.")] = False,
    copy: Annotated[
        bool,
        typer.Option(
            "--copy",
            help="weave, imug: copy image files; by default the dataset hard-links them where SRC and "
            "--out share a file system (no bytes copied; editing a source picture in place would then "
            "change the dataset's too, which yanami validate reports).",
        ),
    ] = False,
) -> None:
    """Make a dataset directory from a Parquet export, WEAVE's test.json or IMUG-Bench's data folder.

    yanami import weave SRC --out DIR: SRC is WEAVE's test.json or the folder with it and imgs/.
    yanami import imug SRC --out DIR: SRC is IMUG-Bench's folder (data/benchmark.jsonl, its side
    files and data/images/). yanami import SOURCE --out DIR: a Parquet export (yanami export).
    """
    from yanami.store import import_source

    kind = kind_or_source if source is not None else "parquet"
    src = source if source is not None else Path(kind_or_source)
    with progress("importing", None) as advance:
        made = import_source(kind, src, out_dir, overwrite=overwrite, link=not copy, on_record=advance)
    for line in made.warnings:
        err.print(f"warning: {printable(line)}", markup=False)  # (an unshown picture's path is the source's text)
    out.print(made.line, markup=False)


@app.command()
def leakage(
    train: Annotated[Path, typer.Argument(help="The training dataset directory.", metavar="TRAIN")],
    bench: Annotated[Path, typer.Argument(help="The benchmark dataset directory.", metavar="BENCH")],
    threshold: Annotated[
        int, typer.Option(min=0, max=64, help="Perceptual-hash Hamming distance that counts as near.", metavar="BITS")
    ] = 8,
    workers: Annotated[int, typer.Option(min=1, help="Processes for perceptual hashing.", metavar="N")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Find images shared by a train set and a bench.

    Prints a summary line, then the exact copies (same SHA-256), which make the exit
    status 1, then the closest 50 near-duplicates (perceptual hashes of what stands out
    from the background within --threshold of 64 bits), listed for review without failing.
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
        # The summary first, then the listing: every exact copy, then the closest near pairs.
        out.print(
            f"{len(report.exact)} exact, {len(report.near)} near-duplicate (<= {threshold}) among "
            f"{report.bench_images} bench and {report.train_images} train images",
            markup=False,
        )
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
    if report.exact:
        raise typer.Exit(1)


@app.command()
def build(
    out_dir: Annotated[Path, typer.Option("--out", help="The dataset directory to create.", metavar="DIR")],
    preset: Annotated[Preset, typer.Option(help=describe_presets())] = Preset.BENCH,
    per_scenario: Annotated[int | None, typer.Option(min=1, help="Dialogues per scenario.", metavar="N")] = None,
    dialogues: Annotated[
        int | None, typer.Option(min=1, help="Dialogues in all, in the training mix.", metavar="N")
    ] = None,
    scenarios: Annotated[
        str, typer.Option(metavar="<name,...>", help=f"Comma-separated, any of: {', '.join(Scenario)}.")
    ] = ",".join(Scenario),
    seed: Annotated[
        int | None,
        typer.Option(help="Seed; the same seed gives a byte-identical dataset.  [default: 42]", metavar="N"),
    ] = None,
    private: Annotated[
        bool,
        typer.Option(
            "--private",
            help="Draw a secret seed and record only its SHA-256: a fresh bench no model can have seen "
            "(nobody can rebuild it; keep the directory).",
        ),
    ] = False,
    workers: Annotated[int, typer.Option(min=1, help="Processes that build dialogues.", metavar="N")] = 1,
    exclude: Annotated[
        Path | None, typer.Option(help="A training set whose images the build must not reuse.", metavar="TRAIN")
    ] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing dataset at --out.")] = False,
    backend: BackendOpt = Backend.local,
    ray_address: RayAddressOpt = None,
) -> None:
    """Build a dataset of world dialogues (offline, exact by construction).

    The default bench (seed 42) is public: anyone can rebuild it from the code, so a model may
    have been trained on it. --private builds one nobody has seen (docs/evaluation.md,
    "Contamination").
    """
    from yanami.world import build_world, plan

    if per_scenario is not None and dialogues is not None:
        raise UserError("--per-scenario and --dialogues: give one or the other")
    try:
        chosen = parse_scenarios(scenarios)
    except ValueError as exc:
        raise UserError(f"--scenarios: {exc}") from None
    total = len(plan(preset.value, per_scenario, dialogues, chosen))
    with progress("building", total) as advance:
        m = build_world(
            out_dir,
            preset=preset.value,
            per_scenario=per_scenario,
            dialogues=dialogues,
            scenarios=chosen,
            seed=seed,
            workers=workers,
            exclude=exclude,
            overwrite=overwrite,
            on_dialogue=advance,
            backend=backend.value,
            ray_address=ray_address,
            private=private,
        )
    c = m.counts
    out.print(
        f"{out_dir}: {c.dialogues} dialogues, {c.turns} turns, {c.images} images, {c.checks} checks", markup=False
    )


@app.command()
def audit(
    bench: Annotated[Path, typer.Argument(help="A world dataset directory.", metavar="BENCH")],
    draws: Annotated[
        int, typer.Option(min=1, help="Realizations of each turn's free choices to draw.", metavar="N")
    ] = 16,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    workers: Annotated[
        int, typer.Option(min=1, help="Processes that parse pictures; never changes a result.", metavar="N")
    ] = 1,
) -> None:
    """Prove a world bench's checks decidable and its target turns irreducible.

    For each target turn, the turn's free choices (a substitute colour, a spot, how far)
    are drawn again DRAWS times; every check must hold on each realization. The stateless
    reading (the request applied to the latest image alone) must fail some check. Under
    Self-History, rollouts that make their own free choices must pass every check as the
    judge rebases it on their own earlier images. Every picture is parsed and compared with
    the scene its turn's hidden state says it shows (as `validate --deep`). Every request a
    run would send is built, and a sample goes through each adapter to a capturing server on
    loopback: nothing but the conversation may vary with the item. Exit 1 if any check is
    undecidable, any picture differs or any request field varies with the item.
    """
    from yanami.runner import blind_audit, blind_text
    from yanami.store import Dataset
    from yanami.world import Parser, audit_bench, audit_text, reparse_bench

    ds = Dataset(bench)
    with progress("auditing", len(ds)) as advance:
        result = audit_bench(ds, draws, on_dialogue=advance)
    if not result.figures["dialogues"]:
        raise UserError(f"{bench}: no world dialogues to audit (yanami audit replays dialogues made by yanami build)")
    with Parser(workers) as parser, progress("re-parsing pictures", None) as advance:
        result.add_pictures(reparse_bench(ds, parser, on_image=advance))
    if result.others:
        err.print(f"warning: {result.others} dialogue(s) not made by the world were skipped", markup=False)
    with progress("sending requests to a capturing server", None):
        blind = blind_audit(ds, lambda turn, side, j, part: ds.image_bytes(part))
    if as_json:
        out.print(json.dumps({**result.figures, "requests": blind.summary()}, indent=2), markup=False)
    else:
        out.print(audit_text(str(bench), result), markup=False)
        out.print(blind_text(blind), markup=False)
    for line in result.problems(MAX_PROBLEMS_SHOWN):
        out.print(line, markup=False)
    if result.failed or blind.failed:
        raise typer.Exit(1)


class TableFormat(StrEnum):
    text = "text"
    md = "md"
    latex = "latex"


class PoolFormatOpt(StrEnum):
    auto = "auto"
    folder = "folder"
    parquet = "parquet"
    webdataset = "webdataset"


@contextmanager
def _stages() -> Iterator[Callable[[str, int, int], None]]:
    """Progress for a command of several stages: one bar (or plain lines) per stage; a total
    of 0 means not known yet. Ctrl-C becomes one line saying that the same command resumes."""
    bar = _bar() if err.is_terminal else None
    tasks: dict[str, object] = {}
    lines: dict[str, _Lines] = {}

    def update(stage: str, done: int, total: int) -> None:
        if bar is not None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total or None)
            bar.update(tasks[stage], completed=done, total=total or None)  # type: ignore[arg-type]
            return
        if stage not in lines:
            for previous in lines.values():
                previous.finish()
            lines[stage] = _Lines(stage, total or None, base=0)
        lines[stage].update(done, total or None)

    try:
        if bar is None:
            yield update
            for previous in lines.values():
                previous.finish()
            return
        with bar:
            yield update
    except KeyboardInterrupt:
        raise UserError(RESUMES, exit_code=130) from None


@app.command()
def train(
    train_set: Annotated[
        Path, typer.Argument(help="A world training set (`yanami build --preset train`).", metavar="TRAIN")
    ],
    out_dir: Annotated[Path, typer.Option("--out", help="The checkpoint directory to write.", metavar="CKPT")],
    control: Annotated[
        str,
        typer.Option(
            help="stateful (the whole conversation) or single-turn (the latest picture and the current message).",
            metavar="NAME",
        ),
    ] = "stateful",
    steps: Annotated[int, typer.Option(min=1, help="Optimizer steps.", metavar="N")] = 600,
    batch: Annotated[int, typer.Option(min=1, help="Examples per step.", metavar="N")] = 16,
    seed: Annotated[int, typer.Option(help="Seed; the same seed gives the same checkpoint.", metavar="N")] = 0,
    workers: Annotated[int, typer.Option(min=1, help="Processes that read the pictures.", metavar="N")] = 1,
) -> None:
    """Train the small learned model on world dialogues (needs the train extra: PyTorch on the CPU).

    Writes a checkpoint (model.safetensors, config.json) that `yanami eval --model
    checkpoint:CKPT` evaluates like any model; an interrupted run resumes with the same command.
    """
    from yanami.learned import TrainSettings, require_torch
    from yanami.learned import train as run_training

    require_torch()

    settings = TrainSettings(steps=steps, batch=batch, seed=seed, control=control)
    with _stages() as update:
        config = run_training(train_set, out_dir, settings, workers=workers, on_stage=update)
    last = config["curve"][-1] if config["curve"] else {}
    figures = ", ".join(f"{k} {v:.1f}" for k, v in last.items() if k.startswith("accuracy_"))
    out.print(
        f"{out_dir}: {config['parameters']:,} parameters, {config['step']} steps on {config['train']['examples']} "
        f"examples ({control}); held out: {figures or 'none'}",
        markup=False,
    )


@app.command()
def prepare(
    pool: Annotated[
        Path,
        typer.Argument(
            help="A folder of images (sub-folders or groups.jsonl name groups), a Parquet export, or WebDataset tars.",
            metavar="POOL",
        ),
    ],
    out_dir: Annotated[
        Path, typer.Option("--out", help="The prepared pool (created, or continued).", metavar="POOLDIR")
    ],
    filter_spec: Annotated[
        str, typer.Option("--filter", help="The filter VLM: a model config file (docs/models.md).", metavar="FILE")
    ],
    repair_spec: Annotated[
        str | None,
        typer.Option(
            "--repair", help="The image-edit model that repairs rejected images (a config file).", metavar="FILE"
        ),
    ] = None,
    routes: Annotated[
        Path | None,
        typer.Option(
            help="A JSON or YAML mapping from group to scenario (else the filter VLM routes).", metavar="FILE"
        ),
    ] = None,
    rounds: Annotated[int, typer.Option(min=0, help="Repair rounds per rejected image, at most.", metavar="N")] = 2,
    pool_format: Annotated[PoolFormatOpt, typer.Option("--format", help="How to read POOL.")] = PoolFormatOpt.auto,
    image_column: Annotated[
        str | None, typer.Option(help="Parquet: the image column (default: image, images or img).", metavar="NAME")
    ] = None,
    group_column: Annotated[
        str | None,
        typer.Option(help="Parquet: the group column (default: group; else a row is a group).", metavar="NAME"),
    ] = None,
    max_pixels: Annotated[
        int, typer.Option(min=1, help="Images with more pixels are rejected undecoded.", metavar="N")
    ] = 40_000_000,
    max_bytes: Annotated[int, typer.Option(min=1, help="Files larger than this are rejected unread.", metavar="N")] = 64
    * 1024
    * 1024,
    concurrency: Annotated[int, typer.Option(min=1, help="Model calls in flight at once.", metavar="N")] = 4,
    cache: Annotated[
        Path | None,
        typer.Option(help="Response cache file (default POOLDIR/cache.sqlite).", metavar="FILE"),
    ] = None,
) -> None:
    """Stage a: screen a pool of images with a filter VLM, repair what may be, route groups to scenarios."""
    from yanami.construct import prepare as run_prepare

    with _stages() as update:
        summary = run_prepare(
            pool,
            out_dir,
            filter_spec=filter_spec,
            repair_spec=repair_spec,
            routes=routes,
            rounds=rounds,
            fmt=pool_format.value,  # type: ignore[arg-type]
            image_column=image_column,
            group_column=group_column,
            max_pixels=max_pixels,
            max_bytes=max_bytes,
            concurrency=concurrency,
            cache=cache,
            on_progress=update,
        )
    for line in summary.lines():
        out.print(line, markup=False)
    if summary.errors:
        err.print(
            f"warning: {summary.errors} model call(s) failed (recorded as rejections; the same command asks again)",
            markup=False,
        )


@app.command()
def construct(
    pooldir: Annotated[Path, typer.Argument(help="A pool prepared by yanami prepare.", metavar="POOLDIR")],
    out_dir: Annotated[
        Path,
        typer.Option(
            "--out", help="The dataset (written when the run ends; the store is OUT.construct).", metavar="DIR"
        ),
    ],
    author: Annotated[
        str, typer.Option(help="The author LLM: a config file (docs/models.md), or stand-ins.", metavar="FILE")
    ],
    image_model: Annotated[
        str, typer.Option(help="The image model that generates and edits: a config file, or stand-ins.", metavar="FILE")
    ],
    verifier: Annotated[
        str,
        typer.Option(help="The VLM that reviews plans and checks images: a config file, or stand-ins.", metavar="FILE"),
    ],
    preset: Annotated[str, typer.Option(help="bench (questions and checks) or train.", metavar="NAME")] = "bench",
    per_scenario: Annotated[int | None, typer.Option(min=1, help="Dialogues per scenario.", metavar="N")] = None,
    dialogues: Annotated[
        int | None, typer.Option(min=1, help="Dialogues in all, in the training mix.", metavar="N")
    ] = None,
    scenarios: Annotated[
        str, typer.Option(metavar="<name,...>", help=f"Comma-separated, any of: {', '.join(Scenario)}.")
    ] = ",".join(Scenario),
    seed: Annotated[
        int, typer.Option(help="Draws the groups and the capabilities; seeds the image model.", metavar="N")
    ] = 42,
    rounds: Annotated[
        int, typer.Option(min=0, help="Revisions per plan and new attempts per image, at most.", metavar="N")
    ] = 2,
    budget: Annotated[
        float | None,
        typer.Option(
            min=0, help="Stop cleanly before the construction's spending would pass this amount.", metavar="AMOUNT"
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Make a small sample and estimate the cost and time of the whole.")
    ] = False,
    sample: Annotated[int, typer.Option(min=1, help="With --dry-run: the dialogues to make.", metavar="N")] = 8,
    concurrency: Annotated[int, typer.Option(min=1, help="Dialogues in the making at once.", metavar="N")] = 4,
    templates: Annotated[
        Path | None, typer.Option(help="A folder of templates that replace the package's.", metavar="DIR")
    ] = None,
    probe: Annotated[
        bool,
        typer.Option("--irreducibility-probe", help="Keep a target turn only if a history-free attempt fails it."),
    ] = False,
    faults: Annotated[
        float,
        typer.Option(
            min=0, max=1, help="Stand-ins only: the share of plans and images given a known fault.", metavar="RATE"
        ),
    ] = 0.0,
    backend: BackendOpt = Backend.local,
    ray_address: RayAddressOpt = None,
) -> None:
    """Stages b and c: an author LLM writes dialogues over a prepared pool; images made, verified, repaired."""
    from yanami.construct import construct as run_construct

    try:
        chosen = parse_scenarios(scenarios)
    except ValueError as exc:
        raise UserError(f"--scenarios: {exc}") from None
    if per_scenario is not None and dialogues is not None:
        raise UserError("--per-scenario and --dialogues: choose one")
    with _stages() as update:
        s = run_construct(
            pooldir,
            out_dir,
            author=author,
            image_model=image_model,
            verifier=verifier,
            preset=preset,
            per_scenario=per_scenario,
            dialogues=dialogues,
            scenarios=chosen,
            seed=seed,
            rounds=rounds,
            budget=budget,
            dry_run=dry_run,
            concurrency=concurrency,
            templates=templates,
            probe=probe,
            faults=faults,
            sample=sample,
            on_progress=update,
            backend=backend.value,
            ray_address=ray_address,
        )
    for line in s.lines():
        out.print(line, markup=False)
    if s.errors:
        err.print(
            f"warning: {s.errors} dialogue(s) failed for now (their calls failed); the same command retries them",
            markup=False,
        )
    if s.stopped == "budget":
        err.print(
            f"stopped before the budget ({s.budget:g}) would be passed: {s.pending} dialogue(s) not made; "
            "rerun with a larger --budget to continue",
            markup=False,
        )
        raise typer.Exit(3)
    if not s.estimate and s.accepted == 0 and s.planned:
        raise UserError(f"{out_dir}: no dialogue was accepted (see the reasons above)", exit_code=1)
    if s.errors:
        raise typer.Exit(1)  # some dialogues failed for now: the warning above says the same command retries them


@contextmanager
def _resumable() -> Iterator[None]:
    """Ctrl-C becomes one line saying that the same command resumes (exit 130)."""
    try:
        yield
    except KeyboardInterrupt:
        raise UserError(RESUMES, exit_code=130) from None


@contextmanager
def _eval_progress(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar set to (done, total) (plain lines off a terminal); Ctrl-C becomes one line
    saying how to resume."""
    try:
        if not err.is_terminal:
            lines = _Lines(label, None)
            yield lines.update
            lines.finish()
            return
        bar = _bar()
        with bar:
            task = bar.add_task(label, total=None)
            yield lambda done, total: bar.update(task, completed=done, total=total)
    except KeyboardInterrupt:
        raise UserError(RESUMES, exit_code=130) from None


ProtocolSourceOpt = Annotated[
    Path | None,
    typer.Option(
        help="WEAVE, IMUG-Bench: your checkout of the benchmark's repository; the judge asks its own prompts, "
        "read from there (without it, yanami's own prompts: not comparable with published numbers).",
        metavar="DIR",
    ),
]
"""``--protocol-source`` of `eval` and `judge`."""


@app.command(name="eval")
def eval_(
    bench: Annotated[Path, typer.Argument(help="The bench dataset directory.", metavar="BENCH")],
    model: Annotated[
        str,
        typer.Option(
            help="A model config file (YAML; docs/models.md), or KIND:NAME such as reference:stateful.",
            metavar="SPEC",
        ),
    ],
    out_dir: Annotated[Path, typer.Option("--out", help="The run directory (created, or resumed).", metavar="DIR")],
    history: Annotated[History, typer.Option(help="gt: ground-truth earlier images; self: the model's own.")] = (
        History.GT
    ),
    layout: Annotated[
        Layout | None,
        typer.Option(help="How images are placed in the input (default: the model config's, else yes-first)."),
    ] = None,
    judge: Annotated[
        str, typer.Option(help="exact (world data), or a judge config file (a VLM judge).", metavar="SPEC")
    ] = "exact",
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1,
            show_default=False,
            help="Items in flight at once (never changes a score). Default: 1, or twice --workers when --workers "
            "is above 1; with --backend ray, twice the cluster's CPUs.",
            metavar="N",
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Evaluate only the first N dialogues, taken round-robin over the scenarios. A run resumes with the "
            "same --limit, or a larger one (or none), which extends it.",
            metavar="N",
        ),
    ] = None,
    retry_errors: Annotated[bool, typer.Option(help="Re-attempt items whose prediction is an error.")] = False,
    strategy: Annotated[
        str,
        typer.Option(
            help="Test-time scaling: none, cot, self-verify:N or best-of:N (best-of:N@FILE: that config's "
            "model picks). Extra calls are cached and counted per item (docs/benchmarks.md).",
            metavar="NAME",
        ),
    ] = "none",
    cache: Annotated[
        Path | None,
        typer.Option(help="Response cache file (default RUN/cache.sqlite); share one across runs.", metavar="FILE"),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            help="Processes that parse images (exact judge, reference agents); never changes scores.",
            metavar="N",
        ),
    ] = 1,
    protocol_source: ProtocolSourceOpt = None,
    backend: BackendOpt = Backend.local,
    ray_address: RayAddressOpt = None,
) -> None:
    """Evaluate a model on a bench: target turns and DSU questions, judged, stored per item, resumable."""
    from yanami.runner import evaluate
    from yanami.scoring import markdown, scorer_for

    with _eval_progress(f"evaluating {_model_label(model)}") as update:
        summary = evaluate(
            bench,
            model,
            out_dir,
            history=history,
            layout=layout,
            judge=judge,
            concurrency=concurrency,
            limit=limit,
            retry_errors=retry_errors,
            strategy=strategy,
            on_progress=update,
            cache=cache,
            workers=workers,
            protocol_source=protocol_source,
            backend=backend.value,
            ray_address=ray_address,
        )
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(summary.statuses.items())) or "nothing new"
    out.print(
        f"{out_dir}: {summary.items} items, {summary.skipped} already done, {summary.written} written ({statuses})",
        markup=False,
    )
    scored = scorer_for([out_dir]).score([out_dir], None)
    out.print(markdown(scored.main, escaped=False).rstrip("\n"), markup=False)
    valid, expected = scored.coverage
    if summary.first_error:
        err.print(
            f"warning: {summary.statuses.get('error', 0)} item(s) ended in error, the first: "
            f"{printable(summary.first_error or '')} "
            "(they are not scored; --retry-errors asks again)",
            markup=False,
        )
    if summary.first_judge_error:
        err.print(
            f"warning: the judge could not grade {summary.judge_errors} item(s), the first: "
            f"{summary.first_judge_error} (they are not scored; the same command grades them again)",
            markup=False,
        )
    if expected and not valid:
        raise UserError(f"{out_dir}: no item of the run is valid; check the model's configuration", exit_code=1)


def _model_label(spec: str) -> str:
    """How progress names a model: the model a config file serves (with the file), else the spec."""
    from yanami.models import load_config, looks_like_config

    if not looks_like_config(spec):
        return spec
    try:
        config = load_config(spec)
    except UserError:
        return spec  # the run itself says what is wrong with the file
    served = config.chat_model or config.image_model or config.name
    return f"{served} ({Path(spec).name})"


@app.command()
def score(
    runs: Annotated[list[Path], typer.Argument(help="Run directories.", metavar="RUN")],
    as_json: Annotated[bool, typer.Option("--json", help="Print every score as JSON.")] = False,
    format_: Annotated[
        TableFormat, typer.Option("--format", help="text (the main table), or every table in md or latex.")
    ] = TableFormat.text,
    judge: Annotated[
        str | None,
        typer.Option(help="Score this judge's verdicts, by name (default: each run's own judge).", metavar="NAME"),
    ] = None,
    out_file: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Write to this file instead of standard output (- : standard output).", metavar="FILE"
        ),
    ] = None,
) -> None:
    """Scores of one or more runs: the paper's tables, analyses across runs, coverage.

    Rows that are not comparable (other bench, limit, judge or history; coverage under 100 %)
    are marked, and a warning on standard error says why.
    """
    from yanami.contract import STDOUT, write_output
    from yanami.scoring import latex, markdown, scorer_for

    scored = scorer_for(runs).score(runs, judge)
    for line in scored.warnings:
        err.print(f"warning: {line}", markup=False)
    if as_json:
        text = json.dumps(scored.data, indent=2)
    elif format_ == TableFormat.text:
        text = scored.summary
    else:
        render = markdown if format_ == TableFormat.md else latex
        text = "\n".join(render(t) for t in scored.tables)
    write_output(out_file if out_file is not None else STDOUT, text)


class ReportFormat(StrEnum):
    html = "html"
    md = "md"
    latex = "latex"


REPORT_SUFFIX = {ReportFormat.html: "html", ReportFormat.md: "md", ReportFormat.latex: "tex"}
"""The default output file of `report` per format: report.html, report.md, report.tex."""


@app.command()
def report(
    runs: Annotated[list[Path], typer.Argument(help="Run directories.", metavar="RUN")],
    out_file: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="The file to write (default report.html, report.md or report.tex; - : standard output).",
            metavar="FILE",
        ),
    ] = None,
    samples: Annotated[
        int, typer.Option(min=0, help="Dialogues per scenario in the per-sample viewer.", metavar="N")
    ] = 4,
    format_: Annotated[
        ReportFormat, typer.Option("--format", help="html: the whole report; md or latex: the tables alone.")
    ] = ReportFormat.html,
    judge: Annotated[
        str | None,
        typer.Option(help="Score this judge's verdicts, by name (default: each run's own judge).", metavar="NAME"),
    ] = None,
    bench: Annotated[
        Path | None,
        typer.Option(help="The runs' bench, if it moved (its manifest's SHA-256 must match the run's).", metavar="DIR"),
    ] = None,
) -> None:
    """Write a report of one or more runs: one self-contained HTML file (or the tables in md / LaTeX)."""
    from yanami.contract import is_stdout, write_output
    from yanami.scoring import latex, markdown, scorer_for

    scorer = scorer_for(runs)
    target = out_file if out_file is not None else Path(f"report.{REPORT_SUFFIX[format_]}")
    if format_ == ReportFormat.html:
        text, warnings = scorer.report(runs, judge, samples, bench)
    else:
        scored = scorer.score(runs, judge)
        render = markdown if format_ == ReportFormat.md else latex
        text, warnings = "\n".join(render(t) for t in scored.tables), scored.warnings
    for line in warnings:
        err.print(f"warning: {line}", markup=False)
    write_output(target, text)
    if not is_stdout(target):
        out.print(f"{target}: report of {len(runs)} run(s)", markup=False)


@app.command(name="judge")
def judge_(
    run: Annotated[Path, typer.Argument(help="A run directory.", metavar="RUN")],
    judge: Annotated[str, typer.Option(help="A judge config file (or exact).", metavar="SPEC")],
    bench: Annotated[Path | None, typer.Option(help="The bench, if it moved since the run.", metavar="DIR")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Items judged at once.", metavar="N")] = 1,
    cache: Annotated[
        Path | None, typer.Option(help="Response cache file (default RUN/cache.sqlite).", metavar="FILE")
    ] = None,
    protocol_source: ProtocolSourceOpt = None,
    backend: BackendOpt = Backend.local,
    ray_address: RayAddressOpt = None,
) -> None:
    """Judge a run's stored predictions again with another judge, without calling the model."""
    from yanami.runner import rejudge

    with _eval_progress(f"judging {run}") as update:
        s = rejudge(
            run,
            judge,
            bench=bench,
            concurrency=concurrency,
            cache=cache,
            on_progress=update,
            protocol_source=protocol_source,
            backend=backend.value,
            ray_address=ray_address,
        )
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(s.statuses.items())) or "nothing new"
    out.print(f"{run}: {s.items} judged items, {s.skipped} already done ({statuses})", markup=False)


@app.command()
def agreement(
    run: Annotated[Path, typer.Argument(help="A run directory.", metavar="RUN")],
    judge: Annotated[list[str], typer.Option(help="A judge name (give two to compare judges).", metavar="NAME")],
    human: Annotated[
        str | None,
        typer.Option(
            help="Human ratings: a CSV (item,score[,check,passed]), or a review database (a SQLite file or "
            "postgresql:// URL of `yanami review`), whose check verdicts are compared on the turns whose picture "
            "is the dataset's own.",
            metavar="CSV|REVIEW_DB",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Judge reliability: Pearson (95 % bootstrap interval), Spearman and Cohen's kappa against humans or a judge."""
    from yanami.scoring import (
        agreement_lines,
        human_agreement_lines,
        is_ratings_csv,
        run_agreement,
        run_human_agreement,
    )

    if human is not None and not is_ratings_csv(human):
        results = run_human_agreement(run, judge, human)
        lines = human_agreement_lines(results)
    else:
        results = run_agreement(run, judge, Path(human) if human is not None else None)
        lines = agreement_lines(results)
    if as_json:
        out.print_json(json.dumps(results))
        return
    for line in lines:
        out.print(line, markup=False)


@app.command()
def calibrate(
    bench: Annotated[Path, typer.Argument(help="A world bench.", metavar="BENCH")],
    judge: Annotated[str, typer.Option(help="The judge config file to calibrate.", metavar="SPEC")],
    limit: Annotated[int, typer.Option(min=1, help="Dialogues to use (round-robin over scenarios).", metavar="N")] = 20,
    concurrency: Annotated[int, typer.Option(min=1, help="Items judged at once.", metavar="N")] = 4,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="Write the report as JSON here.", metavar="FILE")
    ] = None,
    cache: Annotated[Path | None, typer.Option(help="Response cache file.", metavar="FILE")] = None,
    human: Annotated[
        str | None,
        typer.Option(
            help="A review database of BENCH (SQLite file or postgresql:// URL): also report the judge's agreement "
            "with the annotators' check verdicts, judging the dataset's own pictures of the first N reviewed "
            "dialogues.",
            metavar="REVIEW_DB",
        ),
    ] = None,
) -> None:
    """Calibrate a judge on world data: its verdicts against the exact judge's, on corrupted and injected candidates."""
    from yanami.contract import is_stdout, write_output
    from yanami.judges import calibrate as run_calibration
    from yanami.judges import calibration_lines, load_judge
    from yanami.models import ResponseCache
    from yanami.runner import select_dialogues
    from yanami.scoring import calibrate_with_humans, human_agreement_lines, read_review
    from yanami.store import Dataset

    dataset = Dataset(bench)
    if human is not None:
        read_review(human)  # a bad --human is one line before any judging
    dialogues = select_dialogues(dataset.read_all(), limit)
    responses = ResponseCache(cache) if cache else None
    the_judge = load_judge(judge, dataset, responses)
    with progress("calibrating", None) as advance:
        result = run_calibration(the_judge, dialogues, concurrency=concurrency, on_progress=advance).summary()
    if human is not None:
        with progress("judging the reviewed pictures", None) as advance:
            result["human"] = calibrate_with_humans(
                the_judge, dataset, human, limit=limit, concurrency=concurrency, on_progress=advance
            )
    if responses:
        responses.close()
    if out_file is not None:
        write_output(out_file, json.dumps(result, indent=2) + "\n")
    show = err if is_stdout(out_file) else out  # with --out -, standard output carries the JSON alone
    for line in calibration_lines(result):
        show.print(line, markup=False)
    if "human" in result:
        for line in human_agreement_lines({f"{the_judge.name} vs human": result["human"]}):
            show.print(line, markup=False)


@app.command()
def demo(
    out_dir: Annotated[Path, typer.Option("--out", help="Where the demo writes its files.", metavar="DIR")] = Path(
        "yanami-demo"
    ),
    per_scenario: Annotated[int, typer.Option(min=1, help="Dialogues per scenario in the bench.", metavar="N")] = 100,
    seed: Annotated[int, typer.Option(help="Seed of the build.", metavar="N")] = 42,
    workers: Annotated[
        int, typer.Option(min=1, help="Processes that build the bench and parse images.", metavar="N")
    ] = 2,
) -> None:
    """Build the world bench, evaluate the reference agents, write the report, print the main table.

    The agents run from the floor up: copy-input and random (trivial), stateless, the four
    ablations of the stateful agent, stateful, oracle, and stateful under Self-History. A
    second call resumes: it rebuilds or reruns only what is missing or made by another yanami.
    """
    from yanami.demo import run_demo

    started = time.monotonic()
    with _resumable():
        result = run_demo(
            out_dir, per_scenario=per_scenario, seed=seed, workers=workers, count=progress, track=_eval_progress
        )
    for line in result.loaded.warnings:
        err.print(f"warning: {line}", markup=False)
    for line in result.lines():
        out.print(line, markup=False)
    minutes, seconds = divmod(round(time.monotonic() - started), 60)
    out.print(f"done in {minutes} min {seconds} s", markup=False)


@app.command()
def serve(
    model: Annotated[
        str, typer.Argument(help="A checkpoint directory (`yanami train`) or any --model spec.", metavar="MODEL")
    ],
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="The port on 127.0.0.1 (0: any free port).", metavar="PORT")
    ] = 8766,
    workers: Annotated[int, typer.Option(min=1, help="Processes that read pictures.", metavar="N")] = 1,
) -> None:
    """Serve a model over IMUG-Bench's /infer protocol on loopback (a checkpoint, or any model).

    Point a config file (kind: infer-http) at the printed URL; `yanami eval` then reaches the
    model over HTTP, as it would a remote one. Ctrl-C stops it.
    """
    import threading

    from yanami.models import InferServer, load_model
    from yanami.world import Parser

    spec = model
    if Path(model).is_dir():
        spec = f"checkpoint:{model}"
    with Parser(workers) as parser:
        the_model = load_model(spec, parser=parser)
        try:
            server = InferServer(the_model, port=port)
        except OSError as exc:
            raise UserError(f"--port {port}: cannot listen on 127.0.0.1:{port} ({exc.strerror})") from None
        with server:
            try:
                out.print(f"{server.url}/infer serves {the_model.name}; Ctrl-C stops", markup=False)
                idle = threading.Event()
                while not idle.wait(0.2):  # wake now and then: Ctrl-C reaches the main thread
                    pass
            except KeyboardInterrupt:
                err.print("stopped", markup=False)


experiment_app = typer.Typer(help="Experiments that train and evaluate (needs the train extra).", no_args_is_help=True)


@experiment_app.command(name="train-vs-control")
def train_vs_control(
    out_dir: Annotated[Path, typer.Option("--out", help="The experiment's directory.", metavar="DIR")],
    bench: Annotated[
        Path | None,
        typer.Option(help="A world bench (default: one built in DIR, --per-scenario each).", metavar="BENCH"),
    ] = None,
    per_scenario: Annotated[
        int, typer.Option(min=1, help="The built bench's dialogues per scenario.", metavar="N")
    ] = 10,
    train_dialogues: Annotated[int, typer.Option(min=20, help="Training dialogues.", metavar="N")] = 300,
    steps: Annotated[int, typer.Option(min=1, help="Optimizer steps per model.", metavar="N")] = 500,
    batch: Annotated[int, typer.Option(min=1, help="Examples per step.", metavar="N")] = 16,
    seed: Annotated[int, typer.Option(help="Seed of the training set and the models.", metavar="N")] = 0,
    workers: Annotated[int, typer.Option(min=1, help="Processes that build and read pictures.", metavar="N")] = 1,
    tag: Annotated[
        str,
        typer.Option(
            help="Score DIR's checkpoints on a further --bench: runs-TAG/, report-TAG.html, experiment-TAG.json.",
            metavar="TAG",
        ),
    ] = "",
    self_history: Annotated[bool, typer.Option(help="Also evaluate under Self-History.")] = True,
) -> None:
    """Train the stateful model and the single-turn control on the same data and compare them.

    Builds a training set excluded from the bench, trains both models, evaluates them, the
    untrained model and the best learned text-only reader, and writes DIR/report.html (the
    table with intervals, the learning curves) and DIR/experiment.json. The same command resumes.
    """
    from yanami.learned import Setting, experiment_table, require_torch, run_experiment

    require_torch()

    if tag and (bench is None or not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", tag)):
        raise UserError("--tag: letters, digits, - and _ (at most 40), with the --bench it scores")
    setting = Setting(per_scenario, train_dialogues, steps, batch, seed, workers)
    with _stages() as update:
        figures = run_experiment(out_dir, setting, bench, update, tag=tag, self_history=self_history)
    header, rows = experiment_table(figures)
    out.print(" | ".join(header), markup=False)
    for row in rows:
        out.print(" | ".join(row), markup=False)
    report = out_dir / (f"report-{tag}.html" if tag else "report.html")
    out.print(f"{report}: the table and the learning curves", markup=False)


app.add_typer(experiment_app, name="experiment")


@app.command(name="serve-fake")
def serve_fake(
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="The port on 127.0.0.1 (0: any free port).", metavar="PORT")
    ] = 8765,
    latency: Annotated[float, typer.Option(min=0.0, help="Seconds before each answer.", metavar="SECONDS")] = 0.0,
) -> None:
    """Serve a scripted model on loopback: OpenAI-compatible (/v1) and IMUG's /infer, for dry runs.

    It answers like a cooperative model and judge (option A, every check passes, quality 8;
    images echo the latest input image). Point a config file's base_url at the printed URL;
    Ctrl-C stops it.
    """
    import threading

    from yanami.models.fake import FakeServer

    try:
        server = FakeServer(latency_s=latency, port=port)
    except OSError as exc:
        raise UserError(f"--port {port}: cannot listen on 127.0.0.1:{port} ({exc.strerror})") from None
    with server:
        try:  # entered before the URL is printed: a Ctrl-C right after it is caught too
            out.print(f"{server.url}/v1 (OpenAI-compatible) and {server.url}/infer; Ctrl-C stops", markup=False)
            # Wake now and then: the kernel may hand Ctrl-C's signal to a server thread, and Python
            # runs the handler only when the main thread runs (an endless wait would never see it).
            idle = threading.Event()
            while not idle.wait(0.2):
                pass
        except KeyboardInterrupt:
            err.print("stopped", markup=False)


app.add_typer(review_app, name="review")


def _whole_short_help() -> None:
    """Each command's line in ``yanami --help`` is its docstring's first line, whole (click would
    cut it at 45 characters with "...")."""
    for info in app.registered_commands:
        doc = info.help or (info.callback.__doc__ if info.callback else None) or ""
        if info.short_help is None and doc.strip():
            info.short_help = doc.strip().splitlines()[0]


def main() -> None:
    """Entry point: user errors become one line on stderr and a non-zero exit, never a traceback."""
    _whole_short_help()
    try:
        app()
    except UserError as exc:
        err.print(f"error: {printable(str(exc))}", markup=False)
        sys.exit(exc.exit_code)
