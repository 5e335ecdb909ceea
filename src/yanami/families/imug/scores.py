"""IMUG-Bench's scoring (``summarize_results.py``): its rows, its tables, its scorer (the family's hook)."""

from __future__ import annotations

from typing import Any

from yanami.families._scores import FamilyRun, ProtocolScorer, ProtocolScoring, Record, Row, mean
from yanami.families.imug.rules import IMUG_TEXT_SCALE
from yanami.scoring import Table

METRICS = {"text": ("mcq", "mcq_code"), "image": ("image", "image_code")}
"""An item's metrics, by the kind of its turn (what a failed item scores 0 on)."""


def value(r: Record, code: bool = False) -> float:
    """A record's score, 0-100: the MCQ score x 100 (as the paper, or as the public code) for a
    text turn, the points' mean x 20 for an image turn (a grid as yanami reads it, or as the
    public analyzer reads it)."""
    if r.kind == "text":
        return r.metrics["mcq_code" if code else "mcq"] * IMUG_TEXT_SCALE
    return r.metrics.get("image_code", r.metrics["image"]) if code else r.metrics["image"]


class ImugScoring(ProtocolScoring):
    """Every turn pooled, 0-100, in both readings; a failed or empty reply counts 0, as its code counts it."""

    headline = "all"
    headline_name = "IMUG-Bench score (all turns), 0-100"
    unassigned = "Unassigned"
    coverage_note = (
        "Coverage under 100 %: a failed, refused or empty reply scores 0 and is counted, as IMUG-Bench's "
        "code counts it; judge errors and unjudged items are left out."
    )

    def row(self, records: list[Record]) -> Row:
        """A group's summary: every turn pooled (all), text turns, image turns; the same with the
        public code's readings."""
        text = [r for r in records if r.kind == "text"]
        image = [r for r in records if r.kind == "image"]
        return {
            "all": mean([value(r) for r in records]),
            "text": mean([value(r) for r in text]),
            "image": mean([value(r) for r in image]),
            "all_code": mean([value(r, code=True) for r in records]),
            "text_code": mean([value(r, code=True) for r in text]),
            "image_code": mean([value(r, code=True) for r in image]),
            "n": len(records),
        }

    def failed(self, kind: str) -> dict[str, float] | None:
        return dict.fromkeys(METRICS[kind], 0.0)

    def turn_number(self, index: int, intent: dict[str, Any]) -> int:
        """The source's own ``turn`` field (from 1 in its data), as its summaries number turns."""
        number = intent.get("turn")
        return number if isinstance(number, int) and not isinstance(number, bool) else index

    def extra(self, run: FamilyRun) -> dict[str, Any]:
        text = [r for r in run.records if r.kind == "text"]
        return {
            "mcq": {
                kind: {
                    "paper": mean([value(r) for r in rs]),
                    "code": mean([value(r, code=True) for r in rs]),
                    "n": len(rs),
                }
                for kind, rs in (
                    ("static", [r for r in text if not r.dynamic]),
                    ("dynamic", [r for r in text if r.dynamic]),
                )
            }
        }

    def tables(self, title: str, entries: list[dict[str, Any]], notes: list[str]) -> list[Table]:
        tables: list[Table] = []
        header = ["Run", "All", "Text", "Image", "All (code)", "Text (code)", "Image (code)"]
        header.append("Valid (+ failed, as 0) / expected")
        rows = [
            [
                e["label"],
                e["overall"]["all"],
                e["overall"]["text"],
                e["overall"]["image"],
                e["overall"]["all_code"],
                e["overall"]["text_code"],
                e["overall"]["image_code"],
                f"{e['coverage']['valid']} (+{e['coverage'].get('counted_as_zero', 0)}) / {e['coverage']['expected']}",
            ]
            for e in entries
        ]
        headline = (
            "0-100. Text turns: the multiple-choice score x 100, as the paper defines it (headline) and as the "
            "public code computes it ((code): its \\b([A-G])\\b finds no letter in a contiguous answer such as BC). "
            "Image turns: the mean of the 0-5 evaluation points x 20; a Geometric Coloring grid read as a person "
            "reads it (headline) and as IMUG-Bench's OpenCV analyzer reads it ((code)). All: every turn pooled; a "
            "failed or empty reply counts 0 in both readings, as IMUG-Bench's code counts it."
        )
        tables.append(Table("imug-overall", f"{title}: overall", header, rows, [headline, *notes]))
        for e in entries:
            for key, name in (("by_domain", "domain"), ("by_class", "class"), ("by_turn", "turn index")):
                readings = ("all", "text", "image", "all_code", "text_code", "image_code")
                trows = [[k, *(v[c] for c in readings), v["n"]] for k, v in e[key].items()]
                tables.append(
                    Table(
                        f"imug-{key}",
                        f"{title} by {name}: {e['label']}",
                        [name.capitalize(), *header[1:7], "Items"],
                        trows,
                    )
                )
            mrows = [[kind, v["paper"], v["code"], v["n"]] for kind, v in e["mcq"].items()]
            tables.append(
                Table(
                    "imug-mcq",
                    f"{title} static and dynamic answers: {e['label']}",
                    ["Answer", "Score", "Score (code)", "Items"],
                    mrows,
                    ["Dynamic answers are resolved by the judge from the model's own earlier output."],
                )
            )
        return tables


SCORER = ProtocolScorer(ImugScoring())
"""The IMUG-Bench family's scorer hook."""
