"""Grading replies to questions: YANAMI's option reading, IMUG-Bench's option matching, value matching.

YANAMI (docs/evaluation.md, DSU): a reply to lettered options is read as a person would
read it (`read_options`): the option letters it names and the options whose text it
contains. It scores 1 when it names exactly one option and that option is the reference's,
else 0 (`option_score`); naming two options is wrong, not partial.

IMUG-Bench (docs/benchmarks.md): option letters are read with ``\\b([A-G])\\b``;
score = max(0, (n_correct - n_incorrect) / n_expected) * w_fmt, where w_fmt is 1 for a
reply of option letters only, 0.75 for letters with separators or the options' own text
and nothing else, 0.5 for any further text (a framing "Answer:" included), and the score is
0 with no valid letter. A reply made of option letters alone ("AC") names each of its letters.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

from yanami.contract import CHOICE_LETTERS

LETTER = re.compile(r"\b([A-G])\b")
_ONLY_LETTERS = re.compile(r"[A-G]+")
_ANY_WORD = re.compile(r"[^\W_]")
"""A letter or digit of any script: what is left of a reply beyond its options is text."""


def format_weight(reply: str, choices: Sequence[str]) -> float:
    """w_fmt for a reply that holds at least one option letter, IMUG-Bench's cases read literally:
    (A) 1 for option letters alone, run together ("AC"); (B) 0.75 for letters with separators or
    symbols, or with the options' own text, and nothing else ("A, C", "B. two"); (C) 0.5 for any
    further text ("The answer is B.", "Answer: D", "B because ...")."""
    text = reply.strip()
    if _ONLY_LETTERS.fullmatch(text):
        return 1.0
    rest = text
    for c in sorted(choices, key=len, reverse=True):
        if c.strip():
            rest = re.sub(re.escape(c.strip()), " ", rest, flags=re.IGNORECASE)
    return 0.5 if _ANY_WORD.search(LETTER.sub(" ", rest)) else 0.75


def choice_score(reply: str, expected: list[str], choices: list[str]) -> tuple[float, str]:
    """(score, reason) of a reply to a multiple-choice question whose right letters are ``expected``."""
    text = reply.strip()
    # A reply of letters only ("AC") names each letter; otherwise letters are read as words.
    found = list(dict.fromkeys(text if _ONLY_LETTERS.fullmatch(text) else LETTER.findall(reply)))
    if not found:
        return 0.0, "no option letter"
    right = [x for x in found if x in expected]
    wrong = [x for x in found if x not in expected]
    base = max(0.0, (len(right) - len(wrong)) / len(expected))
    w = format_weight(reply, choices)
    return base * w, f"chose {','.join(found)}; expected {','.join(expected)}; format weight {w}"


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans(string.punctuation, " " * len(string.punctuation))


def normalize(text: str) -> str:
    """Lower case, punctuation and articles removed, spaces collapsed."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def value_score(reply: str, answer: str) -> tuple[float, str]:
    """(score, reason) of a free answer: full credit when the normalized reference occurs in it."""
    want, got = normalize(answer), normalize(reply)
    ok = bool(want) and (got == want or f" {want} " in f" {got} ")
    return (1.0 if ok else 0.0), ("matches the reference" if ok else f"does not contain {answer!r}")


# YANAMI: an answer to lettered options, read as a person reads it --------------------------

_ALONE = re.compile(r"(?<![^\W_])[^\W_](?![^\W_])")
"""One letter or digit that no other letter or digit touches: "B" in "(B)", "**B**", "B-the"."""
_NEXT_WORD = re.compile(r"[^\S\n]+([^\W_]+)")
"""The word after a token on the same line (a letter alone on its line is never an article)."""
_WORD = re.compile(r"[^\W_]+")
_NOT_AFTER_ARTICLE = frozenset(
    {"a", "an", "the", "this", "that", "it", "is", "was", "because", "since", "as", "and", "or", "but"}
)
"""Words the English article "a" cannot precede: "A is correct", "A because ..." name option A."""


def _is_article(reply: str, start: int, end: int) -> bool:
    """Whether the "a" or "A" at ``reply[start:end]`` is the English article, not option A.

    The article is followed by a word on its line ("a red cube"). A capital "A" is the
    article only where a sentence starts: after a word or a comma ("I choose A because",
    "Hmm, A") a capital is the letter, since the article is lower case mid-sentence.
    """
    after = _NEXT_WORD.match(reply, end)
    if after is None or after.group(1).lower() in _NOT_AFTER_ARTICLE:
        return False
    if reply[start] == "a":
        return True
    before = reply[:start].rstrip()
    return not before or not (before[-1].isalnum() or before[-1] == ",")


def _letters_named(reply: str, n: int) -> set[int]:
    """The options (0-based) the reply names by letter, capital or lower case."""
    letters = CHOICE_LETTERS[:n]
    found = set()
    for m in _ALONE.finditer(reply):
        start, end = m.span()
        k = letters.find(m.group().upper())
        if k < 0:
            continue
        if reply[start - 1 : start] in ("'", "\u2019") and reply[start - 2 : start - 1].isalnum():
            continue  # the end of a contraction: the d of "I'd"
        if (reply[end : end + 1] == "." and reply[end + 1 : end + 2].isalnum()) or (
            reply[start - 1 : start] == "." and reply[start - 2 : start - 1].isalnum()
        ):
            continue  # a dotted abbreviation: "e.g.", "a.m."
        if m.group() in "aA" and _is_article(reply, start, end):
            continue
        found.add(k)
    return found


def _words(text: str) -> list[str]:
    """Lower-case words, punctuation and articles dropped (any script's punctuation separates)."""
    return [w for w in _WORD.findall(text.lower()) if w not in ("a", "an", "the")]


def _texts_named(reply: str, choices: Sequence[str]) -> set[int]:
    """The options (0-based) whose text the reply contains.

    A reply made of exactly one option's words, in any order, names that option. Otherwise
    each option's words must occur in a row; longer options are matched first, and the words
    they cover are spent, so "large red cube" does not also name an option "red cube".
    Options of one length are matched together: a span two of them share names both.
    """
    said = _words(reply)
    options = [_words(c) for c in choices]
    bag = sorted(said)
    whole = {i for i, w in enumerate(options) if w and sorted(w) == bag}
    if whole:
        return whole
    spent = [False] * len(said)
    found: set[int] = set()
    for size in sorted({len(w) for w in options if w}, reverse=True):
        spans = [
            (i, j)
            for i, w in enumerate(options)
            if len(w) == size
            for j in range(len(said) - size + 1)
            if said[j : j + size] == w and not any(spent[j : j + size])
        ]
        for i, j in spans:
            found.add(i)
            spent[j : j + size] = [True] * size
    return found


def read_options(reply: str, choices: Sequence[str]) -> list[int]:
    """Every option (0-based, in option order) the reply names, by its letter or by its text."""
    return sorted(_letters_named(reply, len(choices)) | _texts_named(reply, choices))


def read_option(reply: str, choices: Sequence[str]) -> int | None:
    """The one option the reply names; None when it names none or several."""
    named = read_options(reply, choices)
    return named[0] if len(named) == 1 else None


def option_score(reply: str, answer: str, choices: Sequence[str]) -> tuple[float, str]:
    """(1 or 0, reason) of a reply to lettered options whose right letter is ``answer``.

    Full credit or none (docs/evaluation.md): the reply must name the right option and no
    other; an answer that names two options is ambiguous, hence wrong.
    """
    by_letter = _letters_named(reply, len(choices))
    by_text = _texts_named(reply, choices)
    named = sorted(by_letter | by_text)
    if not named:
        return 0.0, f"names no option (no option letter, no option's text); expected {answer}"
    letters = [CHOICE_LETTERS[k] for k in named]
    if len(named) > 1:
        return 0.0, f"names several options ({', '.join(letters)}); expected {answer}"
    how = "letter and text" if named[0] in by_letter and named[0] in by_text else "letter" if by_letter else "text"
    return (1.0 if letters[0] == answer else 0.0), f"chose {letters[0]} (by its {how}); expected {answer}"
