"""Dataset statistics in the shape of the YANAMI paper's Tables 7 (corpus) and 8 (by scenario).

WEAVE and IMUG-Bench dialogues are counted the same way, grouped by domain instead of scenario,
with their graded checks (key points, evaluation points) and answered text turns beside.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel

from yanami.contract import Capability, CheckKind, Dialogue, QuestionType, Scenario, TextPart

if TYPE_CHECKING:
    from rich.table import Table

IMAGE_BUCKETS = ("<4", "=4", "=5", ">=4", ">=5", ">=6")


class ScenarioStats(BaseModel):
    """One row of Table 8."""

    dialogues: int
    share: float
    """Fraction of all dialogues."""
    images: int
    turns: int
    questions: int
    atomic_checks: int
    capability_checks: int
    atomic_checks_per_dialogue: float
    graded_checks: int = 0
    """WEAVE key points and IMUG-Bench evaluation points."""
    answered_turns: int = 0
    """Target text turns (a graded answer)."""


class DatasetStats(BaseModel):
    """Table 7 and Table 8 of the paper, for one dataset.

    A dialogue's images are its distinct images (a hash repeated inside a dialogue counts
    once); every turn is one user and one assistant message.
    """

    dialogues: int
    images: int
    turns: int
    user_messages: int
    assistant_messages: int
    messages: int
    images_per_dialogue: float
    turns_per_dialogue: float
    messages_per_dialogue: float
    max_turns: int
    max_messages: int
    images_per_turn: float
    images_per_dialogue_distribution: dict[str, int]
    """Dialogues by image count: <4, =4, =5, >=4, >=5, >=6."""
    images_per_dialogue_shares: dict[str, float]
    scenario_dialogues: dict[str, int]
    scenario_shares: dict[str, float]
    capability_dialogues: dict[str, int]
    """Dialogues that exercise each capability."""
    capability_coverage: float
    """Fraction of the six capabilities exercised by at least one dialogue."""
    dialogues_with_4_capabilities: int
    """Dialogues that exercise at least four capabilities."""
    questions: dict[str, int]
    """Questions per type (RR, CR, CT, CU)."""
    atomic_checks: int
    capability_checks: int
    atomic_checks_per_dialogue: float
    target_turns: int
    by_scenario: dict[str, ScenarioStats]
    """Per YANAMI scenario (all four when the dataset has YANAMI dialogues), then per domain of
    the other families, in the order met."""
    families: dict[str, int] = {}
    """Dialogues per family."""
    key_points: int = 0
    evaluation_points: int = 0
    answered_turns: int = 0
    """Target text turns: a graded answer (WEAVE's text turns, IMUG-Bench's text tasks)."""
    dynamic_answers: int = 0
    """Answered turns whose answer is resolved after the model has answered."""
    lexical_variety: dict[str, float] = {}
    """Distinct n-grams per 1,000 words of message text (``1``, ``2``, ``3``), over the first
    `LEXICAL_SAMPLE` dialogues (a fixed sample: the ratio falls as a corpus grows)."""
    lexical_words: int = 0
    """The words that ratio counts."""


LEXICAL_SAMPLE = 2000
"""Dialogues whose messages the lexical variety is measured on."""
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

PAPER_CORPUS = {
    "Total dialogues": 402_639,
    "Total images": 2_047_236,
    "Total dialogue turns": 2_643_291,
    "Average images / dialogue": 5.08,
    "Average turns / dialogue": 6.56,
    "Maximum turns / dialogue": 43,
}
"""YANAMI-400K's shape (the paper's Table 7), shown beside a dataset's own."""


def _count_grams(d: Dialogue, grams: dict[int, set[str]]) -> int:
    """Add a dialogue's message n-grams (within a message) to ``grams``; returns its word count."""
    total = 0
    for t in d.turns:
        for m in (t.user, t.assistant):
            tokens = _WORD.findall(" ".join(p.text for p in m.parts if isinstance(p, TextPart)).lower())
            total += len(tokens)
            for k, seen in grams.items():
                seen.update(" ".join(tokens[i : i + k]) for i in range(len(tokens) - k + 1))
    return total


def _div(a: float, b: float) -> float:
    return a / b if b else 0.0


def dataset_stats(dialogues: Iterable[Dialogue]) -> DatasetStats:
    """Compute the statistics in one streaming pass."""
    n = images = turns = max_turns = atomic = capability = target = 0
    buckets: Counter[str] = Counter()
    scen: Counter[str] = Counter()
    caps: Counter[str] = Counter()
    four = 0
    questions: Counter[str] = Counter()
    per: dict[str, Counter[str]] = {s.value: Counter() for s in Scenario}
    families: Counter[str] = Counter()
    graded: Counter[str] = Counter()
    grams: dict[int, set[str]] = {1: set(), 2: set(), 3: set()}
    words = 0
    for d in dialogues:
        n += 1
        if n <= LEXICAL_SAMPLE:
            words += _count_grams(d, grams)
        k = d.image_count()
        images += k
        nt = len(d.turns)
        turns += nt
        max_turns = max(max_turns, nt)
        for name, hit in zip(IMAGE_BUCKETS, (k < 4, k == 4, k == 5, k >= 4, k >= 5, k >= 6), strict=True):
            buckets[name] += hit
        families[d.family] += 1
        if d.scenario is not None:
            scen[d.scenario.value] += 1
        dcaps = set(d.capabilities)
        for t in d.turns:
            dcaps.update(t.capabilities)
        caps.update(c.value for c in dcaps)
        four += len(dcaps) >= 4
        questions.update(q.type.value for q in d.questions)
        n_atomic = n_cap = n_graded = n_answered = 0
        for t in d.turns:
            target += t.is_target
            if t.answer is not None:
                n_answered += 1
                graded["dynamic"] += t.answer.dynamic
            for c in t.checks:
                if c.kind is CheckKind.ATOMIC:
                    n_atomic += 1
                elif c.kind is CheckKind.CAPABILITY:
                    n_cap += 1
                else:
                    n_graded += 1
                    graded[c.kind] += 1
        atomic += n_atomic
        capability += n_cap
        graded["answered"] += n_answered
        row = per.setdefault(d.group, Counter())
        row.update(dialogues=1, images=k, turns=nt, questions=len(d.questions), atomic=n_atomic, capability=n_cap)
        row.update(graded=n_graded, answered=n_answered)
    return DatasetStats(
        dialogues=n,
        images=images,
        turns=turns,
        user_messages=turns,
        assistant_messages=turns,
        messages=2 * turns,
        images_per_dialogue=_div(images, n),
        turns_per_dialogue=_div(turns, n),
        messages_per_dialogue=_div(2 * turns, n),
        max_turns=max_turns,
        max_messages=2 * max_turns,
        images_per_turn=_div(images, turns),
        images_per_dialogue_distribution={b: buckets[b] for b in IMAGE_BUCKETS},
        images_per_dialogue_shares={b: _div(buckets[b], n) for b in IMAGE_BUCKETS},
        scenario_dialogues={s.value: scen[s.value] for s in Scenario},
        scenario_shares={s.value: _div(scen[s.value], n) for s in Scenario},
        capability_dialogues={c.value: caps[c.value] for c in Capability},
        capability_coverage=_div(sum(1 for c in Capability if caps[c.value]), len(Capability)),
        dialogues_with_4_capabilities=four,
        questions={q.value: questions[q.value] for q in QuestionType},
        atomic_checks=atomic,
        capability_checks=capability,
        atomic_checks_per_dialogue=_div(atomic, n),
        target_turns=target,
        lexical_variety={str(k): round(1000 * _div(len(g), words), 1) for k, g in grams.items()} if words else {},
        lexical_words=words,
        by_scenario={
            s: ScenarioStats(
                dialogues=row["dialogues"],
                share=_div(row["dialogues"], n),
                images=row["images"],
                turns=row["turns"],
                questions=row["questions"],
                atomic_checks=row["atomic"],
                capability_checks=row["capability"],
                atomic_checks_per_dialogue=_div(row["atomic"], row["dialogues"]),
                graded_checks=row["graded"],
                answered_turns=row["answered"],
            )
            for s, row in per.items()
            # the four scenarios always, unless the dataset is of another family only
            if row["dialogues"] or not families or families["yanami"]
        },
        families=dict(sorted(families.items())),
        key_points=graded["key_point"],  # WEAVE's kind
        evaluation_points=graded["evaluation_point"],  # IMUG-Bench's kind
        answered_turns=graded["answered"],
        dynamic_answers=graded["dynamic"],
    )


def stats_tables(s: DatasetStats) -> list[Table]:
    """The statistics as Rich tables, each narrow enough for an 80-column terminal (print the
    dataset's path on a line of its own: a long path would widen a title).

    No table has more than five columns and every column is short, so even counts in
    the billions fit in 80 columns whole (a number is never cut to fit).
    """
    from rich.table import Table

    def table(name: str, *columns: str, first: str = "") -> Table:
        t = Table(title=name, title_justify="left")
        if first:
            t.add_column(first, no_wrap=True)
        for col in columns:
            t.add_column(col, justify="right", no_wrap=True)
        return t

    yanami = not any(f != "yanami" for f in s.families)
    """Only a YANAMI dataset has capabilities, atomic checks and the paper's corpus to compare with."""
    columns = ("Value", "YANAMI-400K") if yanami else ("Value",)
    t = table("Corpus and sequence statistics", *columns, first="Statistic")
    rows = [
        ("Total dialogues", f"{s.dialogues:,}"),
        ("Total images", f"{s.images:,}"),
        ("Total dialogue turns", f"{s.turns:,}"),
        ("Total user messages", f"{s.user_messages:,}"),
        ("Total assistant messages", f"{s.assistant_messages:,}"),
        ("Total messages", f"{s.messages:,}"),
        ("Average images / dialogue", f"{s.images_per_dialogue:.2f}"),
        ("Average turns / dialogue", f"{s.turns_per_dialogue:.2f}"),
        ("Average messages / dialogue", f"{s.messages_per_dialogue:.2f}"),
        ("Maximum turns / dialogue", f"{s.max_turns:,}"),
        ("Maximum messages / dialogue", f"{s.max_messages:,}"),
        ("Images / dialogue turn", f"{s.images_per_turn:.2f}"),
        ("Target turns", f"{s.target_turns:,}"),
    ]
    if yanami:
        rows += [
            ("Dialogues with >= 4 capabilities", f"{s.dialogues_with_4_capabilities:,}"),
            ("Capability coverage", f"{100 * s.capability_coverage:.0f}%"),
            ("Atomic checks", f"{s.atomic_checks:,}"),
            ("Atomic checks / dialogue", f"{s.atomic_checks_per_dialogue:.2f}"),
            ("Capability-specific checks", f"{s.capability_checks:,}"),
        ]
    for label, value in rows:
        paper = PAPER_CORPUS.get(label)
        t.add_row(label, value, *(("" if paper is None else f"{paper:,}",) if yanami else ()))
    tables = [t]
    if s.lexical_words:
        sample = min(s.dialogues, LEXICAL_SAMPLE)
        t = table(f"Lexical variety (messages of the first {sample:,} dialogues)", "Value", first="Statistic")
        t.add_row("Words", f"{s.lexical_words:,}")
        for k, per_thousand in s.lexical_variety.items():
            t.add_row(f"Distinct {k}-grams / 1,000 words", f"{per_thousand:,.1f}")
        tables.append(t)

    t = table("Images per dialogue", "Images", "Dialogues", "Share")
    for bucket, n in s.images_per_dialogue_distribution.items():
        t.add_row(bucket, f"{n:,}", f"{100 * s.images_per_dialogue_shares[bucket]:.2f}%")
    tables.append(t)

    # Table 8, in two parts so that it fits: sizes, then questions and atomic checks.
    other = any(f != "yanami" for f in s.families)
    group = "Scenario or domain" if other else "Scenario"
    t = table(f"By {group.lower()}: sizes", "Dialogues", "Share", "Images", "Turns", first=group)
    for name, row in s.by_scenario.items():
        t.add_row(name, f"{row.dialogues:,}", f"{100 * row.share:.1f}%", f"{row.images:,}", f"{row.turns:,}")
    share = "100.0%" if s.dialogues else "0.0%"
    t.add_row("total", f"{s.dialogues:,}", share, f"{s.images:,}", f"{s.turns:,}")
    tables.append(t)
    if not other:
        t = table(
            f"By {group.lower()}: questions and atomic checks (capability-specific checks excluded)",
            "Questions",
            "Atomic checks",
            "Per dialogue",
            first=group,
        )
        for name, row in s.by_scenario.items():
            t.add_row(name, f"{row.questions:,}", f"{row.atomic_checks:,}", f"{row.atomic_checks_per_dialogue:.2f}")
        total = sum(s.questions.values())
        t.add_row("total", f"{total:,}", f"{s.atomic_checks:,}", f"{s.atomic_checks_per_dialogue:.2f}")
        tables.append(t)

    if other:
        t = table("By domain: graded checks (key or evaluation points) and answered turns", "Checks", "Answered",
                  first="Domain")  # fmt: skip
        for name, row in s.by_scenario.items():
            if row.graded_checks or row.answered_turns:
                t.add_row(name, f"{row.graded_checks:,}", f"{row.answered_turns:,}")
        tables.append(t)
        t = table("Families", "Dialogues", first="Family")
        for fam, n in s.families.items():
            t.add_row(fam, f"{n:,}")
        t.add_row("dynamic answers", f"{s.dynamic_answers:,}")
        tables.append(t)
    if other and not s.families.get("yanami"):
        return tables  # capabilities and DSU questions are YANAMI's
    t = table("Dialogues per capability", "Dialogues", first="Capability")
    for cap, n in s.capability_dialogues.items():
        t.add_row(cap, f"{n:,}")
    tables.append(t)
    t = table("Questions per type", "Questions", first="Type")
    for qtype, n in s.questions.items():
        t.add_row(qtype, f"{n:,}")
    tables.append(t)
    return tables
