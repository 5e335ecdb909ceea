"""Scores and tables of WEAVE and IMUG-Bench runs, by their own protocols (docs/benchmarks.md).

Every valid item (an ok prediction with an ok verdict) is one record: its group, the turn it
belongs to and the protocol's metrics. Failures never enter a score; they are counted in the
coverage. WEAVE is reported on its own 0-1 scale, IMUG-Bench on 0-100, each in its source's
breakdowns (WEAVE: domain, category, turn mode; IMUG-Bench: domain, class; both: turn index),
with the exposure-bias views: score by turn index, GT- against Self-History where two runs of
one bench differ in history only, and IMUG-Bench's static against dynamic answers. IMUG-Bench's
multiple-choice scores are shown as its paper defines them (the headline) and as its public
code computes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yanami.bench import RunManifest, open_bench, read_rows
from yanami.errors import UserError
from yanami.families import Family, family_of, own_prompts
from yanami.schema import Dialogue
from yanami.scoring._compare import PRIVILEGED_MARK
from yanami.scoring._protocols import (
    IMUG_TEXT_SCALE,
    WEAVE_METRICS,
    weave_metric_means,
    weave_score,
    weave_score_code,
)
from yanami.scoring._scores import PRIVILEGED_NOTE
from yanami.scoring._tables import PRIVILEGED_TABLE_NOTE, Table, scaling_table


@dataclass
class Record:
    """One valid item of a family run."""

    item: str
    domain: str
    group: str
    """WEAVE's category or IMUG-Bench's domain class."""
    turn: int
    """The turn's number as the family's summaries give it (`_number`)."""
    kind: str
    """``image`` or ``text``."""
    mode: str = ""
    """WEAVE: t2i, edit, fusion or vqa."""
    dynamic: bool = False
    metrics: dict[str, float] = field(default_factory=dict)
    failed: bool = False
    """IMUG-Bench: the model failed, refused or gave nothing here; scored 0 and counted."""


@dataclass
class FamilyRun:
    """A WEAVE or IMUG-Bench run, loaded."""

    path: Path
    manifest: RunManifest
    family: Family
    label: str
    records: list[Record]
    coverage: dict[str, Any]


def load_family_run(path: Path, judge: str | None = None, bench: Path | None = None) -> FamilyRun:
    """A run's valid records (its predictions joined with the judge's verdicts and the bench)."""
    rows = read_rows(path, judge)
    m = rows.manifest
    family = Family(m.family)
    dataset = open_bench(path, m, bench, hint="give --bench where it is now")
    dialogues = {d.id: d for d in dataset.read_all()}
    records: list[Record] = []
    coverage: dict[str, Any] = {
        "expected": m.items,
        "predicted": len(rows.predictions),
        "valid": 0,
        "judge_errors": 0,
        "unjudged": 0,
        "calls_per_item": round(sum(p.calls for p in rows.predictions.values()) / len(rows.predictions), 3)
        if rows.predictions
        else None,
    }
    for item, p in rows.predictions.items():
        d = dialogues[p.dialogue]
        if p.status != "ok":
            coverage[p.status] = coverage.get(p.status, 0) + 1
            if family == Family.IMUG:  # IMUG-Bench's code scores a failed or empty reply 0 and counts it
                kind = "text" if d.turns[p.turn].answer is not None else "image"
                records.append(_record(family, item, d, p.turn, dict.fromkeys(IMUG_METRICS[kind], 0.0), failed=True))
                coverage["counted_as_zero"] = coverage.get("counted_as_zero", 0) + 1
            continue
        v = rows.verdicts.get(item)
        if v is None or v.scores is None:
            coverage["unjudged" if v is None else "judge_errors"] += 1
            continue
        if v.status != "ok":
            coverage["judge_errors"] += 1
            continue
        records.append(_record(family, item, d, p.turn, dict(v.scores)))
        coverage["valid"] += 1
    return FamilyRun(path, m, family, path.name, records, coverage)


def _record(
    family: Family, item: str, d: Dialogue, index: int, metrics: dict[str, float], failed: bool = False
) -> Record:
    turn = d.turns[index]
    intent = turn.hidden.intent if isinstance(turn.hidden.intent, dict) else {}
    return Record(
        item=item,
        domain=d.domain or "",
        group=_group(family, d),
        turn=_number(family, index, intent),
        kind="text" if turn.answer is not None else "image",
        mode=str(intent.get("mode", "")),
        dynamic=bool(turn.answer and turn.answer.dynamic),
        metrics=metrics,
        failed=failed,
    )


IMUG_METRICS = {"text": ("mcq", "mcq_code"), "image": ("image", "image_code")}
"""An IMUG-Bench item's metrics, by the kind of its turn (what a failed item scores 0 on)."""


def _group(family: Family, d: Dialogue) -> str:
    """A dialogue's class: the one its import recorded (IMUG-Bench's from the source's class
    config, "Unassigned" for a domain it does not list), else the family's built-in one."""
    recorded = d.meta.params.get("class")
    if isinstance(recorded, str) and recorded:
        return recorded
    return family_of(family).class_of(d.domain or "") or ("Unassigned" if family == Family.IMUG else "")


def _number(family: Family, index: int, intent: dict[str, Any]) -> int:
    """A turn's number as the family's own summaries give it: IMUG-Bench's ``turn`` field (from
    1 in its data), WEAVE's pair index (from 0, its ``turn i`` keys)."""
    number = intent.get("turn") if family == Family.IMUG else None
    return number if isinstance(number, int) and not isinstance(number, bool) else index


def load_family_runs(paths: list[Path], judge: str | None = None) -> list[FamilyRun]:
    """Family runs of one family, with labels apart."""
    runs = [load_family_run(p, judge) for p in paths]
    families = {r.family for r in runs}
    if len(families) > 1:
        names = ", ".join(sorted(f.value for f in families))
        raise UserError(f"runs of different families ({names}) are not comparable: score them apart")
    labels = [r.label for r in runs]
    for r in runs:
        if labels.count(r.label) > 1:
            r.label = str(r.path)
        if r.manifest.privileged:  # the model read the bench: every table names the run with the mark
            r.label = f"{r.label} {PRIVILEGED_MARK}"
    return runs


# arithmetic ------------------------------------------------------------------------------------


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def weave_row(records: Iterable[Record]) -> dict[str, float | None]:
    """WEAVE's metrics (0-1) and score of a group of records, pooled as its summary does."""
    means = weave_metric_means(r.metrics for r in records)
    figures = {m: means.get(m) for m in WEAVE_METRICS}
    return {**figures, "score": weave_score(means), "score_code": weave_score_code(means)}


def imug_value(r: Record, code: bool = False) -> float:
    """A record's IMUG-Bench score, 0-100: the MCQ score x 100 (as the paper, or as the public code)
    for a text turn, the points' mean x 20 for an image turn."""
    if r.kind == "text":
        return r.metrics["mcq_code" if code else "mcq"] * IMUG_TEXT_SCALE
    return r.metrics.get("image_code", r.metrics["image"]) if code else r.metrics["image"]


def imug_row(records: list[Record]) -> dict[str, float | None]:
    """IMUG-Bench's summary of a group: every turn pooled (all), text turns, image turns; the same
    with the public code's MCQ score."""
    text = [r for r in records if r.kind == "text"]
    return {
        "all": _mean([imug_value(r) for r in records]),
        "text": _mean([imug_value(r) for r in text]),
        "image": _mean([imug_value(r) for r in records if r.kind == "image"]),
        "all_code": _mean([imug_value(r, code=True) for r in records]),
        "text_code": _mean([imug_value(r, code=True) for r in text]),
        "image_code": _mean([imug_value(r, code=True) for r in records if r.kind == "image"]),
        "n": len(records),
    }


def _by(records: list[Record], key: Callable[[Record], Any]) -> dict[Any, list[Record]]:
    out: dict[Any, list[Record]] = {}
    for r in records:
        out.setdefault(key(r), []).append(r)
    return out


def _row_of(run: FamilyRun) -> Callable[[list[Record]], dict[str, float | None]]:
    return weave_row if run.family == Family.WEAVE else imug_row


def family_json(runs: list[FamilyRun]) -> dict[str, Any]:
    """Every score of the runs, as JSON-ready data."""
    out = []
    for run in runs:
        row = _row_of(run)
        order = family_of(run.family).domains()
        entry: dict[str, Any] = {
            "run": str(run.path),
            "label": run.label,
            "family": run.family.value,
            "protocol": family_of(run.family).protocol,
            "history": run.manifest.history,
            "model": run.manifest.model_name,
            "judge": run.manifest.judge.name,
            "judge_prompts": judge_prompts(run),
            "privileged": bool(run.manifest.privileged),
            "coverage": run.coverage,
            "overall": row(run.records),
            "by_domain": {
                d: row(rs)
                for d, rs in sorted(
                    _by(run.records, lambda r: r.domain).items(),
                    key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0]),
                )
            },
            "by_class": {g: row(rs) for g, rs in _by(run.records, lambda r: r.group).items()},
            "by_turn": {str(t): row(rs) for t, rs in sorted(_by(run.records, lambda r: r.turn).items())},
        }
        if run.family == Family.WEAVE:
            entry["by_mode"] = {m: row(rs) for m, rs in _by(run.records, lambda r: r.mode).items()}
        else:
            text = [r for r in run.records if r.kind == "text"]
            entry["mcq"] = {
                kind: {
                    "paper": _mean([imug_value(r) for r in rs]),
                    "code": _mean([imug_value(r, code=True) for r in rs]),
                    "n": len(rs),
                }
                for kind, rs in (
                    ("static", [r for r in text if not r.dynamic]),
                    ("dynamic", [r for r in text if r.dynamic]),
                )
            }
        out.append(entry)
    return {"family": runs[0].family.value if runs else None, "runs": out, "history_effect": history_effect(runs)}


def history_effect(runs: list[FamilyRun]) -> list[dict[str, Any]]:
    """GT- against Self-History for each pair of runs that differ in history alone (same bench,
    model and judge): the score of each, overall and by turn index."""
    out = []
    for gt in runs:
        for selfh in runs:
            same = (gt.manifest.bench_sha256, gt.manifest.model, gt.manifest.judge) == (
                selfh.manifest.bench_sha256,
                selfh.manifest.model,
                selfh.manifest.judge,
            )
            if not same or gt.manifest.history != "gt" or selfh.manifest.history != "self":
                continue
            key = "score" if gt.family == Family.WEAVE else "all"
            row = _row_of(gt)
            turns = sorted({r.turn for r in gt.records} | {r.turn for r in selfh.records})
            out.append(
                {
                    "gt": gt.label,
                    "self": selfh.label,
                    "overall": {"gt": row(gt.records)[key], "self": row(selfh.records)[key]},
                    "by_turn": {
                        str(t): {
                            "gt": row([r for r in gt.records if r.turn == t])[key],
                            "self": row([r for r in selfh.records if r.turn == t])[key],
                        }
                        for t in turns
                    },
                }
            )
    return out


# tables ----------------------------------------------------------------------------------------


def family_tables(runs: list[FamilyRun]) -> list[Table]:
    """The family's tables for these runs (one run's breakdowns each, then the comparisons)."""
    data = family_json(runs)
    weave = runs[0].family == Family.WEAVE
    title = family_of(runs[0].family).title
    tables: list[Table] = []
    notes = _comparable_notes(runs)
    if weave:
        cols = ["key_point", "visual_consistency", "image_quality", "accuracy", "score", "score_code"]
        header = ["Run", "History", "KP", "VC", "IQ", "ACC", "Score", "Score (code)", "Valid / expected"]
        rows = [
            [
                e["label"],
                e["history"],
                *(e["overall"][c] for c in cols),
                f"{e['coverage']['valid']}/{e['coverage']['expected']}",
            ]
            for e in data["runs"]
        ]
        weights = (
            "0.4 KP + 0.1 VC + 0.2 IQ + 0.3 ACC (0.5 / 0.2 / 0.3 without text turns); 0-1, WEAVE's scale. "
            "Score (code): as WEAVE's summarize.py prints it, each metric rounded to 3 places before weighting."
        )
        tables.append(Table("weave-overall", f"{title}: overall", header, rows, [weights, *notes]))
        for e in data["runs"]:
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
    else:
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
            for e in data["runs"]
        ]
        headline = (
            "0-100. Text turns: the multiple-choice score x 100, as the paper defines it (headline) and as the "
            "public code computes it ((code): its \\b([A-G])\\b finds no letter in a contiguous answer such as BC). "
            "Image turns: the mean of the 0-5 evaluation points x 20; a Geometric Coloring grid read as a person "
            "reads it (headline) and as IMUG-Bench's OpenCV analyzer reads it ((code)). All: every turn pooled; a "
            "failed or empty reply counts 0 in both readings, as IMUG-Bench's code counts it."
        )
        tables.append(Table("imug-overall", f"{title}: overall", header, rows, [headline, *notes]))
        for e in data["runs"]:
            for key, name in (("by_domain", "domain"), ("by_class", "class"), ("by_turn", "turn index")):
                trows = [[k, v["all"], v["text"], v["image"], v["text_code"], v["n"]] for k, v in e[key].items()]
                tables.append(
                    Table(
                        f"imug-{key}",
                        f"{title} by {name}: {e['label']}",
                        [name.capitalize(), "All", "Text", "Image", "Text (code)", "Items"],
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
    if any(r.manifest.strategy != "none" for r in runs):
        key = "score" if weave else "all"
        rows_ = [
            (e["label"], r.manifest.strategy, e["coverage"].get("calls_per_item"), e["overall"][key])
            for e, r in zip(data["runs"], runs, strict=True)
        ]
        scaling = scaling_table(rows_, "WEAVE score, 0-1" if weave else "IMUG-Bench score (all turns), 0-100")
        if len({r.manifest.history for r in runs}) > 1:
            notes = [*notes, "Not comparable: these runs differ in history."]
        scaling.notes += notes
        tables.append(scaling)
    for h in data["history_effect"]:
        hrows = [["overall", h["overall"]["gt"], h["overall"]["self"], _diff(h["overall"])]]
        hrows += [[f"turn {t}", v["gt"], v["self"], _diff(v)] for t, v in h["by_turn"].items()]
        tables.append(
            Table(
                "history-effect",
                f"{title}: GT- against Self-History ({h['gt']} vs {h['self']})",
                ["", "GT-History", "Self-History", "Self - GT"],
                hrows,
                ["The same bench, model and judge; only the history differs (exposure bias)."],
            )
        )
    return tables


def _diff(v: dict[str, float | None]) -> float | None:
    return None if v["gt"] is None or v["self"] is None else v["self"] - v["gt"]


def judge_prompts(run: FamilyRun) -> str:
    """Whose prompts the run's judge asked: ``own`` (yanami's), ``source`` (the benchmark's own,
    ``--protocol-source``) or ``none`` (rules alone)."""
    j = run.manifest.judge
    if j.name == "rules":
        return "none"
    return "own" if own_prompts(j.name, j.version) else "source"


OWN_PROMPTS_NOTE = (
    "Own judge prompts (yanami's paraphrase of the published rubrics): not comparable with published numbers; "
    "--protocol-source DIR (your checkout of the benchmark's repository) asks the benchmark's own."
)


def _comparable_notes(runs: list[FamilyRun]) -> list[str]:
    notes = [PRIVILEGED_TABLE_NOTE] if any(r.manifest.privileged for r in runs) else []
    if any(judge_prompts(r) == "own" for r in runs):
        notes.append(OWN_PROMPTS_NOTE)
    if len({r.manifest.bench_sha256 for r in runs}) > 1:
        notes.append("Not comparable: these runs are on different benches.")
    if len({(r.manifest.judge.name, r.manifest.judge.version) for r in runs}) > 1:
        notes.append("Not comparable: these runs were graded by different judges.")
    if any(r.coverage["valid"] < r.coverage["expected"] for r in runs):
        if runs[0].family == Family.IMUG:
            notes.append(
                "Coverage under 100 %: a failed, refused or empty reply scores 0 and is counted, as IMUG-Bench's "
                "code counts it; judge errors and unjudged items are left out."
            )
        else:
            notes.append(
                "Coverage under 100 %: failed or unjudged items are left out of every score (WEAVE's evaluator "
                "leaves out the whole sample where one of its turns cannot be graded; yanami only that item)."
            )
    return notes


def family_report(runs: list[FamilyRun], tables: list[Table]) -> str:
    """One self-contained HTML page, from the report template every family shares: what was run,
    then every table."""
    from yanami.scoring._report import render_page

    title = family_of(runs[0].family).title
    entries = [
        {
            "label": r.label,
            "details": f"{r.manifest.model_name}, {r.manifest.history.upper()}-History, judge {r.manifest.judge.name} "
            f"({r.manifest.judge.version}; prompts: {judge_prompts(r)}), protocol {family_of(r.family).protocol}, "
            f"{r.coverage['valid']} of {r.coverage['expected']} items valid",
            "privileged": f"{PRIVILEGED_MARK} {PRIVILEGED_NOTE}" if r.manifest.privileged else "",
        }
        for r in runs
    ]
    return render_page(f"{title} report", runs=entries, warnings=_comparable_notes(runs), table_list=tables)
