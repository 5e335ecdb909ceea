"""Words for the world: referring expressions, paraphrases, ordinals.

Referring expressions are *minimal*: the fewest attributes that single an object out in
the scene it refers to, picked at random among the minimal choices so that the same
object is not always named the same way.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from yanami.world._scene import Scene, WorldObject

ORDER = ("size", "colour", "material", "shape")
REL_WORDS = {"left": "to the left of", "right": "to the right of", "front": "in front of", "behind": "behind"}
"""How each relation reads in a sentence."""
MATERIAL_WORDS = {"matte": ("matte", "rubber"), "metal": ("metal", "shiny")}
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def phrase(attrs: dict[str, Any], rng: random.Random | None = None) -> str:
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


def minimal_where(o: WorldObject, scene: Scene, rng: random.Random) -> dict[str, Any]:
    """A smallest attribute filter that selects ``o`` alone in ``scene`` (always includes shape)."""
    others = [p for p in scene.objects if p.id != o.id]
    for n in range(1, 5):
        options = []
        for keys in itertools.combinations(("colour", "size", "material"), n - 1):
            where = {k: getattr(o, k) for k in ("shape", *keys)}
            if not any(all(getattr(p, k) == v for k, v in where.items()) for p in others):
                options.append(where)
        if options:
            return rng.choice(options)
    return full_where(o)


def full_where(o: WorldObject) -> dict[str, Any]:
    """Every attribute of ``o``."""
    return {"shape": o.shape, "colour": o.colour, "size": o.size, "material": o.material}


def a(attrs: dict[str, Any], rng: random.Random | None = None) -> str:
    """``a large red cube`` / ``an ...``."""
    text = phrase(attrs, rng)
    return ("an " if text[0] in "aeiou" else "a ") + text


def ordinal(n: int) -> str:
    """``second`` for 2."""
    return ORDINALS[n - 1] if 1 <= n <= len(ORDINALS) else f"{n}th"


def pick(rng: random.Random, options: list[str] | tuple[str, ...], **fields: Any) -> str:
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


def decorate(rng: random.Random, text: str) -> str:
    """Vary a user message the way people do: an occasional opener or sign-off."""
    opener, closer = rng.choice(_OPENERS), rng.choice(_CLOSERS)
    if opener:
        text = opener + text[0].lower() + text[1:] if not text.startswith("I ") else opener + text
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
    return rng.choice(_REPLY_OPENERS) + text + rng.choice(_REPLY_CLOSERS)
