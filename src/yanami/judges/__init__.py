"""Judges: the exact judge for world data (VLM judges join behind the same contract)."""

from yanami.judges._choice import choice_score, format_weight, normalize, value_score
from yanami.judges._exact import ExactJudge, world_quality
from yanami.judges._protocol import AnswerVerdict, ImageVerdict, Judge

__all__ = [
    "AnswerVerdict",
    "ExactJudge",
    "ImageVerdict",
    "Judge",
    "choice_score",
    "format_weight",
    "normalize",
    "value_score",
    "world_quality",
]
