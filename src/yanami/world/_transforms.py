"""Changes that leave what a picture shows untouched: the set the parser and the exact judge
must read through (docs/evaluation.md lists it). `benchmarks/bench_eval.py --only robustness`
measures SC, VQ and the parser's F1 under each on a whole bench; the tests read a few scenes
through each. Every transform takes a 512 x 384 RGB picture and returns encoded bytes (PNG
unless JPEG is named)."""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
from PIL import Image

__all__ = ["TARGETLESS", "TRANSFORMS"]


def _encode(img: Image.Image, fmt: str = "PNG", quality: int = 95) -> bytes:
    buf = io.BytesIO()
    if fmt == "JPEG":
        img.save(buf, format="JPEG", quality=quality)  # Pillow's default 4:2:0 chroma subsampling
    else:
        img.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def _tone(img: Image.Image, fn: Callable[[np.ndarray], np.ndarray]) -> Image.Image:
    out = fn(np.asarray(img).astype(np.float64))
    return Image.fromarray(np.clip(np.round(out), 0, 255).astype(np.uint8))


def _framed(img: Image.Image, size: tuple[int, int], box: tuple[int, int, int, int], fill: str) -> Image.Image:
    """``img`` scaled into ``box`` (left, top, right, bottom) of a ``size`` canvas of colour ``fill``."""
    canvas = Image.new("RGB", size, fill)
    canvas.paste(img.resize((box[2] - box[0], box[3] - box[1]), Image.Resampling.BICUBIC), box[:2])
    return canvas


def _crop(img: Image.Image, left: float, top: float, right: float, bottom: float) -> Image.Image:
    w, h = img.size
    return img.crop((round(left * w), round(top * h), w - round(right * w), h - round(bottom * h)))


_BICUBIC = Image.Resampling.BICUBIC
TRANSFORMS: dict[str, Callable[[Image.Image], bytes]] = {
    "none": _encode,
    "brightness +20": lambda im: _encode(_tone(im, lambda a: a + 20)),
    "brightness -20": lambda im: _encode(_tone(im, lambda a: a - 20)),
    "white balance warm": lambda im: _encode(_tone(im, lambda a: a * np.array([1.1, 1.0, 0.9]))),
    "white balance cool": lambda im: _encode(_tone(im, lambda a: a * np.array([0.9, 1.0, 1.1]))),
    "gamma 0.8": lambda im: _encode(_tone(im, lambda a: 255 * (a / 255) ** 0.8)),
    "gamma 1.25": lambda im: _encode(_tone(im, lambda a: 255 * (a / 255) ** 1.25)),
    "JPEG q70": lambda im: _encode(im, "JPEG", 70),
    "JPEG q90": lambda im: _encode(im, "JPEG", 90),
    "resize 1024x768": lambda im: _encode(im.resize((1024, 768), _BICUBIC)),
    "resize 384x288": lambda im: _encode(im.resize((384, 288), _BICUBIC)),
    "stretch 512x512": lambda im: _encode(im.resize((512, 512), _BICUBIC)),
    "border white": lambda im: _encode(_framed(im, (512, 384), (16, 16, 496, 368), "white")),
    "border black": lambda im: _encode(_framed(im, (512, 384), (16, 16, 496, 368), "black")),
    "letterbox white": lambda im: _encode(_framed(im, (512, 512), (0, 64, 512, 448), "white")),
    "letterbox black": lambda im: _encode(_framed(im, (512, 512), (0, 64, 512, 448), "black")),
    "crop 2 %": lambda im: _encode(_crop(im, 0.02, 0.02, 0.02, 0.02)),
    "crop 4 %, resized": lambda im: _encode(_crop(im, 0.04, 0.04, 0.04, 0.04).resize(im.size, _BICUBIC)),
    "crop 3 % off-centre": lambda im: _encode(_crop(im, 0.02, 0.02, 0.04, 0.04).resize(im.size, _BICUBIC)),
}
"""By name, as docs/evaluation.md and the robustness benchmark name them ("none": the picture as it is)."""
TARGETLESS = frozenset({"crop 3 % off-centre"})
"""Reported, with no target: the parser takes a crop to keep the picture's centre."""
