"""The benchmark families yanami holds: YANAMI, WEAVE and IMUG-Bench, and any a plug-in adds.

A dataset declares its family and the protocol version it is scored under (the manifest's
``family`` and ``protocol``); each dialogue names its family again, and its group: a
YANAMI scenario, or a WEAVE or IMUG-Bench domain. Everything that names a family's
domains, their classes, its check kinds or how it is imported, judged and scored derives
from its `FamilyFacts`, looked up by name with `family_of`.

A family is a plug-in: the entry point group ``yanami.families`` maps its name to a
`FamilyFacts` (``toy = "toypkg:FACTS"``); yanami's own three are registered there like any
other, each by the facts in its own folder (``yanami.families.weave:FACTS``). A family owns
its check kinds and their scales (`FamilyFacts.check_kinds`). Its hooks (importer, judge,
scorer) are named as ``module:attribute`` strings, loaded when first used, so this module
imports only the standard library.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import entry_points
from typing import Any

_ENTRY_POINTS = "yanami.families"


DEFAULT_FAMILY = "yanami"
"""The family a dataset or dialogue belongs to when it names none."""


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
    default_history: str = "gt"
    """The history ``yanami eval`` runs it under when ``--history`` is not given: ``gt`` or
    ``self`` (``self`` where GT-History is not defined)."""
    self_history_min_turns: int = 0
    """Self-History is reported on its dialogues with at least this many generation turns."""
    check_kinds: dict[str, int] = field(default_factory=dict)
    """The check kinds its target turns are graded with -> the top of each kind's scale (1: pass
    or fail). YANAMI's atomic and capability checks pass or fail, WEAVE's key points are scored
    0-10 as a checklist, IMUG-Bench's evaluation points 0-5 each. A kind belongs to one family."""
    by_scenario: bool = False
    """Whether its dialogues are grouped by a YANAMI scenario (else by a domain of `classes`)."""
    checks_need_reference: bool = False
    """Whether a turn with checks must hold the assistant's reference image they are judged on."""
    importer: str | None = None
    """``module:function`` of ``yanami import NAME SRC --out DIR`` (``function(src, out, *,
    overwrite, link, on_record)`` -> the dataset's manifest); None: not imported."""
    judge: str | None = None
    """``module:function`` making its judge, a `yanami.judges.JudgeFactory` (``function(spec,
    context)`` -> a `Judge`); None: yanami's own judges (``exact`` or a VLM judge) grade it."""
    scorer: str = "yanami.scoring:YANAMI_SCORER"
    """``module:attribute`` of its scorer (`yanami.scoring.Scorer`): its scores, tables and report."""

    def __post_init__(self) -> None:
        if self.default_history not in ("gt", "self") or (self.gt_history and self.default_history == "gt"):
            raise ValueError(f"{self.family}: default_history {self.default_history!r}: gt or self, and self where "
                             "GT-History is not defined")  # fmt: skip

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


class UnknownFamily(ValueError):
    """A family name no installed plug-in registers."""


@cache
def _plugins() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=_ENTRY_POINTS)}


@cache
def family_of(name: str) -> FamilyFacts:
    """The facts of the family ``name``, registered under the entry point group
    ``yanami.families`` (yanami's own three there too); `UnknownFamily` names the families there are."""
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
    """Every installed family's name: the default (``yanami``) first, then the others by name."""
    return sorted(_plugins(), key=lambda n: (n != DEFAULT_FAMILY, n))


@cache
def check_kinds() -> dict[str, int]:
    """Every check kind the installed families declare -> the top of its scale. A plug-in that
    cannot be loaded adds none (reading its dialogues reports it)."""
    out: dict[str, int] = {}
    for name in known_families():
        try:
            out.update(family_of(name).check_kinds)
        except UnknownFamily:
            continue
    return out


def check_scale(kind: str) -> int:
    """The top of a check kind's scale (1: pass or fail)."""
    return check_kinds()[kind]


SOURCE_MARK = "source"
"""In a family judge's version: it asked the benchmark's own prompts (``--protocol-source``)."""


def own_prompts(judge_name: str, judge_version: str) -> bool:
    """Whether a family run's judge asked yanami's own prompts (not comparable with published
    numbers) rather than the benchmark's (``--protocol-source``); False where no prompt was asked
    (the ``rules`` judge)."""
    return judge_name != "rules" and f"-{SOURCE_MARK}-" not in judge_version
