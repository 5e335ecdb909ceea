"""Composing one world dialogue: turns, images, checks, questions and the state trajectory.

A scenario script (`_scenarios/<value>.py`) drives a `Composer` through *moves*. The
composer keeps the true state (the `View` the next generated image must show), the
active constraints, every image shown so far, and what each turn exercised. For every
target turn it also derives what a *stateless* reading would produce (the current
instruction applied to the latest image, without constraints, corrections or history)
and insists that at least one of the turn's checks fails on it: that is the rule that
makes every target turn irreducible to single-turn, enforced when the dialogue is built.
Two more rules are enforced the same way: every check is *decidable* (it holds on every
realization of the choices the words leave open, drawn again from the turn's free slots,
see `yanami.world._free`), and at least half of a target image's atomic checks test what
the turn changes (a copy of the latest image fails them).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import JsonValue

from yanami.contract import (
    CHOICE_LETTERS,
    Capability,
    Check,
    CheckCategory,
    CheckHidden,
    CheckKind,
    Dialogue,
    DialogueMeta,
    ImageFormat,
    ImagePart,
    ImageSource,
    Message,
    Question,
    QuestionHidden,
    QuestionType,
    Scenario,
    TextPart,
    Turn,
    TurnHidden,
    sha256_hex,
)
from yanami.world._camera import HEIGHT, WIDTH
from yanami.world._free import BUILD_DRAWS, Slot, loose, realizations
from yanami.world._language import (
    REL_WORDS,
    add_sentence,
    decorate,
    decorate_reply,
    full_where,
    minimal_where,
    names_one,
    phrase,
)
from yanami.world._ops import Op, View, apply_op
from yanami.world._predicates import STAY_ROLL, STAY_TOLERANCE, Predicate, evaluate, select
from yanami.world._render import render_png
from yanami.world._scene import pairs, relation
from yanami.world._shortcuts import (
    OptionSets,
    Reading,
    answer_place,
    arranged,
    candidates,
    distractors_from,
    option_sets,
    options_rng,
)


def _predicate(c: Check) -> Predicate:
    """The predicate of one of the composer's checks: each carries one."""
    return cast(Predicate, c.hidden.predicate)


@dataclass(frozen=True)
class Pending:
    """An image part to be rendered when the dialogue is finished: the index of its view."""

    index: int


@dataclass
class _Draft:
    """A turn before its images are rendered."""

    user: list[TextPart | Pending]
    assistant: list[TextPart | Pending]
    caps: set[Capability]
    checks: list[Check]
    state: dict[str, Any]
    intent: dict[str, Any]


CHANGE_CHECKS = 4
"""Atomic checks on what a target turn changes that the composer aims for (it keeps at most as
many checks on what stays the same, so a copy of the latest image passes at most half)."""


class Reducible(Exception):
    """A target turn that a stateless reading would get right: the script must try again."""


@dataclass
class Constraint:
    """A standing user requirement."""

    id: str
    kind: str
    """``forbid_colour`` or ``protect``."""
    value: Any
    """The colour, or the protected object's full attributes."""
    text: str
    """How the user put it."""
    turn: int


@dataclass
class Composer:
    """Builds one dialogue, turn by turn."""

    scenario: Scenario
    rng: random.Random
    dialogue_id: str
    seed: int
    view: View | None = None
    turns: list[_Draft] = field(default_factory=list)
    images: list[View] = field(default_factory=list)
    sources: list[ImageSource] = field(default_factory=list)
    image_bytes: dict[str, bytes] = field(default_factory=dict)
    constraints: list[Constraint] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    option_sets: dict[str, OptionSets] = field(default_factory=dict)
    """By question id: what a build's balancing weighs (`yanami.world._shortcuts.Balancer`)."""
    capabilities: set[Capability] = field(default_factory=set)
    check_no: int = 0
    notes: dict[str, Any] = field(default_factory=dict)
    """Facts the question writer uses (what was referred to, corrected, ruled out)."""
    capability_checks: dict[Capability, list[str]] = field(default_factory=dict)
    rebalanced: bool = False
    """Whether a build chooses the questions' distractors again (`yanami.world._shortcuts.Balancer`):
    then a question with more candidates than options keeps placeholders until it does."""

    # images ---------------------------------------------------------------------------

    def picture(self, view: View, source: ImageSource) -> Pending:
        """Show a view: a placeholder part, rendered only if the dialogue is finished.

        Scripts sometimes abandon an attempt (`Reducible`, a dead end); rendering at the
        end means no image is drawn for nothing.
        """
        self.images.append(view)
        self.sources.append(source)
        return Pending(len(self.images) - 1)

    @property
    def latest(self) -> View:
        """The most recent image shown in the dialogue."""
        return self.images[-1]

    # turns ----------------------------------------------------------------------------

    def _turn(
        self,
        user: list[TextPart | Pending],
        assistant: list[TextPart | Pending],
        caps: set[Capability],
        checks: list[Check],
        intent: dict[str, Any],
    ) -> int:
        assert self.view is not None
        index = len(self.turns)
        self.capabilities |= caps
        user = [TextPart(text=decorate(self.rng, p.text)) if isinstance(p, TextPart) else p for p in user]
        assistant = [
            TextPart(text=decorate_reply(self.rng, p.text)) if isinstance(p, TextPart) else p for p in assistant
        ]
        state = {
            "scene": [o.model_dump() for o in self.view.scene.objects],
            "azimuth": self.view.azimuth,
            "style": self.view.style,
            "constraints": [{"id": c.id, "kind": c.kind, "value": c.value} for c in self.constraints],
            "images": len(self.images),
        }
        self.turns.append(_Draft(user, assistant, set(caps), checks, state, intent))
        return index

    def texts(self, since: int = 0) -> list[str]:
        """The words of every message from turn ``since`` on, in order."""
        return [
            p.text
            for t in self.turns[since:]
            for parts in (t.user, t.assistant)
            for p in parts
            if isinstance(p, TextPart)
        ]

    def append_reply(self, turn: int, sentence: str) -> None:
        """Add ``sentence`` to what the assistant says in ``turn`` (the dialogue is not finished yet)."""
        parts = self.turns[turn].assistant
        k = next(i for i, p in enumerate(parts) if isinstance(p, TextPart))
        first = parts[k]
        assert isinstance(first, TextPart)
        parts[k] = TextPart(text=add_sentence(first.text, sentence))

    def show(self, view: View, user_text: str, assistant_text: str) -> int:
        """The user shares an image; the assistant answers in words."""
        part = self.picture(view, ImageSource.USER)
        self.view = view
        return self._turn(
            [TextPart(text=user_text), part],
            [TextPart(text=assistant_text)],
            set(),
            [],
            {"op": "none", "shares_image": len(self.images)},
        )

    def chat(
        self, user_text: str, assistant_text: str, caps: set[Capability], intent: dict[str, Any] | None = None
    ) -> int:
        """A turn in words only (a constraint, a discussion, a decision)."""
        return self._turn(
            [TextPart(text=user_text)], [TextPart(text=assistant_text)], caps, [], intent or {"op": "none"}
        )

    def turn_with_image(
        self, user_text: str, assistant_text: str, part: Pending, caps: set[Capability], intent: dict[str, Any]
    ) -> int:
        """A turn whose assistant shows an image that is not judged."""
        return self._turn([TextPart(text=user_text)], [TextPart(text=assistant_text), part], caps, [], intent)

    def constrain(
        self,
        kind: str,
        value: Any,
        user_text: str,
        assistant_text: str,
        also: frozenset[Capability] = frozenset(),
        picture: View | None = None,
    ) -> Constraint:
        """The user sets a standing constraint, in a turn that may also exercise ``also`` and
        may share the user's ``picture`` (the opening of a one-picture scenario)."""
        c = Constraint(f"k{len(self.constraints)}", kind, value, user_text, len(self.turns))
        self.constraints.append(c)
        caps = {Capability.CONSTRAINT, *also}
        if picture is None:
            self.chat(user_text, assistant_text, caps, {"op": "none", "constraint": c.id})
            return c
        part = self.picture(picture, ImageSource.USER)
        self.view = picture
        intent = {"op": "none", "shares_image": len(self.images), "constraint": c.id}
        self._turn([TextPart(text=user_text), part], [TextPart(text=assistant_text)], caps, [], intent)
        return c

    def target(
        self,
        user_text: str,
        op: Op,
        stateless: Op,
        assistant_text: str,
        caps: set[Capability],
        *,
        alternatives: dict[str, Op] | None = None,
        focus: list[Check] | None = None,
        correction: list[tuple[str, Predicate]] | None = None,
        free: list[Slot] | None = None,
    ) -> int:
        """A turn whose assistant image is judged.

        ``op`` is what the user's words mean given the whole dialogue; ``stateless`` what
        they mean read alone against the latest image. ``focus`` are checks on what the
        turn changes; ``correction`` (text, predicate) pairs become correction-updating
        checks. ``free`` are the choices the words leave open (see `yanami.world._free`):
        the turn keeps only checks that hold on every realization drawn with other
        choices (decidable from what the model sees). Raises `Reducible` when no check
        tells the op apart from the stateless reading.
        """
        assert self.view is not None
        free = free or []
        new = apply_op(op, self.view, self.images)
        naive = apply_op(stateless, self.latest, self.images)
        turn_no = len(self.turns)
        variants = realizations(op, free, self.view, self.images, self.seed, self.dialogue_id, turn_no, BUILD_DRAWS)
        if free and not variants:
            raise Reducible(f"{user_text}: no other realization of its free choices")
        spots, attrs = loose(op, free, self.view, new.scene)
        checks = list(focus or [])
        seen = [c.hidden.predicate for c in checks]
        for extra in self._context_checks(new, exclude=len(checks), spots=spots, attrs=attrs):
            if extra.hidden.predicate not in seen:  # the same fact is checked once per image
                checks.append(extra)
                seen.append(extra.hidden.predicate)
        for k in self.constraints:
            checks.append(self._constraint_check(k))
        for text, predicate in correction or []:
            checks.append(self._check(text, predicate, capability=Capability.CORRECTION))
        for check in checks:
            pred = check.hidden.predicate
            assert isinstance(pred, dict)
            if not evaluate(pred, new.scene, new.azimuth):
                raise AssertionError(f"check {check.text!r} {pred} fails on the ground truth {new}: a builder bug")
        checks = [c for c in checks if self._decidable(c, variants)]
        checks += self._stays_checks(new, variants, spots, attrs)
        checks += self._change_checks(checks, new, variants, spots, attrs)
        if not any(not evaluate(_predicate(c), naive.scene, naive.azimuth) for c in checks):
            distinguishing = self._distinguishing_check(new, naive, variants, spots, attrs)
            if distinguishing is None:
                raise Reducible(user_text)
            checks.append(distinguishing)
        checks = self._balanced(checks, naive, new)
        if not any(not evaluate(_predicate(c), naive.scene, naive.azimuth) for c in checks):
            raise Reducible(user_text)
        self.view = new
        part = self.picture(new, ImageSource.ASSISTANT)
        intent: dict[str, Any] = {"op": op, "stateless": stateless, "alternatives": alternatives or {}}
        if free:
            intent["free"] = free
        return self._turn(
            [TextPart(text=user_text)],
            [TextPart(text=assistant_text), part],
            caps | {Capability.CONSISTENCY},
            checks,
            intent,
        )

    # checks ---------------------------------------------------------------------------

    def _copy_passes(self, check: Check) -> bool:
        """Whether a copy of the latest image passes ``check`` (then it tests preservation)."""
        pred = check.hidden.predicate
        assert isinstance(pred, dict)
        return evaluate(pred, self.latest.scene, self.latest.azimuth)

    def _change_checks(
        self, checks: list[Check], new: View, variants: list[View], spots: set[int], attrs: dict[int, set[str]]
    ) -> list[Check]:
        """Atomic checks on what the turn changes (a copy of the latest image fails them), to
        bring the turn's up to `CHANGE_CHECKS`; each holds on every realization."""
        have = sum(1 for c in checks if c.kind is CheckKind.ATOMIC and not self._copy_passes(c))
        seen = [c.hidden.predicate for c in checks if c.kind is CheckKind.ATOMIC]
        capability = [c.hidden.predicate for c in checks if c.kind is not CheckKind.ATOMIC]
        latest = self.latest
        out: list[Check] = []
        # What a capability check already states comes last (an atomic twin, when nothing else
        # changes). The facts are worked out one at a time, only as far as they are needed.
        later: list[tuple[str, Predicate, CheckCategory]] = []

        def take(text: str, pred: Predicate, category: CheckCategory) -> None:
            if (
                pred not in seen
                and not evaluate(pred, latest.scene, latest.azimuth)
                and all(evaluate(pred, v.scene, v.azimuth) for v in variants)
            ):
                out.append(self._check(text, pred, category=category))
                seen.append(pred)

        for fact in self._facts(new, spots, attrs):
            if have + len(out) >= CHANGE_CHECKS:
                return out
            if fact[1] in capability:
                later.append(fact)
            else:
                take(*fact)
        for fact in later:
            if have + len(out) >= CHANGE_CHECKS:
                break
            take(*fact)
        return out

    def _facts(
        self, new: View, spots: set[int], attrs: dict[int, set[str]]
    ) -> Iterator[tuple[str, Predicate, CheckCategory]]:
        """Simple true facts about ``new`` that name only what the dialogue fixes, in a random
        order within each kind (objects, then what is gone, the count, relations, supports)."""
        scene, rng = new.scene, self.rng
        latest = self.latest.scene
        objs = list(scene.objects)
        rng.shuffle(objs)
        for o in objs:
            w = {k: v for k, v in full_where(o).items() if k not in attrs.get(o.id, set())}
            yield f"There is {_a(phrase(w))}.", {"op": "exists", "where": w}, CheckCategory.EXISTENCE
        for o in latest.objects:
            w = full_where(o)
            if not select(scene, w):
                yield f"There is no {phrase(w)} any more.", {"op": "absent", "where": w}, CheckCategory.ABSENCE
        n = len(scene.objects)
        yield f"There are exactly {n} objects.", {"op": "total", "n": n}, CheckCategory.COUNT
        rel_pairs = [(a, b) for a, b in pairs(scene) if a.id not in spots and b.id not in spots]
        rng.shuffle(rel_pairs)
        for a, b in rel_pairs:
            wa, wb = minimal_where(a, scene, rng, attrs), minimal_where(b, scene, rng, attrs)
            if not (names_one(wa, a, scene, attrs) and names_one(wb, b, scene, attrs)):
                continue
            for rel in relation(a, b, new.azimuth):
                pred = {"op": "relation", "a": wa, "b": wb, "rel": rel}
                yield f"The {phrase(wa)} is {REL_WORDS[rel]} the {phrase(wb)}.", pred, CheckCategory.RELATION
        for o in scene.objects:
            if o.on is not None:
                support = scene.by_id(o.on)
                wa, wb = minimal_where(o, scene, rng, attrs), minimal_where(support, scene, rng, attrs)
                if names_one(wa, o, scene, attrs) and names_one(wb, support, scene, attrs):
                    text = f"The {phrase(wa)} rests on top of the {phrase(wb)}."
                    yield text, {"op": "on", "a": wa, "b": wb}, CheckCategory.SUPPORT

    def _balanced(self, checks: list[Check], naive: View, new: View) -> list[Check]:
        """At most as many atomic checks that a copy of the latest image passes (preservation)
        as ones it fails (change), keeping first those the stateless reading fails; each
        atomic check's predicate is tagged with its ``effect``.

        A kept preservation check that the stateless reading passes and that names an object
        which must stay where it stood ("there is a red cube", "the red cube is left of ...")
        is stated as that object's ``stays`` check instead: still there, and where it stood."""
        change = {c.id for c in checks if c.kind is CheckKind.ATOMIC and not self._copy_passes(c)}

        def op(c: Check) -> str:
            pred = c.hidden.predicate
            return str(pred["op"]) if isinstance(pred, dict) else ""

        stays: dict[int, Check] = {}
        for c in checks:
            pred = c.hidden.predicate
            if c.kind is CheckKind.ATOMIC and isinstance(pred, dict) and pred["op"] == "stays" and c.id not in change:
                stays[select(new.scene, _predicate(c)["where"])[0].id] = c
        held = {c.id for c in stays.values()}
        preserved = [c for c in checks if c.kind is CheckKind.ATOMIC and c.id not in change and c.id not in held]

        def naive_passes(c: Check) -> bool:
            return evaluate(_predicate(c), naive.scene, naive.azimuth)

        kept = set()
        for c in sorted(preserved, key=naive_passes)[: len(change)]:
            pred = c.hidden.predicate
            assert isinstance(pred, dict)
            named = pred.get("where") if op(c) == "exists" else pred.get("a") if op(c) in ("relation", "on") else None
            found = select(new.scene, named) if isinstance(named, dict) else []
            stronger = stays.pop(found[0].id, None) if len(found) == 1 and naive_passes(c) else None
            kept.add(c.id if stronger is None else stronger.id)
        out = []
        for c in checks:
            if c.kind is not CheckKind.ATOMIC:
                out.append(c)
            elif c.id in change or c.id in kept:
                effect = "change" if c.id in change else "preservation"
                pred = {**_predicate(c), "effect": effect}
                out.append(c.model_copy(update={"hidden": CheckHidden(predicate=pred)}))
        return out

    def _stays_checks(
        self, new: View, variants: list[View], spots: set[int], attrs: dict[int, set[str]]
    ) -> list[Check]:
        """Atomic checks that each object whose place the words fix stands there (where it
        stood, or where the request puts it, as a swap or a return to a picture does), up to
        the parser's error. An object whose spot a free choice sets (``spots``) is left out, as
        is one whose place differs between the realizations."""
        before = {o.id: o for o in self.view.scene.objects} if self.view is not None else {}
        scene = new.scene
        fixed = []
        for o in scene.objects:
            was = before.get(o.id)
            if o.id in spots:
                continue
            # named by what the turn leaves as it was: the check is on where it stands, not on its colour
            w = {
                k: v
                for k, v in full_where(o).items()
                if k not in attrs.get(o.id, set()) and (was is None or getattr(was, k) == v)
            }
            same = [v for v in variants if any(p.id == o.id and (p.x, p.y) == (o.x, o.y) for p in v.scene.objects)]
            if len(same) < len(variants) or len(select(scene, w)) != 1:
                continue
            if any(len(select(v.scene, w)) != 1 for v in variants):
                continue
            fixed.append((o, w, was is not None and (was.x, was.y) == (o.x, o.y)))
        out = []
        for o, w, kept in fixed:
            frame = [{"where": fw, "at": [f.x, f.y]} for f, fw, _ in fixed if f.id != o.id]
            pred = {
                "op": "stays",
                "where": w,
                "at": [o.x, o.y],
                "frame": frame,
                "most": len(scene.objects),
                "tolerance": STAY_TOLERANCE,
                "roll": STAY_ROLL,
            }
            if not all(evaluate(pred, v.scene, v.azimuth) for v in [new, *variants]):
                continue
            where = "where it stood" if kept else "where the request puts it"
            n = len(scene.objects)
            text = f"The {phrase(w)} stands exactly {where}, among at most {n} object{'' if n == 1 else 's'}."
            out.append(self._check(text, pred, category=CheckCategory.RELATION))
        return out

    def _decidable(self, check: Check, variants: list[View]) -> bool:
        """Whether ``check`` holds on every realization; one that does not is dropped (and
        forgotten by the questions it was aligned with)."""
        pred = check.hidden.predicate
        assert isinstance(pred, dict)
        if all(evaluate(pred, v.scene, v.azimuth) for v in variants):
            return True
        for ids in self.capability_checks.values():
            if check.id in ids:
                ids.remove(check.id)
        return False

    def _check(
        self,
        text: str,
        predicate: Predicate,
        *,
        category: CheckCategory | None = None,
        capability: Capability | None = None,
    ) -> Check:
        cid = f"c{self.check_no}"
        self.check_no += 1
        if capability is not None:
            self.capability_checks.setdefault(capability, []).append(cid)
            return Check(
                id=cid,
                kind=CheckKind.CAPABILITY,
                text=text,
                capability=capability,
                hidden=CheckHidden(predicate=predicate),
            )
        return Check(
            id=cid, kind=CheckKind.ATOMIC, text=text, category=category, hidden=CheckHidden(predicate=predicate)
        )

    def atomic(self, text: str, predicate: Predicate, category: CheckCategory) -> Check:
        """An atomic check (for a move's focus)."""
        return self._check(text, predicate, category=category)

    def _constraint_check(self, c: Constraint) -> Check:
        if c.kind == "forbid_colour":
            return self._check(
                f"No object in the image is {c.value}.",
                {"op": "absent", "where": {"colour": c.value}},
                capability=Capability.CONSTRAINT,
            )
        return self._check(
            f"The {phrase(c.value)} is still there, unchanged.",
            {"op": "exists", "where": c.value},
            capability=Capability.CONSTRAINT,
        )

    def _context_checks(
        self, new: View, exclude: int, spots: set[int] | None = None, attrs: dict[int, set[str]] | None = None
    ) -> list[Check]:
        """Atomic checks that the rest of the scene is as it should be (about 5 per image).

        ``spots`` (ids of objects whose spot a free choice sets) and ``attrs`` (per id, the
        attributes one sets) are left out: a check names only what the dialogue fixes."""
        scene = new.scene
        rng = self.rng
        spots, attrs = spots or set(), attrs or {}
        out: list[Check] = []
        want = max(2, 4 - exclude)
        objs = list(scene.objects)
        rng.shuffle(objs)
        for o in objs[:2]:
            w = {k: v for k, v in full_where(o).items() if k not in attrs.get(o.id, set())}
            out.append(
                self._check(
                    f"There is {_a(phrase(w))}.", {"op": "exists", "where": w}, category=CheckCategory.EXISTENCE
                )
            )
        if len(out) < want:
            out.append(
                self._check(
                    f"There are exactly {len(objs)} objects.",
                    {"op": "total", "n": len(objs)},
                    category=CheckCategory.COUNT,
                )
            )
        rel_pairs = [(a, b) for a, b in pairs(scene) if a.id not in spots and b.id not in spots]
        rng.shuffle(rel_pairs)
        for a, b in rel_pairs[: max(0, want - len(out))]:
            wa, wb = minimal_where(a, scene, rng, attrs), minimal_where(b, scene, rng, attrs)
            if not (names_one(wa, a, scene, attrs) and names_one(wb, b, scene, attrs)):
                continue
            horizontal, depth = relation(a, b, new.azimuth)
            rel = rng.choice([horizontal, depth])
            out.append(
                self._check(
                    f"The {phrase(wa)} is {REL_WORDS[rel]} the {phrase(wb)}.",
                    {"op": "relation", "a": wa, "b": wb, "rel": rel},
                    category=CheckCategory.RELATION,
                )
            )
        for o in scene.objects:
            if o.on is not None and len(out) < want + 1:
                support = scene.by_id(o.on)
                wa, wb = minimal_where(o, scene, rng, attrs), minimal_where(support, scene, rng, attrs)
                if not (names_one(wa, o, scene, attrs) and names_one(wb, support, scene, attrs)):
                    continue
                out.append(
                    self._check(
                        f"The {phrase(wa)} rests on top of the {phrase(wb)}.",
                        {"op": "on", "a": wa, "b": wb},
                        category=CheckCategory.SUPPORT,
                    )
                )
        return out

    def _distinguishing_check(
        self,
        new: View,
        naive: View,
        variants: list[View] | None = None,
        spots: set[int] | None = None,
        attrs: dict[int, set[str]] | None = None,
    ) -> Check | None:
        """An atomic check true of ``new`` and of every realization in ``variants``, and
        false of ``naive``, if one of the simple kinds exists."""
        variants, spots, attrs = variants or [], spots or set(), attrs or {}

        def holds(pred: Predicate) -> bool:
            return all(evaluate(pred, v.scene, v.azimuth) for v in variants)

        for o in new.scene.objects:
            w = {k: v for k, v in full_where(o).items() if k not in attrs.get(o.id, set())}
            if not select(naive.scene, w) and holds({"op": "exists", "where": w}):
                return self._check(
                    f"There is {_a(phrase(w))}.", {"op": "exists", "where": w}, category=CheckCategory.EXISTENCE
                )
        for o in naive.scene.objects:
            w = full_where(o)
            if not select(new.scene, w) and holds({"op": "absent", "where": w}):
                return self._check(
                    f"There is no {phrase(w)}.", {"op": "absent", "where": w}, category=CheckCategory.ABSENCE
                )
        if len(new.scene.objects) != len(naive.scene.objects):
            n = len(new.scene.objects)
            return self._check(f"There are exactly {n} objects.", {"op": "total", "n": n}, category=CheckCategory.COUNT)
        for a, b in pairs(new.scene):
            if a.id in spots or b.id in spots:
                continue
            wa, wb = minimal_where(a, new.scene, self.rng, attrs), minimal_where(b, new.scene, self.rng, attrs)
            if not (names_one(wa, a, new.scene, attrs) and names_one(wb, b, new.scene, attrs)):
                continue
            for rel in relation(a, b, new.azimuth):
                pred = {"op": "relation", "a": wa, "b": wb, "rel": rel}
                if not evaluate(pred, naive.scene, naive.azimuth) and holds(pred):
                    category = CheckCategory.VIEWPOINT if new.azimuth != naive.azimuth else CheckCategory.RELATION
                    return self._check(
                        f"The {phrase(wa)} is {REL_WORDS[rel]} the {phrase(wb)}.", pred, category=category
                    )
        return None

    # questions ------------------------------------------------------------------------

    def ask(
        self,
        qtype: QuestionType,
        after_turn: int,
        text: str,
        answer: str,
        pool: list[str],
        aligned: list[str] | None = None,
        alternatives: dict[str, str] | None = None,
    ) -> None:
        """A DSU question with four options: the answer and three distractors from ``pool``.

        ``pool`` holds the candidates a model could confuse the answer with (the stateless
        reading, an earlier or outdated state, another object or value the dialogue named);
        the three are chosen so that no surface feature of the visible text (where and how
        often an option is mentioned, its length, its overlap with the rules, the question
        or the last messages) tells the answer apart (`yanami.world._shortcuts`). The
        answer's letter is drawn on its own for every question. ``alternatives`` are the
        answers a reference agent lacking one capability gives (``{"no-corrections": the
        outdated value}``); an agent without one guesses.
        """
        qid = f"q{len(self.questions)}"
        reading = Reading(self.visible_messages(after_turn), text)
        cands = candidates(reading, answer, pool)
        if len(cands) > 3:  # what a build's balancing weighs, drawn here (in the build's worker)
            self.option_sets[qid] = option_sets(reading, answer, cands, options_rng(self.seed, self.dialogue_id, qid))
        rng = options_rng(self.seed, self.dialogue_id, qid)
        place = answer_place(self.seed, self.dialogue_id, qid, min(4, 1 + len(cands)))
        if self.rebalanced and len(cands) > 3:
            # The build's balancing chooses the distractors and keeps the alternatives among
            # them: until then, any three candidates, and every alternative a candidate.
            options = arranged(answer, cands[:3], rng, place)
            offered = [answer, *cands]
        else:
            options = offered = arranged(answer, distractors_from(reading, answer, cands, rng), rng, place)
        self.questions.append(
            Question(
                id=qid,
                type=qtype,
                after_turn=after_turn,
                text=text,
                answer=answer,
                choices=options,
                answer_letters=[CHOICE_LETTERS[options.index(answer)]],
                aligned_checks=aligned or [],
                hidden=QuestionHidden(
                    intent={
                        "type": qtype.value,
                        "answer": answer,
                        "alternatives": {k: v for k, v in (alternatives or {}).items() if v in offered and v != answer},
                        # what a build may draw the distractors from again (`balance_questions`)
                        "candidates": list[JsonValue](cands),
                    }
                ),
            )
        )

    def visible_messages(self, last_turn: int) -> list[tuple[int, str, str]]:
        """(turn, role, text) of every message up to ``last_turn``, as a model will read them."""
        out = []
        for i, t in enumerate(self.turns[: last_turn + 1]):
            for role, parts in (("user", t.user), ("assistant", t.assistant)):
                out.append((i, role, "\n\n".join(p.text for p in parts if isinstance(p, TextPart))))
        return out

    # result ---------------------------------------------------------------------------

    def dialogue(self, params: dict[str, Any]) -> Dialogue:
        """The finished dialogue."""
        from yanami import __version__

        parts: list[ImagePart] = []
        rendered: dict[View, str] = {}  # a view shown twice (going back, a refusal) is drawn once
        for view, source in zip(self.images, self.sources, strict=True):
            sha = rendered.get(view)
            if sha is None:
                data = render_png(view.scene, view.azimuth, view.style)
                sha = rendered[view] = sha256_hex(data)
                self.image_bytes[sha] = data
            parts.append(ImagePart(sha256=sha, format=ImageFormat.PNG, width=WIDTH, height=HEIGHT, source=source))

        def real(items: list[TextPart | Pending]) -> list[TextPart | ImagePart]:
            return [parts[p.index] if isinstance(p, Pending) else p for p in items]

        order = list(Capability).index
        turns = [
            Turn(
                index=i,
                user=Message(role="user", parts=real(t.user)),
                assistant=Message(role="assistant", parts=real(t.assistant)),
                capabilities=sorted(t.caps, key=order),
                checks=t.checks,
                hidden=TurnHidden(state=t.state, intent=t.intent),
            )
            for i, t in enumerate(self.turns)
        ]
        caps = sorted({c for t in self.turns for c in t.caps}, key=order)
        return Dialogue(
            id=self.dialogue_id,
            scenario=self.scenario,
            capabilities=caps,
            turns=turns,
            questions=self.questions,
            meta=DialogueMeta(generator="world", version=__version__, seed=self.seed, params=params),
        )


def _a(text: str) -> str:
    return ("an " if text[0] in "aeiou" else "a ") + text
