"""The learned model's network (PyTorch): one transformer encoder over a request's tokens, with
heads for the option a question's answer names and for the picture to draw.

An object's shape, colour, size and material are read through the embeddings of the words that
name them (the object token of a blue cube and the word "blue" share a vector), and the
attribute heads score each class against the same vectors: the words of a request and the
objects of its pictures meet in one space from the first step.

The picture is predicted as an edit of what the request shows: each object token says whether
the new picture keeps that object, and with which shape, colour, size, material, support and
position (a shift from where it stood); each new-object slot says whether it holds an object,
and which; each picture marker, whether the new picture takes that picture's background.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, TypedDict

import torch
from torch import nn

from yanami.learned._features import (
    COLOUR_NAMES,
    MATERIAL_NAMES,
    MAX_LEN,
    MAX_NUMBER,
    MAX_OPTIONS,
    MAX_PICTURES,
    MAX_TURNS,
    NEW_SLOTS,
    SHAPE_NAMES,
    SIZE_NAMES,
)


class Batch(TypedDict):
    """Padded tensors for a batch (``(B, N)`` per token, ``attrs`` ``(B, N, 5)``, ``xy`` ``(B, N, 2)``,
    ``length`` ``(B,)``), and the token indices each loss reads (`yanami.learned._train.collate`)."""

    kind: torch.Tensor
    word: torch.Tensor
    role: torch.Tensor
    turn: torch.Tensor
    number: torch.Tensor
    picture: torch.Tensor
    option: torch.Tensor
    slot: torch.Tensor
    attrs: torch.Tensor
    xy: torch.Tensor
    length: torch.Tensor
    answers: list[tuple[int, list[list[int]], int]]
    """(row, each option's tokens, the right option) per question."""
    keep: list[tuple[int, int, float]]
    """(row, token, kept) per object token and new-object slot of a target turn."""
    rows: list[tuple[int, int, int, int, int, int, int, float, float]]
    """(row, token, shape, colour, size, material, stacked, x, y) per target object."""
    backgrounds: list[tuple[int, list[list[int]], int]]
    """(row, each picture marker's token, the picture whose background the target takes)."""


class Outputs(TypedDict):
    """The network's outputs per token (`Net.forward`)."""

    answer: torch.Tensor
    keep: torch.Tensor
    background: torch.Tensor
    attrs: list[torch.Tensor]
    """Logits of shape, colour, size, material and stacked."""
    xy: torch.Tensor


ATTRIBUTES = (len(SHAPE_NAMES), len(COLOUR_NAMES), len(SIZE_NAMES), len(MATERIAL_NAMES), 2)
"""Classes of each attribute head: shape, colour, size, material, stacked."""


@dataclass(frozen=True)
class NetConfig:
    """The network's size (a checkpoint's ``config.json`` holds it)."""

    vocabulary: int
    width: int = 128
    layers: int = 3
    heads: int = 4
    feedforward: int = 512
    attribute_words: tuple[tuple[int, ...], ...] = ()
    """Per attribute (shape, colour, size, material), the word id of each class's name."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NetConfig:
        words = tuple(tuple(int(w) for w in ids) for ids in data.get("attribute_words", ()))
        return cls(**{**data, "attribute_words": words})


class Net(nn.Module):
    """See the module docstring."""

    def __init__(self, config: NetConfig) -> None:
        super().__init__()
        d = config.width
        self.config = config
        self.word = nn.Embedding(config.vocabulary, d)
        self.kind = nn.Embedding(5, d)
        self.role = nn.Embedding(4, d)
        self.turn = nn.Embedding(MAX_TURNS + 1, d)
        self.number = nn.Embedding(MAX_NUMBER + 1, d)
        self.picture = nn.Embedding(MAX_PICTURES + 1, d)
        self.option = nn.Embedding(MAX_OPTIONS + 1, d)
        self.position = nn.Embedding(MAX_LEN, d)
        if len(config.attribute_words) != 4 or any(
            len(ids) != n for ids, n in zip(config.attribute_words, ATTRIBUTES, strict=False)
        ):
            raise ValueError("attribute_words: the word ids of every shape, colour, size and material name")
        for k, ids in enumerate(config.attribute_words):  # 0: no attribute (not an object token)
            self.register_buffer(f"names_{k}", torch.tensor([0, *ids], dtype=torch.long), persistent=False)
        self.stacked = nn.Embedding(3, d)
        self.attr_proj = nn.ModuleList(nn.Linear(d, d) for _ in range(4))
        self.xy = nn.Linear(2, d)
        self.slot = nn.Embedding(NEW_SLOTS, d)
        layer = nn.TransformerEncoderLayer(
            d, config.heads, config.feedforward, dropout=0.0, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, config.layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.answer_head = nn.Linear(d, 1)
        self.keep_head = nn.Linear(d, 1)
        self.background_head = nn.Linear(d, 1)
        self.stacked_head = nn.Linear(d, 2)
        self.xy_head = nn.Linear(d, 2)

    def _names(self, k: int) -> torch.Tensor:
        names: torch.Tensor = getattr(self, f"names_{k}")
        return names

    def forward(self, batch: Batch) -> Outputs:
        """Hidden states and every head's output, per token (the caller picks the tokens each applies to)."""
        kind = batch["kind"]
        n = kind.shape[1]
        lengths = batch["length"]
        # positions counted from each request's end: the current message always sits at 0
        from_end = (lengths[:, None] - 1 - torch.arange(n)[None, :]).clamp(0, MAX_LEN - 1)
        h = (
            self.word(batch["word"])
            + self.kind(kind)
            + self.role(batch["role"])
            + self.turn(batch["turn"])
            + self.number(batch["number"])
            + self.picture(batch["picture"])
            + self.option(batch["option"])
            + self.position(from_end)
            + self.xy(batch["xy"])
        )
        attrs = batch["attrs"]
        for k in range(4):
            present = (attrs[:, :, k] > 0).unsqueeze(-1)
            h = h + self.word(self._names(k)[attrs[:, :, k]]) * present
        h = h + self.stacked(attrs[:, :, 4])
        h = h + self.slot(batch["slot"]) * (kind == 4).unsqueeze(-1)
        padding = torch.arange(n)[None, :] >= lengths[:, None]
        h = self.norm(self.encoder(h, src_key_padding_mask=padding))
        return {
            "answer": self.answer_head(h).squeeze(-1),
            "keep": self.keep_head(h).squeeze(-1),
            "background": self.background_head(h).squeeze(-1),
            "attrs": [
                *(self.attr_proj[k](h) @ self.word(self._names(k)[1:]).T for k in range(4)),
                self.stacked_head(h),
            ],
            "xy": self.xy_head(h),
        }
