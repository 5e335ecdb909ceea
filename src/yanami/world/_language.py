"""Words for the world: referring expressions, paraphrases, ordinals.

Referring expressions are *minimal*: the fewest attributes that single an object out in
the scene it refers to, picked at random among the minimal choices so that the same
object is not always named the same way.
"""

from __future__ import annotations

import itertools
import random
import re
from typing import Any

from yanami.world._predicates import Where
from yanami.world._scene import Scene, WorldObject

ORDER = ("size", "colour", "material", "shape")
REL_WORDS = {"left": "to the left of", "right": "to the right of", "front": "in front of", "behind": "behind"}
"""How each relation reads in a sentence."""
MATERIAL_WORDS = {"matte": ("matte", "rubber"), "metal": ("metal", "shiny")}
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def phrase(attrs: Where, rng: random.Random | None = None) -> str:
    """``large red metal cube`` for the given attributes (the shape word always ends it)."""
    words = []
    for key in ORDER:
        if key == "shape":
            continue
        if key in attrs:
            v = attrs[key]
            words.append(rng.choice(MATERIAL_WORDS[v]) if key == "material" and rng else v)
    shape = attrs.get("shape", "object")
    return " ".join([*words, shape])


def minimal_where(o: WorldObject, scene: Scene, rng: random.Random, loose: dict[int, set[str]] | None = None) -> Where:
    """A smallest attribute filter that selects ``o`` alone in ``scene`` (always includes shape).

    ``loose`` (object id -> attributes a free choice sets) makes the filter hold whatever
    those choices are: it never names a free attribute of ``o``, and a free attribute of
    another object may take any value. Without such a filter, all of ``o``'s fixed attributes.
    """
    loose = loose or {}
    mine = loose.get(o.id, set())
    # The same object in the same scene is named again and again (every fact about it, every
    # pair it is in): the filters that name it are worked out once, the draw among them is not.
    key = (id(scene), o.id, o.shape, o.colour, o.size, o.material, tuple((k, *sorted(v)) for k, v in loose.items()))
    known = _NAMING.get(key)
    if known is not None and known[0] is scene:
        options = known[1]
    else:
        options = _naming_filters(o, scene, loose, mine)
        if len(_NAMING) >= 512:
            _NAMING.clear()
        _NAMING[key] = (scene, options)  # the scene is held, so its id is not reused while cached
    if options:
        return {k: getattr(o, k) for k in ("shape", *rng.choice(options))}
    return {k: v for k, v in full_where(o).items() if k not in mine}


_NAMING: dict[tuple[Any, ...], tuple[Scene, list[tuple[str, ...]]]] = {}
"""The latest `_naming_filters`, by scene (identity), object and free attributes."""


def _naming_filters(o: WorldObject, scene: Scene, loose: dict[int, set[str]], mine: set[str]) -> list[tuple[str, ...]]:
    """The attributes besides the shape of the smallest filters that name ``o`` alone whatever
    the free attributes are, in the order `minimal_where` draws from (empty: none does)."""
    if "shape" in mine:
        return []
    # Per other object, the attributes in which it surely differs from ``o`` (as bits of `_BIT`):
    # a filter names ``o`` alone when it shares a bit with every one of them, which is what
    # `names_one` checks, filter by filter.
    own = {k: getattr(o, k) for k in _BIT}
    differ = []
    for p in scene.objects:
        if p.id != o.id:
            free = loose.get(p.id, ())
            differ.append(sum(bit for k, bit in _BIT.items() if k not in free and getattr(p, k) != own[k]))
    for combos in _COMBOS:
        options = [keys for keys, bits in combos if mine.isdisjoint(keys) and all(d & bits for d in differ)]
        if options:
            return options
    return []


_BIT = {"shape": 1, "colour": 2, "size": 4, "material": 8}
_COMBOS = tuple(
    tuple((keys, 1 | sum(_BIT[k] for k in keys)) for keys in itertools.combinations(("colour", "size", "material"), n))
    for n in range(4)
)
"""Per number of attributes besides the shape, the filters `minimal_where` tries, in order, with their bits."""


def names_one(where: Where, o: WorldObject, scene: Scene, loose: dict[int, set[str]] | None = None) -> bool:
    """Whether ``where`` singles out ``o`` in ``scene`` whatever the free attributes (``loose``,
    object id -> attributes a free choice sets) turn out to be."""
    items = where.items()
    mine = loose.get(o.id) if loose else None
    for k, v in items:
        if (mine is not None and k in mine) or getattr(o, k) != v:
            return False
    for p in scene.objects:
        if p.id == o.id:
            continue
        free = loose.get(p.id) if loose else None
        for k, v in items:
            if (free is None or k not in free) and getattr(p, k) != v:
                break  # p surely differs: not selected
        else:
            return False
    return True


def full_where(o: WorldObject) -> Where:
    """Every attribute of ``o``."""
    return {"shape": o.shape, "colour": o.colour, "size": o.size, "material": o.material}


def a(attrs: Where, rng: random.Random | None = None) -> str:
    """``a large red cube`` / ``an ...``."""
    text = phrase(attrs, rng)
    return ("an " if text[0] in "aeiou" else "a ") + text


def ordinal(n: int) -> str:
    """``second`` for 2."""
    return ORDINALS[n - 1] if 1 <= n <= len(ORDINALS) else f"{n}th"


def pick(rng: random.Random, options: list[str] | tuple[str, ...], **fields: object) -> str:
    """One paraphrase, filled in, with its first letter capitalised."""
    text = rng.choice(options).format(**fields)
    return text[0].upper() + text[1:]


def listing(items: list[str]) -> str:
    """``a, b and c``."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


_OPENERS = ("", "", "", "Hmm. ", "Okay, ", "Alright. ", "So, ", "Right, ", "Hey, ", "Next thing: ", "Now, ")
_CLOSERS = ("", "", "", " Thanks!", " Thank you.", " Please.", " No rush.", " Appreciate it.", " :)", " Cheers.")


_FILLERS = (
    "actually",
    "alright",
    "also",
    "and",
    "certainly",
    "correction",
    "deal",
    "done",
    "fixed",
    "good",
    "got it",
    "hey",
    "hmm",
    "i like it",
    "last one",
    "next",
    "nice",
    "not convinced",
    "noted",
    "now",
    "of course",
    "okay",
    "on second thought",
    "right",
    "so",
    "sure",
    "understood",
    "wait",
    "yes",
)
"""Words that open a message as a filler or an acknowledgement: never two in a row."""


def _opens_with_filler(text: str) -> bool:
    head = text.lower()
    return any(head.startswith(f) and not head[len(f) : len(f) + 1].isalpha() for f in _FILLERS)


def decorate(rng: random.Random, text: str) -> str:
    """Vary a user message the way people do: an occasional opener or sign-off."""
    opener, closer = rng.choice(_OPENERS), rng.choice(_CLOSERS)
    if opener and not _opens_with_filler(text):
        keep = opener.endswith(". ") or text.startswith(("I ", "I'"))
        text = opener + (text if keep else text[0].lower() + text[1:])
    if closer and text.rstrip().endswith("?") and closer.strip() in ("Please.",):
        closer = ""
    return text + closer


_REPLY_OPENERS = ("", "", "", "Sure. ", "Of course. ", "Certainly! ", "Alright. ", "Happy to. ", "Okay! ")
_REPLY_CLOSERS = (
    "",
    "",
    "",
    " Anything else?",
    " What's next?",
    " Let me know if you'd like changes.",
    " Over to you.",
)


def decorate_reply(rng: random.Random, text: str) -> str:
    """Vary an assistant message: an occasional opener or follow-up question."""
    opener, closer = rng.choice(_REPLY_OPENERS), rng.choice(_REPLY_CLOSERS)
    if _opens_with_filler(text):
        opener = ""
    if _ENDS_WITH_A_CUE.search(text):
        closer = ""
    return opener + text + closer


def add_sentence(reply: str, sentence: str) -> str:
    """``reply`` with ``sentence`` added to what it says, before a closing follow-up question."""
    for closer in _REPLY_CLOSERS:
        if closer and reply.endswith(closer):
            return reply[: -len(closer)] + " " + sentence + closer
    return reply + " " + sentence


_ENDS_WITH_A_CUE = re.compile(r"(\?|Ready when you are\.|Tell me what to change\.)$")
"""An assistant message that already hands the turn back: no follow-up question after it."""


_SHAPES = "(?:cube|sphere|cylinder)s?"
_LINT: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("lower-case letter after a full stop", re.compile(r"(?:^|[.!?]\s+)[a-z]")),
    ("doubled word", re.compile(r"\b(\w+)\s+\1\b", re.IGNORECASE)),
    (
        "stacked fillers",
        re.compile(rf"^(?:{'|'.join(_FILLERS)}|happy to)[.,!:]? +(?:{'|'.join(_FILLERS)})\b", re.IGNORECASE),
    ),
    (
        "viewpoint phrase",
        re.compile(r"\bfrom (?:to|a quarter|halfway|around)\b|\bseen from to\b|\bfrom the opposite side of where"),
    ),
    ("space before punctuation", re.compile(r"\s[.,;:!?](?!\))")),
    ("capital article mid-sentence", re.compile(r"[a-z,] (?:The|An) [a-z]")),
    (
        "stacked closers",
        re.compile(
            r"(\?|Ready when you are\.|Tell me what to change\.) "
            r"(Anything else\?|What's next\?|Let me know if you'd like changes\.|Over to you\.)$"
        ),
    ),
)


def lint(text: str, constraint_kinds: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """What a reviewer would flag in a message: a lower-case letter opening a sentence, a
    doubled word, the same noun phrase twice in one sentence (``the sphere … the sphere``),
    stacked fillers (``Sure. Sure,``, ``So, and``), a garbled viewpoint phrase, and wording
    that does not fit the dialogue's rule (``my rule protects`` when the rule bans a colour)."""
    found = [f"{name}: {text!r}" for name, pattern in _LINT if pattern.search(text)]
    for sentence in re.split(r"[.!?;:]\s", text):
        phrases = [
            m.group(1)
            for m in re.finditer(r"\b(the (?:\w+ ){0,3}" + _SHAPES + r")\b(?! from)", sentence, re.IGNORECASE)
        ]
        doubled = {p for p in phrases if phrases.count(p) > 1}
        if doubled:
            found.append(f"doubled phrase {sorted(doubled)}: {text!r}")
    if "protect" not in constraint_kinds and re.search(r"\brule protects\b|\bprotected by\b", text):
        found.append(f"wording for a protected object under another rule: {text!r}")
    if "forbid_colour" not in constraint_kinds and re.search(r"\bbanned\b|\bruled out\b", text):
        found.append(f"wording for a colour ban under another rule: {text!r}")
    return found
