"""``yanami import``: a dataset directory from a Parquet export or a family's own source."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from yanami.contract import UnknownFamily, UserError, family_of, known_families

PARQUET = "parquet"


@dataclass(frozen=True)
class Imported:
    """What an import made: the line ``yanami import`` prints, and its warnings."""

    line: str
    warnings: list[str] = field(default_factory=list)


def import_source(
    kind: str,
    source: Path,
    out: Path,
    *,
    overwrite: bool = False,
    link: bool = True,
    on_record: Callable[[], None] | None = None,
) -> Imported:
    """Import ``source`` into ``out``: a Parquet export (``kind`` ``parquet``) or the source of the
    family ``kind`` names (its `FamilyFacts.importer`)."""
    from yanami.store._parquet import import_parquet
    from yanami.store._reader import Dataset

    importer = None
    if kind != PARQUET:
        try:
            importer = family_of(kind).hook("importer")
        except UnknownFamily:
            importer = None
        if importer is None:
            kinds = [PARQUET, *(f for f in known_families() if family_of(f).importer)]
            raise UserError(f"{kind!r}: not a kind of source ({', '.join(kinds)})")
    if importer is None:
        import_parquet(source, out, overwrite=overwrite, on_dialogue=on_record)
    else:
        importer(source, out, overwrite=overwrite, link=link, on_record=on_record)
    m = Dataset(out).manifest
    params = m.generator.params
    warnings = []
    unshown = params.get("unshown", [])
    if unshown:
        first = unshown[0]
        warnings.append(
            f"{sum(len(u['images']) for u in unshown)} listed picture(s) in {len(unshown)} record(s) are shown by "
            f"no chat and were not imported (first: record {first['record']}, idx {first['idx']}: "
            f"{first['images'][0]}); the manifest's generator.params.unshown lists them"
        )
    warnings += [str(w) for w in params.get("warnings", [])]  # any family's importer may list its own
    where = params.get("classes", "the class config")
    warnings += [
        f"domain {domain!r} is not in {where}: filed under Unassigned" for domain in params.get("unassigned", [])
    ]
    family = "" if kind == PARQUET else f" ({m.family}, protocol {m.protocol})"
    return Imported(f"{out}: {m.counts.dialogues} dialogues, {m.counts.images} images{family}", warnings)
