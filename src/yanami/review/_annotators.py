"""Agreement among annotators: Fleiss' kappa on dialogue decisions (statsmodels), Krippendorff's
alpha on check verdicts (the ``krippendorff`` package), overall and per scenario; per annotator,
Cohen's kappa (statsmodels) between the annotator and the majority of the others, and the share
of pairs with another annotator that agree."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from yanami.review._db import VOTES, Decision, Verdict


def fleiss(decisions: Sequence[Sequence[str]]) -> float | None:
    """Fleiss' kappa over dialogues, each given as the list of its annotators' decisions.

    Fleiss' kappa needs the same number of raters per subject: the dialogues with the most
    common count (of at least two) are used. None when it is undefined (no such dialogue, or
    one category for everything)."""
    import numpy as np
    from statsmodels.stats.inter_rater import fleiss_kappa  # type: ignore[import-untyped]  # no stubs

    counts = [len(d) for d in decisions if len(d) >= 2]
    if not counts:
        return None
    n = max(set(counts), key=lambda c: (counts.count(c), c))
    cats = [c.value for c in Decision]
    table = [[d.count(c) for c in cats] for d in decisions if len(d) == n]
    try:
        with np.errstate(all="ignore"):  # one category everywhere: 0/0, undefined
            value = float(fleiss_kappa(table, method="fleiss"))
    except (ZeroDivisionError, ValueError):
        return None
    return None if math.isnan(value) else value


def alpha(units: Sequence[dict[str, str]], raters: Sequence[str]) -> float | None:
    """Krippendorff's alpha (nominal) over check verdicts: each unit maps rater names to a verdict.

    Units fewer than two raters judged carry no pairs and are left out; None when undefined."""
    import krippendorff
    import numpy as np

    codes = {v.value: i for i, v in enumerate(Verdict)}
    kept = [u for u in units if len(u) >= 2]
    if not kept:
        return None
    data = np.full((len(raters), len(kept)), np.nan)
    for j, unit in enumerate(kept):
        for i, r in enumerate(raters):
            if r in unit:
                data[i, j] = codes[unit[r]]
    try:
        value = float(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))
    except (ValueError, ZeroDivisionError):
        return None  # one value in the whole domain: agreement is undefined
    return None if math.isnan(value) else value


def _pairwise(rows: list[dict[str, Any]], name: str, key: str) -> float | None:
    """The share of (this annotator, another) pairs on the same item that agree."""
    same = total = 0
    for row in rows:
        for item in _items(row, key):
            if name not in item:
                continue
            for other, v in item.items():
                if other != name:
                    total += 1
                    same += v == item[name]
    return same / total if total else None


def cohen(pairs: Sequence[tuple[str, str]], categories: Sequence[str]) -> float | None:
    """Cohen's kappa over (rater's label, reference label) pairs; None when undefined (no pairs,
    or chance agreement 1: one category for everything)."""
    import numpy as np
    from statsmodels.stats.inter_rater import cohens_kappa

    if not pairs:
        return None
    index = {c: i for i, c in enumerate(categories)}
    table = np.zeros((len(categories), len(categories)))
    for mine, ref in pairs:
        table[index[mine], index[ref]] += 1
    with np.errstate(all="ignore"):
        value = float(cohens_kappa(table, return_results=False))
    return None if math.isnan(value) or math.isinf(value) else value


def _items(row: dict[str, Any], key: str) -> list[dict[str, str]]:
    """A row's judged items as {rater: label}: its decisions, or one item per check."""
    if key == "decisions":
        return [row["decisions"]]
    checks: dict[str, dict[str, str]] = {}
    for rater, verdicts in row["checks"].items():
        for cid, v in verdicts.items():
            if v in VOTES:  # a skip is no vote
                checks.setdefault(cid, {})[rater] = v
    return list(checks.values())


def _versus_majority(rows: list[dict[str, Any]], name: str, key: str) -> list[tuple[str, str]]:
    """(this annotator's label, the label more than half of the others gave) on every item where
    the others have such a majority."""
    pairs = []
    for row in rows:
        for item in _items(row, key):
            if name not in item:
                continue
            others = [v for r, v in item.items() if r != name]
            top = max(set(others), key=others.count, default=None)
            if top is not None and others.count(top) * 2 > len(others):
                pairs.append((item[name], top))
    return pairs


def _units(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    units: list[dict[str, str]] = []
    for row in rows:
        per_check: dict[str, dict[str, str]] = {}
        for rater, verdicts in row["checks"].items():
            for cid, v in verdicts.items():
                if v in VOTES:
                    per_check.setdefault(cid, {})[rater] = v
        units += per_check.values()
    return units


def agreement(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Agreement from `ReviewDB.table` rows: ``overall``, ``per_group`` (scenario or domain) and
    ``per_annotator``: Cohen's kappa against the others' majority and pairwise agreement with
    the others, on decisions and on checks."""
    raters = sorted({r for row in rows for r in (*row["decisions"], *row["checks"])})

    def block(subset: list[dict[str, Any]]) -> dict[str, Any]:
        decisions = [list(row["decisions"].values()) for row in subset]
        return {
            "dialogues": len(subset),
            "decided_by_two_or_more": sum(1 for d in decisions if len(d) >= 2),
            "fleiss_kappa_decisions": fleiss(decisions),
            "krippendorff_alpha_checks": alpha(_units(subset), raters),
        }

    groups = sorted({row["group"] for row in rows})
    return {
        "overall": block(rows),
        "per_group": {g: block([r for r in rows if r["group"] == g]) for g in groups},
        "per_annotator": {
            name: {
                "decisions": sum(1 for row in rows if name in row["decisions"]),
                "decision_kappa": cohen(_versus_majority(rows, name, "decisions"), [d.value for d in Decision]),
                "check_kappa": cohen(_versus_majority(rows, name, "checks"), [v.value for v in Verdict]),
                "decision_agreement": _pairwise(rows, name, "decisions"),
                "check_agreement": _pairwise(rows, name, "checks"),
            }
            for name in raters
        },
    }


def fmt(value: float | None) -> str:
    """A coefficient for a table: three decimals, or ``n/a`` when undefined."""
    return "n/a" if value is None else f"{value:.3f}"
