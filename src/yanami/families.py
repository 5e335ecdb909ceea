"""The benchmark families yanami holds, as one table: YANAMI, WEAVE and IMUG-Bench.

A dataset declares its family and the protocol version it is scored under (the manifest's
``family`` and ``protocol``); each dialogue names its family again, and its group: a
YANAMI scenario, or a WEAVE or IMUG-Bench domain. Everything that names a family's
domains, their classes or a check's scale derives from `FAMILIES` and `CHECK_SCALES`.

Like `yanami.scenarios`, this module imports only the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Family(StrEnum):
    """Which benchmark a dialogue belongs to; it decides the protocol that scores it."""

    YANAMI = "yanami"
    WEAVE = "weave"
    IMUG = "imug"


@dataclass(frozen=True)
class FamilyFacts:
    """What a family's paper and public code fix."""

    family: Family
    title: str
    protocol: str
    """The protocol version yanami scores it under (bumped when a rule of scoring changes)."""
    classes: dict[str, tuple[str, ...]]
    """Class (WEAVE's category, IMUG-Bench's domain class) -> its domains, in the source's order."""
    open_domains: bool = False
    """Whether a dialogue may have a domain `classes` does not list: IMUG-Bench reads its classes
    from the source's own config and files a domain it does not list under "Unassigned"."""
    own_protocol: bool = True
    """Whether yanami's own judges grade it (exact or VLM); otherwise its protocol's judge over a
    VLM judge (`yanami.judges.FamilyJudge`), and ``--protocol-source`` applies."""
    gt_history: str = ""
    """Why GT-History is not defined for it ("" where it is)."""
    self_history_min_turns: int = 0
    """Self-History is reported on its dialogues with at least this many generation turns."""

    def domains(self) -> tuple[str, ...]:
        """Every domain, class by class."""
        return tuple(d for ds in self.classes.values() for d in ds)

    def class_of(self, domain: str) -> str | None:
        """The class a domain belongs to (None for a domain the family does not have)."""
        return next((c for c, ds in self.classes.items() if domain in ds), None)


# fmt: off
FAMILIES: dict[Family, FamilyFacts] = {
    f.family: f
    for f in (
        FamilyFacts(Family.YANAMI, "YANAMI", "yanami-1", {}, self_history_min_turns=2),
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
            own_protocol=False,
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
            own_protocol=False,
            gt_history="IMUG-Bench has no reference images for its image turns",
        ),
    )
}
# fmt: on
"""Every family's facts. YANAMI's groups are its scenarios (`yanami.scenarios`), not domains."""


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
