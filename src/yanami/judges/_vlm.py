"""The VLM judge: three fixed, versioned prompts over any model that answers.

- DSU: the conversation, the question, the reference and the (fenced, untrusted) answer ->
  ``{"correct": bool, "reason": str}``;
- State Consistency: the ground-truth target and the candidate, every check of the turn ->
  ``{"verdicts": {check id: bool}}``, which must name exactly the turn's check ids;
- Visual Quality: the candidate -> ``{"score": 0..10}``.

The judge speaks to its model through the same `Request` a model under test receives, so
any client kind (an OpenAI-compatible server, an ``/infer`` server, a plug-in) can judge;
retries, limits and the response cache are the client's. Temperature 0. Output is
validated; an invalid reply gets one repair request (the reply and what is wrong with it),
and a second invalid reply is a `JudgeError`, never a silent false.

The answer under judgement is fenced by tags that carry a code derived from the answer's
own SHA-256: text inside the answer cannot close the fence, since it cannot contain its
own hash.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from importlib.resources import files
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from yanami.contract import (
    OUTPUT_LONG_EDGE,
    AnswerVerdict,
    Dialogue,
    ImagePart,
    ImageVerdict,
    InputImage,
    InputMessage,
    InputText,
    JudgeError,
    Model,
    Output,
    OwnHistory,
    Question,
    Refused,
    Request,
    TextPart,
    Turn,
    UserError,
    Verdict,
)
from yanami.judges._context import JudgeContext
from yanami.judges._verdicts import answer_verdict, image_verdict, question_for
from yanami.models import Malformed, Transient, conversation_text, model_from_config, options_text
from yanami.store import Dataset, open_image_bytes

PROMPT_VERSION = "v3"
"""v2: the answer's fence carries a code derived from the answer (v1's fixed tag could be closed from inside).
v3: the DSU prompt states how an answer to lettered options is read (the exact judge's
`read_options`): a letter alone in either case, never the article "a"; an option's text; two
options named is wrong. The SC and VQ prompts are unchanged (the version names the set)."""


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


_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_FENCED = re.compile(r"```(?:json)?\s*\n?(.*?)```", re.DOTALL | re.IGNORECASE)


def _json_objects(text: str) -> list[str]:
    """Every JSON object in ``text``, in order: the contents of fenced blocks first, then each
    whole object found scanning the text (prose around it, braces in prose, are skipped)."""
    found = [m.group(1).strip() for m in _FENCED.finditer(text)]
    decoder = json.JSONDecoder()
    i = text.find("{")
    while i >= 0:
        try:
            value, end = decoder.raw_decode(text, i)
        except (ValueError, RecursionError):
            i = text.find("{", i + 1)
            continue
        if isinstance(value, dict):
            found.append(text[i:end])
        i = text.find("{", end)
    return found


def parse_reply(text: str, schema: type[BaseModel]) -> Any:
    """The JSON object in a reply, validated; ValueError naming what is wrong.

    Reasoning a model writes before its answer (``<think>...</think>``) is left out; a fenced
    ``json`` block is taken first; otherwise every whole JSON object in the text is tried, so
    prose before or after it (braces in it included) does not spoil the answer.
    """
    return parse_reply_source(text, schema)[0]


def parse_reply_source(text: str, schema: type[BaseModel]) -> tuple[Any, str]:
    """`parse_reply`, and the JSON text in the reply that it read (for showing a model's answer
    to another model: the object as written, without the reasoning and prose around it)."""
    body = _THINK.sub("", text).strip()
    candidates = _json_objects(body)
    if not candidates:
        raise ValueError("no JSON object in the reply")
    first_error: ValueError | None = None
    for candidate in candidates:
        try:
            return schema.model_validate_json(candidate), candidate
        except ValidationError as exc:
            err = exc.errors()[0]
            first_error = first_error or ValueError(f"{'.'.join(map(str, err['loc'])) or 'reply'}: {err['msg']}")
    assert first_error is not None
    raise first_error


def fence_code(prediction: str) -> str:
    """The code of the fence around an answer: from the answer's SHA-256, so it cannot forge it."""
    return hashlib.sha256(b"yanami-fence/" + prediction.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def context_text(d: Dialogue, upto: int) -> str:
    """The conversation's text up to and including turn ``upto``; images as numbered markers."""
    messages = [
        (role, [p.text if isinstance(p, TextPart) else None for p in m.parts])
        for t in d.turns[: upto + 1]
        for role, m in (("user", t.user), ("assistant", t.assistant))
    ]
    return "\n".join(conversation_text(messages))


def _image(data: bytes, sha256: str | None = None) -> InputImage:
    try:
        img = open_image_bytes(data)  # the header only
        width, height = img.width, img.height
    except ValueError:
        width = height = 0  # the server sees the bytes as they are
    return InputImage(data, sha256 or hashlib.sha256(data).hexdigest(), width, height)


@functools.cache
def _json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """A reply model's JSON Schema, made once (pydantic takes milliseconds per call)."""
    return schema.model_json_schema()


def ask_json(
    answer: Callable[[Request], str],
    item: str,
    parts: list[InputText | InputImage],
    schema: type[BaseModel],
    *,
    before: Sequence[InputMessage] = (),
    max_tokens: int | None = 512,
    repair: bool = True,
    seed: int | None = 0,
    parse: Callable[[str, type[BaseModel]], Any] | None = None,
    function: Mapping[str, object] | None = None,
    fresh: bool = False,
) -> Any:
    """Ask a model for a JSON reply that ``schema`` validates, at temperature 0 and seed 0.

    ``repair`` False, ``seed`` None and ``max_tokens`` None: one request, no seed, no limit sent
    (as a benchmark's own code asks its judge; the caller applies its rule to a reply that does
    not parse, the ValueError raised); ``parse``: how the reply is read (default `parse_reply`);
    ``function``: a function the reply must call, its arguments the reply (`Request.function`);
    ``fresh``: past the response cache (`Request.fresh`).

    ``before`` are earlier messages of the same conversation (an author's plan, say, before a
    request to revise it). The schema travels with the request (an adapter whose config has
    ``structured_output`` sends it as the response format). An invalid reply gets one repair
    request (the reply and what is wrong with it); a second invalid reply raises ValueError
    naming the problem. The model's own failures (`Transient`, `Malformed`, `Refused`, …) pass
    through. Shared by the VLM judge and the construction pipeline's filter, author and verifiers.
    """
    messages = [*before, InputMessage("user", tuple(parts))]
    json_schema = _json_schema(schema)

    def ask() -> str:  # the same question gets the same grading
        size = (OUTPUT_LONG_EDGE, OUTPUT_LONG_EDGE)
        return answer(
            Request(
                item,
                tuple(messages),
                seed=seed,
                size=size,
                max_tokens=max_tokens,
                json_schema=json_schema,
                function=function,
                fresh=fresh,
            )
        )

    read = parse or parse_reply
    reply = ask()
    try:
        return read(reply, schema)
    except ValueError as first:
        if not repair:
            raise
        messages += [
            InputMessage("assistant", (InputText(reply),)),
            InputMessage("user", (InputText(f"That reply is invalid ({first}). Reply again with the JSON only."),)),
        ]
    return parse_reply(ask(), schema)


def vlm_judge(spec: str, context: JudgeContext, *, temperature: float | None = 0.0) -> VLMJudge:
    """The VLM judge of the model the config file ``spec`` describes, at temperature 0 (or, for a
    benchmark's own code, the temperature it sends, None: none); it reads the ground-truth targets
    from the context's bench and caches its calls in its response cache."""
    from yanami.models import load_config  # YAML: loaded when a config file is read

    config = load_config(spec)
    model = model_from_config(config.model_copy(update={"temperature": temperature}), context.responses)
    return VLMJudge(model, context.dataset, config.model_dump(mode="json"))


class VLMJudge:
    """A VLM judge over a model that answers (see the module docstring)."""

    version = f"vlm-{PROMPT_VERSION}"

    def __init__(self, model: Model, bench: Dataset | None, settings: dict[str, Any] | None = None) -> None:
        if model.answer is None:
            raise UserError(f"{model.name}: a judge must answer (a chat_model, or answers: true for infer-http)")
        self.model = model
        self._answer = model.answer
        self.name = model.name
        self.bench = bench
        self.settings = settings
        """The judge's config file, as read (recorded with a run)."""

    def _ask(
        self, item: str, parts: list[InputText | InputImage], schema: type[BaseModel], system: str | None = None
    ) -> Any:
        before = (InputMessage("system", (InputText(system),)),) if system else ()
        try:
            return ask_json(self._answer, item, parts, schema, before=before)
        except ValueError as exc:
            raise JudgeError(f"{self.name}: invalid judge output after a repair request ({exc})") from None
        except (Transient, Malformed, Refused, RuntimeError) as exc:  # a judge that fails grades nothing
            raise JudgeError(f"{self.name}: {exc}") from None

    def ask_once(
        self,
        item: str,
        parts: list[InputText | InputImage],
        schema: type[BaseModel],
        system: str | None = None,
        *,
        max_tokens: int | None,
        parse: Callable[[str, type[BaseModel]], Any],
        function: Mapping[str, object] | None = None,
        fresh: bool = False,
    ) -> Any:
        """One request as a benchmark's own code makes it: no repair round, no seed, ``max_tokens``
        as it sends it (None: none), the reply read by its ``parse``. A reply that does not parse
        raises ValueError, for the caller to apply the code's rule; a judge that cannot be reached
        is a `JudgeError`, as in `_ask`. ``function``: a function the code has the reply call;
        ``fresh``: asked past the response cache (the code repeating a request it could not read)."""
        before = (InputMessage("system", (InputText(system),)),) if system else ()
        try:
            return ask_json(self._answer, item, parts, schema, before=before, max_tokens=max_tokens, repair=False,
                            seed=None, parse=parse, function=function, fresh=fresh)  # fmt: skip
        except (Transient, Malformed, Refused, RuntimeError) as exc:
            raise JudgeError(f"{self.name}: {exc}") from None

    def grade(self, d: Dialogue, output: Output, history: OwnHistory) -> Verdict:
        """A reply by `judge_answer`, a candidate image by `judge_image` (the model's own history
        is not needed: the judge compares with the turn's reference image)."""
        if output.kind == "question":
            q = question_for(d, output)
            return answer_verdict(self.name, self.version, output, q, self.judge_answer(d, q, output.text or ""))
        if output.kind != "turn" or output.image is None:
            raise JudgeError(f"{output.item}: a YANAMI VLM judge grades a DSU reply or a target turn's image")
        iv = self.judge_image(d, d.turns[output.turn], output.image)
        return image_verdict(self.name, self.version, d, output, iv)

    def judge_answer(self, d: Dialogue, q: Question, reply: str) -> AnswerVerdict:
        """Semantic correctness of a reply (protocol DSU)."""
        question = q.text + ("\n" + options_text(q.choices) if q.choices else "")
        reference = q.answer + (f" (option {', '.join(q.answer_letters)})" if q.answer_letters else "")
        text = prompt("dsu").format(
            context=context_text(d, q.after_turn),
            question=question,
            reference=reference,
            prediction=reply,
            fence=fence_code(reply),
        )
        out = self._ask(f"{d.id}/{q.id}", [InputText(text)], _DSU)
        return AnswerVerdict(1.0 if out.correct else 0.0, out.reason)

    def judge_image(self, d: Dialogue, turn: Turn, image: bytes) -> ImageVerdict:
        """Every check of the turn in one call (protocol SC), and Visual Quality (protocol VQ)."""
        if self.bench is None:
            raise JudgeError(f"{self.name}: judging images needs the bench (the ground-truth targets)")
        target = next(p for p in turn.assistant.parts if isinstance(p, ImagePart))
        truth = InputImage(self.bench.image_bytes(target), target.sha256, target.width, target.height)
        candidate = _image(image)
        request = " ".join(p.text for p in turn.user.parts if isinstance(p, TextPart))
        listing = "\n".join(f"{c.id}: {c.text}" for c in turn.checks)
        item = f"{d.id}/t{turn.index}"
        sc = self._ask(
            item,
            [
                InputText(prompt("sc").format(request=request, checks=listing)),
                InputText("Reference image:"),
                truth,
                InputText("Candidate image:"),
                candidate,
            ],
            _SC,
        )
        ids = {c.id for c in turn.checks}
        got = set(sc.verdicts)
        if got != ids:
            missing, extra = sorted(ids - got), sorted(got - ids)
            raise JudgeError(f"{self.name}: the verdicts name the wrong checks (missing {missing}, extra {extra})")
        vq = self._ask(item, [InputText(prompt("vq")), candidate], _VQ)
        return ImageVerdict(dict(sc.verdicts), float(vq.score), sc.reason)
