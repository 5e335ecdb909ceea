"""WEAVE's and IMUG-Bench's scoring rules, on values worked out by hand."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter

from yanami.families.imug.rules import (
    drawn,
    grid_points,
    imug_image_score,
    mcq_code,
    mcq_paper,
    question_options,
    read_grid,
    read_grid_code,
    resolved_answer,
)
from yanami.families.weave.rules import weave_metric_means, weave_score, weave_score_code
from yanami.models.fake import plain_png


def test_weave_pools_each_metric_then_weighs() -> None:
    turns = [
        {"key_point": 8, "visual_consistency": 6, "image_quality": 7},
        {"key_point": 4, "visual_consistency": 10, "image_quality": 9},
        {"accuracy": 5},
    ]
    means = weave_metric_means(turns)
    assert means == pytest.approx({"key_point": 0.6, "visual_consistency": 0.8, "image_quality": 0.8, "accuracy": 0.5})
    assert weave_score(means) == pytest.approx(0.4 * 0.6 + 0.1 * 0.8 + 0.2 * 0.8 + 0.3 * 0.5)  # 0.63
    assert weave_score(weave_metric_means(turns[:2])) == pytest.approx(0.5 * 0.6 + 0.2 * 0.8 + 0.3 * 0.8)  # 0.70
    assert weave_score(weave_metric_means(turns[2:])) == pytest.approx(0.5)  # text only: the plain mean
    assert weave_score({}) is None


def test_weave_code_figures_round_each_metric_before_weighting() -> None:
    """WEAVE's summarize.py rounds each metric's mean to 3 places, then the weighted sum again:
    KP 23/70 -> 0.329, VC 25/70 -> 0.357, IQ 40/70 -> 0.571, ACC 1.0, and 0.4 x 0.329 + 0.1 x
    0.357 + 0.2 x 0.571 + 0.3 x 1.0 = 0.5815 -> 0.582, where the unrounded score is 0.58143."""
    kp, vc, iq = (4, 3, 7, 0, 0, 0, 9), (1, 6, 1, 0, 3, 7, 7), (1, 5, 2, 9, 10, 8, 5)
    turns = [{"key_point": k, "visual_consistency": v, "image_quality": q} for k, v, q in zip(kp, vc, iq, strict=True)]
    means = weave_metric_means([*turns, {"accuracy": 10}])
    assert weave_score(means) == pytest.approx(0.4 * 23 / 70 + 0.1 * 25 / 70 + 0.2 * 40 / 70 + 0.3)
    assert round(weave_score(means) or 0, 3) == 0.581
    assert weave_score_code(means) == 0.582


@pytest.mark.parametrize(
    ("reply", "expected", "answer", "paper", "code"),
    [
        ("B", ["B"], "B", 1.0, 1.0),
        ("BC", ["B", "C"], "B,C", 1.0, 0.0),  # the code's regex sees no letter in "BC"
        ("B, C", ["B", "C"], "BC", 0.75, 0.0),  # ... nor in a stored "BC"
        ("B, C", ["B", "C"], "B, C", 0.75, 0.75),
        ("B", ["B", "C"], "B, C", 0.5, 0.5),  # one of two right: (1 - 0) / 2
        ("A, B", ["B"], "B", 0.0, 0.0),  # one right, one wrong
        ("I pick B", ["B"], "B", 0.5, 0.5),
        ("(B)", ["B"], "B", 0.75, 0.5),  # letters with symbols: 0.75 in the paper, 0.5 in the code
        ("B. A red cube", ["B"], "B", 0.0, 0.0),  # the article "A" is read as a second, wrong, option
        ("", ["B"], "B", 0.0, 0.0),
    ],
)
def test_imug_mcq_both_ways(reply: str, expected: list[str], answer: str, paper: float, code: float) -> None:
    assert mcq_paper(reply, expected) == pytest.approx(paper)
    assert mcq_code(reply, answer) == pytest.approx(code)


QUESTION = "How many cubes are red? A. one B. two C. three D. none"


@pytest.mark.parametrize(
    ("reply", "paper"),
    [
        ("B", 1.0),  # (A) letters alone
        ("B.", 0.75),  # (B) a separator
        ("B. two", 0.75),  # (B) the option's own text
        ("(B) two", 0.75),
        ("The answer is B.", 0.5),  # (C) any text beyond the options
        ("Answer: B", 0.5),
        ("B, because two are red", 0.5),
        ("two", 0.0),  # (D) no option letter
        ("b", 0.0),
    ],
)
def test_imug_paper_format_weight_reads_its_four_cases_literally(reply: str, paper: float) -> None:
    assert question_options(QUESTION) == ["one", "two", "three", "none"]
    assert mcq_paper(reply, ["B"], question_options(QUESTION)) == paper


def test_question_options_are_found_however_they_are_laid_out() -> None:
    assert question_options("Which cell?\nA) top left\nB) centre\n(C) corner") == ["top left", "centre", "corner"]
    assert question_options("Pick one: (A) red (B) blue") == ["red", "blue"]
    assert question_options("A cube and B. nothing") == []  # no run of options from A


def test_imug_image_points_and_dynamic_answers() -> None:
    assert imug_image_score([3, 4, 5, 2]) == pytest.approx(70.0)
    assert resolved_answer(["A"], "c") == "AC" and resolved_answer([], "B D") == "BD"


def drawn_grid(cells: list[list[str]], size: int = 240, style: str = "outlined") -> bytes:
    """A 3 x 3 grid of cubes on white: ``outlined`` every cell in a 3 px black outline (an empty
    one too), ``cubes`` only the cubes, ``thin`` every cell in a 1 px outline, ``striped`` the
    cubes with a thin red stripe across each blue one."""
    colours = {"1": (90, 90, 200), "r": (220, 30, 30), "g": (30, 170, 40)}
    img = Image.new("RGB", (size + 80, size + 60), "white")
    draw = ImageDraw.Draw(img)
    step = size // 3
    for r, row in enumerate(cells):
        for c, cell in enumerate(row):
            box = (40 + c * step, 30 + r * step, 40 + (c + 1) * step, 30 + (r + 1) * step)
            if style in ("outlined", "thin"):
                width = 3 if style == "outlined" else 1
                draw.rectangle(box, outline="black", width=width, fill=colours.get(cell, "white"))
            elif cell != "0":
                draw.rectangle(box, outline="black", width=3, fill=colours[cell])
                if style == "striped" and cell == "1":
                    y = box[1] + step // 2
                    draw.rectangle((box[0] + 3, y, box[2] - 3, y + step // 7), fill=colours["r"])
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


TRUTH = [["1", "0", "0"], ["0", "r", "0"], ["0", "0", "g"]]


def test_the_code_reading_is_what_imug_benchs_analyzer_reads() -> None:
    """What IMUG-Bench's OpenCV analyzer (score_grid.py) returned for these drawings when run on
    them, and yanami's own reading beside it: the two agree on drawn cubes; the analyzer fills an
    outlined empty cell, misses a cube in a 1-pixel outline and reads a thin red stripe as a red cube."""
    assert read_grid_code(drawn_grid(TRUTH, style="cubes")) == read_grid(drawn_grid(TRUTH, style="cubes")) == TRUTH
    analyzer = [["1", "1", "1"], ["1", "r", "1"], ["1", "1", "g"]]
    assert read_grid_code(drawn_grid(TRUTH)) == analyzer and read_grid(drawn_grid(TRUTH)) == TRUTH
    assert read_grid_code(drawn_grid(TRUTH, style="thin")) == [["1", "0", "0"], ["0", "r", "0"], ["0", "0", "0"]]
    assert read_grid(drawn_grid(TRUTH, style="thin")) == TRUTH
    assert read_grid_code(drawn_grid(TRUTH, style="striped")) == [["r", "0", "0"], ["0", "r", "0"], ["0", "0", "g"]]
    assert read_grid(drawn_grid(TRUTH, style="striped")) == TRUTH
    blank = io.BytesIO()
    Image.new("RGB", (100, 100), "white").save(blank, format="PNG")
    assert read_grid_code(blank.getvalue()) is None


def test_the_grid_is_read_from_the_picture_and_scored_like_the_public_code() -> None:
    assert read_grid(drawn_grid(TRUTH)) == TRUTH
    assert grid_points(read_grid(drawn_grid(TRUTH)), TRUTH, 4) == [5, 5, 5, 5]
    swapped = [["1", "0", "0"], ["0", "g", "0"], ["0", "0", "r"]]
    assert grid_points(read_grid(drawn_grid(swapped)), TRUTH, 4) == [5, 5, 0, 0]
    moved = [["0", "1", "0"], ["0", "r", "0"], ["0", "0", "g"]]
    assert grid_points(read_grid(drawn_grid(moved)), TRUTH, 4) == [5, 0, 0, 0]  # layout wrong: 3 and 4 not read
    blank = io.BytesIO()
    Image.new("RGB", (100, 100), "white").save(blank, format="PNG")
    assert read_grid(blank.getvalue()) is None and grid_points(None, TRUTH, 4) == [0, 0, 0, 0]
    assert grid_points(TRUTH, TRUTH, 5) == [5, 5, 5, 5, 0]


def _png(pixels: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def no_grid_pictures() -> dict[str, bytes]:
    """Pictures that show no grid: what a model may return instead of one."""
    rng = np.random.default_rng(5)
    h, w = 240, 320
    plain = {"white": (255, 255, 255), "black": (0, 0, 0), "grey": (120, 130, 140), "teal": (93, 173, 167)}
    out = {colour: _png(np.full((h, w, 3), rgb)) for colour, rgb in plain.items()}
    out["the fake server's picture"] = plain_png()
    out["colour noise"] = _png(rng.integers(0, 256, (h, w, 3)))
    out["grey noise"] = _png(np.repeat(rng.integers(0, 256, (h, w, 1)), 3, axis=-1))
    for share in (0.02, 0.2, 0.5, 0.8):  # specks, from a few to most of the picture
        specks = np.full((h, w, 3), 255)
        specks[rng.random((h, w)) < share] = (200, 20, 20)
        out[f"specks {share:.0%}"] = _png(specks)
    ramp = np.linspace(0, 255, w)[None, :, None] * np.ones((h, 1, 3))
    out["gradient"] = _png(ramp * (1, 0.6, 0.3))
    sky = np.linspace(90, 230, h)[:, None, None] * np.ones((1, w, 1)) * (0.6, 0.8, 1.0)
    photo = Image.fromarray(sky.astype(np.uint8))
    draw = ImageDraw.Draw(photo)
    for _ in range(12):  # hills and trees, blurred, with the grain of a photograph
        x, y, r = int(rng.integers(0, w)), int(rng.integers(h // 3, h)), int(rng.integers(15, 80))
        draw.ellipse((x - r, y - r, x + r, y + r), fill=tuple(int(v) for v in rng.integers(0, 200, 3)))
    smooth = np.asarray(photo.filter(ImageFilter.GaussianBlur(3)), dtype=np.int32)
    out["painting"] = _png(smooth)
    out["photograph"] = _png(np.clip(smooth + rng.integers(-20, 20, smooth.shape), 0, 255))
    return out


@pytest.mark.parametrize("name", list(no_grid_pictures()))
def test_a_picture_without_a_grid_earns_no_point_under_either_reading(name: str) -> None:
    picture = no_grid_pictures()[name]
    assert read_grid(picture) is None and read_grid_code(picture) is None
    assert drawn(np.asarray(Image.open(io.BytesIO(picture)).convert("RGB"), dtype=np.int16)) is False
    assert grid_points(read_grid(picture), TRUTH, 4) == grid_points(read_grid_code(picture), TRUTH, 4) == [0, 0, 0, 0]


@pytest.mark.parametrize(
    "paper, fmt", [("white", "PNG"), ((235, 235, 228), "PNG"), ("white", "JPEG"), ((250, 240, 220), "JPEG")]
)
def test_a_drawn_grid_is_still_read_on_any_plain_paper(paper: object, fmt: str) -> None:
    """The test for a drawing takes nothing from a grid: on light paper, in JPEG, with the paper
    showing only between the cubes, both readings read what they read before."""
    for cells in (TRUTH, [["1", "g", "1"], ["1", "g", "r"], ["0", "r", "1"]]):
        img = Image.open(io.BytesIO(drawn_grid(cells, style="cubes")))
        page = Image.new("RGB", img.size, paper)  # type: ignore[arg-type]
        page.paste(img, mask=Image.eval(img.convert("L"), lambda v: 255 if v < 250 else 0))
        buf = io.BytesIO()
        page.save(buf, format=fmt, quality=90)
        assert read_grid(buf.getvalue()) == cells
        assert read_grid_code(buf.getvalue()) == cells
