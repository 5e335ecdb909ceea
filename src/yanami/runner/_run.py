"""The benchmark runner: put a model through a bench, judge what it produced, store it per item.

``yanami eval`` is `evaluate`. Each dialogue is one chain (its target turns in order, then
its questions): under Self-History a turn needs the model's own earlier images, and under
GT-History a request for a later turn shows the ground truth of the earlier ones, so a model
that remembers across requests must not see a turn's answer before it gave its own. Results
go to the store one item at a time, so a killed run resumes where it stopped, and
concurrency never changes a score: every item's request, seed and verdict depend only on the
item.
"""

from __future__ import annotations

import collections
import contextlib
import json
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import BrokenExecutor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from yanami._lock import LOCK, DirLock
from yanami.contract import (
    HISTORIES,
    LAYOUTS,
    RUN_MANIFEST,
    Dialogue,
    History,
    ImagePart,
    InputImage,
    JudgeInfo,
    Layout,
    Model,
    Output,
    OwnHistory,
    Prediction,
    Refused,
    Results,
    RunManifest,
    Status,
    TextPart,
    UserError,
    Verdict,
    atomic_write,
    family_of,
    read_manifest,
)
from yanami.judges import Judge, JudgeError, judge_for_bench, judge_settings
from yanami.models import (
    TRANSPORT,
    ResponseCache,
    StrategyModel,
    Transient,
    load_model,
    parse_strategy,
    reads_bench,
    redact,
    validate_image,
    validate_text,
)
from yanami.runner._bench import bench_sha256, open_bench
from yanami.runner._items import Conversation, Item, generation_turns, items_of
from yanami.runner._ray import EvalParts, run_on_ray
from yanami.runner._select import Selection, select_dialogues
from yanami.store import Dataset, open_image_bytes
from yanami.world import Parser

Earlier = Callable[[int], tuple[bytes | None, str | None]]
"""turn -> the model's own (image bytes, text) at that turn of a dialogue in this run."""


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


def bench_items(dialogues: list[Dialogue], history: History, answers: bool, generates: bool) -> list[list[Item]]:
    """The items of a run, one chain per dialogue: its target turns in order, then its questions.

    A chain's items are asked one after another, so no request shows the ground truth of a turn
    (GT-History) before the model answered that turn: a model that remembers across requests
    cannot copy an answer it was shown. Under Self-History a turn needs the model's own earlier
    images; a WEAVE or IMUG-Bench dialogue's grading refers to the model's own earlier outputs.
    """
    chains = [chain_of(d, history, answers, generates) for d in dialogues]
    return [c for c in chains if c]


def chain_of(d: Dialogue, history: History, answers: bool, generates: bool) -> list[Item]:
    """One dialogue's chain of items (see `bench_items`); empty where the run skips it."""
    if history == "self" and len(generation_turns(d)) < family_of(d.family).self_history_min_turns:
        return []  # YANAMI's Self-History is reported on dialogues with more than one generation turn
    return items_of(d, turns=generates, questions=answers)


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    atomic_write(path, json.dumps(data, indent=2) + "\n")


def default_concurrency(workers: int) -> int:
    """Items in flight when ``--concurrency`` is not given: 1, or twice the parse workers (so
    that every worker has an image to parse while the runner's threads wait on it)."""
    return 2 * workers if workers > 1 else 1


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
    history: History | str = History.GT,
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
    """Evaluate ``model`` on ``bench`` into the run directory ``out`` (resuming what is there).

    ``backend`` "ray" runs the chains in Ray actors (a local Ray, or the cluster at
    ``ray_address``; `yanami.runner._ray`): the same rows, ``concurrency`` chains in flight across
    the cluster (default two per CPU there).

    ``protocol_source``: for a WEAVE or IMUG-Bench bench, the user's checkout of the
    benchmark's repository, whose own judge prompts the judge then asks (`load_protocol_source`).

    ``layout`` defaults to the model config's, else yes-first; API responses are cached in
    ``cache`` (default ``out/cache.sqlite``), so a re-run or a re-judge never pays twice.
    ``workers`` processes parse images for the exact judge and the reference agents (``parser``:
    a parser the caller holds, as the demo shares one across its runs, in their place); ``concurrency`` (items in
    flight) defaults to `default_concurrency` of them. Neither ever changes a result. The run
    directory is locked for the whole call (`DirLock`); a run made with ``limit`` is extended
    by a larger one (or none), see `select_dialogues`.
    """
    from yanami import __version__

    if history not in HISTORIES or (layout is not None and layout not in LAYOUTS):
        bad = f"--history {history}" if history not in HISTORIES else f"--layout {layout}"
        raise UserError(f"{bad}: not one of {', '.join(HISTORIES if history not in HISTORIES else LAYOUTS)}")
    history = History(history)
    layout = Layout(layout) if layout is not None else None
    if backend != "local" or ray_address is not None:
        from yanami.scale import check_backend

        check_backend(backend, ray_address)
    asked = concurrency
    if concurrency is None:
        concurrency = default_concurrency(workers)
    if concurrency < 1:
        raise UserError(f"--concurrency {concurrency}: must be at least 1")
    # The bench's manifest alone first: every configuration problem (the model, its server, the
    # strategy, the layout, the judge) is found before a dialogue is read.
    dataset = loaded[0] if loaded is not None else Dataset(bench)
    responses = ResponseCache(Path(cache) if cache else Path(out) / "cache.sqlite")
    # the parser starts its processes with the first parse, within the run below, and ends them there
    own_parser = Parser(workers) if parser is None else None
    the_model: Model = load_model(model, responses, parser or own_parser)
    check = getattr(the_model, "check", None)
    if callable(check) and not (Path(out) / RUN_MANIFEST).exists():
        check()  # before a run directory is made, an adapter that can reach its server cheaply says so
    spec = parse_strategy(strategy)
    if spec.kind != "none" and model.startswith("reference:"):
        raise UserError(f"--strategy {spec.name}: the reference agents answer the bench's own questions only, so "
                        "they cannot plan, check or pick their images; use a model config file")  # fmt: skip
    if spec.kind != "none":
        picker = load_model(spec.picker, responses) if spec.picker else None
        the_model = StrategyModel(the_model, spec, picker)
    family = dataset.manifest.family
    why = family_of(family).gt_history
    if why and history == History.GT:
        raise UserError(f"{dataset.root}: {why}, so GT-History is not defined; use --history self (docs/benchmarks.md)")
    config = getattr(the_model, "config", None)
    if layout is None:
        layout = Layout(config.layout) if config is not None else Layout.YES_FIRST
    if layout not in getattr(the_model, "layouts", (layout,)):
        raise UserError(f"--layout {layout}: {the_model.name} takes {' or '.join(the_model.layouts)} only")  # type: ignore[attr-defined]
    answers, generates = the_model.answer is not None, the_model.generate is not None
    run = Path(out)
    chosen: list[Selection] = []

    def selection() -> Selection:
        """The run's dialogues, read from the bench when first needed (the judge may ask first)."""
        if not chosen:
            chosen.append(
                Selection(
                    dataset,
                    limit,
                    lambda d: len(chain_of(d, history, answers, generates)),
                    also=_previous_limit(run),
                    loaded=loaded[1] if loaded is not None else None,
                    on_duplicate=lambda i: _duplicate(dataset, i),
                )
            )
        return chosen[0]

    the_judge = judge_for_bench(judge, _RunBench(dataset, selection), responses, protocol_source, parser or own_parser)
    privileged = reads_bench(the_model)
    if privileged:
        the_model.bind_bench(dataset.root)  # type: ignore[attr-defined]
    manifest = RunManifest(
        family=family,
        strategy=spec.name,
        bench=str(dataset.root.resolve()),
        bench_sha256=bench_sha256(dataset),
        bench_split=dataset.manifest.split,
        model=model,
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
        limit=limit,
        items=selection().items,
        yanami_version=__version__,
    )
    try:
        manifest, lock = _open_run(run, manifest, selection())
    except BaseException:
        responses.close()
        raise
    try:
        with Results(run) as store, own_parser or contextlib.nullcontext():
            if backend == "ray":
                parts = EvalParts(
                    bench=str(dataset.root.resolve()),
                    run=str(run.resolve()),
                    cache=str(responses.path.resolve()),
                    model=model,
                    judge=judge,
                    strategy=strategy,
                    protocol_source=str(protocol_source) if protocol_source is not None else None,
                    manifest=manifest.model_dump_json(),
                    cwd=str(Path.cwd()),
                )
                return _execute_ray(
                    store,
                    selection(),
                    lambda d: chain_of(d, history, answers, generates),
                    the_judge,
                    manifest,
                    asked,
                    retry_errors,
                    on_progress,
                    parts,
                    ray_address,
                )
            return _execute(
                store,
                selection(),
                lambda d: chain_of(d, history, answers, generates),
                the_model,
                the_judge,
                manifest,
                concurrency,
                retry_errors,
                on_progress,
            )
    finally:
        responses.close()
        lock.release()


class _RunBench(Dataset):
    """The bench as a run's judge sees it: iterating it gives the run's dialogues (so the exact
    judge's check that it can grade them reads those, not the whole bench)."""

    def __init__(self, dataset: Dataset, selection: Callable[[], Iterable[Dialogue]]) -> None:
        self.__dict__.update(dataset.__dict__)
        self._selection = selection

    def __iter__(self) -> Iterator[Dialogue]:
        return iter(self._selection())


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


@dataclass
class _Chain:
    """One dialogue's items still to run, and its rows from an earlier call."""

    dialogue: Dialogue
    todo: list[Item]
    past: dict[str, Prediction]
    """The dialogue's stored predictions (the model's own earlier outputs, under Self-History)."""
    unjudged: list[Prediction]
    """Stored ok predictions this judge has not graded: judged now, without asking the model again."""


@dataclass(frozen=True)
class _Judged:
    """An earlier prediction, graded now."""

    prediction: Prediction
    verdict: Verdict | None


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


def _work_left(d: Dialogue, items: list[Item], store: Results, judge: Judge, retry_errors: bool) -> _Chain | None:
    """What is left of a dialogue's chain (None: nothing): its items not yet asked, and its
    stored ok predictions that this version of the judge has not graded."""
    if not items:
        return None
    past = store.predictions_of(d.id)
    finished = {k for k, p in past.items() if not (retry_errors and p.status == "error")}
    judged = {
        k
        for k, v in store.verdicts_of(d.id, judge.name).items()
        if v.status == "ok" and v.judge_version == judge.version
    }
    unjudged = [p for k, p in past.items() if k in finished and p.status == "ok" and k not in judged]
    todo = [i for i in items if i.id not in finished]
    return _Chain(d, todo, past, unjudged) if todo or unjudged else None


_Result = tuple[Prediction, Verdict | None] | _Judged | BaseException | None
"""What a worker reports: an item run, an earlier one judged, its failure, or (None) that it stopped."""


def _execute(
    store: Results,
    selection: Selection,
    chain_of: Callable[[Dialogue], list[Item]],
    model: Model,
    judge: Judge,
    manifest: RunManifest,
    concurrency: int,
    retry_errors: bool,
    on_progress: Callable[[int, int], None] | None,
) -> Summary:
    """Run the selection's chains, ``concurrency`` items in flight: the dialogues are read as the
    workers take them, and only those in flight (with their stored rows) are held."""
    summary = _begin(store, selection, manifest, retry_errors, on_progress)
    total, skipped = summary.items, summary.skipped
    reader = Results(store.run)  # the workers' own connection: they read past rows while this thread writes
    selfh = manifest.history == "self"

    def chains() -> Iterator[_Chain]:
        for d in selection:
            chain = _work_left(d, chain_of(d), reader, judge, retry_errors)
            if chain is not None:
                yield chain

    results: queue.Queue[_Result] = queue.Queue()
    earlier: dict[str, Prediction] = {}  # the stored rows of the dialogues in flight
    runner = _Runner(selection.dataset, model, judge, manifest, store, earlier)
    source, taking, stop = chains(), threading.Lock(), threading.Event()

    def work() -> None:
        try:
            while not stop.is_set():
                with taking:  # one worker reads the bench at a time
                    chain = next(source, None)
                if chain is None:
                    break
                d = chain.dialogue
                earlier.update(chain.past)
                try:
                    for p in chain.unjudged:
                        history = _stored_history(d, p, chain.past) if selfh else None
                        outputs = _stored_outputs(d, chain.past, store)
                        results.put(_Judged(p, _judge(judge, d, p, store, own=history, earlier=outputs)))
                    chat = runner.chat(d)
                    for item in chain.todo:
                        if stop.is_set():
                            break  # the rest of the chain is asked when the run resumes
                        results.put(runner.run_item(item, chat))
                finally:
                    for k in chain.past:
                        earlier.pop(k, None)
        except BaseException as exc:  # a bug, or a bench that cannot be read: stop the run, keep what is written
            results.put(exc)
        finally:
            results.put(None)

    done = skipped
    threads = [threading.Thread(target=work, name=f"yanami-eval-{k}", daemon=True) for k in range(concurrency)]
    try:
        for t in threads:
            t.start()
        running = len(threads)
        while running:
            batch = _ready(results)  # what finished meanwhile, recorded in one transaction
            store.write_items([row for got in batch if (row := _row(got)) is not None])
            for got in batch:
                if got is None:
                    running -= 1
                    continue
                if isinstance(got, BaseException):
                    raise got
                if isinstance(got, _Judged):
                    continue
                _count(summary, *got)
                done += 1
            if on_progress:
                on_progress(done, total)
    finally:
        stop.set()
        for t in threads:
            t.join()  # a chain in progress finishes its item; what it reports now is not written
        reader.close()
    return summary


def _count(summary: Summary, prediction: Prediction, verdict: Verdict | None) -> None:
    """Add an item just run to what the summary says."""
    if verdict is not None and verdict.status == "error":
        summary.judge_errors += 1
        summary.first_judge_error = summary.first_judge_error or f"{verdict.item}: {verdict.reason}"
    summary.written += 1
    summary.statuses[prediction.status] = summary.statuses.get(prediction.status, 0) + 1
    if prediction.status == "error" and summary.first_error is None:
        summary.first_error = f"{prediction.item}: {prediction.error}"


def _execute_ray(
    store: Results,
    selection: Selection,
    chain_of: Callable[[Dialogue], list[Item]],
    judge: Judge,
    manifest: RunManifest,
    concurrency: int | None,
    retry_errors: bool,
    on_progress: Callable[[int, int], None] | None,
    parts: EvalParts,
    address: str | None,
) -> Summary:
    """`_execute` on Ray (`yanami.runner._ray`): the same rows, written here as they arrive."""
    summary = _begin(store, selection, manifest, retry_errors, on_progress)
    total, skipped = summary.items, summary.skipped
    rows = []  # one per dialogue with work left (`_ChainRunner` reads its stored rows there)
    for d in selection:
        chain = _work_left(d, chain_of(d), store, judge, retry_errors)
        if chain is not None:
            todo, unjudged = [i.id for i in chain.todo], [p.item for p in chain.unjudged]
            rows.append({"dialogue": d.model_dump_json(), "todo": todo, "unjudged": unjudged})
    done = skipped

    def on_row(prediction: Prediction, verdict: Verdict | None, judged: bool) -> None:
        nonlocal done
        store.write_items([(prediction, verdict)])
        if judged:
            return
        _count(summary, prediction, verdict)
        done += 1
        if on_progress:
            on_progress(done, total)

    run_on_ray(rows, parts, concurrency, address, on_row)
    return summary


def _row(got: _Result) -> tuple[Prediction, Verdict | None] | None:
    """The rows a worker's report writes (None: it writes none)."""
    if got is None or isinstance(got, BaseException):
        return None
    return (got.prediction, got.verdict) if isinstance(got, _Judged) else got


_T = TypeVar("_T")


def _ready(results: queue.Queue[_T]) -> list[_T]:
    """The next finished result (waiting for it) and every other one already waiting."""
    batch = [results.get()]
    with contextlib.suppress(queue.Empty):
        while len(batch) < 256:
            batch.append(results.get_nowait())
    return batch


_IMAGES_KEPT = 512
"""Bench images kept in memory (with their encoded form), the least recently shown dropped first."""


class _Runner:
    """Runs one item: request, model call, output check, judge."""

    def __init__(
        self,
        dataset: Dataset,
        model: Model,
        judge: Judge,
        manifest: RunManifest,
        store: Results,
        earlier: dict[str, Prediction],
    ) -> None:
        self.dataset, self.model, self.judge = dataset, model, judge
        self.manifest, self.store, self.earlier = manifest, store, earlier
        self._images: dict[str, InputImage] = {}
        self._lock = threading.Lock()

    def bench_image(self, part: ImagePart) -> InputImage:
        """A bench image as a model receives it, read (and verified) once for every request that shows it."""
        with self._lock:  # one reader per image: the questions of a dialogue start together
            image = self._images.pop(part.sha256, None)
            if image is None:
                data = self.dataset.image_bytes(part)  # checked: hash and pixel limit (one line if not)
                image = InputImage(data, part.sha256, part.width, part.height)
                if len(self._images) >= _IMAGES_KEPT:
                    del self._images[next(iter(self._images))]  # the least recently shown
            self._images[part.sha256] = image
        return image

    def chat(self, d: Dialogue) -> _Chat:
        """The state of one dialogue's chain, for `run_item`."""
        return _Chat(self, d)

    def run_item(self, item: Item, chat: _Chat) -> tuple[Prediction, Verdict | None]:
        """Run one item of the chain whose state is ``chat`` (`chat`): the model's own earlier
        outputs there (Self-History, and the references of WEAVE's and IMUG-Bench's grading), and
        its history, resolved once for every request of the chain."""
        d = chat.d
        request, fallbacks = chat.conversation.request(item)
        text = image = error = None
        data: bytes | None = None
        status: Status = "ok"
        try:
            if item.kind == "turn":
                assert self.model.generate is not None
                data = self.model.generate(request)
                if not data:
                    status = "missing"
                else:
                    validate_image(data)  # the adapters' rule, for every model kind
            else:
                assert self.model.answer is not None
                text = self.model.answer(request)
                if not text or not text.strip():
                    status = "missing"
                else:
                    validate_text(text.encode())  # one refusal rule for every path: raises Refused
        except Refused as exc:
            status, error, text = "refused", str(exc) or "refused", None
        except (UserError, BrokenExecutor):  # ours, not the model's: stop the run, keep what is written
            raise
        except Transient as exc:
            status, error = "error", f"gave up after retries: {exc}"
        except Exception as exc:  # the model failed on this item: recorded, never scored
            status, error = "error", f"{type(exc).__name__}: {exc}"
        if error is not None:
            error = redact(error)  # a server may quote a key back; it never reaches a result
        if status == "ok" and data:
            image = self.store.put_image(data)
        if item.kind == "turn":
            chat.own[item.turn] = image
        elif item.kind == "reply":
            chat.texts[item.turn] = text if status == "ok" else None
        q = chat.conversation.question(item) if item.kind == "question" else None
        prediction = Prediction(
            item=item.id,
            dialogue=d.id,
            scenario=d.group,
            kind=item.kind,
            turn=item.turn,
            qtype=q.type.value if q else None,
            status=status,
            text=text,
            image=image,
            error=error,
            seed=request.seed,
            history_fallbacks=fallbacks,
            calls=self.model.calls(item.id) if isinstance(self.model, StrategyModel) else 1,
        )
        history = None
        if chat.selfh and item.kind == "turn":
            history = _own_history(d, item.turn, chat.own_image, chat.targets)

        def earlier(t: int) -> tuple[bytes | None, str | None]:
            sha = chat.own_image(t)
            return (self.store.image(sha) if sha else None), chat.own_text(t)

        verdict = _judge(
            self.judge, d, prediction, self.store, image_data=data if image else None, own=history, earlier=earlier
        )
        return prediction, verdict

    def _earlier_image(self, d: Dialogue, turn: int) -> str | None:
        p = self.earlier.get(f"{d.id}/t{turn}")
        return p.image if p is not None and p.status == "ok" else None

    def _earlier_text(self, d: Dialogue, turn: int) -> str | None:
        p = self.earlier.get(f"{d.id}/t{turn}")
        return p.text if p is not None and p.status == "ok" else None


class _Chat:
    """One dialogue's chain as it runs: the model's own outputs so far (``own``: target turn -> its
    image; ``texts``: text turn -> its reply), and its `Conversation`."""

    def __init__(self, runner: _Runner, d: Dialogue) -> None:
        self.runner, self.d = runner, d
        self.own: dict[int, str | None] = {}
        self.texts: dict[int, str | None] = {}
        self.targets = generation_turns(d)
        self._targets = set(self.targets)
        self.selfh = runner.manifest.history == "self"
        self.fallbacks = 0
        own_reply = self.own_reply if self.selfh else None
        self.conversation = Conversation(
            d, runner.manifest.layout, self.image_bytes, own_reply, lambda: self.fallbacks, runner.manifest.seed
        )

    def own_image(self, t: int) -> str | None:
        return self.own.get(t) if t in self.own else self.runner._earlier_image(self.d, t)

    def own_text(self, t: int) -> str | None:
        return self.texts.get(t) if t in self.texts else self.runner._earlier_text(self.d, t)

    def own_reply(self, t: int) -> list[TextPart | InputImage] | None:
        """What the model said at turn ``t`` where the image rule below does not reach."""
        turn = self.d.turns[t]
        if turn.answer is not None:
            said = self.own_text(t)
            if said is None:
                self.fallbacks += 1  # the dataset's answer (or nothing) stands in
            return None if said is None else [TextPart(text=said)]
        if turn.checks and not turn.assistant.images():  # an image turn with no reference image
            sha = self.own_image(t)
            if sha is None:
                self.fallbacks += 1
                return None
            return [_input_image(self.runner.store.image(sha), sha)]
        return None

    def image_bytes(self, turn: int, side: str, j: int, part: ImagePart) -> bytes | InputImage:
        if self.selfh and side == "assistant" and turn in self._targets:
            sha = self.own_image(turn)
            if sha is not None:
                return self.runner.store.image(sha)
            self.fallbacks += 1  # the model gave no image there: the history keeps the ground truth
        return self.runner.bench_image(part)


def _input_image(data: bytes, sha: str) -> InputImage:
    img = open_image_bytes(data)  # the header only: the model's own image, checked when it was made
    return InputImage(data, sha, img.width, img.height)


def _stored_outputs(d: Dialogue, predictions: dict[str, Prediction], store: Results) -> Earlier:
    """The model's own outputs at a dialogue's turns, from a run's stored predictions."""

    def earlier(t: int) -> tuple[bytes | None, str | None]:
        p = predictions.get(f"{d.id}/t{t}")
        if p is None or p.status != "ok":
            return None, None
        return (store.image(p.image) if p.image else None), p.text

    return earlier


def _own_history(
    d: Dialogue, turn: int, image_of: Callable[[int], str | None], targets: list[int] | None = None
) -> dict[int, str]:
    """The model's own images (sha256) of a dialogue's target turns before ``turn``, by turn
    (``targets``: its `generation_turns`, where the caller knows them)."""
    out: dict[int, str] = {}
    for t in generation_turns(d) if targets is None else targets:
        if t >= turn:
            break
        sha = image_of(t)
        if sha is not None:
            out[t] = sha
    return out


def _stored_history(d: Dialogue, p: Prediction, predictions: dict[str, Prediction]) -> dict[int, str]:
    """`_own_history` of a stored Self-History prediction, from the run's other predictions."""

    def image_of(t: int) -> str | None:
        earlier = predictions.get(f"{d.id}/t{t}")
        return earlier.image if earlier is not None and earlier.status == "ok" else None

    return _own_history(d, p.turn, image_of) if p.kind == "turn" else {}


def _judge(
    judge: Judge,
    d: Dialogue,
    p: Prediction,
    store: Results,
    image_data: bytes | None = None,
    own: dict[int, str] | None = None,
    earlier: Earlier | None = None,
) -> Verdict | None:
    """The verdict on an ok prediction (None otherwise: nothing to grade), by the judge's one
    method, `Judge.grade`.

    ``own`` (Self-History) names the model's own images of the earlier target turns, and
    ``earlier`` gives its own outputs at the dialogue's earlier turns; the judge takes what its
    protocol needs of them (`OwnHistory`).

    A judge that fails (an unreachable server, output that stays invalid after its repair
    retry) gives a verdict with status ``error``: the item is then not scored, and the next
    run judges it again.
    """
    if p.status != "ok":
        return None
    image = image_data if image_data is not None or p.image is None else store.image(p.image)
    output = Output(item=p.item, kind=p.kind, turn=p.turn, text=p.text, image=image)
    history = OwnHistory(
        images=None if own is None else _StoredImages(own, store),
        earlier=earlier or (lambda t: (None, None)),
    )
    try:
        return judge.grade(d, output, history)
    except JudgeError as exc:
        return Verdict(item=p.item, judge=judge.name, judge_version=judge.version, status="error", reason=str(exc))


class _StoredImages(Mapping[int, bytes]):
    """The model's own images of earlier turns (turn -> SHA-256), read from the run's store when asked."""

    def __init__(self, shas: dict[int, str], store: Results) -> None:
        self.shas, self.store = shas, store

    def __getitem__(self, turn: int) -> bytes:
        return self.store.image(self.shas[turn])

    def __iter__(self) -> Iterator[int]:
        return iter(self.shas)

    def __len__(self) -> int:
        return len(self.shas)


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
    skipped, and those an older version graded are graded again. ``backend`` "ray" grades
    them in Ray actors (as `evaluate` runs chains there), ``concurrency`` dialogues at once.
    """
    if backend != "local" or ray_address is not None:
        from yanami.scale import check_backend

        check_backend(backend, ray_address)
    run = Path(run)
    manifest = read_manifest(run)
    dataset = open_bench(run, manifest, bench, hint="" if bench else "give --bench where it is now")
    responses = ResponseCache(Path(cache) if cache else run / "cache.sqlite")
    with contextlib.ExitStack() as held:  # closed in reverse: the store, the lock, the cache
        held.callback(responses.close)
        held.enter_context(DirLock(run))
        store = held.enter_context(Results(run))
        # the judge sees the run's dialogues (the exact judge checks it can grade those, not the bench)
        the_judge = judge_for_bench(judge, _RunBench(dataset, lambda: _run_dialogues(dataset, store)), responses,
                                    protocol_source)  # fmt: skip
        _record_judge(run, the_judge)
        done, todo = store.judging_left(the_judge.name, the_judge.version)
        summary = Summary(run, todo + done, done)
        if backend == "ray":
            _rejudge_on_ray(run, dataset, store, the_judge, manifest, responses, judge, protocol_source, concurrency,
                            ray_address, summary, on_progress)  # fmt: skip
            return summary
        selfh = manifest.history == "self"
        worked: set[str] = set()  # the dialogues judged here: a second dialogue with one of their ids is refused
        in_flight: collections.deque[Future[Verdict | None]] = collections.deque()

        def record(f: Future[Verdict | None]) -> None:
            v = f.result()
            if v is not None:
                store.write_verdict(v)
                summary.statuses[v.status] = summary.statuses.get(v.status, 0) + 1
            summary.written += 1
            if on_progress:
                on_progress(done + summary.written, summary.items)

        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            # the bench read a dialogue at a time, its stored rows with it; only the items in
            # flight (and their dialogues) are held, and reading stops once every item is judged
            dialogues = iter(dataset)
            while summary.written + len(in_flight) < todo:
                d = next(dialogues, None)
                if d is None:
                    break
                if d.id in worked:
                    raise _duplicate(dataset, d.id)
                graded = {
                    k
                    for k, v in store.verdicts_of(d.id, the_judge.name).items()
                    if v.status == "ok" and v.judge_version == the_judge.version
                }
                past = store.predictions_of(d.id)
                for p in past.values():
                    if p.status != "ok" or p.item in graded:
                        continue
                    worked.add(d.id)
                    own = _stored_history(d, p, past) if selfh else None
                    earlier = _stored_outputs(d, past, store)
                    in_flight.append(pool.submit(_judge, the_judge, d, p, store, own=own, earlier=earlier))
                    while len(in_flight) > 2 * concurrency:
                        record(in_flight.popleft())
            while in_flight:
                record(in_flight.popleft())
        return summary


def _rejudge_on_ray(
    run: Path,
    dataset: Dataset,
    store: Results,
    judge: Judge,
    manifest: RunManifest,
    responses: ResponseCache,
    spec: str,
    protocol_source: str | Path | None,
    concurrency: int,
    address: str | None,
    summary: Summary,
    on_progress: Callable[[int, int], None] | None,
) -> None:
    """`rejudge`'s grading in Ray actors: one row per dialogue with predictions left to grade."""
    rows = []
    for d in _run_dialogues(dataset, store):
        graded = {k for k, v in store.verdicts_of(d.id, judge.name).items()
                  if v.status == "ok" and v.judge_version == judge.version}  # fmt: skip
        left = [p.item for p in store.predictions_of(d.id).values() if p.status == "ok" and p.item not in graded]
        if left:
            rows.append({"dialogue": d.model_dump_json(), "todo": [], "unjudged": left})
    parts = EvalParts(
        bench=str(dataset.root.resolve()),
        run=str(run.resolve()),
        cache=str(responses.path.resolve()),
        model=None,
        judge=spec,
        strategy="none",
        protocol_source=str(protocol_source) if protocol_source is not None else None,
        manifest=manifest.model_dump_json(),
        cwd=str(Path.cwd()),
    )

    def on_row(prediction: Prediction, verdict: Verdict | None, judged: bool) -> None:
        if verdict is not None:
            store.write_verdict(verdict)
            summary.statuses[verdict.status] = summary.statuses.get(verdict.status, 0) + 1
        summary.written += 1
        if on_progress:
            on_progress(summary.skipped + summary.written, summary.items)

    run_on_ray(rows, parts, concurrency, address, on_row)


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
