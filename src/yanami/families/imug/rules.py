"""IMUG-Bench's grading rules, as plain functions: option letters both ways, dynamic answers,
image points and Geometric Coloring's grids (``ccccEsion/IMUG-Bench``, ``scripts/auxiliary/``).

A text turn is a multiple-choice answer, score = max(0, (correct - incorrect) / |expected|) x
format weight, reported x 100; an image turn is graded on its evaluation points, 0-5 each,
reported as their mean x 20. Geometric Coloring's cube grids are read from the picture, not
judged (`read_grid`, `read_grid_code`, `grid_points`), and only from a drawing (`drawn`). The
public code reads option letters with ``\\b([A-G])\\b``, which finds nothing in a contiguous
answer such as ``BC`` (in the reply or in a stored answer); its paper counts such letters with
full format weight. `mcq_paper` follows the paper and is the headline; `mcq_code` reproduces the
code, and the report shows both.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

import numpy as np

from yanami._regions import enclosed, regions, runs
from yanami.judges import choice_score

IMUG_TEXT_SCALE = 100
"""A text turn's reported score: the multiple-choice score x 100 (0-100)."""
IMUG_IMAGE_SCALE = 20
"""An image turn's reported score: the mean of its 0-5 points x 20 (0-100)."""
GRID_SUBDOMAINS = ("cubes_coloring", "cubes_completion", "cubes_synthesis")
"""Geometric Coloring's tasks whose grids are read, not judged."""
GRID_DOMAIN = "Geometric_Coloring"

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
    green; None where no grid is found: where the picture shows no drawing (`drawn`) or has no
    ink.

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
        shown = drawn(np.asarray(rgb, dtype=np.int16))
    if not shown:
        return None
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


PAPER_SHARE = 0.1
"""The least share of a picture its paper (its commonest colour) covers."""
PAPER_TOLERANCE = 16
"""How far, in any of R, G and B, a pixel of the paper may be from the paper's colour."""
MARK = 48
"""How far, in any of R, G and B, a mark stands off the paper."""


def drawn(rgb: np.ndarray) -> bool:
    """Whether a picture (H x W x 3) shows a drawing, as a grid of cubes is: marks on a plain
    paper. The paper is the commonest colour (in steps of 32 per channel; then the median of
    its pixels), the pixels within `PAPER_TOLERANCE` of it; a drawing has

    - paper: at least `PAPER_SHARE` of the picture (noise and a photograph have none);
    - in one piece: at least half of its pixels have paper on all four sides (noise of two
      colours leaves it in specks);
    - marks: at least 16 pixels `MARK` or more off the paper (a blank or single-coloured
      picture has none);
    - with edges: where the paper ends the picture changes by 16 or more from one pixel to the
      next, on average (a gradient, a sky, fades out of it);
    - strokes and areas, not specks: at least half of the marks lie in 8-connected regions of
      32 pixels or more.
    """
    h, w = rgb.shape[:2]
    if h < 3 or w < 3:
        return False
    q = rgb // 32
    key = q[..., 0] * 64 + q[..., 1] * 8 + q[..., 2]
    common = int(np.argmax(np.bincount(key.ravel(), minlength=512)))
    colour = np.median(rgb[key == common], axis=0)
    off = np.abs(rgb - colour).max(axis=-1)
    paper = off <= PAPER_TOLERANCE
    if paper.mean() < PAPER_SHARE:
        return False
    marks = off >= MARK
    if np.count_nonzero(marks) < 16:
        return False
    jumps = []
    inner = paper[1:-1, 1:-1].copy()
    centre = paper[1:-1, 1:-1]
    for dy, dx in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        side = (slice(1 + dy, h - 1 + dy), slice(1 + dx, w - 1 + dx))
        inner &= paper[side]
        edge = centre & ~paper[side]  # a paper pixel whose neighbour on this side is not paper
        jumps.append(np.abs(rgb[1:-1, 1:-1][edge] - rgb[side][edge]).max(axis=-1))
    if np.count_nonzero(inner) < 0.5 * np.count_nonzero(centre):
        return False
    edges = np.concatenate(jumps)
    if len(edges) and edges.mean() < 16:
        return False
    _, c0, c1, labels = runs(marks)
    sizes = np.bincount(labels, weights=c1 - c0)
    return bool(sizes[sizes >= 32].sum() >= 0.5 * sizes.sum())


# IMUG-Bench's grid analyzer (``score_grid.py``, ``GridCVAnalyzer``), step by step without OpenCV --


def read_grid_code(png: bytes) -> list[list[str]] | None:
    """The 3 x 3 grid IMUG-Bench's public analyzer reads from a picture (its OpenCV steps, done
    here in numpy): the grid's box is that of every pixel an adaptive threshold marks (darker by
    10 than its 15 x 15 Gaussian neighbourhood); the marks are eroded once (3 x 3), and every
    outline enclosing more than 50 px is filled; box and picture are resized to 300 x 300; a
    cell is empty when less than 15/255 of its middle (10 px in) is filled, else red or green
    when more than 30/255 of its centre (20 px in) is in that HSV band, else ``1``.

    It reads what the analyzer reads, including where a person would not: a grid whose empty
    cells are outlined reads them filled where the outlines survive the erosion, a cube in a
    1-pixel outline may read empty, a thin coloured stripe over a cube colours the whole cell.
    One step is yanami's: a picture that shows no drawing (`drawn`: blank, noise, a photograph)
    reads None, where the analyzer reads a grid of empty cells and gives it the point for a grid
    found. `read_grid` is yanami's own reading (the headline)."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        rgb = np.asarray(img.convert("RGB"), dtype=np.int32)
    if not drawn(rgb):
        return None
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    gray = (r * 4899 + g * 9617 + b * 1868 + 8192) >> 14  # OpenCV's BGR2GRAY, in its fixed point
    marked = gray - _gaussian15(gray) <= -10
    ys, xs = np.nonzero(marked)
    if not len(ys):
        return None
    top, left, bottom, right = ys.min(), xs.min(), ys.max() + 1, xs.max() + 1
    solid = np.zeros(marked.shape, dtype=bool)
    for region, x0, y0 in regions(_erode3(marked)):
        h, w = region.shape
        if (h - 1) * (w - 1) <= 50:  # its outline cannot enclose more
            continue
        inside = enclosed(region)
        exposed = (
            np.count_nonzero(inside[:, 0]) + np.count_nonzero(inside[:, -1])
            + np.count_nonzero(inside[0]) + np.count_nonzero(inside[-1])
            + np.count_nonzero(inside[:, 1:] != inside[:, :-1]) + np.count_nonzero(inside[1:] != inside[:-1])
        )  # fmt: skip
        if np.count_nonzero(inside) - exposed / 2 + 1 > 50:  # the outline's area (exact for rectilinear ones)
            solid[y0 : y0 + h, x0 : x0 + w] |= inside
    fill = _resize300(solid[top:bottom, left:right].astype(np.float64) * 255)
    crop = rgb[top:bottom, left:right].astype(np.float64)
    hue, sat, val = _hsv180(np.stack([_resize300(crop[..., c]) for c in range(3)], -1))
    red = ((hue <= 10) | (hue >= 160)) & (sat >= 70) & (val >= 40)
    green = (hue >= 35) & (hue <= 95) & (sat >= 70) & (val >= 40)
    rows: list[list[str]] = []
    for i in range(3):
        row = []
        for j in range(3):
            if fill[i * 100 + 10 : i * 100 + 90, j * 100 + 10 : j * 100 + 90].mean() < 15:
                row.append("0")
                continue
            centre = (slice(i * 100 + 20, i * 100 + 80), slice(j * 100 + 20, j * 100 + 80))
            row.append("r" if red[centre].mean() * 255 > 30 else "g" if green[centre].mean() * 255 > 30 else "1")
        rows.append(row)
    return rows


def _gaussian15(gray: np.ndarray) -> np.ndarray:
    """The 15 x 15 Gaussian mean (sigma 2.6, OpenCV's for that size) of an 8-bit image, edges
    replicated, rounded to 8 bits."""
    x = np.arange(15) - 7
    k = np.exp(-(x**2) / (2 * 2.6**2))
    k /= k.sum()
    padded = np.pad(gray.astype(np.float64), 7, mode="edge")
    rows = sum(k[i] * padded[:, i : i + gray.shape[1]] for i in range(15))
    out = sum(k[i] * rows[i : i + gray.shape[0]] for i in range(15))
    return np.floor(np.asarray(out) + 0.5).astype(np.int32)


def _erode3(mask: np.ndarray) -> np.ndarray:
    """One 3 x 3 erosion; outside the picture counts as set (OpenCV's default border for erosion)."""
    p = np.pad(mask, 1, constant_values=True)
    h, w = mask.shape
    out = np.ones_like(mask)
    for dy in range(3):
        for dx in range(3):
            out &= p[dy : dy + h, dx : dx + w]
    return out


def _resize300(a: np.ndarray) -> np.ndarray:
    """Bilinear resize of a 2-D array to 300 x 300, pixel centres aligned (OpenCV's INTER_LINEAR),
    rounded to 8 bits."""
    h, w = a.shape

    def axis(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pos = np.clip((np.arange(300) + 0.5) * n / 300 - 0.5, 0, n - 1)
        i0 = np.floor(pos).astype(int)
        return i0, np.minimum(i0 + 1, n - 1), pos - i0

    y0, y1, fy = axis(h)
    x0, x1, fx = axis(w)
    top = a[y0][:, x0] * (1 - fx) + a[y0][:, x1] * fx
    bottom = a[y1][:, x0] * (1 - fx) + a[y1][:, x1] * fx
    result: np.ndarray = np.floor(top * (1 - fy)[:, None] + bottom * fy[:, None] + 0.5)
    return result


def _hsv180(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """OpenCV's 8-bit HSV: hue 0-180, saturation and value 0-255, each rounded."""
    r, g, b = (rgb[..., c] for c in range(3))
    v = rgb.max(axis=-1)
    diff = v - rgb.min(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(v > 0, np.floor(255 * diff / np.where(v > 0, v, 1) + 0.5), 0)
        h = np.where(v == r, (g - b) / diff, np.where(v == g, (b - r) / diff + 2, (r - g) / diff + 4)) * 30
    h = np.where(diff > 0, h, 0)
    h = np.floor(np.where(h < 0, h + 180, h) + 0.5)
    return h, s, v


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
