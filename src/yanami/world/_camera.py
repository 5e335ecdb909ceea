"""The world's perspective camera: a fixed elevation and distance, orbiting in azimuth."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

WIDTH, HEIGHT = 512, 384
"""Default image size: long edge 512, 4:3."""
ELEVATION = 38.0
DISTANCE = 13.5
FOCAL = 590.0
"""Focal length in pixels at the default width."""
TARGET = (0.0, 0.0, 0.35)


@dataclass(frozen=True)
class Camera:
    """A pinhole camera looking at ``TARGET`` from ``azimuth`` degrees around the vertical axis."""

    azimuth: float
    width: int = WIDTH
    height: int = HEIGHT

    @cached_property
    def focal(self) -> float:
        return FOCAL * self.width / WIDTH

    @cached_property
    def basis(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Camera position and its right, up and forward unit vectors."""
        a, e = math.radians(self.azimuth), math.radians(ELEVATION)
        target = np.array(TARGET)
        # Azimuth 0 looks along +y; positive azimuth turns the camera clockwise seen from above.
        back = np.array([-math.sin(a) * math.cos(e), -math.cos(a) * math.cos(e), math.sin(e)])
        pos = target + DISTANCE * back
        fwd = -back
        right = np.cross(fwd, [0.0, 0.0, 1.0])
        right /= np.linalg.norm(right)
        up = np.cross(right, fwd)
        return pos, right, up, fwd

    def project(self, points: np.ndarray) -> np.ndarray:
        """Image coordinates (x right, y down, pixels) of world points, shape (..., 3) -> (..., 2)."""
        pos, right, up, fwd = self.basis
        d = points - pos
        z = d @ fwd
        x = self.width / 2 + self.focal * (d @ right) / z
        y = self.height / 2 - self.focal * (d @ up) / z
        return np.stack([x, y], axis=-1)

    def rays(self, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
        """Unit ray directions through image points (pixel centres at +0.5), shape (..., 3)."""
        _, right, up, fwd = self.basis
        dx = (xs - self.width / 2) / self.focal
        dy = (ys - self.height / 2) / self.focal
        d = fwd.astype(np.float32) + dx[..., None] * right.astype(np.float32) - dy[..., None] * up.astype(np.float32)
        result: np.ndarray = d / np.sqrt(np.einsum("...i,...i->...", d, d))[..., None]
        return result

    def ray_components(self, x0: int, y0: int, x1: int, y1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Unit ray directions for the pixel block [y0, y1) x [x0, x1), as three (h, w) float32 arrays."""
        _, right, up, fwd = self.basis
        u = ((np.arange(x0, x1, dtype=np.float32) + 0.5 - self.width / 2) / self.focal)[None, :]
        v = ((np.arange(y0, y1, dtype=np.float32) + 0.5 - self.height / 2) / self.focal)[:, None]
        comps = [np.float32(fwd[k]) + u * np.float32(right[k]) - v * np.float32(up[k]) for k in range(3)]
        inv = 1 / np.sqrt(comps[0] ** 2 + comps[1] ** 2 + comps[2] ** 2)
        return comps[0] * inv, comps[1] * inv, comps[2] * inv

    def rays_at(self, xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Unit ray directions through image points given as pixel-index coordinates (centre at +0.5)."""
        _, right, up, fwd = self.basis
        u = ((xs.astype(np.float32) + 0.5 - self.width / 2) / self.focal).astype(np.float32)
        v = ((ys.astype(np.float32) + 0.5 - self.height / 2) / self.focal).astype(np.float32)
        comps = [np.float32(fwd[k]) + u * np.float32(right[k]) - v * np.float32(up[k]) for k in range(3)]
        inv = 1 / np.sqrt(comps[0] ** 2 + comps[1] ** 2 + comps[2] ** 2)
        return comps[0] * inv, comps[1] * inv, comps[2] * inv

    def ground_point(self, x: float, y: float, z: float = 0.0) -> tuple[float, float]:
        """Where the ray through image point (x, y) meets the horizontal plane at height ``z``."""
        pos = self.basis[0]
        d = self.rays(np.array(x), np.array(y))
        t = (z - pos[2]) / d[2]
        p = pos + t * d
        return float(p[0]), float(p[1])
