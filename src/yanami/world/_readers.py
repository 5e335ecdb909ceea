"""Learned text-only readers: held-out classifiers over surface features of the visible text.

The hand-written battery (`yanami.world._shortcuts`) tries one feature or two at a time,
and a linear reader of them all. An attacker with a learner finds more: gradient-boosted
trees over where each option is mentioned (by turn, by role, in a negated or contrasting
sentence), its words, its letter and how it relates to the dialogue's other questions
combine them in ways no rule lists. This module is that attacker, with scikit-learn:

- `featurize` turns one question's options into a (4, F) array of surface features of the
  visible text (`yanami.world._shortcuts.visible`: the messages before the question, the
  question and its options, never an image or a hidden field), each also as its difference
  from the options' mean and its rank among them, so a per-option classifier compares;
- a `Reader` (`READERS`: a logistic regression and gradient-boosted trees, in the filter's
  configuration and the audit's stronger one) scores every option; the highest is its pick;
- `held_out` scores every question by a reader trained on the other folds (folds by
  dialogue), `TextReader` is a reader fitted on one set of dialogues that answers the
  questions of another, as a model would.

The build's filter (`yanami.world._filter`) redraws distractors against these readers; the
audit trains them again on another split of folds, with another seed and the stronger
configuration, so its figure is what a fresh attacker gets, not what the filter optimised.

What is not a feature: anything that resolves a reference the way a reader tracking the
state would (which object is "the fourth one in your list", which colour a correction
restores). A mention's place in the text is a feature; its place in the assistant's listing
read as an ordinal is not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from yanami.contract import Dialogue, Question, derived
from yanami.world._shortcuts import (
    ATTRIBUTES,
    FEATURES,
    LIKENESS,
    SHAPES,
    Reading,
    _mentions,
    content,
    visible,
)

NEGATION = frozenset({"not", "no", "never", "t", "without", "avoid", "nothing", "none", "instead", "off", "limits"})
"""Words that make a sentence negated ("won't" reads as "won", "t")."""
CONTRAST = frozenset({"but", "rather", "thought", "better", "instead", "other", "than"})
"""Words of a sentence that weighs one value against another ("I thought about gray, but blue is better")."""
UNDO = frozenset({"back", "before", "undo", "reverse", "revert", "mistake", "wrong", "backwards", "earlier", "return"})
"""Words of a correction."""
KINDS = (("negated", NEGATION), ("contrast", CONTRAST), ("undo", UNDO))
VOCABULARY = tuple(sorted(ATTRIBUTES | SHAPES))
QUESTION_WORDS = ("colour", "object", "correction", "ruled", "keep", "picture", "furthest", "mean", "refer", "back")
BACK = 8
"""Turns counted back from the question's last turn, one feature each (older ones share the last)."""
ROLES = ("user", "assistant")


@dataclass
class _Context:
    """One question's visible text, indexed once for every option set read against it."""

    reading: Reading
    kinds: list[dict[str, bool]]
    """Per sentence of ``reading.stream``: which `KINDS` it is."""
    last_turn: int
    named: int | None
    question_words: set[str]
    qflags: np.ndarray
    rows: dict[str, np.ndarray] = field(default_factory=dict)


def _context(d: Dialogue, q: Question) -> _Context:
    v = visible(d, q)
    reading = Reading(v.messages, v.question)
    kinds = [{k: not words.isdisjoint(s[3].vocabulary) for k, words in KINDS} for s in reading.stream]
    qw = set(content(v.question))
    named = reading.named
    qflags = np.array(
        [
            float(q.after_turn),
            float(len(d.turns[: q.after_turn + 1])),
            float(named if named is not None else -1),
            float(q.after_turn - named if named is not None else -1),
            *(float(w in qw) for w in QUESTION_WORDS),
        ]
    )
    return _Context(reading, kinds, reading.last_turn, named, qw, qflags)


OWN = (
    [f"rule {n}" for n in FEATURES if n != "likeness"]
    + ["unmentioned"]
    + [f"{r} back {k}" for r in ROLES for k in range(BACK)]
    + [f"{r} turn {k}" for r in ROLES for k in range(BACK)]
    + [f"{r} {kind}" for r in ROLES for kind, _ in KINDS]
    + [f"{r} named {k}" for r in ROLES for k in (-1, 0, 1)]
    + ["turns since last", "first turn", "distinct turns", "first in sentence", "last in sentence", "first sentence"]
    + [f"word {w}" for w in VOCABULARY]
    + ["object", "question overlap share"]
)
"""The features of one option read alone against the visible text."""


def _own(ctx: _Context, option: str) -> np.ndarray:
    """`OWN` for one option (cached per question: options recur across option sets)."""
    found = ctx.rows.get(option)
    if found is not None:
        return found
    r = ctx.reading
    base = np.array([v for k, v in enumerate(r.row(option)) if k != LIKENESS], dtype=float)
    unmentioned = float(np.isnan(base[1]))
    base = np.nan_to_num(base, nan=-1.0)
    ms = _mentions(option, r.stream)
    # where each mention sits: its sentence (the stream's entry holding its position)
    starts = [s[0] for s in r.stream]
    at = [int(np.searchsorted(starts, m.pos, side="right")) - 1 for m in ms]
    back = np.zeros((2, BACK))
    turn = np.zeros((2, BACK))
    kinds = np.zeros((2, len(KINDS)))
    named = np.zeros((2, 3))
    first_in = last_in = first_sentence = 0.0
    for m, s in zip(ms, at, strict=True):
        role = ROLES.index(m.role)
        back[role, min(ctx.last_turn - m.turn, BACK - 1)] += 1
        turn[role, min(m.turn, BACK - 1)] += 1
        for k, (kind, _) in enumerate(KINDS):
            kinds[role, k] += ctx.kinds[s][kind]
        if ctx.named is not None and abs(m.turn - ctx.named) <= 1:
            named[role, m.turn - ctx.named + 1] += 1
        pos0, _, _, sentence = r.stream[s]
        first_in += m.pos == pos0
        last_in += m.pos - pos0 >= len(sentence.toks) - 5
        first_sentence += s == 0 or r.stream[s - 1][2] != m.turn
    turns = [m.turn for m in ms]
    mine = set(content(option))
    out = np.concatenate(
        [
            base,
            [unmentioned],
            back.ravel(),
            turn.ravel(),
            kinds.ravel(),
            named.ravel(),
            [
                ctx.last_turn - turns[-1] if turns else -1.0,
                turns[0] if turns else -1.0,
                len(set(turns)),
                first_in,
                last_in,
                first_sentence,
            ],
            [float(w in mine) for w in VOCABULARY],
            [float(not mine.isdisjoint(SHAPES)), len(mine & ctx.question_words) / max(len(mine), 1)],
        ]
    )
    ctx.rows[option] = out
    return out


SET = ["likeness", "letter A", "letter B", "letter C", "letter D", "in other options", "colour in other options",
       "shape in other options", "words in other questions", "letter of other questions same"]  # fmt: skip
"""Features of an option that depend on the other options and the dialogue's other questions."""


def _relations(option: str, letter: int, others: Sequence[tuple[str, Sequence[str]]]) -> list[float]:
    """How ``option`` (at ``letter``) relates to the dialogue's other questions (text, options)."""
    mine = set(content(option))
    colours = mine & (ATTRIBUTES - {"small", "large", "matte", "metal"})
    shapes = mine & SHAPES
    other_words = [set(content(o)) for _, opts in others for o in opts]
    return [
        float(sum(option in opts for _, opts in others)),
        float(sum(bool(colours) and colours <= w for w in other_words)),
        float(sum(bool(shapes) and shapes <= w for w in other_words)),
        float(sum(len(mine & set(content(text))) for text, _ in others)),
        float(sum(opts.index(option) == letter for _, opts in others if option in opts)),
    ]


def _design(own: np.ndarray, rest: np.ndarray, qflags: np.ndarray) -> np.ndarray:
    """(sets, 4, D) design from the options' features (sets, 4, F): each feature, its
    difference from the options' mean and its rank among them, then the question's flags."""
    x = np.concatenate([own, rest], axis=2)
    ranks = np.argsort(np.argsort(x, axis=1, kind="stable"), axis=1, kind="stable").astype(float)
    flags = np.broadcast_to(qflags, (*x.shape[:2], len(qflags)))
    return np.concatenate([x, x - x.mean(axis=1, keepdims=True), ranks, flags], axis=2)


def design_names() -> list[str]:
    """The column names of `featurize`'s design (for reports)."""
    base = [*OWN, *SET]
    return [*base, *(f"{n} - mean" for n in base), *(f"{n} rank" for n in base), "after turn", "turns",
            "named turn", "turns since named", *(f"question {w}" for w in QUESTION_WORDS)]  # fmt: skip


def _option_sets(
    ctx: _Context, sets: Sequence[Sequence[str]], others: Sequence[tuple[str, Sequence[str]]]
) -> np.ndarray:
    """The design (len(sets), 4, D) of option lists (in letter order) of one question."""
    names = list(dict.fromkeys(o for opts in sets for o in opts))
    index = {o: k for k, o in enumerate(names)}
    return option_designs(ctx, names, np.array([[index[o] for o in opts] for opts in sets]), others)


def option_designs(
    ctx: _Context, names: Sequence[str], sets: np.ndarray, others: Sequence[tuple[str, Sequence[str]]]
) -> np.ndarray:
    """The design (S, 4, D) of option lists given as indexes (S, 4) into ``names``, in letter order."""
    own = np.stack([_own(ctx, o) for o in names])  # (C, F)
    words = [set(content(o)) for o in names]
    jaccard = np.array([[len(a & b) / max(len(a | b), 1) for b in words] for a in words])
    n = sets.shape[1]
    relations = np.array([[_relations(o, k, others) for k in range(n)] for o in names])  # (C, n, R)
    pair = jaccard[sets[:, :, None], sets[:, None, :]]  # (S, n, n)
    like = (pair.sum(axis=2) - np.diagonal(pair, axis1=1, axis2=2)) / max(n - 1, 1)
    letter = np.broadcast_to(np.eye(4)[:n], (len(sets), n, 4))
    rel = relations[sets, np.arange(n)[None, :]]  # (S, n, R)
    rest = np.concatenate([like[:, :, None], letter, rel], axis=2)
    return _design(own[sets], rest, ctx.qflags)


def _others(d: Dialogue, q: Question) -> list[tuple[str, list[str]]]:
    return [(o.text, list(o.choices)) for o in d.questions if o.id != q.id and o.choices]


def featurize(d: Dialogue, q: Question) -> np.ndarray:
    """(options, D): the design of question ``q`` of ``d`` as it stands (its options in letter order)."""
    result: np.ndarray = _option_sets(_context(d, q), [list(q.choices)], _others(d, q))[0]
    return result


class Learner(Protocol):
    """What a reader needs of a scikit-learn classifier."""

    def fit(self, x: np.ndarray, y: np.ndarray) -> object: ...

    def predict_proba(self, x: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class Reader:
    """A learned reader: a classifier of options (right or not), the highest-scored option its pick."""

    name: str
    strong: bool = False
    """The audit's configuration (more trees, deeper; less regularised) rather than the filter's."""

    def learner(self, seed: int) -> Learner:
        """A fresh, seeded scikit-learn model."""
        from sklearn import ensemble, linear_model, pipeline, preprocessing  # type: ignore[import-untyped]  # no stubs

        state = seed % 2**31
        model: Learner
        if self.name == "logistic":
            lr = linear_model.LogisticRegression(C=1.0 if self.strong else 0.1, max_iter=2000, random_state=state)
            model = pipeline.make_pipeline(preprocessing.StandardScaler(), lr)
            return model
        if self.name == "trees":
            model = ensemble.HistGradientBoostingClassifier(
                max_iter=300 if self.strong else 60,
                learning_rate=0.05 if self.strong else 0.1,
                max_leaf_nodes=31 if self.strong else 15,
                min_samples_leaf=10 if self.strong else 20,
                l2_regularization=0.0 if self.strong else 1.0,
                early_stopping=False,
                random_state=state,
            )
            return model
        raise ValueError(f"unknown reader {self.name!r}")


FILTER_READERS = (Reader("logistic"), Reader("trees"))
"""The readers the build's filter plays against."""
AUDIT_READERS = (Reader("logistic", strong=True), Reader("trees", strong=True))
"""The readers `yanami audit` trains afresh (another fold split and seed, a stronger configuration)."""


def _single_thread() -> AbstractContextManager[object]:
    """Run scikit-learn on one thread: the same numbers on any machine and any worker count."""
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]  # no stubs

    limits: AbstractContextManager[object] = threadpool_limits(limits=1)
    return limits


def folds_of(ids: Sequence[str], k: int, salt: object) -> np.ndarray:
    """Each dialogue's fold (0..k-1), a seeded draw per id, balanced: ids are ordered by their
    draw and dealt out in turn."""
    order = sorted(set(ids), key=lambda i: derived("folds", salt, i))
    fold = {i: n % k for n, i in enumerate(order)}
    return np.array([fold[i] for i in ids])


def held_out(
    reader: Reader, seed: int, x: np.ndarray, y: np.ndarray, folds: np.ndarray
) -> tuple[np.ndarray, dict[int, Learner]]:
    """Every question's option scores (N, 4) from ``reader`` trained on the other folds, and
    the model of each fold (trained without it)."""
    scores = np.zeros(x.shape[:2])
    models: dict[int, Learner] = {}
    for f in sorted(set(folds.tolist())):
        test = folds == f
        if test.all():
            continue
        models[f] = fit(reader, derived("reader", seed, reader.name, f, bits=32), x[~test], y[~test])
        scores[test] = predict(models[f], x[test])
    return scores, models


def fit(reader: Reader, seed: int, x: np.ndarray, y: np.ndarray) -> Learner:
    """``reader`` trained on questions ``x`` (N, 4, D) with answers ``y`` (N,)."""
    flat = x.reshape(-1, x.shape[-1])
    label = (np.arange(x.shape[1])[None, :] == y[:, None]).ravel().astype(int)
    with _single_thread():
        model = reader.learner(seed)
        model.fit(flat, label)
    return model


def predict(model: Learner, x: np.ndarray) -> np.ndarray:
    """The option scores (..., 4) of questions ``x`` (..., 4, D): higher is more likely the answer."""
    with _single_thread():
        p = model.predict_proba(x.reshape(-1, x.shape[-1]))[:, 1]
    return np.asarray(p).reshape(x.shape[:-1])


def hits(scores: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each question's credit (N,): 1 if the answer alone scores highest, a share where it ties."""
    best = scores >= scores.max(axis=1, keepdims=True) - 1e-12
    result: np.ndarray = best[np.arange(len(y)), y] / best.sum(axis=1)
    return result


def wilson(k: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval (95 % by default) of ``k`` successes in ``n``."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass(frozen=True)
class Figure:
    """One reader's held-out accuracy on one question type."""

    accuracy: float
    low: float
    high: float
    questions: int


def table(dialogues: Iterable[Dialogue]) -> dict[str, tuple[list[str], np.ndarray, np.ndarray]]:
    """Per question type: (dialogue id per question, designs (N, 4, D), answers (N,)) of every
    four-option question."""
    out: dict[str, tuple[list[str], list[np.ndarray], list[int]]] = {}
    for d in dialogues:
        for q in d.questions:
            if not q.choices or len(q.choices) != 4 or q.answer not in q.choices:
                continue
            ids, xs, ys = out.setdefault(q.type.value, ([], [], []))
            ids.append(d.id)
            xs.append(featurize(d, q))
            ys.append(q.choices.index(q.answer))
    return {t: (ids, np.stack(xs), np.array(ys)) for t, (ids, xs, ys) in sorted(out.items())}


READER_LIMIT = 0.30
"""Above this held-out accuracy (chance 25 %), a learned reader is reported as a shortcut."""
AUDIT_FOLDS = 5
AUDIT_SALT = "audit"
"""The audit's folds and seeds are keyed apart from the filter's (`yanami.world._filter`)."""


def audit_readers(
    dialogues: Iterable[Dialogue], readers: Sequence[Reader] = AUDIT_READERS, k: int = AUDIT_FOLDS
) -> dict[str, dict[str, Figure]]:
    """reader -> type -> its held-out accuracy with a 95 % Wilson interval (folds by dialogue,
    keyed apart from the build's filter)."""
    out: dict[str, dict[str, Figure]] = {}
    for qtype, (ids, x, y) in table(dialogues).items():
        folds = folds_of(ids, k, AUDIT_SALT)
        for reader in readers:
            scores, _ = held_out(reader, derived(AUDIT_SALT, qtype, bits=32), x, y, folds)
            h = hits(scores, y)
            low, high = wilson(float(h.sum()), len(y))
            out.setdefault(reader.name, {})[qtype] = Figure(float(h.mean()), low, high, len(y))
    return out


class TextReader:
    """A learned text-only reader as a model: fitted on dialogues, it answers questions of others.

    ``TextReader().fit(train).answer(d, q)`` is the letter the reader picks for question ``q``
    of dialogue ``d`` (one model per question type; a type it never saw gets "A").
    """

    def __init__(self, reader: Reader = AUDIT_READERS[1], seed: int = 0) -> None:
        self.reader = reader
        self.seed = seed
        self.models: dict[str, Learner] = {}

    def fit(self, dialogues: Iterable[Dialogue]) -> TextReader:
        """Train one model per question type on every four-option question of ``dialogues``."""
        for qtype, (_, x, y) in table(dialogues).items():
            self.models[qtype] = fit(self.reader, derived("text reader", self.seed, qtype, bits=32), x, y)
        return self

    def scores(self, d: Dialogue, q: Question) -> np.ndarray:
        """The option scores (options,) for question ``q`` of ``d``."""
        model = self.models.get(q.type.value)
        if model is None or not q.choices or len(q.choices) != 4:
            return np.zeros(len(q.choices or []))
        return predict(model, featurize(d, q))

    def answer(self, d: Dialogue, q: Question) -> str:
        """The letter of the option the reader picks."""
        s = self.scores(d, q)
        return "ABCDEFG"[int(np.argmax(s))] if len(s) else "A"


def best_text_reader(dialogues: Sequence[Dialogue], seed: int = 0) -> TextReader:
    """The audit's best learned reader of ``dialogues`` (the highest held-out accuracy on its
    strongest type, as `audit_readers` measures it), fitted on all of them."""
    figures = audit_readers(dialogues)
    best = max(AUDIT_READERS, key=lambda r: max((f.accuracy for f in figures.get(r.name, {}).values()), default=0.0))
    return TextReader(best, seed).fit(dialogues)
