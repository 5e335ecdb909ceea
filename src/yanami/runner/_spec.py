"""What a run is asked to do, validated once and frozen: `EvalSpec`. It is plain data (it
pickles), so a Ray actor rebuilds the run's model and judge from it as the driver did."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from yanami.contract import HISTORIES, LAYOUTS, History, Layout, UserError


def default_concurrency(workers: int) -> int:
    """Items in flight when ``--concurrency`` is not given: 1, or twice the parse workers (so
    that every worker has an image to parse while the runner's threads wait on it)."""
    return 2 * workers if workers > 1 else 1


@dataclass(frozen=True)
class EvalSpec:
    """The settings of ``yanami eval`` (and, with ``model`` None, of ``yanami judge``)."""

    bench: str
    model: str | None
    """The ``--model`` spec; None: grade a run's stored predictions only (``yanami judge``)."""
    out: str
    """The run directory."""
    history: History | None = None
    """None: the bench family's default (`FamilyFacts.default_history`)."""
    layout: Layout | None = None
    """None: the model config's, else yes-first."""
    judge: str = "exact"
    concurrency: int | None = None
    """Chains' items in flight (None: `default_concurrency`; on Ray, two per CPU of the cluster)."""
    limit: int | None = None
    retry_errors: bool = False
    cache: str | None = None
    """The response cache (None: ``out/cache.sqlite``)."""
    workers: int = 1
    """Parser processes for the exact judge and the reference agents."""
    strategy: str = "none"
    protocol_source: str | None = None
    backend: str = "local"
    ray_address: str | None = None
    cwd: str = field(default_factory=os.getcwd)
    """The caller's working directory: relative paths in the specs (a config file) mean the same on a worker."""

    def __post_init__(self) -> None:
        history, layout = self.history, self.layout
        wrong = history is not None and history not in HISTORIES
        if wrong or (layout is not None and layout not in LAYOUTS):
            bad = f"--history {history}" if wrong else f"--layout {layout}"
            raise UserError(f"{bad}: not one of {', '.join(HISTORIES if wrong else LAYOUTS)}")
        object.__setattr__(self, "history", History(history) if history is not None else None)
        object.__setattr__(self, "layout", Layout(layout) if layout is not None else None)
        if self.backend != "local" or self.ray_address is not None:
            from yanami.scale import check_backend  # Ray's own checks: the ray extra, loaded when asked for

            check_backend(self.backend, self.ray_address)
        if self.concurrency is not None and self.concurrency < 1:
            raise UserError(f"--concurrency {self.concurrency}: must be at least 1")

    @property
    def items_in_flight(self) -> int:
        """``concurrency``, or its default."""
        return self.concurrency if self.concurrency is not None else default_concurrency(self.workers)

    @property
    def cache_path(self) -> Path:
        return Path(self.cache) if self.cache else Path(self.out) / "cache.sqlite"

    def resolved(self, bench: Path, cache: Path) -> EvalSpec:
        """The same spec with absolute paths, for workers that may run elsewhere (a Ray cluster)."""
        return replace(self, bench=str(bench.resolve()), out=str(Path(self.out).resolve()), cache=str(cache.resolve()))
