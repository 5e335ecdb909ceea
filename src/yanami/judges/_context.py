"""What a judge is made from: one factory signature for every judge, ``factory(spec, context)``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from yanami.contract import Judge

if TYPE_CHECKING:
    from yanami.models import ResponseCache
    from yanami.store import Dataset
    from yanami.world import Parser


@dataclass(frozen=True)
class JudgeContext:
    """What a judge may use besides its spec: the bench it grades, the run's response cache, the
    benchmark's own prompts and the run's image parser. Every field may be absent."""

    dataset: Dataset | None = None
    """The bench; iterating it gives the run's dialogues (the exact judge checks it can grade those)."""
    responses: ResponseCache | None = None
    """The run's response cache: a VLM judge's calls are paid for once."""
    protocol_source: str | Path | None = None
    """A checkout of a family benchmark's repository, whose own judge prompts its judge asks."""
    parser: Parser | None = None
    """The run's image parser (its ``--workers`` processes); None: parse in this process."""


JudgeFactory = Callable[[str, JudgeContext], Judge]
"""How every judge is made: the spec (the part of ``--judge kind:rest`` after the colon for a
plug-in of the entry point group ``yanami.judges``, the whole spec for a family's judge hook or a
config file) and the `JudgeContext`. A plug-in factory that takes the spec alone still works."""
