"""Visual Reasoning: a goal reached step by step by a plan, a hypothesis abandoned, and a plan correction."""

from __future__ import annotations

from yanami.schema import Check, CheckCategory
from yanami.world._compose import Composer
from yanami.world._free import Slot
from yanami.world._language import a, full_where, minimal_where, ordinal, phrase, pick
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
    decoy,
    move,
    spot,
    start,
)
from yanami.world._scene import COLOURS, SIZES, Scene, WorldObject


def compose(c: Composer) -> None:
    """A goal; the assistant's plan, largest first; "do step 1"; a what-if about "the one
    you'd remove next"; back to an earlier picture; "step 2"; "step 1 was a mistake"."""
    scene = start(
        c,
        (4, 5),
        0.0,
        [
            "Help me reach a goal with this scene, one step at a time.",
            "I want to work toward a tidier scene step by step.",
            "Let's plan a few steps on this scene together.",
        ],
    )
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
    rule = c.constraints[0]
    goals = (
        [
            "The goal: no {shape}s left in the end, except what my rule protects. What's the plan?",
            "I'd like every {shape} gone eventually, but not the one I asked you to keep. How would you do it?",
            "Let's aim for a scene without {shape}s; my rule still applies. Plan it out?",
            "End state I want: all {shape}s removed, except any my rule protects. Steps?",
        ]
        if rule.kind == "protect"
        else [
            "The goal: no {shape}s left in the end, and still nothing {col}. What's the plan?",
            "I'd like every {shape} gone eventually (keeping {col} out, as agreed). How would you do it?",
            "Let's aim for a scene without {shape}s; the ban on {col} still applies. Plan it out?",
            "End state I want: all {shape}s removed, with no {col} anywhere. Steps?",
        ]
    )
    c.chat(
        pick(c.rng, goals, shape=shape, col=rule.value),
        pick(c.rng, ["Here's a plan, largest first: {steps}.", "I suggest: {steps}."], steps=steps),
        {CONSTRAINT, RETRIEVAL},
        {"op": "none", "plan": [full_where(o) for o in plan]},
    )
    plan_step(c, plan[0], 1)
    checkpoint = len(c.images)
    hypothesis(c, plan[1])
    restore(c, checkpoint)
    plan_step(c, plan[1], 2)
    plan_correction(c, plan[0])
    turn, answer, others = c.notes["pronoun"]
    (cturn,) = c.notes["correction"]
    first = f"the {phrase(full_where(plan[0]))}"
    ask_dsu(
        c,
        Ask(
            f'In turn {turn + 1}, which object does "the one you\'d remove next" refer to?',
            f"the {answer}",
            [f"the {o}" for o in others] + ["the largest object in the scene"],
            turn=turn,
        ),
        Ask(
            "Which object did the assistant's plan remove first?",
            first,
            [f"the {phrase(full_where(o))}" for o in scene.objects if o.id != plan[0].id],
        ),
        Ask(
            f"After the user's correction in turn {cturn + 1}, which object should be back in the scene?",
            first,
            [f"the {phrase(full_where(o))}" for o in plan[1:]] + ["none", "every removed object"],
        ),
    )


def plan_step(c: Composer, o: WorldObject, k: int) -> None:
    """Carry out step ``k`` of the plan the assistant proposed: read alone, it means nothing."""
    assert c.view is not None
    where = minimal_where(o, c.view.scene, c.rng)
    op = checked(c, {"op": "remove", "where": where})
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
    w = full_where(o)
    gone = f"There is no {phrase(w)}."
    move(
        c,
        user,
        op,
        asst,
        {RETRIEVAL},
        lacking=RETRIEVAL,
        focus=lambda _: [c.atomic(gone, {"op": "absent", "where": w}, CheckCategory.ABSENCE)],
    )


def hypothesis(c: Composer, nxt: WorldObject) -> None:
    """A what-if about the object the plan removes next ("the one you'd remove next")."""
    assert c.view is not None
    scene = c.view.scene
    forbidden = {k.value for k in c.constraints if k.kind == "forbid_colour"}
    col = c.rng.choice([x for x in COLOURS if x not in forbidden and x != nxt.colour])
    where = minimal_where(nxt, scene, c.rng)
    op = checked(c, {"op": "set", "where": where, "attr": "colour", "value": col})
    latest = c.latest.scene
    wrong = decoy([o for o in latest.objects if o.id != nxt.id])
    stateless: Op = {"op": "set", "where": minimal_where(wrong, latest, c.rng), "attr": "colour", "value": col}
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

    def painted(after: Scene) -> list[Check]:
        w = full_where(after.by_id(nxt.id))
        return [c.atomic(f"There is {a(w)}.", {"op": "exists", "where": w}, CheckCategory.ATTRIBUTE)]

    turn = move(c, user, op, asst, {COREF, RETRIEVAL}, stateless=stateless, lacking=COREF, focus=painted)
    c.notes["pronoun"] = (
        turn,
        phrase(full_where(nxt)),
        [phrase(full_where(o)) for o in scene.objects if o.id != nxt.id],
    )


def plan_correction(c: Composer, first: WorldObject) -> None:
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
    free: list[Slot] = []
    try:  # where it stood (the history shows it), or elsewhere when that place is taken now
        op = checked(c, {"op": "add", "object": spec})
    except Retry:
        x, y = spot(c, first)
        op = checked(c, {"op": "add", "object": {**spec, "x": x, "y": y}})
        free = [{"slot": "position", "accept": []}]
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
    turn = move(
        c,
        user,
        op,
        asst,
        {CORRECTION, RETRIEVAL},
        lacking=CORRECTION,
        correction=lambda _: [(f"There is {a(w)} again.", {"op": "exists", "where": w})],
        free=free,
    )
    c.notes["correction"] = (turn,)


def restore(c: Composer, image: int) -> None:
    """Abandon a hypothesis: back to the state shown in an earlier image."""
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
    move(c, user, {"op": "restore", "image": image}, asst, {RETRIEVAL}, lacking=RETRIEVAL)
    # The abandoned change is gone; a later correction cannot take it back.
    c.notes.pop("revertible", None)
