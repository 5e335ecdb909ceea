"""Which judge a ``--judge`` spec names: ``exact``, a judge config file, or ``kind:rest``.

Judge kinds are registered in the entry point group ``yanami.judges`` like model kinds
(``name = "package.module:factory"``; ``factory(rest)`` returns a `Judge`); yanami's exact
judge is the kind ``exact``. A config file names a model that answers (any client kind)
and makes it a VLM judge, at temperature 0.
"""

from __future__ import annotations

from typing import Any

from yanami.contract import Judge, Recorded, UserError, family_of
from yanami.judges._context import JudgeContext
from yanami.judges._vlm import vlm_judge
from yanami.models import load_plugin, looks_like_config
from yanami.store import Dataset

ENTRY_POINTS = "yanami.judges"


def make_judge(spec: str, context: JudgeContext) -> Judge:
    """The one way a judge is made (`JudgeFactory`): for a bench whose family grades it by its own
    protocol, the family's judge hook (`FamilyFacts.judge`) makes what it will of ``--judge SPEC``;
    otherwise yanami's own (`own_judge`)."""
    facts = family_of(context.dataset.manifest.family) if context.dataset is not None else None
    if facts is None or facts.judge is None:
        if facts is not None and context.protocol_source is not None:
            raise UserError(f"--protocol-source: only for a bench graded by its own protocol, not {facts.title}")
        return own_judge(spec, context)
    judge = facts.hook("judge")(spec, context)
    if not isinstance(judge, Judge):
        raise UserError(f"the {facts.family} family's judge ({facts.judge}) did not return a judge")
    return judge


def own_judge(spec: str, context: JudgeContext) -> Judge:
    """The judge ``--judge SPEC`` names among yanami's own: a config file makes a VLM judge of the
    model it describes; ``kind:rest`` calls the factory of the kind in the entry point group
    ``yanami.judges`` (``exact`` is one) with ``rest`` and the context."""
    if looks_like_config(spec):
        return vlm_judge(spec, context)
    kind, _, rest = spec.partition(":")
    judge = load_plugin(ENTRY_POINTS, "--judge", spec, kind, rest, context=context)
    if not isinstance(judge, Judge):
        raise UserError(f"--judge {spec}: the {kind!r} plug-in did not return a judge")
    return judge


def judge_settings(judge: Judge) -> dict[str, Any] | None:
    """A judge's settings as recorded with a run (a VLM judge's config file; None for the exact judge)."""
    return judge.settings if isinstance(judge, Recorded) and isinstance(judge.settings, dict) else None


def supported_judges(dataset: Dataset) -> str:
    """Which judges can grade ``dataset``, in words (``yanami validate`` prints it)."""
    from yanami.judges._exact import unreadable_check

    facts = family_of(dataset.manifest.family)
    if facts.judge is not None:
        return (
            f"{facts.title}'s own protocol (its judge hook): with --judge exact (the default) where its rules "
            "alone grade every turn, else over a VLM judge (--judge FILE)"
        )
    where = unreadable_check(dataset.fields())
    if where is not None:
        return f"a VLM judge (--judge FILE) only: check {where} carries no predicate the exact judge evaluates"
    return "exact (the default) or a VLM judge (--judge FILE)"
