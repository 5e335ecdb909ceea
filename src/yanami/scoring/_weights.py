"""The scoring weights and the per-image arithmetic: the one place that knows them.

Equation (2) weighs understanding, State Consistency and Visual Quality 0.4 / 0.4 / 0.2
for models that answer questions; equation (3) weighs SC and VQ 0.6 / 0.4 for
generation-only models. The generation-side score 0.6 SC + 0.4 VQ is also what the
dialogue progression (Table 20), the History effect and the judge-agreement item scores
use, and the bootstrap applies the same weights to its resamples. Every one of them calls
the functions below; no other module spells a weight.

The functions are plain arithmetic, so they accept NumPy arrays as well as floats.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

N = TypeVar("N", float, np.ndarray)


@dataclass(frozen=True)
class Weights:
    """The weights of equations (2) and (3)."""

    understanding: float = 0.4
    sc: float = 0.4
    vq: float = 0.2
    """Equation (2): models that answer questions."""
    generation_sc: float = 0.6
    generation_vq: float = 0.4
    """Equation (3), and every generation-side score (progression, History effect, agreement)."""


WEIGHTS = Weights()


def scene_score(understanding: N | None, sc100: N, vq100: N) -> N:
    """Equation (2) for models that answer questions, (3) for generation-only models (all on 0-100)."""
    if understanding is None:
        return generation_score(sc100, vq100)
    return WEIGHTS.understanding * understanding + WEIGHTS.sc * sc100 + WEIGHTS.vq * vq100


def generation_score(sc100: N, vq100: N) -> N:
    """The generation-side score, 0.6 SC + 0.4 VQ (both on 0-100): equation (3)."""
    return WEIGHTS.generation_sc * sc100 + WEIGHTS.generation_vq * vq100


def image_generation_score(sc: float | None, vq: float | None) -> float | None:
    """One image's generation-side score on 0-100 from its SC (0..1) and VQ (0..10); None when either is unknown."""
    if sc is None or vq is None:
        return None
    return generation_score(sc * 100, vq * 10)


def image_sc(atomic_passed: Sequence[bool]) -> float | None:
    """An image's State Consistency: passed / total over its atomic checks (0..1).

    None for an image without atomic checks: it says nothing about state consistency, so it
    is left out of SC (its VQ still counts), never counted as 1.0.
    """
    if not atomic_passed:
        return None
    return sum(bool(p) for p in atomic_passed) / len(atomic_passed)


def generation_formula() -> str:
    """The generation-side score as table titles spell it, e.g. ``0.6 SC + 0.4 VQ``."""
    return f"{WEIGHTS.generation_sc:g} SC + {WEIGHTS.generation_vq:g} VQ"
