"""Which judge a ``--judge`` spec names: ``exact``, a judge config file, or ``kind:rest``.

Judge kinds are registered in the entry point group ``yanami.judges`` like model kinds
(``name = "package.module:factory"``; ``factory(rest)`` returns a `Judge`); yanami's exact
judge is the kind ``exact``. A config file names a model that answers (any client kind)
and makes it a VLM judge, at temperature 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from yanami.contract import Judge, UserError, family_of
from yanami.models import ResponseCache, load_config, load_plugin, looks_like_config, model_from_config
from yanami.store import Dataset

if TYPE_CHECKING:
    from yanami.world import Parser

ENTRY_POINTS = "yanami.judges"


def load_judge(spec: str, bench: Dataset | None = None, cache: ResponseCache | None = None) -> Judge:
    """The judge a ``--judge`` spec names; a VLM judge reads the ground-truth targets from ``bench``."""
    if looks_like_config(spec):
        from yanami.judges._vlm import VLMJudge

        config = load_config(spec)
        model = model_from_config(config.model_copy(update={"temperature": 0.0}), cache)
        return VLMJudge(model, bench, config.model_dump(mode="json"))
    kind, _, rest = spec.partition(":")
    judge = load_plugin(ENTRY_POINTS, "--judge", spec, kind, rest)
    if not isinstance(judge, Judge):
        raise UserError(f"--judge {spec}: the {kind!r} plug-in did not return a judge")
    return judge


def judge_settings(judge: Judge) -> dict[str, Any] | None:
    """A judge's settings as recorded with a run (a VLM judge's config file; None for the exact judge)."""
    settings = getattr(judge, "settings", None)
    return settings if isinstance(settings, dict) else None


def judge_for_bench(
    spec: str,
    dataset: Dataset,
    responses: ResponseCache | None = None,
    protocol_source: str | Path | None = None,
    parser: Parser | None = None,
) -> Judge:
    """The judge of a run on ``dataset``: what the bench's family makes of ``--judge SPEC``
    (its `FamilyFacts.judge`), or, for a family yanami's own judges grade, the judge SPEC names
    (the exact judge reads images with ``parser``, the run's worker processes; in this process
    without one)."""
    facts = family_of(dataset.manifest.family)
    make = facts.hook("judge")
    if make is None:
        if protocol_source is not None:
            raise UserError(f"--protocol-source: only for a bench graded by its own protocol, not {facts.title}")
        if spec == "exact":
            from yanami.judges._exact import ExactJudge, unreadable_check

            where = unreadable_check(dataset)
            if where is not None:
                raise UserError(
                    f"{dataset.root}: check {where} carries no predicate the exact judge can evaluate (a dataset "
                    "the world did not build, such as a constructed one): grade it with a VLM judge, --judge FILE"
                )
            return ExactJudge() if parser is None else ExactJudge(parser)
        return load_judge(spec, dataset, responses)
    judge = make(spec, dataset, responses, protocol_source)
    if not isinstance(judge, Judge):
        raise UserError(f"the {facts.family} family's judge ({facts.judge}) did not return a judge")
    return judge


def supported_judges(dataset: Dataset) -> str:
    """Which judges can grade ``dataset``, in words (``yanami validate`` prints it)."""
    from yanami.judges._exact import unreadable_check

    facts = family_of(dataset.manifest.family)
    if facts.judge is not None:
        return f"{facts.title}'s own protocol over a VLM judge (--judge FILE)"
    where = unreadable_check(dataset)
    if where is not None:
        return f"a VLM judge (--judge FILE) only: check {where} carries no predicate the exact judge evaluates"
    return "exact (the default) or a VLM judge (--judge FILE)"
