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
  choice set (an object's substitute colour, a spot chosen freely). Under GT-History the
  history image shows the ground truth's pick; under Self-History the model's own earlier
  image may show another admissible pick, and the exact judge rebases such a check on it
  (`yanami.world._selfhistory`).
- *Self-History decidability*: `SELF_ROLLOUTS` rollouts of the dialogue as a model that
  follows every instruction but makes its *own* free choices would play it under
  Self-History (each target turn applied to its own previous image, the user's references
  read against its own images); every check, rebased on its own earlier images as the
  judge does, must hold on each. Where its own choices crowded the scene, a new object
  goes anywhere the picture stays legible (`realize_anywhere`). A check its own choices
  made ill-posed (two objects the words can no longer tell apart, a value its own pick
  already had) is undecidable for that rollout, as it is for the judge: counted apart,
  never failed. A rollout whose words name no single object any more stops there.

It also counts, over the questions with four options, how often each letter is the answer,
and runs the language lint (`yanami.world._language.lint`) over every message.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from yanami.contract import CHOICE_LETTERS, CheckKind, Dialogue, Turn
from yanami.world._agents import jittered, union_of
from yanami.world._frames import Shown, credited, in_frame, read_candidate
from yanami.world._free import AUDIT_DRAWS, Slot, draw_rng, realizations, realize, realize_anywhere
from yanami.world._hidden import turn_intent, turn_state
from yanami.world._language import lint
from yanami.world._ops import OpError, View, apply_op
from yanami.world._place import distinct
from yanami.world._predicates import evaluate
from yanami.world._scene import Scene
from yanami.world._selfhistory import exposed, read_in_history, rebase_checks, track, view_of
from yanami.world._visible import visible_misses


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
    self_checks: int = 0
    """Checks evaluated in the Self-History rollouts (each rollout counts each check once)."""
    self_undecidable: list[Undecidable] = field(default_factory=list)
    """Checks that fail in a Self-History rollout, once rebased on the rollout's own images."""
    visible_items: int = 0
    """Target turns and questions played by the visible agent (it sees only what a model sees)."""
    visible_misses: list[tuple[str, int, str, str]] = field(default_factory=list)
    """(dialogue, turn, check or question id, what went wrong) where the visible agent, playing the
    ground truth's history with only what a model is shown, fails: words it could not read."""
    floor_sc: dict[str, float] = field(default_factory=dict)
    """Per trivial strategy (and ``stateless``): the sum over target images of their State Consistency."""
    floor_images: dict[str, int] = field(default_factory=dict)
    """Per strategy: the target images (with atomic checks) it was played on."""
    language: list[tuple[str, int, str]] = field(default_factory=list)
    """(dialogue, turn, finding) of what the language lint flags in a message."""
    messages: int = 0
    self_void: int = 0
    """Rollouts cut short where their own earlier choices left the words naming no single object,
    or no legible spot for a new object."""
    self_identical: int = 0
    """Rollout turns whose scene holds two identical objects, made so by the rollout's own choices."""
    self_ill_posed: int = 0
    """Checks of the rollouts that their own admissible choices made ill-posed (the judge leaves
    them out of the score, see `yanami.world.rebase_checks`)."""

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
            "self_checks",
            "self_void",
            "self_identical",
            "visible_items",
            "self_ill_posed",
            "messages",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.undecidable += other.undecidable
        self.reducible += other.reducible
        self.copy_majority += other.copy_majority
        self.exposed += other.exposed
        self.self_undecidable += other.self_undecidable
        self.language += other.language
        self.visible_misses += other.visible_misses
        self.letters += other.letters
        for name, sc in other.floor_sc.items():
            self.floor_sc[name] = self.floor_sc.get(name, 0.0) + sc
            self.floor_images[name] = self.floor_images.get(name, 0) + other.floor_images[name]

    def floors(self) -> dict[str, dict[str, float]]:
        """Per strategy: SC (0-100, the mean over target images), VQ as a clean render or an empty
        picture reads (0-100), and the overall score with answer letters at chance (DSU 25)."""
        out = {}
        for name in (*FLOORS, "stateless"):
            n = self.floor_images.get(name, 0)
            if not n:
                continue
            sc = 100 * self.floor_sc[name] / n
            vq = 100.0 if name in CLEAN else 0.0
            out[name] = {"sc": sc, "vq": vq, "overall_at_chance": 0.4 * 25 + 0.4 * sc + 0.2 * vq}
        return out

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
            "self_history_rollouts": SELF_ROLLOUTS,
            "self_history_checks": self.self_checks,
            "self_history_undecidable_checks": len(self.self_undecidable),
            "self_history_undecidable_turns": len({(u.dialogue, u.turn) for u in self.self_undecidable}),
            "self_history_rollouts_cut_short": self.self_void,
            "self_history_turns_with_identical_objects": self.self_identical,
            "self_history_ill_posed_checks": self.self_ill_posed,
            "per_dialogue": {
                "turns": self.turns / self.dialogues if self.dialogues else 0.0,
                "images": self.images / self.dialogues if self.dialogues else 0.0,
                "atomic_checks": self.atomic / self.dialogues if self.dialogues else 0.0,
            },
            "messages_linted": self.messages,
            "language_findings": len(self.language),
            "floors": self.floors(),
            "visible_agent": {"items": self.visible_items, "misses": len(self.visible_misses)},
            "answer_letters": {k: self.letters[k] for k in sorted(self.letters)},
            "answer_letter_shares": {k: self.letters[k] / four for k in sorted(self.letters)} if four else {},
        }


def pictured_turns(d: Dialogue) -> Iterator[tuple[Turn, View, View | None, list[View]]]:
    """Each turn whose hidden state holds a picture, under GT-History: the turn, the view after it,
    the view before it (None for the first), and the pictures shown before it, in order."""
    shown: list[View] = []
    before: View | None = None
    for t in d.turns:
        after = view_of(t)
        if after is None:
            continue
        yield t, after, before, list(shown)
        if t.user.images() or t.assistant.images():
            shown.append(after)
        before = after


def audit_dialogue(d: Dialogue, draws: int = AUDIT_DRAWS) -> Audit:
    """Audit one world dialogue (see the module docstring)."""
    report = Audit(dialogues=1, turns=len(d.turns), images=d.image_count())
    seed = d.meta.seed if d.meta.seed is not None else 0
    tracks = track(d)
    for t, after, before, shown in pictured_turns(d):
        if before is not None and isinstance(turn_intent(t).op, dict) and tracks[t.index]:
            for c in t.checks:
                pred = c.hidden.predicate
                if isinstance(pred, dict) and exposed(pred, after.scene, tracks[t.index]):
                    report.exposed.append((d.id, t.index, c.id))
        if t.checks and before is not None and shown:
            _audit_target(report, d, t, after, before, shown, seed, draws)
    for k in range(SELF_ROLLOUTS):
        _self_rollout(report, d, seed, k)
    kinds = frozenset(k.kind for t in d.turns for k in turn_state(t).constraints)
    for t in d.turns:
        for m in (t.user, t.assistant):
            report.messages += 1
            report.language += [(d.id, t.index, finding) for finding in lint(m.text(), kinds)]
    for q in d.questions:
        if q.choices and len(q.choices) == 4:
            report.letters[CHOICE_LETTERS[q.choices.index(q.answer)]] += 1
    report.visible_items += sum(1 for t in d.turns if t.checks) + len(d.questions)
    report.visible_misses += [(d.id, turn, item, what) for turn, item, what in visible_misses(d, seed)]
    return report


def _audit_target(
    report: Audit, d: Dialogue, t: Turn, after: View, before: View, shown: list[View], seed: int, draws: int
) -> None:
    """Decidability, irreducibility and the copy floor of one target turn (GT-History)."""
    intent = turn_intent(t)
    op = intent.op
    assert isinstance(op, dict)
    free: list[Slot] = list(intent.free)
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
    _floors(report, d, t, after, shown, naive, seed)
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


FLOORS = (
    "copy-input",
    "copy-first",
    "copy-previous",
    "jitter-input",
    "jitter-first",
    "jitter-previous",
    "union",
    "blank",
    "noise",
)
"""The trivial strategies the audit plays on the world's own scenes (``collage`` needs pictures:
the demo measures it), beside the stateless reading."""
EMPTY = frozenset({"blank", "noise"})
CLEAN = (set(FLOORS) - EMPTY) | {"stateless"}
"""The strategies whose pictures are clean world renders (Visual Quality 10); blank and noise show no object (0)."""


def _floors(report: Audit, d: Dialogue, t: Turn, target: View, shown: list[View], naive: View, seed: int) -> None:
    """The State Consistency each trivial strategy (and the stateless reading) gets on one target
    turn, read as the exact judge reads a picture (`yanami.world._frames`): in the target's
    frame, a copy of an earlier picture earning no change, another viewpoint no relation."""
    latest = shown[-1]
    rng = draw_rng(seed, d.id, t.index, 2000)
    previous = shown[-2] if len(shown) > 1 else latest
    drawn = {
        "copy-input": latest,
        "copy-first": shown[0],
        "copy-previous": previous,
        **{
            f"jitter-{name}": View(jittered(v.scene, rng), v.azimuth, v.style)
            for name, v in (("input", latest), ("first", shown[0]), ("previous", previous))
        },
        "union": View(union_of(latest.scene, [v.scene for v in shown[:-1]], rng), latest.azimuth, latest.style),
        "blank": View(Scene(), target.azimuth, latest.style),
        "noise": View(Scene(), target.azimuth, latest.style),  # the parser reads no object from noise
        "stateless": naive,
    }
    predicates = {c.id: c.hidden.predicate for c in t.checks if isinstance(c.hidden.predicate, dict)}
    atomic = [c.id for c in t.checks if c.kind is CheckKind.ATOMIC]
    pictures = [Shown(v.scene, v) for v in shown]
    read: dict[View, dict[str, bool | None]] = {}  # a picture two strategies draw alike is read once
    for name, view in drawn.items():
        passed = read.get(view)
        if passed is None:
            candidate = in_frame(view.scene, view.azimuth, target.azimuth)
            passed = {cid: evaluate(p, candidate, target.azimuth) for cid, p in predicates.items()}
            frame = read_candidate(candidate, target, pictures)
            passed = read[view] = credited(dict(predicates), passed, frame, latest)
        if atomic:
            report.floor_sc[name] = report.floor_sc.get(name, 0.0) + sum(bool(passed[c]) for c in atomic) / len(atomic)
            report.floor_images[name] = report.floor_images.get(name, 0) + 1


SELF_ROLLOUTS = 4
"""Self-History rollouts per dialogue, each with its own free choices."""


def _self_rollout(report: Audit, d: Dialogue, seed: int, k: int) -> None:
    """One Self-History rollout of a model that follows every instruction with its own free
    choices (draw ``k``, never the ground truth's): every rebased check must hold on it."""
    shown: list[View] = []
    mine: dict[int, Scene] = {}
    for t in d.turns:
        gt = view_of(t)
        if gt is None:
            continue
        if t.checks and shown:
            intent = turn_intent(t)
            op, free = read_in_history(d, t, intent.op, list(intent.free), shown)
            latest = shown[-1]
            if free:
                rng = draw_rng(seed, d.id, t.index, 1000 + k)
                # where its own earlier choices crowded the scene, anywhere the picture stays legible
                drawn = realize(op, free, latest, shown, rng) or realize_anywhere(op, free, latest, shown, rng)
                if drawn is None:  # no room at all
                    report.self_void += 1
                    return
                op = drawn
            try:
                new = apply_op(op, latest, shown)
            except (OpError, IndexError):  # its own choices made the words name no single object
                report.self_void += 1
                return
            report.self_identical += not distinct(new.scene)
            for cid, pred in rebase_checks(d, t, mine).items():
                report.self_checks += 1
                if pred is None:  # ill-posed by its own choices: undecidable for this rollout, never failed
                    report.self_ill_posed += 1
                elif not evaluate(pred, new.scene, new.azimuth):
                    text = next(c.text for c in t.checks if c.id == cid)
                    report.self_undecidable.append(Undecidable(d.id, t.index, cid, text, 1))
            mine[t.index] = new.scene
            shown.append(new)
        elif t.user.images() or t.assistant.images():
            shown.append(gt)


def audit(dialogues: Iterable[Dialogue], draws: int = AUDIT_DRAWS) -> Audit:
    """Audit world dialogues; dialogues of another generator are skipped."""
    report = Audit()
    for d in dialogues:
        if d.meta.generator == "world":
            report.add(audit_dialogue(d, draws))
    return report
