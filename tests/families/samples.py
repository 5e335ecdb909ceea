"""Small sources in WEAVE's and IMUG-Bench's public layouts, written by the tests (images made here)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from PIL import Image


def picture(path: Path, colour: str, fmt: str = "PNG", size: tuple[int, int] = (64, 48)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format=fmt)
    path.write_bytes(buf.getvalue())
    return path


def weave_records() -> list[dict[str, Any]]:
    return [
        {
            "domain": "edit",
            "idx": 7,
            "images": ["imgs/street.png", "imgs/street_red.png", "imgs/street_moon.jpg"],
            "chats": [
                {"role": "user", "type": "text", "content": "Edit Image #1: make the sky red."},
                {"role": "assistant", "type": "image", "content": "Image #2",
                 "key_point": {"GT #1": "Compared to <image>, only the sky changed.", "Text": "The sky is red."}},
                {"role": "user", "type": "text", "content": "Now add a moon to Image #2."},
                {"role": "assistant", "type": "image", "content": "Image #3",
                 "key_point": {"Image #2": "Everything of <image> is kept.", "GT #3": "Looks like <image>."}},
                {"role": "user", "type": "text", "content": "Which has a moon, Image #2 or Image #3?"},
                {"role": "assistant", "type": "text", "content": "Image #3 has the moon.", "key_point": None},
            ],
        },
        {
            "domain": "story",
            "idx": 8,
            "images": ["imgs/cat.png"],
            "chats": [
                {"role": "user", "type": "text", "content": "Draw a cat on a mat."},
                {"role": "assistant", "type": "image", "content": "Image #1", "key_point": {"Text": "A cat on a mat."}},
            ],
        },
    ]  # fmt: skip


def write_weave(root: Path, records: list[dict[str, Any]] | None = None) -> Path:
    """``root/test.json`` and ``root/imgs/``."""
    for name, colour in (("street.png", "grey"), ("street_red.png", "red"), ("cat.png", "orange")):
        picture(root / "imgs" / name, colour)
    picture(root / "imgs" / "street_moon.jpg", "navy", "JPEG")
    (root / "test.json").write_text(json.dumps(weave_records() if records is None else records))
    return root


IMUG_GRID = [["1", "0", "0"], ["0", "r", "0"], ["0", "0", "g"]]


def imug_samples() -> list[dict[str, Any]]:
    return [
        {
            "domain": "Geometric_Coloring",
            "subdomain": "cubes_coloring",
            "sample_id": 1,
            "system_prompt": "You draw 3 x 3 grids of cubes.",
            "tasks": [
                {"turn": 1, "modality": "text",
                 "input": [{"text": "How many cubes? A. one B. two C. three"}, {"image": "cubes_1.png"}],
                 "output": {"answer": "B"}},
                {"turn": 2, "modality": "image", "input": [{"text": "Draw the cubes on a 3 x 3 grid, one red."}],
                 "output": {"evaluation_points": ["A grid is drawn.", "The layout is right.", "Red is right.",
                                                  "Green is right."]}},
                {"turn": 3, "modality": "text",
                 "input": [{"text": "Which cells of your grid are coloured? A. top left B. centre C. corner"}],
                 "output": {"answer": "A+<DYNAMIC>"}},
            ],
        },
        {
            "domain": "Botany",
            "subdomain": "natural_growth",
            "sample_id": "7",
            "tasks": [
                {"turn": 1, "modality": "text",
                 "input": [{"image": "sprout.jpg", "text": "A sprout after a week."},
                           {"text": "What grows? A. leaves B. rocks C. roots"}],
                 "output": {"answer": "A, C"}},
            ],
        },
    ]  # fmt: skip


def write_imug(root: Path, samples: list[dict[str, Any]] | None = None, *, side_files: bool = True) -> Path:
    """IMUG-Bench's folder: ``root/data/benchmark.jsonl``, its side files (those of
    `imug_samples`' grid task) and ``data/images/``."""
    data = root / "data"
    picture(data / "images" / "cubes_1.png", "white")
    picture(data / "images" / "sprout.jpg", "green", "JPEG")
    lines = imug_samples() if samples is None else samples
    (data / "benchmark.jsonl").write_text("".join(json.dumps(s) + "\n" for s in lines))
    if not side_files:
        return root
    key = {"domain": "Geometric_Coloring", "subdomain": "cubes_coloring", "sample_id": "1"}
    (data / "dynamic_references.jsonl").write_text(json.dumps({**key, "turn_idx": 3, "ref_turn_idxs": [2]}) + "\n")
    links = [{"turn_idx": 2, "refs": [{"ref_turn": 1, "ref_type": "input"}]}]
    (data / "image_references.jsonl").write_text(json.dumps({**key, "reference_links": links}) + "\n")
    (data / "grid_gt").mkdir()
    grid = data / "grid_gt" / "Geometric_Coloring__cubes_coloring__1.jsonl"
    grid.write_text(json.dumps({"turn": 2, "grid": IMUG_GRID}) + "\n")
    return root
