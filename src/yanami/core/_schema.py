"""The yanami data model: dialogues, turns, messages, images, questions and checks.

What a model under test may see is exactly the ``parts`` of each turn's ``user`` and
``assistant`` messages. Everything else (questions, checks, reference answers and the
``hidden`` annotations: per-turn state, user intent, check predicates) is for builders,
judges and reviewers only.

What one field's type cannot check (references between turns, questions and checks, the
ordering rules) is the store's `yanami.store.dialogue_problems`, which both the dataset
writer and ``yanami validate`` run.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal, cast

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue

from yanami.core._families import DEFAULT_FAMILY, check_kinds, check_scale
from yanami.core._scenarios import Scenario  # the scenario facts' own module; re-exported here

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
    """YANAMI's own check kinds: atomic checks make up State Consistency, capability checks feed
    the gap analysis (both pass or fail). A family declares its kinds and their scales
    (`FamilyFacts.check_kinds`); a `Check`'s kind is any kind an installed family declares, one of
    these members where it is YANAMI's."""

    ATOMIC = "atomic"
    CAPABILITY = "capability"


def _kinds_schema(schema: dict[str, Any]) -> None:
    schema["enum"] = list(check_kinds())  # those of the families installed when the schema is written


def _check_kind(kind: str) -> str:
    member = CheckKind._value2member_map_.get(kind)  # the member CheckKind(kind) returns, without the enum's call
    if member is not None:
        return cast(CheckKind, member)
    if kind not in check_kinds():
        raise ValueError(f"not a check kind any installed family declares ({', '.join(check_kinds())})")
    return kind


KIND_CHECK = AfterValidator(_check_kind)
"""A check's kind against the installed families' kinds; the store's fast path leaves it to its
`DialogueWalk`, which checks it against the dialogue's own family."""


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
    kind: Annotated[str, KIND_CHECK] = Field(json_schema_extra=_kinds_schema)
    """YANAMI's `CheckKind`, or a kind another family declares (`FamilyFacts.check_kinds`)."""
    text: str = Field(min_length=1)
    """What a human or VLM judge reads."""
    capability: Capability | None = None
    """Required for capability checks: the capability the check isolates."""
    category: CheckCategory | None = None
    """For atomic checks: what kind of property is checked."""
    references: list[TurnRef] = []
    """The images the criterion compares with, in order (WEAVE's ``GT #k`` and ``Image #k``)."""
    hidden: CheckHidden = CheckHidden()

    @property
    def scale(self) -> int:
        """The top of the check's scale (1: pass or fail), as its family declares it."""
        return check_scale(self.kind)


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
    family: str = Field(default=DEFAULT_FAMILY, min_length=1)
    """Its benchmark family: ``yanami``, ``weave``, ``imug`` or a plug-in's (`yanami.families`);
    the store's dialogue walk refuses a family no installed plug-in registers."""
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
