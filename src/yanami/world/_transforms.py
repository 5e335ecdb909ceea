"""Changes that leave what a picture shows untouched: the set the parser and the exact judge
must read through (docs/evaluation.md lists it). `benchmarks/bench_eval.py --only robustness`
measures SC, VQ and the parser's F1 under each on a whole bench; the tests read a few scenes
through each. Every transform takes a 512 x 384 RGB picture and returns encoded bytes (PNG
unless JPEG is named)."""

from __future__ import annotations

import io
import math
from collections.abc import Callable

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

__all__ = ["NOISY", "TARGETLESS", "TRANSFORMS", "TURNED"]


_BICUBIC = Image.Resampling.BICUBIC


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


def _colour(img: Image.Image, name: str) -> tuple[int, int, int]:
    """A named colour, or the picture's own floor colour (``floor``: its median, as flat paint would match it)."""
    if name == "floor":
        m = np.median(np.asarray(img).reshape(-1, 3), axis=0)
        return int(m[0]), int(m[1]), int(m[2])
    return _COLOURS[name]


_COLOURS = {
    "black": (0, 0, 0),
    "white": (255, 255, 255),
    "grey": (128, 128, 128),
    "red": (230, 20, 30),
    "blue": (20, 60, 230),
    "green": (30, 200, 40),
}


def _lines(img: Image.Image, edges: str, width: int, colour: str) -> Image.Image:
    """A ``width``-px line of ``colour`` along each of ``edges`` (``t``, ``b``, ``l``, ``r``), drawn over it."""
    out = img.copy()
    w, h = out.size
    draw = ImageDraw.Draw(out)
    fill = _colour(img, colour)
    boxes = {"t": (0, 0, w - 1, width - 1), "b": (0, h - width, w - 1, h - 1)}
    boxes |= {"l": (0, 0, width - 1, h - 1), "r": (w - width, 0, w - 1, h - 1)}
    for edge in edges:
        draw.rectangle(boxes[edge], fill=fill)
    return out


def _padded(img: Image.Image, width: int, colour: str, resize: bool) -> Image.Image:
    """The picture inside a frame ``width`` px wide of ``colour`` (outside it: nothing is covered),
    resized back to the picture's size where ``resize``."""
    w, h = img.size
    out = Image.new("RGB", (w + 2 * width, h + 2 * width), _colour(img, colour))
    out.paste(img, (width, width))
    return out.resize((w, h), _BICUBIC) if resize else out


def _corner(size: tuple[int, int], box: tuple[int, int], corner: str, inset: int = 6) -> tuple[int, int]:
    """Where a ``box`` (width, height) sits ``inset`` px inside ``corner`` (``tl``, ``tr``, ``bl``, ``br``)."""
    x = inset if corner[1] == "l" else size[0] - box[0] - inset
    y = inset if corner[0] == "t" else size[1] - box[1] - inset
    return x, y


def _text(img: Image.Image, corner: str, text: str, fill: str, size: int) -> Image.Image:
    """``text`` in Pillow's default font at ``size`` px, in ``corner``."""
    out = img.copy()
    font = ImageFont.load_default(size=size)
    left, top, right, bottom = (round(v) for v in font.getbbox(text))
    x, y = _corner(out.size, (right - left, bottom - top), corner)
    ImageDraw.Draw(out).text((x - left, y - top), text, fill=_colour(img, fill), font=font)
    return out


def _logo(img: Image.Image, corner: str, shape: str, colour: str, side: int) -> Image.Image:
    """A solid logo (a disc, a square or a rounded badge with a white letter) ``side`` px high, in ``corner``."""
    out = img.copy()
    draw = ImageDraw.Draw(out)
    width = side if shape != "badge" else 2 * side
    x, y = _corner(out.size, (width, side), corner)
    box = (x, y, x + width - 1, y + side - 1)
    if shape == "disc":
        draw.ellipse(box, fill=_colour(img, colour))
    elif shape == "square":
        draw.rectangle(box, fill=_colour(img, colour))
    else:
        draw.rounded_rectangle(box, radius=side // 4, fill=_colour(img, colour))
        font = ImageFont.load_default(size=side * 2 // 3)
        draw.text((x + width // 2, y + side // 2), "Y", fill=(255, 255, 255), font=font, anchor="mm")
    return out


def _rotated(img: Image.Image, degrees: float, fill: str) -> Image.Image:
    """Turned by ``degrees`` (counter-clockwise) about its centre; the corners left empty are filled
    with ``fill`` (``edge``: the picture's own edge colour, its border's median), or, with ``crop``,
    cut off: the largest centred rectangle of the picture's shape inside is resized back."""
    w, h = img.size
    if fill != "crop":
        edge = np.concatenate([np.asarray(img)[[0, -1]].reshape(-1, 3), np.asarray(img)[:, [0, -1]].reshape(-1, 3)])
        colour = tuple(int(v) for v in np.median(edge, axis=0)) if fill == "edge" else _COLOURS[fill]
        return img.rotate(degrees, _BICUBIC, fillcolor=colour)
    t = math.radians(abs(degrees))
    s = min(w / (w * math.cos(t) + h * math.sin(t)), h / (w * math.sin(t) + h * math.cos(t)))
    cw, ch = w * s, h * s
    box = ((w - cw) / 2, (h - ch) / 2, (w + cw) / 2, (h + ch) / 2)
    return img.rotate(degrees, _BICUBIC).resize((w, h), _BICUBIC, box=box)


def _hue(img: Image.Image, degrees: float) -> Image.Image:
    """Every colour's hue (HSV) turned by ``degrees``; saturation and value kept."""
    a = np.asarray(img).astype(np.float64) / 255
    v, c = a.max(axis=2), np.ptp(a, axis=2)
    r, g, b = a[..., 0], a[..., 1], a[..., 2]
    safe = np.where(c > 0, c, 1)
    h = np.where(v == r, ((g - b) / safe) % 6, np.where(v == g, (b - r) / safe + 2, (r - g) / safe + 4))
    h = (h + degrees / 60) % 6
    # HSV back to RGB: each channel's distance around the hexagon
    out = np.stack([v - c * np.clip(np.minimum(k := (n + h) % 6, 4 - k), 0, 1) for n in (5, 3, 1)], axis=2)
    return Image.fromarray(np.clip(np.round(out * 255), 0, 255).astype(np.uint8))


def _noise(img: Image.Image, sigma: float) -> Image.Image:
    """Gaussian noise of ``sigma`` grey levels on every channel (the same draw for every picture)."""
    return _tone(img, lambda a: a + np.random.default_rng(0).normal(0.0, sigma, a.shape))


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
    # What real pipelines add: lines along an edge, a frame, a watermark, a slight turn, hue, blur,
    # strong JPEG, sensor noise.
    "line 1 px black, top": lambda im: _encode(_lines(im, "t", 1, "black")),
    "line 1 px grey, all edges": lambda im: _encode(_lines(im, "tblr", 1, "grey")),
    "line 2 px floor, bottom": lambda im: _encode(_lines(im, "b", 2, "floor")),
    "line 2 px white, left": lambda im: _encode(_lines(im, "l", 2, "white")),
    "line 3 px red, right": lambda im: _encode(_lines(im, "r", 3, "red")),
    "line 4 px black, all edges": lambda im: _encode(_lines(im, "tblr", 4, "black")),
    "line 4 px floor, top and left": lambda im: _encode(_lines(im, "tl", 4, "floor")),
    "line 4 px blue, bottom": lambda im: _encode(_lines(im, "b", 4, "blue")),
    "frame 8 px black": lambda im: _encode(_padded(im, 8, "black", False)),
    "frame 12 px white, resized": lambda im: _encode(_padded(im, 12, "white", True)),
    "frame 6 px grey, resized": lambda im: _encode(_padded(im, 6, "grey", True)),
    "frame 10 px floor, resized": lambda im: _encode(_padded(im, 10, "floor", True)),
    "frame 16 px green": lambda im: _encode(_padded(im, 16, "green", False)),
    "watermark text, bottom right": lambda im: _encode(_text(im, "br", "\u00a9 yanami stock", "white", 16)),
    "watermark text, top left": lambda im: _encode(_text(im, "tl", "SAMPLE", "black", 20)),
    "watermark text, top right": lambda im: _encode(_text(im, "tr", "yanami.example", "grey", 10)),
    "watermark logo, top right": lambda im: _encode(_logo(im, "tr", "disc", "red", 56)),
    "watermark logo, bottom left": lambda im: _encode(_logo(im, "bl", "square", "blue", 48)),
    "watermark badge, bottom right": lambda im: _encode(_logo(im, "br", "badge", "green", 40)),
    "rotate +1, black corners": lambda im: _encode(_rotated(im, 1, "black")),
    "rotate -2, white corners": lambda im: _encode(_rotated(im, -2, "white")),
    "rotate +2, edge corners": lambda im: _encode(_rotated(im, 2, "edge")),
    "rotate -1, cropped": lambda im: _encode(_rotated(im, -1, "crop")),
    "rotate +2, cropped": lambda im: _encode(_rotated(im, 2, "crop")),
    "hue +10": lambda im: _encode(_hue(im, 10)),
    "hue -10": lambda im: _encode(_hue(im, -10)),
    "blur 1.0": lambda im: _encode(im.filter(ImageFilter.GaussianBlur(1.0))),
    "blur 1.5": lambda im: _encode(im.filter(ImageFilter.GaussianBlur(1.5))),
    "JPEG q30": lambda im: _encode(im, "JPEG", 30),
    "JPEG q50": lambda im: _encode(im, "JPEG", 50),
    "noise 3": lambda im: _encode(_noise(im, 3)),
    "noise 5": lambda im: _encode(_noise(im, 5)),
}
"""By name, as docs/evaluation.md and the robustness benchmark name them ("none": the picture as it is)."""
TARGETLESS = frozenset({"crop 3 % off-centre"})
"""Reported, with no target: the parser takes a crop to keep the picture's centre."""
NOISY = frozenset({"noise 3", "noise 5"})
"""Targets on SC only: noise is damage a person sees on the floor, and Visual Quality counts it."""
TURNED = frozenset(name for name in TRANSFORMS if name.startswith("rotate"))
"""Read without undoing the turn: a position near the picture's side moves with it, up to 0.25 units at 2 degrees."""
