"""Judge reliability: how well a judge agrees with human ratings, or with another judge.

Item scores: a question's score (0..1); a target turn's generation-side score of equation
(3), 0.6 SC + 0.4 VQ, on 0..1 (a turn without atomic checks or without VQ has none). Binary
agreement is per (item, check).

Against the check verdicts of a review database (`run_human_agreement`, `calibrate_with_humans`;
docs/review.md, "Humans measure the judge"), only the checks the humans labelled count, on the
pictures they saw (the dataset's own): Cohen's kappa on those checks, and an item's score is the
share of its labelled atomic checks that pass (SC / 100: reviewers rate no Visual Quality),
computed alike for the judge and for the humans.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from yanami.contract import Prediction, UserError, Verdict
from yanami.scoring._runs import SHORT
from yanami.scoring._weights import image_generation_score, image_sc

if TYPE_CHECKING:
    from yanami.contract import Judge
    from yanami.review import HumanCheck, HumanVerdicts
    from yanami.store import Dataset

REVIEW_EXTRA = "pip install -e '.[review]'"


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
                    value = float(row["score"])
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


def judge_rows(run: Path, name: str) -> tuple[dict[str, Prediction], dict[str, Verdict]]:
    """A run's predictions and the verdicts judge ``name`` gave them; one line if it gave none."""
    from yanami.contract import read_rows
    from yanami.scoring._load import run_judges

    predictions, verdicts, _ = read_rows(run, name)
    if not verdicts:
        have = ", ".join(sorted(j for j, v in run_judges(run).items() if v)) or "none"
        raise UserError(f"{run}: no verdicts of judge {name!r}; the run has verdicts of {have} (`yanami judge`)")
    return predictions, verdicts


def run_agreement(run: Path, judges: list[str], human: Path | None = None) -> dict[str, dict[str, object]]:
    """`agreement` between every pair of raters of a run: its judges' verdicts (by judge name)
    and, with ``human``, the ratings in that CSV (`read_human`); ``{"a vs b": figures}``."""
    from yanami.scoring._load import check_run_dir

    check_run_dir(run)
    raters = {}
    for name in judges:
        predictions, verdicts = judge_rows(run, name)
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
        low, high = cast(tuple[float, float], ci) if ci is not None else (None, None)
        ci_text = "-" if ci is None else f"[{low:.3f}, {high:.3f}]"
        lines.append(
            f"{pair}: {r['items']} items, Pearson {num(r['pearson'])} (95 % CI {ci_text}), "
            f"Spearman {num(r['spearman'])}; {r['checks']} checks, kappa {num(r['kappa'])}"
        )
    return lines


# -- a judge against the human verdicts of a review database -----------------------------


def is_ratings_csv(human: str | Path) -> bool:
    """Whether ``--human`` names a CSV of ratings (a ``.csv`` file); anything else is a review database."""
    return str(human).lower().endswith(".csv")


def read_review(human: str) -> HumanVerdicts:
    """The human check verdicts of the review database ``human`` (a SQLite file or a URL)."""
    try:
        from yanami.review import read_human_verdicts
    except ImportError as exc:
        raise UserError(
            f"--human {human}: reading a review database needs the review extra ({exc.name} is missing): {REVIEW_EXTRA}"
        ) from None
    return read_human_verdicts(human)


@dataclass(frozen=True)
class _Pair:
    """One labelled check: the humans' label and the judge's verdict."""

    check: HumanCheck
    human: bool
    judge: bool


def _share(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def _figures(pairs: list[_Pair]) -> dict[str, Any]:
    """Judge against humans on some labelled checks: per item scores (the share of the item's
    atomic checks that pass; of all its checks where the pairs hold no atomic check) and per check."""
    scored = [p for p in pairs if p.check.kind == "atomic"] or pairs
    per_item: dict[str, list[_Pair]] = {}
    for p in scored:
        per_item.setdefault(p.check.item, []).append(p)
    items = sorted(per_item)
    judge = [sum(p.judge for p in per_item[i]) / len(per_item[i]) for i in items]
    human = [sum(p.human for p in per_item[i]) / len(per_item[i]) for i in items]
    jv, hv = [p.judge for p in pairs], [p.human for p in pairs]
    return {
        "items": len(items),
        "pearson": pearson(judge, human),
        "pearson_95ci": pearson_interval(judge, human),
        "spearman": spearman(judge, human),
        "checks": len(pairs),
        "kappa": cohen_kappa(jv, hv),
        "check_agreement": _share([a == b for a, b in zip(jv, hv, strict=True)]),
        "judge_pass": _share(jv),
        "human_pass": _share(hv),
    }


def compare_with_humans(
    human: HumanVerdicts, judged: Mapping[str, Mapping[str, bool | None]], left_out: Mapping[str, int]
) -> dict[str, Any]:
    """A judge's verdicts (run item -> {check id: passed}, on the dataset's own pictures) against the
    humans' labels: the figures of `_figures` overall, per check kind (``atomic``, ``atomic/<category>``,
    ``capability``, ``capability/<capability>``) and per scenario, with what was left out and why
    (the review's counts, then ``left_out``'s, then the checks the judge left undecided)."""
    pairs: list[_Pair] = []
    undecided = 0
    for c in human.checks:
        label = c.label
        if label is None or c.item not in judged:
            continue
        passed = judged[c.item].get(c.check)
        if passed is None:  # undecidable for the judge, or a check its verdict lacks
            undecided += 1
            continue
        pairs.append(_Pair(c, label, passed))
    kinds: dict[str, list[_Pair]] = {}
    scenarios: dict[str, list[_Pair]] = {}
    for p in pairs:
        kinds.setdefault(p.check.kind, []).append(p)
        if p.check.aspect:
            kinds.setdefault(f"{p.check.kind}/{p.check.aspect}", []).append(p)
        scenarios.setdefault(p.check.scenario, []).append(p)
    review = human.counts()
    return {
        "database": human.database,
        "dataset": str(human.dataset),
        "annotators": list(human.annotators),
        **_figures(pairs),
        "by_kind": {k: _figures(v) for k, v in sorted(kinds.items())},
        "by_scenario": {k: _figures(v) for k, v in sorted(scenarios.items())},
        "adjudicated_labels": human.adjudicated(),
        "left_out": {**review, "unreviewed_checks": human.unreviewed, **left_out, "judge_undecided_checks": undecided},
    }


def _same_dataset(human: HumanVerdicts, sha: str, what: str) -> None:
    if sha != human.manifest_sha256:
        raise UserError(
            f"--human {human.database}: it reviewed another dataset than {what} "
            f"(the reviewed dataset's manifest SHA-256 is {human.manifest_sha256[:12]}..., {what}'s {sha[:12]}...)"
        )


def _labelled_items(human: HumanVerdicts) -> dict[str, int]:
    """Run item -> how many of its checks have a human label; a one-line error where none has."""
    out: dict[str, int] = {}
    for c in human.checks:
        if c.label is not None:
            out[c.item] = out.get(c.item, 0) + 1
    if not out:
        counts = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in human.counts().items() if v)
        raise UserError(
            f"--human {human.database}: no check has a human label yet (a majority of pass or fail verdicts)"
            + (f"; {counts}" if counts else "")
        )
    return out


def _run_pictures(
    run: Path, human: HumanVerdicts, predictions: dict[str, Prediction], verdicts: dict[str, Verdict], judge: str
) -> tuple[dict[str, dict[str, bool | None]], dict[str, int]]:
    """The judge's check verdicts on the run's reviewed turns whose picture is the dataset's own
    (the SHA-256 of the file the run judged equals the dataset's picture at that turn), and the
    turns left out: with another picture, not in the run (no picture), or not judged."""
    from yanami.contract import Results
    from yanami.store import sha256_file

    labelled = _labelled_items(human)
    judged: dict[str, dict[str, bool | None]] = {}
    left = dict.fromkeys(
        (f"{what}_{unit}" for what in ("other_picture", "not_in_run", "unjudged") for unit in ("items", "checks")), 0
    )

    def leave(what: str, item: str) -> None:
        left[f"{what}_items"] += 1
        left[f"{what}_checks"] += labelled[item]

    with Results(run) as store:
        for item in labelled:
            p = predictions.get(item)
            if p is None or p.status != "ok" or p.image is None:
                leave("not_in_run", item)
                continue
            try:
                sha = sha256_file(store.image_path(p.image))
            except OSError:
                sha = None
            if sha != human.pictures.get(item):
                leave("other_picture", item)
                continue
            v = verdicts.get(item)
            if v is None or v.status != "ok" or v.checks is None:
                leave("unjudged", item)
                continue
            judged[item] = {c.id: c.passed for c in v.checks}
    if not judged:
        if left["other_picture_items"]:
            raise UserError(
                f"{run}: none of its {left['other_picture_items']} turn(s) reviewed in {human.database} shows the "
                "dataset's own picture, which the annotators judged; compare a run of those pictures "
                "(yanami eval BENCH --model reference:oracle)"
            )
        raise UserError(
            f"{run}: none of the {len(labelled)} turn(s) with a human label in {human.database} was judged by "
            f"{judge} in this run ({left['not_in_run_items']} not in the run, {left['unjudged_items']} unjudged)"
        )
    return judged, left


def run_human_agreement(run: Path, judges: list[str], human: str) -> dict[str, dict[str, Any]]:
    """Each judge of a run against the human check verdicts of a review database of the run's
    bench, on the turns whose picture is the dataset's own: ``{"judge vs human": figures}``."""
    from yanami.contract import read_manifest
    from yanami.scoring._load import check_run_dir

    check_run_dir(run)
    manifest = read_manifest(run)
    review = read_review(human)
    _same_dataset(review, manifest.bench_sha256, f"{run}'s bench")
    results = {}
    for name in judges:
        predictions, verdicts = judge_rows(run, name)
        judged, left = _run_pictures(run, review, predictions, verdicts, name)
        results[f"{name} vs human"] = compare_with_humans(review, judged, left)
    return results


def calibrate_with_humans(
    judge: Judge,
    bench: Dataset,
    human: str,
    *,
    limit: int | None = None,
    concurrency: int = 4,
    on_progress: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """``judge`` against the human check verdicts of a review database of ``bench``: the judge
    grades the dataset's own picture of every reviewed turn of the first ``limit`` reviewed
    dialogues (round-robin over scenarios), under GT-History; the figures of `compare_with_humans`."""
    from yanami.contract import GT_HISTORY, ImagePart, JudgeError, Output
    from yanami.store import bench_sha256, select_dialogues

    review = read_review(human)
    _same_dataset(review, bench_sha256(bench), str(bench.root))
    labelled = _labelled_items(review)
    reviewed = [d for d in bench.read_all() if any(f"{d.id}/t{t.index}" in labelled for t in d.turns)]
    jobs = [(d, t) for d in select_dialogues(reviewed, limit) for t in d.turns if f"{d.id}/t{t.index}" in labelled]

    def grade(job: tuple[Any, Any]) -> tuple[str, dict[str, bool | None] | None]:
        d, t = job
        item = f"{d.id}/t{t.index}"
        part = next(p for p in t.assistant.parts if isinstance(p, ImagePart))
        data = bench.image_bytes(part)  # checked: the bytes hash to the picture the annotators saw
        try:
            v = judge.grade(d, Output(item, "turn", t.index, image=data), GT_HISTORY)
        except JudgeError:
            return item, None
        finally:
            if on_progress:
                on_progress()
        return item, {c.id: c.passed for c in v.checks or []}

    judged: dict[str, dict[str, bool | None]] = {}
    left = {"unjudged_items": 0, "unjudged_checks": 0, "not_selected_items": 0, "not_selected_checks": 0}
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for item, checks in pool.map(grade, jobs):
            if checks is None:
                left["unjudged_items"] += 1
                left["unjudged_checks"] += labelled[item]
            else:
                judged[item] = checks
    chosen = {f"{d.id}/t{t.index}" for d, t in jobs}
    for item, n in labelled.items():
        if item not in chosen:
            left["not_selected_items"] += 1
            left["not_selected_checks"] += n
    return {"judge": judge.name, **compare_with_humans(review, judged, left)}


_LEFT_OUT = {
    "fix_verdicts": "fix verdict(s)",
    "ties": "tie(s)",
    "no_vote": "check(s) with no pass/fail vote",
    "edited": "check(s) edited in review",
    "unreviewed_checks": "check(s) not reviewed",
    "other_picture_items": "turn(s) with another picture than the dataset's",
    "not_in_run_items": "turn(s) not in the run",
    "unjudged_items": "turn(s) the judge did not grade",
    "not_selected_items": "turn(s) beyond --limit",
    "judge_undecided_checks": "check(s) the judge left undecided",
}


def human_agreement_lines(results: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The judge-reliability table of `run_human_agreement` (or `calibrate_with_humans`): per judge,
    a row overall, per check kind and per scenario, then what was left out."""

    def num(x: object) -> str:
        return "-" if x is None else f"{x:.3f}"

    def pct(x: object) -> str:
        return "-" if x is None else f"{100 * cast(float, x):.1f} %"

    def row(name: str, r: Mapping[str, Any], width: int) -> str:
        ci = r["pearson_95ci"]
        ci_text = "-" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"
        return (
            f"  {name:<{width}} {r['items']:>5} {num(r['pearson']):>7} {ci_text:>16} {num(r['spearman']):>8} "
            f"{r['checks']:>6} {num(r['kappa']):>6} {pct(r['check_agreement']):>8} {pct(r['judge_pass']):>10} "
            f"{pct(r['human_pass']):>10}"
        )

    lines = []
    for pair, r in results.items():
        who = ", ".join(r["annotators"])
        lines.append(f"{pair}: {r['database']} (dataset {r['dataset']}; annotators {who})")
        rows = [
            ("all", r),
            *((f"kind {k}", v) for k, v in r["by_kind"].items()),
            *((f"scenario {SHORT.get(k, k)}", v) for k, v in r["by_scenario"].items()),
        ]
        width = max(len(name) for name, _ in rows)
        lines.append(
            f"  {'':<{width}} {'items':>5} {'Pearson':>7} {'95 % CI':>16} {'Spearman':>8} {'checks':>6} {'kappa':>6} "
            f"{'agree':>8} {'judge pass':>10} {'human pass':>10}"
        )
        lines += [row(name, v, width) for name, v in rows]
        left = r["left_out"]
        said = [
            f"{left[k]} {_LEFT_OUT.get(k, k.replace('_', ' '))}"
            + (f" ({left[k[: -len('_items')] + '_checks']} checks)" if k.endswith("_items") else "")
            for k in left
            if left[k] and (not k.endswith("_checks") or k in _LEFT_OUT)
        ]
        n = r["adjudicated_labels"]
        adjudicated = f"; {n} label(s) are the admin's adjudication" if n else ""
        lines.append(f"  left out: {', '.join(said) if said else 'nothing'}{adjudicated}")
    return lines
