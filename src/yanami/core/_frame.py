"""The output frame: the size every image a model is asked for is drawn at."""

from __future__ import annotations

OUTPUT_LONG_EDGE = 512
"""The long edge of the output frame (docs/evaluation.md)."""
QUESTION_FRAME = (512, 512)
"""The frame of a request for text (a DSU question): no picture is drawn, but every request names one."""


def output_frame(width: int, height: int, long_edge: int = OUTPUT_LONG_EDGE) -> tuple[int, int]:
    """The output frame for a reference of this size: aspect kept, long edge 512, sides multiples of 16."""
    scale = long_edge / max(width, height)
    return (max(16, round(width * scale / 16) * 16), max(16, round(height * scale / 16) * 16))
