"""Image Editing: progressive edits of one picture that must keep everything not mentioned."""

from __future__ import annotations

from yanami.contract import Check, CheckCategory
from yanami.world._compose import Composer
from yanami.world._language import REL_WORDS, full_where, minimal_where, ordinal, phrase, pick
from yanami.world._ops import Op
from yanami.world._place import free_positions, side_mask
from yanami.world._scenarios._moves import corrections, edit_questions, pronoun_edit, violating_edit
from yanami.world._scenarios._skeleton import (
    COREF,
    RETRIEVAL,
    Ask,
    Retry,
    checked,
    colours_for,
    decoy,
    distinct,
    listed_ref,
    live,
    meant_options,
    move,
    plain_edit,
    room_for,
    spot,
    start,
)
from yanami.world._scene import SHAPES, Scene, WorldObject, random_object, relation


def compose(c: Composer) -> None:
    """A start picture and a constraint; a first edit, an edit of "it", an object added in a
    colour from the history, a correction; then "the object you added" moved or swapped, or
    a request against the protected object."""
    scene = start(
        c,
        (4, 5),
        0.15,
        [
            "I want to edit this picture step by step.",
            "Let's rework this scene together.",
            "Time for some careful edits.",
            "Let's make a series of small changes.",
        ],
    )
    # The edits before `retrieval_add` only recolour, so whether a small object still fits in
    # is known now: a scene without room is dropped before any turn is worked out.
    if not room_for(c, scene):
        raise Retry("no room to add")
    allowed = [o for o in scene.objects if full_where(o) != c.constraints[0].value]
    # the RR question names it without its colour, so that must tell it apart (`meant_options`)
    changed = c.rng.choice(distinct(allowed, list(scene.objects)) or allowed)
    ref = listed_ref(c, changed.id)
    first_step(c, changed, ref)
    turn = len(c.turns) - 1
    # not the protected object either: it is the CT question's answer, which `changed` never is
    rest = [o for o in c.images[0].scene.objects if o.id != changed.id]
    kept = [o for o in rest if full_where(o) != c.constraints[0].value]
    answer, others = meant_options(c, changed, kept, [o for o in rest if o not in kept])
    rr = Ask(f'In turn {turn + 1}, which object does the user mean by "{ref}"?', answer, others, turn=turn)
    pronoun_edit(c, changed, avoid=changed.colour)  # `retrieval_add` asks for the colour it had at first
    retrieval_add(c, changed)
    corrections(c)
    if c.constraints[0].kind == "protect":
        violating_edit(c, changed)
    elif c.rng.random() < 0.6:
        swap_added(c) if c.rng.random() < 0.4 else reference_by_turn(c)
    edit_questions(c, rr)


def first_step(c: Composer, o: WorldObject, ref: str) -> None:
    """Recolour ``o`` (named by ``ref``): against the forbidden colour if there is one (the
    assistant adjusts), else as a plain edit (shown, not judged)."""
    if c.constraints[0].kind == "forbid_colour":
        violating_edit(c, o, ref, second_choice=True)  # the CU question asks for the substitute
        return
    assert c.view is not None
    col = c.rng.choice(colours_for(c, o.colour))
    where = minimal_where(o, c.view.scene, c.rng)
    op = checked(c, {"op": "set", "where": where, "attr": "colour", "value": col})
    user = pick(
        c.rng, ["Make {ref} {col}.", "Could you paint {ref} {col}?", "Let's try {ref} in {col}."], ref=ref, col=col
    )
    if c.rng.random() < 0.5:  # the user weighs an alternative and drops it
        other = c.rng.choice(colours_for(c, col, o.colour))
        user += pick(c.rng, [" I thought about {x}, but {col} is better.", " Not {x}: {col}."], x=other, col=col)
    replies = ["Done, it is {col} now.", "Here it is in {col}."]
    if c.rng.random() < 0.5:  # the reply names the old colour half the time
        replies = ["Done, it is {col} now instead of {old}.", "Here it is in {col}; it was {old} before."]
    # a later correction may go back to before this edit (the turn and picture it is made after)
    c.notes["first_edit"] = (len(c.turns), o.id, o.colour, len(c.images))
    plain_edit(c, op, user, pick(c.rng, replies, col=col, old=o.colour))


def retrieval_add(c: Composer, source: WorldObject) -> None:
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
    # never the source's shape: its material is the model's to choose under Self-History, and a
    # correction may give the source its first colour back, so the two could come out the same
    shape = c.rng.choice([x for x in SHAPES if x != source.shape])
    new = random_object(c.rng, scene.next_id(), colour=original.colour, size="small", shape=shape)
    x, y = spot(c, new)
    spec = {"shape": new.shape, "colour": new.colour, "size": new.size, "material": new.material, "x": x, "y": y}
    stateless: Op = {"op": "add", "object": {**spec, "colour": current.colour}}
    op = checked(c, {"op": "add", "object": spec})
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
    # The reply does not name the colour: the CR question asks for it.
    asst = pick(
        c.rng,
        [
            "Added a small {shape} in the colour {ref} had at the start.",
            "Here it is, a small {shape} in that original colour.",
        ],
        shape=new.shape,
        ref=ref,
    )
    w = {"shape": new.shape, "colour": new.colour, "size": "small"}

    def added(_: Scene) -> list[Check]:
        text = f"There is a small {new.colour} {new.shape}."
        return [c.atomic(text, {"op": "exists", "where": w}, CheckCategory.EXISTENCE)]

    # The words fix the shape, the size and the colour; the material and the spot are open.
    free = [{"slot": "material", "choices": ["matte", "metal"]}, {"slot": "position", "accept": []}]
    turn = move(c, user, op, asst, {RETRIEVAL}, stateless=stateless, lacking=RETRIEVAL, focus=added, free=free)
    c.notes["added"] = (turn, new.id)


def reference_by_turn(c: Composer) -> None:
    """Move "the object we added" next to another one."""
    assert c.view is not None
    turn, oid = c.notes["added"]
    added = live(c, oid, "added object gone")
    scene = c.view.scene
    anchors = [o for o in scene.ground_objects() if o.id != oid]
    if not anchors:
        raise Retry("no anchor")
    # One pool of free spots serves every anchor and side, tried in a random order.
    free = free_positions(scene, added, c.rng, 600)  # its own spot aside: `free_positions` leaves it out
    found = next(
        (
            (anchor, rel, there[0])
            for anchor in c.rng.sample(anchors, len(anchors))
            for rel in c.rng.sample(["left", "right", "front", "behind"], 4)
            if len(there := free[side_mask(free, anchor, rel, c.view.azimuth)])
        ),
        None,
    )
    if found is None:
        raise Retry("no room")
    anchor, rel, there = found
    x, y = float(there[0]), float(there[1])
    op = checked(c, {"op": "move", "where": minimal_where(added, scene, c.rng), "x": x, "y": y})
    latest = c.latest.scene
    wrong = decoy([o for o in latest.objects if o.id not in (oid, anchor.id) and o.on is None], c)
    stateless: Op = {"op": "move", "where": minimal_where(wrong, latest, c.rng), "x": x, "y": y}
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
        ["Moved it {rel} {anchor}.", "Done, it is now {rel} {anchor}."],
        rel=REL_WORDS[rel],
        anchor=aref,
    )
    move(
        c,
        user,
        op,
        asst,
        {COREF, RETRIEVAL},
        stateless=stateless,
        lacking=COREF,
        focus=lambda after: [relation_check(c, after, oid, anchor.id, rel)],
        free=[{"slot": "position", "accept": [{"side": rel, "of": full_where(anchor), "azimuth": c.view.azimuth}]}],
    )


def swap_added(c: Composer) -> None:
    """Swap "the object you added" with another ground object."""
    assert c.view is not None
    turn, oid = c.notes["added"]
    scene = c.view.scene
    added = next((o for o in scene.objects if o.id == oid), None)
    others = [o for o in scene.ground_objects() if o.id != oid and scene.supported_by(o.id) is None]
    if added is None or added.on is not None or not others:
        raise Retry("nothing to swap")
    other = c.rng.choice(others)
    op = checked(c, {"op": "swap", "a": minimal_where(added, scene, c.rng), "b": minimal_where(other, scene, c.rng)})
    latest = c.latest.scene
    wrong = decoy(
        [o for o in latest.ground_objects() if o.id not in (oid, other.id) and latest.supported_by(o.id) is None], c
    )
    stateless: Op = {"op": "swap", "a": minimal_where(wrong, latest, c.rng), "b": minimal_where(other, latest, c.rng)}
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
    asst = pick(c.rng, ["Swapped them.", "They have traded places: the one we added and {o}."], o=oref)
    azimuth = c.view.azimuth

    def swapped(after: Scene) -> list[Check]:
        rel = c.rng.choice(relation(after.by_id(oid), after.by_id(other.id), azimuth))
        return [relation_check(c, after, oid, other.id, rel)]

    move(c, user, op, asst, {COREF, RETRIEVAL}, stateless=stateless, lacking=COREF, focus=swapped)


def relation_check(c: Composer, scene: Scene, a_id: int, b_id: int, rel: str) -> Check:
    """An atomic check that object ``a_id`` is ``rel`` of ``b_id`` in ``scene``."""
    wa, wb = minimal_where(scene.by_id(a_id), scene, c.rng), minimal_where(scene.by_id(b_id), scene, c.rng)
    return c.atomic(
        f"The {phrase(wa)} is {REL_WORDS[rel]} the {phrase(wb)}.",
        {"op": "relation", "a": wa, "b": wb, "rel": rel},
        CheckCategory.RELATION,
    )
