"""The yanami data model: dialogues, turns, messages, images, questions and checks.

What a model under test may see is exactly the ``parts`` of each turn's ``user`` and
``assistant`` messages. Everything else (questions, checks, reference answers and the
``hidden`` annotations: per-turn state, user intent, check predicates) is for builders,
judges and reviewers only.

`dialogue_problems` checks what one field's type cannot: references between turns,
questions and checks, and the ordering rules. Both the dataset writer and
``yanami validate`` use it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from yanami.families import CHECK_SCALES, FAMILIES, Family  # the families' facts; re-exported here
from yanami.scenarios import Scenario  # the scenario facts' own module; re-exported here

SCHEMA_VERSION = "1.1"
"""Version of this data model; bumped on any change to a field (1.1: families, domains, graded
checks, answered turns, references between turns)."""

SHA256_PATTERN = r"^[0-9a-f]{64}$"
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
"""Ids are plain names: never a path, never empty, at most 128 characters."""

MAX_CHOICES = 7
"""Options are lettered A-G, as in IMUG-Bench's option regex."""

CHOICE_LETTERS = "ABCDEFG"


class Capability(StrEnum):
    """The six state-management capabilities of YANAMI."""

    COREFERENCE = "coreference"
    RETRIEVAL = "history_retrieval"
    CONSISTENCY = "cross_turn_consistency"
    SPATIAL = "spatial_physical_consistency"
    CONSTRAINT = "constraint_adherence"
    CORRECTION = "correction_updating"


class QuestionType(StrEnum):
    """The four Dialogue State Understanding question types."""

    RR = "RR"
    """Reference Resolution."""
    CR = "CR"
    """Context Retrieval."""
    CT = "CT"
    """Constraint Tracking."""
    CU = "CU"
    """Correction Updating."""


class CheckKind(StrEnum):
    """What a check is, which fixes its scale (`yanami.families.CHECK_SCALES`).

    YANAMI: atomic checks make up State Consistency, capability checks feed the gap analysis
    (both pass or fail). WEAVE: key points, scored together as a checklist 0-10. IMUG-Bench:
    evaluation points, each scored 0-5.
    """

    ATOMIC = "atomic"
    CAPABILITY = "capability"
    KEY_POINT = "key_point"
    EVALUATION_POINT = "evaluation_point"

    @property
    def scale(self) -> int:
        """The top of the check's scale (1: pass or fail)."""
        return CHECK_SCALES[self.value]


class CheckCategory(StrEnum):
    """What an atomic check looks at."""

    EXISTENCE = "existence"
    ABSENCE = "absence"
    COUNT = "count"
    ATTRIBUTE = "attribute"
    RELATION = "relation"
    SUPPORT = "support"
    VIEWPOINT = "viewpoint"
    OTHER = "other"


class ImageSource(StrEnum):
    """Who produced an image: the user supplied it, or the assistant generated it."""

    USER = "user"
    ASSISTANT = "assistant"


class ImageFormat(StrEnum):
    """Encodings an image file may have; the file's extension is its value."""

    PNG = "png"
    JPEG = "jpeg"
    WEBP = "webp"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Sha256 = Annotated[str, Field(pattern=SHA256_PATTERN)]
Id = Annotated[str, Field(pattern=ID_PATTERN)]


class TextPart(_Model):
    """A run of text inside a message."""

    type: Literal["text"] = "text"
    text: str
    """The text, shown to the model as is."""


class ImagePart(_Model):
    """An image inside a message, referenced by the SHA-256 of its file's bytes."""

    type: Literal["image"] = "image"
    sha256: Sha256
    """Lower-case hex SHA-256 of the image file; the file is ``images/<2 chars>/<sha256>.<format>``."""
    format: ImageFormat = ImageFormat.PNG
    """How the file is encoded."""
    width: int = Field(gt=0)
    """Width in pixels."""
    height: int = Field(gt=0)
    """Height in pixels."""
    source: ImageSource
    """Who produced the image (a user may re-attach an image the assistant made)."""


Part = Annotated[TextPart | ImagePart, Field(discriminator="type")]


class Message(_Model):
    """One side of a turn: text and image parts, interleaved in order."""

    role: Literal["user", "assistant"]
    parts: list[Part]
    """The content, in reading order."""

    def images(self) -> list[ImagePart]:
        """The message's image parts, in order."""
        return [p for p in self.parts if isinstance(p, ImagePart)]

    def text(self) -> str:
        """The message's text parts joined by blank lines."""
        return "\n\n".join(p.text for p in self.parts if isinstance(p, TextPart))


class CheckHidden(_Model):
    """What only the exact judge reads about a check."""

    predicate: JsonValue = None
    """Machine-readable form of the check (any JSON; the world writes an object), for the exact judge."""


class TurnRef(_Model):
    """A reference from a turn to an earlier turn's input or output.

    ``of`` says which version: ``data`` is what the dataset holds there (a user's picture, a
    reference image), ``model`` is what the model under evaluation produced at that turn
    (its own image or answer), which exists only once it has answered.
    """

    turn: int = Field(ge=0)
    side: Literal["user", "assistant"]
    image: Annotated[int, Field(ge=0)] | None = None
    """Which of the message's images (counting from 0); None: the whole message."""
    of: Literal["data", "model"] = "data"


class Check(_Model):
    """An independently verifiable criterion on a target turn's image, on its kind's scale."""

    id: Id
    """Unique within the dialogue."""
    kind: CheckKind
    text: str = Field(min_length=1)
    """What a human or VLM judge reads."""
    capability: Capability | None = None
    """Required for capability checks: the capability the check isolates."""
    category: CheckCategory | None = None
    """For atomic checks: what kind of property is checked."""
    references: list[TurnRef] = []
    """The images the criterion compares with, in order (WEAVE's ``GT #k`` and ``Image #k``)."""
    hidden: CheckHidden = CheckHidden()


class Answer(_Model):
    """The reference for a turn whose assistant reply is text that is graded (a target text turn)."""

    text: str = ""
    """The reference answer as the source wrote it (WEAVE's standard answer, IMUG-Bench's ``answer``)."""
    letters: list[str] = []
    """For a multiple-choice turn: the correct option letters known before the model answers."""
    dynamic: bool = False
    """Part of the answer depends on what the model produced earlier: it is resolved after the
    model has answered, from the turns in the turn's ``references``."""


class TurnHidden(_Model):
    """Annotations a model under test never sees."""

    state: JsonValue = None
    """The dialogue state after this turn (any JSON; the world writes an object)."""
    intent: JsonValue = None
    """What the user's message asks for, machine-readable (any JSON)."""


class Turn(_Model):
    """One user message and the assistant's response."""

    index: int = Field(ge=0)
    """Position in the dialogue, counting from 0."""
    user: Message
    assistant: Message
    capabilities: list[Capability] = []
    """The capabilities this turn exercises."""
    checks: list[Check] = []
    """Non-empty exactly on target image turns, whose assistant image is judged."""
    answer: Answer | None = None
    """Set exactly on target text turns, whose assistant text is graded."""
    references: list[TurnRef] = []
    """Earlier inputs and outputs the turn's grading depends on (IMUG-Bench's image and dynamic
    references)."""
    hidden: TurnHidden = TurnHidden()

    @property
    def is_target(self) -> bool:
        """Whether the assistant's reply at this turn is evaluated (an image, or a text)."""
        return bool(self.checks) or self.answer is not None


class QuestionHidden(_Model):
    """What only builders and judges read about a question."""

    intent: JsonValue = None
    """Machine-readable form of what is asked (any JSON)."""


class Question(_Model):
    """A Dialogue State Understanding question, asked after a given turn."""

    id: Id
    """Unique within the dialogue."""
    type: QuestionType
    after_turn: int = Field(ge=0)
    """The question sees the dialogue up to and including this turn."""
    text: str = Field(min_length=1)
    answer: str = Field(min_length=1)
    """The reference answer, in words."""
    choices: list[str] = Field(default=[], max_length=MAX_CHOICES)
    """Multiple-choice options, lettered A, B, … in order (empty for free answers)."""
    answer_letters: list[str] = []
    """The letters of the correct options (required when there are choices)."""
    aligned_checks: list[Id] = []
    """Ids of the capability checks whose images realize what this question asks."""
    hidden: QuestionHidden = QuestionHidden()


class DialogueMeta(_Model):
    """Where a dialogue came from, enough to rebuild it."""

    generator: str = Field(min_length=1)
    """The builder, e.g. ``world`` or ``llm``."""
    version: str = ""
    """The builder's version."""
    seed: int | None = None
    params: dict[str, Any] = {}


class Dialogue(_Model):
    """A multi-turn multimodal dialogue with its questions and checks."""

    id: Id
    family: Family = Family.YANAMI
    scenario: Scenario | None = None
    """YANAMI dialogues: the interaction scenario (required)."""
    domain: str | None = None
    """WEAVE and IMUG-Bench dialogues: the family's domain (required), e.g. ``chess_game``."""
    subdomain: str | None = None
    """IMUG-Bench: the task within the domain."""
    system_prompt: str | None = None
    """A system message the model sees before the first turn."""
    capabilities: list[Capability] = []
    """Every capability some turn exercises (YANAMI-style data has at least 4)."""
    turns: list[Turn] = Field(min_length=1)
    questions: list[Question] = []
    meta: DialogueMeta

    def images(self) -> list[ImagePart]:
        """Every image part in dialogue order, the user's before the assistant's in a turn."""
        return [im for t in self.turns for m in (t.user, t.assistant) for im in m.images()]

    def image_count(self) -> int:
        """How many images the dialogue holds: distinct files, so an image shown again counts once."""
        return len({im.sha256 for im in self.images()})

    def checks(self) -> list[Check]:
        """Every check of every turn, in turn order."""
        return [c for t in self.turns for c in t.checks]

    @property
    def group(self) -> str:
        """What results are grouped by: the scenario of a YANAMI dialogue, the domain otherwise."""
        return group_of(self)


def group_of(d: Any) -> str:
    """A dialogue's group (scenario or domain); also for the fast decoder's objects."""
    s = d.scenario
    if s is not None:
        return str(s.value if isinstance(s, Scenario) else s)
    return str(d.domain or "")


Loc = tuple[str | int, ...]

_CAPABILITY = CheckKind.CAPABILITY
_ASSISTANT = ImageSource.ASSISTANT


class DialogueWalk:
    """One pass over a dialogue: its consistency problems, ids, image hashes and image parts.

    `dialogue_problems` is the public face; the dataset validator also reads the ids
    and hashes (to check their patterns in one regex call each) and the image parts,
    each as ``(turn index, "user" | "assistant", part index, part)``.
    """

    __slots__ = ("dialogue", "ids", "images", "n_checks", "problems", "shas")

    def __init__(self, d: Any) -> None:
        # Reads attributes only, and compares enums by value, so it also accepts the
        # fast decoder's objects (yanami.store), which mirror these models field by field.
        # Written for speed: validation runs this on every line of a dataset.
        out: list[tuple[Loc, str]] = []
        ids: list[str] = [d.id]
        images: list[tuple[int, str, int, Any]] = []
        shas: list[str] = []
        turns = d.turns
        check_ids: dict[str, Any] = {}
        used: set[str] = set()
        n_checks = 0
        family = d.family
        yanami = family == _YANAMI
        kinds = _KINDS.get(family, ())
        if yanami:
            if d.scenario is None:
                out.append((("scenario",), "a YANAMI dialogue needs a scenario"))
            if d.domain is not None:
                out.append((("domain",), "a YANAMI dialogue has a scenario, not a domain"))
        else:
            facts = FAMILIES[Family(family)]
            if d.scenario is not None:
                out.append((("scenario",), f"a {facts.title} dialogue has a domain, not a scenario"))
            if d.domain is None:
                out.append((("domain",), f"a {facts.title} dialogue needs a domain"))
            elif not facts.open_domains and facts.class_of(d.domain) is None:
                out.append((("domain",), f"{d.domain!r} is not a {facts.title} domain"))
        for i, t in enumerate(turns):
            if t.index != i:
                out.append((("turns", i, "index"), f"turn indices must run 0, 1, 2, …: expected {i}, got {t.index}"))
            user, assistant = t.user, t.assistant
            if user.role != "user":
                out.append((("turns", i, "user", "role"), f"expected 'user', got {user.role!r}"))
            if assistant.role != "assistant":
                out.append((("turns", i, "assistant", "role"), f"expected 'assistant', got {assistant.role!r}"))
            for j, p in enumerate(user.parts):
                if p.type == "image":
                    images.append((i, "user", j, p))
                    shas.append(p.sha256)
            generated = False
            for j, p in enumerate(assistant.parts):
                if p.type == "image":
                    images.append((i, "assistant", j, p))
                    shas.append(p.sha256)
                    if p.source == _ASSISTANT:
                        generated = True
            used.update(t.capabilities)
            if t.references:
                _refs(out, turns, i, ("turns", i, "references"), t.references)
            answer = t.answer
            if answer is not None:
                if t.checks:
                    out.append((("turns", i, "answer"), "a turn is graded by its checks or by its answer, not both"))
                for a, letter in enumerate(answer.letters):
                    if letter not in CHOICE_LETTERS:
                        out.append((("turns", i, "answer", "letters", a), f"{letter!r} is not an option letter A-G"))
                if answer.dynamic and not t.references:
                    out.append((("turns", i, "answer", "dynamic"), "a dynamic answer needs the turns it depends on"))
            checks = t.checks
            if not checks:
                continue
            if yanami and not generated:
                out.append((("turns", i, "checks"), "a turn with checks needs an assistant-generated image"))
            n_checks += len(checks)
            for j, c in enumerate(checks):
                cid = c.id
                ids.append(cid)
                if cid in check_ids:
                    out.append((("turns", i, "checks", j, "id"), f"duplicate check id {cid!r}"))
                check_ids[cid] = c
                if c.kind not in kinds:
                    allowed = ", ".join(kinds)
                    out.append((("turns", i, "checks", j, "kind"), f"a {family} dialogue's checks are {allowed}"))
                if c.capability is None and c.kind == _CAPABILITY:
                    out.append((("turns", i, "checks", j, "capability"), "a capability check needs a capability"))
                if c.references:
                    _refs(out, turns, i, ("turns", i, "checks", j, "references"), c.references, judged=True)
        if len(set(d.capabilities)) != len(d.capabilities):
            out.append((("capabilities",), "duplicate capability"))
        missing = used.difference(d.capabilities)
        if missing:
            names = ", ".join(sorted(str(c) for c in missing))
            out.append((("capabilities",), f"turns exercise capabilities the dialogue does not list: {names}"))
        question_ids: set[str] = set()
        n = len(turns)
        for k, q in enumerate(d.questions):
            ids.append(q.id)
            if q.id in question_ids:
                out.append((("questions", k, "id"), f"duplicate question id {q.id!r}"))
            question_ids.add(q.id)
            if q.after_turn >= n:
                out.append(
                    (("questions", k, "after_turn"), f"turn {q.after_turn} does not exist (the dialogue has {n})")
                )
            for a, cid in enumerate(q.aligned_checks):
                ids.append(cid)
                if cid not in check_ids:
                    out.append((("questions", k, "aligned_checks", a), f"check {cid!r} does not exist"))
                elif check_ids[cid].kind != _CAPABILITY:
                    out.append((("questions", k, "aligned_checks", a), f"check {cid!r} is not a capability check"))
            if q.choices:
                letters = CHOICE_LETTERS[: len(q.choices)]
                if not q.answer_letters:
                    out.append((("questions", k, "answer_letters"), "a question with choices needs answer letters"))
                for a, letter in enumerate(q.answer_letters):
                    if letter not in letters:
                        out.append(
                            (("questions", k, "answer_letters", a), f"{letter!r} is not one of the options {letters}")
                        )
            elif q.answer_letters:
                out.append((("questions", k, "answer_letters"), "answer letters without choices"))
        self.dialogue = d
        self.problems = out
        self.ids = ids
        self.images = images
        self.shas = shas
        self.n_checks = n_checks


_YANAMI = Family.YANAMI.value
_KINDS: dict[str, tuple[str, ...]] = {
    Family.YANAMI.value: (CheckKind.ATOMIC.value, CheckKind.CAPABILITY.value),
    Family.WEAVE.value: (CheckKind.KEY_POINT.value,),
    Family.IMUG.value: (CheckKind.EVALUATION_POINT.value,),
}
"""The check kinds each family grades with."""


def _refs(out: list[tuple[Loc, str]], turns: Any, i: int, loc: Loc, refs: Any, *, judged: bool = False) -> None:
    """References from turn ``i``: to an earlier turn, or to its own user message; a check's
    references (``judged``: what a judge compares with) may also name the turn's own reference image."""
    for r, ref in enumerate(refs):
        where = (*loc, r)
        own = judged and ref.turn == i and ref.side == "assistant" and ref.of == "data"
        if ref.turn > i or (ref.turn == i and ref.side == "assistant" and not own):
            out.append(((*where, "turn"), f"turn {i} cannot depend on turn {ref.turn}'s {ref.side} message (later)"))
            continue
        if ref.of == "model" and ref.side != "assistant":
            out.append(((*where, "of"), "only an assistant message has a model version"))
        if ref.image is not None and ref.of == "data":
            msg = turns[ref.turn].user if ref.side == "user" else turns[ref.turn].assistant
            n = sum(1 for p in msg.parts if p.type == "image")
            if ref.image >= n:
                out.append(((*where, "image"), f"turn {ref.turn}'s {ref.side} message has {n} image(s)"))


def dialogue_problems(d: Dialogue) -> list[tuple[Loc, str]]:
    """Return what is inconsistent inside one dialogue, as (field location, message) pairs.

    The field types are already valid here; this checks ordering, references and the
    rules that span fields (turn indices, roles, check and question ids, capabilities).
    """
    return DialogueWalk(d).problems
