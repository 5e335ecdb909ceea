"""Models under test: the contract, the chat client, config files, and how a spec is loaded.

`yanami.models` is the ground floor: importing it loads neither the world, numpy nor
Pillow (the adapters import their client libraries when they are built), and config
files (pydantic, YAML) are read by code loaded on first use.
"""

from typing import TYPE_CHECKING, Any

from yanami.models._client import (
    Client,
    Usage,
    chat_body,
    chat_messages,
    conversation_text,
    data_url,
    key_messages,
    options_text,
    question_prompt,
    redact,
    refusal,
    transcript,
    validate_image,
    validate_text,
)
from yanami.models._http import (
    CutOff,
    Endpoint,
    Fatal,
    Malformed,
    ResponseCache,
    RetryPolicy,
    Transient,
    call_with_retries,
    use_endpoint_factory,
)
from yanami.models._registry import (
    CONFIG_SUFFIXES,
    ENTRY_POINTS,
    load_model,
    load_plugin,
    looks_like_config,
    model_from_config,
    reads_bench,
)
from yanami.models._serve import InferServer
from yanami.models._strategies import StrategyModel, parse_strategy

if TYPE_CHECKING:
    from yanami.models._config import TRANSPORT, ModelConfig, load_config


def __getattr__(name: str) -> Any:
    # Config files need pydantic and YAML: loaded on first use, so `import yanami.models` stays light.
    if name in ("ModelConfig", "TRANSPORT", "load_config"):
        from yanami.models import _config

        return getattr(_config, name)
    raise AttributeError(f"module 'yanami.models' has no attribute {name!r}")


__all__ = [
    "CONFIG_SUFFIXES",
    "ENTRY_POINTS",
    "TRANSPORT",
    "Client",
    "CutOff",
    "Endpoint",
    "Fatal",
    "InferServer",
    "Malformed",
    "ModelConfig",
    "ResponseCache",
    "RetryPolicy",
    "StrategyModel",
    "Transient",
    "Usage",
    "call_with_retries",
    "chat_body",
    "chat_messages",
    "conversation_text",
    "data_url",
    "key_messages",
    "load_config",
    "load_model",
    "load_plugin",
    "looks_like_config",
    "model_from_config",
    "options_text",
    "parse_strategy",
    "question_prompt",
    "reads_bench",
    "redact",
    "refusal",
    "transcript",
    "use_endpoint_factory",
    "validate_image",
    "validate_text",
]
