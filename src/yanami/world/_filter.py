"""A build's last word on its questions: letters dealt in balanced blocks, options filtered
against learned readers.

Two steps, on a block of dialogues in the plan's order, after `Balancer` has chosen each
question's distractors against the hand-written battery:

1. `Letters` deals the answer's letter: per question type, the n-th question of that type
   in the plan takes place n % 4 of a seeded permutation of ABCD drawn for block n // 4.
   Every letter is then the answer of a quarter of each type's questions, to one question
   (exactly, for whole blocks); the four types draw their own permutations, so two
   questions of a dialogue share their letter a quarter of the time; a reader who sees one
   dialogue (and not the seed) learns nothing of its letters from where it stands in the plan.
2. `filter_questions` plays adversarial filtering (SWAG, AFLite) against learned readers
   (`yanami.world._readers`): in rounds, a logistic regression and gradient-boosted trees
   are trained on k folds of the block's own questions (folds by dialogue, a new split each
   round); each question then takes, among its alternatives (its candidate distractor
   sets, each in every order around the answer's dealt letter), the one whose distractors
   the readers trained without it score most like the answer (the least summed distance of
   their log-odds from the answer's): distractors as plausible as the answer, neither less
   (a tell) nor more (an inverted tell, which the next reader would learn).
   It stops when no reader beats `TARGET` on any type, when a round no longer helps
   (`PROGRESS`: that round's redraw is undone), or after `ROUNDS`; and it gives up its changes
   where they would hand the hand-written battery a shortcut (above 35 %) the balanced
   questions did not have. The answer's letter never moves, so the letters stay exactly
   balanced.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from yanami.contract import CHOICE_LETTERS, Dialogue, Question, derived, seeded
from yanami.world._readers import (
    FILTER_READERS,
    Reader,
    _Context,
    _context,
    folds_of,
    held_out,
    hits,
    option_designs,
    predict,
)

TARGET = 0.27
"""The filter stops once no reader's held-out accuracy on any type is above this (the bar is 30 %)."""
ROUNDS = 2
"""At most this many rounds of training and redrawing."""
PROGRESS = 0.02
"""A round that lowers the strongest reader's held-out accuracy by less than this is the last:
the questions left are ones no alternative hides (their candidates give nothing to redraw)."""
FOLDS = 3
"""Folds of the filter's readers (by dialogue)."""
ALTERNATIVES = 48
"""At most this many alternatives (distractor set and order) weighed per question and round."""


class Letters:
    """Deals answer letters in the plan's order, per question type, from balanced blocks of four."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.dealt: dict[str, int] = {}

    def place(self, qtype: str) -> int:
        """The next answer place (0..3) for a question of ``qtype``."""
        n = self.dealt.get(qtype, 0)
        self.dealt[qtype] = n + 1
        block = list(range(4))
        seeded("letters", self.seed, qtype, n // 4).shuffle(block)
        return block[n % 4]


def _arranged(answer: str, distractors: Sequence[str], place: int) -> list[str]:
    options = list(distractors)
    options.insert(place, answer)
    return options


def _with_options(q: Question, options: list[str]) -> Question:
    intent = q.hidden.intent if isinstance(q.hidden.intent, dict) else {}
    alternatives = intent.get("alternatives")
    kept = alternatives.items() if isinstance(alternatives, dict) else ()
    hidden = {**intent, "alternatives": {k: a for k, a in kept if a in options and a != q.answer}}
    return q.model_copy(
        update={
            "choices": options,
            "answer_letters": [CHOICE_LETTERS[options.index(q.answer)]],
            "hidden": q.hidden.model_copy(update={"intent": hidden}),
        }
    )


def deal_letters(dialogues: list[Dialogue], letters: Letters) -> list[Dialogue]:
    """The dialogues with each four-option question's answer moved to its dealt place (the
    distractors keep their order)."""
    out = []
    for d in dialogues:
        questions = []
        for q in d.questions:
            if not q.choices or len(q.choices) != 4 or q.answer not in q.choices:
                questions.append(q)
                continue
            rest = [c for c in q.choices if c != q.answer]
            questions.append(_with_options(q, _arranged(q.answer, rest, letters.place(q.type.value))))
        out.append(d.model_copy(update={"questions": questions}))
    return out


@dataclass
class _Item:
    """One question the filter may redraw."""

    dialogue: int
    question: int
    qtype: str
    key: str
    ctx: _Context
    names: list[str]
    """The answer, then its candidate distractors."""
    place: int
    alternatives: np.ndarray
    """(A, 4) option lists (indexes into ``names``, letter order) it may take, the answer always
    at ``place``; the current one first."""


def _alternatives(q: Question, names: list[str], place: int, salt: tuple[object, ...]) -> np.ndarray:
    """Every option list a question may take: the current one first, then its candidate
    distractor sets in each order around the answer's place (a seeded sample of them)."""
    index = {o: k for k, o in enumerate(names)}
    now = [index[c] for c in q.choices]
    out = [now]
    for triple in itertools.combinations(range(1, len(names)), 3):
        for order in itertools.permutations(triple):
            opts = list(order)
            opts.insert(place, 0)
            if opts != now:
                out.append(opts)
    if len(out) > ALTERNATIVES:
        out = [now, *seeded("filter alternatives", *salt).sample(out[1:], ALTERNATIVES - 1)]
    return np.array(out)


@dataclass
class FilterReport:
    """What the filter did to a block."""

    rounds: list[dict[str, dict[str, float]]] = field(default_factory=list)
    """Per round: reader -> type -> held-out accuracy of the questions as they stood."""
    stuck: list[dict[str, float]] = field(default_factory=list)
    """Per round: type -> share of questions whose every alternative left the answer the readers' pick."""
    changed: int = 0
    """Questions whose options the filter changed."""
    reverted: bool = False
    """Whether the filter gave its changes up because the hand-written battery found a shortcut in them."""


def filter_questions(
    dialogues: list[Dialogue],
    seed: int,
    readers: Sequence[Reader] = FILTER_READERS,
    rounds: int = ROUNDS,
    target: float = TARGET,
    report: FilterReport | None = None,
) -> list[Dialogue]:
    """The dialogues with their questions' distractors and order redrawn until no learned reader
    of the visible text beats ``target`` held out (see the module docstring); answers and their
    letters stay. Deterministic in the dialogues, ``seed`` and settings."""
    items: list[_Item] = []
    for i, d in enumerate(dialogues):
        for j, q in enumerate(d.questions):
            if not q.choices or len(q.choices) != 4 or q.answer not in q.choices:
                continue
            intent = q.hidden.intent if isinstance(q.hidden.intent, dict) else {}
            found = intent.get("candidates")
            cands = [str(c) for c in found] if isinstance(found, list) else []
            names = list(dict.fromkeys([q.answer, *(c for c in q.choices if c != q.answer), *cands]))
            place = q.choices.index(q.answer)
            alts = _alternatives(q, names, place, (seed, d.id, q.id))
            items.append(_Item(i, j, q.type.value, f"{d.id}:{q.id}", _context(d, q), names, place, alts))
    chosen = {it.key: 0 for it in items}  # the alternative each question takes
    by_key = {it.key: it for it in items}
    by_type: dict[str, list[_Item]] = {}
    for it in items:
        by_type.setdefault(it.qtype, []).append(it)

    def options(it: _Item) -> list[str]:
        return [it.names[k] for k in it.alternatives[chosen[it.key]]]

    def others(it: _Item) -> list[tuple[str, list[str]]]:
        d = dialogues[it.dialogue]
        out = []
        for k, o in enumerate(d.questions):
            if k != it.question and o.choices:
                mine = by_key.get(f"{d.id}:{o.id}")
                out.append((o.text, options(mine) if mine is not None else list(o.choices)))
        return out

    best, kept = 1.0, dict(chosen)
    for r in range(rounds + 1):
        accuracies: dict[str, dict[str, float]] = {}
        stuck: dict[str, float] = {}
        plans: dict[str, list[int]] = {}
        for qtype, group in sorted(by_type.items()):
            related = [others(it) for it in group]
            # the options as they stand, to train on; every alternative's design is built one
            # fold at a time below (they are many: holding all of them at once is what a build's
            # memory would grow with)
            x = np.stack(
                [
                    option_designs(it.ctx, it.names, it.alternatives[chosen[it.key] : chosen[it.key] + 1], rel)[0]
                    for it, rel in zip(group, related, strict=True)
                ]
            )
            y = np.array([it.place for it in group])
            folds = folds_of([dialogues[it.dialogue].id for it in group], FOLDS, ("filter", seed, qtype, r))
            models = []
            for reader in readers:
                scores, fitted = held_out(reader, derived("filter", seed, qtype, r, bits=32), x, y, folds)
                accuracies.setdefault(reader.name, {})[qtype] = float(hits(scores, y).mean())
                models.append(fitted)
            # every alternative of every question, scored by the readers trained without it
            # summed ranks (who the readers pick), and how far the distractors' scores lie from the answer's
            total = [np.zeros(it.alternatives.shape) for it in group]
            gap = [np.zeros(len(it.alternatives)) for it in group]
            for f in sorted(set(folds.tolist())):
                mine = [k for k in range(len(group)) if folds[k] == f]
                if not mine:
                    continue
                designs = {
                    k: option_designs(group[k].ctx, group[k].names, group[k].alternatives, related[k]) for k in mine
                }
                batch = np.concatenate([designs[k] for k in mine])
                for fitted in models:
                    if f not in fitted:
                        continue
                    s = np.clip(predict(fitted[f], batch), 1e-6, 1 - 1e-6)
                    logit = np.log(s / (1 - s))
                    ranked = np.argsort(np.argsort(s, axis=1), axis=1)
                    at = 0
                    for k in mine:
                        n, place = len(designs[k]), group[k].place
                        total[k] += ranked[at : at + n]
                        here = logit[at : at + n]
                        gap[k] += np.abs(here - here[:, place : place + 1]).sum(axis=1) / 3
                        at += n
            picks, stuck_n = [], 0
            for it, t, g in zip(group, total, gap, strict=True):
                me = t[:, it.place : it.place + 1]
                stuck_n += bool(((t < me).sum(axis=1) == 3).all())  # the readers' pick in every alternative
                noise = seeded("filter ties", seed, it.key, r)
                cost = g + np.array([noise.random() for _ in g]) * 1e-6
                picks.append(int(np.argmin(cost)))
            plans[qtype] = picks
            stuck[qtype] = stuck_n / len(group)
        if report is not None:
            report.rounds.append(accuracies)
            report.stuck.append(stuck)
        worst = max(a for per in accuracies.values() for a in per.values())
        if r > 0 and worst > best - PROGRESS:  # the last redraw did not help: undo it
            chosen.update(kept)
            break
        best, kept = worst, dict(chosen)
        if r == rounds or worst <= target:
            break
        for qtype, picks in plans.items():
            for it, p in zip(by_type[qtype], picks, strict=True):
                chosen[it.key] = p
    out = []
    changed = 0
    for i, d in enumerate(dialogues):
        questions = list(d.questions)
        for it in items:
            if it.dialogue == i and options(it) != list(questions[it.question].choices):
                questions[it.question] = _with_options(questions[it.question], options(it))
                changed += 1
        out.append(d.model_copy(update={"questions": questions}))
    if report is not None:
        report.changed = changed
    if changed and _battery_worse(dialogues, out):
        if report is not None:
            report.changed, report.reverted = 0, True
        return dialogues
    return out


def _battery_worse(before: list[Dialogue], after: list[Dialogue]) -> bool:
    """Whether the filtered questions give the hand-written battery a shortcut the balanced ones did not."""
    from yanami.world._audit_text import SHORTCUT_LIMIT
    from yanami.world._shortcuts import run_battery

    strongest = run_battery(after).strongest()[2]
    return strongest > SHORTCUT_LIMIT and strongest > run_battery(before).strongest()[2]


FILTER_FROM = 40
"""Blocks of fewer dialogues are not filtered: readers held out on so few questions learn nothing to filter against."""


def finish_block(dialogues: list[Dialogue], letters: Letters, seed: int, filtered: bool) -> list[Dialogue]:
    """A balanced block's questions as a build writes them: letters dealt (`Letters`), then,
    where ``filtered`` and the block is large enough, options filtered (`filter_questions`)."""
    dealt = deal_letters(dialogues, letters)
    return filter_questions(dealt, seed, FILTER_READERS, ROUNDS) if filtered and len(dealt) >= FILTER_FROM else dealt


def finish_questions(dialogues: list[Dialogue], seed: int, filtered: bool, block: int) -> list[Dialogue]:
    """What a build does to composed dialogues' questions, all at once: `balance_questions`,
    then `finish_block`, in blocks of ``block`` dialogues in the order given."""
    from yanami.world._shortcuts import balance_questions

    letters = Letters(seed)
    out: list[Dialogue] = []
    for start in range(0, len(dialogues), block):
        out += finish_block(balance_questions(dialogues[start : start + block]), letters, seed, filtered)
    return out
