"""Models under test: the contract, the reference agents, and how a model spec is loaded."""

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
from yanami.models._registry import load_model

__all__ = [
    "AGENTS",
    "InputImage",
    "InputMessage",
    "InputText",
    "Model",
    "ReferenceAgent",
    "Refused",
    "Request",
    "load_model",
    "output_frame",
]
