"""Stand-ins that play the pipeline's models offline, behind the scripted loopback server.

They answer the real protocols (chat completions, the images API) over a real socket, so a
preparation runs end to end with no network and no model: `StandIns.brain` is a
`FakeServer` brain. What they decide is decidable from the pixels, so tests can say in
advance what must happen:

- **filter**: an image whose pixels hardly vary (a blank or near-blank canvas) is a
  ``generation_failure``; anything else is usable;
- **repair**: draws a pattern over the rejected image (a picture the filter then accepts);
  ``repair_fails`` names images (by SHA-256 prefix) whose repairs stay blank;
- **route**: a group of two or more images is ``fusion``; a single image is routed by its
  hash to editing, world_modeling or reasoning.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

BLANK_STD = 4.0
"""Pixel standard deviation (0–255) below which the filter stand-in sees a blank canvas."""


def _text(body: dict[str, Any]) -> str:
    return " ".join(
        part.get("text", "")
        for m in body.get("messages", [])
        for part in (m["content"] if isinstance(m.get("content"), list) else [{"text": m.get("content") or ""}])
        if isinstance(part, dict)
    )


def _images(body: dict[str, Any]) -> list[bytes]:
    found = []
    for m in body.get("messages", []):
        content = m.get("content")
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "image_url":
                found.append(base64.b64decode(part["image_url"]["url"].split(",", 1)[1]))
    return found


def pixel_std(data: bytes) -> float:
    """The standard deviation of an image's grey levels."""
    with Image.open(io.BytesIO(data)) as im:
        return float(np.asarray(im.convert("L"), dtype=np.float32).std())


@dataclass
class StandIns:
    """The stand-in models (see the module docstring)."""

    repair_fails: set[str] = field(default_factory=set)
    """SHA-256 prefixes of images whose repairs come back blank."""

    def brain(self, path: str, body: dict[str, Any]) -> Any:
        """A `FakeServer` brain: a reply for the request, or None for the server's default."""
        if "/images/" in path:
            return self.repair(body)
        if "/chat/completions" not in path:
            return None
        text = _text(body)
        if '"keep"' in text:
            return self.screen(_images(body)[-1])
        if '"scenario"' in text:
            return self.route(_images(body))
        return None

    def screen(self, data: bytes) -> str:
        """The filter's JSON verdict on one image."""
        if pixel_std(data) < BLANK_STD:
            return json.dumps({"keep": False, "category": "generation_failure", "reason": "the canvas is blank"})
        return json.dumps({"keep": True, "category": "usable", "reason": "a clear picture"})

    def repair(self, body: dict[str, Any]) -> bytes:
        """A repaired image: the input with a pattern drawn over it (unless told to fail)."""
        images = body.get("images") or []
        src = images[-1] if images else b""
        with Image.open(io.BytesIO(src)) as im:
            pixels = np.asarray(im.convert("RGB"), dtype=np.uint8).copy()
        if not any(hashlib.sha256(src).hexdigest().startswith(p) for p in self.repair_fails):
            h, w = pixels.shape[:2]
            yy, xx = np.mgrid[0:h, 0:w]
            pixels[((yy // 16 + xx // 16) % 2).astype(bool)] = (200, 60, 40)
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, format="PNG")
        return buf.getvalue()

    def route(self, images: list[bytes]) -> str:
        """The scenario for a group of images."""
        if len(images) >= 2:
            return json.dumps({"scenario": "fusion", "reason": "several pictures to combine"})
        pick = ("editing", "world_modeling", "reasoning")[hashlib.sha256(images[0]).digest()[0] % 3]
        return json.dumps({"scenario": pick, "reason": "one picture"})
