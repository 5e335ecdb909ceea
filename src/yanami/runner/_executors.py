"""Chains on Ray: `ray_chains`, the `RayExecutor` of a run, whose actors (`_ChainActor`) run each
chain with a `ChainRunner` as the local threads do (`LocalExecutor` of `ChainRunner.run_chain`),
so they make the same rows; the caller writes them, in this process, as they arrive.

Chains go `GROUP` to a row of a Ray Data dataset; an actor holds the model's client, its response
cache and the judge, rebuilt from the run's `EvalSpec` as the driver built them. Their items stream
back as they finish, `BLOCK` to a block (one row), so a killed driver loses only the items in flight
or not yet sent back, and a killed worker only its chains' items in flight (Ray restarts the actor and
runs those again; the response cache answers what was already paid for). Every endpoint's limits
are the cluster's (`yanami.scale.share_endpoint_limits`). On a cluster the bench, the run
directory and the cache must be at the same path on every node (a shared filesystem,
docs/scale.md): only the driver writes rows.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import os
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from yanami.contract import Dialogue, Prediction, Results, RunManifest, UserError, Verdict
from yanami.models import ResponseCache
from yanami.runner._build import RunBench, bind_bench, build_judge, build_model
from yanami.runner._chains import Chain, ChainRunner, Row, chain_of
from yanami.runner._spec import EvalSpec
from yanami.scale import RayExecutor, share_endpoint_limits
from yanami.store import Dataset
from yanami.world import Parser

GROUP = 6
"""Chains to a Ray task (a dataset row). Each task costs the actor and the driver milliseconds of CPU
(its row, its batch, its blocks), more than a question's request: on bench_scale's questions, one
chain to a task went at 78 % of the ideal rate, three to a task at 85 %; six to a task went 1.3
points faster than three (six runs of each, alternately: 86.9 % against 85.6 %, five of the six
pairs in its favour). Twelve gained nothing more, and fewer tasks held per actor (`TASKS` 1) lost 7
points."""
TASKS = 2
"""Ray tasks an actor runs at once per chain it runs at once: it holds `GROUP` × this many chains per
one running, the rest waiting in its pool's queue, ready the moment a chain ends."""
BLOCK = 6
"""A task's items go back to the driver this many to a block, chain after chain in the task's order
(`_blocks`), packed in one row: Ray Data cuts a batch of several rows into blocks of one row, and each
block costs the actor and the driver about a millisecond of CPU. On bench_scale's questions (one to
a chain), packed four to a block the driver spent 1.0 ms of CPU per item, not 2.5, the actors 5.1
ms, not 6.3, and the run went at 89-90 % of the ideal rate against 82-84 % (alternately); six to a
block (a task's whole) 0.8 ms and 4.3 ms, at 90-92 %. Blocks are cut by count, never by time: a task
run again after its actor died must yield the same blocks in the same places, since Ray skips those
the driver already took (by place); blocks cut by time would lose or repeat items."""


def ray_chains(spec: EvalSpec, manifest: RunManifest, concurrency: int | None, address: str | None) -> _Grouped:
    """Chains in Ray actors (a local Ray, or the cluster at ``address``), ``concurrency`` in
    flight across the cluster (default: two per CPU), `GROUP` to a Ray task. The actor's Ray
    threads only hand rows over; its own pool runs the chains."""

    @contextlib.contextmanager
    def setup(ray: Any, actors: int, per_actor: int) -> Iterator[tuple[Any, ...]]:
        yield spec, manifest.model_dump_json(), actors, per_actor

    return _Grouped(RayExecutor(_ChainActor, setup, _chains_row, _result, concurrency=concurrency, address=address,
                                threads=TASKS, queued=0))  # fmt: skip


class _Grouped:
    """An executor of chains that runs them `GROUP` to a task of ``inner``."""

    def __init__(self, inner: RayExecutor[list[Chain], Row]) -> None:
        self.inner = inner

    def run(self, tasks: Iterator[Chain], on_results: Callable[[list[Row]], None]) -> None:
        self.inner.run(iter(lambda: list(itertools.islice(tasks, GROUP)), []), on_results)


def _chains_row(chains: list[Chain]) -> dict[str, Any]:
    return {"dialogue": [c.dialogue.model_dump_json() for c in chains],
            "todo": [[i.id for i in c.todo] for c in chains],
            "unjudged": [[p.item for p in c.unjudged] for c in chains]}  # fmt: skip


def _result(row: dict[str, Any]) -> list[Row]:
    """The rows of an actor's block (`_blocks`) as the driver writes them; a failure in the actor
    stops the run here."""
    rows: list[Row] = []
    for r in json.loads(row["rows"]):
        if r["failure"]:
            if r["user"]:
                raise UserError(str(r["failure"]))
            raise RuntimeError(str(r["failure"]))
        prediction = Prediction.model_validate_json(r["prediction"])
        verdict = Verdict.model_validate_json(r["verdict"]) if r["verdict"] else None
        rows.append((prediction, verdict, bool(r["judged"])))
    return rows


class _ChainActor:
    """A Ray actor's share of a run: the model, its cache, the judge; one chain per call."""

    def __init__(self, spec: EvalSpec, manifest: str, actors: int, chains: int) -> None:
        if Path(spec.cwd).is_dir():
            os.chdir(spec.cwd)
        share_endpoint_limits(actors)
        self.manifest = RunManifest.model_validate_json(manifest)
        dataset = Dataset(spec.bench)
        self.responses = ResponseCache(spec.cache_path, write_behind=True)  # the file is shared by processes
        parser = Parser(1)  # in the calling thread: each actor is one CPU's worth of chains
        judge = build_judge(spec, RunBench(dataset, lambda: iter(())), self.responses, parser)
        self.store = Results(Path(spec.out))  # reads earlier rows and images, stores new images; writes no row
        model = None
        if spec.model is not None:
            model = build_model(spec, self.responses, parser)
            bind_bench(model, dataset)
        self.runner = ChainRunner(dataset, model, judge, self.manifest, self.store)
        self.chains = ThreadPoolExecutor(chains, thread_name_prefix="yanami-chain")
        """The actor's chains in flight; Ray's tasks queue here, so a chain starts the moment another ends."""
        gc.freeze()  # what is made so far, out of the sweeps for the actor's life (as `frozen` in the driver)

    def __call__(self, batch: dict[str, Any]) -> Iterator[dict[str, list[str]]]:
        """The items of the batch's chains, `BLOCK` to a batch, chain after chain.

        The chains run at once in the actor's own pool (``chains`` at once), ahead of what is
        handed to Ray: giving Ray a block takes milliseconds (it goes to the object store and its
        owner is told), and the next request should not wait for that; Ray's next tasks wait in
        that pool's queue, so no chain waits for Ray to hand it over either."""
        stop = threading.Event()
        feeds: list[queue.Queue[dict[str, Any] | None]] = []
        for texts, todos, unjudgeds in zip(batch["dialogue"], batch["todo"], batch["unjudged"], strict=True):
            for text, todo, unjudged in zip(texts, todos, unjudgeds, strict=True):
                feeds.append(queue.Queue())
                chain = self._chain(str(text), list(todo), list(unjudged), feeds[-1])
                if chain is not None:
                    self.chains.submit(self._feed, chain, feeds[-1], stop)
        try:
            yield from _blocks(feeds)
        finally:
            stop.set()  # Ray dropped the task: its chains end after their items in flight

    def _chain(
        self, text: str, todo: list[str], unjudged: list[str], rows: queue.Queue[dict[str, Any] | None]
    ) -> Chain | None:
        """A task's chain, made ready here, in Ray's thread, while the pool's threads run earlier
        chains: its dialogue read, its stored rows looked up, the bench images its requests show
        read (`ChainRunner.read_ahead`), so that its first request goes the moment a thread takes
        it. None where that failed (the failure is the chain's row)."""
        try:
            d = Dialogue.model_validate_json(text)
            past = self.store.predictions_of(d.id)
            m, wanted = self.manifest, set(todo)
            items = [i for i in chain_of(d, m.history, m.answers, m.generates) if i.id in wanted]
            chain = Chain(d, items, past, [past[k] for k in unjudged])
            self.runner.read_ahead(chain)
            return chain
        except Exception as exc:
            rows.put(_failure(exc))
        rows.put(None)
        return None

    def _feed(self, chain: Chain, rows: queue.Queue[dict[str, Any] | None], stop: threading.Event) -> None:
        """Run one chain into ``rows``, then None (a failure is a row too: the driver stops the run)."""
        try:
            for prediction, verdict, judged in self.runner.run_chain(chain, stop):
                rows.put(_row(prediction, verdict, judged=judged))
        except Exception as exc:
            rows.put(_failure(exc))
        finally:
            rows.put(None)


def _blocks(feeds: list[queue.Queue[dict[str, Any] | None]]) -> Iterator[dict[str, list[str]]]:
    """The chains' rows (each chain's up to its None), chain after chain, `BLOCK` to a batch of one
    row (Ray Data would cut a batch of several rows into blocks of one)."""
    held: list[dict[str, Any]] = []
    for rows in feeds:
        while (row := rows.get()) is not None:
            held.append(row)
            if len(held) == BLOCK:
                yield {"rows": [json.dumps(held)]}
                held = []
    if held:
        yield {"rows": [json.dumps(held)]}


def _row(p: Prediction, v: Verdict | None, *, judged: bool) -> dict[str, Any]:
    return {"prediction": p.model_dump_json(), "verdict": v.model_dump_json() if v is not None else "",
            "judged": judged, "failure": "", "user": False}  # fmt: skip


def _failure(exc: Exception) -> dict[str, Any]:
    """A chain's failure as its row: ours (a `UserError`, such as a bench image that cannot be read)
    is told as it is; anything else with its type."""
    user = isinstance(exc, UserError)
    message = str(exc) if user else f"{type(exc).__name__}: {exc}"
    return {"prediction": "", "verdict": "", "judged": False, "failure": message, "user": user}
