"""The VLM judge: three fixed, versioned prompts over any OpenAI-compatible chat model.

- DSU: the conversation, the question, the reference and the (fenced, untrusted) answer ->
  ``{"correct": bool, "reason": str}``;
- State Consistency: the ground-truth target and the candidate, every check of the turn ->
  ``{"verdicts": {check id: bool}}``, which must name exactly the turn's check ids;
- Visual Quality: the candidate -> ``{"score": 0..10}``.

Temperature 0. Output is validated; an invalid reply gets one repair request (the reply and
what is wrong with it), and a second invalid reply is a `JudgeError`, never a silent false.
"""

from __future__ import annotations

import re
from importlib.resources import files
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from yanami.judges._protocol import AnswerVerdict, ImageVerdict, JudgeError
from yanami.models import Malformed, ModelConfig, Refused, ResponseCache, Transient
from yanami.models._openai import OpenAIModel, data_url
from yanami.schema import Dialogue, ImagePart, Question, TextPart, Turn
from yanami.store import Dataset

PROMPT_VERSION = "v1"


def prompt(name: str) -> str:
    """A prompt template shipped with the package (``dsu``, ``sc`` or ``vq``)."""
    return files("yanami.judges").joinpath("prompts", f"{name}-{PROMPT_VERSION}.txt").read_text(encoding="utf-8")


class _DSU(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    correct: bool
    reason: str = ""


class _SC(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    verdicts: dict[str, bool]
    reason: str = ""


class _VQ(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    score: int = Field(ge=0, le=10)


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


def parse_reply(text: str, schema: type[BaseModel]) -> Any:
    """The JSON object in a judge's reply, validated (code fences allowed); ValueError if invalid."""
    body = _FENCE.sub("", text.strip())
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object in the reply")
    try:
        return schema.model_validate_json(body[start : end + 1])
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"{'.'.join(map(str, first['loc'])) or 'reply'}: {first['msg']}") from None


def context_text(d: Dialogue, upto: int) -> str:
    """The conversation's text up to and including turn ``upto``; images as numbered markers."""
    lines, k = [], 0
    for t in d.turns[: upto + 1]:
        for role, m in (("User", t.user), ("Assistant", t.assistant)):
            words = []
            for p in m.parts:
                if isinstance(p, TextPart):
                    words.append(p.text)
                else:
                    k += 1
                    words.append(f"[image {k}]")
            lines.append(f"{role}: {' '.join(words)}")
    return "\n".join(lines)


class VLMJudge:
    """A VLM judge behind an OpenAI-compatible server (see the module docstring)."""

    version = f"vlm-{PROMPT_VERSION}"

    def __init__(self, config: ModelConfig, bench: Dataset | None, cache: ResponseCache | None = None) -> None:
        if config.kind != "openai" or not config.chat_model:
            raise JudgeError(f"{config.name}: a judge config needs kind: openai and a chat_model")
        self.config = config.model_copy(update={"temperature": 0.0})
        self.name = config.name
        self.bench = bench
        self.client = OpenAIModel(self.config, cache)

    def _ask(self, content: list[dict[str, Any]], schema: type[BaseModel], key: list[Any]) -> Any:
        messages: list[dict[str, Any]] = [{"role": "user", "content": content}]
        try:
            reply = self.client.chat(messages, key, seed=None, max_tokens=512)
            try:
                return parse_reply(reply, schema)
            except ValueError as first:
                messages += [
                    {"role": "assistant", "content": reply},
                    {"role": "user", "content": f"That reply is invalid ({first}). Reply again with the JSON only."},
                ]
                again = self.client.chat(messages, [*key, "repair", reply], seed=None, max_tokens=512)
                return self._validated(again, schema)
        except (Transient, Malformed, Refused, RuntimeError) as exc:  # a judge that fails grades nothing
            raise JudgeError(f"{self.name}: {exc}") from None

    def _validated(self, reply: str, schema: type[BaseModel]) -> Any:
        try:
            return parse_reply(reply, schema)
        except ValueError as exc:
            raise JudgeError(f"{self.name}: invalid judge output after a repair request ({exc})") from None

    def judge_answer(self, d: Dialogue, q: Question, reply: str) -> AnswerVerdict:
        """Semantic correctness of a reply (protocol DSU)."""
        question = q.text
        if q.choices:
            question += "\n" + "\n".join(f"{chr(65 + i)}. {c}" for i, c in enumerate(q.choices))
        reference = q.answer + (f" (option {', '.join(q.answer_letters)})" if q.answer_letters else "")
        text = prompt("dsu").format(
            context=context_text(d, q.after_turn),
            question=question,
            reference=reference,
            prediction=reply.replace("</answer>", "</ answer>"),  # the fence cannot be closed from inside
        )
        out = self._ask([{"type": "text", "text": text}], _DSU, ["dsu", PROMPT_VERSION, text])
        return AnswerVerdict(1.0 if out.correct else 0.0, out.reason)

    def judge_image(self, d: Dialogue, turn: Turn, image: bytes) -> ImageVerdict:
        """Every check of the turn in one call (protocol SC), and Visual Quality (protocol VQ)."""
        if self.bench is None:
            raise JudgeError(f"{self.name}: judging images needs the bench (the ground-truth targets)")
        target = next(p for p in turn.assistant.parts if isinstance(p, ImagePart))
        truth = self.bench.image_bytes(target)
        request = " ".join(p.text for p in turn.user.parts if isinstance(p, TextPart))
        listing = "\n".join(f"{c.id}: {c.text}" for c in turn.checks)
        text = prompt("sc").format(request=request, checks=listing)
        sc = self._ask(
            [
                {"type": "text", "text": text},
                {"type": "text", "text": "Reference image:"},
                {"type": "image_url", "image_url": {"url": data_url(truth)}},
                {"type": "text", "text": "Candidate image:"},
                {"type": "image_url", "image_url": {"url": data_url(image)}},
            ],
            _SC,
            ["sc", PROMPT_VERSION, text, target.sha256, _sha(image)],
        )
        ids = {c.id for c in turn.checks}
        got = set(sc.verdicts)
        if got != ids:
            missing, extra = sorted(ids - got), sorted(got - ids)
            raise JudgeError(f"{self.name}: the verdicts name the wrong checks (missing {missing}, extra {extra})")
        vq_text = prompt("vq")
        vq = self._ask(
            [{"type": "text", "text": vq_text}, {"type": "image_url", "image_url": {"url": data_url(image)}}],
            _VQ,
            ["vq", PROMPT_VERSION, _sha(image)],
        )
        return ImageVerdict(dict(sc.verdicts), float(vq.score), sc.reason)


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()
