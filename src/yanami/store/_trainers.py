"""Exports for trainers: LLaVA conversation JSON, BAGEL's ``unified_edit`` and ``vlm_sft`` layouts, WebDataset.

Each export streams the dataset one dialogue at a time, writes into a hidden work directory
beside ``out`` under the output lock (as `export_parquet` does) and renames it into place at
the end. Each states in ``export.json`` and ``README.md`` what each file holds, what the
format cannot carry and where that went. Layouts are documented in docs/training.md.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import shutil
import tarfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from yanami._lock import OutputLock, work_prefix
from yanami._parquet_pages import pyarrow
from yanami.contract import (
    CHOICE_LETTERS,
    Capability,
    Dialogue,
    ImagePart,
    Question,
    QuestionType,
    Turn,
    TurnRef,
    UserError,
    sha256_hex,
)
from yanami.store._manifest import MANIFEST
from yanami.store._reader import Dataset
from yanami.store._writer import move_into_place

EXPORT_JSON = "export.json"
EXPORT_VERSION = 1
IMAGE_TOKEN = "<image>"
"""LLaVA's ``DEFAULT_IMAGE_TOKEN``, which BAGEL's ``vlm_sft`` loader splits on too."""
ESCAPED_TOKEN = "<Image>"
"""What a literal ``<image>`` in a message's text becomes, so placeholders match images one for one."""
SHARD_BYTES = 256 << 20
"""A new tar shard or edit-chain Parquet file starts once one holds about this many bytes."""
EDIT_ROWS_PER_GROUP = 8
"""Rows per Parquet row group: BAGEL hands out row groups to ranks x workers, so keep them small."""
BAGEL_EDIT_NAME = "yanami_edit"
BAGEL_VLM_NAME = "yanami_vlm"
_EXT = {"png": "png", "jpeg": "jpg", "webp": "webp"}

OnDialogue = Callable[[], None] | None


# Conversations: human/gpt, strictly alternating -------------------------------------------------


@dataclass
class _Message:
    role: str  # "human" or "gpt"
    values: list[str] = field(default_factory=list)
    """Its pieces in reading order, joined by newlines; a picture is the piece ``<image>``."""
    images: list[ImagePart] = field(default_factory=list)
    """The pictures of its ``<image>`` pieces, in order."""


@dataclass
class Conversation:
    """One LLaVA-style record before it is written: its alternating messages and their pictures."""

    id: str
    messages: list[_Message]
    """Human first, alternating, gpt last; pictures in human messages only."""
    assistant_images_left_out: int = 0
    """Assistant images after the last gpt message kept (nothing followed to show them in)."""
    escaped_tokens: int = 0
    """Literal ``<image>`` strings in message text, written as ``<Image>``."""

    @property
    def images(self) -> list[ImagePart]:
        """The pictures its ``<image>`` placeholders stand for, in order (repeats allowed)."""
        return [p for m in self.messages for p in m.images]

    @property
    def conversations(self) -> list[dict[str, str]]:
        """``{"from": "human"|"gpt", "value": ...}``, human first, alternating, gpt last."""
        return [{"from": m.role, "value": "\n".join(m.values)} for m in self.messages]

    def record(self, image_path: Callable[[ImagePart], str], *, as_list: bool = False) -> dict[str, Any]:
        """The JSON record: ``image`` a path for one picture (a list of paths if ``as_list``), a list
        for several, absent for none."""
        rec: dict[str, Any] = {"id": self.id, "conversations": self.conversations}
        if len(self.images) == 1 and not as_list:
            rec["image"] = image_path(self.images[0])
        elif self.images:
            rec["image"] = [image_path(p) for p in self.images]
        return rec


def question_text(q: Question) -> str:
    """The human message that asks a DSU question: the wording `yanami eval` asks it with."""
    if not q.choices:
        return f"{q.text}\n\nAnswer briefly."
    options = "\n".join(f"{CHOICE_LETTERS[i]}. {c}" for i, c in enumerate(q.choices))
    return f"{q.text}\n\nOptions:\n{options}\n\nReply with the letter of the correct option only."


def question_answer(q: Question) -> str:
    """The gpt reply to a DSU question: the letter(s), as the question asks, or the free answer."""
    return ", ".join(q.answer_letters) if q.choices else q.answer


def conversation(d: Dialogue, turns: Sequence[Turn], *, rid: str, question: Question | None = None) -> Conversation:
    """Turns (and an optional DSU question after them) as one strictly alternating conversation.

    A user message is a human value: its text and an ``<image>`` per picture, in reading order.
    An assistant message is a gpt value: its text. An assistant's picture cannot be a gpt value,
    so it opens the next human value as an ``<image>`` (what a model sees of its earlier output).
    Empty messages are dropped and consecutive messages of one role merged, so the roles
    alternate as LLaVA's ``preprocess`` asserts; a conversation starts with human and ends with gpt.
    """
    msgs: list[_Message] = []
    carried: list[ImagePart] = []
    escaped = 0

    def text(t: str) -> str:
        nonlocal escaped
        escaped += t.count(IMAGE_TOKEN)
        return t.replace(IMAGE_TOKEN, ESCAPED_TOKEN)

    def human() -> _Message:
        nonlocal carried
        m = _Message("human", [IMAGE_TOKEN] * len(carried), list(carried))
        carried = []
        return m

    for k, turn in enumerate(turns):
        m = human()
        if k == 0 and d.system_prompt:
            m.values.insert(0, text(d.system_prompt))
        for p in turn.user.parts:
            if isinstance(p, ImagePart):
                m.values.append(IMAGE_TOKEN)
                m.images.append(p)
            elif p.text.strip():
                m.values.append(text(p.text))
        msgs.append(m)
        a = _Message("gpt")
        for p in turn.assistant.parts:
            if isinstance(p, ImagePart):
                carried.append(p)
            elif p.text.strip():
                a.values.append(text(p.text))
        msgs.append(a)
    if question is not None:
        m = human()
        m.values.append(text(question_text(question)))
        msgs += [m, _Message("gpt", [text(question_answer(question))])]
    merged: list[_Message] = []
    for m in msgs:
        if not m.values:
            continue
        if merged and merged[-1].role == m.role:
            merged[-1].values += m.values
            merged[-1].images += m.images
        elif merged or m.role == "human":
            merged.append(m)
    left_out = len(carried)
    while merged and merged[-1].role != "gpt":
        left_out += sum(1 for p in merged[-1].images if p.source == "assistant")
        merged.pop()
    return Conversation(rid, merged, assistant_images_left_out=left_out, escaped_tokens=escaped)


def conversations(d: Dialogue) -> Iterator[Conversation]:
    """The dialogue's conversation (id: the dialogue's), then one per DSU question (``ID:QID``):
    the turns up to its ``after_turn``, the question, the reference answer."""
    yield conversation(d, d.turns, rid=d.id)
    for q in d.questions:
        yield conversation(d, d.turns[: q.after_turn + 1], rid=f"{d.id}:{q.id}", question=q)


# LLaVA-1.5: one picture a record -----------------------------------------------------------------

EARLIER = "Earlier in this conversation:"
"""Opens the transcript of what was said before a one-picture record's first message."""
NOW = "Now:"
"""Opens that first message after the transcript."""


def _marker(n: int, p: ImagePart, shown: bool) -> str:
    whose = " (yours)" if p.source == "assistant" else ""
    return f"[picture {n}{whose}, {'shown above' if shown else 'not shown'}]"


def one_picture(c: Conversation) -> list[Conversation]:
    """The conversation cut into records of at most one picture each, for LLaVA-1.5's loader.

    Pictures are numbered from 1 in the order they appear. A record starts at each human message
    that holds a picture and runs to the message before the next one; the messages before the
    first picture (if any) are a record without one. A record with a picture shows it as its only
    ``<image>``, at the start of its first human value, followed by everything said before that
    message as a transcript (``User: …`` / ``Assistant: …``) and then the message itself. Every
    other picture, in the transcript or beside the shown one in that message, is written in its
    place as ``[picture N, not shown]`` (the shown one as ``[picture N, shown above]``; ``(yours)``
    when the assistant made it). Each gpt value is trained on in exactly one record, with the whole
    text before it; ids are ``ID#N`` with N the picture shown (0: none).
    """
    msgs = c.messages
    numbers: list[list[int]] = []
    n = 0
    for m in msgs:
        numbers.append(list(range(n + 1, n + 1 + len(m.images))))
        n += len(m.images)

    def rendered(k: int, shown: int | None = None) -> str:
        pics = iter(zip(numbers[k], msgs[k].images, strict=True))
        out = []
        for v in msgs[k].values:
            if v == IMAGE_TOKEN:
                num, p = next(pics)
                v = _marker(num, p, num == shown)
            out.append(v)
        return "\n".join(out)

    starts = [k for k, m in enumerate(msgs) if m.images]
    bounds = ([0] if not starts or starts[0] != 0 else []) + starts + [len(msgs)]
    records = []
    for s, e in itertools.pairwise(bounds):
        if s == e:
            continue
        if not msgs[s].images:  # the messages before the first picture: nothing is missing
            records.append(Conversation(f"{c.id}#0", msgs[s:e]))
            continue
        shown, pic = numbers[s][-1], msgs[s].images[-1]
        first = [IMAGE_TOKEN]
        if s:
            lines = [f"{'User' if msgs[k].role == 'human' else 'Assistant'}: {rendered(k)}" for k in range(s)]
            first += [EARLIER, *lines, "", NOW]
        first.append(rendered(s, shown))
        records.append(Conversation(f"{c.id}#{shown}", [_Message("human", first, [pic]), *msgs[s + 1 : e]]))
    return records


# BAGEL edit chains -------------------------------------------------------------------------------


@dataclass
class EditChain:
    """One ``unified_edit`` row: a picture, then each edit of it with the words that asked for it."""

    images: list[ImagePart]
    turns: list[int]
    """The turn of each picture."""
    instructions: list[str]
    """One per step: one fewer than pictures."""
    word_turns: list[list[int]]
    """One per step: the turns whose user words make its instruction."""

    def part(self, start: int, end: int) -> EditChain:
        """Pictures ``start`` to ``end`` (inclusive) and the steps between them."""
        return EditChain(
            self.images[start : end + 1],
            self.turns[start : end + 1],
            self.instructions[start:end],
            self.word_turns[start:end],
        )


@dataclass
class _ChainState:
    chains: list[EditChain] = field(default_factory=list)
    images: list[ImagePart] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    step_turns: list[list[int]] = field(default_factory=list)
    words: list[str] = field(default_factory=list)
    word_turns: list[int] = field(default_factory=list)
    inputs: int = 0
    """Pictures the next result may be made from (more than one: it fuses them)."""
    fused: int = 0

    def close(self) -> None:
        if len(self.images) >= 2:
            self.chains.append(EditChain(self.images, self.turns, self.steps, self.step_turns))
        self.images, self.turns, self.steps, self.step_turns = [], [], [], []

    def start(self, p: ImagePart, turn: int) -> None:
        self.close()
        self.images, self.turns, self.words, self.word_turns, self.inputs = [p], [turn], [], [], 1


def edit_chains(d: Dialogue) -> tuple[list[EditChain], int]:
    """The dialogue's edit chains, and the number of assistant pictures made from several inputs.

    A chain starts at a picture the user shows; each assistant picture that follows is a step,
    its instruction the user's words since the chain's previous picture. A user picture after
    a step starts a new chain. An assistant picture made while two or more pictures wait for a
    first step (the user showed several) fuses them, which one-input editing cannot express:
    it is not a step, but starts a chain itself.
    """
    s = _ChainState()
    for turn in d.turns:
        for p in turn.user.parts:
            if not isinstance(p, ImagePart):
                if p.text.strip():
                    s.words.append(p.text.strip())
                    s.word_turns.append(turn.index)
            elif s.steps or not s.images:
                s.start(p, turn.index)
            else:  # another input before any result: the chain restarts from it, the next result fuses them
                s.images, s.turns = [p], [turn.index]
                s.inputs += 1
        for p in turn.assistant.parts:
            if not isinstance(p, ImagePart):
                continue
            if not s.images or s.inputs > 1:
                s.fused += s.inputs > 1
                s.start(p, turn.index)
                continue
            s.images.append(p)
            s.turns.append(turn.index)
            s.steps.append("\n".join(s.words) or turn.user.text().strip())
            s.step_turns.append(sorted(set(s.word_turns)) or [turn.index])
            s.words, s.word_turns = [], []
    s.close()
    return s.chains, s.fused


HISTORY_CAPABILITIES = frozenset(
    {Capability.COREFERENCE, Capability.RETRIEVAL, Capability.CONSTRAINT, Capability.CORRECTION}
)
"""The capabilities that take something from earlier turns by their definition: what a reference
meant, an earlier picture or message, a standing rule, a correction. (Cross-turn and spatial
consistency keep what the step's input picture shows.)"""

NEEDS_DIALOGUE = {
    "capability": "its turn exercises coreference, history retrieval, constraint adherence or correction "
    "updating (the turn's capabilities, or a check's)",
    "reference": "its turn, or a check of it, refers to a picture or message other than the step's two pictures "
    "(`references`)",
    "reference_question": "a Reference Resolution question is asked right after its turn, about what the turn's "
    "words refer to",
    "stateless_reading": "its turn's hidden intent records that the words read alone against the latest picture "
    "mean something else than what was done (`stateless`, YANAMI's rule for every target turn)",
    "several_turns": "its instruction gathers the user's words of several turns, without the assistant's replies "
    "between them",
}
"""Why an edit step cannot be read from its input picture and instruction alone, each read from the
dialogue's own annotations (never from its wording); a step with any of them is left out."""


def _outside(d: Dialogue, ref: TurnRef, own: set[str]) -> bool:
    """Whether a reference names anything but the step's own pictures (``own``: their SHA-256)."""
    if ref.turn >= len(d.turns):
        return True
    msg = d.turns[ref.turn].user if ref.side == "user" else d.turns[ref.turn].assistant
    images = msg.images()
    if ref.image is not None:
        return ref.image >= len(images) or images[ref.image].sha256 not in own
    return len(images) != len(msg.parts) or any(p.sha256 not in own for p in images)


def needs_dialogue(d: Dialogue, chain: EditChain, k: int) -> list[str]:
    """Why step ``k`` of ``chain`` (picture k to k + 1) needs the dialogue: keys of `NEEDS_DIALOGUE`."""
    turn = d.turns[chain.turns[k + 1]]
    caps = {*turn.capabilities, *(c.capability for c in turn.checks if c.capability is not None)}
    own = {chain.images[k].sha256, chain.images[k + 1].sha256}
    refs = [*turn.references, *(r for c in turn.checks for r in c.references)]
    intent = turn.hidden.intent
    why = {
        "capability": bool(caps & HISTORY_CAPABILITIES),
        "reference": any(_outside(d, r, own) for r in refs),
        "reference_question": any(q.type == QuestionType.RR and q.after_turn == turn.index for q in d.questions),
        "stateless_reading": isinstance(intent, dict)
        and "stateless" in intent
        and intent["stateless"] != intent.get("op"),
        "several_turns": len(chain.word_turns[k]) > 1,
    }
    return [name for name, yes in why.items() if yes]


@dataclass
class EditSteps:
    """A dialogue's edit chains cut where a step needs the dialogue, and every step's verdict."""

    rows: list[EditChain]
    """The parts of its chains whose steps all read alone (two pictures or more)."""
    steps: list[dict[str, Any]]
    """One per step: ``{dialogue, chain, turn, from_turn, row, needs_dialogue}`` (``row``: the index
    in ``rows`` it is in; None when left out)."""
    fused: int
    """Assistant pictures made from several inputs (not steps)."""


def edit_steps(d: Dialogue) -> EditSteps:
    """The dialogue's edit chains with every step that needs the dialogue left out (`needs_dialogue`):
    a chain is cut there, so BAGEL never trains on the step, alone or joined to its neighbours."""
    chains, fused = edit_chains(d)
    rows: list[EditChain] = []
    steps: list[dict[str, Any]] = []
    for c, chain in enumerate(chains):
        start = 0
        for k in range(len(chain.instructions) + 1):
            why = needs_dialogue(d, chain, k) if k < len(chain.instructions) else ["end"]
            if why:
                if k > start:
                    rows.append(chain.part(start, k))
                start = k + 1
            if k < len(chain.instructions):
                steps.append(
                    {"dialogue": d.id, "chain": c, "turn": chain.turns[k + 1], "from_turn": chain.turns[k],
                     "row": None if why else len(rows), "needs_dialogue": why}
                )  # fmt: skip
    return EditSteps(rows, steps, fused)


# Writing -----------------------------------------------------------------------------------------


@dataclass
class _Report:
    """What an export writes beside its files: ``export.json`` and ``README.md``."""

    format: str
    title: str
    files: dict[str, str]
    not_carried: list[dict[str, str]]
    counts: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def _export(
    fmt: str,
    source: str | Path,
    out: str | Path,
    overwrite: bool,
    write: Callable[[Dataset, Path, Path], _Report],
) -> Path:
    """Run ``write(dataset, work, final)`` into a work directory beside ``out``, then move it into place.

    The same rules as `export_parquet`: ``out`` must not exist unless ``overwrite``, and then it
    must hold a yanami trainer export; the folder above it must exist; one writer per ``out``.
    """
    ds = Dataset(source)
    out = Path(out)
    if out.exists() and not overwrite:
        raise UserError(f"{out}: already exists (choose another path, or replace it with --overwrite)")
    if out.exists() and not _is_trainer_export(out):
        raise UserError(f"{out}: exists and does not hold a yanami trainer export; refusing to replace it")
    parent = out.absolute().parent
    if not parent.is_dir():
        raise UserError(f"{parent}: no such directory (yanami creates --out, not the folders above it)")
    with OutputLock(out):
        work = parent / f"{work_prefix(out)}{uuid.uuid4().hex[:8]}"
        work.mkdir()
        try:
            report = write(ds, work, Path(os.path.abspath(out)))
            side = work / "yanami"
            side.mkdir(exist_ok=True)
            shutil.copyfile(ds.root / MANIFEST, side / MANIFEST)
            _write_report(work, ds, report)
            move_into_place(work, out)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    return out


def _is_trainer_export(out: Path) -> bool:
    try:
        info = json.loads((out / EXPORT_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(info, dict) and info.get("exporter") == "yanami" and "not_carried" in info


def _dumps(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True)


def _write_report(work: Path, ds: Dataset, r: _Report) -> None:
    m = ds.manifest
    info = {
        "exporter": "yanami",
        "export_version": EXPORT_VERSION,
        "format": r.format,
        "source": {
            "manifest_sha256": sha256_hex((ds.root / MANIFEST).read_bytes()),
            "split": m.split,
            "family": m.family,
            "dialogues": m.counts.dialogues,
        },
        "files": r.files,
        "counts": r.counts,
        "not_carried": r.not_carried,
        **r.extra,
    }
    (work / EXPORT_JSON).write_text(json.dumps(info, ensure_ascii=False, indent=2, sort_keys=True) + "\n")
    lines = [f"# {r.title}", "", f"From a yanami `{m.split}` dataset of {m.counts.dialogues} dialogues.", ""]
    lines += ["## Files", ""] + [f"- `{k}`: {v}" for k, v in r.files.items()]
    lines += ["", "## Counts", ""] + [f"- {k}: {v}" for k, v in r.counts.items()]
    lines += ["", "## What this format cannot carry, and where it went", ""]
    lines += [f"- {x['what']}: {x['where']}" for x in r.not_carried]
    (work / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _image_rel(p: ImagePart) -> str:
    return f"{p.sha256[:2]}/{p.sha256}.{_EXT[p.format.value]}"


def _put_images(ds: Dataset, d: Dialogue, folder: Path) -> int:
    """Write the dialogue's pictures not yet in ``folder`` (checked on disk: memory stays flat)."""
    new = 0
    for p in d.images():
        path = folder / _image_rel(p)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(ds.image_bytes(p))
            new += 1
    return new


def _side_lines(ds: Dataset, work: Path, on_dialogue: OnDialogue) -> Iterator[tuple[str, Dialogue]]:
    """Each dialogue with its line, the line also written to ``yanami/dialogues.jsonl`` as stored."""
    (work / "yanami").mkdir(exist_ok=True)
    with open(work / "yanami" / "dialogues.jsonl", "w", encoding="utf-8", newline="\n") as side:
        for _, _, line, d in ds.records():
            side.write(line + "\n")
            yield line, d
            if on_dialogue is not None:
                on_dialogue()


def _side_files(images: str) -> dict[str, str]:
    return {
        "yanami/dialogues.jsonl": "every dialogue's line exactly as the dataset stores it (hidden state, intents, "
        f"checks, questions, meta), in order; its pictures are in {images} by SHA-256",
        "yanami/manifest.json": _MANIFEST_NOTE,
    }


_MANIFEST_NOTE = "the source dataset's manifest, verbatim (its SHA-256 is the dataset's identity)"
_LOSSLESS = "for a dataset directory again, use `yanami export --format parquet` and `yanami import`"


def _conversation_limits(side_images: str) -> list[dict[str, str]]:
    return [
        {
            "what": "hidden state and intents of turns, checks (and their predicates), references, answers' "
            "hidden intents, meta",
            "where": f"yanami/dialogues.jsonl (keyed by `id`); {_LOSSLESS}",
        },
        {
            "what": "an assistant's picture (a gpt value is text only)",
            "where": "shown as an <image> at the start of the next human value; one after the last gpt "
            f"value is left out (counted in assistant_images_left_out); every picture is in {side_images}",
        },
        {
            "what": "turn boundaries where a message is empty",
            "where": "empty messages are dropped and same-role neighbours merged (LLaVA asserts alternation)",
        },
        {
            "what": "the system prompt as a separate message",
            "where": "it opens the first human value",
        },
        {
            "what": "DSU questions asked mid-dialogue",
            "where": "one record per question, id `DIALOGUE:QUESTION`: the turns up to after_turn, the "
            "question as `yanami eval` asks it, the reference letter(s) (free questions: the answer)",
        },
    ]


def _one_picture_limits() -> list[dict[str, str]]:
    return [
        {
            "what": "more than one picture in a record (LLaVA-1.5's loader opens `image` as one path)",
            "where": "one record per picture (`ID#N`): the picture as the only <image>, everything said before "
            "as a transcript in the first human value with every other picture written `[picture N, not "
            "shown]`; a picture beside the shown one in its message gets no record of its own "
            "(pictures_not_shown); every picture is in images/, `--format llava-next` has them all",
        },
        {
            "what": "DSU questions whose conversation holds several pictures (one may be the one asked about)",
            "where": "left out (questions_left_out); in `--format llava-next`",
        },
        *(x for x in _conversation_limits("images/") if "DSU" not in x["what"]),
        {
            "what": "DSU questions",
            "where": "one record per question with at most one picture, id `DIALOGUE:QUESTION`: the last "
            "one-picture record of the turns up to after_turn, then the question as `yanami eval` asks it "
            "and the reference letter(s) (free questions: the answer)",
        },
    ]


class _Records:
    """Records written one at a time: a JSON array (LLaVA's ``--data_path``) or JSON lines."""

    def __init__(self, f: io.TextIOBase, *, as_array: bool) -> None:
        self.f, self.as_array, self.n = f, as_array, 0

    def write(self, rec: dict[str, Any]) -> None:
        text = _dumps(rec)
        self.f.write((("[\n" if not self.n else ",\n") + text) if self.as_array else text + "\n")
        self.n += 1

    def close(self) -> None:
        if self.as_array:
            self.f.write("\n]\n" if self.n else "[]\n")


def _count(c: Conversation, counts: dict[str, int]) -> None:
    counts["assistant_images_left_out"] += c.assistant_images_left_out
    counts["escaped_image_tokens"] += c.escaped_tokens
    counts["records_without_reply"] += not c.messages


def _write_conversations(
    records: Iterator[Conversation], f: io.TextIOBase, counts: dict[str, int], *, as_array: bool, as_list: bool
) -> None:
    out = _Records(f, as_array=as_array)
    for c in records:
        counts["records"] += 1
        _count(c, counts)
        if c.messages:
            out.write(c.record(_image_rel, as_list=as_list))
    out.close()


def export_llava(
    source: str | Path, out: str | Path, *, overwrite: bool = False, on_dialogue: OnDialogue = None
) -> Path:
    """LLaVA-1.5's layout: ``llava.json`` (``{id, image, conversations}``, one picture a record) and ``images/``.

    LLaVA-1.5's ``LazySupervisedDataset`` opens ``image`` as one path and its model takes one
    picture per sample, so each dialogue is cut into one record per picture (`one_picture`).
    """

    def write(ds: Dataset, work: Path, final: Path) -> _Report:
        counts = dict.fromkeys(
            [
                "dialogues",
                "records",
                "records_without_reply",
                "pictures_shown",
                "pictures_not_shown",
                "questions",
                "questions_left_out",
                "assistant_images_left_out",
                "escaped_image_tokens",
            ],
            0,
        )
        images = work / "images"
        images.mkdir()
        with open(work / "llava.json", "w", encoding="utf-8", newline="\n") as f:
            out = _Records(f, as_array=True)
            for _, d in _side_lines(ds, work, on_dialogue):
                counts["dialogues"] += 1
                _put_images(ds, d, images)
                c = conversation(d, d.turns, rid=d.id)
                _count(c, counts)
                parts = one_picture(c)
                counts["pictures_shown"] += sum(1 for p in parts if p.images)
                counts["pictures_not_shown"] += len(c.images) - sum(1 for p in parts if p.images)
                for part in parts:
                    out.write(part.record(_image_rel))
                for q in d.questions:
                    counts["questions"] += 1
                    cq = conversation(d, d.turns[: q.after_turn + 1], rid=f"{d.id}:{q.id}", question=q)
                    if len(cq.images) > 1:
                        counts["questions_left_out"] += 1
                        continue
                    last = one_picture(cq)[-1]
                    last.id = cq.id
                    out.write(last.record(_image_rel))
            out.close()
            counts["records"] = out.n
        return _Report(
            "llava",
            "yanami dialogues as LLaVA-1.5 conversations, one picture a record",
            {
                "llava.json": "a JSON list of records `{id, image, conversations}` (LLaVA's `--data_path`): "
                "`conversations` alternate `human` (even index) and `gpt` (odd index); `image` is one path under "
                "images/ and the first human value starts with the one `<image>`; a record without a picture has "
                "no `image`. Ids: `DIALOGUE#N` (N: the picture shown, 0: none) and `DIALOGUE:QUESTION`",
                "images/": "every picture of every dialogue, `images/ab/<sha256>.<ext>` (LLaVA's `--image_folder`)",
                **_side_files("images/"),
            },
            _one_picture_limits(),
            counts,
            {"reader": "haotian-liu/LLaVA llava/train/train.py LazySupervisedDataset (LLaVA-1.5)"},
        )

    return _export("llava", source, out, overwrite, write)


def export_llava_next(
    source: str | Path, out: str | Path, *, overwrite: bool = False, on_dialogue: OnDialogue = None
) -> Path:
    """LLaVA-NeXT's layout (LLaVA-OneVision, LLaVA-NeXT-Interleave): ``llava_next.json``, ``image`` a list."""

    def write(ds: Dataset, work: Path, final: Path) -> _Report:
        counts = dict.fromkeys(
            ["dialogues", "records", "records_without_reply", "assistant_images_left_out", "escaped_image_tokens"], 0
        )
        images = work / "images"
        images.mkdir()
        with open(work / "llava_next.json", "w", encoding="utf-8", newline="\n") as f:

            def records() -> Iterator[Conversation]:
                for _, d in _side_lines(ds, work, on_dialogue):
                    counts["dialogues"] += 1
                    _put_images(ds, d, images)
                    yield from conversations(d)

            _write_conversations(records(), f, counts, as_array=True, as_list=True)
        return _Report(
            "llava-next",
            "yanami dialogues as LLaVA-NeXT conversations (LLaVA-OneVision, LLaVA-NeXT-Interleave)",
            {
                "llava_next.json": "a JSON list of records `{id, image, conversations}` (LLaVA-NeXT's `--data_path`): "
                "`conversations` alternate `human` (even index) and `gpt` (odd index), each picture an `<image>` "
                "in its human value, in order; `image` is the list of their paths under images/ (absent for none)",
                "images/": "every picture of every dialogue, `images/ab/<sha256>.<ext>` (LLaVA's `--image_folder`)",
                **_side_files("images/"),
            },
            _conversation_limits("images/"),
            counts,
            {"reader": "LLaVA-VL/LLaVA-NeXT llava/train/train.py LazySupervisedDataset"},
        )

    return _export("llava-next", source, out, overwrite, write)


def export_bagel(
    source: str | Path,
    out: str | Path,
    *,
    overwrite: bool = False,
    root: str | None = None,
    shard_bytes: int = SHARD_BYTES,
    on_dialogue: OnDialogue = None,
) -> Path:
    """BAGEL's training layouts: edit chains as ``unified_edit`` Parquet, conversations as ``vlm_sft`` JSONL.

    ``root``: where the export will be when BAGEL trains on it (default: ``out``'s absolute path).
    BAGEL finds a Parquet file's row groups in ``parquet_info`` under ``os.path.join(data_dir, name)``
    and silently skips a file it does not find, so every path written is under ``root``.
    """
    pa, pq = _pyarrow()
    schema = pa.schema(
        [
            ("image_list", pa.list_(pa.binary())),
            ("instruction_list", pa.list_(pa.list_(pa.string()))),
            ("id", pa.string()),
            ("turns", pa.list_(pa.int32())),
        ]
    )

    def write(ds: Dataset, work: Path, final: Path) -> _Report:
        base = (root or final.as_posix()).rstrip("/") or "/"
        counts = dict.fromkeys(
            [
                "dialogues",
                "records",
                "records_without_reply",
                "assistant_images_left_out",
                "escaped_image_tokens",
                "edit_chains",
                "edit_steps",
                "edit_steps_kept",
                "edit_steps_left_out",
                *(f"needs_dialogue_{why}" for why in NEEDS_DIALOGUE),
                "fusion_results",
            ],
            0,
        )
        edit_dir, vlm_dir = work / "unified_edit" / BAGEL_EDIT_NAME, work / "vlm_sft"
        edit_dir.mkdir(parents=True)
        (vlm_dir / "images").mkdir(parents=True)
        (work / "yanami").mkdir()
        parts = _EditWriter(pa, pq, schema, edit_dir, shard_bytes)
        with (
            open(vlm_dir / f"{BAGEL_VLM_NAME}.jsonl", "w", encoding="utf-8", newline="\n") as f,
            open(work / "yanami" / "edit_steps.jsonl", "w", encoding="utf-8", newline="\n") as steps_file,
        ):

            def records() -> Iterator[Conversation]:
                for _, d in _side_lines(ds, work, on_dialogue):
                    counts["dialogues"] += 1
                    _put_images(ds, d, vlm_dir / "images")
                    e = edit_steps(d)
                    counts["fusion_results"] += e.fused
                    for k, row in enumerate(e.rows):
                        counts["edit_chains"] += 1
                        parts.add(ds, f"{d.id}:e{k}", row)
                    for step in e.steps:
                        counts["edit_steps"] += 1
                        counts["edit_steps_kept" if step["row"] is not None else "edit_steps_left_out"] += 1
                        for why in step["needs_dialogue"]:
                            counts[f"needs_dialogue_{why}"] += 1
                        row_id = None if step["row"] is None else f"{d.id}:e{step['row']}"
                        steps_file.write(_dumps({**step, "row": row_id}) + "\n")
                    yield from conversations(d)

            _write_conversations(records(), f, counts, as_array=False, as_list=False)
        files = parts.close()
        vlm_lines = counts["records"] - counts["records_without_reply"]
        edit_data = f"{base}/unified_edit/{BAGEL_EDIT_NAME}"
        info: dict[str, dict[str, Any]] = {}
        config: dict[str, Any] = {}
        if files:
            parquet_info = {f"{edit_data}/{name}": {"num_row_groups": g, "num_rows": n} for name, g, n in files}
            (work / "parquet_info").mkdir()
            (work / "parquet_info" / f"{BAGEL_EDIT_NAME}.json").write_text(
                json.dumps(parquet_info, indent=2, sort_keys=True) + "\n", encoding="utf-8"
            )
            info["unified_edit"] = {
                BAGEL_EDIT_NAME: {
                    "data_dir": edit_data,
                    "num_files": len(files),
                    "num_total_samples": counts["edit_chains"],
                    "parquet_info_path": f"{base}/parquet_info/{BAGEL_EDIT_NAME}.json",
                }
            }
            config["unified_edit"] = {
                "dataset_names": [BAGEL_EDIT_NAME],
                "image_transform_args": {"image_stride": 16, "max_image_size": 1024, "min_image_size": 512},
                "vit_image_transform_args": {"image_stride": 14, "max_image_size": 518, "min_image_size": 224},
                "is_mandatory": False,
                "num_used_data": [len(files)],
                "weight": 1,
            }
        if vlm_lines:
            info["vlm_sft"] = {
                BAGEL_VLM_NAME: {
                    "data_dir": f"{base}/vlm_sft/images",
                    "jsonl_path": f"{base}/vlm_sft/{BAGEL_VLM_NAME}.jsonl",
                    "num_total_samples": vlm_lines,
                }
            }
            config["vlm_sft"] = {
                "dataset_names": [BAGEL_VLM_NAME],
                "image_transform_args": {
                    "image_stride": 14,
                    "max_image_size": 980,
                    "min_image_size": 378,
                    "max_pixels": 2_007_040,
                },
                "frame_sampler_args": {"max_num_frames": 12, "min_num_frames": 8},
                "is_mandatory": True,
                "shuffle_lines": True,
                "shuffle_seed": 0,
                "num_used_data": [vlm_lines],
                "weight": 1,
            }
        (work / "dataset_info.py").write_text(
            "# Entries for BAGEL's data/dataset_info.py: merge each group into DATASET_INFO, e.g.\n"
            "#   for group, entries in YANAMI_DATASET_INFO.items():\n"
            "#       DATASET_INFO.setdefault(group, {}).update(entries)\n"
            f"YANAMI_DATASET_INFO = {json.dumps(info, indent=4, sort_keys=True)}\n",
            encoding="utf-8",
        )
        (work / "yanami.yaml").write_text(
            "# BAGEL --dataset_config_file for this export (group settings as in BAGEL's data/configs/example.yaml).\n"
            "# num_used_data must sum to more than NUM_GPUS x NUM_WORKERS: raise it to repeat the data.\n"
            + yaml.safe_dump(config, sort_keys=False, default_flow_style=False),
            encoding="utf-8",
        )
        return _Report(
            "bagel",
            "yanami dialogues in BAGEL's training layouts",
            {
                f"unified_edit/{BAGEL_EDIT_NAME}/part-NNNNN.parquet": "edit chains cut where a step needs the "
                "dialogue, one row each: `image_list` (the picture's bytes, then each edited picture's), "
                "`instruction_list` (one list of phrasings per step, one entry fewer than pictures: the user's words "
                "since the previous picture), `id` (`DIALOGUE:eK`), `turns` (each picture's turn); row groups of "
                f"{EDIT_ROWS_PER_GROUP} rows",
                f"parquet_info/{BAGEL_EDIT_NAME}.json": "each Parquet file's `num_row_groups`, keyed by the path "
                f"BAGEL looks it up under (`data_dir` + '/' + file name, data_dir under {base})",
                f"vlm_sft/{BAGEL_VLM_NAME}.jsonl": "one record per line `{id, image, conversations}`: human/gpt "
                "messages with an `<image>` per picture in human values; `image` paths are under vlm_sft/images",
                "vlm_sft/images/": "every picture of every dialogue, `ab/<sha256>.<ext>` (the vlm_sft `data_dir`)",
                "dataset_info.py": "`YANAMI_DATASET_INFO`, the entries to merge into BAGEL's `DATASET_INFO`",
                "yanami.yaml": "a `--dataset_config_file` that trains on both datasets",
                **_side_files("vlm_sft/images/"),
                "yanami/edit_steps.jsonl": "every edit step, one a line: `dialogue`, `chain`, `turn`, `from_turn` "
                "(the turns of its result and input pictures), `row` (the unified_edit row id holding it; null: "
                "left out) and `needs_dialogue` (why: " + ", ".join(f"`{k}`" for k in NEEDS_DIALOGUE) + ")",
            },
            [
                {
                    "what": "an edit step whose instruction needs the dialogue (a unified_edit step sees one picture "
                    "and its instruction); the dialogue's own annotations say which: "
                    + "; ".join(f"`{k}`: {v}" for k, v in NEEDS_DIALOGUE.items()),
                    "where": "left out of unified_edit, its chain cut there (edit_steps_left_out; needs_dialogue_* "
                    "counts each reason); each step with its reasons in yanami/edit_steps.jsonl; its conversation "
                    f"in {BAGEL_VLM_NAME}.jsonl, its pictures in vlm_sft/images",
                },
                {
                    "what": "a picture made from several inputs (fusion)",
                    "where": "not an edit step (counted in fusion_results); it starts a chain of its own; "
                    "the inputs and the result are in vlm_sft/images",
                },
                {
                    "what": "an assistant's picture in vlm_sft (its loader takes pictures in human values only)",
                    "where": "in vlm_sft it opens the next human value as an <image>; a step whose instruction "
                    "reads alone is in the edit chains of unified_edit",
                },
                *(x for x in _conversation_limits("vlm_sft/images/") if "assistant's picture" not in x["what"]),
            ],
            counts,
            {
                "bagel": {
                    "root": base,
                    "edit_files": [{"file": n, "num_row_groups": g, "num_rows": r} for n, g, r in files],
                    "vlm_lines": vlm_lines,
                    "commit_read": "ByteDance-Seed/Bagel 056b5fd51a88c1eb4547318609e25d40080fcf87",
                }
            },
        )

    return _export("bagel", source, out, overwrite, write)


def _pyarrow() -> tuple[Any, Any]:
    return pyarrow("BAGEL's edit chains are Parquet, which needs pyarrow: pip install 'yanami[hf]'")


class _EditWriter:
    """Edit-chain rows into ``part-NNNNN.parquet`` files of about ``shard_bytes``, small row groups."""

    def __init__(self, pa: Any, pq: Any, schema: Any, folder: Path, shard_bytes: int) -> None:
        self.pa, self.pq, self.schema, self.folder, self.shard_bytes = pa, pq, schema, folder, shard_bytes
        self.writer: Any = None
        self.rows: list[dict[str, Any]] = []
        self.size = 0
        self.names: list[str] = []

    def add(self, ds: Dataset, rid: str, chain: EditChain) -> None:
        if self.writer is None or self.size >= self.shard_bytes:
            self._close_file()
            self.names.append(f"part-{len(self.names):05d}.parquet")
            self.writer = self.pq.ParquetWriter(self.folder / self.names[-1], self.schema)
            self.size = 0
        data = [ds.image_bytes(p) for p in chain.images]
        self.size += sum(map(len, data))
        self.rows.append(
            {"image_list": data, "instruction_list": [[s] for s in chain.instructions], "id": rid, "turns": chain.turns}
        )
        if len(self.rows) >= EDIT_ROWS_PER_GROUP:
            self._flush()

    def _flush(self) -> None:
        if self.rows:
            self.writer.write_table(self.pa.Table.from_pylist(self.rows, schema=self.schema))
            self.rows = []

    def _close_file(self) -> None:
        if self.writer is not None:
            self._flush()
            self.writer.close()
            self.writer = None

    def close(self) -> list[tuple[str, int, int]]:
        """The files written: (name, row groups, rows)."""
        self._close_file()
        out = []
        for name in self.names:
            meta = self.pq.ParquetFile(self.folder / name).metadata
            out.append((name, int(meta.num_row_groups), int(meta.num_rows)))
        return out


# WebDataset --------------------------------------------------------------------------------------


def sample_key(dialogue_id: str) -> str:
    """A dialogue's WebDataset key: its id with ``.`` as ``~`` (WebDataset ends a key at the first dot)."""
    return dialogue_id.replace(".", "~")


def _tar_add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(data))


class _TarShards:
    """``shard-NNNNNN.tar`` files in a folder, a new one once the current holds ``shard_bytes``."""

    def __init__(self, folder: Path, shard_bytes: int) -> None:
        self.folder, self.shard_bytes = folder, shard_bytes
        self.names: list[str] = []
        self.tar: tarfile.TarFile | None = None

    def next_sample(self) -> tarfile.TarFile:
        """The tar the next sample goes into (a sample is never split between shards)."""
        if self.tar is None or self.tar.offset >= self.shard_bytes:
            self.close()
            self.names.append(f"shard-{len(self.names):06d}.tar")
            self.tar = tarfile.TarFile(self.folder / self.names[-1], "w", format=tarfile.GNU_FORMAT)
        return self.tar

    def close(self) -> None:
        if self.tar is not None:
            self.tar.close()
            self.tar = None

    def __enter__(self) -> _TarShards:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


DIALOGUE_MEMBER = "dialogue.txt"
"""A WebDataset sample's dialogue line. Text, not ``.json``: HF's ``webdataset`` builder would decode
JSON into nested columns, and a dialogue's free-form JSON (hidden state, intents) has no one Arrow type."""
PICTURES_MEMBER = "pictures.tar"
"""A WebDataset sample's pictures, all in one member: a tar of ``N.<ext>``. Every sample has the same two
members, which HF's ``webdataset`` builder requires (dialogues hold different numbers of pictures)."""


def _pictures_tar(ds: Dataset, d: Dialogue) -> tuple[bytes, int]:
    """The dialogue's distinct pictures as one tar (``N.<ext>`` in order of first appearance), and how many."""
    buf = io.BytesIO()
    seen: list[str] = []
    with tarfile.TarFile(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for p in d.images():
            if p.sha256 not in seen:
                _tar_add(tar, f"{len(seen)}.{_EXT[p.format.value]}", ds.image_bytes(p))
                seen.append(p.sha256)
    return buf.getvalue(), len(seen)


def export_webdataset(
    source: str | Path,
    out: str | Path,
    *,
    overwrite: bool = False,
    shard_bytes: int = SHARD_BYTES,
    on_dialogue: OnDialogue = None,
) -> Path:
    """WebDataset tar shards, one sample per dialogue: ``KEY.dialogue.txt`` (its line), ``KEY.pictures.tar``."""

    def write(ds: Dataset, work: Path, final: Path) -> _Report:
        counts = dict.fromkeys(["dialogues", "images"], 0)
        layout: list[list[Any]] = []
        with _TarShards(work, shard_bytes) as tars:
            for rel, _, line, d in ds.records():
                tar = tars.next_sample()
                key = sample_key(d.id)
                pictures, n = _pictures_tar(ds, d)
                _tar_add(tar, f"{key}.{DIALOGUE_MEMBER}", line.encode("utf-8"))
                _tar_add(tar, f"{key}.{PICTURES_MEMBER}", pictures)
                counts["dialogues"] += 1
                counts["images"] += n
                if layout and layout[-1][0] == rel:
                    layout[-1][1] += 1
                else:
                    layout.append([rel, 1])
                if on_dialogue is not None:
                    on_dialogue()
        shards = tars.names
        return _Report(
            "webdataset",
            "yanami dialogues as WebDataset shards",
            {
                "shard-NNNNNN.tar": f"one sample per dialogue, the same two files in each: `KEY.{DIALOGUE_MEMBER}` "
                f"(the dialogue's line exactly as the dataset stores it, UTF-8 JSON) and `KEY.{PICTURES_MEMBER}` (a "
                "tar of its distinct pictures, `N.<ext>` in order of first appearance, N from 0, the stored bytes; "
                "empty for none); KEY is the dialogue id with `.` written as `~`. Read by the `webdataset` package "
                "and by `datasets.load_dataset('webdataset', data_files=...)` (columns `dialogue.txt`, a string, "
                "and `pictures.tar`, bytes)",
                "yanami/manifest.json": _MANIFEST_NOTE,
            },
            [
                {
                    "what": "nothing of the dialogues: every line and picture is in the shards as stored",
                    "where": "the shards; the dataset's shard layout is `dialogue_shards` below, its manifest "
                    "yanami/manifest.json",
                }
            ],
            {**counts, "shards": len(shards)},
            {"dialogue_shards": layout, "tar_shards": shards},
        )

    return _export("webdataset", source, out, overwrite, write)


def read_pictures(data: bytes) -> list[bytes]:
    """The pictures of a sample's ``pictures.tar``, in order."""
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = sorted(tar.getmembers(), key=lambda m: int(m.name.split(".", 1)[0]))
        return [_read_member(tar, m) for m in members]


def _read_member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    data = tar.extractfile(member)
    assert data is not None
    return data.read()


def read_webdataset(folder: str | Path) -> Iterator[tuple[str, list[bytes]]]:
    """The dialogue lines and picture bytes of a WebDataset export, in order (stdlib ``tarfile`` only)."""
    folder = Path(folder)
    for shard in sorted(folder.glob("shard-*.tar")):
        with tarfile.open(shard) as tar:
            line: str | None = None
            for member in tar:
                if member.name.endswith(f".{DIALOGUE_MEMBER}"):
                    line = _read_member(tar, member).decode("utf-8")
                elif member.name.endswith(f".{PICTURES_MEMBER}"):
                    if line is None:
                        raise UserError(f"{shard}: {member.name} comes without its {DIALOGUE_MEMBER} before it")
                    yield line, read_pictures(_read_member(tar, member))
                    line = None
