"""World Modeling: actions with physical consequences, a walk around the scene, and a corrected relation."""

from __future__ import annotations

from yanami.contract import Check, CheckCategory
from yanami.world._compose import Composer
from yanami.world._free import PUSH_LEAST, accept_rule
from yanami.world._language import REL_WORDS, full_where, minimal_where, ordinal, phrase, pick
from yanami.world._ops import Op
from yanami.world._place import free_positions, place, side_mask
from yanami.world._predicates import map_relation, select
from yanami.world._scenarios._moves import violating_edit
from yanami.world._scenarios._skeleton import (
    COREF,
    CORRECTION,
    RETRIEVAL,
    SPATIAL,
    Ask,
    Retry,
    ask_dsu,
    checked,
    decoy,
    distinct,
    first_allowed,
    first_picture,
    first_picture_extreme,
    listed_ref,
    meant_options,
    move,
    plain_edit,
    start,
)
from yanami.world._scene import MARGIN, Scene, WorldObject, pairs, relation

OPPOSITE = {"left": "right", "right": "left", "front": "behind", "behind": "front"}
ORBIT_WORDS = {
    1: [
        "a quarter of the way around the table, clockwise as seen from above",
        "a quarter turn around the objects, walking to our left (clockwise seen from above)",
        "a quarter of the way around, so that the side now on our left faces us",
    ],
    2: [
        "halfway around the table, to the opposite side",
        "around to the far side of the table, so that we look from the opposite side",
    ],
    3: [
        "a quarter of the way around the table, counter-clockwise as seen from above",
        "a quarter turn around the objects, walking to our right (counter-clockwise seen from above)",
        "a quarter of the way around, so that the side now on our right faces us",
    ],
}
"""How a walk of 1, 2 or 3 quarter turns (azimuth +90 each) is put: one reading only."""
ORBIT_SHORT = {
    1: "a quarter turn clockwise seen from above",
    2: "on the opposite side",
    3: "a quarter turn counter-clockwise seen from above",
}
MOVE_TOLERANCE = 0.1
"""How far a push check lets a parsed position err, in world units (well above the parser's error)."""
PUSH_WORDS = {"left": "to the left", "right": "to the right", "front": "toward us", "behind": "further back"}
PUSH_CHECK_WORDS = {
    "left": "to the left",
    "right": "to the right",
    "front": "toward the viewer",
    "behind": "away from the viewer",
}


def compose(c: Composer) -> None:
    """A start picture, often with a stack, and a constraint; "put A in front of B" (shown); a
    walk around the scene; "push it"; the side corrected; then a support removed, "it"
    stacked, or a request against the constraint."""
    start(
        c,
        (4, 5),
        0.5,
        [
            "Let's play out what happens to this scene.",
            "I want to simulate a few changes here.",
            "Let's see how this scene reacts to a few actions.",
            "I'd like to explore some physical changes here.",
        ],
    )
    mover, anchor, rel, first_turn, first_azimuth = relation_move(c)
    orbit(c)
    push_it(c, mover, (anchor, rel, first_azimuth))
    relation_correction(c, mover, anchor, rel, first_turn, first_azimuth)
    assert c.view is not None
    if any(o.on is not None for o in c.view.scene.objects):
        remove_support_from_start(c)
    elif can_stack_it(c, mover):
        stack_it(c, mover)
    elif c.constraints[0].kind == "forbid_colour":
        violating_edit(c, c.rng.choice([o for o in c.view.scene.objects if o.id != mover.id]))
    else:
        violating_edit(c, mover)
    world_questions(c, mover, anchor, rel, first_turn)


def relation_move(c: Composer) -> tuple[WorldObject, WorldObject, str, int, float]:
    """A plain move that puts one object on a given side of another (shown, not judged)."""
    assert c.view is not None
    scene = c.view.scene
    protected = [k.value for k in c.constraints if k.kind == "protect"]
    movers = [o for o in scene.ground_objects() if scene.supported_by(o.id) is None and full_where(o) not in protected]
    if len(scene.ground_objects()) < 2 or not movers:
        raise Retry("nothing to move")
    # A mover, an anchor and a side with room, whose opposite side has room too (the user
    # will correct the side later). One pool of free positions per mover serves every anchor
    # and side; the movers are tried in turn, so a crowded corner does not cost the dialogue.
    found = None
    for mover in c.rng.sample(movers, len(movers)):
        free = free_positions(scene, mover, c.rng, 192)
        for anchor in c.rng.sample(
            [o for o in scene.ground_objects() if o.id != mover.id], len(scene.ground_objects()) - 1
        ):
            for rel in c.rng.sample(["front", "behind", "left", "right"], 4):
                there = free[side_mask(free, anchor, rel, c.view.azimuth)]
                if len(there) and side_mask(free, anchor, OPPOSITE[rel], c.view.azimuth).any():
                    found = (mover, anchor, rel, float(there[0, 0]), float(there[0, 1]))
                    break
            if found:
                break
        if found:
            break
    if found is None:
        raise Retry("no room on either side")
    mover, anchor, rel, x, y = found
    op = checked(c, {"op": "move", "where": minimal_where(mover, scene, c.rng), "x": x, "y": y})
    # Both are named by their places in the listing (the RR question asks which one a place
    # means), and the mover is never named by its attributes before the correction (the CU
    # question asks which object it moved).
    mref = listed_ref(c, mover.id)
    aref = listed_ref(c, anchor.id).replace(" object ", " one ").replace(" thing ", " one ")
    user = pick(
        c.rng,
        [
            "Move {m} so that it is {r} {a}.",
            "Put {m} {r} {a}.",
            "Reposition {m}: it belongs {r} {a}.",
            "Can {m} go {r} {a}?",
            "Shift {m} until it's {r} {a}.",
        ],
        m=mref,
        r=REL_WORDS[rel],
        a=aref,
    )
    c.notes["listed_refs"] = [(mref, mover), (aref, anchor)]
    asst = pick(c.rng, ["Done: it is now where you wanted it.", "Moved, as you asked."])
    azimuth = c.view.azimuth
    slots = [{"slot": "position", "accept": [{"side": rel, "of": full_where(anchor), "azimuth": c.view.azimuth}]}]
    plain_edit(c, op, user, asst, slots)
    return mover, anchor, rel, len(c.turns) - 1, azimuth


def orbit(c: Composer) -> None:
    """Walk around the scene: a viewpoint change relative to the current one."""
    assert c.view is not None
    turns = c.rng.choice([1, 2, 3])
    before = c.view.azimuth
    az = before + 90 * turns
    # The first orbit is judged on relations, which a copy of the latest image fails (the
    # stateless reading: nothing changes). The words name the way round so that no one can
    # read them two ways: a positive azimuth turns the camera clockwise seen from above,
    # which carries it to its own left (see `yanami.world._camera`).
    words = pick(c.rng, ORBIT_WORDS[turns])
    user = pick(
        c.rng,
        [
            "Walk {w}, and show me what it looks like from there.",
            "Show me the scene after moving the camera {w}.",
            "Let's change perspective: go {w}, and show me.",
            "I want to see it after moving {w}.",
            "Move the camera {w}.",
        ],
        w=words[0].lower() + words[1:],
    )
    asst = pick(
        c.rng,
        ["Here is the view after moving {w}.", "This is the scene from the new spot, {short}."],
        w=words[0].lower() + words[1:],
        short=ORBIT_SHORT[turns],
    )
    move(c, user, {"op": "orbit", "azimuth": az}, asst, {SPATIAL}, focus=lambda _: viewpoint_checks(c, before, az))


def viewpoint_checks(c: Composer, before: float, after: float) -> list[Check]:
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


def push_it(c: Composer, mover: WorldObject, keep: tuple[WorldObject, str, float]) -> None:
    """Push the object mentioned before ("it") a little in a direction of the current view.

    ``keep`` (anchor, side, azimuth): the push leaves the object on that side of the anchor,
    so the later correction of that side is not already done.
    """
    assert c.view is not None
    scene = c.view.scene
    current = scene.by_id(mover.id)
    azimuth = c.view.azimuth
    anchor, side, side_azimuth = keep

    start = [current.x, current.y]
    # The world's own push goes clearly that way (so its image passes the check through the
    # parser's error); any push of at least `PUSH_LEAST`, more that way than sideways, is
    # admissible. It also keeps the side of the anchor, so the later correction changes it.
    # One pool of free spots serves every direction, tried in a random order: the first with
    # room is the push.
    spots = free_positions(scene, current, c.rng, 600)
    kept = side_mask(spots, anchor, side, side_azimuth)
    found = None
    for direction in c.rng.sample(["left", "right", "front", "behind"], 4):
        rule = {"push": direction, "from": start, "azimuth": azimuth, "least": 0.75, "ratio": 0.5}
        own = accept_rule([rule], scene)
        assert own is not None
        ok = own(spots) & kept
        if ok.any():
            found = direction, spots[int(ok.argmax())]
            break
    if found is None:
        raise Retry("cannot push there")
    direction, there = found
    x, y = float(there[0]), float(there[1])
    op = checked(c, {"op": "move", "where": minimal_where(current, scene, c.rng), "x": x, "y": y})
    latest = c.latest.scene
    others = [o for o in latest.ground_objects() if o.id != current.id]
    wrong = decoy(others)
    stateless: Op = {"op": "move", "where": minimal_where(wrong, latest, c.rng), "x": x, "y": y}
    words = PUSH_WORDS[direction]
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
    asst = pick(c.rng, ["Pushed it {w}.", "Here it is after the push: it slid {w}."], w=words)

    def pushed(after: Scene) -> list[Check]:
        w = minimal_where(after.by_id(current.id), after, c.rng)
        return [
            c.atomic(
                f"Seen from this viewpoint, the {phrase(w)} has moved {PUSH_CHECK_WORDS[direction]},"
                " more that way than sideways.",
                {
                    "op": "moved",
                    "where": w,
                    "from": start,
                    "direction": direction,
                    "margin": MARGIN,
                    "tolerance": MOVE_TOLERANCE,
                },
                CheckCategory.RELATION,
            )
        ]

    rule = {"push": direction, "from": start, "azimuth": azimuth, "least": PUSH_LEAST}
    free = [{"slot": "position", "accept": [rule]}]
    turn = move(c, user, op, asst, {COREF, SPATIAL}, stateless=stateless, lacking=COREF, focus=pushed, free=free)
    c.notes["pronoun"] = (turn, phrase(full_where(current)), [phrase(full_where(o)) for o in others])


def relation_correction(
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
    op = checked(c, {"op": "move", "where": minimal_where(current, scene, c.rng), "x": cand.x, "y": cand.y})
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
        ["Fixed: seen from where we started, it is now {r} the {a}.", "Got it, it goes {r} the {a} instead."],
        r=REL_WORDS[want],
        a=phrase(minimal_where(anc, scene, c.rng)),
    )
    azimuth = c.view.azimuth

    # The side corrected is the one first asked for, in the first view; judged in this view,
    # it may lie along the other axis (after a quarter orbit). The other axis is left open.
    part = map_relation(want, first_azimuth, azimuth)

    def corrected(after: Scene) -> list[tuple[str, Op]]:
        wm = minimal_where(after.by_id(mover.id), after, c.rng)
        wa = minimal_where(after.by_id(anchor.id), after, c.rng)
        text = f"The {phrase(wm)} is {REL_WORDS[part]} the {phrase(wa)} (as this view shows it)."
        return [(text, {"op": "relation", "a": wm, "b": wa, "rel": part})]

    def changed_side(after: Scene) -> list[Check]:
        wm = minimal_where(after.by_id(mover.id), after, c.rng)
        wa = minimal_where(after.by_id(anchor.id), after, c.rng)
        text = f"Seen from here, the {phrase(wm)} is now {REL_WORDS[part]} the {phrase(wa)}."
        return [c.atomic(text, {"op": "relation", "a": wm, "b": wa, "rel": part}, CheckCategory.RELATION)]

    free = [{"slot": "position", "accept": [{"side": want, "of": full_where(anc), "azimuth": first_azimuth}]}]
    turn = move(
        c,
        user,
        op,
        asst,
        {CORRECTION, RETRIEVAL, SPATIAL},
        lacking=CORRECTION,
        focus=changed_side,
        correction=corrected,
        free=free,
    )
    c.notes["correction"] = (turn, want, c.view.scene)


def remove_support_from_start(c: Composer) -> None:
    """Remove a support (what it carried falls) and show the result from the starting view."""
    assert c.view is not None
    scene = c.view.scene
    top, below = next((o, o.on) for o in scene.objects if o.on is not None)
    support = scene.by_id(below)
    if any(full_where(support) == k.value for k in c.constraints):
        raise Retry("support protected")
    where = minimal_where(support, scene, c.rng)
    remove = {"op": "remove", "where": where}
    op = checked(c, {"op": "batch", "ops": [remove, {"op": "orbit", "azimuth": c.images[0].azimuth}]})
    user = pick(
        c.rng,
        [
            "Last one: pull out {s} and show me the result from where we first looked at the scene.",
            "Remove {s}, then go back to the original viewpoint and show me what happened.",
            "Take away {s}, and show the outcome from our very first viewpoint.",
            "What if {s} disappeared? Show me from the angle of the original picture.",
        ],
        s=listed_ref(c, support.id),
    )
    asst = pick(
        c.rng,
        [
            "What it carried lost its support and dropped to the floor; this is the view we started from.",
            "Without it, the object on top falls straight down. Shown from the first viewpoint.",
        ],
    )

    def fallen(after: Scene) -> list[Check]:
        wt = minimal_where(after.by_id(top.id), after, c.rng)
        return [
            c.atomic(f"The {phrase(wt)} rests on the ground.", {"op": "on_ground", "a": wt}, CheckCategory.SUPPORT),
            c.atomic(
                f"There is no {phrase(where)}.", {"op": "absent", "where": full_where(support)}, CheckCategory.ABSENCE
            ),
        ]

    # Read alone: the removal seen from the current camera, not the one we started from.
    move(c, user, op, asst, {SPATIAL, RETRIEVAL}, stateless=remove, focus=fallen)


def can_stack_it(c: Composer, mover: WorldObject) -> bool:
    """Whether "it" (small, carrying nothing) has a support to go on."""
    assert c.view is not None
    scene = c.view.scene
    current = scene.by_id(mover.id)
    return current.size == "small" and scene.supported_by(current.id) is None and bool(supports(scene, current))


def supports(scene: Scene, top: WorldObject) -> list[WorldObject]:
    """The large cubes and cylinders, free and of another colour, that ``top`` could rest on."""
    return [
        o
        for o in scene.ground_objects()
        if o.id != top.id
        and o.shape != "sphere"
        and o.size == "large"
        and o.colour != top.colour
        and scene.supported_by(o.id) is None
    ]


def stack_it(c: Composer, mover: WorldObject) -> None:
    """Put "it" (the object pushed earlier) on top of a large cube or cylinder."""
    assert c.view is not None
    scene = c.view.scene
    current = scene.by_id(mover.id)
    candidates = supports(scene, current)
    op = first_allowed(
        c,
        (
            {"op": "stack", "where": minimal_where(current, scene, c.rng), "on": minimal_where(s, scene, c.rng)}
            for s in c.rng.sample(candidates, len(candidates))
        ),
        "nowhere to stack",
    )
    support = select(scene, op["on"])[0]
    latest = c.latest.scene
    wrong = decoy(
        [o for o in latest.objects if o.id not in (current.id, support.id) and o.size == "small" and o.on is None], c
    )
    stateless: Op = {"op": "stack", "where": minimal_where(wrong, latest, c.rng), "on": op["on"]}
    sref = "the " + phrase(minimal_where(support, scene, c.rng))
    user = pick(
        c.rng,
        ["Now lift it onto {s}.", "Put it on top of {s}.", "Stack it on {s}, please.", "Can it sit on top of {s}?"],
        s=sref,
    )
    asst = pick(c.rng, ["It now rests on {s}.", "Done: it sits on top of {s}."], s=sref)

    def stacked(after: Scene) -> list[Check]:
        wt = minimal_where(after.by_id(current.id), after, c.rng)
        ws = minimal_where(after.by_id(support.id), after, c.rng)
        text = f"The {phrase(wt)} rests on top of the {phrase(ws)}."
        return [c.atomic(text, {"op": "on", "a": wt, "b": ws}, CheckCategory.SUPPORT)]

    move(c, user, op, asst, {COREF, SPATIAL}, stateless=stateless, lacking=COREF, focus=stacked)


def world_questions(c: Composer, mover: WorldObject, anchor: WorldObject, rel: str, first_turn: int) -> None:
    """Which object a place in the listing meant, which object stood out in the first picture,
    the constraint, and which object the correction moved."""
    cturn, _, _ = c.notes["correction"]
    # the RR question names it without its colour, so that must tell it apart (`meant_options`)
    first = list(c.images[0].scene.objects)
    refs = c.notes["listed_refs"]
    ref, meant = c.rng.choice([(r, o) for r, o in refs if distinct([o], first)] or refs)
    # not an object resting on another either: the move's objects stand on the ground
    ground = [o for o in first if o.id != meant.id and o.on is None]
    answer, others = meant_options(c, meant, ground, [o for o in first if o.on is not None])
    ask_dsu(
        c,
        Ask(f'In turn {first_turn + 1}, which object does the user mean by "{ref}"?', answer, others, turn=first_turn),
        first_picture_extreme(c),
        Ask(
            f"Which object did the correction in turn {cturn + 1} move?",
            f"the {phrase(full_where(mover))}",
            first_picture(c),
            turn=cturn,
        ),
    )
