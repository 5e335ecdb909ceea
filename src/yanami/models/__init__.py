"""Models under test: the contract, the reference agents, and how a model spec is loaded."""

from yanami.models._config import ModelConfig, load_config
from yanami.models._http import Endpoint, Malformed, ResponseCache, RetryPolicy, Transient, call_with_retries
from yanami.models._protocol import (
    InputImage,
    InputMessage,
    InputText,
    Model,
    Refused,
    Request,
    output_frame,
)
from yanami.models._reference import AGENTS, ReferenceAgent
from yanami.models._registry import load_model, model_from_config

__all__ = [
    "AGENTS",
    "Endpoint",
    "InputImage",
    "InputMessage",
    "InputText",
    "Malformed",
    "Model",
    "ModelConfig",
    "ReferenceAgent",
    "Refused",
    "Request",
    "ResponseCache",
    "RetryPolicy",
    "Transient",
    "call_with_retries",
    "load_config",
    "load_model",
    "model_from_config",
    "output_frame",
]
