"""The scenarios as scripts of moves over a `Composer`, one module per scenario.

The module of a scenario is named by its value (``fusion.py`` for the value ``fusion``) and
its ``compose(c)`` writes one dialogue; `_skeleton` holds what every script is written
on (the move, the opening, the four questions) and `_moves` the moves more than one
scenario makes. Every script sets a constraint and later tests it, refers back to objects
by pronoun, by turn or by picture, retrieves something only the history holds, and
corrects an earlier decision, so each dialogue exercises at least four capabilities and
carries one question of each DSU type.

A new scenario: its entry in `yanami/core/_scenarios.py` and its module here; `COMPOSERS` finds it.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

from yanami.contract import Dialogue, Scenario, seeded
from yanami.world._compose import Composer, Reducible
from yanami.world._place import NoRoom
from yanami.world._scenarios._skeleton import Retry
from yanami.world._shortcuts import OptionSets

Compose = Callable[[Composer], None]


def composer(scenario: Scenario) -> Compose:
    """The ``compose`` of the scenario's module (``_scenarios/<value>.py``)."""
    module = import_module(f"{__name__}.{scenario.value}")
    fn: Compose = module.compose
    return fn


COMPOSERS: dict[Scenario, Compose] = {s: composer(s) for s in Scenario}
"""Every scenario's script."""


def compose_dialogue(scenario: Scenario, dialogue_id: str, seed: int) -> tuple[Dialogue, dict[str, bytes]]:
    """Build one dialogue of a scenario from a seed; returns it with its images' bytes."""
    d, images, _ = _compose(scenario, dialogue_id, seed, rebalanced=False)
    return d, images


def compose_for_build(
    scenario: Scenario, dialogue_id: str, seed: int
) -> tuple[Dialogue, dict[str, bytes], dict[str, OptionSets]]:
    """`compose_dialogue` for a build, with what its balancing weighs for the questions (by id):
    questions it chooses the distractors of again hold placeholders until it does."""
    return _compose(scenario, dialogue_id, seed, rebalanced=True)


def _compose(
    scenario: Scenario, dialogue_id: str, seed: int, *, rebalanced: bool
) -> tuple[Dialogue, dict[str, bytes], dict[str, OptionSets]]:
    for attempt in range(50):
        rng = seeded(seed, dialogue_id, attempt)
        c = Composer(scenario, rng, dialogue_id, seed, rebalanced=rebalanced)
        try:
            COMPOSERS[scenario](c)
        except (Retry, Reducible, NoRoom):
            continue
        d = c.dialogue({"scenario": scenario.value, "attempt": attempt})
        used = {p.sha256 for p in d.images()}
        return d, {k: v for k, v in c.image_bytes.items() if k in used}, c.option_sets
    raise RuntimeError(f"could not build {dialogue_id}; this is a bug in the world's scripts")


__all__ = ["COMPOSERS", "Retry", "compose_dialogue", "compose_for_build", "composer"]
