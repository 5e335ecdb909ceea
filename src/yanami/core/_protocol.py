"""The whole contract of yanami on one screen: what a model and a judge receive and return.

A *model* has up to two abilities, ``answer`` (text) and ``generate`` (an image); either may
be absent (generation-only and understanding-only models exist). What it receives is a
`Request` built from the dialogue's message parts alone: no hidden annotation (state,
intent, check predicate, reference answer, ground-truth target) is ever part of it.

A *judge* grades what a model produced for one item (`Output`: a reply to a question, a
candidate image for a target turn, the text of a reply turn) against the dialogue and the
model's own history (`OwnHistory`), in one method, `Judge.grade`, which returns the item's
`Verdict` (the run format's record). Judges see the dialogue with its hidden annotations:
that is what they grade against.

This module imports nothing heavy (no numpy, Pillow, pydantic or the world), so a plug-in
that implements the contract loads in milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from yanami.core._runs import Verdict
    from yanami.core._schema import Dialogue


Role = Literal["system", "user", "assistant"]
"""Who says a message."""


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
    media_type: str | None = None
    """The type its data URL names; None: read from its bytes. Set only where a benchmark's own
    code names it otherwise (IMUG-Bench's, by a file's name: ``--protocol-source``)."""


@dataclass(frozen=True)
class InputMessage:
    """One chat message: a role and interleaved parts (a ``system`` message holds text only:
    a judge's instructions where a benchmark's own evaluator sends them so)."""

    role: Role
    parts: tuple[InputText | InputImage, ...]


@dataclass(frozen=True)
class Request:
    """Everything a model is given for one item."""

    item: str
    """The item's public id (``dialogue/t3`` for turn 3, ``dialogue/q1`` for question q1), for the
    caller's own bookkeeping (logs, a strategy's call count, a reference agent's lookup): no adapter
    sends it (`yanami audit` shows every field each adapter puts on the wire)."""
    messages: tuple[InputMessage, ...]
    """The conversation so far, ending with the user message to respond to."""
    size: tuple[int, int]
    """The requested output frame (width, height): aspect kept, long edge 512, multiples of 16."""
    seed: int | None = None
    """The seed sent with the request: the run's (the model config's ``seed``; none by default), or
    a test-time strategy's per-sample one (Best-of-N draws distinct candidates). Never derived from
    the item: a seed that varies per item lets a model read which item it is answering (issue 33)."""
    max_tokens: int | None = 512
    """The most tokens the reply may have; None: no limit is sent (a benchmark's own code that sends
    none, ``--protocol-source``)."""
    temperature: float = 0.0
    json_schema: Mapping[str, object] | None = None
    """The JSON Schema a text reply must follow; an adapter whose server takes structured output
    sends it (the reply is validated by the caller either way)."""
    fresh: bool = False
    """Ask the server even where the response cache holds a reply to this same request (its new
    reply replaces the cached one): a benchmark's code that repeats a request whose reply it could
    not read (OpenING's) asks again so. Never sent."""
    function: Mapping[str, object] | None = None
    """A function the reply must call (OpenAI's ``functions`` with ``function_call`` naming it, as
    a benchmark's own judge code may ask: OpenING's ``GPT_score_A.py``): the chat adapter sends it
    and returns the call's arguments as the reply's text (its content where the server made no call)."""

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


ModelFactory = Callable[[str], Model]
"""A plug-in's factory (entry point group ``yanami.models``): the part of ``--model kind:rest``
after the colon -> a `Model`. It receives the spec alone, never the bench."""


# Optional abilities: a model has one when it has the member (``isinstance(model, Reachable)``).


@runtime_checkable
class Reachable(Protocol):
    """A model that can say cheaply, before a run starts, whether its server answers."""

    def check(self) -> None:
        """Raise a `yanami.contract.UserError` naming what is wrong (an unreachable server, a bad key)."""
        ...


@runtime_checkable
class Layouts(Protocol):
    """A model that takes only some request layouts (`yanami.contract.Layout` values)."""

    layouts: tuple[str, ...]


class Settings(Protocol):
    """A model's settings as a config file gives them (`yanami.models.ModelConfig`)."""

    @property
    def layout(self) -> str: ...

    @property
    def seed(self) -> int | None: ...

    def model_dump(self, *, mode: str) -> dict[str, object]: ...


@runtime_checkable
class Configured(Protocol):
    """A model made from a config file: its settings are recorded with the run."""

    @property
    def config(self) -> Settings: ...


@runtime_checkable
class ReadsBench(Protocol):
    """A model that reads the bench's hidden annotations (the reference agents alone)."""

    def bind_bench(self, bench: Path) -> None:
        """Read what it needs from the bench directory (called once, before any request)."""
        ...


class JudgeError(Exception):
    """The judge could not grade an item (its server failed, or its output stayed invalid)."""


@dataclass(frozen=True)
class AnswerVerdict:
    """How a reply to a DSU question is graded."""

    score: float
    """0..1; 1 is full credit."""
    reason: str = ""

    @property
    def correct(self) -> bool:
        """Full credit (the u = 1 of the understanding-realization gap)."""
        return self.score >= 1.0


@dataclass(frozen=True)
class ImageVerdict:
    """How a candidate image for a target turn is graded."""

    checks: dict[str, bool | None]
    """Every check id of the turn (atomic and capability-specific) -> passed; None where the check
    is undecidable for this model (under Self-History, its own admissible earlier choices made
    the check ill-posed): left out of its scores and counted, never failed."""
    vq: float
    """Visual Quality, 0..10."""
    reason: str = ""
    detail: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Output:
    """What a model produced for one item: what a judge grades."""

    item: str
    """The item's id (``dialogue/t3``, ``dialogue/q1``)."""
    kind: Literal["turn", "question", "reply"]
    """``turn``: a candidate image for a target turn; ``question``: a reply to a DSU question;
    ``reply``: the text of a target text turn (WEAVE, IMUG-Bench)."""
    turn: int
    """The target turn, or the turn after which the question is asked."""
    text: str | None = None
    image: bytes | None = None


@dataclass(frozen=True)
class OwnHistory:
    """The model's own side of the dialogue before an item.

    ``images``: under Self-History, the model's own images of the earlier target turns, by
    turn (None under GT-History). Where the words left a choice open earlier ("not brown,
    then"), the model's own earlier image may show another admissible pick than the ground
    truth's; a later check on that value is then fair only against the model's own.
    ``earlier``: turn -> what the model itself produced there in this run (image bytes, text);
    (None, None) where it produced nothing (a family's dynamic answers and references read it).
    """

    images: Mapping[int, bytes] | None = None
    earlier: Callable[[int], tuple[bytes | None, str | None]] = lambda turn: (None, None)


GT_HISTORY = OwnHistory()
"""Nothing of the model's own: what a judge gets under GT-History."""


@runtime_checkable
class Judge(Protocol):
    """Grades what a model produced for an item; deterministic for the same inputs."""

    name: str
    version: str
    """Changes whenever the same input could be graded differently; stored with every verdict."""

    def grade(self, d: Dialogue, output: Output, history: OwnHistory) -> Verdict:
        """The verdict on ``output`` for an item of dialogue ``d`` (status ``ok``); raises
        `JudgeError` when it cannot grade it (the runner records an ``error`` verdict)."""
        ...


@runtime_checkable
class Recorded(Protocol):
    """A judge whose settings are recorded with the run (a VLM judge's config file)."""

    settings: dict[str, Any] | None
