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

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from yanami.contract import Capability, Check, ImageSource, QuestionType
from yanami.world._compose import Composer, Constraint
from yanami.world._free import Slot
from yanami.world._hidden import ABLATIONS, QUESTION_CAPABILITY
from yanami.world._language import full_where, listing, minimal_where, ordinal, phrase, pick
from yanami.world._ops import Op, OpError, View, apply_op
from yanami.world._place import VIEWS, free_positions, place, random_scene, side_mask, valid
from yanami.world._render import STYLES
from yanami.world._scene import COLOURS, MATERIALS, SHAPES, SIZES, Scene, Size, WorldObject, camera_coords

COREF = Capability.COREFERENCE
RETRIEVAL = Capability.RETRIEVAL
SPATIAL = Capability.SPATIAL
CONSTRAINT = Capability.CONSTRAINT
CORRECTION = Capability.CORRECTION

LACKING = ABLATIONS
"""The reference agent without a capability: where a turn needs it, the agent reads the turn alone."""


class Retry(Exception):
    """This attempt at a dialogue hit a dead end; build it again from a new seed."""


# Step 1-3: what the user means, and what a stateless reading would do instead -----------


def colours_except(*excluded: str) -> list[str]:
    """The colours, less ``excluded``."""
    return [c for c in COLOURS if c not in excluded]


def colours_for(c: Composer, *excluded: str) -> list[str]:
    """The colours a dialogue's objects and words may still use, less ``excluded``: never one
    of a colour ban's four (`reserve_colours`)."""
    return colours_except(*excluded, *c.notes.get("reserved", ()))


BAN_SHARE = 0.6
"""The share of one-picture scenarios whose standing constraint is a colour ban (the rest protect an object)."""


def reserve_colours(c: Composer) -> str:
    """Draw a colour ban's four colours before any picture, and return the banned one.

    The banned colour is one with everyday things (`COLOUR_THINGS`): the rule names it only
    through one of them ("the colour of ripe tomatoes"), and no message names it as a colour.
    The other three are the CT question's distractors. All four are kept out of the dialogue
    everywhere else: no object ever takes one, no other question offers one, no message names
    one. So the four options are alike in everything a reader of the text can count (where
    they are named, by whom, how often, in which frame, in which other questions): only
    reading the rule, and knowing what colour ripe tomatoes are, tells them apart. Cyan, which
    has no everyday thing, is never one of the four, so no option word tells a distractor."""
    col = c.rng.choice(list(COLOUR_THINGS))
    fine = c.rng.sample([x for x in COLOUR_THINGS if x != col], 3)
    c.notes["reserved"] = [col, *fine]
    return col


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


def room_for(c: Composer, scene: Scene, size: Size = "small") -> bool:
    """Whether an object of ``size`` (and of attributes no object of that size has) still has
    room in ``scene``: checked where a later turn adds one, to drop a scene without room
    before the turns in between are worked out."""
    taken = {(o.shape, o.colour, o.material) for o in scene.objects if o.size == size}
    shape, colour, material = next(k for k in itertools.product(SHAPES, COLOURS, MATERIALS) if k not in taken)
    probe = WorldObject(id=scene.next_id(), shape=shape, colour=colour, size=size, material=material, x=0, y=0)
    return len(free_positions(scene, probe, c.rng, 600)) > 0


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
    if c.rng.random() < BAN_SHARE:
        reserve_colours(c)
    scene = random_scene(c.rng, c.rng.randint(*objects), stack_chance=stack_chance, colours=colours_for(c))
    view = View(scene, VIEWS[0], style)
    c.view = view  # the constraint is chosen against the picture
    lead = pick(c.rng, leads)
    # a remark that names an object, any of them, by its colour among other things
    o = c.rng.choice(list(scene.objects))
    named = {**minimal_where(o, scene, c.rng), "colour": o.colour}
    lead += pick(c.rng, [" The {o} is my favourite.", " I'm fond of the {o}."], o=phrase(named))
    set_constraint(c, (view, *opening(c, view, lead)))
    return scene


def opening(c: Composer, view: View, lead: str) -> tuple[str, str, str]:
    """What the user says sharing the start picture, how the assistant lists what it shows (in an
    order drawn at random, kept in ``c.notes["listed"]`` for `listed_ref`), and how it hands the
    turn back."""
    objs = list(view.scene.objects)
    c.rng.shuffle(objs)
    c.notes["listed"] = [o.id for o in objs]
    names = [phrase(full_where(o), c.rng) for o in objs]
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
    listed, cue = c.rng.choice(_LISTINGS)
    items = listing([("a " if n[0] not in "aeiou" else "an ") + n for n in names])
    return user, listed.format(n=len(names), items=items), cue


_LISTINGS = (
    ("I can see {n} objects: {items}.", "What would you like to do?"),
    ("Got it. The scene has {n} objects: {items}.", ""),
    ("Thanks! I count {n} objects here: {items}.", "Tell me what to change."),
    ("Nice picture. There are {n} objects in it: {items}.", "Where shall we start?"),
    ("I see {items}, {n} objects in all.", "Ready when you are."),
)
"""How the assistant lists the start picture's objects, and how it then hands the turn back."""


def listed_ref(c: Composer, oid: int) -> str:
    """The object ``oid`` named by its place in the assistant's first listing ("the third object you listed")."""
    nth = ordinal(c.notes["listed"].index(oid) + 1)
    return c.rng.choice(["the {n} object you listed", "the {n} one in your list", "the {n} thing you listed"]).format(
        n=nth
    )


def first_picture(c: Composer, image: int = 0) -> list[str]:
    """The objects of a picture (the first by default), described by all four attributes (the
    assistant listed them)."""
    return [f"the {phrase(full_where(o))}" for o in c.images[image].scene.objects]


def uncoloured(o: WorldObject) -> str:
    """An object as an RR option names it where that is enough: every attribute but its colour."""
    return f"the {phrase({k: v for k, v in full_where(o).items() if k != 'colour'})}"


def distinct(objects: list[WorldObject], among: list[WorldObject]) -> list[WorldObject]:
    """The ``objects`` that `uncoloured` singles out among ``among`` (which holds them)."""
    return [o for o in objects if sum(uncoloured(p) == uncoloured(o) for p in among) == 1]


def meant_options(
    c: Composer, target: WorldObject, others: list[WorldObject], unoffered: list[WorldObject] | None = None
) -> tuple[str, list[str]]:
    """The answer and the candidate distractors of an RR question (which object a reference
    meant): ``target`` and the ``others`` it could be confused with, named without their colour
    (`Retry` where that does not tell ``target`` apart from them and the ``unoffered`` objects:
    see `distinct`). Where fewer than three others are left (two of them alike but for the
    colour), objects that none of them is fill in: one of them or ``target`` with one
    attribute changed (``the large matte sphere`` for the small one, in a picture without
    one), of a shape the picture has (the other questions' options name the picture's shapes).

    The colour is what the turns around a reference name (the new colour, the one passed over,
    the old one in the reply) and what the other questions ask about, so an option's colour told
    a surface reader which option the reference could not mean; the other attributes are read
    where the reference points (the listing, the plan, the suggestion) as well. Named by all four
    attributes in a few questions only, the options would tell those questions apart."""
    rest = list(dict.fromkeys(uncoloured(o) for o in others))
    if uncoloured(target) in rest or uncoloured(target) in {uncoloured(o) for o in unoffered or []}:
        raise Retry("the object is named by its colour only")
    taken = {uncoloured(target), *rest}
    real = [(o.size, o.material, o.shape) for o in (target, *others)]
    shapes = [s for s in SHAPES if s in {o.shape for o in (target, *others)}]
    named = {k: f"the {phrase(dict(zip(('size', 'material', 'shape'), k, strict=True)))}"
             for k in itertools.product(SIZES, MATERIALS, shapes)}  # fmt: skip
    near = [k for k in named if named[k] not in taken and any(sum(map(str.__ne__, k, r)) == 1 for r in real)]
    far = [k for k in named if named[k] not in taken and k not in near]
    need = max(0, 3 - len(rest))
    fill = c.rng.sample(near, min(need, len(near)))
    fill += c.rng.sample(far, min(need - len(fill), len(far)))
    return uncoloured(target), rest + [named[k] for k in fill]


COLOUR_THINGS: dict[str, tuple[str, ...]] = {
    "red": ("ripe tomatoes", "fire engines", "strawberries"),
    "blue": ("sapphires", "denim jeans", "a deep summer sky"),
    "green": ("fresh grass", "emeralds", "spinach leaves"),
    "brown": ("chocolate", "tree bark", "coffee beans"),
    "purple": ("violets", "amethysts", "ripe plums"),
    "yellow": ("lemons", "ripe bananas", "sunflowers"),
    "gray": ("rain clouds", "elephants", "wet concrete"),
}
"""Everyday things of one of the world's colours. A colour rule names its colour through one
of them, so the rule's own words do not hold the answer to the question about it (cyan has no
thing that every reader calls cyan, so no rule bans it)."""
EXTREMES = {
    "front": ("the object nearest to us", "the one closest to the camera", "the object at the very front"),
    "behind": ("the object furthest back", "the one furthest from us", "the object at the very back"),
    "left": ("the object furthest to the left", "the leftmost object", "the one on the far left"),
    "right": ("the object furthest to the right", "the rightmost object", "the one on the far right"),
}
"""How a user points at an object by where it stands in the picture (see `extreme`)."""


def extreme(scene: Scene, azimuth: float, side: str) -> WorldObject | None:
    """The object standing furthest to ``side`` (of the camera at ``azimuth``), if it is a lone
    object on the ground (no stack: "the one at the front" must single out one object)."""
    right, forward = (
        (lambda o: camera_coords(o, azimuth)[0]),
        (lambda o: camera_coords(o, azimuth)[1]),
    )
    key, far = {"left": (right, min), "right": (right, max), "front": (forward, min), "behind": (forward, max)}[side]
    best = far(scene.objects, key=key)
    if best.on is not None or scene.supported_by(best.id) is not None:
        return None
    return best


def banned_reply(c: Composer) -> str:
    """How the assistant acknowledges a colour ban: in words that name no colour, as the rule
    named its colour only through an everyday thing (see `reserve_colours`)."""
    return pick(
        c.rng,
        [
            "Understood: nothing in that colour from now on.",
            "Got it: that colour is out from now on.",
            "Noted. That colour stays out of every version.",
            "Understood. I'll keep that colour out, whatever comes later.",
            "Noted: nothing that colour, ever.",
        ],
    )


def set_constraint(c: Composer, opening: tuple[View, str, str, str] | None = None) -> Constraint:
    """Forbid the colour `reserve_colours` drew (where it drew one), or protect an object;
    returns the constraint. With
    ``opening`` (the picture and its words), the rule comes in the same message as the picture.

    The user's rule never names its value: a colour through an everyday thing of that colour
    ("the colour of ripe tomatoes"; the assistant's acknowledgement names the colour), an
    object by where it stands in the picture ("the object nearest to us"; the assistant's
    listing names it, once, like every other object)."""
    assert c.view is not None
    scene = c.view.scene

    def constrain(kind: str, value: Any, user: str, asst: str) -> Constraint:
        if opening is None:
            return c.constrain(kind, value, user, asst)
        view, shared, listed, cue = opening
        # what the rule bans comes before or after the objects listed
        said = f"{listed} {asst} {cue}" if c.rng.random() < 0.5 else f"{asst} {listed} {cue}"
        said = said.rstrip()
        return c.constrain(kind, value, f"{shared} {user}", said, picture=view)

    sides = [side for side in EXTREMES if extreme(scene, c.view.azimuth, side) is not None]
    if "reserved" in c.notes:
        col = c.notes["reserved"][0]
        thing = c.rng.choice(COLOUR_THINGS[col])
        user = pick(
            c.rng,
            [
                "One rule for everything we do: nothing the colour of {thing}, even if I ask for it later.",
                "Please keep the colour of {thing} out of this scene from now on, whatever I say later.",
                "I really dislike the colour of {thing}. Never put anything that colour in the scene.",
                "Before we begin: the colour of {thing} is banned. Hold me to that even if I forget.",
                "Ground rule: nothing in this scene may ever be the colour of {thing}.",
            ],
            thing=thing,
        )
        return constrain("forbid_colour", col, user, banned_reply(c))
    if not sides:
        raise Retry("no object to point at")
    side = c.rng.choice(sides)
    o = extreme(scene, c.view.azimuth, side)
    assert o is not None
    c.notes["rule_side"] = side
    user = pick(
        c.rng,
        [
            "Whatever else we change, {ref} stays exactly as it is.",
            "Please never touch {ref}; it has to stay as it is in every version.",
            "{ref} is off-limits: keep it unchanged no matter what I ask.",
            "I'm attached to {ref}. Promise me it survives every change, even if I say otherwise.",
            "Rule number one: leave {ref} alone, always.",
        ],
        ref=c.rng.choice(EXTREMES[side]),
    )
    # The reply does not name it: the listing names every object once, the rule's one included.
    asst = pick(c.rng, ["Understood, that one will stay untouched.", "Okay: I won't change it."])
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
    """The CT question: which colour is ruled out, or which object is protected. The options are
    the four colours `reserve_colours` set aside, or objects that stood unchanged as long as the
    protected one."""
    k = c.constraints[0]
    aligned = c.capability_checks.get(CONSTRAINT, [])
    last = len(c.turns) - 1
    if k.kind == "forbid_colour":
        c.ask(
            QuestionType.CT,
            last,
            "Which colour has the user ruled out for every version of the scene?",
            k.value,
            list(c.notes["reserved"][1:]),
            aligned,
        )
    else:
        # in how many pictures each object (as it looked) stands: the protected one in all of them,
        # so the distractors are the objects that stood as long (the three longest, and any tied)
        seen: dict[str, int] = {}
        for view in c.images:
            for o in view.scene.objects:
                seen[phrase(full_where(o))] = seen.get(phrase(full_where(o)), 0) + 1
        kept = phrase(k.value)
        others = sorted((o for o in seen if o != kept), key=lambda o: (-seen[o], o))
        others = [o for o in others if seen[o] >= seen[others[min(2, len(others) - 1)]]]
        c.ask(
            QuestionType.CT,
            last,
            "Which object did the user ask to keep unchanged throughout?",
            f"the {kept}",
            [f"the {o}" for o in others],
            aligned,
        )


STANDING = {
    "left": "furthest to the left",
    "right": "furthest to the right",
    "front": "nearest to the viewer",
    "behind": "furthest from the viewer",
}


def first_picture_extreme(c: Composer, image: int = 0, named: str = "the first picture") -> Ask:
    """A CR question on a picture the user showed (the first by default; ``named`` as the
    question names it): which object stood furthest to one side. Only the picture tells (the
    listing has no positions), and the side is drawn at random."""
    view = c.images[image]
    sides = [s for s in STANDING if s != c.notes.get("rule_side") and extreme(view.scene, view.azimuth, s)]
    if not sides:
        raise Retry("no object stands out in the picture asked about")
    side = c.rng.choice(sides)
    o = extreme(view.scene, view.azimuth, side)
    assert o is not None
    return Ask(
        f"In {named}, which object stood {STANDING[side]}?",
        f"the {phrase(full_where(o))}",
        first_picture(c, image),
    )
