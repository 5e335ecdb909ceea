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
from typing import Any

from yanami.errors import UserError

TRAIN_EXTRA = "pip install -e '.[train]'"


def require_torch() -> None:
    """A one-line error when PyTorch or safetensors is missing."""
    try:
        import safetensors  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        raise UserError(f"the learned model needs the train extra ({exc.name} is missing): {TRAIN_EXTRA}") from None


def checkpoint_model(rest: str, parser: Any = None) -> Any:
    """The ``checkpoint`` model kind: ``--model checkpoint:PATH`` (a directory `yanami train` wrote)."""
    require_torch()
    from yanami.learned._agent import CheckpointModel

    path = Path(rest).expanduser()
    if not rest or not path.is_dir():
        raise UserError(f"--model checkpoint:{rest}: no such checkpoint directory")
    return CheckpointModel(path, parser) if parser is not None else CheckpointModel(path)
