"""The audit of a world bench (``yanami audit``): every check decidable, every target turn irreducible.

For each target turn, replayed from the hidden states (the ground-truth history):

- *decidability*: the turn's free choices (``intent["free"]``, see `yanami.world._free`)
  are drawn again, `AUDIT_DRAWS` times, giving other images that follow the visible words
  just as well; every check must hold on every one (and on the ground truth). A check that
  fails on one tests a choice the words left open: it is *undecidable*.
- *irreducibility*: the stateless reading (the current request applied to the latest
  image alone, ``intent["stateless"]``) must fail at least one check.
- *floor*: how many of the turn's checks a copy of the latest image already passes; the
  rest test what the turn changes or what the history requires.
- *Self-History exposure*: how many checks name a value that an *earlier* turn's free
  choice set (an object's substitute colour, a spot chosen freely): decidable under
  GT-History, where the history image shows the ground truth's pick, but not under
  Self-History, where the model's own earlier image may show another admissible pick.

It also counts, over the questions with four options, how often each letter is the answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from yanami.schema import CHOICE_LETTERS, CheckKind, Dialogue
from yanami.world._free import AUDIT_DRAWS, loose, realizations
from yanami.world._hidden import turn_intent
from yanami.world._ops import View, apply_op
from yanami.world._predicates import evaluate, select
from yanami.world._scene import Scene, WorldObject


@dataclass(frozen=True)
class Undecidable:
    """A check that fails on an admissible realization of its turn."""

    dialogue: str
    turn: int
    check: str
    text: str
    failed: int
    """On how many of the drawn realizations (the ground truth counts as one)."""


@dataclass
class Audit:
    """The audit of a set of dialogues."""

    dialogues: int = 0
    targets: int = 0
    checks: int = 0
    turns_with_free: int = 0
    realizations: int = 0
    undecidable: list[Undecidable] = field(default_factory=list)
    reducible: list[tuple[str, int]] = field(default_factory=list)
    """(dialogue, turn) of target turns that the stateless reading passes."""
    atomic: int = 0
    """Atomic checks (the ones State Consistency counts)."""
    copy_passed: int = 0
    """Atomic checks a copy of the latest image passes."""
    copy_majority: list[tuple[str, int]] = field(default_factory=list)
    """Target turns where a copy of the latest image passes more than half of the atomic checks."""
    turns: int = 0
    images: int = 0
    letters: Counter[str] = field(default_factory=Counter)
    exposed: list[tuple[str, int, str]] = field(default_factory=list)
    """(dialogue, turn, check) of checks that name a value an earlier free choice set."""

    def add(self, other: Audit) -> None:
        """Merge another audit into this one."""
        for name in (
            "dialogues",
            "targets",
            "checks",
            "atomic",
            "turns_with_free",
            "realizations",
            "copy_passed",
            "turns",
            "images",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.undecidable += other.undecidable
        self.reducible += other.reducible
        self.copy_majority += other.copy_majority
        self.exposed += other.exposed
        self.letters += other.letters

    @property
    def undecidable_turns(self) -> int:
        return len({(u.dialogue, u.turn) for u in self.undecidable})

    def summary(self) -> dict[str, Any]:
        """The figures, as JSON."""
        four = sum(self.letters.values())
        irreducible = self.targets - len(self.reducible)
        return {
            "dialogues": self.dialogues,
            "target_turns": self.targets,
            "checks": self.checks,
            "turns_with_free_choices": self.turns_with_free,
            "realizations_drawn": self.realizations,
            "undecidable_checks": len(self.undecidable),
            "undecidable_turns": self.undecidable_turns,
            "irreducible_turns": irreducible,
            "irreducible_share": irreducible / self.targets if self.targets else 0.0,
            "atomic_checks": self.atomic,
            "atomic_checks_a_copy_passes": self.copy_passed,
            "copy_share": self.copy_passed / self.atomic if self.atomic else 0.0,
            "turns_a_copy_mostly_passes": len(self.copy_majority),
            "self_history_exposed_checks": len(self.exposed),
            "self_history_exposed_turns": len({(d, t) for d, t, _ in self.exposed}),
            "per_dialogue": {
                "turns": self.turns / self.dialogues if self.dialogues else 0.0,
                "images": self.images / self.dialogues if self.dialogues else 0.0,
                "atomic_checks": self.atomic / self.dialogues if self.dialogues else 0.0,
            },
            "answer_letters": {k: self.letters[k] for k in sorted(self.letters)},
            "answer_letter_shares": {k: self.letters[k] / four for k in sorted(self.letters)} if four else {},
        }


def _view(state: Any) -> View:
    objs = tuple(WorldObject.model_validate(o) for o in state["scene"])
    return View(Scene.model_construct(objects=objs), float(state["azimuth"]), str(state["style"]))


Open = tuple[set[int], dict[int, set[str]]]
"""Values earlier free choices set: ids of objects whose spot is open, and per id the open attributes."""


def _carry(op: Any, before: View, opened: Open, images: list[Open]) -> Open:
    """What stays open after a fixed operation ``op`` (it fixes what it sets)."""
    spots, attrs = set(opened[0]), {k: set(v) for k, v in opened[1].items()}
    if not isinstance(op, dict):
        return spots, attrs
    kind = op.get("op")
    scene = before.scene
    if kind == "batch":
        view, out = before, (spots, attrs)
        for step in op["ops"]:
            out = _carry(step, view, out, images)
            view = apply_op(step, view, [])
        return out
    if kind == "restore":
        k = int(op["image"]) - 1
        return images[k] if k < len(images) else (spots, attrs)
    if kind == "compose":
        return set(), {}
    found = select(scene, op["where"]) if "where" in op else []
    if kind == "set" and found:
        attrs.get(found[0].id, set()).discard(op["attr"])
    elif kind == "move" and found:
        spots.discard(found[0].id)
        spots -= {o.id for o in scene.objects if o.on == found[0].id}
    elif kind == "remove" and found:
        spots.discard(found[0].id)
        attrs.pop(found[0].id, None)
    elif kind == "swap":
        a, b = select(scene, op["a"]), select(scene, op["b"])
        if a and b and (a[0].id in spots or b[0].id in spots):
            spots |= {a[0].id, b[0].id}
    elif kind == "stack" and found:
        support = select(scene, op["on"])
        if support and support[0].id in spots:
            spots.add(found[0].id)
        else:
            spots.discard(found[0].id)
    return spots, attrs


def _exposed(pred: dict[str, Any], scene: Scene, opened: Open) -> bool:
    """Whether a check names a value that an earlier free choice set."""
    spots, attrs = opened
    kind = pred["op"]
    named = [pred[k] for k in ("where", "a", "b") if isinstance(pred.get(k), dict)]
    if kind == "moved":
        named = named[:1]
    for where in named:
        for o in select(scene, where):
            if set(where) & attrs.get(o.id, set()):
                return True
            if kind in ("relation", "on", "moved") and o.id in spots:
                return True
    return False


def audit_dialogue(d: Dialogue, draws: int = AUDIT_DRAWS) -> Audit:
    """Audit one world dialogue (see the module docstring)."""
    report = Audit(dialogues=1, turns=len(d.turns), images=len(d.images()))
    seed = d.meta.seed if d.meta.seed is not None else 0
    shown: list[View] = []
    before: View | None = None
    opened: Open = (set(), {})
    opened_at: list[Open] = []
    for t in d.turns:
        state = t.hidden.state
        if not isinstance(state, dict):
            continue
        after = _view(state)
        intent = turn_intent(t)
        if before is not None and isinstance(intent.op, dict):
            # what this turn sets itself no longer depends on an earlier choice (but where a
            # moved object started does)
            carried = _carry(intent.op, before, opened, opened_at)
            for c in t.checks:
                pred = c.hidden.predicate
                if isinstance(pred, dict) and _exposed(pred, after.scene, opened if pred["op"] == "moved" else carried):
                    report.exposed.append((d.id, t.index, c.id))
            free_now: list[dict[str, Any]] = list(intent.free)
            opened = carried
            spots, attrs = loose(intent.op, free_now, before, after.scene)
            opened = (
                opened[0] | spots,
                {k: opened[1].get(k, set()) | attrs.get(k, set()) for k in {*opened[1], *attrs}},
            )
        elif t.user.images():
            opened = (set(), {})  # a picture the user shares fixes everything in it
        if t.checks and before is not None and shown:
            intent = turn_intent(t)
            op = intent.op
            assert isinstance(op, dict)
            free: list[dict[str, Any]] = list(intent.free)
            variants = [after]
            if free:
                report.turns_with_free += 1
                extra = realizations(op, free, before, shown, seed, d.id, t.index, draws)
                report.realizations += len(extra)
                variants += extra
            stateless = intent.stateless
            naive = apply_op(stateless, shown[-1], shown) if isinstance(stateless, dict) else shown[-1]
            copy = shown[-1]
            report.targets += 1
            fails_naive = False
            copy_passes = atomic = 0
            for c in t.checks:
                pred = c.hidden.predicate
                assert isinstance(pred, dict)
                report.checks += 1
                failed = sum(not evaluate(pred, v.scene, v.azimuth) for v in variants)
                if failed:
                    report.undecidable.append(Undecidable(d.id, t.index, c.id, c.text, failed))
                fails_naive |= not evaluate(pred, naive.scene, naive.azimuth)
                if c.kind is CheckKind.ATOMIC:
                    atomic += 1
                    copy_passes += evaluate(pred, copy.scene, copy.azimuth)
            report.atomic += atomic
            report.copy_passed += copy_passes
            if 2 * copy_passes > atomic:
                report.copy_majority.append((d.id, t.index))
            if not fails_naive:
                report.reducible.append((d.id, t.index))
        if t.user.images() or t.assistant.images():
            shown.append(after)
            opened_at.append(opened)
        before = after
    for q in d.questions:
        if q.choices and len(q.choices) == 4:
            report.letters[CHOICE_LETTERS[q.choices.index(q.answer)]] += 1
    return report


def audit(dialogues: Iterable[Dialogue], draws: int = AUDIT_DRAWS) -> Audit:
    """Audit world dialogues; dialogues of another generator are skipped."""
    report = Audit()
    for d in dialogues:
        if d.meta.generator == "world":
            report.add(audit_dialogue(d, draws))
    return report
