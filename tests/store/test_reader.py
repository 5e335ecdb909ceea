"""Reading dataset directories: streamed dialogues, lazy images, a pixel limit."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from yanami.errors import UserError
from yanami.store import Dataset, ImageProblem
from yanami.synthetic import synthetic_dialogue


def test_iterates_dialogues_in_order(built: Path) -> None:
    ds = Dataset(built)
    assert len(ds) == 8
    assert [d.id for d in ds] == [synthetic_dialogue(i, seed=7)[0].id for i in range(8)]


def test_iteration_is_lazy(built: Path) -> None:
    it = iter(Dataset(built))
    first = next(it)
    assert first.id == synthetic_dialogue(0, seed=7)[0].id


def test_images_open_lazily_with_their_declared_size(built: Path) -> None:
    ds = Dataset(built)
    part = next(iter(ds)).images()[0]
    img = ds.open_image(part)
    assert img.size == (part.width, part.height)
    assert img.format == "PNG"
    img.load()


def test_pixel_limit_applies_when_opening(built: Path) -> None:
    ds = Dataset(built, max_pixels=100)
    part = next(iter(ds)).images()[0]
    with pytest.raises(ImageProblem, match="over the limit of 100"):
        ds.open_image(part)


def test_pixel_limit_applies_to_raw_bytes() -> None:
    from yanami.store import open_image_bytes

    buf = io.BytesIO()
    Image.new("RGB", (300, 300)).save(buf, format="PNG")
    with pytest.raises(ImageProblem, match="90000 pixels is over the limit of 1000"):
        open_image_bytes(buf.getvalue(), max_pixels=1000)


def test_not_a_dataset(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such directory"):
        Dataset(tmp_path / "missing")
    with pytest.raises(UserError, match=r"no manifest\.json"):
        Dataset(tmp_path)
