"""How a model is trained and how large an experiment is: plain data, no PyTorch."""

from __future__ import annotations

from dataclasses import dataclass

CONTROLS = ("stateful", "single-turn")
"""What the model's requests hold: the whole conversation, or the single-turn cut."""


@dataclass(frozen=True)
class TrainSettings:
    """How a model is trained (all of it recorded in the checkpoint)."""

    steps: int = 600
    batch: int = 16
    learning_rate: float = 1e-3
    warmup: int = 50
    seed: int = 0
    control: str = "stateful"
    log_every: int = 50
    save_every: int = 100
    width: int = 128
    layers: int = 3


@dataclass(frozen=True)
class Setting:
    """An experiment's size."""

    per_scenario: int = 10
    """The bench's dialogues per scenario (when no --bench is given)."""
    train_dialogues: int = 300
    steps: int = 500
    batch: int = 16
    seed: int = 0
    workers: int = 1
