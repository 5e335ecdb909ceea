"""Where chains run: threads of this process (`LocalExecutor`) or Ray actors across a cluster
(`RayExecutor`). Both run each chain with a `ChainRunner`, so they make the same rows; the
caller writes them, in this process, as they arrive (`Executor.run`'s ``on_rows``).

On Ray each chain is one row of a Ray Data dataset; ``map_batches`` hands it to an actor
(`_ChainActor`) that holds the model's client, its response cache and the judge, rebuilt from
the run's `EvalSpec` as the driver built them. Its items stream back as they finish, so a
killed driver loses only the items in flight, and a killed worker only its chains' items in
flight (Ray restarts the actor and runs those again; the response cache answers what was
already paid for). Every endpoint's limits are the cluster's (`yanami.scale.share_endpoint_limits`).
On a cluster the bench, the run directory and the cache must be at the same path on every
node (a shared filesystem, docs/scale.md): only the driver writes rows.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar

from yanami.contract import Dialogue, Prediction, Results, RunManifest, UserError, Verdict
from yanami.models import ResponseCache
from yanami.runner._build import RunBench, bind_bench, build_judge, build_model
from yanami.runner._chains import Chain, ChainRunner, Row, chain_of
from yanami.runner._spec import EvalSpec
from yanami.scale import actor_rows, cluster_cpus, ray_concurrency, ray_session, share_endpoint_limits
from yanami.store import Dataset
from yanami.world import Parser

OnRows = Callable[[list[Row]], None]
"""Takes rows as they arrive, in the calling thread (writes them, counts them, tells progress)."""


class Executor(Protocol):
    def run(self, chains: Iterator[Chain], on_rows: OnRows) -> None:
        """Run every chain ``chains`` yields (read as they are taken), calling ``on_rows`` with the
        rows that finished; a failure stops the run, after what was finished is handed over."""
        ...


_Report = list[Row] | BaseException | None
"""What a worker thread reports: the rows of a chain so far, its failure, or (None) that it stopped."""


class LocalExecutor:
    """Chains in threads of this process, ``concurrency`` at once: the dialogues are read as the
    threads take them, and only those in flight (with their stored rows) are held."""

    def __init__(self, runner: ChainRunner, concurrency: int) -> None:
        self.runner, self.concurrency = runner, concurrency

    def run(self, chains: Iterator[Chain], on_rows: OnRows) -> None:
        results: queue.Queue[Row | BaseException | None] = queue.Queue()
        taking, stop = threading.Lock(), threading.Event()

        def work() -> None:
            try:
                while not stop.is_set():
                    with taking:  # one thread reads the bench at a time
                        chain = next(chains, None)
                    if chain is None:
                        break
                    for row in self.runner.run_chain(chain, stop):
                        results.put(row)
            except BaseException as exc:  # a bug, or a bench that cannot be read: stop the run, keep what is written
                results.put(exc)
            finally:
                results.put(None)

        threads = [threading.Thread(target=work, name=f"yanami-eval-{k}", daemon=True) for k in range(self.concurrency)]
        try:
            for t in threads:
                t.start()
            running = len(threads)
            while running:
                batch = _ready(results)  # what finished meanwhile, handed over at once
                on_rows([got for got in batch if isinstance(got, tuple)])
                for got in batch:
                    if got is None:
                        running -= 1
                    elif isinstance(got, BaseException):
                        raise got
        finally:
            stop.set()
            for t in threads:
                t.join()  # a chain in progress finishes its item; what it reports now is not written


_T = TypeVar("_T")


def _ready(results: queue.Queue[_T]) -> list[_T]:
    """The next finished result (waiting for it) and every other one already waiting."""
    batch = [results.get()]
    with contextlib.suppress(queue.Empty):
        while len(batch) < 256:
            batch.append(results.get_nowait())
    return batch


QUEUED = 3
"""Ray tasks given to an actor per chain it runs at once: the rest wait in its queue, ready."""


class RayExecutor:
    """Chains in Ray actors (a local Ray, or the cluster at ``address``), ``concurrency`` in flight
    across the cluster (default: two per CPU)."""

    def __init__(self, spec: EvalSpec, manifest: RunManifest, concurrency: int | None, address: str | None) -> None:
        self.spec, self.manifest, self.concurrency, self.address = spec, manifest, concurrency, address

    def run(self, chains: Iterator[Chain], on_rows: OnRows) -> None:
        rows = [
            {
                "dialogue": c.dialogue.model_dump_json(),
                "todo": [i.id for i in c.todo],
                "unjudged": [p.item for p in c.unjudged],
            }
            for c in chains
        ]
        if not rows:
            return
        with ray_session(self.address) as ray:
            cpus = cluster_cpus(ray)
            actors, per_actor = ray_concurrency(cpus, self.concurrency or 2 * cpus)
            # the actor's Ray threads only hand rows over; its own pool of per_actor runs the chains
            args = (self.spec, self.manifest.model_dump_json(), actors, per_actor)
            for row in actor_rows(ray, rows, _ChainActor, args, actors, QUEUED * per_actor, 0):
                if row["failure"]:
                    if row["user"]:
                        raise UserError(str(row["failure"]))
                    raise RuntimeError(str(row["failure"]))
                prediction = Prediction.model_validate_json(row["prediction"])
                verdict = Verdict.model_validate_json(row["verdict"]) if row["verdict"] else None
                on_rows([(prediction, verdict, bool(row["judged"]))])


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
        self, text: str, todo: list[str], unjudged: list[str], rows: queue.Queue[dict[str, list[Any]] | None],
        stop: threading.Event,
    ) -> None:  # fmt: skip
        """Run one chain into ``rows``, then None (a failure is a row too: the driver stops the run)."""
        try:
            d = Dialogue.model_validate_json(text)
            past = self.store.predictions_of(d.id)
            m, wanted = self.manifest, set(todo)
            items = [i for i in chain_of(d, m.history, m.answers, m.generates) if i.id in wanted]
            chain = Chain(d, items, past, [past[k] for k in unjudged])
            for prediction, verdict, judged in self.runner.run_chain(chain, stop):
                rows.put(_row(prediction, verdict, judged=judged))
        except UserError as exc:  # ours (a bench image that cannot be read)
            rows.put(_failure(str(exc), user=True))
        except Exception as exc:
            rows.put(_failure(f"{type(exc).__name__}: {exc}", user=False))
        finally:
            rows.put(None)


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
