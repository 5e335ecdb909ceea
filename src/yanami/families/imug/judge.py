"""IMUG-Bench's protocol (``ccccEsion/IMUG-Bench``, ``scripts/auxiliary/``): how its turns are graded.

What a rule decides is decided without a model: multiple-choice answers (`rules.mcq_paper`, the
headline, and `rules.mcq_code`) and Geometric Coloring's grids (`rules.read_grid` and
`rules.read_grid_code`). What needs judgement goes to a VLM judge: an image turn's evaluation
points, 0-5 each, in one call with the pictures the turn refers to before the produced one; a
dynamic answer's letters, resolved from what the model itself produced in the turns it depends
on. With yanami's own prompts (``prompts/``), or IMUG-Bench's own, read from the user's checkout
(``--protocol-source``: its ``eval_prompt.txt`` and ``dynamic_prompt.txt`` as the system message).
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import cast

from pydantic import BaseModel, ConfigDict, Field

from yanami.contract import CheckResult, Dialogue, InputImage, InputText, JudgeError, TextPart, Turn
from yanami.families._judge import (
    CodeCall,
    Earlier,
    Grade,
    NotScoredByCode,
    ProtocolJudge,
    make_protocol_judge,
    request_text,
)
from yanami.families._sources import prompt_file
from yanami.families.imug import EVALUATION_POINT, FACTS
from yanami.families.imug.rules import (
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
from yanami.judges import fence_code, input_image

PROMPT_FILES = {"points": "scripts/auxiliary/eval_prompt.txt", "dynamic": "scripts/auxiliary/dynamic_prompt.txt"}
"""Where IMUG-Bench's scorers keep their prompts, in its repository."""


def _graded_by_grid(d: Dialogue, turn: Turn) -> bool:
    """Whether an image turn is graded by reading its drawn grid (Geometric Coloring, every
    point with its grid), not by a judge."""
    grids = [c.hidden.predicate for c in turn.checks if isinstance(c.hidden.predicate, dict)]
    return is_grid_task(d.domain, d.subdomain) and bool(grids) and len(grids) == len(turn.checks)


_FIRST_TO_LAST_BRACE = re.compile(r"(\{.*\})", re.DOTALL)


def _imug_reads(text: str) -> str:
    """IMUG-Bench's ``parse_scores``: from the first ``{`` to the last ``}`` of the reply."""
    found = _FIRST_TO_LAST_BRACE.search(text)
    if found is None:
        raise ValueError("no {...} in the reply")
    return found.group(1)


class ImugJudge(ProtocolJudge):
    """IMUG-Bench's protocol: its rules, and a VLM judge for what needs judgement."""

    PROMPTS = "yanami.families.imug"
    # scripts/auxiliary/score_image.py and resolve_dynamic_answers.py: the OpenAI SDK at
    # temperature 0.1, no max_tokens, no seed; the pictures' own bytes
    CODE = CodeCall("IMUG-Bench's scorer", temperature=0.1, max_tokens=None, reads=_imug_reads)

    @classmethod
    def load_source(cls, root: Path) -> dict[str, str]:
        return {name: prompt_file(root / rel) for name, rel in PROMPT_FILES.items()}

    def _grade(self, d: Dialogue, turn: Turn, image: bytes | None, text: str | None, earlier: Earlier) -> Grade:
        if turn.answer is not None:
            return self._imug_reply(d, turn, text or "", earlier)
        return self._imug_image(d, turn, image, earlier)

    @classmethod
    def needs_judgement(cls, d: Dialogue) -> str | None:
        """A dynamic answer (its letters are resolved from the model's own outputs) or an image
        turn's evaluation points need a VLM judge; a static answer and a grid do not."""
        for turn in d.turns:
            if turn.answer is not None and turn.answer.dynamic:
                return f"{d.id}/t{turn.index} (a dynamic answer)"
            if turn.answer is None and turn.checks and not _graded_by_grid(d, turn):
                return f"{d.id}/t{turn.index} (an image turn's evaluation points)"
        return None

    def _imug_image(self, d: Dialogue, turn: Turn, image: bytes | None, earlier: Earlier) -> Grade:
        assert image is not None
        grids = [c.hidden.predicate for c in turn.checks if isinstance(c.hidden.predicate, dict)]
        if _graded_by_grid(d, turn):
            truth = cast(list[list[str]], grids[0]["grid"])  # checked at import
            found = read_grid(image)
            points = grid_points(found, truth, len(turn.checks))
            reason = f"grid read: {found}" if found is not None else "no grid found"
            # IMUG-Bench's own analyzer reads some drawings otherwise (`read_grid_code`): both are kept
            code = read_grid_code(image)
            code_points = grid_points(code, truth, len(turn.checks))
            reason += f"; IMUG-Bench's analyzer reads {code}" if code != found else ""
        elif self.source is not None:  # the code's reading is the only one: its call, its arithmetic
            given, score, reason = self._imug_points_source(d, turn, image, earlier)
            checks = [
                CheckResult(id=c.id, kind=str(c.kind), capability=None, passed=None, score=p)
                for c, p in zip(turn.checks, given, strict=True)
            ]
            return Grade({"image": score, "image_code": score}, checks=checks, reason=reason)
        else:
            notes: list[str] = []
            refs = self._refs(d, turn.references, earlier, notes)
            listing = "".join(f"Image {k}: reference\n" for k in range(1, len(refs) + 1))
            references = f"The images before the last are references for this turn:\n{listing}\n" if refs else ""
            text = self.family_prompt("imug-points").format(
                request=request_text(turn),
                references=references,
                points="\n".join(f"{n}. {c.text}" for n, c in enumerate(turn.checks, 1)),
            )
            out = self._ask(f"{d.id}/t{turn.index}", [InputText(text), *refs, input_image(image)], _Points)
            want = {str(n) for n in range(1, len(turn.checks) + 1)}
            top = FACTS.check_kinds[EVALUATION_POINT]
            if set(out.scores) != want or any(not 0 <= v <= top for v in out.scores.values()):
                raise JudgeError(f"{self.name}: the scores must name points 1-{len(turn.checks)}, each 0-{top}")
            points = code_points = [out.scores[str(n)] for n in range(1, len(turn.checks) + 1)]
            reason = "; ".join([out.reason, *notes])
        checks = [
            CheckResult(id=c.id, kind=str(c.kind), capability=None, passed=None, score=float(p))
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
        paper = mcq_paper(text, letters, question_options(request_text(turn)))
        # the public code compares with the stored answer: the source's text, or the resolved letters
        code = mcq_code(text, answer.text if not answer.dynamic else expected)
        why = f"expected {','.join(letters) or 'nothing'}" + (f" (resolved: {reason})" if answer.dynamic else "")
        return Grade({"mcq": paper, "mcq_code": code}, score=paper, reason=why)

    def _resolve(self, d: Dialogue, turn: Turn, earlier: Earlier) -> tuple[str, str]:
        answer = turn.answer
        assert answer is not None
        produced: list[tuple[int, str | None]] = []  # per turn: its marker, or the model's own text
        images: list[InputText | InputImage] = []
        for ref in sorted({r.turn for r in turn.references}):
            own_image, own_text = earlier(ref)
            if own_image is not None:
                images += [InputText(f"Image {len(images) // 2 + 1} (turn {ref}):"), input_image(own_image)]
            produced.append((ref, None if own_image is not None else own_text or ""))
        # one fence for every text the model produced, from all of them: none can forge its closing tag
        fence = fence_code("\n".join(t for _, t in produced if t is not None))
        lines: list[str] = []
        shown = 0
        for ref, text in produced:
            if text is None:
                shown += 1
                said = f"[image {shown}]"
            else:
                said = f"<output-{fence}>{text}</output-{fence}>" if text else "(nothing: the model gave no output)"
            lines.append(f"Turn {ref}: asked: {request_text(d.turns[ref])} | produced: {said}")
        several = d.subdomain == "natural_growth"  # the public code's one multiple-answer task
        kind = "Several options may be correct." if several else "Exactly one option is correct."
        prompt = self.family_prompt("imug-dynamic").format(
            context="\n".join(lines), turn=turn.index, question=request_text(turn), kind=kind, fence=fence
        )
        out = self._ask(f"{d.id}/t{turn.index}/dynamic", [InputText(prompt), *images], _Letters)
        return resolved_answer(answer.letters, out.letters), out.reason

    def _imug_points_source(
        self, d: Dialogue, turn: Turn, image: bytes, earlier: Earlier
    ) -> tuple[list[float | None], float, str]:
        """IMUG-Bench's ``score_image.py``: its prompt as the system message; the references found,
        then the produced image, then the sequence description, the turn's first text and the
        numbered evaluation points. Its arithmetic: the turn's score is the mean of the points the
        reply gives (however many, whatever their ids) x 20, fractions kept; each point's own
        score where the reply names it."""
        _readable(turn, "score_image.py")
        notes: list[str] = []
        images: list[InputImage] = []
        described: list[str] = []
        for ref in turn.references:
            found = self._refs(d, [ref], earlier, notes)
            if found:
                kind = "input" if ref.side == "user" else "output"
                images.append(_named(found[0], own=kind == "output"))
                described.append(f"Image_{len(images)} (Turn {_number(d.turns[ref.turn])} {kind} image)")
        images.append(_named(input_image(image), own=True))
        described.append(f"Image_{len(images)} (Target Image)")
        listing = "".join(f"- {x}\n" for x in described)
        points = "\n".join(f"{n}. {c.text}" for n, c in enumerate(turn.checks, 1))
        text = (
            f"Sequence description:\n{listing}\n[Task Instruction Recap]:\n{_first_text(turn)}\n\n"
            f"[Evaluation Points List]:\n{points}\n\nPlease output JSON results."
        )
        item = f"{d.id}/t{turn.index}"
        out = self._ask(item, [*images, InputText(text)], _SourcePoints, system=self._prompt("points"))
        given = [r.score for r in out.evaluation_results]
        if not given:  # its summary keeps a turn only where the reply gave a score
            raise NotScoredByCode(
                "the judge's reply gives no evaluation point; IMUG-Bench's summary leaves the turn out"
            )
        by_id = {str(r.point_id): r.score for r in out.evaluation_results}
        each = [by_id.get(str(n)) for n in range(1, len(turn.checks) + 1)]
        return each, imug_image_score(given), "; ".join(notes)

    def _resolve_source(self, d: Dialogue, turn: Turn, earlier: Earlier) -> tuple[str, str]:
        """IMUG-Bench's ``resolve_dynamic_answers.py``: its prompt as the system message; each
        referenced turn's first text and, where the model drew a picture there, that picture, else
        the benchmark's stored answer of that turn (as its code does); then the target question."""
        _readable(turn, "resolve_dynamic_answers.py")
        answer = turn.answer
        assert answer is not None
        context = "### REFERENCE CONTEXT PROVIDED ###\n"
        images: list[InputImage] = []
        for ref in sorted({r.turn for r in turn.references}):
            own_image, _ = earlier(ref)
            if own_image is not None:  # its data URL always says PNG
                images.append(replace(input_image(own_image), media_type="image/png"))
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


class _Points(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    scores: dict[str, int]
    reason: str = ""


class _Letters(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    letters: str = Field(pattern=r"^[A-Ga-g ,]*$")
    reason: str = ""


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


def _named(image: InputImage, *, own: bool) -> InputImage:
    """A picture labelled as ``score_image.py`` labels it, by its file's name: ``image/png`` for a
    ``.png`` (every output of a model, which its harness writes as ``turn_N_output.png``), else
    ``image/jpeg``, whatever the bytes are."""
    png = own or image.data.startswith(b"\x89PNG")
    return replace(image, media_type="image/png" if png else "image/jpeg")


def _readable(turn: Turn, script: str) -> None:
    """IMUG-Bench's ``script`` reads the text of the turn's first input item and fails on a turn
    whose first item has none (``KeyError: 'text'``): such a turn is not scored by its code."""
    intent = turn.hidden.intent if isinstance(turn.hidden.intent, dict) else {}
    if intent.get("first_text") is False:
        raise NotScoredByCode(f"its first input item has no text, which IMUG-Bench's {script} reads (KeyError 'text')")


def _first_text(turn: Turn) -> str:
    """The turn's first text, as IMUG-Bench's scorers read ``input[0]["text"]``."""
    return next((p.text for p in turn.user.parts if isinstance(p, TextPart)), "")


def _number(turn: Turn) -> int:
    """A turn's number in its source (IMUG-Bench's ``turn``), else its index."""
    intent = turn.hidden.intent if isinstance(turn.hidden.intent, dict) else {}
    number = intent.get("turn")
    return number if isinstance(number, int) and not isinstance(number, bool) else turn.index


make_judge = partial(make_protocol_judge, ImugJudge)
"""The IMUG-Bench family's judge hook."""
