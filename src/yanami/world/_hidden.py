"""The world's hidden annotations, typed where code reads them.

The dataset schema keeps ``hidden.state`` and ``hidden.intent`` as free JSON, since other
generators annotate differently; the world writes them in the shapes below, and every
reader (the reference agents, the exact judge, judge calibration) goes through these models
instead of indexing raw dicts. Unknown keys are kept (``extra="allow"``), so the world can
add annotations without breaking readers.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, JsonValue

from yanami.contract import Capability, Question, QuestionType, Turn
from yanami.world._scene import BASE_AZIMUTH

ABLATIONS: dict[Capability, str] = {
    Capability.COREFERENCE: "no-coreference",
    Capability.RETRIEVAL: "no-retrieval",
    Capability.CONSTRAINT: "no-constraints",
    Capability.CORRECTION: "no-corrections",
}
"""The reference agent that lacks a capability: the key of its entry in an intent's ``alternatives``."""

QUESTION_CAPABILITY: dict[QuestionType, Capability] = {
    QuestionType.RR: Capability.COREFERENCE,
    QuestionType.CR: Capability.RETRIEVAL,
    QuestionType.CT: Capability.CONSTRAINT,
    QuestionType.CU: Capability.CORRECTION,
}
"""The capability each type of DSU question tests."""


class _Hidden(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class ConstraintState(_Hidden):
    """A constraint in force: a banned colour (``forbid_colour``) or an object to keep (``keep``)."""

    id: str
    kind: str
    value: JsonValue


class TurnState(_Hidden):
    """The state after a turn: the scene the next image must show, its camera and style."""

    scene: list[dict[str, Any]] = []
    """The objects, as `WorldObject` dumps."""
    azimuth: float = BASE_AZIMUTH
    style: str = "studio"
    constraints: list[ConstraintState] = []
    images: int = 0
    """Images shown so far."""


class TurnIntent(_Hidden):
    """What the user's message of a turn means, as data."""

    op: JsonValue = None
    """The operation the stateful reading applies (a dict with key ``op``), or ``"none"``."""
    stateless: JsonValue = None
    """The operation the current message read alone asks for."""
    alternatives: dict[str, JsonValue] = {}
    """Per ablation (``no-constraints`` …): the operation a model lacking that capability applies."""
    free: list[dict[str, JsonValue]] = []
    """The choices the user's words leave open, as slots (see `yanami.world._free`): ``op``
    is one realization; ``yanami audit`` draws others, and every check holds on all."""

    def operation(self, agent: str) -> JsonValue:
        """The operation a reference agent applies: ``stateful``, ``stateless``, or an ablation's."""
        if agent == "stateless":
            return self.stateless
        return self.alternatives.get(agent, self.op)


class QuestionIntent(_Hidden):
    """What a question is about, as data."""

    alternatives: dict[str, str] = {}
    """Per ablation: the answer a model lacking that capability gives."""


def turn_state(turn: Turn) -> TurnState:
    """A world turn's hidden state (defaults where the turn has none)."""
    state = turn.hidden.state
    return TurnState.model_validate(state) if isinstance(state, dict) else TurnState()


def turn_intent(turn: Turn) -> TurnIntent:
    """A world turn's hidden intent (an empty intent where the turn has none)."""
    intent = turn.hidden.intent
    return TurnIntent.model_validate(intent) if isinstance(intent, dict) else TurnIntent()


def question_intent(q: Question) -> QuestionIntent:
    """A world question's hidden intent."""
    intent = q.hidden.intent
    return QuestionIntent.model_validate(intent) if isinstance(intent, dict) else QuestionIntent()
