"""What gets evaluated: items (target turns and DSU questions) and the requests for them.

A request is built from message parts only, in one of three input layouts
(docs/evaluation.md). Nothing hidden (state, intent, predicates, reference answers, the target
image) is read here, and nothing outside the conversation varies with the item: the output
frame follows the latest picture the request shows, the seed is the run's (issue 33; `yanami
audit` shows what each adapter puts on the wire).
"""

from __future__ import annotations

import hashlib
import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from PIL import Image, ImageDraw

from yanami.contract import (
    QUESTION_FRAME,
    Dialogue,
    ImagePart,
    InputImage,
    InputMessage,
    InputText,
    Layout,
    Question,
    Request,
    Role,
    TextPart,
    output_frame,
)
from yanami.models import question_prompt


@dataclass(frozen=True)
class Item:
    """One thing a model is asked: a target turn (an image) or a DSU question (text)."""

    id: str
    """``<dialogue>/t<turn>`` or ``<dialogue>/<question id>``."""
    dialogue: str
    kind: Literal["turn", "question", "reply"]
    """``turn``: an image for a target turn; ``question``: a DSU question; ``reply``: the text of a
    target text turn (WEAVE's and IMUG-Bench's text turns)."""
    turn: int
    """The target turn, or the turn after which the question is asked."""
    question: str | None = None


def frame_of(messages: tuple[InputMessage, ...]) -> tuple[int, int]:
    """The output frame of an image request: the latest picture it shows, aspect kept, long edge
    512, sides multiples of 16 (`output_frame`); square with none. Never the target's own size,
    which the model does not see (its aspect would tell it something of the answer)."""
    for m in reversed(messages):
        for p in reversed(m.parts):
            if isinstance(p, InputImage):
                return output_frame(p.width, p.height)
    return output_frame(1, 1)


def generation_turns(d: Dialogue) -> list[int]:
    """The target turns of a dialogue: those whose assistant image is judged."""
    return [t.index for t in d.turns if t.checks]


def items_of(d: Dialogue, *, turns: bool = True, questions: bool = True) -> list[Item]:
    """The items of a dialogue in the order a Self-History rollout needs: its target turns in
    order (images if ``turns``, texts if ``questions``: a model that answers), then questions."""
    out: list[Item] = []
    for t in d.turns:
        if t.checks and turns:
            out.append(Item(f"{d.id}/t{t.index}", d.id, "turn", t.index))
        elif t.answer is not None and questions:
            out.append(Item(f"{d.id}/t{t.index}", d.id, "reply", t.index))
    if questions:
        out += [Item(f"{d.id}/{q.id}", d.id, "question", q.after_turn, q.id) for q in d.questions]
    return out


def question_of(d: Dialogue, item: Item) -> Question:
    """The question an item asks."""
    return next(q for q in d.questions if q.id == item.question)


ImageBytes = Callable[[int, str, int, ImagePart], bytes | InputImage]
"""(turn, side, position, part) -> the image to show for that part: its bytes, or the `InputImage`
when the caller already knows its hash and size (a verified bench image)."""

OwnReply = Callable[[int], "list[TextPart | InputImage] | None"]
"""turn -> what the model itself replied there, to show instead of the dataset's assistant message
(Self-History on turns the image rule does not cover: text replies, and image turns that have no
reference image); None: the dataset's message."""

NO_REPLY = "(no reply)"
"""What stands in the history for an assistant message with nothing in it."""


def build_request(
    d: Dialogue,
    item: Item,
    layout: Layout,
    image_bytes: ImageBytes,
    own_reply: OwnReply | None = None,
    seed: int | None = None,
) -> Request:
    """The request for an item: the conversation before it (after the dialogue's system prompt,
    if it has one), in the given layout, with the run's ``seed``."""
    last = item.turn if item.kind == "question" else item.turn - 1
    raw: list[tuple[Role, list[TextPart | InputImage]]] = []
    for t in d.turns[: last + 1]:
        raw.append(("user", [_resolve(p, t.index, "user", j, image_bytes) for j, p in enumerate(t.user.parts)]))
        own = own_reply(t.index) if own_reply is not None else None
        if own is None:
            own = [_resolve(p, t.index, "assistant", j, image_bytes) for j, p in enumerate(t.assistant.parts)]
        raw.append(("assistant", own or [TextPart(text=NO_REPLY)]))
    if item.kind in ("turn", "reply"):
        t = d.turns[item.turn]
        raw.append(("user", [_resolve(p, t.index, "user", j, image_bytes) for j, p in enumerate(t.user.parts)]))
        shown = tuple(InputMessage("user", tuple(p for p in parts if isinstance(p, InputImage))) for _, parts in raw)
        size = frame_of(shown)
    else:
        raw.append(("user", [TextPart(text=question_prompt(question_of(d, item)))]))
        size = QUESTION_FRAME
    if d.system_prompt:
        raw[0] = (raw[0][0], [TextPart(text=d.system_prompt), *raw[0][1]])
    messages = _lay_out(raw, layout)
    return Request(item=item.id, messages=messages, seed=seed, size=size)


def _closed(turn: int, side: str, j: int, part: ImagePart) -> bytes | InputImage:
    raise RuntimeError("the conversation is closed")


class Conversation:
    """The requests of one dialogue's chain, built as the chain runs (`build_request`'s requests,
    the same ones): each earlier turn's messages are resolved (its images read, the model's own
    outputs put in under Self-History) once, for every later request that shows them, so the cost
    of a request does not grow with the turn beyond copying its history (in the yes-first layout;
    the others number every image of the history, or draw them all into one picture, anew).

    A turn is resolved when the first request that shows it is built: its earlier items have run
    by then (a chain asks its items in order), so what the callbacks give for it no longer changes.
    ``fallbacks`` counts the history parts where the dataset stood in for the model's own output
    (the callbacks advance it); `request` gives, with each request, how many its history holds.
    """

    def __init__(
        self,
        d: Dialogue,
        layout: Layout,
        image_bytes: ImageBytes,
        own_reply: OwnReply | None = None,
        fallbacks: Callable[[], int] = lambda: 0,
        seed: int | None = None,
    ) -> None:
        self.d, self.layout, self.image_bytes, self.own_reply, self.fallbacks = (
            d,
            layout,
            image_bytes,
            own_reply,
            fallbacks,
        )
        self.seed = seed
        """The run's seed, sent with every request (None: none)."""
        self.questions = {q.id: q for q in d.questions}
        self._users: dict[int, InputMessage] = {}
        self._messages: list[InputMessage] = []
        """The history so far: the user and the assistant message of each resolved turn."""
        self._fell = [0]
        """Fallbacks in the history of the first k resolved turns, at k."""

    def close(self) -> None:
        """Drop the callbacks, which refer back to the chain that holds this conversation."""
        self.image_bytes = _closed
        self.own_reply = None
        self.fallbacks = lambda: 0

    def question(self, item: Item) -> Question:
        """The question an item asks."""
        return self.questions[item.question or ""]

    def request(self, item: Item) -> tuple[Request, int]:
        """The request for an item, and the fallbacks in the history it shows."""
        if self.layout != "yes-first":
            before = self.fallbacks()
            request = build_request(self.d, item, self.layout, self.image_bytes, self.own_reply, self.seed)
            return request, self.fallbacks() - before
        last = item.turn if item.kind == "question" else item.turn - 1
        while len(self._fell) <= last + 1:
            self._resolve_turn(len(self._fell) - 1)
        if item.kind in ("turn", "reply"):
            tail = self._user(item.turn)
        else:
            tail = InputMessage("user", (InputText(question_prompt(self.question(item))),))
        messages = (*self._messages[: 2 * (last + 1)], tail)
        size = frame_of(messages) if item.kind != "question" else QUESTION_FRAME
        return Request(item=item.id, messages=messages, seed=self.seed, size=size), self._fell[last + 1]

    def _user(self, turn: int) -> InputMessage:
        message = self._users.get(turn)
        if message is None:
            t = self.d.turns[turn]
            parts = [_resolve(p, turn, "user", j, self.image_bytes) for j, p in enumerate(t.user.parts)]
            if turn == 0 and self.d.system_prompt:  # the first message of every request
                parts.insert(0, TextPart(text=self.d.system_prompt))
            message = self._users[turn] = _message("user", parts)
        return message

    def _resolve_turn(self, turn: int) -> None:
        t = self.d.turns[turn]
        before = self.fallbacks()
        own = self.own_reply(turn) if self.own_reply is not None else None
        if own is None:
            own = [_resolve(p, turn, "assistant", j, self.image_bytes) for j, p in enumerate(t.assistant.parts)]
        self._messages += (self._user(turn), _message("assistant", own or [TextPart(text=NO_REPLY)]))
        self._users.pop(turn, None)
        self._fell.append(self._fell[-1] + self.fallbacks() - before)


def _message(role: Role, parts: list[TextPart | InputImage]) -> InputMessage:
    return InputMessage(role, tuple(InputText(p.text) if isinstance(p, TextPart) else p for p in parts))


def _resolve(p: TextPart | ImagePart, turn: int, side: str, j: int, image_bytes: ImageBytes) -> TextPart | InputImage:
    if isinstance(p, TextPart):
        return p
    data = image_bytes(turn, side, j, p)
    if isinstance(data, InputImage):
        return data
    sha = hashlib.sha256(data).hexdigest()
    if sha == p.sha256:
        return InputImage(data, sha, p.width, p.height)
    with Image.open(io.BytesIO(data)) as img:  # an image other than the dataset's (Self-History)
        return InputImage(data, sha, img.width, img.height)


def _lay_out(raw: list[tuple[Role, list[TextPart | InputImage]]], layout: Layout) -> tuple[InputMessage, ...]:
    if layout == "yes-first":
        return tuple(_message(role, parts) for role, parts in raw)
    images: list[InputImage] = []
    messages: list[list[InputText | InputImage]] = []
    for _, parts in raw:
        out: list[InputText | InputImage] = []
        for p in parts:
            if isinstance(p, TextPart):
                out.append(InputText(p.text))
            else:
                images.append(p)
                out.append(InputText(f"[Image {len(images)}]"))
        messages.append(out)
    front: list[InputText | InputImage] = []
    if images and layout == "yes-front":
        for k, im in enumerate(images, 1):
            front += [InputText(f"[Image {k}]"), im]
    elif images:
        front = [InputText(f"[Images 1-{len(images)}, numbered in dialogue order]"), composite(images)]
    messages[0] = front + messages[0]
    return tuple(InputMessage(role, tuple(parts)) for (role, _), parts in zip(raw, messages, strict=True))


TILE = (256, 192)


def composite(images: list[InputImage]) -> InputImage:
    """All images tiled, in dialogue order, into one numbered PNG (for single-image models)."""
    cols = math.ceil(math.sqrt(len(images)))
    rows = math.ceil(len(images) / cols)
    sheet = Image.new("RGB", (cols * TILE[0], rows * TILE[1]), "white")
    draw = ImageDraw.Draw(sheet)
    for k, im in enumerate(images):
        tile = Image.open(io.BytesIO(im.data)).convert("RGB")
        tile.thumbnail(TILE, Image.Resampling.LANCZOS)
        x, y = (k % cols) * TILE[0], (k // cols) * TILE[1]
        sheet.paste(tile, (x, y))
        label = str(k + 1)
        draw.rectangle((x, y, x + 14 + 8 * len(label), y + 18), fill="black")
        draw.text((x + 5, y + 3), label, fill="white")
    buf = io.BytesIO()
    sheet.save(buf, format="PNG")
    data = buf.getvalue()
    return InputImage(data, hashlib.sha256(data).hexdigest(), sheet.width, sheet.height)
