"""The judge contract: a verdict for an answer, and a verdict per check for an image."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from yanami.schema import Dialogue, Question, Turn


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

    checks: dict[str, bool]
    """Every check id of the turn (atomic and capability-specific) -> passed."""
    vq: float
    """Visual Quality, 0..10."""
    reason: str = ""
    detail: dict[str, object] = field(default_factory=dict)


class Judge(Protocol):
    """Grades answers and images; deterministic for the same inputs."""

    name: str
    version: str

    def judge_answer(self, d: Dialogue, q: Question, reply: str) -> AnswerVerdict:
        """Grade a reply to question ``q`` of dialogue ``d``."""
        ...

    def judge_image(self, d: Dialogue, turn: Turn, image: bytes) -> ImageVerdict:
        """Grade a candidate image for target turn ``turn`` of dialogue ``d``."""
        ...
