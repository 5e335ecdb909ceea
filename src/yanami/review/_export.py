"""Export: the approved dialogues, edits applied, as a dataset directory with the review record."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yanami import __version__
from yanami.contract import UserError
from yanami.review._annotators import agreement
from yanami.review._db import Decision, ReviewDB


@dataclass(frozen=True)
class Exported:
    """What an export wrote."""

    path: Path
    dialogues: int
    """Approved dialogues written."""
    reviewed: int
    """Dialogues in the review."""
    undecided: int
    """Dialogues with neither a majority nor an adjudication (left out)."""
    near_duplicates: int
    """Near-duplicate images the leakage check found against ``--exclude`` (reported, not refused)."""
    held: int = 0
    """Approved dialogues left out because a check most of their annotators failed awaits the
    admin's adjudication (such a check is never exported as ground truth)."""
    dropped_checks: int = 0
    """Checks the admin adjudicated as failed, left out of the exported dialogues."""


def _record(row: dict[str, Any], edits: list[dict[str, Any]], given: list[dict[str, Any]]) -> dict[str, Any]:
    """The review record a dialogue carries in ``meta.params.review``."""
    return {
        "decisions": dict(sorted(row["decisions"].items())),
        "adjudicated": row["adjudicated"],
        "final": row["final"],
        "checks": {name: dict(sorted(v.items())) for name, v in sorted(row["checks"].items())},
        "check_adjudicated": dict(sorted(row["check_adjudicated"].items())),
        "flags": dict(sorted(row["flags"].items())),
        "seconds": dict(sorted(row["seconds"].items())),
        "dropped_checks": row["dropped_checks"],
        "edits": edits,
        "verdict_history": given,
    }


def export_approved(
    db: ReviewDB, out: str | Path, *, exclude: str | Path | None = None, overwrite: bool = False
) -> Exported:
    """Write the dialogues whose final decision (adjudicated, else the majority) is approve."""
    from yanami.contract import Dialogue
    from yanami.store import MANIFEST, Dataset, DatasetWriter, Generator, find_leakage

    source = Dataset(db.dataset_path())
    manifest_text, manifest_sha = db.source_manifest()
    if (source.root / MANIFEST).read_text(encoding="utf-8") != manifest_text:
        raise UserError(f"{source.root / MANIFEST}: the dataset changed since `yanami review init`; export refused")
    rows = db.table()
    approved = [r for r in rows if r["final"] == Decision.APPROVE.value and not r["open_checks"]]
    held = sum(1 for r in rows if r["final"] == Decision.APPROVE.value and r["open_checks"])
    edits: dict[str, list[dict[str, Any]]] = {}
    for e in db.edits():
        edits.setdefault(e.dialogue, []).append(
            {"version": e.version, "user": e.user, "at": e.at, "path": e.path, "before": e.before, "after": e.after}
        )
    given: dict[str, list[dict[str, Any]]] = {}
    for h in db.verdict_history():
        given.setdefault(h.pop("dialogue"), []).append(h)
    dialogues = []
    for row in approved:
        data, _ = db.dialogue(row["id"])
        _drop_checks(data, set(row["dropped_checks"]))
        params = dict(data["meta"].get("params") or {})
        params["review"] = _record(row, edits.get(row["id"], []), given.get(row["id"], []))
        data["meta"] = {**data["meta"], "params": params}
        dialogues.append(Dialogue.model_validate(data))

    near = 0
    if exclude is not None:
        report = find_leakage(exclude, source.root)
        shared = {Path(rel).stem for rel in report.exact}
        leaked = sorted({p.sha256 for d in dialogues for p in d.images()} & shared)
        if leaked:
            raise UserError(
                f"--exclude {exclude}: {len(leaked)} image(s) of the approved dialogues are exact copies of "
                f"training images (first: {leaked[0]}); nothing written"
            )
        wanted = {p.sha256 for d in dialogues for p in d.images()}
        near = sum(1 for n in report.near if Path(n.bench).stem in wanted)

    review: dict[str, Any] = {
        "dialogues": len(rows),
        "approved": len(approved),
        "adjudicated": sum(1 for r in rows if r["adjudicated"]),
        "undecided": sum(1 for r in rows if r["final"] is None),
        "held_for_check_adjudication": held,
        "dropped_checks": sum(len(r["dropped_checks"]) for r in approved),
        "edits": sum(len(v) for v in edits.values()),
        "agreement": agreement(rows),
    }
    generator = Generator(
        name="review",
        version=__version__,
        params={
            "source": {
                "manifest_sha256": manifest_sha,
                "generator": json.loads(manifest_text).get("generator"),
            },
            "review": review,
        },
    )
    with DatasetWriter(out, split=source.manifest.split, generator=generator, overwrite=overwrite) as writer:
        for d in dialogues:
            for part in d.images():
                writer.add_encoded(part, source.image_bytes(part))
            writer.add_dialogue(d)
    return Exported(Path(out), len(dialogues), len(rows), review["undecided"], near, held, review["dropped_checks"])


def _drop_checks(data: dict[str, Any], dropped: set[str]) -> None:
    """Remove the checks the admin failed from a dialogue's turns and from its questions' aligned checks."""
    if not dropped:
        return
    for t in data["turns"]:
        t["checks"] = [c for c in t["checks"] if c["id"] not in dropped]
    for q in data.get("questions", []):
        q["aligned_checks"] = [c for c in q.get("aligned_checks", []) if c not in dropped]
