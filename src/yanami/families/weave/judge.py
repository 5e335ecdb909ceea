"""WEAVE's protocol (``weichow23/weave``, ``eval/main.py``): how its turns are graded.

An image turn: the key-point checklist, visual consistency against the pictures the key points
name, and image quality, each 0-10 (three calls, as WEAVE's evaluator makes); a text turn:
accuracy against the standard answer, 0, 5 or 10. With yanami's own prompts (``prompts/``,
written anew from the published rubrics), or with WEAVE's own, read from the user's checkout
(``--protocol-source``: the string constants of its ``eval/prompts.py``, laid out as its
evaluator lays them out).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from yanami.contract import Dialogue, InputImage, InputText, JudgeError, Turn
from yanami.families._judge import CodeCall, Earlier, Grade, ProtocolJudge, make_protocol_judge, request_text
from yanami.families._sources import string_constants
from yanami.judges import fence_code, input_image

PROMPTS_FILE = "eval/prompts.py"
"""Where WEAVE's evaluator keeps its prompts, in its repository."""
PROMPT_NAMES = ("prompt_keypoint_checklist", "prompt_visual_consistency", "prompt_image_quality", "prompt_txt_acc")


def _weave_reads(text: str) -> str:
    """WEAVE's ``parse_json``: the reply with every ```json and ``` taken out, read whole."""
    return text.replace("```json", "").replace("```", "")


class WeaveJudge(ProtocolJudge):
    """WEAVE's protocol over a VLM judge."""

    PROMPTS = "yanami.families.weave"
    # eval/vlm_tools.py: one user message, max_tokens 1400 and nothing else (no temperature, no
    # seed); every picture opened, turned upright, made RGB and saved as a JPEG (Pillow's default
    # quality, 75); eval/utils.py's parse_json reads the reply
    CODE = CodeCall("WEAVE's eval/main.py", temperature=None, max_tokens=1400, reads=_weave_reads, jpeg_quality=75)

    @classmethod
    def load_source(cls, root: Path) -> dict[str, str]:
        return string_constants(root / PROMPTS_FILE, PROMPT_NAMES)

    def _grade(self, d: Dialogue, turn: Turn, image: bytes | None, text: str | None, earlier: Earlier) -> Grade:
        if self.source is not None:
            if turn.answer:
                return self._weave_reply_source(d, turn, text or "")
            return self._weave_image_source(d, turn, image, earlier)
        return self._weave_reply(d, turn, text or "") if turn.answer else self._weave_image(d, turn, image, earlier)

    def _weave_image(self, d: Dialogue, turn: Turn, image: bytes | None, earlier: Earlier) -> Grade:
        assert image is not None
        item, request = f"{d.id}/t{turn.index}", request_text(turn)
        notes: list[str] = []
        candidate = input_image(image)
        references: list[InputText | InputImage] = []
        for n, c in enumerate(turn.checks, 1):
            for ref in self._refs(d, c.references, earlier, notes):
                references += [InputText(f"Reference for requirement {n}:"), ref]
        requirements = "\n".join(f"{n}. {c.text}" for n, c in enumerate(turn.checks, 1))
        kp = self._ask(
            item,
            [InputText(self.family_prompt("weave-key-point").format(request=request, requirements=requirements)),
             InputText("Produced image:"), candidate, *references],
            _Score,
        )  # fmt: skip
        vc = self._ask(
            item,
            [InputText(self.family_prompt("weave-visual-consistency").format(request=request)),
             InputText("Produced image:"), candidate, *references],
            _Score,
        )  # fmt: skip
        iq = self._ask(item, [InputText(self.family_prompt("weave-image-quality")), candidate], _Score)
        scores = {"key_point": float(kp.score), "visual_consistency": float(vc.score), "image_quality": float(iq.score)}
        return Grade(scores, reason="; ".join([kp.reason, *notes]))

    def _weave_reply(self, d: Dialogue, turn: Turn, text: str) -> Grade:
        assert turn.answer is not None
        prompt = self.family_prompt("weave-accuracy").format(
            question=request_text(turn), reference=turn.answer.text, prediction=text, fence=fence_code(text)
        )
        out = self._ask(f"{d.id}/t{turn.index}", [InputText(prompt)], _Accuracy)
        return Grade({"accuracy": float(out.score)}, reason=out.reason)

    def _weave_image_source(self, d: Dialogue, turn: Turn, image: bytes | None, earlier: Earlier) -> Grade:
        """WEAVE's ``eval/main.py``: the checklist and consistency prompts followed by the numbered
        key points, the produced image and then each key's picture (in key order) put where the
        text says ``<image>``; the quality prompt with the produced image alone."""
        assert image is not None
        item = f"{d.id}/t{turn.index}"
        notes: list[str] = []
        candidate = input_image(image)
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


class _Score(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    score: int = Field(ge=0, le=10)
    reason: str = ""


class _Accuracy(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    score: Literal[0, 5, 10]
    reason: str = ""


class _SourceScore(BaseModel):
    """WEAVE's reply: a JSON object of a score 0-10 and its reasoning (other fields are ignored,
    as its code ignores them)."""

    model_config = ConfigDict(extra="ignore")
    score: float = Field(ge=0, le=10)
    reasoning: str = ""


class _SourceAccuracy(_SourceScore):
    score: Literal[0, 5, 10]


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


make_judge = partial(make_protocol_judge, WeaveJudge)
"""The WEAVE family's judge hook."""
