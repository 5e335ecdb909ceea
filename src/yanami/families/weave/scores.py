"""WEAVE's scoring (``eval/summarize.py``): its rows, its tables, its scorer (the family's hook)."""

from __future__ import annotations

from typing import Any

from yanami.families._scores import FamilyRun, ProtocolScorer, ProtocolScoring, Record, Row, by
from yanami.families.weave.rules import WEAVE_METRICS, weave_metric_means, weave_score, weave_score_code
from yanami.scoring import Table


class WeaveScoring(ProtocolScoring):
    """Each metric pooled over a group's turns, on WEAVE's 0-1 scale; a failed item is left out."""

    drops_record = True  # eval/main.py: one try around a record's every call; a failure writes none of it

    headline = "score"
    headline_name = "WEAVE score, 0-1"
    coverage_note = (
        "Coverage under 100 %: failed or unjudged items are left out of every score (WEAVE's evaluator "
        "leaves out the whole sample where one of its turns cannot be graded; yanami only that item)."
    )

    def row(self, records: list[Record]) -> Row:
        """WEAVE's metrics (0-1) and score of a group of records, pooled as its summary does."""
        means = weave_metric_means(r.metrics for r in records)
        figures: Row = {m: means.get(m) for m in WEAVE_METRICS}
        return {**figures, "score": weave_score(means), "score_code": weave_score_code(means)}

    def extra(self, run: FamilyRun) -> dict[str, Any]:
        return {"by_mode": {m: self.row(rs) for m, rs in by(run.records, lambda r: r.mode).items()}}

    def tables(self, title: str, entries: list[dict[str, Any]], notes: list[str]) -> list[Table]:
        tables: list[Table] = []
        cols = ["key_point", "visual_consistency", "image_quality", "accuracy", "score", "score_code"]
        header = ["Run", "History", "KP", "VC", "IQ", "ACC", "Score", "Score (code)", "Valid / expected"]
        rows = [
            [
                e["label"],
                e["history"],
                *(e["overall"][c] for c in cols),
                f"{e['coverage']['valid']}/{e['coverage']['expected']}",
            ]
            for e in entries
        ]
        weights = (
            "0.4 KP + 0.1 VC + 0.2 IQ + 0.3 ACC (0.5 / 0.2 / 0.3 without text turns); 0-1, WEAVE's scale. "
            "Score (code): as WEAVE's summarize.py prints it, each metric rounded to 3 places before weighting."
        )
        tables.append(Table("weave-overall", f"{title}: overall", header, rows, [weights, *notes]))
        for e in entries:
            for key, name in (
                ("by_domain", "domain"),
                ("by_class", "category"),
                ("by_mode", "turn mode"),
                ("by_turn", "turn index"),
            ):
                trows = [[k, *(v[c] for c in cols)] for k, v in e[key].items()]
                tables.append(
                    Table(
                        f"weave-{key}",
                        f"{title} by {name}: {e['label']}",
                        [name.capitalize(), "KP", "VC", "IQ", "ACC", "Score", "Score (code)"],
                        trows,
                    )
                )
        return tables


SCORER = ProtocolScorer(WeaveScoring())
"""The WEAVE family's scorer hook."""
