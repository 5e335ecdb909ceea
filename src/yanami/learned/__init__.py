"""The first learned model: a small transformer trained on world dialogues (``yanami train``),
evaluated like any other model (``--model checkpoint:PATH``). Needs the ``train`` extra (PyTorch).

It reads a request as any model does: the words, and each picture as the objects the world's
parser reads from its pixels (a frozen perception module, `yanami.learned._features`); it
answers a question with a letter and draws its picture with the world's renderer. The
control (``--control single-turn``) is the same model trained and asked on the latest picture
and the current message alone. docs/learned.md says what it shows and what it does not.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from yanami.contract import UserError
from yanami.learned._settings import CONTROLS, Setting, TrainSettings

if TYPE_CHECKING:
    from yanami.learned._agent import CheckpointModel
    from yanami.world import Parser

TRAIN_EXTRA = "pip install -e '.[train]'"


def require_torch() -> None:
    """A one-line error when PyTorch or safetensors is missing."""
    try:
        import safetensors  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        raise UserError(f"the learned model needs the train extra ({exc.name} is missing): {TRAIN_EXTRA}") from None


def checkpoint_model(rest: str, parser: Parser | None = None) -> CheckpointModel:
    """The ``checkpoint`` model kind: ``--model checkpoint:PATH`` (a directory `yanami train` wrote)."""
    require_torch()
    from yanami.learned._agent import CheckpointModel

    path = Path(rest).expanduser()
    if not rest or not path.is_dir():
        raise UserError(f"--model checkpoint:{rest}: no such checkpoint directory")
    return CheckpointModel(path, parser) if parser is not None else CheckpointModel(path)


def train(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """`yanami.learned._train.train` (PyTorch is imported on the first call)."""
    require_torch()
    from yanami.learned._train import train as run

    return run(*args, **kwargs)


def run_experiment(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """`yanami.learned._experiment.run_experiment` (PyTorch is imported on the first call)."""
    require_torch()
    from yanami.learned._experiment import run_experiment as run

    return run(*args, **kwargs)


def experiment_table(figures: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The experiment's table (header, rows of cells) from its figures."""
    from yanami.learned._experiment import table_rows

    return table_rows(figures)


__all__ = [
    "CONTROLS",
    "TRAIN_EXTRA",
    "Setting",
    "TrainSettings",
    "checkpoint_model",
    "experiment_table",
    "require_torch",
    "run_experiment",
    "train",
]
