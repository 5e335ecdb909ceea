"""The author's plan of one dialogue: its JSON shape, yanami's own checks on it, and the dialogue it becomes.

The author LLM returns a `Plan` (JSON; its JSON Schema is sent where the server takes
structured output): the turns with user and assistant text, which pool images the user
shows where, a generate or edit instruction for every assistant image, the hidden state and
intent per turn, the standing constraints, and for a bench the four DSU questions and the
atomic and capability checks. `plan_problems` says what is wrong with a plan before any
image is made: every reference resolves, the turn order holds, the constraints are not
broken by the plan's own instructions. `plan_dialogue` turns an accepted plan and its
realized images into a `Dialogue`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from yanami.contract import (
    CHOICE_LETTERS,
    ID_PATTERN,
    MAX_CHOICES,
    Capability,
    Check,
    CheckCategory,
    CheckHidden,
    CheckKind,
    Dialogue,
    DialogueMeta,
    ImagePart,
    Message,
    Question,
    QuestionHidden,
    QuestionType,
    Scenario,
    TextPart,
    Turn,
    TurnHidden,
)
from yanami.store import dialogue_problems

MIN_CAPABILITIES = 4
"""Every YANAMI-style dialogue exercises at least four of the six capabilities."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PlanImage(_Strict):
    """How the assistant's image of a turn is made."""

    mode: Literal["generate", "edit"]
    """``generate``: from the instruction alone; ``edit``: from the instruction and the input images."""
    inputs: list[str] = []
    """The input images, in order: ``pool:N`` (the N-th offered pool image, from 1) or ``turn:K`` (the
    assistant image of the earlier turn K, from 0). An edit needs at least one."""
    instruction: str = Field(min_length=1)
    """What the image model is asked to draw: self-contained, complete and precise."""


class PlanCheck(_Strict):
    """A binary, visually verifiable criterion on the turn's image."""

    id: Annotated[str, Field(pattern=ID_PATTERN)]
    kind: CheckKind
    text: str = Field(min_length=1)
    capability: Capability | None = None
    """Required for capability checks."""
    category: CheckCategory | None = None
    predicate: JsonValue = None
    """A machine-readable form, if the author has one (kept hidden, for an exact judge)."""


class PlanConstraint(_Strict):
    """A standing requirement the user set, with the words no later image instruction may use while it holds."""

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    from_turn: int = Field(ge=0)
    until_turn: int | None = None
    """The last turn it holds (None: to the end)."""
    forbid: list[str] = []
    """Words (a colour, an object) that an image instruction breaks the constraint by naming."""


class PlanTurn(_Strict):
    """One user message and the assistant's reply."""

    user: str = Field(min_length=1)
    pool_images: list[int] = []
    """The offered pool images (from 1) the user shows in this message, after the text."""
    assistant: str = Field(min_length=1)
    image: PlanImage | None = None
    """The assistant's image, if it makes one."""
    capabilities: list[Capability] = []
    checks: list[PlanCheck] = []
    """On a target turn (a bench's judged images): the checks of the image."""
    state: JsonValue = None
    """The dialogue state after this turn (hidden from the model under test)."""
    intent: JsonValue = None
    """What the user's message asks for (hidden)."""


class PlanQuestion(_Strict):
    """A dialogue-state understanding question with lettered options."""

    type: QuestionType
    after_turn: int = Field(ge=0)
    text: str = Field(min_length=1)
    choices: list[str] = Field(min_length=2, max_length=MAX_CHOICES)
    answer: str = Field(pattern=r"^[A-G]$")
    """The letter of the correct option."""
    aligned_checks: list[str] = []
    """Ids of the capability checks whose images realize what the question asks."""
    intent: JsonValue = None


class Plan(_Strict):
    """A whole dialogue as the author writes it."""

    capabilities: list[Capability]
    """The capabilities the dialogue exercises (at least four)."""
    constraints: list[PlanConstraint] = []
    turns: list[PlanTurn] = Field(min_length=2)
    questions: list[PlanQuestion] = []
    """For a bench: one question of each type (RR, CR, CT, CU)."""


def plan_schema() -> dict[str, Any]:
    """The plan's JSON Schema (what a server with structured output is given)."""
    return Plan.model_json_schema()


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+(?:[-'][a-z]+)*", text.lower()))


def plan_problems(
    plan: Plan,
    offered: int,
    *,
    bench: bool,
    requested: list[Capability] | None = None,
    scenario: Scenario | None = None,
) -> list[str]:
    """What is wrong with a plan, each as ``where: what`` (empty: it may be realized)."""
    out: list[str] = []
    caps = set(plan.capabilities)
    if len(caps) < MIN_CAPABILITIES:
        out.append(f"capabilities: {len(caps)} listed, at least {MIN_CAPABILITIES} are required")
    for c in requested or []:
        if c not in caps:
            out.append(f"capabilities: {c.value} was asked for and is missing")
    exercised: set[Capability] = set()
    with_image: set[int] = set()
    shown: set[int] = set()
    check_ids: dict[str, PlanCheck] = {}
    for i, t in enumerate(plan.turns):
        where = f"turns[{i}]"
        for k in t.pool_images:
            if not 1 <= k <= offered:
                out.append(f"{where}.pool_images: {k} is not an offered image (1 to {offered})")
            shown.add(k)
        exercised.update(t.capabilities)
        for c in t.capabilities:
            if c not in caps:
                out.append(f"{where}.capabilities: {c.value} is not in the dialogue's capabilities")
        if t.image is not None:
            img = t.image
            if img.mode == "edit" and not img.inputs:
                out.append(f"{where}.image: an edit needs at least one input image")
            for j, ref in enumerate(img.inputs):
                problem = _input_problem(ref, i, shown, with_image)
                if problem:
                    out.append(f"{where}.image.inputs[{j}]: {problem}")
            for con in plan.constraints:
                holds = con.from_turn <= i and (con.until_turn is None or i <= con.until_turn)
                broken = sorted(w for w in con.forbid if w.lower() in _words(img.instruction))
                if holds and broken:
                    out.append(
                        f"{where}.image.instruction: names {broken[0]!r}, which constraint {con.id} "
                        f"(from turn {con.from_turn}) forbids"
                    )
            with_image.add(i)
        if t.checks and t.image is None:
            out.append(f"{where}.checks: a turn with checks needs an assistant image")
        for j, check in enumerate(t.checks):
            if check.id in check_ids:
                out.append(f"{where}.checks[{j}].id: {check.id!r} is used twice")
            check_ids[check.id] = check
            if check.kind is CheckKind.CAPABILITY and check.capability is None:
                out.append(f"{where}.checks[{j}].capability: a capability check needs a capability")
    for cap in sorted(caps - exercised, key=str):
        out.append(f"capabilities: no turn exercises {cap.value}")
    for k, con in enumerate(plan.constraints):
        if con.from_turn >= len(plan.turns):
            out.append(f"constraints[{k}].from_turn: turn {con.from_turn} does not exist")
    if bench:
        if not any(t.checks for t in plan.turns):
            out.append("turns: a bench dialogue needs at least one target turn with checks")
        types = sorted(q.type.value for q in plan.questions)
        if types != sorted(q.value for q in QuestionType):
            out.append(f"questions: one of each type RR, CR, CT, CU is required, got {types or 'none'}")
    for k, q in enumerate(plan.questions):
        where = f"questions[{k}]"
        if q.after_turn >= len(plan.turns):
            out.append(f"{where}.after_turn: turn {q.after_turn} does not exist")
        if CHOICE_LETTERS.index(q.answer) >= len(q.choices):
            out.append(f"{where}.answer: {q.answer} is not one of the {len(q.choices)} options")
        for cid in q.aligned_checks:
            aligned = check_ids.get(cid)
            if aligned is None or aligned.kind is not CheckKind.CAPABILITY:
                out.append(f"{where}.aligned_checks: {cid!r} is not a capability check of the plan")
    return out


def _input_problem(ref: str, turn: int, shown: set[int], with_image: set[int]) -> str | None:
    kind, _, number = ref.partition(":")
    if kind not in ("pool", "turn") or not number.isdigit():
        return f"{ref!r} is neither pool:N nor turn:K"
    n = int(number)
    if kind == "pool" and n not in shown:
        return f"{ref!r}: the user has not shown pool image {n} by turn {turn}"
    if kind == "turn" and n not in with_image:
        return f"{ref!r}: turn {n} is not an earlier turn with an assistant image"
    return None


def plan_dialogue(
    plan: Plan,
    dialogue_id: str,
    scenario: Scenario,
    pool: list[ImagePart],
    made: dict[int, ImagePart],
    meta: DialogueMeta,
) -> Dialogue:
    """The dialogue a plan describes: ``pool`` are the offered images (user parts), ``made`` the
    assistant's images by turn. Raises ValueError if the result breaks the data model's rules."""
    turns = []
    for i, t in enumerate(plan.turns):
        user: list[TextPart | ImagePart] = [TextPart(text=t.user)]
        user += [pool[k - 1] for k in t.pool_images]
        assistant: list[TextPart | ImagePart] = [TextPart(text=t.assistant)]
        if i in made:
            assistant.append(made[i])
        checks = [
            Check(
                id=c.id,
                kind=c.kind,
                text=c.text,
                capability=c.capability,
                category=c.category,
                hidden=CheckHidden(predicate=c.predicate),
            )
            for c in t.checks
        ]
        turns.append(
            Turn(
                index=i,
                user=Message(role="user", parts=user),
                assistant=Message(role="assistant", parts=assistant),
                capabilities=list(dict.fromkeys(t.capabilities)),
                checks=checks,
                hidden=TurnHidden(state=t.state, intent=t.intent),
            )
        )
    questions = [
        Question(
            id=f"q{k + 1}",
            type=q.type,
            after_turn=q.after_turn,
            text=q.text,
            answer=q.choices[CHOICE_LETTERS.index(q.answer)],
            choices=q.choices,
            answer_letters=[q.answer],
            aligned_checks=q.aligned_checks,
            hidden=QuestionHidden(intent=q.intent),
        )
        for k, q in enumerate(plan.questions)
    ]
    d = Dialogue(
        id=dialogue_id,
        scenario=scenario,
        capabilities=list(dict.fromkeys(plan.capabilities)),
        turns=turns,
        questions=questions,
        meta=meta,
    )
    problems = dialogue_problems(d)
    if problems:
        loc, message = problems[0]
        raise ValueError(f"{'.'.join(map(str, loc))}: {message}")
    return d
