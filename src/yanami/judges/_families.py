"""Grading WEAVE and IMUG-Bench turns by their own protocols (docs/benchmarks.md).

What a rule decides is decided here without a model: IMUG-Bench's multiple-choice answers
(`yanami.judges._family_rules.mcq_paper` and ``mcq_code``) and its Geometric Coloring grids. What
needs judgement goes to a VLM judge (a config file, ``--judge FILE``) through prompts written for
yanami from the published rubrics, versioned in ``prompts/``:

- WEAVE image turn: the key-point checklist, visual consistency against the references the
  key points name, and image quality, each 0-10 (three calls, as WEAVE's evaluator makes);
- WEAVE text turn: accuracy against the standard answer, 0, 5 or 10;
- IMUG-Bench image turn: every evaluation point 0-5 in one call, with the images the turn
  refers to before the produced one;
- IMUG-Bench dynamic answer: the correct letters, resolved from what the model itself produced
  in the turns the answer depends on.

A reference to the model's own earlier output uses what this run produced there; where it
produced nothing, WEAVE's reference falls back to the dataset's image and IMUG-Bench's is left
out, and the verdict's reason says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from yanami.families import SOURCE_MARK
from yanami.judges._family_rules import (
    grid_points,
    imug_image_score,
    is_grid_task,
    mcq_code,
    mcq_paper,
    question_options,
    read_grid,
    read_grid_code,
    resolved_answer,
)
from yanami.judges._sources import ProtocolSource
from yanami.judges._vlm import VLMJudge, _image, fence_code
from yanami.models import InputImage, InputText, JudgeError, Output, OwnHistory
from yanami.run_format import CheckResult, Verdict
from yanami.schema import CheckKind, Dialogue, Family, ImagePart, TextPart, Turn, TurnRef
from yanami.store import Dataset

FAMILY_PROMPT_VERSION = "v1"


FAMILY_RULES_VERSION = "2"
"""Bumped when a family's rules change what a verdict holds (2: IMUG-Bench's format weight read
literally, with the options' own texts; an ``input`` reference is the first picture)."""

Earlier = Callable[[int], tuple[bytes | None, str | None]]
"""turn -> the model's own (image bytes, text) there in this run; (None, None) if it gave nothing."""


def family_prompt(name: str) -> str:
    """A family prompt shipped with the package, e.g. ``weave-key-point``."""
    path = files("yanami.judges").joinpath("prompts", f"{name}-{FAMILY_PROMPT_VERSION}.txt")
    return path.read_text(encoding="utf-8")


class _Score(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    score: int = Field(ge=0, le=10)
    reason: str = ""


class _Accuracy(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    score: Literal[0, 5, 10]
    reason: str = ""


class _Points(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    scores: dict[str, int]
    reason: str = ""


class _Letters(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    letters: str = Field(pattern=r"^[A-Ga-g ,]*$")
    reason: str = ""


@dataclass
class Grade:
    """A family turn's grade: the protocol's metrics, per-check scores where it has them."""

    scores: dict[str, float]
    score: float | None = None
    """A text turn's score, 0-1 (IMUG-Bench: the paper's MCQ score)."""
    checks: list[CheckResult] | None = None
    reason: str = ""


class FamilyJudge:
    """WEAVE's and IMUG-Bench's protocols; a VLM judge for what needs judgement."""

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
        """``...+families-v1.N``: yanami's own prompts; ``...+weave-source-<digest>.N``: the benchmark's."""
        self.settings = vlm.settings if vlm is not None else None

    def _ask(
        self, item: str, parts: list[InputText | InputImage], schema: type[BaseModel], system: str | None = None
    ) -> Any:
        if self.vlm is None:
            raise JudgeError(f"{item}: this needs a VLM judge (--judge FILE); the rules alone cannot grade it")
        return self.vlm._ask(item, parts, schema, system)

    def grade(self, d: Dialogue, output: Output, history: OwnHistory) -> Verdict:
        """The family's protocol on the model's output for a target turn (an image, or the text of
        a reply), with ``history.earlier`` giving its own outputs at the dialogue's earlier turns."""
        g = self._grade(d, d.turns[output.turn], output.image, output.text, history.earlier)
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

    def _grade(self, d: Dialogue, turn: Turn, image: bytes | None, text: str | None, earlier: Earlier) -> Grade:
        """Grade the model's output for a target turn (an image, or the text of a reply)."""
        if d.family == Family.WEAVE and self.source is not None:
            if turn.answer:
                return self._weave_reply_source(d, turn, text or "")
            return self._weave_image_source(d, turn, image, earlier)
        if d.family == Family.WEAVE:
            return self._weave_reply(d, turn, text or "") if turn.answer else self._weave_image(d, turn, image, earlier)
        if d.family == Family.IMUG:
            if turn.answer is not None:
                return self._imug_reply(d, turn, text or "", earlier)
            return self._imug_image(d, turn, image, earlier)
        raise JudgeError(f"{d.id}: no family protocol for {d.family}")

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
                    out.append(_image(own))
                    continue
                if not data_parts:
                    notes.append(f"turn {ref.turn}'s own image is missing (the model gave none): left out")
                    continue
                notes.append(f"turn {ref.turn}'s own image is missing: the dataset's image stands in")
            out += [self._bench_image(p) for p in data_parts]
        return out

    def _bench_image(self, p: ImagePart) -> InputImage:
        return InputImage(self.bench.image_bytes(p), p.sha256, p.width, p.height)

    # WEAVE ---------------------------------------------------------------------------------

    def _weave_image(self, d: Dialogue, turn: Turn, image: bytes | None, earlier: Earlier) -> Grade:
        assert image is not None
        item, request = f"{d.id}/t{turn.index}", _request(turn)
        notes: list[str] = []
        candidate = _image(image)
        references: list[InputText | InputImage] = []
        for n, c in enumerate(turn.checks, 1):
            for ref in self._refs(d, c.references, earlier, notes):
                references += [InputText(f"Reference for requirement {n}:"), ref]
        requirements = "\n".join(f"{n}. {c.text}" for n, c in enumerate(turn.checks, 1))
        kp = self._ask(
            item,
            [InputText(family_prompt("weave-key-point").format(request=request, requirements=requirements)),
             InputText("Produced image:"), candidate, *references],
            _Score,
        )  # fmt: skip
        vc = self._ask(
            item,
            [InputText(family_prompt("weave-visual-consistency").format(request=request)),
             InputText("Produced image:"), candidate, *references],
            _Score,
        )  # fmt: skip
        iq = self._ask(item, [InputText(family_prompt("weave-image-quality")), candidate], _Score)
        scores = {"key_point": float(kp.score), "visual_consistency": float(vc.score), "image_quality": float(iq.score)}
        return Grade(scores, reason="; ".join([kp.reason, *notes]))

    def _weave_reply(self, d: Dialogue, turn: Turn, text: str) -> Grade:
        assert turn.answer is not None
        prompt = family_prompt("weave-accuracy").format(
            question=_request(turn), reference=turn.answer.text, prediction=text, fence=fence_code(text)
        )
        out = self._ask(f"{d.id}/t{turn.index}", [InputText(prompt)], _Accuracy)
        return Grade({"accuracy": float(out.score)}, reason=out.reason)

    # IMUG-Bench ----------------------------------------------------------------------------

    def _imug_image(self, d: Dialogue, turn: Turn, image: bytes | None, earlier: Earlier) -> Grade:
        assert image is not None
        grids = [c.hidden.predicate for c in turn.checks if isinstance(c.hidden.predicate, dict)]
        if is_grid_task(d.domain, d.subdomain) and grids and len(grids) == len(turn.checks):
            truth: list[list[str]] = grids[0]["grid"]  # type: ignore[assignment]  # checked at import
            found = read_grid(image)
            points = grid_points(found, truth, len(turn.checks))
            reason = f"grid read: {found}" if found is not None else "no grid found"
            # IMUG-Bench's own analyzer reads some drawings otherwise (`read_grid_code`): both are kept
            code = read_grid_code(image)
            code_points = grid_points(code, truth, len(turn.checks))
            reason += f"; IMUG-Bench's analyzer reads {code}" if code != found else ""
        elif self.source is not None:
            points, reason = self._imug_points_source(d, turn, image, earlier)
            code_points = points
        else:
            notes: list[str] = []
            refs = self._refs(d, turn.references, earlier, notes)
            listing = "".join(f"Image {k}: reference\n" for k in range(1, len(refs) + 1))
            references = f"The images before the last are references for this turn:\n{listing}\n" if refs else ""
            text = family_prompt("imug-points").format(
                request=_request(turn),
                references=references,
                points="\n".join(f"{n}. {c.text}" for n, c in enumerate(turn.checks, 1)),
            )
            out = self._ask(f"{d.id}/t{turn.index}", [InputText(text), *refs, _image(image)], _Points)
            want = {str(n) for n in range(1, len(turn.checks) + 1)}
            top = CheckKind.EVALUATION_POINT.scale
            if set(out.scores) != want or any(not 0 <= v <= top for v in out.scores.values()):
                raise JudgeError(f"{self.name}: the scores must name points 1-{len(turn.checks)}, each 0-{top}")
            points = code_points = [out.scores[str(n)] for n in range(1, len(turn.checks) + 1)]
            reason = "; ".join([out.reason, *notes])
        checks = [
            CheckResult(id=c.id, kind=c.kind.value, capability=None, passed=None, score=float(p))
            for c, p in zip(turn.checks, points, strict=True)
        ]
        scores = {"image": imug_image_score(points), "image_code": imug_image_score(code_points)}
        return Grade(scores, checks=checks, reason=reason)

    def _imug_reply(self, d: Dialogue, turn: Turn, text: str, earlier: Earlier) -> Grade:
        answer = turn.answer
        assert answer is not None
        expected = "".join(answer.letters)
        reason = ""
        if answer.dynamic:
            resolve = self._resolve_source if self.source is not None else self._resolve
            expected, reason = resolve(d, turn, earlier)
        letters = sorted(set(expected))
        paper = mcq_paper(text, letters, question_options(_request(turn)))
        # the public code compares with the stored answer: the source's text, or the resolved letters
        code = mcq_code(text, answer.text if not answer.dynamic else expected)
        why = f"expected {','.join(letters) or 'nothing'}" + (f" (resolved: {reason})" if answer.dynamic else "")
        return Grade({"mcq": paper, "mcq_code": code}, score=paper, reason=why)

    def _resolve(self, d: Dialogue, turn: Turn, earlier: Earlier) -> tuple[str, str]:
        answer = turn.answer
        assert answer is not None
        lines: list[str] = []
        images: list[InputText | InputImage] = []
        for ref in sorted({r.turn for r in turn.references}):
            own_image, own_text = earlier(ref)
            if own_image is not None:
                images += [InputText(f"Image {len(images) // 2 + 1} (turn {ref}):"), _image(own_image)]
                said = f"[image {len(images) // 2}]"
            else:
                said = own_text if own_text is not None else "(nothing: the model gave no output)"
            lines.append(f"Turn {ref}: asked: {_request(d.turns[ref])} | produced: {said}")
        several = d.subdomain == "natural_growth"  # the public code's one multiple-answer task
        kind = "Several options may be correct." if several else "Exactly one option is correct."
        prompt = family_prompt("imug-dynamic").format(
            context="\n".join(lines), turn=turn.index, question=_request(turn), kind=kind
        )
        out = self._ask(f"{d.id}/t{turn.index}/dynamic", [InputText(prompt), *images], _Letters)
        return resolved_answer(answer.letters, out.letters), out.reason

    # the benchmark's own prompts (--protocol-source), laid out as its evaluator lays them out -----

    def _prompt(self, name: str) -> str:
        assert self.source is not None
        return self.source.prompts[name]

    def _weave_image_source(self, d: Dialogue, turn: Turn, image: bytes | None, earlier: Earlier) -> Grade:
        """WEAVE's ``eval/main.py``: the checklist and consistency prompts followed by the numbered
        key points, the produced image and then each key's picture (in key order) put where the
        text says ``<image>``; the quality prompt with the produced image alone."""
        assert image is not None
        item = f"{d.id}/t{turn.index}"
        notes: list[str] = []
        candidate = _image(image)
        refs = [img for c in turn.checks for img in self._refs(d, c.references, earlier, notes)]
        points = "\n".join(f"{n}. {c.text}" for n, c in enumerate(turn.checks, 1))
        scores: dict[str, float] = {}
        reasons: list[str] = []
        for metric, name, images in (
            ("key_point", "prompt_keypoint_checklist", [candidate, *refs]),
            ("visual_consistency", "prompt_visual_consistency", [candidate, *refs]),
            ("image_quality", "prompt_image_quality", [candidate]),
        ):
            text = self._prompt(name) + (points if metric != "image_quality" else "")
            out = self._ask(item, _packed(text, images, item), _SourceScore)
            scores[metric] = float(out.score)
            reasons.append(out.reasoning)
        return Grade(scores, reason="; ".join([reasons[0], *notes]))

    def _weave_reply_source(self, d: Dialogue, turn: Turn, text: str) -> Grade:
        assert turn.answer is not None
        item = f"{d.id}/t{turn.index}"
        try:
            prompt = self._prompt("prompt_txt_acc").format(standard_answer=turn.answer.text, generated_answer=text)
        except (KeyError, IndexError, ValueError) as exc:
            raise JudgeError(f"{item}: WEAVE's accuracy prompt does not format ({exc!r})") from None
        out = self._ask(item, [InputText(prompt)], _SourceAccuracy)
        return Grade({"accuracy": float(out.score)}, reason=out.reasoning)

    def _imug_points_source(self, d: Dialogue, turn: Turn, image: bytes, earlier: Earlier) -> tuple[list[int], str]:
        """IMUG-Bench's ``score_image.py``: its prompt as the system message; the references found,
        then the produced image, then the sequence description, the turn's first text and the
        numbered evaluation points."""
        notes: list[str] = []
        images: list[InputImage] = []
        described: list[str] = []
        for ref in turn.references:
            found = self._refs(d, [ref], earlier, notes)
            if found:
                kind = "input" if ref.side == "user" else "output"
                images.append(found[0])
                described.append(f"Image_{len(images)} (Turn {_number(d.turns[ref.turn])} {kind} image)")
        images.append(_image(image))
        described.append(f"Image_{len(images)} (Target Image)")
        listing = "".join(f"- {x}\n" for x in described)
        points = "\n".join(f"{n}. {c.text}" for n, c in enumerate(turn.checks, 1))
        text = (
            f"Sequence description:\n{listing}\n[Task Instruction Recap]:\n{_first_text(turn)}\n\n"
            f"[Evaluation Points List]:\n{points}\n\nPlease output JSON results."
        )
        item = f"{d.id}/t{turn.index}"
        out = self._ask(item, [*images, InputText(text)], _SourcePoints, system=self._prompt("points"))
        by_id = {str(r.point_id): r.score for r in out.evaluation_results}
        want = [str(n) for n in range(1, len(turn.checks) + 1)]
        top = CheckKind.EVALUATION_POINT.scale
        if sorted(by_id) != sorted(want) or any(not 0 <= v <= top for v in by_id.values()):
            raise JudgeError(f"{self.name}: the evaluation results must name points 1-{len(want)}, each 0-{top}")
        return [round(by_id[n]) for n in want], "; ".join(notes)

    def _resolve_source(self, d: Dialogue, turn: Turn, earlier: Earlier) -> tuple[str, str]:
        """IMUG-Bench's ``resolve_dynamic_answers.py``: its prompt as the system message; each
        referenced turn's first text and, where the model drew a picture there, that picture, else
        the benchmark's stored answer of that turn (as its code does); then the target question."""
        answer = turn.answer
        assert answer is not None
        context = "### REFERENCE CONTEXT PROVIDED ###\n"
        images: list[InputImage] = []
        for ref in sorted({r.turn for r in turn.references}):
            own_image, _ = earlier(ref)
            if own_image is not None:
                images.append(_image(own_image))
                said = f"[IMAGE_RESPONSE: See Image_{len(images)}]"
            else:
                stored = d.turns[ref].answer
                said = stored.text if stored is not None else "[Text Response]"
            question = _first_text(d.turns[ref]) or "[Visual Input]"
            context += f"Turn {_number(d.turns[ref])}: Q: {question} | AI Resp: {said}\n"
        several = d.domain == "Botany" and d.subdomain == "natural_growth"
        prompt = (
            f"{context}\n### TARGET QUESTION (Turn {_number(turn)}) ###\nQuestion: {_first_text(turn)}\n"
            f"Type: {'MULTIPLE-CHOICE' if several else 'SINGLE-CHOICE'}\n"
            "Identify the correct options based on the images provided."
        )
        item = f"{d.id}/t{turn.index}/dynamic"
        out = self._ask(item, [InputText(prompt), *images], _SourceAnswer, system=self._prompt("dynamic"))
        return resolved_answer(answer.letters, str(out.determined_answer)), out.reasoning


class _SourceScore(BaseModel):
    """WEAVE's reply: a JSON object of a score 0-10 and its reasoning (other fields are ignored,
    as its code ignores them)."""

    model_config = ConfigDict(extra="ignore")
    score: float = Field(ge=0, le=10)
    reasoning: str = ""


class _SourceAccuracy(_SourceScore):
    score: Literal[0, 5, 10]  # type: ignore[assignment]


class _SourcePoint(BaseModel):
    model_config = ConfigDict(extra="ignore")
    point_id: int | str
    score: float


class _SourcePoints(BaseModel):
    model_config = ConfigDict(extra="ignore")
    evaluation_results: list[_SourcePoint]


class _SourceAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    determined_answer: str | list[str] = ""
    reasoning: str = ""


def _packed(text: str, images: list[InputImage], item: str) -> list[InputText | InputImage]:
    """WEAVE's ``pack_prompt_with_path``: the text split at each ``<image>``, the images in order
    put there (images beyond the placeholders are not sent; too few is an error, as there)."""
    pieces = text.split("<image>")
    if len(pieces) - 1 > len(images):
        raise JudgeError(f"{item}: WEAVE's prompt names {len(pieces) - 1} images; the turn has {len(images)}")
    out: list[InputText | InputImage] = []
    for k, piece in enumerate(pieces):
        if piece:
            out.append(InputText(piece))
        if k < len(pieces) - 1:
            out.append(images[k])
    return out


def _first_text(turn: Turn) -> str:
    """The turn's first text, as IMUG-Bench's scorers read ``input[0]["text"]``."""
    return next((p.text for p in turn.user.parts if isinstance(p, TextPart)), "")


def _number(turn: Turn) -> int:
    """A turn's number in its source (IMUG-Bench's ``turn``), else its index."""
    intent = turn.hidden.intent if isinstance(turn.hidden.intent, dict) else {}
    number = intent.get("turn")
    return number if isinstance(number, int) and not isinstance(number, bool) else turn.index


def _request(turn: Turn) -> str:
    """A turn's user text (its images are shown apart)."""
    return "\n".join(p.text for p in turn.user.parts if isinstance(p, TextPart))
