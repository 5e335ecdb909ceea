"""The four scenarios as scripts of moves over a `Composer`.

Every script sets a constraint and later tests it, refers back to objects by pronoun,
by turn or by picture, retrieves something only the history holds, and corrects an
earlier decision, so each dialogue exercises at least four capabilities and carries
one question of each DSU type.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np

from yanami.schema import Capability, Check, CheckCategory, ImageSource, QuestionType, Scenario
from yanami.world._compose import Composer, Reducible
from yanami.world._language import REL_WORDS, a, full_where, listing, minimal_where, ordinal, phrase, pick
from yanami.world._ops import OpError, View, apply_op
from yanami.world._place import VIEWS, NoRoom, free_positions, place, random_scene, side_mask, valid
from yanami.world._predicates import select
from yanami.world._render import STYLES
from yanami.world._scene import COLOURS, SIZES, Scene, WorldObject, pairs, random_object, relation

COREF = Capability.COREFERENCE
RETRIEVAL = Capability.RETRIEVAL
SPATIAL = Capability.SPATIAL
CONSTRAINT = Capability.CONSTRAINT
CORRECTION = Capability.CORRECTION


class Retry(Exception):
    """This attempt at a dialogue hit a dead end; build it again from a new seed."""


def _colours_except(*excluded: str) -> list[str]:
    return [c for c in COLOURS if c not in excluded]


def _check_valid(c: Composer, op: dict[str, Any]) -> None:
    assert c.view is not None
    try:
        new = apply_op(op, c.view, c.images)
    except OpError as exc:
        raise Retry(str(exc)) from None
    if not valid(new.scene):
        raise Retry(f"{op} breaks the placement rules")


def _spot(
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


def _opening(c: Composer, view: View, lead: str) -> int:
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
    return c.show(view, user, asst)


def _set_constraint(c: Composer) -> Any:
    """Forbid a colour that is absent, or protect an object; returns the constraint."""
    assert c.view is not None
    scene = c.view.scene
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
        return c.constrain("forbid_colour", col, user, asst)
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
    return c.constrain("protect", full_where(o), user, asst)


def _ask_constraint_question(c: Composer) -> None:
    k = c.constraints[0]
    aligned = c.capability_checks.get(CONSTRAINT, [])
    last = len(c.turns) - 1
    if k.kind == "forbid_colour":
        c.ask(
            QuestionType.CT,
            last,
            "Which colour has the user ruled out for every version of the scene?",
            k.value,
            _colours_except(k.value),
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


def _violating_edit(c: Composer, target: WorldObject) -> None:
    """A request that would break the constraint; the assistant adjusts or declines."""
    assert c.view is not None
    k = c.constraints[0]
    scene = c.view.scene
    ref = "the " + phrase(minimal_where(target, scene, c.rng))
    if k.kind == "forbid_colour":
        forbidden = k.value
        if target.colour == forbidden:
            raise Retry("target already forbidden colour")
        alt = c.rng.choice(_colours_except(forbidden, target.colour))
        where = minimal_where(target, scene, c.rng)
        op = {"op": "set", "where": where, "attr": "colour", "value": alt}
        literal = {"op": "set", "where": where, "attr": "colour", "value": forbidden}
        _check_valid(c, op)
        user = pick(
            c.rng,
            [
                "Make {ref} {col}.",
                "Could you paint {ref} {col}?",
                "Let's try {ref} in {col}.",
                "I want {ref} to be {col} now.",
                "Switch {ref} over to {col}.",
                "{ref} would look better in {col}; change it.",
            ],
            ref=ref,
            col=forbidden,
        )
        asst = pick(
            c.rng,
            [
                "You asked me to keep {col} out of the scene, so I painted it {alt} instead.",
                "I can't use {col}: that was your rule from the start. Here it is in {alt};"
                " tell me if you prefer another colour.",
            ],
            col=forbidden,
            alt=alt,
        )
        after = apply_op(op, c.view, c.images).scene
        new_where = {**{k2: v for k2, v in where.items() if k2 != "colour"}, "colour": alt}
        focus = []
        if len(select(after, new_where)) == 1:
            focus.append(
                c.atomic(
                    f"The {phrase({k2: v for k2, v in where.items() if k2 != 'colour'})} is now {alt}.",
                    {"op": "exists", "where": {**full_where(target), "colour": alt}},
                    CheckCategory.ATTRIBUTE,
                )
            )
        c.target(user, op, literal, asst, {CONSTRAINT}, alternatives={"no-constraints": literal}, focus=focus)
        return
    # protect: the user asks to remove the protected object; the assistant declines
    protected = select(scene, k.value)
    if not protected:
        raise Retry("protected object missing")
    p = protected[0]
    where = minimal_where(p, scene, c.rng)
    literal = {"op": "remove", "where": where}
    user = pick(
        c.rng,
        [
            "Let's get rid of {ref}.",
            "Remove {ref}, please.",
            "Actually, take {ref} out of the picture.",
            "Could you delete {ref}?",
            "I don't need {ref} any more; drop it.",
            "Clear {ref} out of the scene.",
        ],
        ref="the " + phrase(where),
    )
    asst = pick(
        c.rng,
        [
            "You asked me to keep the {obj} unchanged, so I left it in place. Here is the scene as it stands.",
            "That one is protected by your earlier rule, so I kept it. Nothing else changed.",
        ],
        obj=phrase(k.value),
    )
    c.target(user, {"op": "none"}, literal, asst, {CONSTRAINT}, alternatives={"no-constraints": literal})


def _pronoun_edit(c: Composer, target: WorldObject) -> None:
    """An edit that refers to the last changed object as "it"."""
    assert c.view is not None
    scene = c.view.scene
    current = next((o for o in scene.objects if full_where(o) == full_where(target) or o.id == target.id), None)
    if current is None:
        raise Retry("target gone")
    where = minimal_where(current, scene, c.rng)
    flips = {
        "material": "metal" if current.material == "matte" else "matte",
        "size": "small" if current.size == "large" else "large",
    }
    attrs = c.rng.sample(list(flips), 2)
    for attr in attrs:  # the first change the placement rules allow
        value = flips[attr]
        op = {"op": "set", "where": where, "attr": attr, "value": value}
        try:
            _check_valid(c, op)
            break
        except Retry:
            continue
    else:
        raise Retry("no allowed change")
    others = [o for o in c.latest.scene.objects if o.id != current.id]
    if not others:
        raise Retry("nothing to confuse")
    wrong = max(others, key=lambda o: (SIZES[o.size], o.id))
    wrong_where = minimal_where(wrong, c.latest.scene, c.rng)
    stateless = {"op": "set", "where": wrong_where, "attr": attr, "value": value}
    word = {"material": {"metal": "metal", "matte": "matte"}, "size": {"small": "small", "large": "large"}}[attr][value]
    user = pick(
        c.rng,
        [
            "Nice. Now make it {w}.",
            "Good, and can you make it {w} as well?",
            "Keep going with that one: it should be {w}.",
            "I like it. Let's also make it {w}.",
            "Next, it needs to be {w}.",
            "Same object again, please: turn it {w}.",
        ],
        w=word,
    )
    asst = pick(
        c.rng,
        ["Done: the {obj} is {w} now.", "Here you go, it is {w} now and nothing else moved."],
        obj=phrase(where),
        w=word,
    )
    after = apply_op(op, c.view, c.images).scene
    changed = next(o for o in after.objects if o.id == current.id)
    focus = [
        c.atomic(
            f"There is {a(full_where(changed))}.",
            {"op": "exists", "where": full_where(changed)},
            CheckCategory.ATTRIBUTE,
        )
    ]
    turn = c.target(user, op, stateless, asst, {COREF}, alternatives={"no-coreference": stateless}, focus=focus)
    c.notes["pronoun"] = (
        turn,
        phrase(full_where(current)),
        [phrase(full_where(o)) for o in scene.objects if o.id != current.id],
    )
    c.notes["revertible"] = (turn, current.id, attr, getattr(current, attr), value)


def _retrieval_add(c: Composer, source: WorldObject) -> None:
    """Add an object in the colour another object had in the first picture."""
    assert c.view is not None
    scene = c.view.scene
    first = c.images[0].scene
    original = next((o for o in first.objects if o.id == source.id), None)
    current = next((o for o in scene.objects if o.id == source.id), None)
    if original is None or current is None or original.colour == current.colour:
        raise Retry("no colour history to retrieve")
    forbidden = {k.value for k in c.constraints if k.kind == "forbid_colour"}
    if original.colour in forbidden:
        raise Retry("retrieved colour forbidden")
    new = random_object(c.rng, scene.next_id(), colour=original.colour, size="small")
    x, y = _spot(c, new)
    spec = {"shape": new.shape, "colour": new.colour, "size": new.size, "material": new.material, "x": x, "y": y}
    op = {"op": "add", "object": spec}
    stateless = {"op": "add", "object": {**spec, "colour": current.colour}}
    _check_valid(c, op)
    ref = "the " + phrase(minimal_where(current, scene, c.rng))
    user = pick(
        c.rng,
        [
            "Add a small {shape}, in the colour {ref} had in my first picture.",
            "Put a small {shape} somewhere free; give it the original colour of {ref}, from before any edits.",
            "Can you add a small {shape}? Use whatever colour {ref} was originally.",
            "I'd like a new small {shape}, coloured like {ref} was before we touched it.",
            "Bring in a small {shape} in the original colour of {ref}.",
        ],
        shape=new.shape,
        ref=ref,
    )
    asst = pick(
        c.rng,
        [
            "Added a small {col} {shape}: {col} is what {ref} looked like at the start.",
            "Here it is, a small {col} {shape}.",
        ],
        col=original.colour,
        shape=new.shape,
        ref=ref,
    )
    w = {"shape": new.shape, "colour": new.colour, "size": "small"}
    focus = [
        c.atomic(f"There is a small {new.colour} {new.shape}.", {"op": "exists", "where": w}, CheckCategory.EXISTENCE)
    ]
    turn = c.target(user, op, stateless, asst, {RETRIEVAL}, alternatives={"no-retrieval": stateless}, focus=focus)
    c.notes["added"] = (turn, new.id, phrase(w))
    c.notes["retrieved"] = (
        turn,
        phrase({"shape": original.shape, "size": original.size}),
        original.colour,
        current.colour,
    )


def _correction_revert(c: Composer) -> None:
    """The user takes back the pronoun edit: the object goes back to how it was."""
    assert c.view is not None
    turn, oid, attr, old, new_value = c.notes["revertible"]
    scene = c.view.scene
    current = next((o for o in scene.objects if o.id == oid), None)
    if current is None:
        raise Retry("corrected object gone")
    where = minimal_where(current, scene, c.rng)
    op = {"op": "set", "where": where, "attr": attr, "value": old}
    _check_valid(c, op)
    user = pick(
        c.rng,
        [
            "Wait, I take back what I asked in my {nth} message: put that object back the way it was.",
            "On second thought, undo the change from my {nth} message; the {attr} was better before.",
            "Correction: forget the {attr} change from my {nth} message and restore what it replaced.",
            "I made a mistake in my {nth} message. Please reverse that {attr} change.",
            "Scratch what I said in my {nth} message; the old {attr} was right.",
        ],
        nth=ordinal(turn + 1),
        attr=attr,
    )
    asst = pick(
        c.rng,
        ["Reverted: the {obj} is {old} again.", "Sure, the {obj} is back to {old}; everything else stays."],
        obj=current.shape,
        old=old,
    )
    after = apply_op(op, c.view, c.images).scene
    restored = next(o for o in after.objects if o.id == oid)
    pred = {"op": "exists", "where": full_where(restored)}
    stale = {"op": "absent", "where": full_where(current)}
    turn_now = c.target(
        user,
        op,
        {"op": "none"},
        asst,
        {CORRECTION, RETRIEVAL},
        alternatives={"no-corrections": {"op": "none"}},
        correction=[
            (
                f"There is {a(full_where(restored))}.",
                pred,
            ),
            (f"There is no {phrase(full_where(current))} any more.", stale),
        ],
    )
    c.notes["correction"] = (turn_now, phrase({"shape": current.shape}), attr, old, new_value)


def _reference_by_turn(c: Composer) -> None:
    """Move "the object we added" next to another one."""
    assert c.view is not None
    turn, oid, desc = c.notes["added"]
    scene = c.view.scene
    added = next((o for o in scene.objects if o.id == oid), None)
    if added is None:
        raise Retry("added object gone")
    anchors = [o for o in scene.ground_objects() if o.id != oid]
    if not anchors:
        raise Retry("no anchor")
    anchor = c.rng.choice(anchors)
    rel = c.rng.choice(["left", "right", "front", "behind"])
    x, y = _spot(c, added, anchor, rel)
    op = {"op": "move", "where": minimal_where(added, scene, c.rng), "x": x, "y": y}
    _check_valid(c, op)
    latest = c.latest.scene
    candidates = [o for o in latest.objects if o.id not in (oid, anchor.id) and o.on is None]
    if not candidates:
        raise Retry("nothing to confuse")
    wrong = c.rng.choice(candidates)
    stateless = {"op": "move", "where": minimal_where(wrong, latest, c.rng), "x": x, "y": y}
    aref = "the " + phrase(minimal_where(anchor, scene, c.rng))
    user = pick(
        c.rng,
        [
            "Now move the object you added in my {nth} message so it sits {rel} {anchor}.",
            "Take the piece we added a little while ago and put it {rel} {anchor}.",
            "Where's the object you added in my {nth} message? Move it {rel} {anchor}.",
            "Please reposition the object you added in my {nth} message: {rel} {anchor}.",
        ],
        nth=ordinal(turn + 1),
        rel=REL_WORDS[rel],
        anchor=aref,
    )
    asst = pick(
        c.rng,
        ["Moved the {d} {rel} {anchor}.", "Done, the {d} is now {rel} {anchor}."],
        d=desc,
        rel=REL_WORDS[rel],
        anchor=aref,
    )
    after = apply_op(op, c.view, c.images).scene
    focus = [_relation_check(c, after, oid, anchor.id, rel)]
    c.target(user, op, stateless, asst, {COREF, RETRIEVAL}, alternatives={"no-coreference": stateless}, focus=focus)
    _note_turn_ref(c, user, desc, scene, oid)


def _relation_check(c: Composer, scene: Scene, a_id: int, b_id: int, rel: str) -> Check:
    """An atomic check that object ``a_id`` is ``rel`` of ``b_id`` in ``scene``."""
    wa, wb = minimal_where(scene.by_id(a_id), scene, c.rng), minimal_where(scene.by_id(b_id), scene, c.rng)
    return c.atomic(
        f"The {phrase(wa)} is {REL_WORDS[rel]} the {phrase(wb)}.",
        {"op": "relation", "a": wa, "b": wb, "rel": rel},
        CheckCategory.RELATION,
    )


def _note_turn_ref(c: Composer, user: str, desc: str, scene: Scene, oid: int) -> None:
    """Remember how the user named "the object you added", for the RR question."""
    phrase_used = "the object you added" if "object you added" in user else "the piece we added"
    others = [phrase(full_where(o)) for o in scene.objects if o.id != oid]
    c.notes["turn_ref"] = (len(c.turns) - 1, desc, others, phrase_used)


def _swap_added(c: Composer) -> None:
    """Swap "the object you added" with another ground object."""
    assert c.view is not None
    turn, oid, desc = c.notes["added"]
    scene = c.view.scene
    added = next((o for o in scene.objects if o.id == oid), None)
    others = [o for o in scene.ground_objects() if o.id != oid and scene.supported_by(o.id) is None]
    if added is None or added.on is not None or not others:
        raise Retry("nothing to swap")
    other = c.rng.choice(others)
    op = {"op": "swap", "a": minimal_where(added, scene, c.rng), "b": minimal_where(other, scene, c.rng)}
    _check_valid(c, op)
    latest = c.latest.scene
    decoys = [o for o in latest.ground_objects() if o.id not in (oid, other.id) and latest.supported_by(o.id) is None]
    if not decoys:
        raise Retry("nothing to confuse")
    wrong = c.rng.choice(decoys)
    stateless = {"op": "swap", "a": minimal_where(wrong, latest, c.rng), "b": minimal_where(other, latest, c.rng)}
    oref = "the " + phrase(minimal_where(other, scene, c.rng))
    user = pick(
        c.rng,
        [
            "Swap the object you added in my {nth} message with {o}.",
            "Let the piece we added trade places with {o}.",
            "Exchange the positions of {o} and the object you added earlier.",
        ],
        nth=ordinal(turn + 1),
        o=oref,
    )
    asst = pick(c.rng, ["Swapped the {d} and {o}.", "They have traded places: the {d} and {o}."], d=desc, o=oref)
    after = apply_op(op, c.view, c.images).scene
    rel = c.rng.choice(relation(after.by_id(oid), after.by_id(other.id), c.view.azimuth))
    focus = [_relation_check(c, after, oid, other.id, rel)]
    c.target(user, op, stateless, asst, {COREF, RETRIEVAL}, alternatives={"no-coreference": stateless}, focus=focus)
    _note_turn_ref(c, user, desc, scene, oid)


def _can_stack_it(c: Composer, mover: WorldObject) -> bool:
    assert c.view is not None
    scene = c.view.scene
    current = scene.by_id(mover.id)
    return current.size == "small" and scene.supported_by(current.id) is None and bool(_supports(scene, current))


def _supports(scene: Scene, top: WorldObject) -> list[WorldObject]:
    return [
        o
        for o in scene.ground_objects()
        if o.id != top.id
        and o.shape != "sphere"
        and o.size == "large"
        and o.colour != top.colour
        and scene.supported_by(o.id) is None
    ]


def _stack_it(c: Composer, mover: WorldObject) -> None:
    """Put "it" (the object pushed earlier) on top of a large cube or cylinder."""
    assert c.view is not None
    scene = c.view.scene
    current = scene.by_id(mover.id)
    for support in c.rng.sample(_supports(scene, current), len(_supports(scene, current))):
        op = {"op": "stack", "where": minimal_where(current, scene, c.rng), "on": minimal_where(support, scene, c.rng)}
        try:
            _check_valid(c, op)
            break
        except Retry:
            continue
    else:
        raise Retry("nowhere to stack")
    latest = c.latest.scene
    decoys = [o for o in latest.objects if o.id not in (current.id, support.id) and o.size == "small" and o.on is None]
    if not decoys:
        raise Retry("nothing to confuse")
    wrong = c.rng.choice(decoys)
    stateless = {"op": "stack", "where": minimal_where(wrong, latest, c.rng), "on": op["on"]}
    sref = "the " + phrase(minimal_where(support, scene, c.rng))
    user = pick(
        c.rng,
        ["Now lift it onto {s}.", "Put it on top of {s}.", "Stack it on {s}, please.", "Can it sit on top of {s}?"],
        s=sref,
    )
    asst = pick(c.rng, ["It now rests on {s}.", "Done: the {o} sits on top of {s}."], s=sref, o=current.shape)
    after = apply_op(op, c.view, c.images).scene
    wt = minimal_where(after.by_id(current.id), after, c.rng)
    ws = minimal_where(after.by_id(support.id), after, c.rng)
    focus = [
        c.atomic(
            f"The {phrase(wt)} rests on top of the {phrase(ws)}.",
            {"op": "on", "a": wt, "b": ws},
            CheckCategory.SUPPORT,
        )
    ]
    c.target(user, op, stateless, asst, {COREF, SPATIAL}, alternatives={"no-coreference": stateless}, focus=focus)


def _questions(c: Composer) -> None:
    last = len(c.turns) - 1
    if "turn_ref" in c.notes:
        turn, answer, others, word = c.notes["turn_ref"]
    else:
        turn, answer, others = c.notes["pronoun"]
        word = "it"
    c.ask(
        QuestionType.RR,
        turn,
        f'In turn {turn + 1}, which object does the user mean by "{word}"?',
        f"the {answer}",
        [f"the {o}" for o in others] + ["the largest object in the scene", "a new object"],
    )
    rturn, _, old_colour, new_colour = c.notes["retrieved"]
    c.ask(
        QuestionType.CR,
        last,
        f"What colour did the user's request in turn {rturn + 1} call for?",
        old_colour,
        [new_colour, *_colours_except(old_colour, new_colour)],
        alternatives={"no-retrieval": new_colour},
    )
    _ask_constraint_question(c)
    cturn, shape, attr, old, new_value = c.notes["correction"]
    c.ask(
        QuestionType.CU,
        last,
        f"After the user's correction in turn {cturn + 1}, what {attr} should the {shape} have?",
        str(old),
        [
            str(new_value),
            *{"material": ["matte", "metal"], "size": ["small", "large"]}.get(attr, list(COLOURS)),
            "it was removed",
            "it never changed",
        ],
        c.capability_checks.get(CORRECTION, []),
        alternatives={"no-corrections": str(new_value)},
    )


# Scenarios ------------------------------------------------------------------------------


def editing(c: Composer) -> None:
    """Progressive edits of one picture that must keep everything not mentioned."""
    style = c.rng.choice(list(STYLES))
    scene = random_scene(c.rng, c.rng.randint(3, 5), stack_chance=0.15)
    view = View(scene, VIEWS[0], style)
    _opening(
        c,
        view,
        pick(
            c.rng,
            [
                "I want to edit this picture step by step.",
                "Let's rework this scene together.",
                "Time for some careful edits.",
                "Let's make a series of small changes.",
            ],
        ),
    )
    _set_constraint(c)
    changed = c.rng.choice([o for o in scene.objects if full_where(o) != c.constraints[0].value])
    _first_step(c, changed, "Make the {ref} {col}.")
    _pronoun_edit(c, changed)
    _retrieval_add(c, changed)
    _correction_revert(c)
    if c.constraints[0].kind == "protect":
        _violating_edit(c, changed)
    elif c.rng.random() < 0.6:
        _swap_added(c) if c.rng.random() < 0.4 else _reference_by_turn(c)
    _questions(c)


def _first_step(c: Composer, o: WorldObject, request: str) -> None:
    """Recolour ``o``: against the forbidden colour if there is one (the assistant adjusts),
    else as a plain edit (shown, but not judged: read alone it is already solvable)."""
    if c.constraints[0].kind == "forbid_colour":
        _violating_edit(c, o)
        return
    assert c.view is not None
    col = c.rng.choice(_colours_except(o.colour))
    where = minimal_where(o, c.view.scene, c.rng)
    op = {"op": "set", "where": where, "attr": "colour", "value": col}
    _check_valid(c, op)
    _plain_edit(c, op, request.format(ref=phrase(where), col=col), f"Done, the {phrase(where)} is {col} now.")


def _plain_edit(c: Composer, op: dict[str, Any], user: str, asst: str) -> None:
    """An edit that a history-free reading gets right too: the change is shown, but the
    turn is not a target turn (it has no checks)."""
    assert c.view is not None
    c.view = apply_op(op, c.view, c.images)
    part = c.picture(c.view, ImageSource.ASSISTANT)
    c.turn_with_image(user, asst, part, {Capability.CONSISTENCY}, {"op": op})


def world_modeling(c: Composer) -> None:
    """Actions with physical consequences, a walk around the scene, and a corrected relation."""
    style = c.rng.choice(list(STYLES))
    scene = random_scene(c.rng, c.rng.randint(3, 5), stack_chance=0.5)
    view = View(scene, VIEWS[0], style)
    _opening(
        c,
        view,
        pick(
            c.rng,
            [
                "Let's play out what happens to this scene.",
                "I want to simulate a few changes here.",
                "Let's see how this scene reacts to a few actions.",
                "I'd like to explore some physical changes here.",
            ],
        ),
    )
    _set_constraint(c)
    mover, anchor, rel, first_turn, first_azimuth = _relation_move(c)
    _orbit(c)
    _push_it(c, mover, (anchor, rel, first_azimuth))
    _relation_correction(c, mover, anchor, rel, first_turn, first_azimuth)
    if any(o.on is not None for o in c.view.scene.objects):  # type: ignore[union-attr]
        _remove_support_from_start(c)
    elif _can_stack_it(c, mover):
        _stack_it(c, mover)
    elif c.constraints[0].kind == "forbid_colour":
        _violating_edit(c, c.rng.choice([o for o in c.view.scene.objects if o.id != mover.id]))  # type: ignore[union-attr]
    else:
        _violating_edit(c, mover)
    _world_questions(c, mover, anchor, rel, first_turn)


OPPOSITE = {"left": "right", "right": "left", "front": "behind", "behind": "front"}


def _relation_move(c: Composer) -> tuple[WorldObject, WorldObject, str, int, float]:
    """A plain move that puts one object on a given side of another (shown, not judged)."""
    assert c.view is not None
    scene = c.view.scene
    protected = [k.value for k in c.constraints if k.kind == "protect"]
    movers = [o for o in scene.ground_objects() if scene.supported_by(o.id) is None and full_where(o) not in protected]
    if len(scene.ground_objects()) < 2 or not movers:
        raise Retry("nothing to move")
    mover = c.rng.choice(movers)
    # An anchor and a side with room, whose opposite side has room too (the user will
    # correct the side later).
    # One pool of free positions for the mover serves every anchor and side.
    free = free_positions(scene, mover, c.rng, 192)
    found = None
    for anchor in c.rng.sample(
        [o for o in scene.ground_objects() if o.id != mover.id], len(scene.ground_objects()) - 1
    ):
        for rel in c.rng.sample(["front", "behind", "left", "right"], 4):
            there = free[side_mask(free, anchor, rel, c.view.azimuth)]
            if len(there) and side_mask(free, anchor, OPPOSITE[rel], c.view.azimuth).any():
                found = (anchor, rel, float(there[0, 0]), float(there[0, 1]))
                break
        if found:
            break
    if found is None:
        raise Retry("no room on either side")
    anchor, rel, x, y = found
    op = {"op": "move", "where": minimal_where(mover, scene, c.rng), "x": x, "y": y}
    _check_valid(c, op)
    mref, aref = phrase(minimal_where(mover, scene, c.rng)), phrase(minimal_where(anchor, scene, c.rng))
    user = pick(
        c.rng,
        [
            "Move the {m} so that it is {r} the {a}.",
            "Put the {m} {r} the {a}.",
            "Reposition the {m}: it belongs {r} the {a}.",
            "Can the {m} go {r} the {a}?",
            "Shift the {m} until it's {r} the {a}.",
        ],
        m=mref,
        r=REL_WORDS[rel],
        a=aref,
    )
    asst = pick(
        c.rng,
        ["Done: the {m} is now {r} the {a}.", "Moved. The {m} sits {r} the {a}."],
        m=mref,
        r=REL_WORDS[rel],
        a=aref,
    )
    azimuth = c.view.azimuth
    _plain_edit(c, op, user, asst)
    return mover, anchor, rel, len(c.turns) - 1, azimuth


def _push_it(c: Composer, mover: WorldObject, keep: tuple[WorldObject, str, float]) -> None:
    """Push the object mentioned before ("it") a little in a direction of the current view.

    ``keep`` (anchor, side, azimuth): the push leaves the object on that side of the anchor,
    so the later correction of that side is not already done.
    """
    assert c.view is not None
    scene = c.view.scene
    current = scene.by_id(mover.id)
    direction = c.rng.choice(["left", "right", "front", "behind"])
    azimuth = c.view.azimuth
    anchor, side, side_azimuth = keep

    def accept(xy: np.ndarray) -> np.ndarray:
        return side_mask(xy, current, direction, azimuth) & side_mask(xy, anchor, side, side_azimuth)

    cand = place(scene, current, c.rng, tries=600, accept=accept)
    if cand is None:
        raise Retry("cannot push there")
    op = {"op": "move", "where": minimal_where(current, scene, c.rng), "x": cand.x, "y": cand.y}
    _check_valid(c, op)
    latest = c.latest.scene
    others = [o for o in latest.ground_objects() if o.id != current.id]
    if not others:
        raise Retry("nothing to confuse")
    wrong = max(others, key=lambda o: (SIZES[o.size], o.id))
    stateless = {"op": "move", "where": minimal_where(wrong, latest, c.rng), "x": cand.x, "y": cand.y}
    words = {"left": "to the left", "right": "to the right", "front": "toward us", "behind": "further back"}[direction]
    user = pick(
        c.rng,
        [
            "From this side, push it a bit {w}.",
            "Now give it a push {w}, as seen from here.",
            "Give it a gentle shove {w}, from this viewpoint.",
            "Nudge it {w} as we see it now.",
            "From here, slide it {w}.",
        ],
        w=words,
    )
    asst = pick(
        c.rng, ["Pushed the {o} {w}.", "Here it is after the push: the {o} slid {w}."], o=current.shape, w=words
    )
    turn = c.target(user, op, stateless, asst, {COREF, SPATIAL}, alternatives={"no-coreference": stateless})
    c.notes["pronoun"] = (turn, phrase(full_where(current)), [phrase(full_where(o)) for o in others])


def _relation_correction(
    c: Composer, mover: WorldObject, anchor: WorldObject, rel: str, first_turn: int, first_azimuth: float
) -> None:
    """The user corrects the side asked for earlier: "the other way round"."""
    assert c.view is not None
    scene = c.view.scene
    current, anc = scene.by_id(mover.id), scene.by_id(anchor.id)
    want = OPPOSITE[rel]
    cand = place(scene, current, c.rng, tries=600, accept=lambda xy: side_mask(xy, anc, want, first_azimuth))
    if cand is None:
        raise Retry("no room on the other side")
    op = {"op": "move", "where": minimal_where(current, scene, c.rng), "x": cand.x, "y": cand.y}
    _check_valid(c, op)
    user = pick(
        c.rng,
        [
            "Wait, I got the direction wrong in my {nth} message: it should have been the other way round.",
            "Correction to my {nth} message: I meant the opposite side.",
            "Hmm, my {nth} message had the side backwards. Flip it.",
            "I mixed up the direction in my {nth} message; swap it to the opposite side.",
        ],
        nth=ordinal(first_turn + 1),
    )
    asst = pick(
        c.rng,
        ["Fixed: seen from where we started, the {m} is now {r} the {a}.", "Got it, the {m} goes {r} the {a} instead."],
        m=current.shape,
        r=REL_WORDS[want],
        a=anc.shape,
    )
    after = apply_op(op, c.view, c.images).scene
    wm = minimal_where(after.by_id(mover.id), after, c.rng)
    wa = minimal_where(after.by_id(anchor.id), after, c.rng)
    now = relation(after.by_id(mover.id), after.by_id(anchor.id), c.view.azimuth)
    part = now[0] if want in ("left", "right") else now[1]
    pred = {"op": "relation", "a": wm, "b": wa, "rel": part}
    text = f"The {phrase(wm)} is {REL_WORDS[part]} the {phrase(wa)} (as this view shows it)."
    turn = c.target(
        user,
        op,
        {"op": "none"},
        asst,
        {CORRECTION, RETRIEVAL, SPATIAL},
        alternatives={"no-corrections": {"op": "none"}},
        correction=[(text, pred)],
    )
    c.notes["correction"] = (turn, want)


def _viewpoint_checks(c: Composer, before: float, after: float) -> list[Check]:
    """A check that a relation reads differently from the new viewpoint than from the old one."""
    assert c.view is not None
    scene = c.view.scene
    for a_, b_ in pairs(scene):
        if a_.on is not None or b_.on is not None:
            continue
        old, new = relation(a_, b_, before), relation(a_, b_, after)
        for k in (0, 1):
            if old[k] != new[k]:
                wa, wb = minimal_where(a_, scene, c.rng), minimal_where(b_, scene, c.rng)
                return [
                    c.atomic(
                        f"From the new viewpoint, the {phrase(wa)} is {REL_WORDS[new[k]]} the {phrase(wb)}.",
                        {"op": "relation", "a": wa, "b": wb, "rel": new[k]},
                        CheckCategory.VIEWPOINT,
                    )
                ]
    return []


def _remove_support_from_start(c: Composer) -> None:
    """Remove a support (what it carried falls) and show the result from the starting view."""
    assert c.view is not None
    scene = c.view.scene
    top = next(o for o in scene.objects if o.on is not None)
    support = scene.by_id(top.on)  # type: ignore[arg-type]
    if any(full_where(support) == k.value for k in c.constraints):
        raise Retry("support protected")
    where = minimal_where(support, scene, c.rng)
    remove = {"op": "remove", "where": where}
    start = c.images[0].azimuth
    op = {"op": "batch", "ops": [remove, {"op": "orbit", "azimuth": start}]}
    _check_valid(c, op)
    stateless = remove  # read alone: the current camera, not the one we started from
    user = pick(
        c.rng,
        [
            "Last one: pull out the {s} and show me the result from where we first looked at the scene.",
            "Remove the {s}, then go back to the original viewpoint and show me what happened.",
            "Take away the {s}, and show the outcome from our very first viewpoint.",
            "What if the {s} disappeared? Show me from the angle of the original picture.",
        ],
        s=phrase(where),
    )
    asst = pick(
        c.rng,
        [
            "The {t} lost its support and dropped to the floor; this is the view we started from.",
            "Without the {s}, the {t} falls straight down. Shown from the first viewpoint.",
        ],
        t=top.shape,
        s=support.shape,
    )
    after = apply_op(op, c.view, c.images).scene
    wt = minimal_where(after.by_id(top.id), after, c.rng)
    focus = [
        c.atomic(f"The {phrase(wt)} rests on the ground.", {"op": "on_ground", "a": wt}, CheckCategory.SUPPORT),
        c.atomic(
            f"There is no {phrase(where)}.", {"op": "absent", "where": full_where(support)}, CheckCategory.ABSENCE
        ),
    ]
    c.target(user, op, stateless, asst, {SPATIAL, RETRIEVAL}, focus=focus)


def _world_questions(c: Composer, mover: WorldObject, anchor: WorldObject, rel: str, first_turn: int) -> None:
    last = len(c.turns) - 1
    turn, answer, others = c.notes["pronoun"]
    c.ask(
        QuestionType.RR,
        turn,
        f'In turn {turn + 1}, which object does the user mean by "it"?',
        f"the {answer}",
        [f"the {o}" for o in others] + ["the object furthest back", "a new object"],
    )
    m, a_ = phrase(full_where(mover)), phrase(full_where(anchor))
    c.ask(
        QuestionType.CR,
        last,
        f"In turn {first_turn + 1}, on which side of the {a_} did the user first ask for the {m}?",
        REL_WORDS[rel],
        [REL_WORDS[r] for r in ("left", "right", "front", "behind") if r != rel],
    )
    _ask_constraint_question(c)
    cturn, want = c.notes["correction"]
    c.ask(
        QuestionType.CU,
        last,
        f"After the correction in turn {cturn + 1}, where should the {m} be relative to the {a_}, as first seen?",
        REL_WORDS[want],
        [REL_WORDS[r] for r in ("left", "right", "front", "behind") if r != want],
        c.capability_checks.get(CORRECTION, []),
        alternatives={"no-corrections": REL_WORDS[rel]},
    )


def _orbit(c: Composer) -> None:
    """Walk around the scene: a viewpoint change relative to the current one."""
    assert c.view is not None
    turns = c.rng.choice([1, 2, 3])
    az = c.view.azimuth + 90 * turns
    op = {"op": "orbit", "azimuth": az}
    # Read alone, "the other side" of the latest image is ambiguous only after an earlier
    # orbit; the first one is judged on relations, which a copy of the latest image fails.
    stateless = {"op": "none"}
    words = {1: "a quarter turn to the right", 2: "to the opposite side", 3: "a quarter turn to the left"}[turns]
    user = pick(
        c.rng,
        [
            "Walk {w} around the scene and show me what it looks like from there.",
            "Show me the scene after moving the camera {w}.",
            "Let's change perspective: go {w} and show me.",
            "I want to see it after moving {w}.",
            "Move the camera {w} around the objects.",
        ],
        w=words,
    )
    asst = pick(
        c.rng, ["Here is the view after moving {w}.", "This is the scene seen from {w} of where we were."], w=words
    )
    c.target(user, op, stateless, asst, {SPATIAL}, focus=_viewpoint_checks(c, c.view.azimuth, az))


def reasoning(c: Composer) -> None:
    """A goal reached step by step by a plan, a hypothesis abandoned, and a plan correction."""
    style = c.rng.choice(list(STYLES))
    scene = random_scene(c.rng, c.rng.randint(4, 5), stack_chance=0.0)
    view = View(scene, VIEWS[0], style)
    _opening(
        c,
        view,
        pick(
            c.rng,
            [
                "Help me reach a goal with this scene, one step at a time.",
                "I want to work toward a tidier scene step by step.",
                "Let's plan a few steps on this scene together.",
            ],
        ),
    )
    _set_constraint(c)
    protected = [k.value for k in c.constraints if k.kind == "protect"]
    by_shape: dict[str, list[WorldObject]] = {}
    for o in scene.objects:
        if full_where(o) not in protected:
            by_shape.setdefault(o.shape, []).append(o)
    shape = max(sorted(by_shape), key=lambda k: len(by_shape[k]))
    plan = sorted(by_shape[shape], key=lambda o: (-SIZES[o.size], o.id))
    if len(plan) < 2:
        raise Retry("no plan of two steps")
    names = [phrase(minimal_where(o, scene, c.rng)) for o in plan]
    steps = "; ".join(f"step {k + 1}, remove the {n}" for k, n in enumerate(names))
    c.chat(
        pick(
            c.rng,
            [
                "The goal: no {shape}s left in the end, except what my rule protects. What's the plan?",
                "I'd like every {shape} gone eventually (keeping my rule in mind). How would you do it?",
                "Let's aim for a scene without {shape}s, my rule still applies. Plan it out?",
                "End state I want: all {shape}s removed, except any my rule protects. Steps?",
            ],
            shape=shape,
        ),
        pick(c.rng, ["Here's a plan, largest first: {steps}.", "I suggest: {steps}."], steps=steps),
        {CONSTRAINT, RETRIEVAL},
        {"op": "none", "plan": [full_where(o) for o in plan]},
    )
    _plan_step(c, plan[0], 1)
    checkpoint = len(c.images)
    _hypothesis(c, plan[1])
    _restore(c, checkpoint)
    _plan_step(c, plan[1], 2)
    _plan_correction(c, plan[0])
    last = len(c.turns) - 1
    turn, answer, others = c.notes["pronoun"]
    c.ask(
        QuestionType.RR,
        turn,
        f'In turn {turn + 1}, which object does "the one you\'d remove next" refer to?',
        f"the {answer}",
        [f"the {o}" for o in others] + ["the largest object in the scene"],
    )
    c.ask(
        QuestionType.CR,
        last,
        "Which object did the assistant's plan remove first?",
        f"the {phrase(full_where(plan[0]))}",
        [f"the {phrase(full_where(o))}" for o in scene.objects if o.id != plan[0].id],
    )
    _ask_constraint_question(c)
    cturn = c.notes["correction"][0]
    c.ask(
        QuestionType.CU,
        last,
        f"After the user's correction in turn {cturn + 1}, which object should be back in the scene?",
        f"the {phrase(full_where(plan[0]))}",
        [f"the {phrase(full_where(o))}" for o in plan[1:]] + ["none", "every removed object"],
        c.capability_checks.get(CORRECTION, []),
    )


def _plan_step(c: Composer, o: WorldObject, k: int) -> None:
    """Carry out step ``k`` of the plan the assistant proposed: read alone, it means nothing."""
    assert c.view is not None
    where = minimal_where(o, c.view.scene, c.rng)
    op = {"op": "remove", "where": where}
    _check_valid(c, op)
    user = pick(
        c.rng,
        [
            "Go ahead with step {k}.",
            "Do step {k} of your plan.",
            "Next: step {k}, please.",
            "Okay, step {k}.",
            "Carry on: step {k}.",
            "Let's do step {k} now.",
            "Time for step {k}.",
        ],
        k=k,
    )
    asst = pick(
        c.rng, ["Step {k} done: the {o} is gone.", "I removed the {o}, as planned for step {k}."], k=k, o=phrase(where)
    )
    focus = [
        c.atomic(
            f"There is no {phrase(full_where(o))}.", {"op": "absent", "where": full_where(o)}, CheckCategory.ABSENCE
        )
    ]
    c.target(user, op, {"op": "none"}, asst, {RETRIEVAL}, alternatives={"no-retrieval": {"op": "none"}}, focus=focus)


def _hypothesis(c: Composer, nxt: WorldObject) -> None:
    """A what-if about the object the plan removes next ("the one you'd remove next")."""
    assert c.view is not None
    scene = c.view.scene
    forbidden = {k.value for k in c.constraints if k.kind == "forbid_colour"}
    col = c.rng.choice([x for x in COLOURS if x not in forbidden and x != nxt.colour])
    where = minimal_where(nxt, scene, c.rng)
    op = {"op": "set", "where": where, "attr": "colour", "value": col}
    _check_valid(c, op)
    latest = c.latest.scene
    others = [o for o in latest.objects if o.id != nxt.id]
    wrong = max(others, key=lambda o: (SIZES[o.size], o.id))
    stateless = {"op": "set", "where": minimal_where(wrong, latest, c.rng), "attr": "colour", "value": col}
    user = pick(
        c.rng,
        [
            "Before step 2, a what-if: show me the one you'd remove next painted {col}.",
            "Just to compare: what would it look like if the one you'd remove next were {col}?",
            "Quick detour: how would the one you'd remove next look in {col}?",
            "Hypothetically, paint the one you'd remove next {col} and show me.",
        ],
        col=col,
    )
    asst = pick(
        c.rng,
        ["Here is that idea: the {o} in {col}.", "This is the scene with the {o} turned {col}."],
        o=phrase(where),
        col=col,
    )
    after = apply_op(op, c.view, c.images).scene
    w = full_where(after.by_id(nxt.id))
    focus = [c.atomic(f"There is {a(w)}.", {"op": "exists", "where": w}, CheckCategory.ATTRIBUTE)]
    turn = c.target(
        user, op, stateless, asst, {COREF, RETRIEVAL}, alternatives={"no-coreference": stateless}, focus=focus
    )
    c.notes["pronoun"] = (
        turn,
        phrase(full_where(nxt)),
        [phrase(full_where(o)) for o in scene.objects if o.id != nxt.id],
    )


def _plan_correction(c: Composer, first: WorldObject) -> None:
    """The user corrects the plan: the first removal was a mistake; the object comes back."""
    assert c.view is not None
    spec = {
        "shape": first.shape,
        "colour": first.colour,
        "size": first.size,
        "material": first.material,
        "x": first.x,
        "y": first.y,
    }
    op = {"op": "add", "object": spec}
    try:
        _check_valid(c, op)
    except Retry:
        x, y = _spot(c, first)
        spec.update(x=x, y=y)
        op = {"op": "add", "object": spec}
        _check_valid(c, op)
    user = pick(
        c.rng,
        [
            "I need to correct the plan: step 1 was a mistake. Bring back what it removed.",
            "Correction: the first removal shouldn't have happened. Put that object back.",
            "Plan correction: undo step 1 and return the object it took out.",
            "Step 1 was wrong after all. Please restore that object.",
        ],
    )
    asst = pick(
        c.rng,
        ["Restored the {o} from before step 1.", "The {o} is back, as it was before step 1."],
        o=phrase(full_where(first)),
    )
    w = full_where(first)
    turn = c.target(
        user,
        op,
        {"op": "none"},
        asst,
        {CORRECTION, RETRIEVAL},
        alternatives={"no-corrections": {"op": "none"}},
        correction=[(f"There is {a(w)} again.", {"op": "exists", "where": w})],
    )
    c.notes["correction"] = (turn,)


def _restore(c: Composer, image: int) -> None:
    """Abandon a hypothesis: back to the state shown in an earlier image."""
    op = {"op": "restore", "image": image}
    user = pick(
        c.rng,
        [
            "Hmm, that idea doesn't work. Go back to how the scene looked in picture {n} of our conversation.",
            "Let's drop that last step and return to the state of the {nth} image.",
            "Not convinced. Return to the scene exactly as in picture {n}.",
            "Let's discard that and restore the state from image {n}.",
        ],
        n=image,
        nth=ordinal(image),
    )
    asst = pick(c.rng, ["Back to the state of image {n}.", "Okay, this is the scene as it was in image {n}."], n=image)
    c.target(user, op, {"op": "none"}, asst, {RETRIEVAL}, alternatives={"no-retrieval": {"op": "none"}})
    # The abandoned change is gone; a later correction cannot take it back.
    c.notes.pop("revertible", None)


def fusion(c: Composer) -> None:
    """Sources in different styles, a decision about what to combine, then composites."""
    styles = c.rng.sample(list(STYLES), 4)
    n_sources = c.rng.choice([2, 2, 2, 3, 4])
    sources = [random_scene(c.rng, c.rng.randint(2, 3), stack_chance=0.0) for _ in range(n_sources)]
    for k, scene in enumerate(sources):
        view = View(scene, VIEWS[0], styles[k % len(styles)])
        names = listing([a(full_where(o)) for o in scene.objects])
        lead = pick(
            c.rng,
            [
                "I have a few pictures I want to combine.",
                "I'd like to merge several pictures into one.",
                "Let's build one scene out of a few of mine.",
                "I'm going to show you some pictures to mix together.",
                "Here's the first of my source pictures.",
            ]
            if k == 0
            else [
                "Here is picture number {n}.",
                "And this is picture {n}.",
                "Picture {n} coming up.",
                "Next, picture {n}.",
                "This one is number {n}.",
                "One more: picture {n}.",
            ],
            n=k + 1,
        )
        c.show(
            view, f"{lead} This one shows {names}." if c.rng.random() < 0.3 else lead, f"Picture {k + 1} has {names}."
        )
    # choose two objects from the first picture and one from another
    picks: list[tuple[int, WorldObject]] = []
    for k, scene in enumerate(sources[:3]):  # a fourth picture only serves later references
        take = c.rng.sample(list(scene.objects), 2 if k == 0 else 1)
        picks.extend((k, o) for o in take)
    forbid = [col for col in COLOURS if col not in {o.colour for _, o in picks}]
    col = c.rng.choice(forbid)
    k0 = c.constrain(
        "forbid_colour",
        col,
        pick(
            c.rng,
            [
                "For the combined scene, nothing may be {col}.",
                "Whatever we build from these, keep {col} out of it.",
                "One condition for the mix: no {col} at all.",
                "No matter what we combine, {col} is not allowed.",
            ],
            col=col,
        ),
        pick(c.rng, ["Understood, no {col} in any combination.", "Noted: {col} stays out."], col=col),
    )
    del k0
    items_desc = listing(
        [f"the {phrase(minimal_where(o, sources[k], c.rng))} from the {ordinal(k + 1)} picture" for k, o in picks]
    )
    c.chat(
        pick(
            c.rng,
            [
                "Which elements would you combine?",
                "What would make a nice combination?",
                "What would you take from each picture?",
                "Any suggestion for what to merge?",
                "Which objects should make it into the combined scene?",
            ],
        ),
        pick(
            c.rng,
            [
                "I would take {items}, on the floor of the {nth} picture.",
                "How about {items}, keeping the background of picture {n}?",
            ],
            items=items_desc,
            nth=ordinal(1),
            n=1,
        ),
        {RETRIEVAL},
    )
    # compose
    assert c.view is not None
    if len({(o.shape, o.colour, o.size, o.material) for _, o in picks}) != len(picks):
        raise Retry("two identical objects picked")
    for _layout in range(4):  # a greedy layout can paint itself into a corner: lay it out afresh
        scene = Scene()
        for i, (_, o) in enumerate(picks):
            placed = place(scene, o.model_copy(update={"id": i, "on": None}), c.rng)
            if placed is None:
                break
            scene = Scene.model_construct(objects=(*scene.objects, placed))
        else:
            break
    else:
        raise Retry("no room to compose")
    items = [
        {"image": k + 1, "where": minimal_where(o, sources[k], c.rng), "x": p.x, "y": p.y}
        for (k, o), p in zip(picks, scene.objects, strict=True)
    ]
    op = {"op": "compose", "items": items, "style": styles[0]}
    stateless = (
        {"op": "compose", "items": items[: len(items) - 1], "style": styles[0]} if len(items) > 1 else {"op": "none"}
    )
    c.view = View(c.view.scene, c.view.azimuth, styles[0])
    c.target(
        pick(
            c.rng,
            [
                "Sounds good, go ahead with that.",
                "Yes, let's do exactly that.",
                "Perfect, please make it.",
                "Agreed. Build that combination.",
                "That works for me, let's see it.",
            ],
        ),
        op,
        stateless,
        pick(c.rng, ["Here is the combination: {items}.", "Done, the new scene has {items}."], items=items_desc),
        {RETRIEVAL, COREF},
    )
    composite = len(c.images)
    first = next(o for o in c.view.scene.objects if o.colour != col)
    _violating_edit(c, first)
    _pronoun_edit(c, first)
    _fusion_retrieval(c, sources, col)
    _correction_revert(c)
    if c.rng.random() < 0.5:
        _back_to_composite(c, composite)
    _questions(c)


def _back_to_composite(c: Composer, image: int) -> None:
    """Return to the first composite, named by its place among the pictures."""
    op = {"op": "restore", "image": image}
    user = pick(
        c.rng,
        [
            "Actually, the first combination you made (picture {n}) was the best. Go back to it.",
            "I prefer your first composite, picture {n} in our chat. Let's return to exactly that.",
            "Compare with the first combined scene you made: I want that one back.",
            "Let's end on your original combination from picture {n}.",
        ],
        n=image,
    )
    asst = pick(
        c.rng,
        ["Back to the first combination.", "Here is the first composite again, exactly as it was."],
    )
    c.target(user, op, {"op": "none"}, asst, {RETRIEVAL, COREF}, alternatives={"no-retrieval": {"op": "none"}})


def _fusion_retrieval(c: Composer, sources: list[Scene], forbidden: str) -> None:
    """Bring in another object from a source picture by naming the picture."""
    assert c.view is not None
    options = [
        (k, o)
        for k, s in enumerate(sources)
        for o in s.objects
        if o.colour != forbidden and not select(c.view.scene, full_where(o))
    ]
    if not options:
        raise Retry("nothing left to bring in")
    scene, new_id = c.view.scene, c.view.scene.next_id()
    tried = (
        (k, o, place(scene, o.model_copy(update={"id": new_id, "on": None}), c.rng, tries=600))
        for k, o in c.rng.sample(options, min(3, len(options)))
    )
    found = next(((k, o, p) for k, o, p in tried if p is not None), None)  # the first that fits
    if found is None:
        raise Retry("no room")
    k, o, placed = found
    x, y = placed.x, placed.y
    spec = {"shape": o.shape, "colour": o.colour, "size": o.size, "material": o.material, "x": x, "y": y}
    op = {"op": "add", "object": spec}
    wrong = c.rng.choice(_colours_except(o.colour, forbidden))
    stateless = {"op": "add", "object": {**spec, "colour": wrong}}
    _check_valid(c, op)
    user = pick(
        c.rng,
        [
            "Also bring in the {shape} from picture {n}.",
            "Add the {shape} from my {nth} picture too.",
            "And add the {shape} from picture {n} as well.",
            "I'd like the {shape} from picture {n} in there too.",
        ],
        shape=phrase(minimal_where(o, sources[k], c.rng)),
        n=k + 1,
        nth=ordinal(k + 1),
    )
    asst = pick(
        c.rng,
        ["Added the {d} from picture {n}.", "Here it is with the {d} from picture {n}."],
        d=phrase(full_where(o)),
        n=k + 1,
    )
    w = full_where(o)
    focus = [c.atomic(f"There is a {phrase(w)}.", {"op": "exists", "where": w}, CheckCategory.EXISTENCE)]
    turn = c.target(
        user, op, stateless, asst, {RETRIEVAL, COREF}, alternatives={"no-retrieval": stateless}, focus=focus
    )
    c.notes["added"] = (turn, o.id, phrase(w))
    c.notes["retrieved"] = (turn, f"{o.shape} from picture {k + 1}", o.colour, wrong)


SCRIPTS: dict[Scenario, Callable[[Composer], None]] = {
    Scenario.FUSION: fusion,
    Scenario.EDITING: editing,
    Scenario.WORLD_MODELING: world_modeling,
    Scenario.REASONING: reasoning,
}


def compose_dialogue(scenario: Scenario, dialogue_id: str, seed: int) -> tuple[Any, dict[str, bytes]]:
    """Build one dialogue of a scenario from a seed; returns it with its images' bytes."""
    for attempt in range(50):
        rng = random.Random(f"{seed}:{dialogue_id}:{attempt}")
        c = Composer(scenario, rng, dialogue_id, seed)
        try:
            SCRIPTS[scenario](c)
        except (Retry, Reducible, NoRoom):
            continue
        d = c.dialogue({"scenario": scenario.value, "attempt": attempt})
        used = {p.sha256 for p in d.images()}
        return d, {k: v for k, v in c.image_bytes.items() if k in used}
    raise RuntimeError(f"could not build {dialogue_id}; this is a bug in the world's scripts")
