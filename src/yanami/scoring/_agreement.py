"""Judge reliability: how well a judge agrees with human ratings, or with another judge.

Item scores: a question's score (0..1); a target turn's generation-side score of equation
(3), 0.6 SC + 0.4 VQ, on 0..1 (a turn without atomic checks or without VQ has none). Binary
agreement is per (item, check).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from yanami.errors import UserError
from yanami.run_format import Prediction, Verdict
from yanami.scoring._weights import image_generation_score, image_sc


def pearson(x: list[float], y: list[float]) -> float | None:
    """Pearson's r (None when either side is constant or there are fewer than 3 pairs)."""
    if len(x) < 3:
        return None
    a, b = np.asarray(x, float), np.asarray(y, float)
    a, b = a - a.mean(), b - b.mean()
    den = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return None if den == 0 else float((a * b).sum() / den)


def ranks(x: list[float]) -> list[float]:
    """Ranks from 1, ties sharing their mean rank."""
    order = sorted(range(len(x)), key=lambda i: x[i])
    out = [0.0] * len(x)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and x[order[j + 1]] == x[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(x: list[float], y: list[float]) -> float | None:
    """Spearman's rho: Pearson's r of the ranks."""
    return pearson(ranks(x), ranks(y))


def pearson_interval(x: list[float], y: list[float], n: int = 1000, seed: int = 42) -> tuple[float, float] | None:
    """95 % percentile bootstrap interval of Pearson's r (resampling pairs)."""
    if len(x) < 3:
        return None
    rng = np.random.default_rng(seed)
    a, b = np.asarray(x, float), np.asarray(y, float)
    idx = rng.integers(0, len(a), size=(n, len(a)))
    xa, yb = a[idx], b[idx]
    xa = xa - xa.mean(axis=1, keepdims=True)
    yb = yb - yb.mean(axis=1, keepdims=True)
    den = np.sqrt((xa * xa).sum(axis=1) * (yb * yb).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (xa * yb).sum(axis=1) / den
    r = r[np.isfinite(r)]
    return (float(np.percentile(r, 2.5)), float(np.percentile(r, 97.5))) if len(r) else None


def cohen_kappa(a: list[bool], b: list[bool]) -> float | None:
    """Cohen's kappa of two binary raters (None with no pairs; 1.0 when both agree on one class)."""
    n = len(a)
    if n == 0:
        return None
    po = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    return 1.0 if pe == 1 else (po - pe) / (1 - pe)


def item_scores(predictions: dict[str, Prediction], verdicts: dict[str, Verdict]) -> dict[str, float]:
    """Each judged item's score on 0..1 (see the module docstring)."""
    out = {}
    for item, v in verdicts.items():
        p = predictions.get(item)
        if p is None or p.status != "ok" or v.status != "ok":
            continue
        if v.score is not None:
            out[item] = float(v.score)
        elif v.checks is not None:
            sc = image_sc([bool(c.passed) for c in v.checks if c.kind == "atomic"])
            score = image_generation_score(sc, v.vq)
            if score is not None:
                out[item] = score / 100
    return out


def check_verdicts(verdicts: dict[str, Verdict]) -> dict[tuple[str, str], bool]:
    """(item, check id) -> passed, over every judged image."""
    return {(item, c.id): bool(c.passed) for item, v in verdicts.items() if v.status == "ok" for c in v.checks or []}


def read_human(path: Path) -> tuple[dict[str, float], dict[tuple[str, str], bool]]:
    """Human ratings: a CSV with ``item`` and ``score`` (0..1; several rows of one item are averaged),
    and optionally ``check`` and ``passed`` (true/false, 1/0) for per-check judgements."""
    try:
        f = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None
    scores: dict[str, list[float]] = {}
    checks: dict[tuple[str, str], bool] = {}
    with f:
        reader = csv.DictReader(f)
        if not reader.fieldnames or "item" not in reader.fieldnames:
            raise UserError(f"{path}:1: the header needs an item column (and score, or check and passed)")
        for lineno, row in enumerate(reader, 2):
            item = (row.get("item") or "").strip()
            if not item:
                raise UserError(f"{path}:{lineno}: item: empty")
            if row.get("check"):
                flag = (row.get("passed") or "").strip().lower()
                if flag not in ("true", "false", "1", "0", "yes", "no"):
                    raise UserError(f"{path}:{lineno}: passed: {row.get('passed')!r} is not true/false")
                checks[(item, row["check"].strip())] = flag in ("true", "1", "yes")
            if row.get("score") not in (None, ""):
                try:
                    value = float(row["score"])  # type: ignore[arg-type]
                except ValueError:
                    raise UserError(f"{path}:{lineno}: score: {row['score']!r} is not a number") from None
                scores.setdefault(item, []).append(value)
    return {k: sum(v) / len(v) for k, v in scores.items()}, checks


def agreement(
    a: dict[str, float], b: dict[str, float], ca: dict[tuple[str, str], bool], cb: dict[tuple[str, str], bool]
) -> dict[str, object]:
    """Pearson (with its bootstrap interval), Spearman and Cohen's kappa between two raters."""
    items = sorted(set(a) & set(b))
    x, y = [a[i] for i in items], [b[i] for i in items]
    keys = sorted(set(ca) & set(cb))
    return {
        "items": len(items),
        "pearson": pearson(x, y),
        "pearson_95ci": pearson_interval(x, y),
        "spearman": spearman(x, y),
        "checks": len(keys),
        "kappa": cohen_kappa([ca[k] for k in keys], [cb[k] for k in keys]),
        "check_agreement": (sum(ca[k] == cb[k] for k in keys) / len(keys)) if keys else None,
    }


def run_agreement(run: Path, judges: list[str], human: Path | None = None) -> dict[str, dict[str, object]]:
    """`agreement` between every pair of raters of a run: its judges' verdicts (by judge name)
    and, with ``human``, the ratings in that CSV (`read_human`); ``{"a vs b": figures}``."""
    from yanami.bench import read_rows
    from yanami.scoring._load import check_run_dir, run_judges

    check_run_dir(run)
    raters = {}
    for name in judges:
        predictions, verdicts, _ = read_rows(run, name)
        if not verdicts:
            have = ", ".join(sorted(j for j, v in run_judges(run).items() if v)) or "none"
            raise UserError(f"{run}: no verdicts of judge {name!r}; the run has verdicts of {have} (`yanami judge`)")
        raters[name] = (item_scores(predictions, verdicts), check_verdicts(verdicts))
    if human is not None:
        raters["human"] = read_human(human)
    if len(raters) < 2:
        raise UserError("agreement needs two raters: two --judge, or a --judge and --human")
    names = list(raters)
    return {
        f"{a} vs {b}": agreement(raters[a][0], raters[b][0], raters[a][1], raters[b][1])
        for i, a in enumerate(names)
        for b in names[i + 1 :]
    }


def agreement_lines(results: dict[str, dict[str, object]]) -> list[str]:
    """One line per pair of raters of `run_agreement`'s figures."""

    def num(x: object) -> str:
        return "-" if x is None else f"{x:.3f}"

    lines = []
    for pair, r in results.items():
        ci = r["pearson_95ci"]
        ci_text = "-" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"  # type: ignore[index]
        lines.append(
            f"{pair}: {r['items']} items, Pearson {num(r['pearson'])} (95 % CI {ci_text}), "
            f"Spearman {num(r['spearman'])}; {r['checks']} checks, kappa {num(r['kappa'])}"
        )
    return lines
