"""Model specs: ``reference:<agent>`` here; third-party adapters through an entry point group."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

from yanami.errors import UserError
from yanami.models._config import ModelConfig, load_config
from yanami.models._http import ResponseCache
from yanami.models._protocol import Model
from yanami.models._reference import AGENTS, ReferenceAgent
from yanami.schema import Dialogue
from yanami.store import Dataset

ENTRY_POINTS = "yanami.models"
"""Entry point group: ``name = "package.module:factory"``, where ``factory(spec, bench, dialogues)``
returns a `Model`; ``--model name:rest`` selects it."""


def load_model(spec: str, bench: Dataset, dialogues: dict[str, Dialogue], cache: ResponseCache | None = None) -> Model:
    """The model a ``--model`` spec names: ``reference:<agent>``, a config file, or ``plugin:rest``."""
    if spec.endswith((".yaml", ".yml", ".json")) or Path(spec).is_file():
        return model_from_config(load_config(spec), bench, dialogues, cache)
    kind, _, rest = spec.partition(":")
    if kind == "reference":
        return ReferenceAgent(rest, bench, dialogues)
    for ep in entry_points(group=ENTRY_POINTS):
        if ep.name == kind:
            model = ep.load()(rest, bench, dialogues)
            if not isinstance(model, Model):
                raise UserError(f"--model {spec}: the {kind!r} plugin did not return a model")
            return model
    raise UserError(
        f"--model {spec}: unknown model (use reference:<agent> with agent one of {', '.join(AGENTS)}, "
        "or a registered plugin)"
    )


def model_from_config(
    config: ModelConfig, bench: Dataset, dialogues: dict[str, Dialogue], cache: ResponseCache | None = None
) -> Model:
    """The adapter a config file describes."""
    if config.kind == "openai":
        from yanami.models._openai import OpenAIModel

        return OpenAIModel(config, cache)
    if config.kind == "infer-http":
        from yanami.models._infer import InferHTTPModel

        return InferHTTPModel(config, cache)
    return ReferenceAgent(config.agent or "", bench, dialogues)
