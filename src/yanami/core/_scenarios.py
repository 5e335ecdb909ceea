"""The scenario facts, as one table, and the build presets that size a dataset of them.

Everything else that names scenarios derives from `FACTS`: the data model's `Scenario`
(defined here, exported by `yanami.contract`), the scores and the paper's tables
(`yanami.scoring`), the training mix of ``yanami build`` (`yanami.world`) and the command
line's help and errors. The dialogues of a scenario are written by the module
``yanami/world/_scenarios/<value>.py`` (its ``compose``).

A new scenario is therefore two files: a `Scenario` member with its `FACTS` entry here,
and its module in the world.

This module imports only the standard library, so that ``yanami --help`` can list the
scenarios without loading the data model.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Scenario(StrEnum):
    """The four interaction scenarios of YANAMI."""

    FUSION = "fusion"
    EDITING = "editing"
    WORLD_MODELING = "world_modeling"
    REASONING = "reasoning"


@dataclass(frozen=True)
class ScenarioFacts:
    """What the paper says about one scenario."""

    scenario: Scenario
    title: str
    """The paper's name for it (``Multi-Image Fusion``)."""
    short: str
    """Its column heading in the paper's tables (``Fusion``)."""
    dsu_table: int
    """The paper's table of dialogue-state understanding for this scenario."""
    realization_table: int
    """The paper's table of understanding and visual realization for this scenario."""
    train_share: float
    """Its share of the paper's training mix."""
    min_pool_images: int = 1
    """How many pool images a group needs to be routed to this scenario (``yanami prepare``)."""


FACTS: dict[Scenario, ScenarioFacts] = {
    f.scenario: f
    for f in (
        ScenarioFacts(Scenario.FUSION, "Multi-Image Fusion", "Fusion", 18, 19, 0.36, min_pool_images=2),
        ScenarioFacts(Scenario.EDITING, "Image Editing", "Editing", 14, 15, 0.25),
        ScenarioFacts(Scenario.WORLD_MODELING, "World Modeling", "Modeling", 16, 17, 0.28),
        ScenarioFacts(Scenario.REASONING, "Visual Reasoning", "Reasoning", 12, 13, 0.11),
    )
}
"""Every scenario's facts, in the order of `Scenario` (the order of the paper's columns)."""


class Preset(StrEnum):
    """``yanami build --preset``."""

    BENCH = "bench"
    TRAIN = "train"
    TINY = "tiny"


PRESETS: dict[str, dict[str, Any]] = {
    Preset.BENCH.value: {"split": "bench", "per_scenario": 100},
    Preset.TRAIN.value: {"split": "train", "dialogues": 10_000},
    Preset.TINY.value: {"split": "bench", "per_scenario": 2},
}
"""Each preset's split and size: so many per scenario, or so many in all in the training mix."""


def train_mix() -> str:
    """The training mix in words: ``36/25/28/11 %`` (in the order of `Scenario`)."""
    return "/".join(f"{round(f.train_share * 100)}" for f in FACTS.values()) + " %"


def describe_presets() -> str:
    """The presets in words, for ``--help``."""
    words = []
    for name, p in PRESETS.items():
        size = (
            f"{p['per_scenario']:,} per scenario"
            if "per_scenario" in p
            else f"{p['dialogues']:,} in the training mix ({train_mix()})"
        )
        words.append(f"{name}: {size}, split {p['split']}")
    return "; ".join(words) + "."


def parse_scenarios(text: str) -> list[Scenario]:
    """Comma-separated scenario values, in the order given; `ValueError` names the valid ones."""
    valid = [s.value for s in Scenario]
    chosen: list[Scenario] = []
    for name in (s.strip() for s in text.split(",")):
        if not name:
            continue
        if name not in valid:
            raise ValueError(f"unknown scenario {name!r} (choose from {', '.join(valid)})")
        if name in chosen:
            raise ValueError(f"scenario {name!r} given twice")
        chosen.append(Scenario(name))
    return chosen
