"""OpenING's scores, as ``summarize_GPT_scores.py`` computes them: per model (a run), the mean of
each criterion over the records it scored, rounded to 2 decimals, and Overall, the mean of those
rounded means, rounded to 2. A record the code drops (`yanami.contract.NOT_SCORED`) counts in
nothing; coverage says how many and why. yanami adds one reading of its own, Overall by
meta-task, labelled as such.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yanami.contract import NOT_SCORED, Prediction, Verdict, family_of, own_prompts, read_rows
from yanami.families.opening import CRITERIA, FACTS
from yanami.families.opening.judge import LATER
from yanami.scoring import Scored, Table, markdown, render_page


@dataclass
class Tally:
    """One run's records, as the code counts them."""

    label: str
    judge: str
    own: bool
    """Whether its judge asked yanami's own prompt (else OpenING's, ``--protocol-source``)."""
    scores: list[tuple[str, dict[str, float]]] = field(default_factory=list)
    """(the record's domain, its criteria's scores), for each record scored."""
    records: int = 0
    not_scored: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    waiting: int = 0
    """Records whose last picture has no verdict yet (the model gave none, or the run is not done)."""


def summary(scores: list[dict[str, float]]) -> dict[str, float]:
    """Each criterion's mean over ``scores``, rounded to 2, then ``Overall``: the mean of those
    rounded means, rounded to 2 (``summarize_GPT_scores.py``, ``process_gpt_scores``)."""
    by: dict[str, list[float]] = {}
    for s in scores:
        for metric, value in s.items():
            by.setdefault(metric, []).append(value)
    out = {metric: round(sum(values) / len(values), 2) for metric, values in by.items() if values}
    if out:
        out["Overall"] = round(sum(out.values()) / len(out), 2)
    return out


def tally(run: Path, judge: str | None) -> Tally:
    """A run's records and verdicts, read from its directory."""
    rows = read_rows(run, judge)
    m = rows.manifest
    t = Tally(run.name, m.judge.name, own_prompts(m.judge.name, m.judge.version))
    last: dict[str, Prediction] = {}
    t.records = len({p.dialogue for p in rows.predictions.values()})
    for p in rows.predictions.values():
        if p.kind == "turn" and (p.dialogue not in last or p.turn > last[p.dialogue].turn):
            last[p.dialogue] = p
    for p in last.values():
        v: Verdict | None = rows.verdicts.get(p.item)
        if v is None or v.reason.startswith(LATER):  # no verdict yet, or not the record's last picture
            t.waiting += 1
        elif v.status == "error":
            t.errors += 1
        elif v.scores:
            t.scores.append((p.scenario, dict(v.scores)))
        else:
            t.not_scored[v.reason.removeprefix(f"{NOT_SCORED}: ")] += 1
    return t


class OpeningScorer:
    """OpenING's scorer (`yanami.scoring.Scorer`)."""

    def score(self, runs: list[Path], judge: str | None) -> Scored:
        tallies = [tally(run, judge) for run in runs]
        tables, data, warnings = self._tables(tallies)
        valid = sum(len(t.scores) for t in tallies)
        expected = sum(t.records for t in tallies)
        text = "\n".join([markdown(tables[0], escaped=False), "", "(yanami score --json: every figure; "
                          "yanami report: the page with the table by meta-task)"])  # fmt: skip
        return Scored(tables[0], tables, warnings, data, (valid, expected), text)

    def _tables(self, tallies: list[Tally]) -> tuple[list[Table], dict[str, Any], list[str]]:
        rows, runs = [], []
        notes: list[str] = []
        for t in tallies:
            s = summary([scores for _, scores in t.scores])
            rows.append([t.label, s.get("Overall"), *(s.get(c) for c in CRITERIA), f"{len(t.scores)}/{t.records}"])
            runs.append({
                "run": t.label, "judge": t.judge, "prompts": "yanami" if t.own else "opening",
                "overall": s.get("Overall"), "criteria": {k: v for k, v in s.items() if k != "Overall"},
                "records": t.records, "scored": len(t.scores), "not_scored": dict(t.not_scored),
                "judge_errors": t.errors, "not_graded": t.waiting,
            })  # fmt: skip
            for reason, n in t.not_scored.most_common():
                notes.append(f"{t.label}: {n} record(s) {NOT_SCORED}: {reason}")
            if t.errors:
                notes.append(f"{t.label}: the judge failed on {t.errors} record(s); the next run grades them again")
            if t.waiting:
                notes.append(f"{t.label}: {t.waiting} record(s) not graded (no last picture from the model, or "
                             "the run is not finished)")  # fmt: skip
            extra = sorted({m for _, s2 in t.scores for m in s2} - set(CRITERIA))
            if extra:
                notes.append(
                    f"{t.label}: the judge also named {', '.join(extra)}, counted in Overall as the code counts it"
                )
        own = {t.own for t in tallies}
        notes.insert(0, "Scores 0-10 by OpenING's seven criteria; Overall is the mean of the rounded criterion means "
                     "(summarize_GPT_scores.py). Records: scored / asked.")  # fmt: skip
        warnings = []
        if own == {True}:
            notes.append("Judged with yanami's own prompt: not comparable with OpenING's published scores "
                         "(--protocol-source asks OpenING's own).")  # fmt: skip
        elif own == {True, False}:
            warnings.append("these runs were judged with different prompts (yanami's and OpenING's): not comparable")
            notes.append(warnings[-1])
        main = Table("opening", "OpenING: scores by criterion (0-10)", ["Run", "Overall", *CRITERIA, "Records"], rows,
                     notes)  # fmt: skip
        by_class = self._by_class(tallies)
        return [main, by_class], {"family": "opening", "runs": runs}, warnings

    def _by_class(self, tallies: list[Tally]) -> Table:
        facts = family_of(FACTS.family)
        rows = []
        for cls in facts.classes:
            cells: list[float | None] = []
            for t in tallies:
                s = summary([scores for domain, scores in t.scores if facts.class_of(domain) == cls])
                cells.append(s.get("Overall"))
            if any(c is not None for c in cells):
                rows.append([cls, *cells])
        return Table("opening-tasks", "OpenING: Overall by meta-task (yanami's reading)",
                     ["Meta-task", *(t.label for t in tallies)], rows,
                     ["OpenING's own summary is per model only; this splits its Overall by the records' meta-task, "
                      "with the same rule."])  # fmt: skip

    def report(self, runs: list[Path], judge: str | None, samples: int, bench: Path | None) -> tuple[str, list[str]]:
        tallies = [tally(run, judge) for run in runs]
        tables, _, warnings = self._tables(tallies)
        entries = [
            {"label": t.label, "details": f"judge {t.judge} ({'yanami' if t.own else 'OpenING'}'s prompt); "
             f"{len(t.scores)} of {t.records} record(s) scored"}
            for t in tallies
        ]  # fmt: skip
        return render_page("OpenING report", runs=entries, warnings=warnings, table_list=tables), warnings


SCORER = OpeningScorer()
