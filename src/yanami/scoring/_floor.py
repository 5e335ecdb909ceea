"""Where the floor is: the best trivial strategy's score on a run's bench, and the run's score above it.

A world bench records its trivial floors (`Manifest.floors`: copies, jittered copies, union,
blank, noise, played as the exact judge reads them under GT-History). The floor of a run is the
best of them scored with the run's own equations over the run's scenarios: equation (2) with the
DSU questions answered at chance (25: the answer letters are balanced) for a model that answers,
equation (3) for a generation-only one, macro-averaged over the scenarios as the benchmark score
is. A run's score above the floor is ``(score - floor) / (100 - floor)`` (0-100): a model at 55
on a bench whose floor is 50 is 10 % of the way from the floor to a perfect score.

The same place says whether a run's bench is public (anyone can rebuild it from the code and its
seed: a model may have seen it) or private (``yanami build --private``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from yanami.scoring._weights import scene_score
from yanami.store import MANIFEST, Manifest, provenance

FLOOR_LABEL = "Floor: best trivial"
"""How tables name the floor's row."""

CHANCE_DSU = 25.0
"""The DSU score of a strategy that answers at random (or always A): four options, balanced letters."""

NOT_TRIVIAL = frozenset({"stateless"})
"""Strategies a bench records beside the floors that are not trivial (the stateless reading applies
the current request: it is the bar a floor must stay under, not a floor)."""


@dataclass(frozen=True)
class BenchFacts:
    """What a run's bench says of itself: public or private, and its trivial floors."""

    kind: str
    """``public``, ``private`` or ``unknown``."""
    line: str
    """The provenance as a report states it."""
    floors: dict[str, dict[str, tuple[float, int]]] | None
    """`Manifest.floors`, or None (no floors recorded, or the bench is not where the run says)."""


@dataclass(frozen=True)
class Floor:
    """A run's floor: the best trivial strategy on its bench, scored as the run is."""

    strategy: str
    score: float
    """The benchmark score (0-100) of that strategy over the run's scenarios."""
    scenarios: dict[str, float]
    """Its scene score per scenario."""
    sc: float
    """Its State Consistency, averaged over the scenarios."""
    vq: float
    """Its Visual Quality (0-100), averaged over the scenarios."""
    dsu: float | None
    """Its understanding score: chance (`CHANCE_DSU`) for a run that answers, None for a generation-only run."""


def floor_vq(strategy: str) -> float:
    """A strategy's Visual Quality (0-10), as the exact judge reads its pictures."""
    from yanami.world import FLOOR_VQ

    return FLOOR_VQ.get(strategy, 0.0)


@cache
def bench_facts(bench: str, sha256: str) -> BenchFacts:
    """The facts of the bench a run recorded (its path and the SHA-256 of its manifest)."""
    path = Path(bench) / MANIFEST
    try:
        raw = path.read_bytes()
    except OSError:
        return BenchFacts("unknown", f"unknown (the bench is not at {bench})", None)
    if hashlib.sha256(raw).hexdigest() != sha256:
        return BenchFacts("unknown", f"unknown (the bench at {bench} is not the one the run was made on)", None)
    try:
        manifest = Manifest.model_validate(json.loads(raw))
    except ValueError:
        return BenchFacts("unknown", f"unknown ({path} does not parse)", None)
    kind, line = provenance(manifest.generator)
    return BenchFacts(kind, line, manifest.floors)


def floor_of(facts: BenchFacts, scenarios: list[str], answers: bool) -> Floor | None:
    """The best trivial strategy's score over ``scenarios`` (None: no floors, or a scenario lacks one)."""
    if facts.floors is None or not scenarios:
        return None
    best: Floor | None = None
    names = {n for sc in scenarios for n in facts.floors.get(sc, {})} - NOT_TRIVIAL
    for name in sorted(names):
        per: dict[str, float] = {}
        scs, vqs = [], []
        for sc in scenarios:
            total, images = facts.floors.get(sc, {}).get(name, (0.0, 0))
            if not images:
                break
            sc100, vq100 = 100 * total / images, 10 * floor_vq(name)
            per[sc] = float(scene_score(CHANCE_DSU if answers else None, sc100, vq100))
            scs.append(sc100)
            vqs.append(vq100)
        else:
            score = sum(per.values()) / len(per)
            if best is None or score > best.score:
                dsu = CHANCE_DSU if answers else None
                best = Floor(name, score, per, sum(scs) / len(scs), sum(vqs) / len(vqs), dsu)
    return best


def above_floor(score: float | None, floor: float | None) -> float | None:
    """How far a score is from the floor to 100, on 0-100 (negative below the floor)."""
    if score is None or floor is None or floor >= 100:
        return None
    return 100 * (score - floor) / (100 - floor)
