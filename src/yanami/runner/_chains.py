"""A dialogue's chain as it runs: the one piece every executor shares (`ChainRunner`).

Each dialogue is one chain (its target turns in order, then its questions): under Self-History
a turn needs the model's own earlier images, and under GT-History a request for a later turn
shows the ground truth of the earlier ones, so a model that remembers across requests must not
see a turn's answer before it gave its own. `ChainRunner.run_chain` runs one chain, item by
item, and judges what an earlier call stored but did not grade; the local threads and the Ray
actors (`yanami.runner._executors`) both call it, so they make the same rows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import BrokenExecutor
from dataclasses import dataclass

from yanami.contract import (
    Dialogue,
    History,
    ImagePart,
    InputImage,
    Judge,
    JudgeError,
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
    family_of,
)
from yanami.models import StrategyModel, Transient, redact, validate_image, validate_text
from yanami.runner._items import Conversation, Item, generation_turns, items_of
from yanami.store import Dataset, open_image_bytes

Earlier = Callable[[int], tuple[bytes | None, str | None]]
"""turn -> the model's own (image bytes, text) at that turn of a dialogue in this run."""

Row = tuple[Prediction, Verdict | None, bool]
"""What a chain makes per item: its prediction, its verdict (None: nothing to grade) and whether
it was an earlier prediction judged now (True) rather than an item asked now."""


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


@dataclass
class Chain:
    """One dialogue's items still to run, and its rows from an earlier call."""

    dialogue: Dialogue
    todo: list[Item]
    past: dict[str, Prediction]
    """The dialogue's stored predictions (the model's own earlier outputs, under Self-History)."""
    unjudged: list[Prediction]
    """Stored ok predictions this judge has not graded: judged now, without asking the model again."""


def work_left(d: Dialogue, items: list[Item], store: Results, judge: Judge, retry_errors: bool) -> Chain | None:
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
    return Chain(d, todo, past, unjudged) if todo or unjudged else None


SIDE_BY_SIDE = 4
"""The most chains a dialogue's questions are split into (`side_by_side`)."""


def side_by_side(chain: Chain) -> list[Chain]:
    """``chain`` as chains that may run at once: where it asks questions only (they show the
    dialogue up to their turn, never one another's answers, so none waits for another), its
    questions in up to `SIDE_BY_SIDE` runs of consecutive ones; else the chain itself (a turn's
    request may show what the model gave before). Each run resolves the dialogue's history once,
    as far as its last question, so a dialogue of 10,000 turns costs a few resolutions, not one
    per question."""
    todo = chain.todo
    if len(todo) < 2 or any(i.kind != "question" for i in todo):
        return [chain]
    parts = min(len(todo), SIDE_BY_SIDE)
    runs = [todo[k * len(todo) // parts : (k + 1) * len(todo) // parts] for k in range(parts)]
    return [Chain(chain.dialogue, run, chain.past, chain.unjudged if k == 0 else []) for k, run in enumerate(runs)]


_IMAGES_KEPT = 512
"""Bench images kept in memory (with their encoded form), the least recently shown dropped first."""


class ChainRunner:
    """Runs chains: for each item the request, the model call, the output check and the judge.
    ``model`` None: it only grades stored predictions (``yanami judge``)."""

    def __init__(
        self,
        dataset: Dataset,
        model: Model | None,
        judge: Judge,
        manifest: RunManifest,
        store: Results,
    ) -> None:
        self.dataset, self.model, self.judge = dataset, model, judge
        self.manifest, self.store = manifest, store
        self._images: dict[str, InputImage] = {}
        self._reading: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def bench_image(self, part: ImagePart) -> InputImage:
        """A bench image as a model receives it, read (and verified) once for every request that
        shows it: one reader per image (the questions of a dialogue start together), while other
        images are read beside it."""
        key = part.sha256
        with self._lock:
            image = self._images.pop(key, None)
            if image is not None:
                self._images[key] = image  # the most recently shown
                return image
            reading = self._reading.setdefault(key, threading.Lock())
        with reading:
            with self._lock:
                image = self._images.get(key)
            if image is None:
                data = self.dataset.image_bytes(part)  # checked: hash and pixel limit (one line if not)
                image = InputImage(data, key, part.width, part.height)
                with self._lock:
                    if len(self._images) >= _IMAGES_KEPT:
                        del self._images[next(iter(self._images))]  # the least recently shown
                    self._images[key] = image
        with self._lock:
            self._reading.pop(key, None)
        return image

    def ready(self, chain: Chain) -> list[Chain]:
        """``chain`` as the threads of this process run it (`side_by_side`), with the bench images
        its requests show read ahead (`read_ahead`; the local executor's reader calls this, ahead
        of the threads)."""
        self.read_ahead(chain)
        return side_by_side(chain)

    def read_ahead(self, chain: Chain) -> None:
        """Read the bench images ``chain``'s requests show (`bench_image`), so that no first
        request waits to read them."""
        if self.model is not None and chain.todo:
            d, own = chain.dialogue, self.manifest.history == "self"
            whole = max(i.turn if i.kind == "question" else i.turn - 1 for i in chain.todo)  # turns shown whole
            for t in d.turns[: max(i.turn for i in chain.todo) + 1]:  # (a turn's request shows its user message)
                parts = t.user.images()
                if t.index <= whole and not (own and t.checks):  # (under Self-History its own picture stands there)
                    parts += t.assistant.images()
                for part in parts:
                    self.bench_image(part)

    def run_chain(self, chain: Chain, stop: threading.Event) -> Iterator[Row]:
        """Run one chain: grade its stored predictions this judge has not graded, then ask its
        items in order, stopping after the item in flight once ``stop`` is set (the rest is asked
        when the run resumes). The chain's stored rows (``chain.past``) give the model's own
        outputs that an earlier call made."""
        d = chain.dialogue
        selfh = self.manifest.history == "self"
        for p in chain.unjudged:
            history = stored_history(d, p, chain.past) if selfh else None
            outputs = stored_outputs(d, chain.past, self.store)
            yield p, grade(self.judge, d, p, self.store, own=history, earlier=outputs), True
        if not chain.todo:
            return
        chat = Chat(self, d, chain.past)
        try:
            for item in chain.todo:
                if stop.is_set():
                    return
                prediction, verdict = self.run_item(item, chat)
                yield prediction, verdict, False
        finally:
            chat.conversation.close()  # freed now, not by the cyclic collector (whose pause stalls every thread)

    def run_item(self, item: Item, chat: Chat) -> tuple[Prediction, Verdict | None]:
        """Run one item of the chain whose state is ``chat`` (`chat`): the model's own earlier
        outputs there (Self-History, and the references of WEAVE's and IMUG-Bench's grading), and
        its history, resolved once for every request of the chain."""
        d = chat.d
        assert self.model is not None, "items to ask need the model"
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

        verdict = grade(
            self.judge, d, prediction, self.store, image_data=data if image else None, own=history, earlier=earlier
        )
        return prediction, verdict


class Chat:
    """One dialogue's chain as it runs: the model's own outputs so far (``own``: target turn -> its
    image; ``texts``: text turn -> its reply; ``past``: the dialogue's rows an earlier call
    stored), and its `Conversation`."""

    def __init__(self, runner: ChainRunner, d: Dialogue, past: Mapping[str, Prediction] | None = None) -> None:
        self.runner, self.d = runner, d
        self.past: Mapping[str, Prediction] = {} if past is None else past
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
        if t in self.own:
            return self.own[t]
        p = self.past.get(f"{self.d.id}/t{t}")
        return p.image if p is not None and p.status == "ok" else None

    def own_text(self, t: int) -> str | None:
        if t in self.texts:
            return self.texts[t]
        p = self.past.get(f"{self.d.id}/t{t}")
        return p.text if p is not None and p.status == "ok" else None

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


def stored_outputs(d: Dialogue, predictions: dict[str, Prediction], store: Results) -> Earlier:
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


def stored_history(d: Dialogue, p: Prediction, predictions: dict[str, Prediction]) -> dict[int, str]:
    """`_own_history` of a stored Self-History prediction, from the run's other predictions."""

    def image_of(t: int) -> str | None:
        earlier = predictions.get(f"{d.id}/t{t}")
        return earlier.image if earlier is not None and earlier.status == "ok" else None

    return _own_history(d, p.turn, image_of) if p.kind == "turn" else {}


def grade(
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
