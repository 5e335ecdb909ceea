"""The contract in one place: what a plug-in (a model, a judge, a family), a reader of runs and
every module of yanami import. It is `yanami.core` (the ground floor, which imports nothing of
yanami outside itself), re-exported here.

``from yanami.contract import ...`` loads what the names need, never numpy, Pillow or the
world: the protocol (`Request`, `Model`, `Judge`) the standard library alone, the data model
and the run format pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yanami import core
from yanami.core import __all__ as __all__

if TYPE_CHECKING:
    from yanami.core import *  # noqa: F403


def __getattr__(name: str) -> Any:
    return getattr(core, name)


def __dir__() -> list[str]:
    return __all__
