"""Moves that more than one scenario makes, and the questions fusion and editing share."""

from __future__ import annotations

from yanami.contract import Check, CheckCategory
from yanami.world._compose import Composer
from yanami.world._language import a, full_where, minimal_where, ordinal, phrase, pick
from yanami.world._ops import Op
from yanami.world._predicates import select
from yanami.world._scenarios._skeleton import (
    COLOUR_THINGS,
    CONSTRAINT,
    COREF,
    CORRECTION,
    RETRIEVAL,
    Ask,
    Retry,
    ask_dsu,
    checked,
    colours_for,
    decoy,
    first_allowed,
    first_picture_extreme,
    listed_ref,
    live,
    move,
)
from yanami.world._scene import Scene, WorldObject


def violating_edit(c: Composer, target: WorldObject, ref: str | None = None, second_choice: bool = False) -> None:
    """A request that would break the constraint; the assistant adjusts or declines. ``ref``:
    how the user names ``target`` (default: by its attributes). ``second_choice``: the user
    always names a colour for the case the first is not possible (else half the time); where a
    later question asks for the substitute, it must be the words' and not a free choice, or
    a model's own pick under Self-History would contradict what the dialogue says."""
    assert c.view is not None
    k = c.constraints[0]
    scene = c.view.scene
    ref = ref or "the " + phrase(minimal_where(target, scene, c.rng))
    if k.kind == "forbid_colour":
        forbidden = k.value
        if target.colour == forbidden:
            raise Retry("target already forbidden colour")
        substitutes = colours_for(c, forbidden, target.colour)
        alt = c.rng.choice(substitutes)
        where = minimal_where(target, scene, c.rng)
        op = checked(c, {"op": "set", "where": where, "attr": "colour", "value": alt})
        literal = {"op": "set", "where": where, "attr": "colour", "value": forbidden}
        # Half the time the user names a second choice (the substitute is then theirs, not open).
        # The request names the colour as the rule did, through a thing of that colour: after the
        # acknowledgement no message names the banned colour (see `reserve_colours`).
        fallback = c.rng.random() < 0.5 or second_choice
        said = "the colour of " + c.rng.choice(COLOUR_THINGS[forbidden])
        user = pick(
            c.rng,
            [
                "Make {ref} {col}.",
                "Could you paint {ref} {col}?",
                "Let's try {ref} in {col}.",
                "I want {ref} to be {col} now.",
                "Switch {ref} over to {col}.",
                "{ref} would look better in {col}; change it.",
                "No more waiting: make {ref} {col}.",
                "Don't be shy with colour: make {ref} {col}.",
            ],
            ref=ref,
            col=said,
        )
        if fallback:  # in a frame drawn at random: negated or not, like the other colours the user names
            user += pick(
                c.rng,
                [
                    " If that's not possible, {alt}.",
                    " Or {alt}, if that won't work.",
                    " Otherwise, {alt}.",
                    " {Alt} would be my second choice.",
                ],
                alt=alt,
                Alt=alt.capitalize(),
            )
        if c.rng.random() < 0.5:  # the request is not always the message's first sentence
            user = pick(c.rng, ["Next change. ", "Here's another idea. ", "Something new now. "]) + user
        # The reply names the substitute, never the ruled-out colour (no message does), and colours
        # it could have used as well: the substitute is one colour among several it names.
        rest = [x for x in substitutes if x != alt]
        also = c.rng.sample(rest, 2)
        asst = pick(
            c.rng,
            [
                "That colour is ruled out by your rule, so I went with your second choice; {x} would have worked too.",
                "I can't use that colour: it was your rule from the start. So I used your other colour, not {x}.",
            ]
            if fallback
            else [
                "That colour is ruled out by your rule, so I painted it {alt}; {x} or {y} would have done too.",
                "I can't use that colour: it was your rule from the start. "
                "{X} or {y} would do, but here it is in {alt}.",
                "Your rule keeps that colour out. I thought of {x} and {y}, then painted it {alt}.",
            ],
            alt=alt,
            x=also[0],
            X=also[0].capitalize(),
            y=also[1],
        )
        old = target.colour

        def recoloured(after: Scene) -> list[Check]:
            # The user left the substitute open: check that the colour changed, not to what.
            rest = minimal_where(after.by_id(target.id), after, c.rng, {target.id: {"colour"}})
            if "colour" in rest or len(select(after, rest)) != 1:
                return []
            return [
                c.atomic(
                    f"The {phrase(rest)} is no longer {old}, and it is not {forbidden} either.",
                    {"op": "not_attribute", "where": rest, "attr": "colour", "values": [old, forbidden]},
                    CheckCategory.ATTRIBUTE,
                )
            ]

        free = [] if fallback else [{"slot": "value", "choices": substitutes}]
        before = len(c.images)
        turn = move(c, user, op, asst, {CONSTRAINT}, stateless=literal, lacking=CONSTRAINT, focus=recoloured, free=free)
        if fallback:  # a later correction may go back to before this edit
            c.notes["first_edit"] = (turn, target.id, old, before)
        return
    # protect: the user asks to remove the protected object; the assistant declines
    protected = select(scene, k.value)
    if not protected:
        raise Retry("protected object missing")
    where = minimal_where(protected[0], scene, c.rng)
    named = listed_ref(c, protected[0].id) if "listed" in c.notes else "the " + phrase(where)
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
        ref=named,
    )
    asst = pick(
        c.rng,
        [
            "You asked me to keep that one unchanged, so I left it in place. Here is the scene as it stands.",
            "That one is protected by your earlier rule, so I kept it. Nothing else changed.",
        ],
    )
    literal = {"op": "remove", "where": where}
    move(c, user, {"op": "none"}, asst, {CONSTRAINT}, stateless=literal, lacking=CONSTRAINT)


def pronoun_edit(c: Composer, target: WorldObject, avoid: str | None = None) -> None:
    """A recolouring that refers to the last changed object as "it" (never to ``avoid``)."""
    assert c.view is not None
    scene = c.view.scene
    current = next((o for o in scene.objects if full_where(o) == full_where(target) or o.id == target.id), None)
    if current is None:
        raise Retry("target gone")
    where = minimal_where(current, scene, c.rng)
    forbidden = [k.value for k in c.constraints if k.kind == "forbid_colour"]
    choices = colours_for(c, current.colour, *forbidden, *([avoid] if avoid else []))
    order = c.rng.sample(choices, len(choices))
    op = first_allowed(
        c, ({"op": "set", "where": where, "attr": "colour", "value": v} for v in order), "no allowed change"
    )
    value = op["value"]
    latest = c.latest.scene
    wrong = decoy([o for o in latest.objects if o.id != current.id])
    stateless: Op = {"op": "set", "where": minimal_where(wrong, latest, c.rng), "attr": "colour", "value": value}
    user = pick(
        c.rng,
        [
            "Nice. Make it {w} now.",
            "Good. Can you make it {w} as well?",
            "Keep going with that one: it should be {w}.",
            "I like it. Let's also make it {w}.",
            "Next, it needs to be {w}.",
            "Same object again, please: turn it {w}.",
        ],
        w=value,
    )
    # The user weighs one or two alternatives and drops them. The colour the object had before its
    # first edit is one of two at times (named again, like the others), but never one a correction
    # may pick as "passed over": a correction may bring it back as the colour before that edit
    # (`correction_revert`), and the answers of its three ways must differ.
    first = c.notes.get("first_edit")
    earlier = [first[2]] if first is not None and first[1] == current.id and first[2] != value else []
    pool = colours_for(c, value, current.colour, *forbidden, *earlier)
    many = c.rng.choice([1, 2])
    if earlier and many == 2 and pool:
        others = c.rng.sample([earlier[0], c.rng.choice(pool)], 2)
    else:
        others = c.rng.sample(pool, min(many, len(pool))) or earlier
    if not others:
        raise Retry("no colour left to weigh")
    user += pick(
        c.rng,
        [" I thought about {o}, but {w} is better.", " Not {o}: {w}."],
        o=" or ".join(others),
        w=value,
    )
    # The reply does not name the object: the RR question asks who "it" is.
    asst = pick(c.rng, ["Done: it is {w} now.", "Here you go, nothing else moved.", "Done."], w=value)

    def changed(after: Scene) -> list[Check]:
        w = full_where(after.by_id(current.id))
        return [c.atomic(f"There is {a(w)}.", {"op": "exists", "where": w}, CheckCategory.ATTRIBUTE)]

    turn = move(c, user, op, asst, {COREF}, stateless=stateless, lacking=COREF, focus=changed)
    # the picture before this edit (1-based): what a correction of it goes back to
    c.notes["revertible"] = (turn, current.id, "colour", current.colour, value, len(c.images) - 1)
    # the colours a correction may pick instead (not the ruled-out one), by their place in the words
    c.notes["dropped"] = [(k, o) for k, o in enumerate(others) if o not in forbidden and o not in earlier], len(others)


def described(c: Composer) -> list[str]:
    """Every object of every picture shown so far, described by all four attributes: the objects
    (and their earlier states) a model could confuse another with."""
    return list(dict.fromkeys(phrase(full_where(o)) for view in c.images for o in view.scene.objects))


BEFORE_WORDS = (
    "On second thought, give that object back the {attr} it had before my {nth} message.",
    "Correction: the {attr} it had just before my {nth} message was right; bring that back.",
    "I made a mistake. Put it back to the {attr} it had before my {nth} message.",
    "Scratch the recent changes to it: the {attr} it had before my {nth} message was better.",
)
"""A correction that brings back the value an object had before a turn (the last edit of it or
an earlier one: the same words either way)."""
UNDO_WORDS = (
    "Wait, I take back what I asked in my {nth} message: put that object back the way it was.",
    "On second thought, undo the change from my {nth} message; the {attr} was better before.",
    "Correction: forget the {attr} change from my {nth} message and restore what it replaced.",
    "I made a mistake in my {nth} message. Please reverse that {attr} change.",
    "Scratch what I said in my {nth} message; the old {attr} was right.",
)
"""A correction that takes back the last edit of an object."""
PASSED_OVER = (
    "In my {nth} message I chose wrong: give it the {which}colour I passed over there instead.",
    "Correction to my {nth} message: I'd rather have the {which}colour I turned down there.",
    "I changed my mind about my {nth} message. Use the {which}colour I passed over there after all.",
)
"""A correction that picks a colour the user weighed and dropped in an earlier edit ("Not gray: green.")."""


def correction_revert(c: Composer, back: float | None = None) -> None:
    """The user corrects the edit of "it", in one of these ways drawn at random (each has the same
    kind of words): back to the value before that edit, back to the value before an earlier edit
    of the same object (the colour it had before the first recolouring, or before the edit of "it"
    when a first correction is itself being corrected), or to a colour the user weighed and
    dropped in the edit of "it". So the answer of the question about it sits in a different
    place of the text each time: the fallback or the first recolouring, the listing or the
    suggestion, the colours the user passed over.

    Called twice, it makes the user correct the correction (users do): the second one may go
    back to the value the first one replaced, so the colour the object had before any correction
    is an answer as often as any other, and the one value never asked for is the one it has
    now, which only the words of the first correction, read against the turn they name, tell.
    Each call records the edit it makes as the one a next call may take back. ``back``: the
    chance of going back to the value before the last edit (by default one way among the
    others)."""
    assert c.view is not None
    turn, oid, attr, old, new_value, image = c.notes["revertible"]
    current = live(c, oid, "corrected object gone")
    where = minimal_where(current, c.view.scene, c.rng)
    dropped, weighed = c.notes.get("dropped", ([], 0))
    weighed_turn = c.notes.setdefault("weighed_turn", turn)
    # the edits of this object before the last one, as (turn, value before it, picture before it)
    earlier = list(c.notes.get("earlier_edits", []))
    first = c.notes.get("first_edit")
    if first is not None and first[1] == oid and not earlier:
        earlier = [(first[0], first[2], first[3])]
    ways: list[tuple[str, int, str, int]] = [("before", turn, str(old), image)]
    for t, v, img in earlier:
        if v != new_value and all(v != w[2] for w in ways):
            ways.append(("earlier", t, v, img))
    passed = [(k, o) for k, o in dropped if o != new_value and all(o != w[2] for w in ways)]
    if passed:
        ways.append(("dropped", weighed_turn, "", 0))
    if back is None or len(ways) == 1:
        way, turn, value, image = c.rng.choice(ways)
    else:  # back to the value before the last edit with the chance ``back``, else any other way
        way, turn, value, image = ways[0] if c.rng.random() < back else c.rng.choice(ways[1:])
    if way == "dropped":
        k, value = c.rng.choice(passed)
        op = checked(c, {"op": "set", "where": where, "attr": attr, "value": value})
        which = "" if weighed == 1 else ["first ", "second "][k]
        user = pick(c.rng, list(PASSED_OVER), nth=ordinal(turn + 1), which=which)
    else:
        # back to the value in the picture before the edit (under Self-History: the model's own, if it chose it)
        op = checked(c, {"op": "set", "where": where, "attr": attr, "value": value, "reverts": image})
        words = BEFORE_WORDS if way == "earlier" else (*BEFORE_WORDS, *UNDO_WORDS)
        user = pick(c.rng, list(words), nth=ordinal(turn + 1), attr=attr)
    # The reply does not name the value: the CU question asks for it.
    asst = pick(
        c.rng,
        ["Changed, as you asked.", "That is corrected; everything else stays.", "Done: it is corrected."],
    )

    def reverted(after: Scene) -> list[tuple[str, Op]]:
        restored = full_where(after.by_id(oid))
        return [
            (f"There is {a(restored)}.", {"op": "exists", "where": restored}),
            (f"There is no {phrase(full_where(current))} any more.", {"op": "absent", "where": full_where(current)}),
        ]

    last = c.notes["revertible"]
    turn_now = move(c, user, op, asst, {CORRECTION, RETRIEVAL}, lacking=CORRECTION, correction=reverted)
    c.notes.setdefault("uncorrected", str(new_value))  # what an agent that ignores corrections keeps
    c.notes["correction"] = (turn_now, attr, value, new_value)
    c.notes["earlier_edits"] = [*earlier, (last[0], str(last[3]), last[5])]
    c.notes["revertible"] = (turn_now, oid, attr, new_value, value, len(c.images) - 1)


def corrections(c: Composer) -> None:
    """The user corrects the edit of "it", then corrects that correction (`correction_revert`).
    The second goes back to the value the first replaced a quarter of the time, and otherwise
    to one of the others: so each of the four values a reader could name (the first colour, the
    fallback, the colour of "it" and the one passed over) is the answer about as often."""
    correction_revert(c)
    correction_revert(c, back=0.25)


def edit_questions(c: Composer, rr: Ask, cr: Ask | None = None) -> None:
    """The questions of fusion and editing: ``rr`` (who a reference meant), ``cr`` (by default
    where an object stood in the first picture, `first_picture_extreme`: a retrieval the text
    cannot answer), the constraint, and the colour the last correction brought back."""
    cturn, attr, old, new_value = c.notes["correction"]
    uncorrected = c.notes["uncorrected"]
    ask_dsu(
        c,
        rr,
        cr or first_picture_extreme(c),
        Ask(
            f"After the user's correction in turn {cturn + 1}, what {attr} should the corrected object have?",
            str(old),
            [str(new_value), uncorrected, *colours_for(c, str(old), str(new_value), uncorrected)],
            outdated=uncorrected if uncorrected != str(old) else None,
        ),
    )
