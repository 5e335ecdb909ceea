"""Grading replies to questions: IMUG-Bench's option matching, or normalized value matching.

Option matching (PROTOCOL.md section 8): option letters are read with ``\\b([A-G])\\b``;
score = max(0, (n_correct - n_incorrect) / n_expected) * w_fmt, where w_fmt is 1 for a
reply of option letters only, 0.75 for letters with separators or the options' own text
but no explanation, 0.5 when it explains, and the score is 0 with no valid letter. A reply
made of option letters alone ("AC") names each of its letters.
"""

from __future__ import annotations

import re
import string

LETTER = re.compile(r"\b([A-G])\b")
_ONLY_LETTERS = re.compile(r"[A-G]+")
_SEPARATORS = re.compile(r"[\s,;/|&.:()\[\]{}\-\"'*]+")
_FILLER = {"and", "answer", "option", "options", "the", "is", "correct"}
"""Words that frame a choice without explaining it ("Answer: B", "the correct option is B")."""


def format_weight(reply: str, choices: list[str]) -> float:
    """w_fmt for a reply that holds at least one option letter."""
    text = reply.strip()
    if _ONLY_LETTERS.fullmatch(text):
        return 1.0
    rest = text.lower()
    for c in sorted(choices, key=len, reverse=True):
        if c:
            rest = rest.replace(c.lower(), " ")
    words = [w for w in _SEPARATORS.split(LETTER.sub(" ", rest.upper()).lower()) if w]
    words = [w for w in words if w not in _FILLER]
    return 0.75 if not words else 0.5


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
