"""The per-sample viewer's data: a few dialogues per scenario of the bench, each turn's messages and
every run's output, check results and answers, with the images as small JPEG data URLs.

It is read from the bench and the runs' results (not computed from scores), before the page is
rendered; the template (``templates/report.html.j2``) shows it.
"""

from __future__ import annotations

import base64
import functools
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from yanami.contract import Dialogue, ImagePart, Prediction, Results, RunManifest, UserError, Verdict
from yanami.models import question_prompt
from yanami.scoring._runs import SCENARIOS, Run
from yanami.store import Dataset, bench_sha256, open_bench


@dataclass(frozen=True)
class Part:
    """A part of a message: its text, or the key of its image in `Viewer.images`."""

    text: str | None = None
    image: str | None = None


@dataclass(frozen=True)
class Message:
    role: str
    parts: list[Part]


@dataclass(frozen=True)
class CheckShown:
    """A check of a turn and whether the run's output passed it (None: no verdict on it)."""

    text: str
    kind: str
    passed: bool | None


@dataclass(frozen=True)
class Output:
    """A run's output for a turn: its status, image (key in `Viewer.images`), VQ and checks."""

    run: str
    status: str
    error: str
    image: str | None
    vq: float | None
    checks: list[CheckShown]


@dataclass(frozen=True)
class TurnShown:
    index: int
    messages: list[Message]
    outputs: list[Output]


@dataclass(frozen=True)
class Answer:
    """A run's answer to a question, and its score (None: not judged)."""

    run: str
    status: str
    text: str
    score: float | None


@dataclass(frozen=True)
class QuestionShown:
    type: str
    after: int
    prompt: str
    answer: str
    answers: list[Answer]


@dataclass(frozen=True)
class Sample:
    """One dialogue of the viewer, and the runs that failed a check in it."""

    id: str
    scenario: str
    turns: list[TurnShown]
    questions: list[QuestionShown]
    failed_runs: list[str]


@dataclass(frozen=True)
class Viewer:
    """The per-sample viewer: its dialogues, their images (key -> data URL) and a note on what it
    leaves out (None: nothing)."""

    samples: list[Sample]
    images: dict[str, str]
    note: str | None = None

    def runs(self) -> list[str]:
        """The runs with an output or an answer in the viewer (its run filter's choices)."""
        return sorted(
            {o.run for s in self.samples for t in s.turns for o in t.outputs}
            | {a.run for s in self.samples for q in s.questions for a in q.answers}
        )


class _Thumbs:
    """Images as small JPEG data URLs, each stored once in the page."""

    def __init__(self) -> None:
        self.urls: dict[str, str] = {}

    def add(self, sha: str, load: Callable[[], bytes]) -> str:
        if sha not in self.urls:
            try:
                img = Image.open(io.BytesIO(load())).convert("RGB")
                img.thumbnail((256, 256))
                buf = io.BytesIO()
                img.save(buf, format="JPEG", quality=80)
                self.urls[sha] = "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()
            except (OSError, ValueError):
                self.urls[sha] = ""
        return sha


def viewer_bench(runs: list[Run], bench: str | Path | None = None) -> tuple[Dataset, list[Run], str | None]:
    """The bench of the per-sample viewer, checked: the dataset, the runs made on it, and a note
    on those left out.

    ``bench`` (``--bench``) replaces the path the first run recorded. A bench that is gone,
    or whose manifest's SHA-256 is not the one the run recorded, is a `UserError` of one line
    (`yanami.runner.open_bench`): a different bench is never paired with a run's outputs, and
    runs of the set made on another bench are left out of the viewer.
    """
    first = runs[0]
    if not isinstance(first.manifest, RunManifest):
        raise UserError(f"{first.path}: the run's manifest is not typed; load it with load_run")
    hint = "give --bench DIR with its bench, or --samples 0 for no per-sample viewer"
    dataset = open_bench(first.path, first.manifest, bench, hint=hint)
    digest = bench_sha256(dataset)
    left = [r.label for r in runs if r.bench_sha256 != digest]
    note = f"runs made on another bench are not shown here: {', '.join(left)}" if left else None
    return dataset, [r for r in runs if r.bench_sha256 == digest], note


_Store = tuple[Run, Results, dict[str, Prediction], dict[str, Verdict]]
"""A run, its open results, its predictions and the verdicts of its scored judge."""


def load_viewer(runs: list[Run], per_scenario: int, bench: str | Path | None = None) -> Viewer:
    """The viewer of ``per_scenario`` dialogues per scenario (the first of the bench that some run
    has records of), read from the bench (``bench``: where it is now, if it moved) and the runs."""
    if not runs:
        return Viewer([], {}, "no run")
    if per_scenario <= 0:
        return Viewer([], {}, "none asked for (--samples 0)")
    dataset, runs, why = viewer_bench(runs, bench)
    wanted = {s: per_scenario for s in SCENARIOS}
    chosen: list[Dialogue] = []
    for d in dataset:
        if wanted.get(d.group, 0) > 0 and any(d.id in r.dialogues for r in runs):
            chosen.append(d)
            wanted[d.group] -= 1
            if not any(wanted.values()):
                break  # the viewer is full: the rest of the bench is not read
    thumbs = _Thumbs()
    stores: list[_Store] = []
    for r in runs:
        store = Results(r.path)
        stores.append((r, store, store.predictions(), store.verdicts(r.judge)))
    try:
        samples = [_sample(d, dataset, stores, thumbs) for d in chosen]
    finally:
        for _, store, _, _ in stores:
            store.close()
    return Viewer(samples, thumbs.urls, why)


def _sample(d: Dialogue, dataset: Dataset, stores: list[_Store], thumbs: _Thumbs) -> Sample:
    turns = []
    failed: set[str] = set()  # the runs with a failed check in this dialogue
    for t in d.turns:
        msgs = []
        for role, m in (("user", t.user), ("assistant", t.assistant)):
            parts = []
            for p in m.parts:
                if isinstance(p, ImagePart):
                    parts.append(Part(image=thumbs.add(p.sha256, functools.partial(dataset.image_bytes, p))))
                else:
                    parts.append(Part(text=p.text))
            msgs.append(Message(role, parts))
        outputs = []
        for r, store, preds, verdicts in stores:
            pred = preds.get(f"{d.id}/t{t.index}")
            if pred is None:
                continue
            v = verdicts.get(pred.item)
            passed = {c.id: c.passed for c in (v.checks or [])} if v else {}
            if any(passed.get(c.id) is False for c in t.checks):
                failed.add(r.label)
            image = pred.image
            outputs.append(
                Output(
                    run=r.label,
                    status=pred.status,
                    error=pred.error or "",
                    image=thumbs.add(image, functools.partial(store.image, image)) if image else None,
                    vq=None if v is None else v.vq,
                    checks=[CheckShown(c.text, str(c.kind), passed.get(c.id)) for c in t.checks],
                )
            )
        turns.append(TurnShown(t.index, msgs, outputs))
    questions = []
    for q in d.questions:
        answers = []
        for r, _, preds, verdicts in stores:
            pred = preds.get(f"{d.id}/{q.id}")
            if pred is None:
                continue
            v = verdicts.get(pred.item)
            answers.append(Answer(r.label, pred.status, pred.text or pred.error or "", None if v is None else v.score))
        questions.append(QuestionShown(q.type.value, q.after_turn, question_prompt(q), q.answer, answers))
    return Sample(d.id, d.group, turns, questions, sorted(failed))
