"""Commands on a dataset directory: schema, validate, stats, export, import and leakage."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from yanami.cli._app import MAX_PROBLEMS_SHOWN, err, out
from yanami.cli._options import DatasetArg, JsonOpt, NewDatasetOpt, OverwriteDatasetOpt, workers_option
from yanami.cli._progress import counting, progress
from yanami.construct import plan_schema
from yanami.contract import Dialogue, UserError, printable
from yanami.judges import supported_judges
from yanami.store import (
    Dataset,
    Manifest,
    Problem,
    dataset_stats,
    export_bagel,
    export_llava,
    export_llava_next,
    export_parquet,
    export_webdataset,
    find_leakage,
    import_source,
    open_dataset_dir,
    stats_tables,
    validate_dataset,
)
from yanami.world import Parser, reparse_bench


class SchemaOf(StrEnum):
    dialogue = "dialogue"
    manifest = "manifest"
    plan = "plan"


def schema(
    of: Annotated[SchemaOf, typer.Option("--of", help="Which document to describe.")] = SchemaOf.dialogue,
) -> None:
    schemas = {SchemaOf.dialogue: Dialogue.model_json_schema, SchemaOf.manifest: Manifest.model_json_schema,
               SchemaOf.plan: plan_schema}  # fmt: skip
    out.print_json(json.dumps(schemas[of]()), indent=2)


def validate(
    directory: DatasetArg,
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
    workers: Annotated[int, workers_option("Processes that parse pictures (--deep); never changes a result.")] = 1,
) -> None:
    """Each problem is one line, path:line: field: message (the first 50, then a count).
    --deep also re-parses every picture of a world bench against its turn's hidden state, a
    problem line for each that differs (a picture changed and re-hashed consistently passes
    the plain check). Exit 0 if the dataset is valid, 1 if it has problems, 2 if DIR is no dataset.
    """
    _, raw, _ = open_dataset_dir(directory)
    counts = raw.get("counts") if isinstance(raw, dict) else None
    total = counts.get("dialogues") if isinstance(counts, dict) else None
    with progress("dialogues", total if isinstance(total, int) else None) as advance:
        problems = validate_dataset(directory, max_pixels=max_pixels, on_dialogue=advance)
    reparsed = None
    if deep and problems:
        err.print("--deep: the pictures were not re-parsed (the dataset has the problems below)", markup=False)
    elif deep:
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


def stats(
    directory: DatasetArg,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    ds = Dataset(directory)
    with progress("dialogues", len(ds)) as advance:
        s = dataset_stats(counting(ds, advance))
    if as_json:
        out.print(s.model_dump_json(indent=2), markup=False)
        return
    out.print(f"{directory}:", markup=False)
    for table in stats_tables(s):
        out.print(table)


class ExportFormat(StrEnum):
    parquet = "parquet"
    llava = "llava"
    llava_next = "llava-next"
    bagel = "bagel"
    webdataset = "webdataset"


def export(
    directory: DatasetArg,
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
    """Parquet (for Hugging Face datasets) and WebDataset tar shards are lossless; llava is
    LLaVA-1.5's conversation JSON (one picture a record), llava-next LLaVA-NeXT's (LLaVA-OneVision,
    LLaVA-NeXT-Interleave: every picture), bagel BAGEL's unified_edit and vlm_sft layouts. Each
    export's README.md says what its format cannot carry and where that went."""
    if bagel_root is not None and fmt is not ExportFormat.bagel:
        raise UserError(f"--bagel-root: only for --format bagel, not {fmt.value}")
    n = len(Dataset(directory))
    with progress("exporting", n) as advance:
        if fmt is ExportFormat.parquet:
            files = export_parquet(directory, out_dir, overwrite=overwrite, on_dialogue=advance)
        elif fmt is ExportFormat.llava:
            export_llava(directory, out_dir, overwrite=overwrite, on_dialogue=advance)
        elif fmt is ExportFormat.llava_next:
            export_llava_next(directory, out_dir, overwrite=overwrite, on_dialogue=advance)
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


def import_(
    kind_or_source: Annotated[
        str,
        typer.Argument(
            help="parquet, or a family with an importer: weave, imug or a plug-in's (or, alone, a Parquet export).",
            metavar="[KIND]",
        ),
    ],
    out_dir: NewDatasetOpt,
    source: Annotated[
        Path | None, typer.Argument(help="The source: a folder or file in KIND's layout.", metavar="SOURCE")
    ] = None,
    overwrite: OverwriteDatasetOpt = False,
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
    """yanami import weave SRC --out DIR: SRC is WEAVE's test.json or the folder with it and imgs/.
    yanami import imug SRC --out DIR: SRC is IMUG-Bench's folder (data/benchmark.jsonl, its side
    files and data/images/). yanami import opening SRC --out DIR: SRC is OpenING's
    OpenING-benchmark/ folder (test_data.jsonl and images/). yanami import SOURCE --out DIR: a
    Parquet export (yanami export).
    """
    kind = kind_or_source if source is not None else "parquet"
    src = source if source is not None else Path(kind_or_source)
    with progress("importing", None) as advance:
        made = import_source(kind, src, out_dir, overwrite=overwrite, link=not copy, on_record=advance)
    for line in made.warnings:
        err.print(f"warning: {printable(line)}", markup=False)  # (an unshown picture's path is the source's text)
    out.print(made.line, markup=False)


def leakage(
    train: Annotated[Path, typer.Argument(help="The training dataset directory.", metavar="TRAIN")],
    bench: Annotated[Path, typer.Argument(help="The benchmark dataset directory.", metavar="BENCH")],
    threshold: Annotated[
        int, typer.Option(min=0, max=64, help="Perceptual-hash Hamming distance that counts as near.", metavar="BITS")
    ] = 8,
    workers: Annotated[int, workers_option("Processes for perceptual hashing.")] = 1,
    as_json: JsonOpt = False,
) -> None:
    """Prints a summary line, then the exact copies (same SHA-256), which make the exit
    status 1, then the closest 50 near-duplicates (perceptual hashes of what stands out
    from the background within --threshold of 64 bits), listed for review without failing.
    """
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
