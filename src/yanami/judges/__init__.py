"""Judges: the exact judge for world data (VLM judges join behind the same contract)."""

from yanami.judges._choice import choice_score, format_weight, normalize, value_score
from yanami.judges._exact import ExactJudge, world_quality
from yanami.judges._protocol import AnswerVerdict, ImageVerdict, Judge, JudgeError
from yanami.judges._vlm import PROMPT_VERSION, VLMJudge, parse_reply, prompt

__all__ = [
    "PROMPT_VERSION",
    "AnswerVerdict",
    "ExactJudge",
    "ImageVerdict",
    "Judge",
    "JudgeError",
    "VLMJudge",
    "choice_score",
    "format_weight",
    "normalize",
    "parse_reply",
    "prompt",
    "value_score",
    "world_quality",
]
