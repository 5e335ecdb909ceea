"""Where a run's model and judge are made, for the driver and for every Ray actor alike."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from yanami.contract import Dialogue, Judge, Model, Reachable, UserError
from yanami.judges import JudgeContext, make_judge
from yanami.models import ResponseCache, StrategyModel, load_model, parse_strategy, reads_bench
from yanami.runner._spec import EvalSpec
from yanami.store import Dataset, Selection
from yanami.world import Parser


class RunBench(Dataset):
    """The bench as a run's judge sees it: iterating it gives the run's dialogues, `fields` their
    fields (so the exact judge's check that it can grade them reads those, not the whole bench)."""

    def __init__(self, dataset: Dataset, selection: Callable[[], Iterable[Dialogue]]) -> None:
        self.__dict__.update(dataset.__dict__)
        self._selection = selection

    def __iter__(self) -> Iterator[Dialogue]:
        return iter(self._selection())

    def fields(self) -> Iterator[Any]:
        chosen = self._selection()
        return chosen.fields() if isinstance(chosen, Selection) else iter(chosen)


def build_model(spec: EvalSpec, responses: ResponseCache, parser: Parser | None, *, check: bool = False) -> Model:
    """The model ``spec.model`` names, under its test-time strategy. ``check``: an adapter that can
    reach its server cheaply says first whether it does (before a run directory is made)."""
    assert spec.model is not None, "a run that asks nothing has no model"
    model = load_model(spec.model, responses, parser)
    if check and isinstance(model, Reachable):
        model.check()
    strategy = parse_strategy(spec.strategy)
    if strategy.kind == "none":
        return model
    if spec.model.startswith("reference:"):
        raise UserError(f"--strategy {strategy.name}: the reference agents answer the bench's own questions only, so "
                        "they cannot plan, check or pick their images; use a model config file")  # fmt: skip
    picker = load_model(strategy.picker, responses) if strategy.picker else None
    return StrategyModel(model, strategy, picker)


def bind_bench(model: Model, dataset: Dataset) -> bool:
    """Hand the bench to a model that reads it (`ReadsBench`: the reference agents); whether it does
    (the run is then privileged: not a model result)."""
    if reads_bench(model):
        model.bind_bench(dataset.root)
        return True
    return False


def build_judge(spec: EvalSpec, bench: Dataset, responses: ResponseCache | None, parser: Parser | None) -> Judge:
    """The run's judge: what the bench's family makes of ``--judge`` (`yanami.judges.make_judge`)."""
    return make_judge(spec.judge, JudgeContext(bench, responses, spec.protocol_source, parser))
