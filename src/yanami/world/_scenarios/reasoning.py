"""Visual Reasoning: a goal reached step by step by a plan, a hypothesis abandoned, and a plan correction."""

from __future__ import annotations

from yanami.contract import Check, CheckCategory
from yanami.world._compose import Composer
from yanami.world._free import Slot
from yanami.world._language import a, full_where, minimal_where, ordinal, phrase, pick
from yanami.world._ops import Op
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
    distinct,
    first_picture,
    first_picture_extreme,
    meant_options,
    move,
    spot,
    start,
)
from yanami.world._scene import Scene, WorldObject


def compose(c: Composer) -> None:
    """A goal (so many objects left); the assistant's plan; a what-if about "the one you'd remove
    in step k"; back to the start; steps 1 and 2; "step k was a mistake"."""
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
    removable = [o for o in scene.objects if full_where(o) not in protected]
    if len(removable) < 3:
        raise Retry("no plan of two steps")
    # The goal is a number of objects; the assistant picks which go, in an order of its own:
    # the plan's steps are objects like any other (the questions ask about them).
    keep = c.rng.randint(len(scene.objects) - len(removable) + 1, len(scene.objects) - 2)
    plan = c.rng.sample(removable, len(scene.objects) - keep)
    # every object named by its colour among other things (the RR question's options leave the
    # colour out: a plan's words must not match one option and not another)
    names = [phrase({**minimal_where(o, scene, c.rng), "colour": o.colour}) for o in plan]
    steps = "; ".join(f"step {k + 1}, remove the {n}" for k, n in enumerate(names))
    # The plan names every object, the ones that stay too.
    rest = [o for o in scene.objects if o not in plan]
    c.rng.shuffle(rest)
    # each in a clause of its own, named last as a step names its object (the RR question asks
    # which object a step meant: where a name stands in its sentence must not tell steps apart)
    stay = "; ".join(f"keep the {phrase({**minimal_where(o, scene, c.rng), 'colour': o.colour})}" for o in rest)
    # the objects that stay come first or last in the reply
    steps = f"{steps}; {stay}" if c.rng.random() < 0.5 else f"{stay}; {steps}"
    rule = c.constraints[0]
    goals = (
        [
            "The goal: only {n} objects left in the end, one of them what my rule protects. What's the plan?",
            "I'd like to get down to {n} objects, keeping the one I asked you to keep. How would you do it?",
            "Let's aim for a scene of {n} objects; my rule still applies. Plan it out?",
            "End state I want: {n} objects left, including any my rule protects. Steps?",
        ]
        if rule.kind == "protect"
        else [
            "The goal: only {n} objects left in the end, and nothing the colour of {thing}. What's the plan?",
            "I'd like to get down to {n} objects, with nothing the colour of {thing} anywhere. How would you do it?",
            "Let's aim for a scene of {n} objects, none of them the colour of {thing}. Plan it out?",
            "End state I want: {n} objects left, and nothing the colour of {thing} anywhere. Steps?",
        ]
        if c.rng.random() < 0.5
        else [
            "The goal: only {n} objects left in the end, and still nothing in the colour I banned. What's the plan?",
            "I'd like to get down to {n} objects (keeping my colour rule, as agreed). How would you do it?",
            "Let's aim for a scene of {n} objects; the colour ban still applies. Plan it out?",
            "End state I want: {n} objects left, and the banned colour nowhere. Steps?",
        ]
    )
    c.chat(
        pick(c.rng, goals, n=keep, thing=c.rng.choice(COLOUR_THINGS.get(str(rule.value), ("",)))),
        pick(c.rng, ["Here's a plan: {steps}.", "I suggest: {steps}."], steps=steps),
        {CONSTRAINT, RETRIEVAL},
        {"op": "none", "plan": [full_where(o) for o in plan]},
    )
    checkpoint = len(c.images)
    # the RR question names it without its colour, so that must tell it apart (`meant_options`)
    told = distinct(plan, list(scene.objects))
    asked = plan.index(c.rng.choice(told)) if told else c.rng.randrange(len(plan))
    hypothesis(c, plan[asked], asked + 1)
    restore(c, checkpoint)
    plan_step(c, plan[0], 1)
    plan_step(c, plan[1], 2)
    undone = c.rng.randrange(2)
    plan_correction(c, plan[undone], undone + 1)
    turn, ref = c.notes["hypothesis"]
    (cturn,) = c.notes["correction"]
    # not a protected object either: it is the CT question's answer, which no step removes
    rest = [o for o in scene.objects if o.id != plan[asked].id]
    kept = [o for o in rest if full_where(o) not in protected]
    answer, others = meant_options(c, plan[asked], kept, [o for o in rest if o not in kept])
    ask_dsu(
        c,
        Ask(f'In turn {turn + 1}, which object does "{ref}" refer to?', answer, others, turn=turn),
        first_picture_extreme(c),
        Ask(
            f"After the user's correction in turn {cturn + 1}, which object should be back in the scene?",
            f"the {phrase(full_where(plan[undone]))}",
            first_picture(c),
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
    asst = pick(c.rng, ["Step {k} done.", "Done: step {k} of the plan is carried out."], k=k)
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


def hypothesis(c: Composer, target: WorldObject, step: int) -> None:
    """A what-if about the object step ``step`` of the plan removes ("the one you'd remove in step 2")."""
    assert c.view is not None
    scene = c.view.scene
    forbidden = {k.value for k in c.constraints if k.kind == "forbid_colour"}
    col = c.rng.choice(colours_for(c, target.colour, *forbidden))
    where = minimal_where(target, scene, c.rng)
    op = checked(c, {"op": "set", "where": where, "attr": "colour", "value": col})
    latest = c.latest.scene
    wrong = decoy([o for o in latest.objects if o.id != target.id])
    stateless: Op = {"op": "set", "where": minimal_where(wrong, latest, c.rng), "attr": "colour", "value": col}
    ref = c.rng.choice(["the one you'd remove in step {k}", "the object step {k} removes"]).format(k=step)
    user = pick(
        c.rng,
        [
            "Before we start, a what-if: show me {ref} painted {col}.",
            "Just to compare: what would it look like if {ref} were {col}?",
            "Quick detour first: how would {ref} look in {col}?",
            "Hypothetically, paint {ref} {col} and show me.",
        ],
        ref=ref,
        col=col,
    )
    # The reply does not name the object: the RR question asks which it is.
    asst = pick(c.rng, ["Here is that idea, in {col}.", "This is the scene with that one turned {col}."], col=col)

    def painted(after: Scene) -> list[Check]:
        w = full_where(after.by_id(target.id))
        return [c.atomic(f"There is {a(w)}.", {"op": "exists", "where": w}, CheckCategory.ATTRIBUTE)]

    turn = move(c, user, op, asst, {COREF, RETRIEVAL}, stateless=stateless, lacking=COREF, focus=painted)
    c.notes["hypothesis"] = (turn, ref)


def plan_correction(c: Composer, first: WorldObject, step: int) -> None:
    """The user corrects the plan: the removal of step ``step`` was a mistake; the object comes back."""
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
            "I need to correct the plan: step {k} was a mistake. Bring back what it removed.",
            "Correction: the removal in step {k} shouldn't have happened. Put that object back.",
            "Plan correction: undo step {k} and return the object it took out.",
            "Step {k} was wrong after all. Please restore that object.",
        ],
        k=step,
    )
    # The reply does not name the object: the CU question asks which it is.
    asst = pick(c.rng, ["Restored, as it was before step {k}.", "It is back, as it was before step {k}."], k=step)
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
