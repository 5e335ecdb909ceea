"""WEAVE's aggregation, as plain functions: how item scores become the figures its summary prints.

WEAVE (``weichow23/weave``, ``eval/summarize.py``): an image turn is graded on its key-point
checklist, visual consistency and image quality, each 0-10; a text turn on accuracy, 0, 5 or
10. Each metric is pooled over the turns of a group (its raw scores averaged, then divided by
10), and the group's score is 0.4 KP + 0.1 VC + 0.2 IQ + 0.3 ACC, or 0.5 KP + 0.2 VC + 0.3 IQ
when the group has no text turn; with a metric of the image side missing, the plain mean of
those present.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

WEAVE_IMAGE_METRICS = ("key_point", "visual_consistency", "image_quality")
WEAVE_TEXT_METRIC = "accuracy"
WEAVE_METRICS = (*WEAVE_IMAGE_METRICS, WEAVE_TEXT_METRIC)
WEAVE_WEIGHTS = {"key_point": 0.4, "visual_consistency": 0.1, "image_quality": 0.2, "accuracy": 0.3}
WEAVE_WEIGHTS_NO_TEXT = {"key_point": 0.5, "visual_consistency": 0.2, "image_quality": 0.3}

# WEAVE ----------------------------------------------------------------------------------------


def weave_metric_means(turns: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Each metric's raw scores (0-10) pooled over ``turns`` and averaged, on 0-1."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for scores in turns:
        for metric, value in scores.items():
            sums[metric] = sums.get(metric, 0.0) + value
            counts[metric] = counts.get(metric, 0) + 1
    return {m: sums[m] / counts[m] / 10 for m in WEAVE_METRICS if counts.get(m)}


def weave_score(means: Mapping[str, float]) -> float | None:
    """A group's WEAVE score (0-1) from its metric means (0-1)."""
    if not means:
        return None
    if not all(m in means for m in WEAVE_IMAGE_METRICS):
        return sum(means.values()) / len(means)
    weights = WEAVE_WEIGHTS if WEAVE_TEXT_METRIC in means else WEAVE_WEIGHTS_NO_TEXT
    return sum(means[m] * w for m, w in weights.items())


def weave_score_code(means: Mapping[str, float]) -> float | None:
    """`weave_score` as WEAVE's summarizer prints it: each metric's mean rounded to 3 places
    first, the weighted sum (or plain mean) rounded to 3 places again."""
    score = weave_score({m: round(v, 3) for m, v in means.items()})
    return None if score is None else round(score, 3)
