"""Which model a ``--model`` spec names: a config file, or ``kind:rest`` for a registered kind.

Kinds are registered in the entry point group ``yanami.models`` (``name =
"package.module:factory"``); ``factory(rest)`` returns a `Model`. yanami's own reference
agents are registered the same way, as the kind ``reference``. A factory receives its spec
alone: never the bench, never a dialogue with its hidden annotations. The one exception is
explicit: a model that implements `ReadsBench` (only the reference agents, which exist to
prove the benchmark discriminates) is handed the bench's directory by the runner. A factory
that reads pictures may also take the keyword ``parser``: the run's image parser
(`yanami.world.Parser`, its ``--workers`` processes), handed only to a factory that names it.
"""

from __future__ import annotations

import functools
import inspect
import sys
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from yanami.contract import Model, ReadsBench, UserError
from yanami.models._http import ResponseCache

if TYPE_CHECKING:
    from yanami.models._config import ModelConfig

ENTRY_POINTS = "yanami.models"
CONFIG_SUFFIXES = (".yaml", ".yml", ".json")
"""File names that name a config file wherever a spec is expected."""


def _kinds(group: str) -> dict[str, EntryPoint]:
    """The entry points of ``group`` by name (read once per search path: a scan opens every
    installed distribution's metadata, 17 ms on a 150-package environment, and every run makes a
    model and a judge)."""
    return _scan(group, tuple(sys.path))


@functools.lru_cache(maxsize=16)
def _scan(group: str, path: tuple[str, ...]) -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=group)}


def load_plugin(group: str, option: str, spec: str, kind: str, rest: str, **offered: Any) -> Any:
    """``factory(rest)`` of the entry point ``kind`` in ``group``, with those ``offered`` keywords
    the factory names (a ``parser``); a one-line error names what exists."""
    found = _kinds(group)
    ep = found.get(kind)
    if ep is None:
        known = ", ".join(sorted(found)) or "none"
        raise UserError(
            f"{option} {spec}: no such file and no registered kind {kind!r} (registered kinds: {known}; "
            f"or give a config file: *.yaml, see docs/models.md)"
        )
    try:
        factory = ep.load()
    except Exception as exc:  # a broken plug-in is the user's environment, not a bug of yanami
        raise UserError(f"{option} {spec}: the plug-in {ep.value} cannot be loaded ({exc})") from None
    try:
        named = set(inspect.signature(factory).parameters)
    except (TypeError, ValueError):  # a callable without a signature takes the spec alone
        named = set()
    return factory(rest, **{k: v for k, v in offered.items() if k in named and v is not None})


def looks_like_config(spec: str) -> bool:
    """Whether a spec names a config file (by suffix, or because the file exists)."""
    return spec.endswith(CONFIG_SUFFIXES) or Path(spec).is_file()


def load_model(spec: str, cache: ResponseCache | None = None, parser: object = None) -> Model:
    """The model a ``--model`` spec names: a config file, or ``kind:rest`` (``reference:stateful``);
    ``parser``: the run's image parser, for a plug-in that reads pictures (see the module docstring)."""
    if looks_like_config(spec):
        from yanami.models._config import load_config  # pydantic and YAML, only for config files

        return model_from_config(load_config(spec), cache, parser)
    kind, colon, rest = spec.partition(":")
    if not colon and kind in _kinds(ENTRY_POINTS):
        raise UserError(f"--model {spec}: name one, as {kind}:NAME (e.g. reference:stateful)")
    if not colon:
        raise UserError(
            f"--model {spec}: no such config file, and not KIND:NAME (give a model config file, see docs/models.md, "
            "or reference:<agent>, or a registered plug-in kind)"
        )
    model = load_plugin(ENTRY_POINTS, "--model", spec, kind, rest, parser=parser)
    if not isinstance(model, Model):
        raise UserError(f"--model {spec}: the {kind!r} plug-in did not return a model")
    return model


def model_from_config(config: ModelConfig, cache: ResponseCache | None = None, parser: object = None) -> Model:
    """The adapter a config file describes (``parser``: as `load_model` hands it to a plug-in)."""
    if config.kind == "openai":
        from yanami.models._openai import OpenAIModel

        return OpenAIModel(config, cache)
    if config.kind == "infer-http":
        from yanami.models._infer import InferHTTPModel

        return InferHTTPModel(config, cache)
    if config.kind == "checkpoint":
        where = config.path or ""
        found: Model = load_plugin(ENTRY_POINTS, "--model", f"checkpoint:{where}", "checkpoint", where, parser=parser)
        return found
    spec = f"reference:{config.agent}"
    model: Model = load_plugin(ENTRY_POINTS, "--model", spec, "reference", config.agent or "")
    return model


def reads_bench(model: object) -> TypeGuard[ReadsBench]:
    """Whether the runner hands ``model`` the bench (it has ``bind_bench``: `ReadsBench`), which makes
    its run privileged: it reads the bench, so its scores are not a model result. The one place
    that decides it; the manifest records the answer (``privileged``)."""
    return isinstance(model, ReadsBench)
