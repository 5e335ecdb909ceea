"""Which judge a ``--judge`` spec names: ``exact``, a judge config file, or ``kind:rest``.

Judge kinds are registered in the entry point group ``yanami.judges`` like model kinds
(``name = "package.module:factory"``; ``factory(rest)`` returns a `Judge`); yanami's exact
judge is the kind ``exact``. A config file names a model that answers (any client kind)
and makes it a VLM judge, at temperature 0.
"""

from __future__ import annotations

from typing import Any

from yanami.errors import UserError
from yanami.models import Judge, ResponseCache, load_config, load_plugin, looks_like_config, model_from_config
from yanami.store import Dataset

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
