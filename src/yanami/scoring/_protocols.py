"""WEAVE's and IMUG-Bench's scoring rules, as plain functions: the one place that knows them.

WEAVE (``weichow23/weave``, ``eval/summarize.py``): an image turn is graded on its key-point
checklist, visual consistency and image quality, each 0-10; a text turn on accuracy, 0, 5 or
10. Each metric is pooled over the turns of a group (its raw scores averaged, then divided by
10), and the group's score is 0.4 KP + 0.1 VC + 0.2 IQ + 0.3 ACC, or 0.5 KP + 0.2 VC + 0.3 IQ
when the group has no text turn; with a metric of the image side missing, the plain mean of
those present.

IMUG-Bench (``ccccEsion/IMUG-Bench``, ``scripts/auxiliary/``): a text turn is a
multiple-choice answer, score = max(0, (correct - incorrect) / |expected|) x format weight,
reported x 100; an image turn is graded on its evaluation points, 0-5 each, reported as their
mean x 20. Geometric Coloring's cube grids are read from the picture, not judged (`read_grid`,
`grid_points`). The public code reads option letters with ``\\b([A-G])\\b``, which finds nothing
in a contiguous answer such as ``BC`` (in the reply or in a stored answer); its paper counts
such letters with full format weight. `mcq_paper` follows the paper and is the headline;
`mcq_code` reproduces the code, and the report shows both.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from yanami.judges._choice import choice_score

WEAVE_IMAGE_METRICS = ("key_point", "visual_consistency", "image_quality")
WEAVE_TEXT_METRIC = "accuracy"
WEAVE_METRICS = (*WEAVE_IMAGE_METRICS, WEAVE_TEXT_METRIC)
WEAVE_WEIGHTS = {"key_point": 0.4, "visual_consistency": 0.1, "image_quality": 0.2, "accuracy": 0.3}
WEAVE_WEIGHTS_NO_TEXT = {"key_point": 0.5, "visual_consistency": 0.2, "image_quality": 0.3}

IMUG_IMAGE_SCALE = 20
"""An image turn's reported score: the mean of its 0-5 points x 20 (0-100)."""
IMUG_TEXT_SCALE = 100
GRID_SUBDOMAINS = ("cubes_coloring", "cubes_completion", "cubes_synthesis")
"""Geometric Coloring's tasks whose grids are read, not judged."""
GRID_DOMAIN = "Geometric_Coloring"


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


# IMUG-Bench -----------------------------------------------------------------------------------

_CODE_LETTER = re.compile(r"\b([A-G])\b")
_CODE_ONLY = re.compile(r"[A-G]+")
_CODE_PLAIN = re.compile(r"[A-G\s,.;\-]+")


_OPTION_MARK = re.compile(r"(?:^|(?<=[\s(\[]))\(?([A-G])[.):](?=\s)|(?:^|(?<=\s))\(([A-G])\)")


def question_options(question: str) -> list[str]:
    """The options' own texts in an IMUG-Bench question ("... A. one B. two" or one per line,
    "A)", "(A)" or "A:" alike), in letter order from A; [] where no such run of options is found.
    An option's text runs to the next option's letter or the end of its line."""
    marks = [(m.group(1) or m.group(2), m.start(), m.end()) for m in _OPTION_MARK.finditer(question)]
    # the last run of options that starts at A and goes on letter by letter
    start = max((i for i, (letter, _, _) in enumerate(marks) if letter == "A"), default=None)
    if start is None:
        return []
    run = [marks[start]]
    for mark in marks[start + 1 :]:
        if ord(mark[0]) != ord(run[-1][0]) + 1:
            break
        run.append(mark)
    out = []
    for k, (_, _, end) in enumerate(run):
        stop = run[k + 1][1] if k + 1 < len(run) else len(question)
        out.append(question[end:stop].split("\n", 1)[0].strip())
    return out


def mcq_paper(reply: str, expected: Sequence[str], options: Sequence[str] = ()) -> float:
    """The paper's multiple-choice score (0-1): contiguous letters (``BC``) name each letter; the
    format weight follows its cases A-D, where the options' own texts (``options``, A first) are
    not text beyond the options."""
    if not expected:
        return 0.0
    return choice_score(reply, list(expected), list(options))[0]


def mcq_code(reply: str, answer: str) -> float:
    """The public code's score (0-1), ``score_mcq.calculate_score``: letters only where ``\\b`` finds
    them, in the reply and in the stored answer; format weight 1 for letters alone, 0.75 for
    letters with spaces or ``,.;-``, 0.5 otherwise, 0 for an empty reply; rounded to 4 places."""
    expected = set(_CODE_LETTER.findall(answer))
    if not expected:
        return 0.0
    predicted = set(_CODE_LETTER.findall(reply))
    text = reply.strip()
    weight = 0.0 if not text else 1.0 if _CODE_ONLY.fullmatch(text) else 0.75 if _CODE_PLAIN.fullmatch(text) else 0.5
    correct, incorrect = len(predicted & expected), len(predicted - expected)
    return round(max(0.0, (correct - incorrect) / len(expected)) * weight, 4)


def resolved_answer(static: Sequence[str], determined: str) -> str:
    """A dynamic answer once resolved: the static letters and the judge's, sorted, as one string
    (how the public code stores it, ``"".join(sorted(...))``)."""
    return "".join(sorted(set(static) | set(re.findall(r"[A-G]", determined.upper()))))


def imug_image_score(points: Sequence[float]) -> float:
    """An image turn's score, 0-100: the mean of its 0-5 evaluation points x 20."""
    return sum(points) / len(points) * IMUG_IMAGE_SCALE


def is_grid_task(domain: str | None, subdomain: str | None) -> bool:
    """Whether a turn of this task is scored by reading its grid rather than by a judge."""
    return domain == GRID_DOMAIN and subdomain in GRID_SUBDOMAINS


def read_grid(png: bytes, size: int = 3) -> list[list[str]] | None:
    """The ``size`` x ``size`` grid a picture shows: ``0`` empty, ``1`` filled, ``r`` red, ``g``
    green; None where no grid is found.

    The grid is the bounding box of everything darker or more saturated than the background;
    it is cut into equal cells and each cell's middle is read: filled when more than 6 % of it
    is ink, then red or green when more than 30 % of its ink has that hue (HSV bands of the
    public code: red H 0-10 or 160-180 of 180, green 35-95, S >= 70, V >= 40 of 255). The public
    code finds the same box with OpenCV's adaptive threshold and contours; this reads the plain
    drawings a model makes the same way without OpenCV.
    """
    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        rgb = img.convert("RGB")
        hsv = np.asarray(rgb.convert("HSV"), dtype=np.float32)
        gray = np.asarray(rgb.convert("L"), dtype=np.float32)
    h, s, v = hsv[..., 0] * 180 / 255, hsv[..., 1], hsv[..., 2]
    ink = (gray < 160) | (s >= 70)
    ys, xs = np.nonzero(ink)
    if len(ys) < 16:
        return None
    top, bottom, left, right = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    if bottom - top < size * 4 or right - left < size * 4:
        return None
    red = ((h <= 10) | (h >= 160)) & (s >= 70) & (v >= 40)
    green = (h >= 35) & (h <= 95) & (s >= 70) & (v >= 40)
    rows: list[list[str]] = []
    ch, cw = (bottom - top) / size, (right - left) / size
    for r in range(size):
        row = []
        for c in range(size):
            y0, y1 = int(top + (r + 0.2) * ch), int(top + (r + 0.8) * ch)
            x0, x1 = int(left + (c + 0.2) * cw), int(left + (c + 0.8) * cw)
            cell = (slice(y0, max(y1, y0 + 1)), slice(x0, max(x1, x0 + 1)))
            filled = ink[cell] & ~((gray[cell] < 60) & (s[cell] < 70))  # grid lines are not fill
            share = filled.mean()
            if share <= 0.06:
                row.append("0")
            elif red[cell].sum() > 0.3 * filled.sum():
                row.append("r")
            elif green[cell].sum() > 0.3 * filled.sum():
                row.append("g")
            else:
                row.append("1")
        rows.append(row)
    return rows


def grid_points(found: list[list[str]] | None, truth: list[list[str]], n_points: int) -> list[int]:
    """The points of a grid turn, 0 or 5 each (``score_grid.score_logic``): 1 a grid is there;
    2 the filled cells are right (else 3 and 4 stay 0); 3 the red cells are right; 4 the green
    ones; any further point 0."""
    points = [0] * n_points
    if found is None or not n_points:
        return points
    points[0] = 5
    if n_points < 2 or [[c != "0" for c in row] for row in found] != [[c != "0" for c in row] for row in truth]:
        return points
    points[1] = 5

    def cells(grid: list[list[str]], colour: str) -> set[tuple[int, int]]:
        return {(r, c) for r, row in enumerate(grid) for c, x in enumerate(row) if x == colour}

    if n_points >= 3 and cells(found, "r") == cells(truth, "r"):
        points[2] = 5
    if n_points >= 4 and cells(found, "g") == cells(truth, "g"):
        points[3] = 5
    return points
