"""Every seeded draw's key: the one place that knows how a seed is derived.

A draw that must come out the same on every machine, in every process and whatever the
worker count is seeded from a key naming what it draws for, never from shared state: the
parts (a purpose, the run's seed, a dialogue id, a turn, an attempt ...) joined by ``:``.
`seeded` gives a `random.Random` seeded with the key itself; `derived` gives an integer
from the key's SHA-256, for a seed handed on (a model request's, a numpy generator's) or
a single draw.
"""

from __future__ import annotations

import hashlib
import random

SEPARATOR = ":"


def seed_key(*parts: object) -> str:
    """The key of a draw: its parts, as text, joined by ``:``."""
    return SEPARATOR.join(map(str, parts))


def seeded(*parts: object) -> random.Random:
    """A random generator for the draw ``parts`` name (the same sequence everywhere)."""
    return random.Random(seed_key(*parts))


def derived(*parts: object, bits: int = 64) -> int:
    """A ``bits``-bit integer (a multiple of 8, at most 256) from the SHA-256 of the draw's key."""
    return int.from_bytes(hashlib.sha256(seed_key(*parts).encode()).digest()[: bits // 8], "big")
