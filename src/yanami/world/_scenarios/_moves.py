"""Moves that more than one scenario makes, and the questions fusion and editing share."""

from __future__ import annotations

from yanami.schema import Check, CheckCategory
from yanami.world._compose import Composer
from yanami.world._language import a, full_where, minimal_where, ordinal, phrase, pick
from yanami.world._predicates import select
from yanami.world._scenarios._skeleton import (
    CONSTRAINT,
    COREF,
    CORRECTION,
    RETRIEVAL,
    Ask,
    Op,
    Retry,
    ask_dsu,
    checked,
    colours_except,
    decoy,
    first_allowed,
    live,
    move,
)
from yanami.world._scene import COLOURS, Scene, WorldObject


def violating_edit(c: Composer, target: WorldObject) -> None:
    """A request that would break the constraint; the assistant adjusts or declines."""
    assert c.view is not None
    k = c.constraints[0]
    scene = c.view.scene
    ref = "the " + phrase(minimal_where(target, scene, c.rng))
    if k.kind == "forbid_colour":
        forbidden = k.value
        if target.colour == forbidden:
            raise Retry("target already forbidden colour")
        substitutes = colours_except(forbidden, target.colour)
        alt = c.rng.choice(substitutes)
        where = minimal_where(target, scene, c.rng)
        op = checked(c, {"op": "set", "where": where, "attr": "colour", "value": alt})
        literal = {"op": "set", "where": where, "attr": "colour", "value": forbidden}
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

        free = [{"slot": "value", "choices": substitutes}]
        move(c, user, op, asst, {CONSTRAINT}, stateless=literal, lacking=CONSTRAINT, focus=recoloured, free=free)
        return
    # protect: the user asks to remove the protected object; the assistant declines
    protected = select(scene, k.value)
    if not protected:
        raise Retry("protected object missing")
    where = minimal_where(protected[0], scene, c.rng)
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
    literal = {"op": "remove", "where": where}
    move(c, user, {"op": "none"}, asst, {CONSTRAINT}, stateless=literal, lacking=CONSTRAINT)


def pronoun_edit(c: Composer, target: WorldObject) -> None:
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
    op = first_allowed(
        c, ({"op": "set", "where": where, "attr": attr, "value": flips[attr]} for attr in attrs), "no allowed change"
    )
    attr, value = op["attr"], op["value"]
    latest = c.latest.scene
    wrong = decoy([o for o in latest.objects if o.id != current.id])
    stateless: Op = {"op": "set", "where": minimal_where(wrong, latest, c.rng), "attr": attr, "value": value}
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
    asst = pick(
        c.rng,
        ["Done: the {obj} is {w} now.", "Here you go, it is {w} now and nothing else moved."],
        obj=phrase(where),
        w=value,
    )

    def changed(after: Scene) -> list[Check]:
        w = full_where(after.by_id(current.id))
        return [c.atomic(f"There is {a(w)}.", {"op": "exists", "where": w}, CheckCategory.ATTRIBUTE)]

    turn = move(c, user, op, asst, {COREF}, stateless=stateless, lacking=COREF, focus=changed)
    c.notes["pronoun"] = (
        turn,
        phrase(full_where(current)),
        [phrase(full_where(o)) for o in scene.objects if o.id != current.id],
    )
    c.notes["revertible"] = (turn, current.id, attr, getattr(current, attr), value)


def correction_revert(c: Composer) -> None:
    """The user takes back the pronoun edit: the object goes back to how it was."""
    assert c.view is not None
    turn, oid, attr, old, new_value = c.notes["revertible"]
    current = live(c, oid, "corrected object gone")
    op = checked(c, {"op": "set", "where": minimal_where(current, c.view.scene, c.rng), "attr": attr, "value": old})
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

    def reverted(after: Scene) -> list[tuple[str, Op]]:
        restored = full_where(after.by_id(oid))
        return [
            (f"There is {a(restored)}.", {"op": "exists", "where": restored}),
            (f"There is no {phrase(full_where(current))} any more.", {"op": "absent", "where": full_where(current)}),
        ]

    turn_now = move(c, user, op, asst, {CORRECTION, RETRIEVAL}, lacking=CORRECTION, correction=reverted)
    c.notes["correction"] = (turn_now, phrase({"shape": current.shape}), attr, old, new_value)


def edit_questions(c: Composer) -> None:
    """The questions of fusion and editing: who "it" (or "the object you added") is, the
    colour a request retrieved from the history, the constraint, and the corrected value."""
    if "turn_ref" in c.notes:
        turn, answer, others, word = c.notes["turn_ref"]
    else:
        turn, answer, others = c.notes["pronoun"]
        word = "it"
    rturn, _, old_colour, new_colour = c.notes["retrieved"]
    cturn, shape, attr, old, new_value = c.notes["correction"]
    ask_dsu(
        c,
        Ask(
            f'In turn {turn + 1}, which object does the user mean by "{word}"?',
            f"the {answer}",
            [f"the {o}" for o in others] + ["the largest object in the scene", "a new object"],
            turn=turn,
        ),
        Ask(
            f"What colour did the user's request in turn {rturn + 1} call for?",
            old_colour,
            [new_colour, *colours_except(old_colour, new_colour)],
            outdated=new_colour,
        ),
        Ask(
            f"After the user's correction in turn {cturn + 1}, what {attr} should the {shape} have?",
            str(old),
            [
                str(new_value),
                *{"material": ["matte", "metal"], "size": ["small", "large"]}.get(attr, list(COLOURS)),
                "it was removed",
                "it never changed",
            ],
            outdated=str(new_value),
        ),
    )
