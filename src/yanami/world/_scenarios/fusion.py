"""Multi-Image Fusion: source pictures in different styles, a decision about what to combine, then composites."""

from __future__ import annotations

from yanami.contract import Check, CheckCategory
from yanami.world._compose import Composer
from yanami.world._language import a, full_where, listing, minimal_where, ordinal, phrase, pick
from yanami.world._ops import Op, View
from yanami.world._place import VIEWS, place, random_scene
from yanami.world._predicates import select
from yanami.world._render import STYLES
from yanami.world._scenarios._moves import corrections, edit_questions, pronoun_edit, violating_edit
from yanami.world._scenarios._skeleton import (
    COLOUR_THINGS,
    COREF,
    RETRIEVAL,
    Ask,
    Retry,
    banned_reply,
    checked,
    colours_for,
    distinct,
    first_picture_extreme,
    meant_options,
    move,
    reserve_colours,
    room_for,
)
from yanami.world._scene import Scene, WorldObject


def compose(c: Composer) -> None:
    """Sources in different styles and a constraint; a decision about what to combine; the
    composite; an edit against the constraint, an edit of "it", an object brought in "from
    picture 2", a correction; sometimes a return to the first composite."""
    styles, sources = show_sources(c)
    picks, col, items_desc = agree_on_picks(c, sources)
    composite = combine(c, styles, sources, picks, items_desc)
    assert c.view is not None
    allowed = [o for o in c.view.scene.objects if o.colour != col]
    # the RR question names it without its colour, so that must tell it apart among the sources
    # (`meant_options`); the composite's object ``i`` is the pick ``i``
    everything = [o for s in sources for o in s.objects]
    unique = {id(o) for o in distinct(everything, everything)}
    first = c.rng.choice([o for o in allowed if id(picks[o.id][1]) in unique] or allowed)
    ref = c.rng.choice(["the {n} one you suggested", "the {n} object you suggested"]).format(n=ordinal(first.id + 1))
    violating_edit(c, first, ref, second_choice=True)  # the CU question asks for the substitute
    turn = len(c.turns) - 1
    answer, sourced = meant_options(c, first, [o for o in everything if o is not picks[first.id][1]])
    rr = Ask(f'In turn {turn + 1}, which object does the user mean by "{ref}"?', answer, sourced, turn=turn)
    pronoun_edit(c, first, avoid=first.colour)  # so a correction can go back to the colour before both edits
    retrieval_from_picture(c, sources, col)
    corrections(c)
    if c.rng.random() < 0.5:
        back_to_composite(c, composite)
    # which picture: any of them, so an option's being in it says nothing of being the RR answer
    k = c.rng.randrange(len(sources))
    edit_questions(c, rr, first_picture_extreme(c, k, f"picture {k + 1}"))


def show_sources(c: Composer) -> tuple[list[str], list[Scene]]:
    """The user shows 2 or 3 source pictures of four objects, each in its own style; returns the styles and scenes."""
    styles = c.rng.sample(list(STYLES), 4)
    n_sources = c.rng.choice([2, 2, 2, 3])
    reserve_colours(c)  # the rule comes after the pictures; its colours are kept out of them
    # four objects each: the CR question asks which object of one of them stood furthest to one side
    sources = [random_scene(c.rng, 4, stack_chance=0.0, colours=colours_for(c)) for _ in range(n_sources)]
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
            view, f"{lead} This one shows {names}." if c.rng.random() < 0.6 else lead, f"Picture {k + 1} has {names}."
        )
    return styles, sources


def agree_on_picks(c: Composer, sources: list[Scene]) -> tuple[list[tuple[int, WorldObject]], str, str]:
    """In one message the user rules out a colour and asks what to combine; the assistant
    agrees and suggests two objects from the first picture and one from each other. Returns the picks (picture index,
    object), the forbidden colour and how the assistant listed the picks."""
    # choose two objects from the first picture and one from another
    picks: list[tuple[int, WorldObject]] = []
    for k, scene in enumerate(sources):
        take = c.rng.sample(list(scene.objects), 2 if k == 0 else 1)
        picks.extend((k, o) for o in take)
    col = c.notes["reserved"][0]
    thing = c.rng.choice(COLOUR_THINGS[col])
    # each by its colour among other things (the RR question's options leave the colour out: the
    # suggestion's words must not match one option and not another)
    named = [(k, {**minimal_where(o, sources[k], c.rng), "colour": o.colour}) for k, o in picks]
    items_desc = listing([f"the {phrase(w)} from the {ordinal(k + 1)} picture" for k, w in named])
    # The rule and the question of what to combine come in one message.
    rule = pick(
        c.rng,
        [
            "For the combined scene, nothing may be the colour of {thing}.",
            "Whatever we build from these, keep the colour of {thing} out of it.",
            "One condition for the mix: nothing the colour of {thing}, ever.",
            "No matter what we combine, the colour of {thing} is not allowed.",
        ],
        thing=thing,
    )
    question = pick(
        c.rng,
        [
            "Which elements would you combine?",
            "What would make a nice combination?",
            "What would you take from each picture?",
            "Any suggestion for what to merge?",
            "Which objects should make it into the combined scene?",
        ],
    )
    noted = banned_reply(c)
    suggestion = pick(
        c.rng,
        [
            "I would take {items}, on the floor of the {nth} picture.",
            "How about {items}, keeping the background of picture {n}?",
        ],
        items=items_desc,
        nth=ordinal(1),
        n=1,
    )
    c.constrain("forbid_colour", col, f"{rule} {question}", f"{noted} {suggestion}", also=frozenset({RETRIEVAL}))
    return picks, col, items_desc


def combine(
    c: Composer, styles: list[str], sources: list[Scene], picks: list[tuple[int, WorldObject]], items_desc: str
) -> int:
    """The composite (target): the picks laid out afresh on the first picture's floor.
    Returns its image number."""
    assert c.view is not None
    if len({(o.shape, o.colour, o.size, o.material) for _, o in picks}) != len(picks):
        raise Retry("two identical objects picked")
    # A greedy layout can paint itself into a corner: lay it out afresh. It leaves room for
    # one more small object, which a later turn brings in (the edits before it only recolour).
    for _layout in range(4):
        scene = Scene()
        for i, (_, o) in enumerate(picks):
            placed = place(scene, o.model_copy(update={"id": i, "on": None}), c.rng)
            if placed is None:
                break
            scene = Scene.model_construct(objects=(*scene.objects, placed))
        else:
            if room_for(c, scene):
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
    move(
        c,
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
        pick(c.rng, ["Here is the combination: {items}.", "Done, the new scene has {items}."], items=items_desc),
        {RETRIEVAL, COREF},
        stateless=stateless,
        free=[{"slot": "layout"}],  # the words pick the objects, not where each one stands
    )
    return len(c.images)


def back_to_composite(c: Composer, image: int) -> None:
    """Return to the first composite, named by its place among the pictures."""
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
    move(c, user, {"op": "restore", "image": image}, asst, {RETRIEVAL, COREF}, lacking=RETRIEVAL)


def retrieval_from_picture(c: Composer, sources: list[Scene], forbidden: str) -> None:
    """Bring in another object from a source picture by naming the picture."""
    assert c.view is not None
    # named by its shape and picture alone (the CR question asks for its colour)
    options = [
        (k, o)
        for k, s in enumerate(sources)
        for o in s.objects
        if o.colour != forbidden and not select(c.view.scene, full_where(o)) and len(select(s, {"shape": o.shape})) == 1
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
    spec = {"shape": o.shape, "colour": o.colour, "size": o.size, "material": o.material, "x": placed.x, "y": placed.y}
    wrong = c.rng.choice(colours_for(c, o.colour, forbidden))
    stateless: Op = {"op": "add", "object": {**spec, "colour": wrong}}
    op = checked(c, {"op": "add", "object": spec})
    user = pick(
        c.rng,
        [
            "Also bring in the {shape} from picture {n}.",
            "Add the {shape} from my {nth} picture too.",
            "And add the {shape} from picture {n} as well.",
            "I'd like the {shape} from picture {n} in there too.",
        ],
        shape=o.shape,
        n=k + 1,
        nth=ordinal(k + 1),
    )
    # The reply does not name the colour: the CR question asks for it.
    asst = pick(
        c.rng,
        ["Added the {d} from picture {n}.", "Here it is with the {d} from picture {n}."],
        d=o.shape,
        n=k + 1,
    )
    w = full_where(o)

    def brought(_: Scene) -> list[Check]:
        return [c.atomic(f"There is a {phrase(w)}.", {"op": "exists", "where": w}, CheckCategory.EXISTENCE)]

    free = [{"slot": "position", "accept": []}]
    move(c, user, op, asst, {RETRIEVAL, COREF}, stateless=stateless, lacking=RETRIEVAL, focus=brought, free=free)
