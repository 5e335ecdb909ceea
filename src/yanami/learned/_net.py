"""The learned model's network (PyTorch): one transformer encoder over a request's tokens, with
heads for the option a question's answer names and for the picture to draw.

The picture is predicted as an edit of what the request shows: each object token says whether
the new picture keeps that object, and with which shape, colour, size, material, support and
position (a shift from where it stood); each new-object slot says whether it holds an object,
and which; each picture marker, whether the new picture takes that picture's background.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from yanami.learned._features import (
    COLOUR_NAMES,
    MATERIAL_NAMES,
    MAX_LEN,
    MAX_OPTIONS,
    MAX_PICTURES,
    MAX_TURNS,
    NEW_SLOTS,
    SHAPE_NAMES,
    SIZE_NAMES,
)

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

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


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
        self.picture = nn.Embedding(MAX_PICTURES + 1, d)
        self.option = nn.Embedding(MAX_OPTIONS + 1, d)
        self.position = nn.Embedding(MAX_LEN, d)
        self.attrs = nn.ModuleList(nn.Embedding(n + 1, d) for n in ATTRIBUTES)
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
        self.attr_heads = nn.ModuleList(nn.Linear(d, n) for n in ATTRIBUTES)
        self.xy_head = nn.Linear(d, 2)

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
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
            + self.picture(batch["picture"])
            + self.option(batch["option"])
            + self.position(from_end)
            + self.xy(batch["xy"])
        )
        for k, emb in enumerate(self.attrs):
            h = h + emb(batch["attrs"][:, :, k])
        h = h + self.slot(batch["slot"]) * (kind == 4).unsqueeze(-1)
        padding = torch.arange(n)[None, :] >= lengths[:, None]
        h = self.norm(self.encoder(h, src_key_padding_mask=padding))
        return {
            "answer": self.answer_head(h).squeeze(-1),
            "keep": self.keep_head(h).squeeze(-1),
            "background": self.background_head(h).squeeze(-1),
            "attrs": [head(h) for head in self.attr_heads],  # type: ignore[dict-item]
            "xy": self.xy_head(h),
        }
