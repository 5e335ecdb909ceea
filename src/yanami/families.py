"""The benchmark families yanami holds: YANAMI, WEAVE and IMUG-Bench, and any a plug-in adds.

A dataset declares its family and the protocol version it is scored under (the manifest's
``family`` and ``protocol``); each dialogue names its family again, and its group: a
YANAMI scenario, or a WEAVE or IMUG-Bench domain. Everything that names a family's
domains, their classes, its check kinds or how it is imported, judged and scored derives
from its `FamilyFacts`, looked up by name with `family_of`.

A family is a plug-in: the entry point group ``yanami.families`` maps its name to a
`FamilyFacts` (``toy = "toypkg:FACTS"``); yanami's own three are registered there too, and
`FAMILIES` holds them for code that needs no lookup. Its hooks (importer, judge, scorer)
are named as ``module:attribute`` strings, loaded when first used, so this module imports
only the standard library, like `yanami.scenarios`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib.metadata import entry_points
from typing import Any

ENTRY_POINTS = "yanami.families"


class Family(StrEnum):
    """Which benchmark a dialogue belongs to; it decides the protocol that scores it."""

    YANAMI = "yanami"
    WEAVE = "weave"
    IMUG = "imug"


@dataclass(frozen=True)
class FamilyFacts:
    """What a family's paper and public code fix."""

    family: str
    """Its name (``yanami``, ``weave``, ``imug``, or a plug-in's)."""
    title: str
    protocol: str
    """The protocol version yanami scores it under (bumped when a rule of scoring changes)."""
    classes: dict[str, tuple[str, ...]]
    """Class (WEAVE's category, IMUG-Bench's domain class) -> its domains, in the source's order."""
    open_domains: bool = False
    """Whether a dialogue may have a domain `classes` does not list: IMUG-Bench reads its classes
    from the source's own config and files a domain it does not list under "Unassigned"."""
    gt_history: str = ""
    """Why GT-History is not defined for it ("" where it is)."""
    self_history_min_turns: int = 0
    """Self-History is reported on its dialogues with at least this many generation turns."""
    check_kinds: tuple[str, ...] = ()
    """The check kinds its target turns are graded with (`yanami.schema.CheckKind` values)."""
    by_scenario: bool = False
    """Whether its dialogues are grouped by a YANAMI scenario (else by a domain of `classes`)."""
    checks_need_reference: bool = False
    """Whether a turn with checks must hold the assistant's reference image they are judged on."""
    importer: str | None = None
    """``module:function`` of ``yanami import NAME SRC --out DIR`` (``function(src, out, *,
    overwrite, link, on_record)`` -> the dataset's manifest); None: not imported."""
    judge: str | None = None
    """``module:function`` making its judge (``function(spec, dataset, responses, protocol_source)``
    -> a `yanami.models.Judge`); None: yanami's own judges (``exact`` or a VLM judge) grade it."""
    scorer: str = "yanami.scoring:YANAMI_SCORER"
    """``module:attribute`` of its scorer (`yanami.scoring.Scorer`): its scores, tables and report."""

    def hook(self, name: str) -> Any:
        """The object a hook names (``importer``, ``judge``, ``scorer``), imported on first use;
        None where the family has none."""
        target = getattr(self, name)
        if target is None:
            return None
        module, _, attribute = target.partition(":")
        return getattr(importlib.import_module(module), attribute)

    def domains(self) -> tuple[str, ...]:
        """Every domain, class by class."""
        return tuple(d for ds in self.classes.values() for d in ds)

    def class_of(self, domain: str) -> str | None:
        """The class a domain belongs to (None for a domain the family does not have)."""
        return next((c for c, ds in self.classes.items() if domain in ds), None)


# fmt: off
FAMILIES: dict[str, FamilyFacts] = {
    f.family: f
    for f in (
        FamilyFacts(
            Family.YANAMI,
            "YANAMI",
            "yanami-1",
            {},
            self_history_min_turns=2,
            check_kinds=("atomic", "capability"),
            by_scenario=True,
            checks_need_reference=True,
        ),
        # weichow23/weave, eval/config.py (WEAVE_DOMAIN)
        FamilyFacts(
            Family.WEAVE,
            "WEAVE",
            "weave-2",
            {
                "science": ("optics", "geography", "astronomy", "chemistry", "physics", "biology"),
                "creation": ("edit", "recall", "fusion", "story"),
                "logic": ("spatial", "mathematics"),
                "game": ("chess_game", "visual_jigsaw", "minecraft", "maze"),
            },
            check_kinds=("key_point",),
            importer="yanami.benchmarks.weave.importer:import_weave",
            judge="yanami.benchmarks.weave.judge:make_judge",
            scorer="yanami.benchmarks.weave.scores:SCORER",
        ),
        # ccccEsion/IMUG-Bench, config/domain_classes.json
        FamilyFacts(
            Family.IMUG,
            "IMUG-Bench",
            "imug-2",
            {
                "Static Spatial": (
                    "Color_Reasoning", "Apparel", "Interior_Design", "Geometric_Coloring", "Mechanisms",
                    "Object_Inference", "Counterintuitive_Reasoning",
                ),
                "Temporal Causal": ("Botany", "Chemistry", "Physics", "Damage_Repair", "Weather"),
                "Hybrid": (
                    "Stack_Simulation", "DIY", "Cooking", "Mirror_Reasoning", "Storage", "Paper_Crafting",
                    "Everyday_Tasks",
                ),
            },
            open_domains=True,
            gt_history="IMUG-Bench has no reference images for its image turns",
            check_kinds=("evaluation_point",),
            importer="yanami.benchmarks.imug.importer:import_imug",
            judge="yanami.benchmarks.imug.judge:make_judge",
            scorer="yanami.benchmarks.imug.scores:SCORER",
        ),
    )
}
# fmt: on
"""yanami's own families' facts. YANAMI's groups are its scenarios (`yanami.scenarios`), not domains."""
YANAMI_FAMILY, WEAVE_FAMILY, IMUG_FAMILY = FAMILIES["yanami"], FAMILIES["weave"], FAMILIES["imug"]
"""The same, as the entry points of ``yanami.families`` name them (pyproject.toml)."""


class UnknownFamily(ValueError):
    """A family name no installed plug-in registers."""


@cache
def _plugins() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINTS)}


@cache
def family_of(name: str) -> FamilyFacts:
    """The facts of the family ``name``: yanami's own, or a plug-in's (entry point group
    ``yanami.families``); `UnknownFamily` names the families there are."""
    if name in FAMILIES:
        return FAMILIES[name]
    ep = _plugins().get(name)
    if ep is None:
        raise UnknownFamily(f"unknown family {name!r} (known: {', '.join(known_families())})")
    try:
        facts = ep.load()
    except Exception as exc:  # a plug-in's own fault: one line, not its traceback
        raise UnknownFamily(f"the family plug-in {name!r} ({ep.value}) cannot be loaded: {exc}") from None
    if not isinstance(facts, FamilyFacts) or facts.family != name:
        raise UnknownFamily(f"the family plug-in {name!r} ({ep.value}) does not give FamilyFacts named {name!r}")
    return facts


def known_families() -> list[str]:
    """Every family name: yanami's own, then the installed plug-ins'."""
    return [*FAMILIES, *sorted(n for n in _plugins() if n not in FAMILIES)]


WEAVE_MODES = ("t2i", "edit", "fusion", "vqa")
"""WEAVE's turn modes: by the number of images the user's turn mentions (none, one, more), or
vqa for a text reply (``infer/loader.py``, ``detect_mode``)."""

CHECK_SCALES: dict[str, int] = {"atomic": 1, "capability": 1, "key_point": 10, "evaluation_point": 5}
"""Check kind -> the top of its scale: YANAMI's checks pass or fail (1), WEAVE's key points are
scored 0-10 as a checklist, IMUG-Bench's evaluation points 0-5 each."""


SOURCE_MARK = "source"
"""In a family judge's version: it asked the benchmark's own prompts (``--protocol-source``)."""


def own_prompts(judge_name: str, judge_version: str) -> bool:
    """Whether a family run's judge asked yanami's own prompts (not comparable with published
    numbers) rather than the benchmark's (``--protocol-source``); False where no prompt was asked
    (the ``rules`` judge)."""
    return judge_name != "rules" and f"-{SOURCE_MARK}-" not in judge_version
