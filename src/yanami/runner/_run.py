"""The benchmark runner: put a model through a bench, judge what it produced, store it per item.

``yanami eval`` is `evaluate`: a validated `EvalSpec`, a run opened from it (its directory, its
manifest, resumed where one is there), then its chains (`yanami.runner._chains`) run by an
executor, threads here or Ray actors (`yanami.runner._executors`). Results go to the store one
item at a time, so a killed run resumes where it stopped, and concurrency never changes a
score: every item's request, seed and verdict depend only on the item. ``yanami judge`` is
`rejudge`: the same chains with nothing to ask, only stored predictions to grade.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from yanami._lock import LOCK, DirLock
from yanami.contract import (
    RUN_MANIFEST,
    Configured,
    Dialogue,
    History,
    Judge,
    JudgeInfo,
    Layout,
    Layouts,
    Prediction,
    Results,
    RunManifest,
    UserError,
    Verdict,
    atomic_write,
    family_of,
    read_manifest,
)
from yanami.judges import judge_settings
from yanami.models import TRANSPORT, ResponseCache, parse_strategy
from yanami.runner._build import RunBench, bind_bench, build_judge, build_model
from yanami.runner._chains import Chain, ChainRunner, Row, chain_of, work_left
from yanami.runner._executors import ray_chains
from yanami.runner._spec import EvalSpec
from yanami.scale import Executor, LocalExecutor
from yanami.store import Dataset, Selection, bench_sha256, open_bench, select_dialogues
from yanami.world import Parser


@dataclass
class Summary:
    """What a call to `evaluate` did."""

    run: Path
    items: int
    skipped: int
    written: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    first_error: str | None = None
    """The first error this call recorded, for the user to see."""
    judge_errors: int = 0
    """Items the judge could not grade (their verdicts have status ``error``; a rerun grades them again)."""
    first_judge_error: str | None = None
    """The first of them, for the user to see."""


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    atomic_write(path, json.dumps(data, indent=2) + "\n")


def index_dialogues(dataset: Dataset, dialogues: Iterable[Dialogue]) -> dict[str, Dialogue]:
    """The bench's dialogues by id; a `UserError` naming the first id two dialogues share, and where."""
    by_id: dict[str, Dialogue] = {}
    for d in dialogues:
        if d.id in by_id:
            raise _duplicate(dataset, d.id)
        by_id[d.id] = d
    return by_id


def _duplicate(dataset: Dataset, dialogue_id: str) -> UserError:
    return UserError(
        f"{dataset.root}: the dialogue id {dialogue_id!r} is used more than once ({_places(dataset, dialogue_id)}); "
        "ids must be unique (run `yanami validate`)"
    )


def _places(dataset: Dataset, dialogue_id: str) -> str:
    """Where the dialogues with this id are, as ``shard:line`` (read again only on this error path)."""
    found: list[str] = []
    needle = json.dumps(dialogue_id)
    for shard in dataset.shard_paths():
        with open(shard, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                if needle in line:
                    try:
                        same = json.loads(line).get("id") == dialogue_id
                    except (ValueError, AttributeError):
                        same = False
                    if same:
                        found.append(f"{shard.relative_to(dataset.root)}:{lineno}")
    return " and ".join(found) if found else "twice in the bench"


def evaluate(
    bench: str | Path,
    model: str,
    out: str | Path,
    *,
    history: History | str | None = None,
    layout: Layout | str | None = None,
    judge: str = "exact",
    concurrency: int | None = None,
    limit: int | None = None,
    retry_errors: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    loaded: tuple[Dataset, list[Dialogue]] | None = None,
    cache: str | Path | None = None,
    workers: int = 1,
    strategy: str = "none",
    protocol_source: str | Path | None = None,
    parser: Parser | None = None,
    backend: str = "local",
    ray_address: str | None = None,
) -> Summary:
    """Evaluate ``model`` on ``bench`` into the run directory ``out`` (resuming what is there): the
    settings become an `EvalSpec` (see its fields), run by `run_eval`."""
    spec = EvalSpec(
        bench=str(bench),
        model=model,
        out=str(out),
        history=cast(History | None, history),  # validated (and made a History) by the spec
        layout=cast(Layout | None, layout),
        judge=judge,
        concurrency=concurrency,
        limit=limit,
        retry_errors=retry_errors,
        cache=str(cache) if cache is not None else None,
        workers=workers,
        strategy=strategy,
        protocol_source=str(protocol_source) if protocol_source is not None else None,
        backend=backend,
        ray_address=ray_address,
    )
    return run_eval(spec, on_progress=on_progress, loaded=loaded, parser=parser)


def run_eval(
    spec: EvalSpec,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    loaded: tuple[Dataset, list[Dialogue]] | None = None,
    parser: Parser | None = None,
) -> Summary:
    """Run ``spec``: every configuration problem (the model, its server, the strategy, the layout,
    the judge) is found from the bench's manifest alone, before a dialogue is read; then the run
    is opened (`_open_run`) and its chains run where ``spec.backend`` says.

    ``backend`` "ray" runs the chains in Ray actors (a local Ray, or the cluster at
    ``ray_address``): the same rows, ``concurrency`` chains in flight across the cluster
    (default two per CPU there). ``protocol_source``: for a WEAVE or IMUG-Bench bench, the
    user's checkout of the benchmark's repository, whose own judge prompts the judge then asks.
    ``layout`` defaults to the model config's, else yes-first; API responses are cached in
    ``cache`` (default ``out/cache.sqlite``), so a re-run or a re-judge never pays twice.
    ``workers`` processes parse images for the exact judge and the reference agents (``parser``:
    a parser the caller holds, as the demo shares one across its runs, in their place);
    ``concurrency`` (items in flight) defaults to `default_concurrency` of them. Neither ever
    changes a result. The run directory is locked for the whole call (`DirLock`); a run made
    with ``limit`` is extended by a larger one (or none), see `select_dialogues`.
    """
    from yanami import __version__  # the package's own version (importing it here avoids a cycle)

    assert spec.model is not None, "yanami eval asks a model"
    dataset = loaded[0] if loaded is not None else Dataset(spec.bench)
    # alone: only this process writes the file (on Ray, the actors write it)
    responses = ResponseCache(spec.cache_path, write_behind=True, alone=spec.backend == "local")
    # the parser starts its processes with the first parse, within the run below, and ends them there
    own_parser = Parser(spec.workers) if parser is None else None
    run = Path(spec.out)
    the_model = build_model(spec, responses, parser or own_parser, check=not (run / RUN_MANIFEST).exists())
    family = dataset.manifest.family
    facts = family_of(family)
    history = spec.history or History(facts.default_history)
    why = facts.gt_history
    if why and history == History.GT:
        raise UserError(f"{dataset.root}: {why}, so GT-History is not defined; use --history self (docs/benchmarks.md)")
    config = the_model.config if isinstance(the_model, Configured) else None
    layout = spec.layout
    if layout is None:
        layout = Layout(config.layout) if config is not None else Layout.YES_FIRST
    if isinstance(the_model, Layouts) and layout not in the_model.layouts:
        raise UserError(f"--layout {layout}: {the_model.name} takes {' or '.join(the_model.layouts)} only")
    answers, generates = the_model.answer is not None, the_model.generate is not None
    chosen: list[Selection] = []

    def selection() -> Selection:
        """The run's dialogues, read from the bench when first needed (the judge may ask first)."""
        if not chosen:
            chosen.append(
                Selection(
                    dataset,
                    spec.limit,
                    lambda d: len(chain_of(d, history, answers, generates)),
                    also=_previous_limit(run),
                    loaded=loaded[1] if loaded is not None else None,
                    on_duplicate=lambda i: _duplicate(dataset, i),
                )
            )
        return chosen[0]

    the_judge = build_judge(spec, RunBench(dataset, selection), responses, parser or own_parser)
    privileged = bind_bench(the_model, dataset)
    manifest = RunManifest(
        family=family,
        strategy=parse_strategy(spec.strategy).name,
        bench=str(dataset.root.resolve()),
        bench_sha256=bench_sha256(dataset),
        bench_split=dataset.manifest.split,
        model=spec.model,
        model_settings=config.model_dump(mode="json") if config is not None else None,
        seed=config.seed if config is not None else None,
        model_name=the_model.name,
        privileged=privileged,
        answers=answers,
        generates=generates,
        history=history,
        layout=layout,
        judge=JudgeInfo(name=the_judge.name, version=the_judge.version),
        judge_settings=judge_settings(the_judge),
        limit=spec.limit,
        items=selection().items,
        yanami_version=__version__,
    )
    try:
        manifest, lock = _open_run(run, manifest, selection())
    except BaseException:
        responses.close()
        raise
    try:
        responses.open_beside()  # (the run is open: its first requests find the cache ready)
        with Results(run) as store, own_parser or contextlib.nullcontext():
            executor: Executor[Chain, Row]
            if spec.backend == "ray":  # each dialogue's chain whole (split side by side, it ran at 62 %, not 83 %)
                executor = ray_chains(spec.resolved(dataset.root, responses.path), manifest, spec.concurrency,
                                      spec.ray_address)  # fmt: skip
                return _execute(executor, store, selection(), manifest, the_judge, spec.retry_errors, on_progress)
            runner = ChainRunner(dataset, the_model, the_judge, manifest, store)
            executor = LocalExecutor(runner.run_chain, spec.items_in_flight, ahead=spec.items_in_flight)
            return _execute(executor, store, selection(), manifest, the_judge, spec.retry_errors, on_progress,
                            runner.ready)  # fmt: skip
    finally:
        responses.close()
        lock.release()


def _execute(
    executor: Executor[Chain, Row],
    store: Results,
    selection: Selection,
    manifest: RunManifest,
    judge: Judge,
    retry_errors: bool,
    on_progress: Callable[[int, int], None] | None,
    ready: Callable[[Chain], Iterable[Chain]] = lambda c: (c,),
) -> Summary:
    """Run the selection's chains with ``executor``, writing each batch of finished rows in one
    transaction as it arrives; each chain is handed over as ``ready`` makes it ready."""
    summary = _begin(store, selection, manifest, retry_errors, on_progress)
    done = summary.skipped
    reader = Results(store.run)  # the chains' own connection: they are read while this thread writes
    local = isinstance(executor, LocalExecutor)

    def chains() -> Iterator[Chain]:
        for d in selection.release():  # (each dialogue freed with its chain)
            chain = work_left(d, chain_of(d, manifest.history, manifest.answers, manifest.generates),
                              reader if local else store, judge, retry_errors)  # fmt: skip
            if chain is not None:
                yield from ready(chain)

    def on_rows(rows: list[Row]) -> None:
        nonlocal done
        if not rows:
            return  # (a batch of threads ending only: nothing to write, no progress to tell)
        store.write_items([(p, v) for p, v, _ in rows])
        asked = [(p, v) for p, v, judged in rows if not judged]
        for p, v in asked:
            _count(summary, p, v)
        done += len(asked)
        if on_progress and (local or asked):  # (threads: after every batch; Ray: after every item asked)
            on_progress(done, summary.items)

    try:
        executor.run(chains(), on_rows)
    finally:
        reader.close()
    return summary


def _previous_limit(run: Path) -> int | None:
    """The limit of the run being resumed at ``run`` (None: no run there, or one without a limit)."""
    if not (run / RUN_MANIFEST).is_file():
        return None
    try:
        return read_manifest(run).limit
    except UserError:
        return None  # _open_run says what is wrong with it


def _open_run(run: Path, manifest: RunManifest, selection: Selection) -> tuple[RunManifest, DirLock]:
    """Create the run directory, or resume the run there, holding its lock; returns the
    manifest in force (a resumed run's, updated when its bench moved or its limit grew)."""
    path = run / RUN_MANIFEST
    if run.exists() and not run.is_dir():
        raise UserError(f"{run}: exists and is not a directory")
    if not path.exists() and run.exists() and any(p.name != LOCK for p in run.iterdir()):
        raise UserError(f"{run}: exists, is not empty and holds no yanami run; choose another --out")
    run.mkdir(parents=True, exist_ok=True)
    lock = DirLock(run)
    try:
        if path.exists():  # (read under the lock: another process may have just made the run)
            manifest = _resume(run, manifest, selection)
        else:
            _write_json_atomic(path, manifest.model_dump(mode="json"))
    except BaseException:
        lock.release()
        raise
    return manifest, lock


_MAY_CHANGE = ("bench", "limit", "items")
"""Manifest fields a resumed run may change: the bench may have moved; a limit may grow (and
the judge's version may be newer: what an older version graded is graded again)."""


def _differences(key: str, theirs: Any, mine: Any) -> list[str]:
    """What differs in a manifest field, by name (inside a settings mapping, only the keys that
    differ, and not the transport settings a resumed run may change: `TRANSPORT`)."""
    if isinstance(theirs, dict) and isinstance(mine, dict):
        skip = TRANSPORT if key in ("model_settings", "judge_settings") else ()
        return [
            d
            for k in sorted(set(theirs) | set(mine))
            if k not in skip and theirs.get(k) != mine.get(k)
            for d in _differences(f"{key}.{k}", theirs.get(k), mine.get(k))
        ]
    return [f"{key}={theirs!r}, not {mine!r}"]


def _resume(run: Path, manifest: RunManifest, selection: Selection) -> RunManifest:
    """The manifest of the run being resumed with ``manifest``'s settings, or a `UserError`."""
    path = run / RUN_MANIFEST
    try:
        old = read_manifest(run)
    except UserError as exc:
        raise UserError(f"{exc}; choose another --out") from None
    mine, theirs = manifest.model_dump(), old.model_dump()
    same_limit = manifest.limit == old.limit
    newer_judge = manifest.judge.name == old.judge.name
    changed = [
        k
        for k in mine
        if mine[k] != theirs[k]
        and (k not in _MAY_CHANGE or (k == "items" and same_limit))
        and not (k == "judge" and newer_judge)
        and not (k == "privileged" and theirs[k] is None)  # a run of format 3 did not record it
    ]
    differences = [d for k in changed for d in _differences(k, theirs[k], mine[k])]
    if differences:
        raise UserError(
            f"{path}: this run was made with {'; '.join(differences)}; resume it with the same settings or choose "
            "another --out"
        )
    if not same_limit and manifest.limit is not None:  # (no limit: every dialogue, so all of the run's)
        if old.limit is None:
            smaller = manifest.limit < len(selection.dataset)
            before_ids, after_ids = [], []
        else:
            # what was read covers both limits (`Selection`'s ``also``)
            before_ids = [d.id for d in select_dialogues(selection.pool, old.limit)]
            after_ids = [d.id for d in select_dialogues(selection.pool, manifest.limit)]
            smaller = len(after_ids) < len(before_ids)
        if smaller:
            raise UserError(
                f"{path}: this run was made with limit={old.limit!r}; --limit {manifest.limit} would drop some of "
                f"its dialogues: resume it with --limit {old.limit} or more (or none), or choose another --out"
            )
        if after_ids[: len(before_ids)] != before_ids:
            raise UserError(
                f"{path}: the dialogues of limit={old.limit!r} are not the first of --limit {manifest.limit}; "
                "resume it with the same settings or choose another --out"
            )
    if manifest != old:
        _write_json_atomic(path, manifest.model_dump(mode="json"))
    return manifest


def _begin(
    store: Results,
    selection: Selection,
    manifest: RunManifest,
    retry_errors: bool,
    on_progress: Callable[[int, int], None] | None,
) -> Summary:
    """A call's summary before it runs anything: the run's items and those already done (told to
    ``on_progress``)."""
    if selection.chosen is None:
        skipped = store.count_done(errors=not retry_errors)
    else:
        skipped = sum(store.count_done(p.id, errors=not retry_errors) for p in selection.chosen if p.items)
    if on_progress:
        on_progress(skipped, manifest.items)
    return Summary(store.run, manifest.items, skipped)


def _count(summary: Summary, prediction: Prediction, verdict: Verdict | None) -> None:
    """Add an item just run to what the summary says."""
    if verdict is not None and verdict.status == "error":
        summary.judge_errors += 1
        summary.first_judge_error = summary.first_judge_error or f"{verdict.item}: {verdict.reason}"
    summary.written += 1
    summary.statuses[prediction.status] = summary.statuses.get(prediction.status, 0) + 1
    if prediction.status == "error" and summary.first_error is None:
        summary.first_error = f"{prediction.item}: {prediction.error}"


EXTRA_JUDGES = "judges.json"


def rejudge(
    run: str | Path,
    judge: str,
    *,
    bench: str | Path | None = None,
    concurrency: int = 1,
    cache: str | Path | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    protocol_source: str | Path | None = None,
    backend: str = "local",
    ray_address: str | None = None,
) -> Summary:
    """Judge a run's stored predictions again with another judge, without calling the model.

    Verdicts are stored under the judge's name next to the run's own (``yanami score
    --judge NAME`` reads them); items this version of the judge already graded are
    skipped, and those an older version graded are graded again. Each prediction to grade is a
    chain with nothing to ask, run by the executor `evaluate` uses: threads here, ``concurrency``
    items at once, or (``backend`` "ray") Ray actors.
    """
    spec = EvalSpec(
        bench=str(bench) if bench is not None else "",
        model=None,
        out=str(run),
        judge=judge,
        concurrency=concurrency,
        cache=str(cache) if cache is not None else None,
        protocol_source=str(protocol_source) if protocol_source is not None else None,
        backend=backend,
        ray_address=ray_address,
    )
    run = Path(run)
    manifest = read_manifest(run)
    dataset = open_bench(run, manifest, bench, hint="" if bench else "give --bench where it is now")
    responses = ResponseCache(spec.cache_path, write_behind=True, alone=backend == "local")
    with contextlib.ExitStack() as held:  # closed in reverse: the store, the lock, the cache
        held.callback(responses.close)
        held.enter_context(DirLock(run))
        store = held.enter_context(Results(run))
        # the judge sees the run's dialogues (the exact judge checks it can grade those, not the bench)
        the_judge = build_judge(spec, RunBench(dataset, lambda: _run_dialogues(dataset, store)), responses, None)
        _record_judge(run, the_judge)
        done, todo = store.judging_left(the_judge.name, the_judge.version)
        summary = Summary(run, todo + done, done)
        executor: Executor[Chain, Row]
        if backend == "ray":
            executor = ray_chains(spec.resolved(dataset.root, responses.path), manifest, concurrency, ray_address)
        else:  # a chain per prediction to grade: ``concurrency`` items judged at once
            executor = LocalExecutor(ChainRunner(dataset, None, the_judge, manifest, store).run_chain, concurrency)
        reader = held.enter_context(Results(run))  # the chains' own connection: read while this thread writes

        def on_rows(rows: list[Row]) -> None:
            for _, verdict, _ in rows:
                if verdict is not None:
                    store.write_verdict(verdict)
                    summary.statuses[verdict.status] = summary.statuses.get(verdict.status, 0) + 1
                summary.written += 1
            if on_progress:
                on_progress(done + summary.written, summary.items)

        executor.run(_grading(dataset, reader, the_judge, todo), on_rows)
        return summary


def _grading(dataset: Dataset, store: Results, judge: Judge, todo: int) -> Iterator[Chain]:
    """`rejudge`'s chains: one per stored ok prediction this version of ``judge`` has not graded,
    with nothing to ask. The bench is read a dialogue at a time, its stored rows with it, and
    reading stops once ``todo`` predictions are handed out; a second dialogue with the id of one
    that has predictions to grade is refused."""
    worked: set[str] = set()
    for d in _run_dialogues(dataset, store) if todo > 0 else iter(()):
        if d.id in worked:
            raise _duplicate(dataset, d.id)
        graded = {k for k, v in store.verdicts_of(d.id, judge.name).items()
                  if v.status == "ok" and v.judge_version == judge.version}  # fmt: skip
        past = store.predictions_of(d.id)
        for p in past.values():
            if p.status == "ok" and p.item not in graded:
                worked.add(d.id)
                todo -= 1
                yield Chain(d, [], past, [p])
        if todo <= 0:
            return


def _run_dialogues(dataset: Dataset, store: Results) -> Iterator[Dialogue]:
    """The bench's dialogues that a run has predictions of, read one at a time, until all are."""
    left = store.count_dialogues()
    dialogues = iter(dataset) if left else iter(())
    for d in dialogues:
        if store.count_done(d.id):
            yield d
            left -= 1
            if not left:
                return


def _record_judge(run: Path, judge: Judge) -> None:
    path = run / EXTRA_JUDGES
    known = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    known[judge.name] = {"version": judge.version, "settings": judge_settings(judge)}
    _write_json_atomic(path, known)
