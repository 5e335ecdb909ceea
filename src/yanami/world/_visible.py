"""``reference:visible``: a reference agent that reads only its request, as a model must.

It has no ``bind_bench``: it never sees the bench, the hidden states, intents, free choices,
predicates or reference answers. It reads the request's messages in order, the words through
an interpreter for the world's language (every template of the scenario scripts, read back)
and the pictures through the world's pixel parser, and keeps the dialogue's state itself:

- *pictures*: every image of the request in order, each parsed in the camera frame the agent
  follows from the words (a user's picture is taken from ``VIEWS[0]``; a walk around the table
  turns the camera by a quarter or half turn; "from where we first looked" goes back to the
  first picture's; going back to picture 2 takes picture 2's). Objects keep their identity
  from picture to picture: the agent predicts the scene each turn should show and matches
  the objects the next picture shows to it (by their attributes, then by where they stand);
- *words*: the listing of the first picture, the suggestions of a composite, the plan's steps,
  the rule (a colour named through an everyday thing, confirmed by the acknowledgement; an
  object named by where it stands), what each turn did and which objects it named, "it".

For a target turn it applies what the user's words mean given the whole dialogue to the
latest picture, makes its own free choices where the words leave them open (as the
``stateful`` agent does: the world's placement first, then anywhere legible, a picture that
does not read back drawn again) and draws the result with the world's renderer, in the
picture's style. A DSU question is answered from the tracked state.

`visible_misses` plays the same agent on a dialogue with the ground truth's scenes as what it
sees (GT-History, no rendering or parsing) and lists every check its output fails and every
question it gets wrong: the proof, dialogue by dialogue, that the bench is decidable from
what a model is shown.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from yanami.contract import (
    CHOICE_LETTERS,
    Dialogue,
    ImagePart,
    InputImage,
    InputText,
    Request,
    TextPart,
    UserError,
    seeded,
)
from yanami.world._agents import REDRAWS, _reads_back, draw, see
from yanami.world._frames import POSITION_TOLERANCE, credited, in_frame, read_candidate, shown_before
from yanami.world._free import Slot, loose, realize, realize_anywhere
from yanami.world._language import MATERIAL_WORDS, ORDINALS, REL_WORDS, full_where, phrase
from yanami.world._ops import Op, OpError, View, apply_op
from yanami.world._parse import IN_PROCESS, Parser
from yanami.world._place import VIEWS, legible
from yanami.world._predicates import ATTRIBUTES, Where, evaluate, select
from yanami.world._scenarios._skeleton import COLOUR_THINGS, EXTREMES, STANDING, extreme
from yanami.world._scenarios.world_modeling import OPPOSITE, ORBIT_WORDS, PUSH_WORDS
from yanami.world._scene import COLOURS, MARGIN, SHAPES, SIZES, Scene, WorldObject, camera_coords
from yanami.world._selfhistory import view_of

Eyes = Callable[[int, float], View]
"""What the agent sees: picture ``k`` of the dialogue (0-based, in the order shown) read in the
camera frame of an azimuth (the parser, or the ground truth's scene for `visible_misses`)."""

# The world's language, read back ---------------------------------------------------------------

_COLOUR = "|".join(COLOURS)
_THING_COLOUR = {thing: colour for colour, things in COLOUR_THINGS.items() for thing in things}
_THING = "|".join(re.escape(t) for t in sorted(_THING_COLOUR, key=len, reverse=True))
_MATERIAL_OF = {word: m for m, words in MATERIAL_WORDS.items() for word in words}
_ORDINAL = "|".join(ORDINALS)
_SHAPE = "|".join(SHAPES)
_ATTR_WORD = "|".join([*SIZES, *COLOURS, *_MATERIAL_OF])
_PHRASE = rf"(?:(?:{_ATTR_WORD}) ){{0,3}}(?:{_SHAPE})"
"""An object named by its attributes (`yanami.world._language.phrase`), without the article."""
REF = (
    rf"\bit\b|the (?:(?:{_ORDINAL}) (?:object|one|thing) you listed|(?:{_ORDINAL}) one in your list"
    rf"|(?:{_ORDINAL}) (?:one|object) you suggested|one you'd remove in step \d+|object step \d+ removes"
    rf"|object you added in my (?:{_ORDINAL}) message|piece we added(?: a little while ago)?"
    rf"|object you added earlier|{_PHRASE})\b"
)
"""Every way a user names an object: "it", by the assistant's listing, by its suggestions, by a
plan step, by the turn that added it, or by attributes."""
COL = rf"(?:{_COLOUR}|the colour of (?:{_THING}))\b"
"""A colour, named or through a thing of that colour (the rule's way)."""
_REL = "|".join(re.escape(w) for w in REL_WORDS.values())
_REL_OF = {w: rel for rel, w in REL_WORDS.items()}
_PUSH_OF = {w: d for d, w in PUSH_WORDS.items()}
_SIDE_OF_EXTREME = {words: side for side, phrases in EXTREMES.items() for words in phrases}
_SIDE_OF_STANDING = {words: side for side, words in STANDING.items()}
_ORBITS = sorted(((w.lower(), k) for k, ways in ORBIT_WORDS.items() for w in ways), key=lambda p: -len(p[0]))

_RECOLOUR = [
    re.compile(p.format(r=REF, c=COL))
    for p in (
        r"\bmake (?P<ref>{r}) (?P<col>{c})",
        r"\bcould you paint (?P<ref>{r}) (?P<col>{c})",
        r"\blet's try (?P<ref>{r}) in (?P<col>{c})",
        r"\bi want (?P<ref>{r}) to be (?P<col>{c})",
        r"\bswitch (?P<ref>{r}) over to (?P<col>{c})",
        r"(?P<ref>{r}) would look better in (?P<col>{c})",
        r"\b(?P<ref>it) (?:should|needs to) be (?P<col>{c})",
        r"\bturn (?P<ref>it) (?P<col>{c})",
        r"\bshow me (?P<ref>{r}) painted (?P<col>{c})",
        r"\bif (?P<ref>{r}) were (?P<col>{c})",
        r"\bhow would (?P<ref>{r}) look in (?P<col>{c})",
        r"\bpaint (?P<ref>{r}) (?P<col>{c}) and show me",
    )
]
"""A recolouring: a plain edit, an edit against a colour rule, an edit of "it", a what-if."""
_DROPPED = re.compile(rf"\bi thought about (?:{_COLOUR}), but |\bnot (?:{_COLOUR}): ")
"""A colour the user weighs and drops ("Not gray: green."): the one after it is meant."""
_WEIGHED = re.compile(
    rf"\bi thought about (?P<d1>(?:{_COLOUR})(?: or (?:{_COLOUR}))?), but "
    rf"|\bnot (?P<d2>(?:{_COLOUR})(?: or (?:{_COLOUR}))?): "
)
"""The colours the user weighs and drops in a recolouring, in the order named."""
_PASSED_OVER = re.compile(r"\bthe (?:(?P<which>first|second) )?colour i (?:passed over|turned down) there\b")
"""A correction that picks a colour the user dropped in the turn it names."""
_FALLBACK = re.compile(
    rf"\bif that's not possible, (?P<alt>{_COLOUR})\b|\bor (?P<alt2>{_COLOUR}), if that won't work"
    rf"|\botherwise, (?P<alt3>{_COLOUR})\b|\b(?P<alt4>{_COLOUR}) would be my second choice"
)
_RETRIEVE_COLOUR = re.compile(
    rf"\bsmall (?P<shape>{_SHAPE})\b.*?(?:colour (?P<r1>{REF}) had in my first picture|original colour of (?P<r2>{REF})"
    rf"|whatever colour (?P<r3>{REF}) was originally|coloured like (?P<r4>{REF}) was before)"
)
_FROM_PICTURE = re.compile(rf"\bthe (?P<shape>{_SHAPE}) from (?:picture (?P<n>\d+)|my (?P<nth>{_ORDINAL}) picture)")
_MESSAGE = re.compile(rf"(?<!added in )\bmy (?P<nth>{_ORDINAL}) message")
_PLAN_FIX = re.compile(
    r"\bstep (?P<k1>\d+) was (?:a mistake|wrong)|\bremoval in step (?P<k2>\d+)|\bundo step (?P<k3>\d+)"
)
_STEP = re.compile(r"\bstep (?P<k>\d+)\b")
_COMPOSITE = re.compile(r"\bfirst combination you made|\bfirst composite|\bfirst combined scene|\boriginal combination")
_PICTURE_N = re.compile(rf"\b(?:picture|image) (?P<n>\d+)|\bthe (?P<nth>{_ORDINAL}) image")
_RESTORE = re.compile(r"\bgo back to how the scene looked|\breturn to the (?:state|scene)|\brestore the state")
_FIRST_VIEW = re.compile(
    r"\bwhere we first looked|\boriginal viewpoint|\bvery first viewpoint|\bangle of the original picture"
)
_PUSH = re.compile(rf"\b(?:push it a bit|give it a push|gentle shove|nudge it|slide it) (?P<dir>{'|'.join(_PUSH_OF)})")
_SWAP = re.compile(r"\bswap\b|\btrade places\b|\bexchange the positions\b")
_STACK = re.compile(rf"\b(?:lift it onto|put it on top of|stack it on|can it sit on top of) (?P<ref>{REF})")
_RELATION = re.compile(rf"(?P<rel>{_REL}) (?P<ref>{REF})")
_REMOVE = re.compile(rf"\b(?:get rid of|remove|take|delete|need|clear|pull out|take away|what if) (?P<ref>{REF})")
_COMPOSE = re.compile(
    r"\bgo ahead with that|\bexactly that\b|\bplease make it\b|\bbuild that combination|\blet's see it\b"
)
_LISTED = re.compile(rf"\b(?:{'|'.join(SIZES)}) (?:{_COLOUR}) (?:{'|'.join(_MATERIAL_OF)}) (?:{_SHAPE})\b")
"""An object named by all four attributes, as the assistant lists a picture's objects."""
_SUGGESTED = re.compile(rf"\bthe (?P<what>{_PHRASE}) from the (?P<nth>{_ORDINAL}) picture")
_PLAN = re.compile(rf"\bstep (?P<k>\d+), remove the (?P<what>{_PHRASE})")
_BANNED = re.compile(
    rf"\bno (?P<c1>{_COLOUR}) from now on|\b(?P<c2>{_COLOUR}) is not\b|\b(?P<c3>{_COLOUR}) is out from now on"
)
_SUBSTITUTE = re.compile(rf"\bpainted it (?P<c1>{_COLOUR})\b|\bhere it is in (?P<c2>{_COLOUR})\b")
"""Where the assistant names the colour it chose instead of a ruled-out one (among others it names)."""
_OPTION = re.compile(r"^([A-G])\. (.*)$", re.MULTILINE)


def _group(m: re.Match[str], *names: str) -> str | None:
    """The first of the named groups that matched."""
    return next((m.group(n) for n in names if m.group(n) is not None), None)


def _nth(word: str) -> int:
    """1 for "first"."""
    return ORDINALS.index(word) + 1


def _colour(words: str) -> str:
    """A colour as the user named it: the colour itself, or "the colour of ripe tomatoes"."""
    return _THING_COLOUR[words.removeprefix("the colour of ")] if words.startswith("the colour of ") else words


def where_of(words: str) -> Where:
    """The attribute filter a phrase names: "small red shiny cube" -> size, colour, material, shape."""
    out: dict[str, Any] = {}
    for w in words.split():
        if w in SIZES:
            out["size"] = w
        elif w in COLOURS:
            out["colour"] = w
        elif w in _MATERIAL_OF:
            out["material"] = _MATERIAL_OF[w]
        elif w in SHAPES:
            out["shape"] = w
    return out


def the(o: WorldObject) -> str:
    """How an option names an object: "the small red metal cube"."""
    return f"the {phrase(full_where(o))}"


# What the agent keeps --------------------------------------------------------------------------


@dataclass
class Did:
    """What one turn did, as the agent read it (for later references and the questions)."""

    refs: dict[str, WorldObject] = field(default_factory=dict)
    """The words that named an object in the user's message -> that object, as it was then."""
    target: int | None = None
    """The object the turn acted on (its id)."""
    attr: str | None = None
    before: str | None = None
    """The value of ``attr`` the turn replaced (what a correction of it brings back)."""
    told: str | None = None
    """The value the assistant's words gave ``before`` (they name a substitute colour it chose)."""
    set_to: str | None = None
    """What a correction set ``attr`` to, as the words name it (the CU question's answer)."""
    open: bool = False
    """Whether ``before`` was a free choice (a correction that brings it back reopens it)."""
    anchor: int | None = None
    rel: str | None = None
    azimuth: float | None = None
    """A move to a side of an anchor: the side, in the frame of this azimuth."""
    added: int | None = None
    moved: WorldObject | None = None
    back: WorldObject | None = None
    """The object a correction brought back."""
    removed: WorldObject | None = None
    dropped: list[str] = field(default_factory=list)
    """The colours the user weighed and dropped in a recolouring ("Not gray or red: green.")."""


@dataclass
class Intent:
    """What a user's message means given the dialogue: an operation, the choices it leaves open."""

    op: Op
    """The operation (objects selected by id), with a default realization of its free choices."""
    free: list[Slot] = field(default_factory=list)
    did: Did = field(default_factory=Did)
    focus: int | None = None
    """The object "it" names from now on."""


@dataclass
class Reader:
    """The dialogue's state as the visible messages tell it, turn by turn."""

    eyes: Eyes
    pictures: list[View] = field(default_factory=list)
    """Every picture shown so far, with the agent's object identities."""
    view: View | None = None
    """The latest picture."""
    log: list[Did] = field(default_factory=list)
    listed: list[WorldObject] = field(default_factory=list)
    """The objects of the assistant's first listing, in its order."""
    suggested: list[tuple[int, int]] = field(default_factory=list)
    """The objects the assistant suggested combining: (picture index, id)."""
    composite: list[int] = field(default_factory=list)
    """Ids of the suggested objects in the composite, in the order suggested."""
    composite_picture: int | None = None
    plan: list[WorldObject] = field(default_factory=list)
    forbidden: str | None = None
    protected: WorldObject | None = None
    focus: int | None = None
    told: dict[tuple[int, str], str | None] = field(default_factory=dict)
    """Values the assistant's words named where it chose them (by object id and attribute)."""
    chosen: dict[int, set[str]] = field(default_factory=dict)
    """Per object id, the attributes a free choice set (the words of a later turn were written
    against the ground truth's choice, which a model's own earlier picture may not show)."""
    next_id: int = 0

    # turns ------------------------------------------------------------------------------------

    def play(self, user: str, shared: int, assistant: str, shown: int) -> None:
        """One complete turn of the history: the user's words and pictures, the assistant's reply."""
        for _ in range(shared):
            self._share()
        intent = None
        ruled = self._rule(user)
        if not ruled and not shared and self.view is not None:
            intent = self.intend(user)
        did = intent.did if intent is not None else Did()
        self._replied(assistant, did, ruled)
        if shown and self.view is not None:
            self._shown(intent, shown)
        if intent is not None and intent.focus is not None:
            self.focus = intent.focus
        self.log.append(did)

    def _fresh(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def _share(self) -> None:
        """A picture the user shares: taken from the default viewpoint, its objects new."""
        seen = self.eyes(len(self.pictures), VIEWS[0])
        objs = {o.id: self._fresh() for o in seen.scene.objects}
        scene = Scene.model_construct(
            objects=tuple(
                o.model_copy(update={"id": objs[o.id], "on": None if o.on is None else objs[o.on]})
                for o in seen.scene.objects
            )
        )
        self.view = View(scene, VIEWS[0], seen.style)
        self.pictures.append(self.view)

    def _shown(self, intent: Intent | None, count: int) -> None:
        """The assistant's picture: the scene the turn led to, its objects matched to the prediction."""
        assert self.view is not None
        before = self.view
        predicted, spots, attrs = before, set[int](), dict[int, set[str]]()
        if intent is not None:
            try:
                predicted = apply_op(intent.op, before, self.pictures)
                spots, attrs = loose(intent.op, intent.free, before, predicted.scene)
            except (OpError, IndexError, KeyError, ValueError):
                predicted = before
        known = {o.id for p in (before, *self.pictures) for o in p.scene.objects}
        if intent is not None and intent.op["op"] == "compose":
            known |= {o.id for o in predicted.scene.objects}  # a composite numbers its objects in order
        for _ in range(count):
            seen = self.eyes(len(self.pictures), predicted.azimuth)
            scene, ids = self._match(predicted.scene, spots, attrs, seen.scene, known, intent is not None)
            self.view = View(scene, predicted.azimuth, seen.style)
            self.pictures.append(self.view)
            for pid, names in attrs.items():  # values a free choice set: later words may not know them
                if pid in ids:
                    self.chosen.setdefault(ids[pid], set()).update(names)
            if intent is not None:
                did = intent.did
                if did.added is not None:
                    did.added = ids.get(did.added, did.added)
                if intent.focus is not None:
                    intent.focus = ids.get(intent.focus, intent.focus)

    def _match(
        self, predicted: Scene, spots: set[int], attrs: dict[int, set[str]], seen: Scene, known: set[int], read: bool
    ) -> tuple[Scene, dict[int, int]]:
        """``seen`` with the identities of the objects of ``predicted`` it shows: by attributes (but
        those a free choice set), then by where they stand (where no free choice moved them).
        Returns it and, per predicted id, the id it has now: its own, or a fresh one for an object
        new to the dialogue (an id an earlier picture gave another object is never reused).

        Where the words were understood (``read``), the picture is read with them in mind, as a
        person would: an object the turn cannot have brought is a misreading, and a small object
        the turn left on its support is still there where the support's outline hides it."""
        pairs = []
        for p in predicted.objects:
            for q in seen.objects:
                misses = sum(getattr(p, a) != getattr(q, a) for a in ATTRIBUTES if a not in attrs.get(p.id, set()))
                far = 0.0 if p.id in spots else min(math.hypot(p.x - q.x, p.y - q.y), 5.0)
                pairs.append((10 * misses + far, p.id, q.id))
        meant: dict[int, int] = {}  # seen id -> predicted id
        for cost, pid, qid in sorted(pairs):
            if qid not in meant and pid not in meant.values() and cost < 30:
                meant[qid] = pid
        ids = {pid: pid if pid in known else self._fresh() for pid in meant.values()}
        shown = [q for q in seen.objects if q.id in meant or not read]
        final = {q.id: ids[meant[q.id]] if q.id in meant else self._fresh() for q in shown}
        before = {p.id: p for p in predicted.objects if p.id not in spots}
        objs = []
        for q in shown:
            update: dict[str, Any] = {"id": final[q.id], "on": final.get(q.on) if q.on is not None else None}
            was = before.get(meant.get(q.id, -1))
            if was is not None and math.hypot(was.x - q.x, was.y - q.y) <= POSITION_TOLERANCE:
                # where it was read before, which it still shows: read again, its own pictures (drawn
                # from what it read) would drift by the parser's error at every turn
                update |= {"x": was.x, "y": was.y}
            objs.append(q.model_copy(update=update))
        if read:
            at = {o.id: o for o in objs}
            objs += [
                p.model_copy(update={"id": ids.setdefault(p.id, p.id), "x": at[p.on].x, "y": at[p.on].y})
                for p in predicted.objects
                if p.id not in meant.values() and p.on in at and not any(o.on == p.on for o in objs)
            ]
        self.next_id = max([self.next_id, *(o.id + 1 for o in objs)])
        return Scene.model_construct(objects=tuple(sorted(objs, key=lambda o: o.id))), ids

    def _rule(self, text: str) -> bool:
        """The standing rule, if the message sets one (the first that names one): a colour (named
        through a thing of that colour) or an object (named by where it stands in the picture)."""
        if self.forbidden is not None or self.protected is not None or self.view is None:
            return False
        low = text.lower()
        thing = re.search(rf"colour of (?P<thing>{_THING})", low)
        if thing:
            self.forbidden = _THING_COLOUR[thing.group("thing")]
            return True
        for words, side in _SIDE_OF_EXTREME.items():
            if words in low:
                self.protected = extreme(self.view.scene, self.view.azimuth, side)
                return self.protected is not None
        return False

    def _replied(self, text: str, did: Did, ruled: bool) -> None:
        """What the assistant's words add: its listing, suggestions, plan, the colour it banned (in
        the reply to the rule, ``ruled``) or chose."""
        low = text.lower()
        if not self.listed and len(self.pictures) == 1 and self.view is not None:
            for m in _LISTED.finditer(low):
                found = self._select(self.view.scene, where_of(m.group(0)))
                if found is not None:
                    self.listed.append(found)
        banned = _BANNED.search(low)
        if ruled and banned and self.forbidden is not None:
            self.forbidden = _group(banned, "c1", "c2", "c3")  # the acknowledgement names it
        if not self.suggested and len(self.pictures) > 1:
            for m in _SUGGESTED.finditer(low):
                k = _nth(m.group("nth")) - 1
                if k < len(self.pictures):
                    found = self._select(self.pictures[k].scene, where_of(m.group("what")))
                    if found is not None:
                        self.suggested.append((k, found.id))
        if not self.plan and self.view is not None:
            for m in _PLAN.finditer(low):
                found = self._select(self.view.scene, where_of(m.group("what")))
                if found is not None:
                    self.plan.append(found)
        chose = _SUBSTITUTE.search(low)
        if chose and did.target is not None and did.attr == "colour":
            self.told[(did.target, "colour")] = _group(chose, "c1", "c2")

    # what the user means ---------------------------------------------------------------------

    def intend(self, text: str) -> Intent:
        """What the user's message means, given the dialogue so far (see the module docstring)."""
        assert self.view is not None
        low = text.lower()
        did = Did()
        for read in (
            self._corrected,
            self._plan_fixed,
            self._restored,
            self._orbit,
            self._from_first_view,
            self._pushed,
            self._swapped,
            self._stacked,
            self._related,
            self._retrieved,
            self._recoloured,
            self._removed,
            self._step,
            self._composed,
        ):
            intent = read(low, did)
            if intent is not None:
                return intent
        return Intent({"op": "none"}, did=did)

    def _select(self, scene: Scene, where: Where) -> WorldObject | None:
        """The one object ``where`` names in ``scene``. Where several or none fit (its own earlier
        free choices may differ from those the words were written against), the one that fits
        without a value a free choice set, or the one that fits but for such values."""
        found = select(scene, where)
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            plain = [o for o in found if not set(where) & self.chosen.get(o.id, set())]
            return plain[0] if len(plain) == 1 else None
        fits = [
            o for o in scene.objects
            if all(getattr(o, k) == v or k in self.chosen.get(o.id, set()) for k, v in where.items())
        ]  # fmt: skip
        return fits[0] if len(fits) == 1 else None

    def _now(self, oid: int | None) -> WorldObject | None:
        """The object ``oid`` in the latest picture."""
        assert self.view is not None
        return next((o for o in self.view.scene.objects if o.id == oid), None)

    def _ref(self, words: str, did: Did) -> WorldObject | None:
        """The object the user's words name, now (recorded in ``did``)."""
        assert self.view is not None
        o: WorldObject | None = None
        if words == "it":
            o = self._now(self.focus)
        elif m := re.match(rf"the ({_ORDINAL}) (?:object|one|thing) (?:you listed|in your list)$", words):
            k = _nth(m.group(1)) - 1
            o = self._now(self.listed[k].id) if k < len(self.listed) else None
        elif m := re.match(rf"the ({_ORDINAL}) (?:one|object) you suggested$", words):
            k = _nth(m.group(1)) - 1
            o = self._now(self.composite[k]) if k < len(self.composite) else None
        elif m := re.match(r"the (?:one you'd remove in step (\d+)|object step (\d+) removes)$", words):
            k = int(m.group(1) or m.group(2)) - 1
            o = self._now(self.plan[k].id) if k < len(self.plan) else None
        elif m := re.match(rf"the object you added in my ({_ORDINAL}) message$", words):
            k = _nth(m.group(1)) - 1
            o = self._now(self.log[k].added) if k < len(self.log) else None
        elif words.startswith(("the piece we added", "the object you added")):
            o = self._now(next((d.added for d in reversed(self.log) if d.added is not None), None))
        else:
            o = self._select(self.view.scene, where_of(words))
        if o is not None:
            did.refs[words] = o
        return o

    def _allowed(self, op: Op, target: WorldObject | None) -> bool:
        """Whether the rule lets the operation touch ``target`` (a protected object stays as it is)."""
        if target is None or self.protected is None:
            return True
        kept = self._now(self.protected.id)
        return kept is None or kept.id != target.id or op["op"] not in ("remove", "set", "move")

    def _recolour(self, target: WorldObject, colour: str, did: Did, alt: str | None = None) -> Intent:
        """``target`` painted ``colour``; where the rule rules it out, ``alt`` or a colour of its own."""
        assert self.view is not None
        did.target, did.attr, did.before = target.id, "colour", target.colour
        did.told = self.told.get((target.id, "colour"), target.colour)
        did.open = "colour" in self.chosen.get(target.id, set())
        op: Op = {"op": "set", "where": {"id": target.id}, "attr": "colour", "value": colour}
        if not self._allowed(op, target):
            return Intent({"op": "none"}, did=did)
        self.told.pop((target.id, "colour"), None)  # the words fix it
        self.chosen.get(target.id, set()).discard("colour")
        if colour != self.forbidden:
            return Intent(op, did=did, focus=target.id)
        if alt is not None and alt != self.forbidden:
            return Intent({**op, "value": alt}, did=did, focus=target.id)
        # Not that colour, then: any other, one no object has where it can (so that later words
        # written against another pick still name one object).
        others = [c for c in COLOURS if c not in (self.forbidden, target.colour)]
        unused = [c for c in others if not any(o.colour == c for o in self.view.scene.objects)]
        choices = unused or others
        return Intent({**op, "value": choices[0]}, [{"slot": "value", "choices": choices}], did, target.id)

    def _recoloured(self, low: str, did: Did) -> Intent | None:
        fallback = _FALLBACK.search(low)
        alt = _group(fallback, "alt", "alt2", "alt3", "alt4") if fallback else None
        weighed = _WEIGHED.search(low)
        if weighed:
            did.dropped = re.findall(_COLOUR, _group(weighed, "d1", "d2") or "")
        words = _FALLBACK.sub("", _DROPPED.sub("", low))
        for pattern in _RECOLOUR:
            m = pattern.search(words)
            if m:
                target = self._ref(m.group("ref"), did)
                if target is None:
                    return Intent({"op": "none"}, did=did)
                return self._recolour(target, _colour(m.group("col")), did, alt)
        return None

    def _corrected(self, low: str, did: Did) -> Intent | None:
        """A correction of an earlier turn ("undo the change from my third message", "I got the direction
        wrong in my second message"): what that turn did, taken back or the other way round."""
        m = _MESSAGE.search(low)
        if m is None:
            return None
        k = _nth(m.group("nth")) - 1
        if k >= len(self.log):
            return None
        then = self.log[k]
        target = self._now(then.target)
        if target is None:
            return Intent({"op": "none"}, did=did)
        did.target = target.id
        if then.rel is not None and then.anchor is not None and then.azimuth is not None:
            # the side asked for, the other way round, in the frame it was asked in
            did.moved = target
            rule = {"side": OPPOSITE[then.rel], "of": {"id": then.anchor}, "azimuth": then.azimuth}
            op = {"op": "move", "where": {"id": target.id}, "x": target.x, "y": target.y}
            return Intent(op, [{"slot": "position", "accept": [rule]}], did, target.id)
        if then.attr is None:
            return Intent({"op": "none"}, did=did)
        # what this turn replaces, as the picture and the words have it (a later correction may
        # take this one back)
        did.attr, did.before = then.attr, getattr(target, then.attr)
        did.told = self.told.get((target.id, then.attr), did.before)
        did.open = then.attr in self.chosen.get(target.id, set())
        passed = _PASSED_OVER.search(low)
        if passed and then.dropped:
            # a colour the user weighed and dropped in that turn, named by its place there
            k = 1 if passed.group("which") == "second" else 0
            value = then.dropped[min(k, len(then.dropped) - 1)]
            did.set_to = value
            self.told.pop((target.id, then.attr), None)
            self.chosen.get(target.id, set()).discard(then.attr)
            op = {"op": "set", "where": {"id": target.id}, "attr": then.attr, "value": value}
            return Intent(op, did=did, focus=target.id)
        # back to the value the picture before that turn showed; the words then named it so
        did.set_to = then.told
        self.told.pop((target.id, then.attr), None)
        if then.told != then.before:
            self.told[(target.id, then.attr)] = then.told
        if then.open:
            self.chosen.setdefault(target.id, set()).add(then.attr)
        op = {"op": "set", "where": {"id": target.id}, "attr": then.attr, "value": then.before}
        return Intent(op, did=did, focus=target.id)

    def _plan_fixed(self, low: str, did: Did) -> Intent | None:
        """A plan correction ("step 2 was a mistake"): what that step removed comes back, where it stood
        if it can."""
        assert self.view is not None
        m = _PLAN_FIX.search(low)
        if m is None:
            return None
        k = int(_group(m, "k1", "k2", "k3") or 0) - 1
        gone = next((d.removed for d in self.log if d.removed is not None and k < len(self.plan)
                     and d.removed.id == self.plan[k].id), None)  # fmt: skip
        if gone is None:
            return Intent({"op": "none"}, did=did)
        did.back = gone
        spec = {a: getattr(gone, a) for a in ATTRIBUTES} | {"x": gone.x, "y": gone.y}
        op: Op = {"op": "add", "object": spec}
        try:  # where it stood, if the picture stays legible with it there (the picture's positions are
            # read with a small error, so the world's stricter test might fail on a spot it allowed)
            back = apply_op(op, self.view, self.pictures).scene
            if legible(back, self.view.azimuth, back.next_id() - 1):
                return Intent(op, did=did)
        except (OpError, ValueError):
            pass
        return Intent(op, [{"slot": "position", "accept": []}], did)

    def _restored(self, low: str, did: Did) -> Intent | None:
        """Back to an earlier picture ("go back to picture 2", "the first combination you made")."""
        n: int | None = None
        if _COMPOSITE.search(low):
            m = _PICTURE_N.search(low)
            n = int(m.group("n")) if m and m.group("n") else (self.composite_picture or 0) + 1
        elif _RESTORE.search(low) and (m := _PICTURE_N.search(low)):
            n = int(m.group("n")) if m.group("n") else _nth(m.group("nth"))
        if n is None or not 1 <= n <= len(self.pictures):
            return None
        return Intent({"op": "restore", "image": n}, did=did)

    def _orbit(self, low: str, did: Did) -> Intent | None:
        """A walk around the table: a quarter or half turn of the camera."""
        assert self.view is not None
        quarters = next((k for words, k in _ORBITS if words in low), None)
        if quarters is None:
            return None
        return Intent({"op": "orbit", "azimuth": self.view.azimuth + 90 * quarters}, did=did)

    def _from_first_view(self, low: str, did: Did) -> Intent | None:
        """A removal shown from where we first looked: what rested on it falls."""
        if not _FIRST_VIEW.search(low):
            return None
        m = _REMOVE.search(low)
        target = self._ref(m.group("ref"), did) if m else None
        back = {"op": "orbit", "azimuth": self.pictures[0].azimuth}
        if target is None:
            return Intent(back, did=did)
        remove = {"op": "remove", "where": {"id": target.id}}
        if not self._allowed(remove, target):
            return Intent(back, did=did)
        did.target, did.removed = target.id, target
        return Intent({"op": "batch", "ops": [remove, back]}, did=did)

    def _pushed(self, low: str, did: Did) -> Intent | None:
        """A push ("a bit to the left, as seen from here"): at least the margin that way, mainly that way."""
        assert self.view is not None
        m = _PUSH.search(low)
        if m is None:
            return None
        target = self._ref("it", did)
        if target is None:
            return Intent({"op": "none"}, did=did)
        did.target = target.id
        # clearly that way (well past the check's margin, little sideways), as the world's own push
        rule = {"push": _PUSH_OF[m.group("dir")], "from": [target.x, target.y], "azimuth": self.view.azimuth,
                "least": 0.75, "ratio": 0.5}  # fmt: skip
        op = {"op": "move", "where": {"id": target.id}, "x": target.x, "y": target.y}
        return Intent(op, [{"slot": "position", "accept": [rule]}], did, target.id)

    def _swapped(self, low: str, did: Did) -> Intent | None:
        if not _SWAP.search(low):
            return None
        named = [self._ref(m.group(0), did) for m in re.finditer(REF, low) if m.group(0) != "it"]
        objs = [o for o in named if o is not None]
        if len(objs) != 2:
            return Intent({"op": "none"}, did=did)
        return Intent({"op": "swap", "a": {"id": objs[0].id}, "b": {"id": objs[1].id}}, did=did, focus=objs[0].id)

    def _stacked(self, low: str, did: Did) -> Intent | None:
        m = _STACK.search(low)
        if m is None:
            return None
        top, support = self._ref("it", did), self._ref(m.group("ref"), did)
        if top is None or support is None:
            return Intent({"op": "none"}, did=did)
        return Intent({"op": "stack", "where": {"id": top.id}, "on": {"id": support.id}}, did=did, focus=top.id)

    def _related(self, low: str, did: Did) -> Intent | None:
        """A move to a side of another object ("put the first one you listed behind the second one"):
        anywhere on that side of the anchor, in the current view."""
        assert self.view is not None
        m = _RELATION.search(low)
        if m is None:
            return None
        named = [r for r in re.finditer(REF, low[: m.start()]) if r.group(0) != "it"]
        if not named:
            return None
        mover, anchor = self._ref(named[0].group(0), did), self._ref(m.group("ref"), did)
        if mover is None or anchor is None:
            return Intent({"op": "none"}, did=did)
        rel = _REL_OF[m.group("rel")]
        did.target, did.anchor, did.rel, did.azimuth = mover.id, anchor.id, rel, self.view.azimuth
        op: Op = {"op": "move", "where": {"id": mover.id}, "x": mover.x, "y": mover.y}
        if not self._allowed(op, mover):
            return Intent({"op": "none"}, did=did)
        rule = {"side": rel, "of": {"id": anchor.id}, "azimuth": self.view.azimuth}
        return Intent(op, [{"slot": "position", "accept": [rule]}], did, mover.id)

    def _retrieved(self, low: str, did: Did) -> Intent | None:
        """An object added in a colour only the history holds, or brought in from a source picture."""
        m = _RETRIEVE_COLOUR.search(low)
        spec: dict[str, Any] | None = None
        material: list[str] = []
        if m is not None:
            named = self._ref(_group(m, "r1", "r2", "r3", "r4") or "", did)
            first = [o for o in self.pictures[0].scene.objects if named is not None and o.id == named.id]
            if not first:
                return Intent({"op": "none"}, did=did)
            spec = {"shape": m.group("shape"), "colour": first[0].colour, "size": "small", "material": "matte"}
            material = ["matte", "metal"]
        elif m := _FROM_PICTURE.search(low):
            k = int(m.group("n")) - 1 if m.group("n") else _nth(m.group("nth")) - 1
            source = select(self.pictures[k].scene, {"shape": m.group("shape")}) if k < len(self.pictures) else []
            if len(source) != 1:
                return Intent({"op": "none"}, did=did)
            spec = {a: getattr(source[0], a) for a in ATTRIBUTES}
        if spec is None:
            return None
        assert self.view is not None
        did.added = self.view.scene.next_id()
        op = {"op": "add", "object": {**spec, "x": 0.0, "y": 0.0}}
        free: list[Slot] = [{"slot": "material", "choices": material}] if material else []
        return Intent(op, [*free, {"slot": "position", "accept": []}], did, did.added)

    def _removed(self, low: str, did: Did) -> Intent | None:
        m = _REMOVE.search(low)
        if m is None:
            return None
        target = self._ref(m.group("ref"), did)
        if target is None:
            return Intent({"op": "none"}, did=did)
        op = {"op": "remove", "where": {"id": target.id}}
        if not self._allowed(op, target):  # the rule protects it: declined, nothing changes
            return Intent({"op": "none"}, did=did)
        did.target, did.removed = target.id, target
        return Intent(op, did=did)

    def _step(self, low: str, did: Did) -> Intent | None:
        """A step of the assistant's plan ("do step 2"): what that step removes goes."""
        m = _STEP.search(low)
        if m is None or not self.plan:
            return None
        k = int(m.group("k")) - 1
        target = self._now(self.plan[k].id) if k < len(self.plan) else None
        if target is None:
            return Intent({"op": "none"}, did=did)
        did.target, did.removed = target.id, target
        return Intent({"op": "remove", "where": {"id": target.id}}, did=did)

    def _composed(self, low: str, did: Did) -> Intent | None:
        """The suggested combination, laid out afresh on the first picture's floor."""
        assert self.view is not None
        if not self.suggested or self.composite or not _COMPOSE.search(low):
            return None
        self.composite = list(range(len(self.suggested)))  # compose numbers the items in order
        self.composite_picture = len(self.pictures)
        items = []
        for k, oid in self.suggested:
            source = next(o for o in self.pictures[k].scene.objects if o.id == oid)
            items.append({"image": k + 1, "where": {"id": oid}, "x": source.x, "y": source.y})
        op = {"op": "compose", "items": items, "style": self.pictures[0].style}
        return Intent(op, [{"slot": "layout"}], did)

    # the questions -----------------------------------------------------------------------------

    def answer(self, text: str) -> str:
        """The letter of the option the tracked state makes right."""
        question, _, rest = text.partition("\n\nOptions:\n")
        options: dict[str, str] = dict((m.group(1), m.group(2).strip()) for m in _OPTION.finditer(rest))
        meant = self.reply(question.strip())
        if meant is not None:
            # an object's options may leave out its colour (where the rest tells it apart, as RR's do)
            bare = " ".join(w for w in meant.lower().split() if w not in COLOURS)
            for named in (meant.lower(), bare):
                for letter, option in options.items():
                    if option.lower() == named:
                        return letter
        return next(iter(options), CHOICE_LETTERS[0])

    def reply(self, question: str) -> str | None:
        """What the tracked state says to a DSU question: an object (as an option names it) or a value.

        A question is read by what it points at rather than word for word: words in quotes that a
        turn used (who they meant), a picture the user showed (which object stood furthest to a
        side), the rule (no turn named: the colour ruled out, or the object kept), or what the turn it names
        did (the colour a correction brought back, the object it moved or brought back)."""
        low = question.lower()
        m = re.search(r"\bturn (\d+)\b", low)
        turn = int(m.group(1)) - 1 if m else None
        did = self.log[turn] if turn is not None and 0 <= turn < len(self.log) else None
        quoted = re.search(r'"([^"]+)"', low)
        if quoted and turn is not None:
            return self._meant(turn, quoted.group(1))
        shown = re.match(r"in (the first picture|picture (\d+)),", low)
        if shown and self.pictures:
            k = int(shown.group(2)) - 1 if shown.group(2) else 0
            side = next((side for words, side in _SIDE_OF_STANDING.items() if words in low), None)
            if not 0 <= k < len(self.pictures) or side is None:
                return None
            view = self.pictures[k]
            o = extreme(view.scene, view.azimuth, side)
            return the(o) if o is not None else None
        if did is None:
            if "colour" in low:
                return self.forbidden
            return the(self.protected) if self.protected is not None else None
        if "colour" in low:
            if did.attr is None:
                return None
            return str(did.set_to if did.set_to is not None else did.told)
        o = did.back or did.moved
        return the(o) if o is not None else None

    def _meant(self, turn: int, words: str) -> str | None:
        """Which object ``words`` named in ``turn``: as the turn read it, else by what it points at."""
        did = self.log[turn] if turn < len(self.log) else Did()
        if words in did.refs:
            return the(did.refs[words])
        if m := re.match(rf"the ({_ORDINAL}) (?:object|one|thing) (?:you listed|in your list)$", words):
            k = _nth(m.group(1)) - 1
            return the(self.listed[k]) if k < len(self.listed) else None
        if m := re.match(r"the (?:one you'd remove in step (\d+)|object step (\d+) removes)$", words):
            k = int(m.group(1) or m.group(2)) - 1
            return the(self.plan[k]) if k < len(self.plan) else None
        if m := re.match(rf"the ({_ORDINAL}) (?:one|object) you suggested$", words):
            k = _nth(m.group(1)) - 1
            if k < len(self.suggested):
                picture, oid = self.suggested[k]
                return the(next(o for o in self.pictures[picture].scene.objects if o.id == oid))
        return None

    # the target turn ----------------------------------------------------------------------------

    def drafts(self, text: str, rng: random.Random) -> Iterator[View]:
        """Pictures that carry out the user's message, each with fresh free choices of its own; the
        last is the operation as read (or the latest picture, where the words name nothing in it)."""
        assert self.view is not None
        intent = self.intend(text)
        if intent.free:
            placed = intent.op["where"]["id"] if "where" in intent.op else self.view.scene.next_id()
            crowded: list[View] = []
            for k in range(3 * REDRAWS):
                # the world's own placement first; where its own earlier choices left that no room,
                # anywhere the picture stays legible, clear of the others in this view if it can
                choose = realize if k < REDRAWS else realize_anywhere
                mine = choose(intent.op, intent.free, self.view, self.pictures, rng)
                if mine is None:
                    continue
                try:
                    new = apply_op(mine, self.view, self.pictures)
                except (OpError, IndexError, ValueError):
                    continue
                if k < REDRAWS or _clear(new, placed):
                    yield new
                elif len(crowded) < REDRAWS:
                    crowded.append(new)
            yield from crowded
        try:
            yield apply_op(intent.op, self.view, self.pictures)
        except (OpError, IndexError, KeyError, ValueError):
            yield self.view  # what it took the words to mean is not in the picture: leave it as it is


def _clear(view: View, oid: int) -> bool:
    """Whether object ``oid`` (with what it stands on) is at least the relation margin from every other
    ground object along both axes of the view: every relation with it reads one way."""
    scene = view.scene
    root = next((o for o in scene.objects if o.id == oid), None)
    while root is not None and root.on is not None:
        root = scene.by_id(root.on)
    if root is None:
        return True
    r, f = camera_coords(root, view.azimuth)
    others = [camera_coords(o, view.azimuth) for o in scene.ground_objects() if o.id != root.id]
    return all(abs(r - r2) >= MARGIN and abs(f - f2) >= MARGIN for r2, f2 in others)


# Messages ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Said:
    """One message as the agent reads it: its words, and how many pictures it carries."""

    role: str
    text: str
    pictures: int


def read_request(request: Request) -> tuple[list[Said], list[InputImage]]:
    """The request's messages and its pictures in order; a ``yes-front`` layout (every image first,
    ``[Image k]`` where each appeared) is read back to pictures in their messages."""
    images = request.images()
    out = []
    front = bool(request.messages) and _front(request.messages[0].parts)
    for i, m in enumerate(request.messages):
        parts = list(m.parts)
        if front and i == 0:
            while len(parts) >= 2 and isinstance(parts[0], InputText) and isinstance(parts[1], InputImage):
                parts = parts[2:]
        texts = [p.text for p in parts if isinstance(p, InputText)]
        if front:
            marks = sum(len(re.findall(r"^\[Image \d+\]$", t)) for t in texts)
            texts = [t for t in texts if not re.match(r"^\[Image \d+\]$", t)]
        else:
            marks = sum(1 for p in parts if isinstance(p, InputImage))
        out.append(Said(m.role, "\n\n".join(texts), marks))
    return out, images


def _front(parts: Sequence[InputText | InputImage]) -> bool:
    return len(parts) >= 2 and isinstance(parts[0], InputText) and parts[0].text == "[Image 1]" \
        and isinstance(parts[1], InputImage)  # fmt: skip


def follow(said: Sequence[Said], eyes: Eyes) -> Reader:
    """A reader that has played every complete turn of ``said`` (user and assistant messages in
    pairs); the last message, the user's, is left to the caller."""
    reader = Reader(eyes)
    for k in range(0, len(said) - 1, 2):
        user, assistant = said[k], said[k + 1]
        reader.play(user.text, user.pictures, assistant.text, assistant.pictures)
    return reader


# The audit's entry point -------------------------------------------------------------------------------


def visible_misses(d: Dialogue, seed: int = 0) -> list[tuple[int, str, str]]:
    """What the visible agent gets wrong on ``d`` under GT-History, with the ground truth's scenes as
    what it sees (no rendering, no parsing): (turn, check id, what failed) for every check its
    picture fails, as the exact judge reads a picture, and (turn asked after, question id, what it
    answered) for every question it answers wrongly. Empty: the dialogue is decidable from what a
    model is shown."""
    from yanami.models import question_prompt

    truths = [view_of(t) for t in d.turns for m in (t.user, t.assistant) for p in m.parts if isinstance(p, ImagePart)]
    said: list[Said] = []
    for t in d.turns:
        for m in (t.user, t.assistant):
            text = "\n\n".join(p.text for p in m.parts if isinstance(p, TextPart))
            said.append(Said(m.role, text, sum(1 for p in m.parts if isinstance(p, ImagePart))))

    def eyes(k: int, azimuth: float) -> View:
        truth = truths[k]
        assert truth is not None
        # the parser reads positions for the azimuth it is given: another one turns them all
        return View(in_frame(truth.scene, truth.azimuth, azimuth), azimuth, truth.style)

    out: list[tuple[int, str, str]] = []
    for t in d.turns:
        if not t.checks:
            continue
        reader = follow([*said[: 2 * t.index], said[2 * t.index]], eyes)
        rng = seeded("reference", "visible", seed, d.id, f"t{t.index}")
        drawn = next(reader.drafts(said[2 * t.index].text, rng))
        target = view_of(t)
        assert target is not None
        scene = in_frame(drawn.scene, drawn.azimuth, target.azimuth)
        predicates = {c.id: c.hidden.predicate for c in t.checks if isinstance(c.hidden.predicate, dict)}
        passed: dict[str, bool | None] = {cid: evaluate(p, scene, target.azimuth) for cid, p in predicates.items()}
        shown = shown_before(d, t.index, {})
        if shown:
            latest = View(shown[-1].seen, shown[-1].truth.azimuth, shown[-1].truth.style)
            passed = credited(dict(predicates), passed, read_candidate(scene, target, shown), latest)
        out += [(t.index, c.id, f"fails: {c.text}") for c in t.checks if passed.get(c.id) is False]
    for q in d.questions:
        reader = follow(said[: 2 * q.after_turn + 2], eyes)
        letter = reader.answer(question_prompt(q))
        if [letter] != q.answer_letters:
            chosen = q.choices[CHOICE_LETTERS.index(letter)] if q.choices else letter
            out.append((q.after_turn, q.id, f"answered {letter} ({chosen}), not {q.answer}: {q.text}"))
    return out


# The model -------------------------------------------------------------------------------------------


class VisibleAgent:
    """``reference:visible`` (see the module docstring): a model of the bench's own kind that sees
    what any model sees. It has no ``bind_bench``, so the runner never hands it the bench."""

    layouts = ("yes-first", "yes-front")  # images one by one: not from a composite

    def __init__(self, parser: Parser = IN_PROCESS) -> None:
        self.parser = parser
        self.name = "reference:visible"
        self.answer = self._answer
        self.generate = self._generate

    def _read(self, request: Request) -> tuple[Reader, Said]:
        said, images = read_request(request)
        if sum(s.pictures for s in said) != len(images):
            raise UserError(f"{request.item}: {self.name} reads images one by one; use --layout yes-first or yes-front")

        def eyes(k: int, azimuth: float) -> View:
            return see(images[k].data, images[k].sha256, azimuth, self.parser)

        return follow(said, eyes), said[-1]

    def _generate(self, request: Request) -> bytes:
        reader, last = self._read(request)
        rng = seeded(self.name, request.seed, request.item)
        png = b""
        for view in reader.drafts(last.text, rng):
            # like a careful painter it looks at what it drew: a free choice whose picture does not
            # read back as the scene it meant (two objects of one colour touching on screen) is drawn again
            png = draw(view, self.parser)
            if _reads_back(png, view, self.parser):
                break
        return png

    def _answer(self, request: Request) -> str:
        reader, last = self._read(request)
        return reader.answer(last.text)
