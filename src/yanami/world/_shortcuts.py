"""Text-only shortcuts: how far rules that track no state get on a bench's DSU questions.

A DSU question must be answerable only by tracking the dialogue's state. This battery
plays the part of a model that reads the visible text alone (the messages before the
question, the question and its options; never an image, never a hidden field) and picks
an option by a surface rule: the option mentioned latest, earliest, second latest or second
earliest, most or least often,
the longest or shortest, the one sharing most words with the user's rule sentences, with
the question, with the turn the question names or with the last messages, the one most
like the other options, a fixed letter, and every pair of such rules (the second breaks
the first's ties). A rule that ties between options is credited its expected share.

Pairs are many, so the best pair of a question type is chosen on one half of the
dialogues and scored on the other (and the reverse): the figure is what a rule found in
advance would get, not the luckiest of two thousand. A linear reader trained the same way
on every feature at once stands for any weighted combination of them.

Mentions are read generously, as a shallow reader would: words are lower-cased, plurals
and the world's synonyms folded (``rubber`` is ``matte``, ``shiny`` is ``metal``), and an
object option counts as mentioned wherever a noun phrase names its shape with attributes
that all fit it (``the red cube`` mentions ``the small red metal cube``).
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from yanami.contract import CHOICE_LETTERS, Dialogue, Question, derived

SYNONYMS = {"rubber": "matte", "shiny": "metal", "metallic": "metal", "cubes": "cube", "spheres": "sphere",
            "cylinders": "cylinder", "objects": "object", "grey": "gray"}  # fmt: skip
SHAPES = frozenset({"cube", "sphere", "cylinder"})
ATTRIBUTES = frozenset(
    {"small", "large", "matte", "metal", "gray", "red", "blue", "green", "brown", "purple", "cyan", "yellow"}
)
STOP = frozenset(
    [
        "the",
        "a",
        "an",
        "of",
        "to",
        "in",
        "on",
        "at",
        "it",
        "its",
        "is",
        "was",
        "be",
        "as",
        "and",
        "or",
        "that",
        "this",
        "one",
        "ones",
        "from",
        "with",
        "for",
        "by",
        "my",
        "your",
        "our",
    ]
)
RULE_MARKERS = frozenset(
    [
        "rule",
        "rules",
        "never",
        "banned",
        "ban",
        "off",
        "limits",
        "forbid",
        "forbidden",
        "whatever",
        "always",
        "untouched",
        "unchanged",
        "alone",
        "keep",
        "out",
    ]
)
"""Words that mark a user sentence as setting a standing rule."""
_WORD = re.compile(r"[a-z]+|\d+")
_SENTENCE = re.compile(r"(?<=[.!?;:])\s+")
_NAMED_TURN = re.compile(r"\b(?:turn|message) (\d+)\b|\bmy (\w+) message\b")
_ORDINALS = {
    w: k
    for k, w in enumerate(
        ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"], 1
    )
}


@lru_cache(maxsize=16384)
def words(text: str) -> tuple[str, ...]:
    """Lower-cased word tokens with plurals and the world's synonyms folded."""
    return tuple(SYNONYMS.get(w, w) for w in _WORD.findall(text.lower()))


@lru_cache(maxsize=16384)
def content(text: str) -> tuple[str, ...]:
    """The words of ``text`` that carry meaning (no articles, prepositions, pronouns)."""
    return tuple(w for w in words(text) if w not in STOP)


@dataclass(frozen=True)
class _Sentence:
    """One sentence as `Reading` indexes it."""

    toks: tuple[str, ...]
    vocabulary: frozenset[str]
    where: dict[str, list[int]]
    """Per word, the places it takes in ``toks``, in order."""


@lru_cache(maxsize=4096)
def _sentences(text: str) -> tuple[_Sentence, ...]:
    """A message's sentences, tokenized and indexed (a dialogue's questions read the same
    messages again and again)."""
    out = []
    for sentence in _SENTENCE.split(text):
        toks = words(sentence)
        where: dict[str, list[int]] = {}
        for i, w in enumerate(toks):
            where.setdefault(w, []).append(i)
        out.append(_Sentence(toks, frozenset(toks), where))
    return tuple(out)


@dataclass(frozen=True)
class Visible:
    """What a text-only reader sees of one DSU question."""

    dialogue: str
    qtype: str
    messages: tuple[tuple[int, str, str], ...]
    """(turn, role, text) of every message before the question, in order."""
    question: str
    options: tuple[str, ...]
    answer: int
    """The index of the right option (for scoring the rules; no rule reads it)."""


def visible(d: Dialogue, q: Question) -> Visible:
    """The text a model sees for question ``q`` (its messages, the question, the options)."""
    msgs = []
    for t in d.turns[: q.after_turn + 1]:
        msgs.append((t.index, "user", t.user.text()))
        msgs.append((t.index, "assistant", t.assistant.text()))
    assert q.choices is not None
    return Visible(d.id, q.type.value, tuple(msgs), q.text, tuple(q.choices), q.choices.index(q.answer))


@dataclass
class _Mention:
    pos: int
    role: str
    turn: int


def _mentions(option: str, stream: list[tuple[int, str, int, _Sentence]]) -> list[_Mention]:
    """Where the visible text mentions ``option`` (see the module docstring)."""
    want = content(option)
    if not want:
        return []
    shape = next((w for w in want if w in SHAPES), None)
    attrs = {w for w in want if w in ATTRIBUTES}
    wanted = set(want)
    # an object: a noun phrase naming its shape with attributes that all fit it
    thing = shape is not None and attrs | {shape} >= wanted - {"object"}
    out: list[_Mention] = []
    for pos0, role, turn, sentence in stream:
        if thing and shape is not None:  # (a thing always names its shape)
            toks = sentence.toks
            for i in sentence.where.get(shape, ()):
                j = i
                while j > 0 and toks[j - 1] in ATTRIBUTES:
                    j -= 1
                if set(toks[j:i]) <= attrs:
                    out.append(_Mention(pos0 + j, role, turn))
        elif wanted <= sentence.vocabulary:
            first = min(sentence.where[w][0] for w in wanted)
            out.append(_Mention(pos0 + first, role, turn))
    return out


FEATURES = (
    "count",
    "first",
    "last",
    "user_count",
    "assistant_count",
    "last_user",
    "last_assistant",
    "chars",
    "content_words",
    "rule_overlap",
    "question_overlap",
    "last_user_overlap",
    "last_assistant_overlap",
    "named_turn_overlap",
    "named_turn_count",
    "likeness",
    "exact_count",
    "recent_count",
    "opening_count",
)
"""What the rules read of each option (NaN: not mentioned, for the position features)."""


class Reading:
    """The visible text of one question as a shallow reader indexes it, for reading option after option."""

    def __init__(self, messages: Iterable[tuple[int, str, str]], question: str) -> None:
        self.stream: list[tuple[int, str, int, _Sentence]] = []
        pos = 0
        rule_words: set[str] = set()
        msgs = list(messages)
        for turn, role, text in msgs:
            for sentence in _sentences(text):
                self.stream.append((pos, role, turn, sentence))
                pos += len(sentence.toks)
                if role == "user" and not RULE_MARKERS.isdisjoint(sentence.vocabulary):
                    rule_words |= sentence.vocabulary - STOP
        self.rule_words = rule_words
        self.total = max(pos, 1)
        self.last_turn = max((t for t, _, _ in msgs), default=0)
        self.last_user = set(content(next((x for t, r, x in reversed(msgs) if r == "user"), "")))
        self.last_asst = set(content(next((x for t, r, x in reversed(msgs) if r == "assistant"), "")))
        self.question = set(content(question))
        self.named = _named_turn(question)
        self.named_words = set(content(" ".join(x for t, _, x in msgs if self.named is not None and t == self.named)))
        self.flat = " " + " ".join(" ".join(s[3].toks) for s in self.stream) + " "
        self._rows: dict[str, list[float]] = {}
        self.sets: dict[tuple[str, tuple[str, ...], int], tuple[list[tuple[int, ...]], np.ndarray, np.ndarray]] = {}
        """Option sets with their picks, where drawing them used no randomness (`_sets_and_picks`)."""

    def row(self, option: str) -> list[float]:
        """`FEATURES` of one option, except ``likeness`` (which depends on the other options)."""
        found = self._rows.get(option)
        if found is not None:
            return found
        ms = _mentions(option, self.stream)
        user = [m for m in ms if m.role == "user"]
        asst = [m for m in ms if m.role == "assistant"]
        mine = set(content(option))
        phrase = " ".join(w for w in words(option) if w not in ("the", "a", "an"))
        nan, total = float("nan"), self.total
        found = [
            len(ms),
            ms[0].pos / total if ms else nan,
            ms[-1].pos / total if ms else nan,
            len(user),
            len(asst),
            user[-1].pos / total if user else nan,
            asst[-1].pos / total if asst else nan,
            len(option),
            len(mine),
            len(mine & self.rule_words),
            len(mine & self.question),
            len(mine & self.last_user),
            len(mine & self.last_asst),
            len(mine & self.named_words),
            sum(1 for m in ms if m.turn == self.named),
            0.0,
            self.flat.count(f" {phrase} ") if phrase else 0,
            sum(1 for m in ms if m.turn >= self.last_turn - 1),
            sum(1 for m in ms if m.turn == 0),
        ]
        self._rows[option] = found
        return found

    def features(self, options: Iterable[str]) -> np.ndarray:
        """(options, features) array of `FEATURES`."""
        opts = list(options)
        x = np.array([self.row(o) for o in opts], dtype=float)
        sets = [set(content(o)) for o in opts]
        for k, mine in enumerate(sets):
            others = [o for j, o in enumerate(sets) if j != k]
            x[k, LIKENESS] = np.mean([len(mine & o) / max(len(mine | o), 1) for o in others]) if others else 0.0
        return x


LIKENESS = FEATURES.index("likeness")


def features(v: Visible) -> np.ndarray:
    """(options, features) array of `FEATURES` for one question."""
    return Reading(v.messages, v.question).features(v.options)


def _named_turn(question: str) -> int | None:
    """The turn index a question names ("turn 4", "my third message"), if any."""
    m = _NAMED_TURN.search(question.lower())
    if m is None:
        return None
    if m.group(1):
        return int(m.group(1)) - 1
    return _ORDINALS[m.group(2)] - 1 if m.group(2) in _ORDINALS else None


def pick(values: np.ndarray, largest: bool) -> np.ndarray:
    """Each option's share of a rule's pick, for questions (Q, options) at once: the best value(s)
    among the options that have one (NaN: no value), every option when none has one."""
    ok = ~np.isnan(values)
    v = np.where(ok, values, -np.inf if largest else np.inf)
    best = v.max(axis=1, keepdims=True) if largest else v.min(axis=1, keepdims=True)
    hit = ok & (v == best)
    none = ~ok.any(axis=1)
    hit[none] = True
    result: np.ndarray = hit / hit.sum(axis=1, keepdims=True)
    return result


def at_rank(values: np.ndarray, k: int) -> np.ndarray:
    """Each option's share of the pick of the option in place ``k`` (0: smallest) of the order by
    ``values`` (Q, options), unmentioned (NaN) below every value; tied options share."""
    v = np.where(np.isnan(values), -np.inf, values)
    kth = np.sort(v, axis=1)[:, k : k + 1]
    hit = v == kth
    result: np.ndarray = hit / hit.sum(axis=1, keepdims=True)
    return result


def _way(largest: bool) -> str:
    return "most" if largest else "least"


def rule_shares(x: np.ndarray) -> dict[str, np.ndarray]:
    """Every rule's shares (Q, options) on features ``x`` (Q, options, F): each feature read both
    ways and at both middle places of the order, the four fixed letters, and every ordered pair
    of one-feature rules (the second breaks the first's ties)."""
    n_q, n_o, _ = x.shape
    singles: dict[tuple[int, bool], np.ndarray] = {}
    out: dict[str, np.ndarray] = {}
    for f, name in enumerate(FEATURES):
        for big in (True, False):
            singles[f, big] = pick(x[:, :, f], big)
            out[f"{_way(big)} {name}"] = singles[f, big]
    for f, name in enumerate(FEATURES):  # the middle of the order: second largest, second smallest
        out[f"second most {name}"] = at_rank(x[:, :, f], n_o - 2)
        out[f"second least {name}"] = at_rank(x[:, :, f], 1)
    for k, letter in enumerate("ABCD"[:n_o]):
        out[f"letter {letter}"] = np.broadcast_to(np.eye(n_o)[k], (n_q, n_o))
    for (f1, big1), first in singles.items():
        tied = first > 0
        unique = tied.sum(axis=1, keepdims=True) == 1
        for f2 in range(len(FEATURES)):
            if f2 == f1:
                continue
            for big2 in (True, False):
                second = pick(np.where(tied, x[:, :, f2], np.nan), big2)
                name = f"{_way(big1)} {FEATURES[f1]}, then {_way(big2)} {FEATURES[f2]}"
                out[name] = np.where(unique, first, second)
    return out


@dataclass
class Battery:
    """How well each text-only rule answers each question type (0..1)."""

    questions: dict[str, int] = field(default_factory=dict)
    """Questions with four options, per type."""
    single: dict[str, dict[str, float]] = field(default_factory=dict)
    """type -> one-feature (or fixed-letter) rule -> accuracy."""
    best_pair: dict[str, tuple[str, float]] = field(default_factory=dict)
    """type -> (the pairs chosen on each half, their accuracy on the other half, averaged)."""
    linear: dict[str, float] = field(default_factory=dict)
    """type -> the cross-validated accuracy of a linear reader over every feature."""
    letters: dict[str, int] = field(default_factory=dict)
    """How often each letter is the right one."""
    letters_by_type: dict[str, dict[str, int]] = field(default_factory=dict)
    """type -> how often each letter is the right one."""
    same_letter: float = 0.0
    """How often two questions of one dialogue share their right letter (independent letters: 1/4)."""
    short: int = 0
    """Questions with fewer than four options (not in the battery)."""
    unmentioned: int = 0
    """Options of four-option questions that the visible text never mentions."""

    def strongest(self) -> tuple[str, str, float]:
        """(type, rule, accuracy) of the strongest rule of all."""
        best = ("", "", 0.0)
        for qtype, rules in self.single.items():
            for rule, acc in rules.items():
                if acc > best[2]:
                    best = (qtype, rule, acc)
            pair, acc = self.best_pair.get(qtype, ("", 0.0))
            if acc > best[2]:
                best = (qtype, pair, acc)
            if self.linear.get(qtype, 0.0) > best[2]:
                best = (qtype, "linear reader", self.linear[qtype])
        return best

    def best_single(self, qtype: str) -> tuple[str, float]:
        """The strongest one-feature rule of a type."""
        rules = self.single.get(qtype, {})
        return max(rules.items(), key=lambda kv: kv[1]) if rules else ("", 0.0)

    def summary(self) -> dict[str, object]:
        """The figures, as JSON (accuracies 0..1)."""
        return {
            "questions": self.questions,
            "best_single": {t: self.best_single(t) for t in self.single},
            "best_pair_cross_validated": self.best_pair,
            "linear_reader_cross_validated": self.linear,
            "rules": self.single,
            "answer_letters": self.letters,
            "answer_letters_by_type": self.letters_by_type,
            "same_letter_within_dialogue": self.same_letter,
            "questions_with_fewer_options": self.short,
            "options_never_mentioned": self.unmentioned,
            "strongest": self.strongest(),
        }


def _half(dialogue_id: str) -> int:
    return derived(dialogue_id, bits=8) & 1


class Shortcuts:
    """Runs the battery over dialogues fed one at a time (`add`), then scores every rule (`result`)."""

    def __init__(self) -> None:
        self._rows: dict[str, list[tuple[str, np.ndarray, int]]] = {}
        self._letters: dict[str, int] = {}
        self._by_type: dict[str, dict[str, int]] = {}
        self._same = self._pairs = 0
        self.short = 0
        """Questions with fewer than four options (left out of the battery)."""
        self.unmentioned = 0
        """Options (of four-option questions) that the visible text never mentions."""

    def add(self, d: Dialogue) -> None:
        """Read one dialogue's four-option questions."""
        mine = []
        for q in d.questions:
            if not q.choices or q.answer not in q.choices:
                continue
            if len(q.choices) != 4:
                self.short += 1
                continue
            v = visible(d, q)
            x = features(v)
            self.unmentioned += int((x[:, 0] == 0).sum())
            self._rows.setdefault(v.qtype, []).append((d.id, x, v.answer))
            letter = "ABCD"[v.answer]
            self._letters[letter] = self._letters.get(letter, 0) + 1
            per = self._by_type.setdefault(v.qtype, {})
            per[letter] = per.get(letter, 0) + 1
            mine.append(letter)
        for i in range(len(mine)):
            for j in range(i + 1, len(mine)):
                self._pairs += 1
                self._same += mine[i] == mine[j]

    def result(self) -> Battery:
        """Every rule's accuracy per question type."""
        out = Battery(
            letters=dict(sorted(self._letters.items())),
            letters_by_type={t: dict(sorted(c.items())) for t, c in sorted(self._by_type.items())},
            same_letter=self._same / self._pairs if self._pairs else 0.0,
            short=self.short,
            unmentioned=self.unmentioned,
        )
        for qtype, found in sorted(self._rows.items()):
            x = np.stack([r[1] for r in found])
            y = np.array([r[2] for r in found])
            half = np.array([_half(r[0]) for r in found])
            hits = {name: s[np.arange(len(y)), y] for name, s in rule_shares(x).items()}
            out.questions[qtype] = len(y)
            out.single[qtype] = {n: float(h.mean()) for n, h in hits.items() if ", then " not in n}
            chosen, scores = [], []
            for train in (0, 1):
                a, b = half == train, half != train
                if not a.any() or not b.any():
                    continue
                name = max((n for n in hits if ", then " in n), key=lambda n: float(hits[n][a].mean()))
                chosen.append(name)
                scores.append(float(hits[name][b].mean()))
            out.best_pair[qtype] = (" / ".join(chosen), float(np.mean(scores)) if scores else 0.0)
            out.linear[qtype] = _linear_cv(x, y, half)
        return out


def run_battery(dialogues: Iterable[Dialogue]) -> Battery:
    """Every rule on every four-option DSU question of ``dialogues``."""
    shortcuts = Shortcuts()
    for d in dialogues:
        shortcuts.add(d)
    return shortcuts.result()


def _design(x: np.ndarray) -> np.ndarray:
    """The linear reader's inputs per option: every feature (unmentioned: -1, plus a flag) and its
    rank among the question's options, each centred on the question's mean."""
    z = np.concatenate([np.nan_to_num(x, nan=-1.0), np.isnan(x[:, :, 1:2]).astype(float)], axis=2)
    ranks = np.argsort(np.argsort(z, axis=1, kind="stable"), axis=1, kind="stable") / (z.shape[1] - 1)
    both = np.concatenate([z, ranks], axis=2)
    result: np.ndarray = both - both.mean(axis=1, keepdims=True)
    return result


def _linear_cv(x: np.ndarray, y: np.ndarray, half: np.ndarray) -> float:
    """2-fold accuracy of a softmax-linear reader trained on one half of the dialogues."""
    xs = _design(x)
    accs = []
    for train in (0, 1):
        a, b = half == train, half != train
        if a.sum() < 8 or not b.any():
            continue
        xtr, ytr, xte, yte = xs[a], y[a], xs[b], y[b]
        scale = xtr.reshape(-1, xtr.shape[-1]).std(axis=0) + 1e-9
        xtr, xte = xtr / scale, xte / scale
        w = np.zeros(xtr.shape[-1])
        onehot = np.eye(xtr.shape[1])[ytr]
        for _ in range(400):  # gradient descent on the softmax cross-entropy, lightly regularized
            logits = xtr @ w
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            w -= 0.5 * (np.einsum("nk,nkf->f", p - onehot, xtr) / len(xtr) + 0.01 * w)
        logits = xte @ w
        best = logits == logits.max(axis=1, keepdims=True)
        accs.append(float(np.mean(best[np.arange(len(yte)), yte] / best.sum(axis=1))))
    return float(np.mean(accs)) if accs else 0.0


GROUPS = {
    "first": "first mention",
    "opening_count": "opening",
    "last": "last mention",
    "last_assistant": "last mention",
    "recent_count": "last mention",
    "last_user": "last user mention",
    "count": "how often",
    "exact_count": "how often",
    "user_count": "how often by the user",
    "assistant_count": "how often by the assistant",
    "chars": "length",
    "content_words": "length",
    "rule_overlap": "rules",
    "question_overlap": "question",
    "last_user_overlap": "last user message",
    "last_assistant_overlap": "last assistant message",
    "named_turn_overlap": "named turn",
    "named_turn_count": "named turn",
    "likeness": "likeness",
}
"""Features that move together, sharing one drawn rank in `distractors_from`."""


def ranks(x: np.ndarray, k: int = 0) -> np.ndarray:
    """Option ``k``'s rank (0: smallest) among the options on each feature, ties sharing; NaN is smallest."""
    v = np.nan_to_num(x, nan=-1e9)
    below = (v < v[k]).sum(axis=0)
    tied = (v == v[k]).sum(axis=0) - 1
    result: np.ndarray = below + tied / 2
    return result


def mentioned(reading: Reading, option: str) -> bool:
    """Whether the visible text mentions ``option`` (as `Reading` reads mentions)."""
    return reading.row(option)[0] > 0


def candidates(reading: Reading, answer: str, pool: Iterable[str], n: int = 3) -> list[str]:
    """The distractors a question may draw from: ``pool`` without the answer or repeats, only
    those the visible text mentions where at least ``n`` are."""
    cands = [p for p in dict.fromkeys(pool) if p != answer]
    said = [p for p in cands if mentioned(reading, p)]
    return said if len(said) >= n else cands


def _sets(
    reading: Reading, answer: str, cands: list[str], rng: random.Random, n: int, most: int
) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Candidate sets of ``n`` distractors (indexes into ``cands``, at most ``most`` of them, drawn
    with ``rng``) and the features (sets, n + 1, F) of each set's options, the answer first."""
    everyone = [answer, *cands]
    raw = np.array([reading.row(o) for o in everyone], dtype=float)
    words = [set(content(o)) for o in everyone]
    jaccard = np.array([[len(a & b) / max(len(a | b), 1) for b in words] for a in words])
    triples = list(itertools.combinations(range(1, len(everyone)), n))
    if len(triples) > most:
        triples = rng.sample(triples, most)
    idx = np.array([(0, *t) for t in triples])  # (T, n + 1), the answer first
    x = raw[idx]  # (T, n + 1, F)
    pair = jaccard[idx[:, :, None], idx[:, None, :]]  # (T, n + 1, n + 1)
    x[:, :, LIKENESS] = (pair.sum(axis=2) - 1) / n
    return [tuple(k - 1 for k in t) for t in triples], x


def _sets_and_picks(
    reading: Reading, answer: str, cands: list[str], rng: random.Random, n: int, most: int
) -> tuple[list[tuple[int, ...]], np.ndarray, np.ndarray]:
    """`_sets` and their `_answer_picks`. Where every set is taken (no more than ``most``), ``rng``
    is not drawn from and the result depends on the question alone, so the reading keeps it:
    the composer's own choice and the sets a build balances on then share one computation."""
    key = (answer, tuple(cands), n)
    known = reading.sets.get(key)
    if known is not None and len(known[0]) <= most:
        return known
    triples, x = _sets(reading, answer, cands, rng, n, most)
    out = (triples, x, _answer_picks(x))
    if math.comb(len(cands), n) <= most:
        reading.sets[key] = out
    return out


def _answer_picks(x: np.ndarray) -> np.ndarray:
    """The answer's share (T, F, 5) of each one-feature rule's pick, for option sets ``x`` (T,
    options, F) with the answer first: least (unmentioned left out), then each place of the
    order from the smallest (unmentioned lowest), the largest last."""
    n_t, n_o, n_f = x.shape
    v = x.transpose(0, 2, 1).reshape(n_t * n_f, n_o)  # every feature's options as a row of its own
    ranks = (pick(v, False), at_rank(v, 0), at_rank(v, 1), at_rank(v, n_o - 2), pick(v, True))
    return np.stack([r[:, 0] for r in ranks], axis=1).reshape(n_t, n_f, 5)


def distractors_from(
    reading: Reading, answer: str, cands: list[str], rng: random.Random, n: int = 3, most: int = 200
) -> list[str]:
    """``n`` distractors among a question's `candidates` such that the answer's rank among the
    options on each surface feature comes out where a random draw put it (adversarial filtering
    against a shallow reader, for one question alone; a build balances its questions together,
    see `Balancer`). Candidates the text never mentions are used only when too few are mentioned
    (`candidates` sees to that)."""
    if len(cands) <= n:
        return cands
    # one drawn rank per group of features that go together: independent draws for features that
    # move together would pull every answer to the middle rank, itself a tell
    drawn = {group: rng.randrange(n + 1) for group in sorted(set(GROUPS.values()))}
    target = np.array([drawn[GROUPS[name]] for name in FEATURES], dtype=float)
    triples, x, picks = _sets_and_picks(reading, answer, cands, rng, n, most)
    # The answer's rank on each feature (unmentioned: lowest) should land on the drawn target...
    v = np.nan_to_num(x, nan=-1e9)
    mine = v[:, :1, :]
    rank = (v < mine).sum(axis=1) + ((v == mine).sum(axis=1) - 1) / 2  # (T, F)
    cost = np.abs(rank - target).sum(axis=1)
    # ...and the rules that pick by a place in the order should pick it exactly where the target is
    for f in range(x.shape[2]):
        cost += np.abs(picks[:, f, 4] - (target[f] == n)) + np.abs(picks[:, f, 0] - (target[f] == 0))
        cost += np.abs(picks[:, f, 3] - (target[f] == n - 1)) + np.abs(picks[:, f, 2] - (target[f] == 1))
    cost += np.array([rng.random() for _ in triples]) * 1e-6
    best = triples[int(np.argmin(cost))]
    return [cands[k] for k in best]


def answer_place(seed: int, dialogue_id: str, qid: str, options: int) -> int:
    """Where a question's answer goes among its options: a draw of its own for each question
    (uniform, independent of every other question's and of the distractors)."""
    return random.Random(derived("letter", seed, dialogue_id, qid)).randrange(options)


def arranged(answer: str, distractors: list[str], rng: random.Random, place: int) -> list[str]:
    """The options in their order: the distractors shuffled, the answer at ``place``."""
    options = list(distractors)
    rng.shuffle(options)
    options.insert(place, answer)
    return options


@dataclass(frozen=True)
class OptionSets:
    """What `balance_questions` weighs for one question: its candidate sets of distractors and
    each set's answer picks by every one-feature rule, as `_sets` and `_answer_picks` give them
    for a generator seeded as the question's options are (`option_sets`). Computed where the
    dialogue is composed (a build's worker) so that balancing, which must go in the plan's
    order, has only the weighing left to do."""

    triples: tuple[tuple[int, ...], ...]
    twelfths: np.ndarray
    """(T, F, 5) uint8: the answer's picks times 12 (every share is 0, 1/4, 1/3, 1/2 or 1, so
    the picks are exact in a twelfth of the bytes and ``twelfths / 12`` gives them back bit for bit)."""
    state: tuple[object, ...]
    """The generator's state after drawing the sets: the weighing's tie noise and the shuffle go on from it."""
    lead: np.ndarray
    """(T, F) float32: by how much the answer's value of each feature (unmentioned: -1) exceeds
    the mean of its set's options, in units of the feature's spread over the question's
    candidates: what a linear reader weighs, where the picks say only who comes first."""


def option_sets(reading: Reading, answer: str, cands: list[str], rng: random.Random) -> OptionSets:
    """The `OptionSets` of a question with more than three candidates, ``rng`` seeded as its options are."""
    triples, x, picks = _sets_and_picks(reading, answer, cands, rng, 3, 200)
    twelfths = np.rint(picks * 12).astype(np.uint8)
    z = np.nan_to_num(x, nan=-1.0)
    spread = z.reshape(-1, z.shape[2]).std(axis=0) + 1e-9
    lead = ((z[:, 0, :] - z.mean(axis=1)) / spread).astype(np.float32)
    return OptionSets(tuple(triples), twelfths, rng.getstate(), lead)


def options_rng(seed: int, dialogue_id: str, qid: str) -> random.Random:
    """The generator of a question's options (where its distractors and their order come from)."""
    return random.Random(derived("options", seed, dialogue_id, qid))


LEAD_WEIGHT = 1.0
"""How much `Balancer` weighs keeping the answers' summed lead on each feature near zero, beside
spreading the picks: without it a linear reader of every feature finds what no single rule
does (CU: 36.8 % over three seeds' benches); much more, and answers crowd the middle places
of the order, which the "second least/most" rules then find (at 2: 34.8 %; at 1, the worst
rule or reader of any type is 33.8 % over the same benches)."""


class Balancer:
    """`balance_questions` one dialogue at a time, in the plan's order (what has been balanced
    so far is all it remembers: the picks its questions left, per type)."""

    def __init__(self) -> None:
        self.spread: dict[str, np.ndarray] = {}
        self.lead: dict[str, np.ndarray] = {}

    def balance(self, d: Dialogue, sets: dict[str, OptionSets] | None = None) -> Dialogue:
        """``d`` with its questions' distractors chosen again; ``sets`` by question id where the
        caller has them (`option_sets`), computed here otherwise."""
        seed = d.meta.seed if d.meta.seed is not None else 0
        questions = []
        for q in d.questions:
            intent = q.hidden.intent if isinstance(q.hidden.intent, dict) else {}
            cands = intent.get("candidates")
            if not isinstance(cands, list) or len(q.choices) != 4 or len(cands) <= 3:
                questions.append(q)
                continue
            rng = options_rng(seed, d.id, q.id)
            known = sets.get(q.id) if sets is not None else None
            if known is None:
                v = visible(d, q)
                known = option_sets(Reading(v.messages, v.question), q.answer, [str(c) for c in cands], rng)
            rng.setstate(known.state)
            picks = known.twelfths / 12.0  # (T, F, 5)
            seen = self.spread.setdefault(q.type.value, np.zeros(picks.shape[1:]))
            lead = self.lead.setdefault(q.type.value, np.zeros(known.lead.shape[1]))
            cost = (picks * seen).sum(axis=(1, 2)) + LEAD_WEIGHT * (known.lead @ lead)
            cost += np.array([rng.random() for _ in known.triples]) * 1e-6
            best = int(np.argmin(cost))
            seen += picks[best]
            lead += known.lead[best]
            chosen = [str(cands[k]) for k in known.triples[best]]
            # the answer keeps its letter: a build deals letters afterwards (`yanami.world._filter.Letters`)
            options = arranged(q.answer, chosen, rng, q.choices.index(q.answer))
            alternatives = intent.get("alternatives")
            kept = alternatives.items() if isinstance(alternatives, dict) else ()
            hidden = {**intent, "alternatives": {k: a for k, a in kept if a in options and a != q.answer}}
            questions.append(
                q.model_copy(
                    update={
                        "choices": options,
                        "answer_letters": [CHOICE_LETTERS[options.index(q.answer)]],
                        "hidden": q.hidden.model_copy(update={"intent": hidden}),
                    }
                )
            )
        return d.model_copy(update={"questions": questions})


def balance_questions(dialogues: list[Dialogue]) -> list[Dialogue]:
    """The dialogues with each question's distractors chosen again, for all of them together:
    in order, each question takes the distractors (among its candidates, kept in its hidden
    intent) whose picks by every one-feature rule fall where the questions of its type before
    it left the fewest, so that over a bench the answer's place in the order of every feature
    comes out even, even where single questions cannot all reach every place. Answers keep
    their letters (a build deals them afterwards, `yanami.world._filter.Letters`). Deterministic
    in the order given (`Balancer` does the same one dialogue at a time)."""
    b = Balancer()
    return [b.balance(d) for d in dialogues]
