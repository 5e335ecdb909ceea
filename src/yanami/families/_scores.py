"""Scores, tables and the report of a benchmark graded by its own protocol (docs/benchmarks.md).

Every valid item (an ok prediction with an ok verdict) is one `Record`: its domain and class,
the turn it belongs to (numbered as the family's summaries number it) and the protocol's
metrics. What differs between families is their `ProtocolScoring` (in each family's folder):
how a group of records becomes a row of figures, whether a failed item counts (as 0) or is
left out, and their tables. What they share is here: loading runs, the breakdowns (overall, by
domain, class and turn index), GT- against Self-History where two runs differ in history
alone, test-time scaling, the comparability notes, the report, and `ProtocolScorer`, the
`yanami.scoring.Scorer` a family registers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from yanami.contract import NOT_SCORED, Dialogue, RunManifest, UserError, family_of, own_prompts, read_rows
from yanami.scoring import (
    PRIVILEGED_MARK,
    PRIVILEGED_NOTE,
    PRIVILEGED_TABLE_NOTE,
    Page,
    RunLine,
    Scored,
    Table,
    markdown,
    render,
    scaling_table,
)
from yanami.store import open_bench


@dataclass
class Record:
    """One scored item of a family run."""

    item: str
    domain: str
    group: str
    """The domain's class (WEAVE's category, IMUG-Bench's class)."""
    turn: int
    """The turn's number as the family's summaries give it (`ProtocolScoring.turn_number`)."""
    kind: str
    """``image`` or ``text``."""
    mode: str = ""
    """WEAVE: t2i, edit, fusion or vqa."""
    dynamic: bool = False
    metrics: dict[str, float] = field(default_factory=dict)
    failed: bool = False
    """The model failed, refused or gave nothing here, and the family scores that 0 (IMUG-Bench)."""


@dataclass
class FamilyRun:
    """A run of a protocol family, loaded."""

    path: Path
    manifest: RunManifest
    family: str
    label: str
    records: list[Record]
    coverage: dict[str, Any]


Row = dict[str, float | None]


class ProtocolScoring(ABC):
    """A protocol family's scoring rules; each family's folder subclasses it."""

    headline: ClassVar[str] = "score"
    """The row figure that stands for a group (history effect, test-time scaling)."""
    headline_name: ClassVar[str] = "score"
    """What that figure is, with its scale (a column title)."""
    unassigned: ClassVar[str] = ""
    """The class of a domain its class list does not name."""
    coverage_note: ClassVar[str] = "Coverage under 100 %: failed or unjudged items are left out of every score."
    drops_record: ClassVar[bool] = False
    """Whether the benchmark's code, failing to score one turn of a record (a reply it cannot
    parse), writes nothing of the whole record (WEAVE); else it leaves out that turn alone."""

    @abstractmethod
    def row(self, records: list[Record]) -> Row:
        """A group of records' figures."""

    def failed(self, kind: str) -> dict[str, float] | None:
        """The metrics a failed item of this kind scores (None: it is left out, counted in coverage)."""
        return None

    def turn_number(self, index: int, intent: dict[str, Any]) -> int:
        """A turn's number as the family's summaries give it (default: its index, from 0)."""
        return index

    def extra(self, run: FamilyRun) -> dict[str, Any]:
        """Breakdowns beyond overall, domain, class and turn index (WEAVE's turn modes, say)."""
        return {}

    @abstractmethod
    def tables(self, title: str, entries: list[dict[str, Any]], notes: list[str]) -> list[Table]:
        """The overall table and each run's breakdowns, from `family_json`'s entries."""


def load_family_run(
    path: Path, rules: ProtocolScoring, judge: str | None = None, bench: Path | None = None
) -> FamilyRun:
    """A run's records (its predictions joined with the judge's verdicts and the bench)."""
    rows = read_rows(path, judge)
    m = rows.manifest
    dataset = open_bench(path, m, bench, hint="give --bench where it is now")
    dialogues = {d.id: d for d in dataset.read_all()}
    records: list[Record] = []
    unscored: dict[str, str] = {}
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
            zero = rules.failed("text" if d.turns[p.turn].answer is not None else "image")
            if zero is not None:
                records.append(_record(m.family, rules, item, d, p.turn, zero, failed=True))
                coverage["counted_as_zero"] = coverage.get("counted_as_zero", 0) + 1
            continue
        v = rows.verdicts.get(item)
        if v is None or v.scores is None:
            coverage["unjudged" if v is None else "judge_errors"] += 1
            continue
        if v.status != "ok":
            coverage["judge_errors"] += 1
            continue
        if not v.scores:  # (--protocol-source) the benchmark's code scores nothing here: `NOT_SCORED`
            unscored[d.id] = v.reason
            _not_scored(coverage, v.reason)
            continue
        records.append(_record(m.family, rules, item, d, p.turn, dict(v.scores)))
        coverage["valid"] += 1
    if rules.drops_record and unscored:  # the rest of each such record goes with it, as the code drops it
        kept = [r for r in records if r.item.split("/", 1)[0] not in unscored]
        for r in records:
            if r.item.split("/", 1)[0] in unscored:
                _not_scored(coverage, f"{NOT_SCORED}: another turn of the record was not scored, and the code "
                                      "writes nothing of the record")  # fmt: skip
                coverage["counted_as_zero" if r.failed else "valid"] -= 1  # (where it was counted)
        records = kept
    return FamilyRun(path, m, m.family, path.name, records, coverage)


def _not_scored(coverage: dict[str, Any], reason: str) -> None:
    """Count an item the benchmark's code does not score, under its reason."""
    counts = coverage.setdefault("not_scored_by_code", {})
    counts[reason] = counts.get(reason, 0) + 1


def _record(
    family: str,
    rules: ProtocolScoring,
    item: str,
    d: Dialogue,
    index: int,
    metrics: dict[str, float],
    failed: bool = False,
) -> Record:
    turn = d.turns[index]
    intent = turn.hidden.intent if isinstance(turn.hidden.intent, dict) else {}
    recorded = d.meta.params.get("class")  # the class its import recorded (IMUG-Bench: the source's own)
    group = recorded if isinstance(recorded, str) and recorded else None
    return Record(
        item=item,
        domain=d.domain or "",
        group=group or family_of(family).class_of(d.domain or "") or rules.unassigned,
        turn=rules.turn_number(index, intent),
        kind="text" if turn.answer is not None else "image",
        mode=str(intent.get("mode", "")),
        dynamic=bool(turn.answer and turn.answer.dynamic),
        metrics=metrics,
        failed=failed,
    )


def load_family_runs(paths: list[Path], rules: ProtocolScoring, judge: str | None = None) -> list[FamilyRun]:
    """Runs of one family, with labels apart."""
    runs = [load_family_run(p, rules, judge) for p in paths]
    families = {r.family for r in runs}
    if len(families) > 1:
        raise UserError(
            f"runs of different families ({', '.join(sorted(families))}) are not comparable: score them apart"
        )
    labels = [r.label for r in runs]
    for r in runs:
        if labels.count(r.label) > 1:
            r.label = str(r.path)
        if r.manifest.privileged:  # the model read the bench: every table names the run with the mark
            r.label = f"{r.label} {PRIVILEGED_MARK}"
    return runs


def mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def by(records: list[Record], key: Callable[[Record], Any]) -> dict[Any, list[Record]]:
    out: dict[Any, list[Record]] = {}
    for r in records:
        out.setdefault(key(r), []).append(r)
    return out


def family_json(runs: list[FamilyRun], rules: ProtocolScoring) -> dict[str, Any]:
    """Every score of the runs, as JSON-ready data."""
    out = []
    for run in runs:
        row = rules.row
        facts = family_of(run.family)
        order = facts.domains()
        out.append(
            {
                "run": str(run.path),
                "label": run.label,
                "family": run.family,
                "protocol": facts.protocol,
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
                        by(run.records, lambda r: r.domain).items(),
                        key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0]),
                    )
                },
                "by_class": {g: row(rs) for g, rs in by(run.records, lambda r: r.group).items()},
                "by_turn": {str(t): row(rs) for t, rs in sorted(by(run.records, lambda r: r.turn).items())},
                **rules.extra(run),
            }
        )
    family = runs[0].family if runs else None
    return {"family": family, "runs": out, "history_effect": history_effect(runs, rules)}


def history_effect(runs: list[FamilyRun], rules: ProtocolScoring) -> list[dict[str, Any]]:
    """GT- against Self-History for each pair of runs that differ in history alone (same bench,
    model and judge): the headline figure of each, overall and by turn index."""
    out = []
    key, row = rules.headline, rules.row
    for gt in runs:
        for selfh in runs:
            same = (gt.manifest.bench_sha256, gt.manifest.model, gt.manifest.judge) == (
                selfh.manifest.bench_sha256,
                selfh.manifest.model,
                selfh.manifest.judge,
            )
            if not same or gt.manifest.history != "gt" or selfh.manifest.history != "self":
                continue
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


@dataclass(frozen=True)
class FamilyScores:
    """Every score of a set of one family's runs, computed once (`family_scores`): what its
    tables, its report and ``score --json`` show."""

    runs: list[FamilyRun]
    title: str
    """The family's title (``WEAVE``, ``IMUG-Bench``)."""
    data: dict[str, Any]
    """Every score as JSON-ready data (`family_json`)."""
    notes: list[str]
    """What every table says about these runs (`comparable_notes`)."""


def family_scores(runs: list[FamilyRun], rules: ProtocolScoring) -> FamilyScores:
    """The runs' `FamilyScores`: the one place their scores are computed."""
    return FamilyScores(runs, family_of(runs[0].family).title, family_json(runs, rules), comparable_notes(runs, rules))


def build_family_tables(value: FamilyScores, rules: ProtocolScoring) -> list[Table]:
    """The family's tables, as data, from the runs' scores: its own (overall, each run's breakdowns),
    then the comparisons every protocol family has (test-time scaling, GT- against Self-History)."""
    data, runs, title = value.data, value.runs, value.title
    notes = list(value.notes)
    tables = rules.tables(title, data["runs"], notes)
    if any(r.manifest.strategy != "none" for r in runs):
        rows_ = [
            (e["label"], r.manifest.strategy, e["coverage"].get("calls_per_item"), e["overall"][rules.headline])
            for e, r in zip(data["runs"], runs, strict=True)
        ]
        scaling = scaling_table(rows_, rules.headline_name)
        if len({r.manifest.history for r in runs}) > 1:
            notes = [*notes, "Not comparable: these runs differ in history."]
        scaling.notes += notes
        tables.append(scaling)
    for h in data["history_effect"]:
        hrows: list[list[str | float | int | None]] = [
            ["overall", h["overall"]["gt"], h["overall"]["self"], _diff(h["overall"])]
        ]
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


def family_tables(runs: list[FamilyRun], rules: ProtocolScoring) -> list[Table]:
    """The family's tables for these runs (`build_family_tables` of their `family_scores`)."""
    return build_family_tables(family_scores(runs, rules), rules)


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


def comparable_notes(runs: list[FamilyRun], rules: ProtocolScoring) -> list[str]:
    """What every table of these runs says about them: privileged runs, own judge prompts, and
    what makes rows not comparable."""
    notes = [PRIVILEGED_TABLE_NOTE] if any(r.manifest.privileged for r in runs) else []
    if any(judge_prompts(r) == "own" for r in runs):
        notes.append(OWN_PROMPTS_NOTE)
    if len({r.manifest.bench_sha256 for r in runs}) > 1:
        notes.append("Not comparable: these runs are on different benches.")
    if len({(r.manifest.judge.name, r.manifest.judge.version) for r in runs}) > 1:
        notes.append("Not comparable: these runs were graded by different judges.")
    if any(r.coverage["valid"] < r.coverage["expected"] for r in runs):
        notes.append(rules.coverage_note)
    for r in runs:  # (--protocol-source) what the benchmark's code would not score, and why
        for reason, n in sorted(r.coverage.get("not_scored_by_code", {}).items()):
            notes.append(f"{r.label}: {n} item(s) {reason}.")
    return notes


def family_page(value: FamilyScores, tables: list[Table]) -> Page:
    """The family's report page, from the report template every family shares: what was run,
    then every table."""
    lines = [
        RunLine(
            r.label,
            f"{r.manifest.model_name}, {r.manifest.history.upper()}-History, judge {r.manifest.judge.name} "
            f"({r.manifest.judge.version}; prompts: {judge_prompts(r)}), protocol {family_of(r.family).protocol}, "
            f"{r.coverage['valid']} of {r.coverage['expected']} items valid",
            f"{PRIVILEGED_MARK} {PRIVILEGED_NOTE}" if r.manifest.privileged else "",
        )
        for r in value.runs
    ]
    return Page(f"{value.title} report", lines, list(value.notes), tables)


def family_report(runs: list[FamilyRun], tables: list[Table], rules: ProtocolScoring) -> str:
    """One self-contained HTML page of the runs and their tables (`family_page`, rendered)."""
    return render(family_page(family_scores(runs, rules), tables))


@dataclass(frozen=True)
class ProtocolScorer:
    """A protocol family's `yanami.scoring.Scorer`, from its scoring rules."""

    rules: ProtocolScoring

    def score(self, runs: list[Path], judge: str | None) -> Scored:
        loaded = load_family_runs(runs, self.rules, judge)
        value = family_scores(loaded, self.rules)
        table_list = build_family_tables(value, self.rules)
        coverage = (sum(r.coverage["valid"] for r in loaded), sum(r.coverage["expected"] for r in loaded))
        summary = "\n".join(markdown(t, escaped=False) for t in table_list)
        return Scored(table_list[0], table_list, [], value.data, coverage, summary)

    def report(self, runs: list[Path], judge: str | None, samples: int, bench: Path | None) -> tuple[str, list[str]]:
        loaded = load_family_runs(runs, self.rules, judge)
        value = family_scores(loaded, self.rules)
        return render(family_page(value, build_family_tables(value, self.rules))), []
