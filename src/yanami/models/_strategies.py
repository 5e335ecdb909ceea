"""Test-time scaling for any model (the IMUG-Bench paper's three strategies): ``--strategy``.

A strategy wraps a model; the runner sees one `Model` whose outputs are the strategy's final
ones, and every extra call goes through the wrapped model's own adapter (its limits, retries
and response cache), so a rerun pays for nothing twice and the result does not depend on
timing.

- ``cot``: before drawing, the model writes what the turn asks for and a plan (a text call);
  the plan is added to the drawing request only, never to the history. A text reply is asked
  to reason first and end with ``Answer: ...``; the part after the last such marker is the reply.
- ``self-verify:N``: the model draws, then judges its own image against the instruction and the
  conversation (a text call); on a rejection its feedback is added to the request and it draws
  again, at most N rounds. The last image is the output; the rejected ones and the feedback
  never enter the history.
- ``best-of:N``: N drawings with seeds derived from the run's seed and the candidate's number
  (never the item's), then the model (or, with ``best-of:N@FILE``, the model a config file
  names) picks one by number.

`calls` tells the runner how many model calls an item took.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from yanami.contract import InputImage, InputMessage, InputText, Model, Request, UserError, derived

STRATEGIES = ("none", "cot", "self-verify:N", "best-of:N")
_SPEC = re.compile(r"^(none|cot|self-verify:(\d+)|best-of:(\d+)(?:@(.+))?)$")
MAX_N = 16

PLAN_PROMPT = (
    "Before you draw: in a few lines, say what this turn asks for (what must change, what must stay as it "
    "was earlier in the conversation) and list a short plan for the image. Do not draw yet."
)
COT_ANSWER = (
    "Think it through step by step first: which earlier turns matter and what they established. "
    "End with one line 'Answer: <your answer>' in the format the question asks for."
)
VERIFY_PROMPT = (
    "The last image is your draft for the request above. Check it against the instruction and against "
    "everything the conversation fixed earlier (style, objects, constraints, corrections). Reply with JSON "
    'only: {"acceptable": true|false, "feedback": "<the main problems and how to fix them; empty if acceptable>"}'
)
PICK_PROMPT = (
    "The images after this line are {n} candidate answers to the request above, numbered 1 to {n} in order. "
    "Pick the one that best fulfils the request and stays consistent with the conversation. Reply with JSON "
    'only: {{"best": <number 1-{n}>, "reason": "<one sentence>"}}'
)
_ANSWER_MARK = re.compile(r"(?im)^\W*answer\s*[:：]\s*(.+?)\s*$")


@dataclass(frozen=True)
class StrategySpec:
    """A parsed ``--strategy``."""

    kind: str
    """``none``, ``cot``, ``self-verify`` or ``best-of``."""
    n: int = 1
    picker: str | None = None
    """``best-of``: the config file of the model that picks (None: the model itself)."""

    @property
    def name(self) -> str:
        if self.kind in ("none", "cot"):
            return self.kind
        return f"{self.kind}:{self.n}" + (f"@{self.picker}" if self.picker else "")


def parse_strategy(text: str) -> StrategySpec:
    """``--strategy``'s value, or a one-line error."""
    m = _SPEC.match(text.strip())
    if m is None:
        raise UserError(f"--strategy {text}: not one of {', '.join(STRATEGIES)} (N from 1 to {MAX_N})")
    kind = m[1].split(":")[0]
    n = int(m[2] or m[3] or 1)
    if not 1 <= n <= MAX_N:
        raise UserError(f"--strategy {text}: N must be from 1 to {MAX_N}")
    return StrategySpec(kind, n, m[4])


def final_answer(text: str) -> str:
    """The reply after the last ``Answer:`` line of a reasoned reply (the whole text if there is none)."""
    found = _ANSWER_MARK.findall(text)
    return found[-1] if found else text.strip()


def _seed(seed: int | None, k: int) -> int:
    """Candidate ``k``'s seed: from the run's seed and ``k`` alone (the same for every item)."""
    return derived("candidate", "none" if seed is None else seed, k, bits=32)


def _with(request: Request, *messages: InputMessage, **changes: Any) -> Request:
    return replace(request, messages=(*request.messages, *messages), **changes)


def _add_to_last(request: Request, text: str) -> Request:
    """The request with ``text`` added to its last user message."""
    *before, last = request.messages
    return replace(request, messages=(*before, InputMessage(last.role, (*last.parts, InputText(text)))))


def _json(text: str) -> dict[str, Any] | None:
    start, end = text.find("{"), text.rfind("}")
    try:
        obj = json.loads(text[start : end + 1]) if start >= 0 < end else None
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


class StrategyModel:
    """A model run under a test-time strategy (see the module docstring)."""

    def __init__(self, inner: Model, spec: StrategySpec, picker: Model | None = None) -> None:
        self.inner, self.spec = inner, spec
        self.name = inner.name
        if spec.kind in ("self-verify", "best-of") and inner.generate is not None and (picker or inner).answer is None:
            raise UserError(f"--strategy {spec.name}: {inner.name} cannot answer, so it cannot judge its own images")
        self._picker = picker if picker is not None else inner
        self.answer: Callable[[Request], str] | None = self._answer if inner.answer is not None else None
        self.generate: Callable[[Request], bytes] | None = self._generate if inner.generate is not None else None
        self._calls: dict[str, int] = {}
        self._lock = threading.Lock()
        for attr in ("config", "layouts", "bind_bench"):
            if hasattr(inner, attr):
                setattr(self, attr, getattr(inner, attr))

    def calls(self, item: str) -> int:
        """The model calls the last request for ``item`` took (and forgets them)."""
        with self._lock:
            return self._calls.pop(item, 1)

    def _count(self, item: str, n: int) -> None:
        with self._lock:
            self._calls[item] = n

    def _answer(self, request: Request) -> str:
        assert self.inner.answer is not None
        if self.spec.kind != "cot":
            self._count(request.item, 1)
            return self.inner.answer(request)
        self._count(request.item, 1)
        return final_answer(self.inner.answer(_add_to_last(request, COT_ANSWER)))

    def _generate(self, request: Request) -> bytes:
        inner = self.inner
        assert inner.generate is not None
        kind = self.spec.kind
        if kind == "none":
            self._count(request.item, 1)
            return inner.generate(request)
        if kind == "cot":
            if inner.answer is None:
                self._count(request.item, 1)
                return inner.generate(request)
            plan = inner.answer(_add_to_last(request, PLAN_PROMPT))
            self._count(request.item, 2)
            return inner.generate(_add_to_last(request, f"Plan: {plan}"))
        if kind == "self-verify":
            return self._self_verify(request)
        return self._best_of(request)

    def _self_verify(self, request: Request) -> bytes:
        assert self.inner.generate is not None and self._picker.answer is not None
        calls, current = 0, request
        image = b""
        for _ in range(self.spec.n):
            image = self.inner.generate(current)
            calls += 1
            draft = InputMessage("assistant", (_image_of(image),))
            check = InputMessage("user", (InputText(VERIFY_PROMPT),))
            verdict = _json(self._picker.answer(_with(request, draft, check)))
            calls += 1
            if verdict is None or verdict.get("acceptable") is True:
                break  # accepted (an unreadable verdict keeps the draft: the model is not asked to guess)
            current = _add_to_last(request, f"Feedback on an earlier draft: {verdict.get('feedback', '')}")
        self._count(request.item, calls)
        return image

    def _best_of(self, request: Request) -> bytes:
        assert self.inner.generate is not None and self._picker.answer is not None
        n = self.spec.n
        candidates = [self.inner.generate(replace(request, seed=_seed(request.seed, k)) if k else request)
                      for k in range(n)]  # fmt: skip
        if n == 1:
            self._count(request.item, 1)
            return candidates[0]
        parts: list[InputText | InputImage] = [InputText(PICK_PROMPT.format(n=n))]
        for k, c in enumerate(candidates, 1):
            parts += [InputText(f"Candidate {k}:"), _image_of(c)]
        reply = _json(self._picker.answer(_with(request, InputMessage("user", tuple(parts)))))
        best = reply.get("best") if reply else None
        self._count(request.item, n + 1)
        return candidates[best - 1] if isinstance(best, int) and 1 <= best <= n else candidates[0]


def _image_of(data: bytes) -> InputImage:
    from yanami.store import open_image_bytes

    img = open_image_bytes(data)
    return InputImage(data, hashlib.sha256(data).hexdigest(), img.width, img.height)
