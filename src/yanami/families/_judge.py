"""The judge of a benchmark graded by its own protocol (WEAVE, IMUG-Bench): what they share.

`ProtocolJudge` holds what every such family's judge needs: the VLM judge it asks, the bench,
the benchmark's own prompts where the user gave ``--protocol-source`` (`ProtocolSource`), the
references a turn compares with, and the one method `grade`. Each family's folder subclasses
it with its own grading (`yanami.families.weave.judge`, `yanami.families.imug.judge`) and
its own prompts, and registers `make_judge` as its family's judge hook.

A reference to the model's own earlier output uses what this run produced there; where it
produced nothing, the dataset's image stands in where there is one (a WEAVE key's picture),
else it is left out (an IMUG-Bench output reference), and the verdict's reason says so.
"""

from __future__ import annotations

import hashlib
import io
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from PIL import Image, ImageOps
from pydantic import BaseModel

from yanami.contract import (
    NOT_SCORED,
    SOURCE_MARK,
    CheckResult,
    Dialogue,
    ImagePart,
    InputImage,
    InputText,
    JudgeError,
    Output,
    OwnHistory,
    TextPart,
    Turn,
    TurnRef,
    UserError,
    Verdict,
    family_of,
)
from yanami.families._sources import ProtocolSource
from yanami.judges import JudgeContext, VLMJudge, input_image, own_judge, vlm_judge
from yanami.models import looks_like_config
from yanami.store import Dataset

FAMILY_PROMPT_VERSION = "v2"


FAMILY_RULES_VERSION = "2"
"""Bumped when a family's rules change what a verdict holds (2: IMUG-Bench's format weight read
literally, with the options' own texts; an ``input`` reference is the first picture)."""

Earlier = Callable[[int], tuple[bytes | None, str | None]]
"""turn -> the model's own (image bytes, text) there in this run; (None, None) if it gave nothing."""


@dataclass
class Grade:
    """A family turn's grade: the protocol's metrics, per-check scores where it has them."""

    scores: dict[str, float]
    score: float | None = None
    """A text turn's score, 0-1 (IMUG-Bench: the paper's MCQ score)."""
    checks: list[CheckResult] | None = None
    reason: str = ""


_Reply = TypeVar("_Reply", bound=BaseModel)


@dataclass(frozen=True)
class CodeCall:
    """How a benchmark's own code calls its judge: what ``--protocol-source`` follows."""

    where: str
    """The code's file that makes the call, for messages."""
    temperature: float | None
    """The temperature it sends (None: none, the server's default)."""
    max_tokens: int | None
    """The token limit it sends (None: none)."""
    reads: Callable[[str], str]
    """How it finds the JSON in a reply (its text; ValueError where it finds none)."""
    jpeg_quality: int | None = None
    """It re-encodes every picture as an RGB JPEG of this quality, turned upright by its EXIF
    orientation first, before sending it (None: the picture's own bytes)."""

    def parse(self, text: str, schema: type[BaseModel]) -> Any:
        """A reply read as the code reads it, then validated by ``schema`` (ValueError if not)."""
        return schema.model_validate_json(self.reads(text))


class NotScoredByCode(Exception):
    """The benchmark's own code would score nothing for this item; the message says why."""


class ProtocolJudge(ABC):
    """A benchmark's own protocol; a VLM judge for what needs judgement (subclassed per family)."""

    PROMPTS: ClassVar[str] = ""
    """The package whose ``prompts/`` folder holds the family's own versioned prompts."""
    CODE: ClassVar[CodeCall]
    """How the benchmark's own code calls its judge (followed with ``--protocol-source``)."""

    def __init__(self, vlm: VLMJudge | None, bench: Dataset, source: ProtocolSource | None = None) -> None:
        self.vlm = vlm
        self.bench = bench
        self.source = source
        self.name = vlm.name if vlm is not None else "rules"
        base = vlm.version if vlm is not None else "rules"
        prompts = f"families-{FAMILY_PROMPT_VERSION}"
        if source is not None:
            prompts = f"{source.family}-{SOURCE_MARK}-{source.digest[:12]}"
        self.version = f"{base}+{prompts}.{FAMILY_RULES_VERSION}"
        """``...+families-v2.N``: yanami's own prompts; ``...+weave-source-<digest>.N``: the benchmark's."""
        self.settings = vlm.settings if vlm is not None else None

    def _ask(
        self, item: str, parts: list[InputText | InputImage], schema: type[_Reply], system: str | None = None
    ) -> _Reply:
        """The VLM judge's reply, validated by ``schema``: yanami's call (temperature 0, seed 0, one
        repair request), or, with ``--protocol-source``, the benchmark's code's (`CODE`: its
        parameters, its pictures, no repair; a reply that does not parse is `NotScoredByCode`)."""
        if self.vlm is None:
            raise JudgeError(f"{item}: this needs a VLM judge (--judge FILE); the rules alone cannot grade it")
        if self.source is None:
            reply: _Reply = self.vlm._ask(item, parts, schema, system)
            return reply
        code = self.CODE
        sent = [code_picture(p, code.jpeg_quality) if isinstance(p, InputImage) else p for p in parts]
        try:
            as_code: _Reply = self.vlm.ask_once(item, sent, schema, system, max_tokens=code.max_tokens,
                                                parse=code.parse)  # fmt: skip
        except ValueError:
            raise NotScoredByCode(f"the judge's reply does not parse as {code.where} reads it") from None
        return as_code

    def grade(self, d: Dialogue, output: Output, history: OwnHistory) -> Verdict:
        """The family's protocol on the model's output for a target turn (an image, or the text of
        a reply), with ``history.earlier`` giving its own outputs at the dialogue's earlier turns."""
        try:
            g = self._grade(d, d.turns[output.turn], output.image, output.text, history.earlier)
        except NotScoredByCode as exc:
            g = Grade({}, reason=f"{NOT_SCORED}: {exc}")
        return Verdict(
            item=output.item,
            judge=self.name,
            judge_version=self.version,
            status="ok",
            score=g.score,
            checks=g.checks,
            scores=g.scores,
            reason=g.reason,
        )

    @abstractmethod
    def _grade(self, d: Dialogue, turn: Turn, image: bytes | None, text: str | None, earlier: Earlier) -> Grade:
        """Grade the model's output for a target turn (an image, or the text of a reply): each
        family's judge grades by its own protocol."""

    @classmethod
    def needs_judgement(cls, d: Dialogue) -> str | None:
        """The first of a dialogue's target turns that only a VLM judge can grade (``id/tN (what
        it is)``), None where the benchmark's rules grade them all. By default every one does."""
        turn = next((t for t in d.turns if t.checks or t.answer is not None), None)
        return None if turn is None else f"{d.id}/t{turn.index}"

    @classmethod
    def load_source(cls, root: Path) -> dict[str, str]:
        """The benchmark's own prompts in its repository checkout ``root``, by name."""
        raise UserError(f"--protocol-source: {cls.__name__} reads no prompts of its benchmark")

    def family_prompt(self, name: str) -> str:
        """A prompt of the family shipped with yanami, e.g. ``weave-key-point``."""
        path = files(self.PROMPTS).joinpath("prompts", f"{name}-{FAMILY_PROMPT_VERSION}.txt")
        return path.read_text(encoding="utf-8")

    # references --------------------------------------------------------------------------

    def _refs(self, d: Dialogue, refs: list[TurnRef], earlier: Earlier, notes: list[str]) -> list[InputImage]:
        out: list[InputImage] = []
        for ref in refs:
            msg = d.turns[ref.turn].user if ref.side == "user" else d.turns[ref.turn].assistant
            data_parts = [p for p in msg.parts if isinstance(p, ImagePart)]
            if ref.image is not None:
                data_parts = data_parts[ref.image : ref.image + 1]
            if ref.of == "model":
                own, _ = earlier(ref.turn)
                if own is not None:
                    out.append(input_image(own))
                    continue
                if not data_parts:
                    notes.append(f"turn {ref.turn}'s own image is missing (the model gave none): left out")
                    continue
                notes.append(f"turn {ref.turn}'s own image is missing: the dataset's image stands in")
            out += [self._bench_image(p) for p in data_parts]
        return out

    def _bench_image(self, p: ImagePart) -> InputImage:
        return InputImage(self.bench.image_bytes(p), p.sha256, p.width, p.height)

    # the benchmark's own prompts (--protocol-source), laid out as its evaluator lays them out -----

    def _prompt(self, name: str) -> str:
        assert self.source is not None
        return self.source.prompts[name]


def code_picture(image: InputImage, jpeg_quality: int | None) -> InputImage:
    """A picture as a benchmark's code sends it: its own bytes, or re-encoded as an RGB JPEG of
    ``jpeg_quality`` (what the request then carries, and its digest)."""
    if jpeg_quality is None:
        return image
    with Image.open(io.BytesIO(image.data)) as img:
        buf = io.BytesIO()
        upright = ImageOps.exif_transpose(img) or img
        upright.convert("RGB").save(buf, format="JPEG", quality=jpeg_quality)
    data = buf.getvalue()
    return InputImage(data, hashlib.sha256(data).hexdigest(), image.width, image.height)


def make_protocol_judge(cls: type[ProtocolJudge], spec: str, context: JudgeContext) -> ProtocolJudge:
    """A family's judge hook (a `yanami.judges.JudgeFactory` once ``cls`` is bound): its protocol
    over the VLM judge SPEC names, asking the benchmark's own prompts from the context's
    ``protocol_source`` (a checkout of its repository) where given."""
    dataset = context.dataset
    if dataset is None:
        raise UserError(f"--judge {spec}: a family's judge grades a bench, and none was given")
    facts = family_of(dataset.manifest.family)
    source = None
    if context.protocol_source is not None:
        root = Path(context.protocol_source)
        if not root.is_dir():
            raise UserError(f"--protocol-source: {root}: not a directory")
        source = ProtocolSource(facts.family, root, cls.load_source(root))
    if spec == "exact":  # the default: the benchmark's rules alone, where they grade every turn of the run
        needs = next((why for d in dataset if (why := cls.needs_judgement(d)) is not None), None)
        if needs is not None:
            raise UserError(f"{dataset.root}: {needs} of this {facts.title} bench needs a VLM judge: --judge FILE "
                            "(docs/benchmarks.md)")  # fmt: skip
        return cls(None, dataset, source)
    # with the benchmark's code, its judge is asked at the temperature the code sends (or none)
    code = source is not None and looks_like_config(spec)
    vlm = vlm_judge(spec, context, temperature=cls.CODE.temperature) if code else own_judge(spec, context)
    if not isinstance(vlm, VLMJudge):
        raise UserError(f"--judge {spec}: a {facts.title} bench needs a VLM judge (a model config file)")
    return cls(vlm, dataset, source)


def request_text(turn: Turn) -> str:
    """A turn's user text (its images are shown apart)."""
    return "\n".join(p.text for p in turn.user.parts if isinstance(p, TextPart))
