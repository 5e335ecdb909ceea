"""Judges: the exact judge for world data, the VLM judge, option reading and scoring, and the judge registry."""

from yanami.contract import AnswerVerdict, ImageVerdict, Judge, JudgeError
from yanami.judges._calibration import calibrate, calibration_lines
from yanami.judges._choice import (
    choice_score,
    format_weight,
    normalize,
    option_score,
    read_option,
    read_options,
    value_score,
)
from yanami.judges._context import JudgeContext, JudgeFactory
from yanami.judges._exact import ExactJudge, exact_judge, unreadable_check, world_quality
from yanami.judges._registry import ENTRY_POINTS, judge_settings, make_judge, own_judge, supported_judges
from yanami.judges._vlm import (
    PROMPT_VERSION,
    VLMJudge,
    ask_json,
    fence_code,
    parse_reply,
    parse_reply_source,
    prompt,
    vlm_judge,
)
from yanami.judges._vlm import _image as input_image

__all__ = [
    "ENTRY_POINTS",
    "PROMPT_VERSION",
    "AnswerVerdict",
    "ExactJudge",
    "ImageVerdict",
    "Judge",
    "JudgeContext",
    "JudgeError",
    "JudgeFactory",
    "VLMJudge",
    "ask_json",
    "calibrate",
    "calibration_lines",
    "choice_score",
    "exact_judge",
    "fence_code",
    "format_weight",
    "input_image",
    "judge_settings",
    "make_judge",
    "normalize",
    "option_score",
    "own_judge",
    "parse_reply",
    "parse_reply_source",
    "prompt",
    "read_option",
    "read_options",
    "supported_judges",
    "unreadable_check",
    "value_score",
    "vlm_judge",
    "world_quality",
]
