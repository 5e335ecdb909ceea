"""``yanami eval --backend ray``: the chains run in Ray actors, the rows written here, item by item.

Each dialogue's chain is one row of a Ray Data dataset; ``map_batches`` hands it to a callable
class (`_ChainRunner`) that holds the model's client, its response cache and the judge, as a
local run's threads do, and runs the chain with the same `_Runner`: the same requests, the
same fault policy, the same verdicts. Its items stream back as they finish and the driver
writes each to the run's store, so a killed driver loses only the items in flight, and a
killed worker only its chains' items in flight (Ray restarts the actor and runs those again;
the response cache answers what was already paid for). Every endpoint's limits are the
cluster's (`yanami.scale.share_endpoint_limits`).

On a cluster the bench, the run directory and the cache must be at the same path on every
node (a shared filesystem, docs/scale.md): the workers read bench images and the model's own
earlier outputs there and write its new images there; only the driver writes rows.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yanami.contract import Dialogue, Prediction, Results, RunManifest, UserError, Verdict
from yanami.runner._items import Item


@dataclass(frozen=True)
class EvalParts:
    """What a worker needs to rebuild a run's model and judge (all picklable)."""

    bench: str
    run: str
    cache: str
    model: str | None
    """None: grade stored predictions only (``yanami judge``)."""
    judge: str
    strategy: str
    protocol_source: str | None
    manifest: str
    """The run's manifest as JSON."""
    cwd: str
    """The driver's working directory: relative paths in the specs (a config file) mean the same there."""


QUEUED = 3
"""Ray tasks given to an actor per chain it runs at once: the rest wait in its queue, ready."""


class _ChainRunner:
    """A Ray actor's share of a run: the model, its cache, the judge; one chain per call."""

    def __init__(self, parts: EvalParts, actors: int, chains: int) -> None:
        from yanami.judges import judge_for_bench
        from yanami.models import ResponseCache, StrategyModel, load_model, parse_strategy, reads_bench
        from yanami.runner._run import _RunBench, _Runner
        from yanami.scale import share_endpoint_limits
        from yanami.store import Dataset
        from yanami.world import Parser

        if Path(parts.cwd).is_dir():
            os.chdir(parts.cwd)
        share_endpoint_limits(actors)
        self.parts = parts
        self.manifest = RunManifest.model_validate_json(parts.manifest)
        dataset = Dataset(parts.bench)
        self.responses = ResponseCache(Path(parts.cache), write_behind=True)  # the file is shared by processes
        self.parser = Parser(1)  # in the calling thread: each actor is one CPU's worth of chains
        self.judge = judge_for_bench(
            parts.judge, _RunBench(dataset, lambda: iter(())), self.responses, parts.protocol_source, self.parser
        )
        self.store = Results(Path(parts.run))  # reads earlier rows and images, stores new images; writes no row
        self.earlier: dict[str, Prediction] = {}
        self.runner: _Runner | None = None
        if parts.model is not None:
            model = load_model(parts.model, self.responses, self.parser)
            spec = parse_strategy(parts.strategy)
            if spec.kind != "none":
                picker = load_model(spec.picker, self.responses) if spec.picker else None
                model = StrategyModel(model, spec, picker)
            if reads_bench(model):
                model.bind_bench(dataset.root)  # type: ignore[attr-defined]
            self.runner = _Runner(dataset, model, self.judge, self.manifest, self.store, self.earlier)
        self.lock = threading.Lock()
        self.chains = ThreadPoolExecutor(chains, thread_name_prefix="yanami-chain")
        """The actor's chains in flight; Ray's tasks queue here, so a chain starts the moment another ends."""

    def __call__(self, batch: dict[str, Any]) -> Iterator[dict[str, list[Any]]]:
        """The items of the batch's chains, each as it finishes.

        A chain runs in the actor's own pool (``chains`` at once), ahead of what is handed to
        Ray: giving Ray a row takes milliseconds (the block goes to the object store and its
        owner is told), and the next request should not wait for that; Ray's next tasks wait
        in that pool's queue, so no chain waits for Ray to hand it over either."""
        for text, todo, unjudged in zip(batch["dialogue"], batch["todo"], batch["unjudged"], strict=True):
            rows: queue.Queue[dict[str, list[Any]] | None] = queue.Queue()
            stop = threading.Event()

            self.chains.submit(self._feed, text, list(todo), list(unjudged), rows, stop)
            try:
                while (row := rows.get()) is not None:
                    yield row
            finally:
                stop.set()  # Ray dropped the task: the chain ends after its item in flight

    def _feed(
        self,
        text: str,
        todo: list[str],
        unjudged: list[str],
        rows: queue.Queue[dict[str, list[Any]] | None],
        stop: threading.Event,
    ) -> None:
        """Run one chain into ``rows``, then None (a failure is a row too: the driver stops the run)."""
        try:
            for row in self._chain(Dialogue.model_validate_json(text), todo, unjudged, stop):
                rows.put(row)
        except UserError as exc:  # ours (a bench image that cannot be read)
            rows.put(_failure(str(exc), user=True))
        except Exception as exc:
            rows.put(_failure(f"{type(exc).__name__}: {exc}", user=False))
        finally:
            rows.put(None)

    def _chain(
        self, d: Dialogue, todo: list[str], unjudged: list[str], stop: threading.Event
    ) -> Iterator[dict[str, list[Any]]]:
        from yanami.runner._run import _judge, _stored_history, _stored_outputs, chain_of

        with self.lock:
            past = self.store.predictions_of(d.id)
            self.earlier.update(past)
        try:
            selfh = self.manifest.history == "self"
            for item_id in unjudged:
                p = past[item_id]
                history = _stored_history(d, p, past) if selfh else None
                outputs = _stored_outputs(d, past, self.store)
                yield _row(p, _judge(self.judge, d, p, self.store, own=history, earlier=outputs), judged=True)
            if not todo:
                return
            assert self.runner is not None, "items to ask need the model"
            wanted = set(todo)
            m = self.manifest
            items: list[Item] = [i for i in chain_of(d, m.history, m.answers, m.generates) if i.id in wanted]
            chat = self.runner.chat(d)
            for item in items:
                if stop.is_set():
                    return
                prediction, verdict = self.runner.run_item(item, chat)
                yield _row(prediction, verdict, judged=False)
        finally:
            with self.lock:
                for k in past:
                    self.earlier.pop(k, None)


def _row(p: Prediction, v: Verdict | None, *, judged: bool) -> dict[str, list[Any]]:
    return {
        "prediction": [p.model_dump_json()],
        "verdict": [v.model_dump_json() if v is not None else ""],
        "judged": [judged],
        "failure": [""],
        "user": [False],
    }


def _failure(message: str, *, user: bool) -> dict[str, list[Any]]:
    return {"prediction": [""], "verdict": [""], "judged": [False], "failure": [message], "user": [user]}


def run_on_ray(
    rows: list[dict[str, Any]],
    parts: EvalParts,
    concurrency: int | None,
    address: str | None,
    on_row: Callable[[Prediction, Verdict | None, bool], None],
) -> None:
    """Run ``rows`` on Ray (one per dialogue: its JSON, the item ids to ask, the stored ones to
    judge), ``concurrency`` chains in flight across the cluster (default: two per CPU), calling
    ``on_row`` in this process for every item as it finishes."""
    from yanami.scale import actor_rows, cluster_cpus, ray_concurrency, ray_session

    if not rows:
        return
    with ray_session(address) as ray:
        cpus = cluster_cpus(ray)
        actors, per_actor = ray_concurrency(cpus, concurrency or 2 * cpus)
        # the actor's Ray threads only hand rows over; its own pool of per_actor runs the chains
        threads = QUEUED * per_actor
        for row in actor_rows(ray, rows, _ChainRunner, (parts, actors, per_actor), actors, threads, 0):
            if row["failure"]:
                if row["user"]:
                    raise UserError(str(row["failure"]))
                raise RuntimeError(str(row["failure"]))
            prediction = Prediction.model_validate_json(row["prediction"])
            verdict = Verdict.model_validate_json(row["verdict"]) if row["verdict"] else None
            on_row(prediction, verdict, bool(row["judged"]))
