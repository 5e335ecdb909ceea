"""The model contract: what a model under test receives and returns.

A model has up to two abilities, ``answer`` (text) and ``generate`` (an image); either may
be absent (generation-only and understanding-only models exist). What it receives is a
`Request` built from the dialogue's message parts alone: no hidden annotation (state,
intent, check predicate, reference answer, ground-truth target) is ever part of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable


@dataclass(frozen=True)
class InputText:
    """A piece of text in a message."""

    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True)
class InputImage:
    """An image in a message: its encoded bytes, as the model would receive a file."""

    data: bytes
    sha256: str
    width: int
    height: int
    type: Literal["image"] = "image"


@dataclass(frozen=True)
class InputMessage:
    """One chat message: a role and interleaved parts."""

    role: Literal["user", "assistant"]
    parts: tuple[InputText | InputImage, ...]


@dataclass(frozen=True)
class Request:
    """Everything a model is given for one item."""

    item: str
    """The item's public id (``dialogue/t3`` for turn 3, ``dialogue/q1`` for question q1)."""
    messages: tuple[InputMessage, ...]
    """The conversation so far, ending with the user message to respond to."""
    seed: int
    """The per-sample seed, derived from the global seed and the item id."""
    size: tuple[int, int]
    """The requested output frame (width, height): aspect kept, long edge 512, multiples of 16."""
    max_tokens: int = 512
    temperature: float = 0.0

    def images(self) -> list[InputImage]:
        """Every image in the request, in order."""
        return [p for m in self.messages for p in m.parts if isinstance(p, InputImage)]


class Refused(Exception):
    """The model (or its provider) declined the request, e.g. by content policy.

    A refusal is stored with status ``refused`` and excluded from scores, never scored as zero.
    """


@runtime_checkable
class Model(Protocol):
    """A model under test. ``answer`` and ``generate`` may be None when it lacks the ability."""

    name: str
    answer: Callable[[Request], str] | None
    """Text for a request (DSU questions)."""
    generate: Callable[[Request], bytes] | None
    """An encoded image (PNG, JPEG, WebP) for a request (target turns)."""


def output_frame(width: int, height: int, long_edge: int = 512) -> tuple[int, int]:
    """The output frame for a reference of this size: aspect kept, long edge 512, sides multiples of 16."""
    scale = long_edge / max(width, height)
    return (max(16, round(width * scale / 16) * 16), max(16, round(height * scale / 16) * 16))
