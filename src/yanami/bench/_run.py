"""The benchmark runner: put a model through a bench, judge what it produced, store it per item.

``yanami eval`` is `evaluate`. Items are independent under GT-History; under Self-History
each dialogue is one chain (its target turns in order, then its questions), since a turn
needs the model's own earlier images. Results go to the store one item at a time, so a
killed run resumes where it stopped, and concurrency never changes a score: every item's
request, seed and verdict depend only on the item.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from yanami.bench._items import (
    GLOBAL_SEED,
    History,
    Item,
    Layout,
    build_request,
    generation_turns,
    item_seed,
    items_of,
    question_of,
)
from yanami.bench._results import Prediction, Results, Status, Verdict
from yanami.errors import UserError
from yanami.judges import ExactJudge, Judge, JudgeError
from yanami.models import Model, Refused, ResponseCache, Transient, load_config, load_model
from yanami.schema import Dialogue, ImagePart
from yanami.store import MANIFEST, Dataset, open_image_bytes
from yanami.world import parse_workers

RUN_FORMAT = "yanami-run"
RUN_MANIFEST = "manifest.json"


class JudgeInfo(BaseModel):
    """Which judge produced a run's verdicts."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    version: str


class RunManifest(BaseModel):
    """Every setting of a run (``RUN/manifest.json``); a resumed run must match it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format: str = RUN_FORMAT
    version: int = 2
    """The run format's version (2: verdicts carry a status)."""
    bench: str
    """The bench directory, as given."""
    bench_sha256: str
    """SHA-256 of the bench's manifest, which holds the hash of every shard and image."""
    bench_split: str
    model: str
    """The --model spec."""
    model_settings: dict[str, Any] | None = None
    """The model's config file, as read (it names the API key's variable, never the key)."""
    model_name: str
    answers: bool
    """Whether the model answers questions (DSU is scored only then)."""
    generates: bool
    history: History
    layout: Layout
    judge: JudgeInfo
    judge_settings: dict[str, Any] | None = None
    """The judge's config file, as read, for a VLM judge."""
    limit: int | None
    items: int
    """How many items the run has in all."""
    global_seed: int = GLOBAL_SEED
    output_long_edge: int = 512
    max_tokens: int = 512
    temperature: float = 0.0
    yanami_version: str


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


def select_dialogues(dialogues: list[Dialogue], limit: int | None) -> list[Dialogue]:
    """The first ``limit`` dialogues taken round-robin over scenarios (all when None)."""
    if limit is None:
        return dialogues
    by: dict[str, list[Dialogue]] = {}
    for d in dialogues:
        by.setdefault(d.scenario.value, []).append(d)
    out: list[Dialogue] = []
    k = 0
    while len(out) < min(limit, len(dialogues)):
        for group in by.values():
            if k < len(group) and len(out) < limit:
                out.append(group[k])
        k += 1
    return out


def bench_items(dialogues: list[Dialogue], history: History, answers: bool, generates: bool) -> list[list[Item]]:
    """The items of a run, grouped in chains (one per item under GT-History, one per dialogue under Self)."""
    chains: list[list[Item]] = []
    for d in dialogues:
        if history == "self" and len(generation_turns(d)) < 2:
            continue  # Self-History is reported on dialogues with more than one generation turn
        items = items_of(d, turns=generates, questions=answers)
        if history == "self":
            chains.append(items)
        else:
            chains.extend([i] for i in items)
    return chains


def load_judge(spec: str, bench: Dataset | None = None, cache: ResponseCache | None = None) -> Judge:
    """The judge a --judge spec names: ``exact``, or a config file of a VLM judge."""
    if spec == "exact":
        return ExactJudge()
    if spec.endswith((".yaml", ".yml", ".json")) or Path(spec).is_file():
        from yanami.judges import VLMJudge

        return VLMJudge(load_config(spec), bench, cache)
    raise UserError(f"--judge {spec}: unknown judge (use exact, or a judge config file)")


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def evaluate(
    bench: str | Path,
    model: str,
    out: str | Path,
    *,
    history: History = "gt",
    layout: Layout | None = None,
    judge: str = "exact",
    concurrency: int = 1,
    limit: int | None = None,
    retry_errors: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    loaded: tuple[Dataset, list[Dialogue]] | None = None,
    cache: str | Path | None = None,
    workers: int = 1,
) -> Summary:
    """Evaluate ``model`` on ``bench`` into the run directory ``out`` (resuming what is there).

    ``layout`` defaults to the model config's, else yes-first; API responses are cached in
    ``cache`` (default ``out/cache.sqlite``), so a re-run or a re-judge never pays twice.
    ``workers`` processes parse images for the exact judge and the reference agents (use it
    with ``concurrency`` of at least twice as many); it never changes a result.
    """
    from yanami import __version__

    if concurrency < 1:
        raise UserError(f"--concurrency {concurrency}: must be at least 1")
    dataset, all_dialogues = loaded or _load(bench)
    dialogues = select_dialogues(all_dialogues, limit)
    by_id = {d.id: d for d in dialogues}
    responses = ResponseCache(Path(cache) if cache else Path(out) / "cache.sqlite")
    the_model: Model = load_model(model, dataset, by_id, responses)
    the_judge = load_judge(judge, dataset, responses)
    config = getattr(the_model, "config", None)
    if layout is None:
        layout = config.layout if config is not None else "yes-first"
    if layout not in getattr(the_model, "layouts", (layout,)):
        raise UserError(f"--layout {layout}: {the_model.name} takes {' or '.join(the_model.layouts)} only")  # type: ignore[attr-defined]
    answers, generates = the_model.answer is not None, the_model.generate is not None
    chains = bench_items(dialogues, history, answers, generates)
    manifest = RunManifest(
        bench=str(bench),
        bench_sha256=hashlib.sha256((dataset.root / MANIFEST).read_bytes()).hexdigest(),
        bench_split=dataset.manifest.split,
        model=model,
        model_settings=config.model_dump(mode="json") if config is not None else None,
        model_name=the_model.name,
        answers=answers,
        generates=generates,
        history=history,
        layout=layout,
        judge=JudgeInfo(name=the_judge.name, version=the_judge.version),
        judge_settings=_settings(the_judge),
        limit=limit,
        items=sum(len(c) for c in chains),
        yanami_version=__version__,
    )
    run = Path(out)
    _open_run(run, manifest)
    store = Results(run)
    try:
        with parse_workers(workers):
            return _execute(
                store, dataset, by_id, chains, the_model, the_judge, manifest, concurrency, retry_errors, on_progress
            )
    finally:
        store.close()
        responses.close()


def _settings(judge: Judge) -> dict[str, Any] | None:
    config = getattr(judge, "config", None)
    return config.model_dump(mode="json") if config is not None else None


def _load(bench: str | Path) -> tuple[Dataset, list[Dialogue]]:
    dataset = Dataset(bench)
    return dataset, list(dataset)


def _open_run(run: Path, manifest: RunManifest) -> None:
    path = run / RUN_MANIFEST
    if run.exists() and not run.is_dir():
        raise UserError(f"{run}: exists and is not a directory")
    if path.exists():
        try:
            raw = json.loads(path.read_bytes())
            if raw.get("format") == RUN_FORMAT and raw.get("version") != RunManifest.model_fields["version"].default:
                raise UserError(
                    f"{path}: a run in format version {raw.get('version')}, from another yanami; choose another --out"
                )
            old = RunManifest.model_validate(raw)
        except (ValueError, AttributeError):
            raise UserError(f"{path}: not a yanami run manifest; choose another --out") from None
        mine, theirs = manifest.model_dump(), old.model_dump()
        mine.pop("bench"), theirs.pop("bench")  # the same bench may have moved
        changed = [k for k in mine if mine[k] != theirs[k]]
        if changed:
            k = changed[0]
            raise UserError(
                f"{path}: this run was made with {k}={theirs[k]!r}, not {mine[k]!r}; resume it with the same "
                "settings or choose another --out"
            )
        return
    if run.exists() and any(run.iterdir()):
        raise UserError(f"{run}: exists, is not empty and holds no yanami run; choose another --out")
    run.mkdir(parents=True, exist_ok=True)
    _write_json_atomic(path, manifest.model_dump(mode="json"))


def _execute(
    store: Results,
    dataset: Dataset,
    by_id: dict[str, Dialogue],
    chains: list[list[Item]],
    model: Model,
    judge: Judge,
    manifest: RunManifest,
    concurrency: int,
    retry_errors: bool,
    on_progress: Callable[[int, int], None] | None,
) -> Summary:
    total = sum(len(c) for c in chains)
    finished = store.done() - (store.failed() if retry_errors else set())
    predictions = store.predictions()
    judged = {k for k, v in store.verdicts(judge.name).items() if v.status == "ok"}
    # Items predicted before a kill but not yet judged are judged now, without asking the model again.
    for item_id, p in predictions.items():
        if item_id in finished and p.status == "ok" and item_id not in judged:
            d = by_id.get(p.dialogue)
            if d is not None:
                store.write(p, _judge(judge, d, p, store))
    todo = [[i for i in c if i.id not in finished] for c in chains]
    todo = [c for c in todo if c]
    summary = Summary(store.run, total, total - sum(len(c) for c in todo))
    if on_progress:
        on_progress(summary.skipped, total)
    results: queue.Queue[tuple[Prediction, Verdict | None] | BaseException] = queue.Queue()
    runner = _Runner(dataset, by_id, model, judge, manifest, store, predictions)

    def work(chain: list[Item]) -> None:
        try:
            own: dict[int, str | None] = {}
            for item in chain:
                results.put(runner.run_item(item, own))
        except BaseException as exc:  # a bug: stop the run, keep what is written
            results.put(exc)

    done = summary.skipped
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        stop = threading.Event()
        futures = [pool.submit(_unless(stop, work), c) for c in todo]
        pending = sum(len(c) for c in todo)
        try:
            while pending:
                got = results.get()
                if isinstance(got, BaseException):
                    raise got
                prediction, verdict = got
                store.write(prediction, verdict)
                summary.written += 1
                summary.statuses[prediction.status] = summary.statuses.get(prediction.status, 0) + 1
                if prediction.status == "error" and summary.first_error is None:
                    summary.first_error = f"{prediction.item}: {prediction.error}"
                pending -= 1
                done += 1
                if on_progress:
                    on_progress(done, total)
        finally:
            stop.set()
            for f in futures:
                f.cancel()
    return summary


def _unless(stop: threading.Event, fn: Callable[[list[Item]], None]) -> Callable[[list[Item]], None]:
    def run(chain: list[Item]) -> None:
        if not stop.is_set():
            fn(chain)

    return run


class _Runner:
    """Runs one item: request, model call, output check, judge."""

    def __init__(
        self,
        dataset: Dataset,
        by_id: dict[str, Dialogue],
        model: Model,
        judge: Judge,
        manifest: RunManifest,
        store: Results,
        earlier: dict[str, Prediction],
    ) -> None:
        self.dataset, self.by_id, self.model, self.judge = dataset, by_id, model, judge
        self.manifest, self.store, self.earlier = manifest, store, earlier
        self._bytes: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def bench_image(self, part: ImagePart) -> bytes:
        data = self._bytes.get(part.sha256)
        if data is None:
            data = self.dataset.image_bytes(part)
            with self._lock:
                if len(self._bytes) > 512:
                    self._bytes.clear()
                self._bytes[part.sha256] = data
        return data

    def run_item(self, item: Item, own: dict[int, str | None]) -> tuple[Prediction, Verdict | None]:
        """Run one item; ``own`` maps this dialogue's earlier target turns to the model's image (Self-History)."""
        d = self.by_id[item.dialogue]
        targets = set(generation_turns(d))
        fallbacks = 0
        selfh = self.manifest.history == "self"

        def image_bytes(turn: int, side: str, j: int, part: ImagePart) -> bytes:
            nonlocal fallbacks
            if selfh and side == "assistant" and turn in targets:
                sha = own.get(turn) if turn in own else self._earlier_image(d, turn)
                if sha is not None:
                    return self.store.image(sha)
                fallbacks += 1  # the model gave no image there: the history keeps the ground truth
            return self.bench_image(part)

        request = build_request(d, item, self.manifest.layout, image_bytes)
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
                    _check_image(data)
            else:
                assert self.model.answer is not None
                text = self.model.answer(request)
                if not text or not text.strip():
                    status = "missing"
        except Refused as exc:
            status, error = "refused", str(exc) or "refused"
        except (UserError, BrokenExecutor):  # ours, not the model's: stop the run, keep what is written
            raise
        except Transient as exc:
            status, error = "error", f"gave up after retries: {exc}"
        except Exception as exc:  # the model failed on this item: recorded, never scored
            status, error = "error", f"{type(exc).__name__}: {exc}"
        if status == "ok" and data:
            image = self.store.put_image(data)
        if item.kind == "turn":
            own[item.turn] = image
        q = question_of(d, item) if item.kind == "question" else None
        prediction = Prediction(
            item=item.id,
            dialogue=d.id,
            scenario=d.scenario.value,
            kind=item.kind,
            turn=item.turn,
            qtype=q.type.value if q else None,
            status=status,
            text=text,
            image=image,
            error=error,
            seed=item_seed(item.id, self.manifest.global_seed),
            history_fallbacks=fallbacks,
        )
        verdict = _judge(self.judge, d, prediction, self.store, image_data=data if image else None)
        return prediction, verdict

    def _earlier_image(self, d: Dialogue, turn: int) -> str | None:
        p = self.earlier.get(f"{d.id}/t{turn}")
        return p.image if p is not None and p.status == "ok" else None


def _check_image(data: bytes) -> None:
    try:
        open_image_bytes(data).verify()  # structure and checksums, without decoding the pixels
    except Exception as exc:
        raise ValueError(f"the output is not a decodable image ({exc})") from None


def _judge(judge: Judge, d: Dialogue, p: Prediction, store: Results, image_data: bytes | None = None) -> Verdict | None:
    """The verdict on an ok prediction (None otherwise: nothing to grade).

    A judge that fails (an unreachable server, output that stays invalid after its repair
    retry) gives a verdict with status ``error``: the item is then not scored, and the next
    run judges it again.
    """
    if p.status != "ok":
        return None
    try:
        if p.kind == "question":
            q = next(q for q in d.questions if q.id == p.item.rpartition("/")[2])
            v = judge.judge_answer(d, q, p.text or "")
            return Verdict(
                p.item, judge.name, judge.version, "ok", v.score, None, None, list(q.aligned_checks), v.reason
            )
        turn = d.turns[p.turn]
        assert p.image is not None
        iv = judge.judge_image(d, turn, image_data if image_data is not None else store.image(p.image))
    except JudgeError as exc:
        return Verdict(p.item, judge.name, judge.version, "error", None, None, None, None, str(exc))
    checks = [
        (c.id, c.kind.value, c.capability.value if c.capability else None, bool(iv.checks[c.id])) for c in turn.checks
    ]
    return Verdict(p.item, judge.name, judge.version, "ok", None, iv.vq, checks, None, iv.reason)


EXTRA_JUDGES = "judges.json"


def rejudge(
    run: str | Path,
    judge: str,
    *,
    bench: str | Path | None = None,
    concurrency: int = 1,
    cache: str | Path | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> Summary:
    """Judge a run's stored predictions again with another judge, without calling the model.

    Verdicts are stored under the judge's name next to the run's own (``yanami score
    --judge NAME`` reads them); items this version of the judge already graded are
    skipped, and those an older version graded are graded again.
    """
    run = Path(run)
    path = run / RUN_MANIFEST
    if not path.is_file():
        raise UserError(f"{run}: not a yanami run (no {RUN_MANIFEST})")
    manifest = RunManifest.model_validate_json(path.read_bytes())
    dataset = Dataset(bench or manifest.bench)
    digest = hashlib.sha256((dataset.root / MANIFEST).read_bytes()).hexdigest()
    if digest != manifest.bench_sha256:
        raise UserError(f"{dataset.root}: not the bench this run was made on (its manifest's SHA-256 differs)")
    by_id = {d.id: d for d in dataset}
    responses = ResponseCache(Path(cache) if cache else run / "cache.sqlite")
    the_judge = load_judge(judge, dataset, responses)
    store = Results(run)
    try:
        _record_judge(run, the_judge)
        done = {
            k
            for k, v in store.verdicts(the_judge.name).items()
            if v.status == "ok" and v.judge_version == the_judge.version
        }
        todo = [p for p in store.predictions().values() if p.status == "ok" and p.item not in done]
        summary = Summary(run, len(todo) + len(done), len(done))
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            futures = [pool.submit(_judge, the_judge, by_id[p.dialogue], p, store) for p in todo]
            for n, f in enumerate(futures, 1):
                v = f.result()
                if v is not None:
                    with store.db:
                        store.db.execute("BEGIN")
                        store.write_verdict(v)
                    summary.statuses[v.status] = summary.statuses.get(v.status, 0) + 1
                summary.written += 1
                if on_progress:
                    on_progress(len(done) + n, summary.items)
        return summary
    finally:
        store.close()
        responses.close()


def _record_judge(run: Path, judge: Judge) -> None:
    path = run / EXTRA_JUDGES
    known = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    known[judge.name] = {"version": judge.version, "settings": _settings(judge)}
    _write_json_atomic(path, known)
