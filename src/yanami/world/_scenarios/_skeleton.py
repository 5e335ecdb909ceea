"""The skeleton every scenario script is written on: moves, the opening, the four questions.

A *move* is one judged turn, always built the same way:

1. find what the user refers to in the current scene (`live`), or give up (`Retry`);
2. propose the operation the user's words mean given the whole dialogue and check that
   the world allows it (`checked`; `first_allowed` for the first of several candidates);
3. work out what the same words mean read alone against the latest image: the
   *stateless* reading, usually the same operation on a `decoy`;
4. choose the user's and the assistant's words;
5. hand it all to `move`, which derives the turn's own checks from the scene the
   operation leads to, names the reference agent that lacks the capability the turn
   tests (it does the stateless thing), and adds the turn: the composer adds context
   and constraint checks, records the capabilities, and refuses a turn that the
   stateless reading would pass (`Reducible`, so the script is tried again).

A scenario opens with the user's picture and a standing constraint (`start`, except
fusion, which opens with several pictures), makes its moves, and ends with one question
of each DSU type (`ask_dsu`). Every choice is drawn from the composer's random generator,
in a fixed order, so a seed always gives the same dialogue: a change here that reorders
the draws changes every dataset (``tests/world/test_scenarios.py`` pins the output).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from yanami.schema import Capability, Check, ImageSource, QuestionType
from yanami.world._compose import Composer, Constraint
from yanami.world._free import Slot
from yanami.world._hidden import ABLATIONS, QUESTION_CAPABILITY
from yanami.world._language import full_where, listing, minimal_where, phrase, pick
from yanami.world._ops import OpError, View, apply_op
from yanami.world._place import VIEWS, place, random_scene, side_mask, valid
from yanami.world._predicates import select
from yanami.world._render import STYLES
from yanami.world._scene import COLOURS, SIZES, Scene, WorldObject

COREF = Capability.COREFERENCE
RETRIEVAL = Capability.RETRIEVAL
SPATIAL = Capability.SPATIAL
CONSTRAINT = Capability.CONSTRAINT
CORRECTION = Capability.CORRECTION

Op = dict[str, Any]
"""An operation (see `yanami.world._ops`): what a turn does to the scene."""

LACKING = ABLATIONS
"""The reference agent without a capability: where a turn needs it, the agent reads the turn alone."""


class Retry(Exception):
    """This attempt at a dialogue hit a dead end; build it again from a new seed."""


# Step 1-3: what the user means, and what a stateless reading would do instead -----------


def colours_except(*excluded: str) -> list[str]:
    """The colours, less ``excluded``."""
    return [c for c in COLOURS if c not in excluded]


def live(c: Composer, oid: int, why: str) -> WorldObject:
    """The object with id ``oid`` in the current scene; `Retry` (``why``) when it is gone."""
    assert c.view is not None
    current = next((o for o in c.view.scene.objects if o.id == oid), None)
    if current is None:
        raise Retry(why)
    return current


def checked(c: Composer, op: Op) -> Op:
    """``op``, once the world allows it in the current view; `Retry` when it does not."""
    assert c.view is not None
    try:
        new = apply_op(op, c.view, c.images)
    except OpError as exc:
        raise Retry(str(exc)) from None
    if not valid(new.scene):
        raise Retry(f"{op} breaks the placement rules")
    return op


def first_allowed(c: Composer, ops: Iterable[Op], why: str) -> Op:
    """The first of ``ops`` (drawn lazily, in order) that the world allows; `Retry` (``why``) when none is."""
    for op in ops:
        try:
            return checked(c, op)
        except Retry:
            continue
    raise Retry(why)


def decoy(candidates: list[WorldObject], c: Composer | None = None) -> WorldObject:
    """The object a stateless reading acts on instead: drawn at random when ``c`` is given,
    else the largest (then the highest id); `Retry` when there is none."""
    if not candidates:
        raise Retry("nothing to confuse")
    if c is not None:
        return c.rng.choice(candidates)
    return max(candidates, key=lambda o: (SIZES[o.size], o.id))


def spot(
    c: Composer, o: WorldObject, near: WorldObject | None = None, rel: str | None = None, tries: int = 600
) -> tuple[float, float]:
    """A valid ground position for ``o`` (optionally ``rel`` of ``near`` in the current view)."""
    assert c.view is not None
    scene = Scene.model_construct(objects=tuple(p for p in c.view.scene.objects if p.id != o.id))
    accept = None
    if near is not None and rel is not None:
        anchor, azimuth, side = near, c.view.azimuth, rel
        accept = lambda xy: side_mask(xy, anchor, side, azimuth)  # noqa: E731
    placed = place(scene, o, c.rng, tries=tries, accept=accept)
    if placed is None:
        raise Retry("no room")
    return placed.x, placed.y


# Step 5: the turn ------------------------------------------------------------------------


def move(
    c: Composer,
    user: str,
    op: Op,
    assistant: str,
    caps: set[Capability],
    *,
    stateless: Op | None = None,
    lacking: Capability | None = None,
    focus: Callable[[Scene], list[Check]] | None = None,
    correction: Callable[[Scene], list[tuple[str, Op]]] | None = None,
    free: list[Slot] | None = None,
) -> int:
    """A judged turn: the user asks, the assistant answers with the image ``op`` yields.

    ``stateless`` (default: nothing changes) is what the words mean read alone; the agent
    ``lacking`` a capability gives that reading. ``focus`` (atomic checks on what the turn
    changes) and ``correction`` ((text, predicate) pairs: correction-updating checks) are
    built from the scene after ``op``; they must test what the words fix, not the choices
    they leave open. ``free`` lists those choices (slots, see `yanami.world._free`): the
    composer draws other realizations of them and keeps only checks that hold on all
    (recorded as ``intent["free"]``, so ``yanami audit`` can draw more). Returns the turn's
    index.
    """
    assert c.view is not None
    stateless = {"op": "none"} if stateless is None else stateless
    focused = corrections = None
    if focus is not None or correction is not None:
        after = apply_op(op, c.view, c.images).scene
        focused = None if focus is None else focus(after)
        corrections = None if correction is None else correction(after)
    return c.target(
        user,
        op,
        stateless,
        assistant,
        caps,
        alternatives=None if lacking is None else {LACKING[lacking]: stateless},
        focus=focused,
        correction=corrections,
        free=free,
    )


def plain_edit(c: Composer, op: Op, user: str, asst: str, free: list[Slot] | None = None) -> None:
    """An edit that a history-free reading gets right too: the change is shown, but the
    turn is not a target turn (it has no checks). ``free``: the choices its words leave
    open (recorded, so the audit can tell which later checks name them)."""
    assert c.view is not None
    c.view = apply_op(op, c.view, c.images)
    part = c.picture(c.view, ImageSource.ASSISTANT)
    intent: dict[str, Any] = {"op": op}
    if free:
        intent["free"] = free
    c.turn_with_image(user, asst, part, {Capability.CONSISTENCY}, intent)


# The opening -------------------------------------------------------------------------------


def start(c: Composer, objects: tuple[int, int], stack_chance: float, leads: list[str]) -> Scene:
    """The opening of a one-picture scenario, in one turn: the user's picture (a random scene
    of ``objects`` (fewest, most) objects in a random style) with a standing constraint."""
    style = c.rng.choice(list(STYLES))
    scene = random_scene(c.rng, c.rng.randint(*objects), stack_chance=stack_chance)
    view = View(scene, VIEWS[0], style)
    c.view = view  # the constraint is chosen against the picture
    set_constraint(c, (view, *opening(c, view, pick(c.rng, leads))))
    return scene


def opening(c: Composer, view: View, lead: str) -> tuple[str, str]:
    """What the user says sharing the start picture, and how the assistant lists what it shows."""
    names = [phrase(full_where(o), c.rng) for o in view.scene.objects]
    user = pick(
        c.rng,
        [
            "{lead} Here is the scene I am starting from.",
            "Here's my picture. {lead}",
            "{lead} This is what I have so far.",
            "This is my starting point. {lead}",
            "{lead} Take a look at this first.",
            "I'm attaching the picture we'll work on. {lead}",
        ],
        lead=lead,
    )
    asst = pick(
        c.rng,
        [
            "I can see {n} objects: {items}. What would you like to do?",
            "Got it. The scene has {n} objects: {items}.",
            "Thanks! I count {n} objects here: {items}. Tell me what to change.",
            "Nice picture. There are {n} objects in it: {items}. Where shall we start?",
            "I see {items}, {n} objects in all. Ready when you are.",
        ],
        n=len(names),
        items=listing([("a " if n[0] not in "aeiou" else "an ") + n for n in names]),
    )
    return user, asst


def set_constraint(c: Composer, opening: tuple[View, str, str] | None = None) -> Constraint:
    """Forbid a colour that is absent, or protect an object; returns the constraint. With
    ``opening`` (the picture and its words), the rule comes in the same message as the picture."""
    assert c.view is not None
    scene = c.view.scene

    def constrain(kind: str, value: Any, user: str, asst: str) -> Constraint:
        if opening is None:
            return c.constrain(kind, value, user, asst)
        view, shared, listed = opening
        return c.constrain(kind, value, f"{shared} {user}", f"{asst} {listed}", picture=view)

    absent = [col for col in COLOURS if not select(scene, {"colour": col})]
    if absent and c.rng.random() < 0.6:
        col = c.rng.choice(absent)
        user = pick(
            c.rng,
            [
                "One rule for everything we do: no {col} objects, even if I ask for one later.",
                "Please keep {col} out of this scene from now on, whatever I say later.",
                "I really dislike {col}. Never put anything {col} in the scene.",
                "Before we begin: {col} is banned. Hold me to that even if I forget.",
                "Ground rule: nothing in this scene may ever be {col}.",
            ],
            col=col,
        )
        asst = pick(
            c.rng,
            [
                "Understood: nothing {col}, for the rest of our conversation.",
                "Noted. I'll keep the scene free of {col} from here on.",
                "Deal. No {col}, even if you ask for it later.",
                "Got it; {col} stays out of every version I make.",
            ],
            col=col,
        )
        return constrain("forbid_colour", col, user, asst)
    o = c.rng.choice(list(scene.objects))
    ref = "the " + phrase(minimal_where(o, scene, c.rng))
    user = pick(
        c.rng,
        [
            "Whatever else we change, {ref} stays exactly as it is.",
            "Please never touch {ref}; it has to stay as it is in every version.",
            "{ref} is off-limits: keep it unchanged no matter what I ask.",
            "I'm attached to {ref}. Promise me it survives every change, even if I say otherwise.",
            "Rule number one: leave {ref} alone, always.",
        ],
        ref=ref,
    )
    asst = pick(c.rng, ["Understood, {ref} will stay untouched.", "Okay: I won't change {ref}."], ref=ref)
    return constrain("protect", full_where(o), user, asst)


# The questions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Ask:
    """A DSU question a scenario asks at the end: the text, the answer and distractors."""

    text: str
    answer: str
    distractors: list[str]
    turn: int | None = None
    """The turn it is asked after (default: the last)."""
    outdated: str | None = None
    """The answer of the agent that lacks the capability the question tests, where it differs."""


def ask_dsu(c: Composer, rr: Ask, cr: Ask, cu: Ask) -> None:
    """The four questions every dialogue carries, in order: RR, CR, CT (the standing
    constraint, the same in every scenario) and CU (aligned with the correction checks)."""
    last = len(c.turns) - 1

    def put(qtype: QuestionType, q: Ask, aligned: list[str] | None = None) -> None:
        lacking = None if q.outdated is None else {LACKING[QUESTION_CAPABILITY[qtype]]: q.outdated}
        c.ask(qtype, last if q.turn is None else q.turn, q.text, q.answer, q.distractors, aligned, lacking)

    put(QuestionType.RR, rr)
    put(QuestionType.CR, cr)
    ask_constraint_question(c)
    put(QuestionType.CU, cu, c.capability_checks.get(CORRECTION, []))


def ask_constraint_question(c: Composer) -> None:
    """The CT question: which colour is ruled out, or which object is protected."""
    k = c.constraints[0]
    aligned = c.capability_checks.get(CONSTRAINT, [])
    last = len(c.turns) - 1
    if k.kind == "forbid_colour":
        c.ask(
            QuestionType.CT,
            last,
            "Which colour has the user ruled out for every version of the scene?",
            k.value,
            colours_except(k.value),
            aligned,
        )
    else:
        others = [phrase(full_where(o)) for o in c.images[0].scene.objects if full_where(o) != k.value]
        c.ask(
            QuestionType.CT,
            last,
            "Which object did the user ask to keep unchanged throughout?",
            f"the {phrase(k.value)}",
            [f"the {o}" for o in others] + ["none of them", "every object in the scene"],
            aligned,
        )
