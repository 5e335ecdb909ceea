"""What ``yanami audit`` reports, computed and written out: the whole audit of a world bench
(`audit_bench`), its summary text (`audit_text`) and the problems it lists (`AuditResult.problems`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from yanami.contract import Dialogue
from yanami.world._audit import Audit, audit_dialogue
from yanami.world._free import AUDIT_DRAWS
from yanami.world._readers import READER_LIMIT, Figure, audit_readers
from yanami.world._reparse import Reparsed
from yanami.world._shortcuts import Battery, Shortcuts

SHORTCUT_LIMIT = 0.35
"""Above this share, a text-only rule is reported as a shortcut (chance is 25 %)."""
READER_DIALOGUES = 2000
"""The learned readers are trained and held out on at most this many world dialogues (the first)."""


@dataclass
class AuditResult:
    """A bench's audit: its figures (JSON-ready), the findings behind them, and the text-only rules."""

    figures: dict[str, Any]
    report: Audit
    battery: Battery
    others: int
    """Dialogues skipped: not made by the world."""
    readers: dict[str, dict[str, Figure]] | None = None
    """reader -> type -> held-out accuracy (`yanami.world._readers.audit_readers`)."""
    pictures: Reparsed | None = None
    """Every picture read again against its turn's hidden state (`add_pictures`)."""

    def add_pictures(self, reparsed: Reparsed) -> None:
        """Record the pictures read again (`yanami.world.reparse_bench`) and their figures."""
        self.pictures = reparsed
        self.figures["pictures_reparsed"] = reparsed.pictures
        self.figures["pictures_differing"] = len(reparsed.images)
        self.figures["differing_images"] = reparsed.images

    @property
    def failed(self) -> bool:
        """Whether the audit fails: an undecidable check, or a picture that is not what its hidden state says."""
        differing = self.pictures is not None and self.pictures.disagreements
        return bool(self.report.undecidable or self.report.self_undecidable or differing)

    def problems(self, limit: int) -> list[str]:
        """Every finding to list, a line each, at most ``limit`` of each kind."""
        r = self.report
        differing = self.pictures.disagreements if self.pictures is not None else []
        return [
            *(f"picture differs: {d}" for d in differing[:limit]),
            *(
                f"undecidable {u.dialogue} t{u.turn} {u.check}: {u.text} (fails {u.failed})"
                for u in r.undecidable[:limit]
            ),
            *(
                f"undecidable under Self-History {u.dialogue} t{u.turn} {u.check}: {u.text}"
                for u in r.self_undecidable[:limit]
            ),
            *(f"language {d} t{t}: {finding}" for d, t, finding in r.language[:limit]),
            *(f"visible agent misses {d} t{t} {item}: {what}" for d, t, item, what in r.visible_misses[:limit]),
            *(f"reducible {d} t{t}: the stateless reading passes every check" for d, t in r.reducible[:limit]),
        ]


def audit_bench(
    dialogues: Iterable[Dialogue], draws: int = AUDIT_DRAWS, on_dialogue: Callable[[], None] | None = None
) -> AuditResult:
    """Audit a bench's world dialogues (others are skipped and counted) and run the text-only rules."""
    report, shortcuts, others = Audit(), Shortcuts(), 0
    world: list[Dialogue] = []
    for d in dialogues:
        if d.meta.generator == "world":
            report.add(audit_dialogue(d, draws))
            shortcuts.add(d)
            if len(world) < READER_DIALOGUES:
                world.append(d)
        else:
            others += 1
        if on_dialogue is not None:
            on_dialogue()
    figures = report.summary()
    battery = shortcuts.result()
    figures["text_only_rules"] = battery.summary()
    readers = audit_readers(world) if world else {}
    figures["learned_readers"] = {
        name: {t: {"accuracy": f.accuracy, "low": f.low, "high": f.high, "questions": f.questions}
               for t, f in per.items()}
        for name, per in readers.items()
    }  # fmt: skip
    return AuditResult(figures, report, battery, others, readers)


def audit_text(bench: str, result: AuditResult) -> str:
    """The audit's summary, as ``yanami audit`` prints it."""
    figures, battery = result.figures, result.battery
    t, n = figures["target_turns"], figures["checks"]
    letters = ", ".join(f"{k} {v:.1%}" for k, v in figures["answer_letter_shares"].items())
    return (
        f"{bench}: {figures['dialogues']} dialogues, {t} target turns, {n} checks\n"
        f"decidable: {n - figures['undecidable_checks']}/{n} checks; undecidable "
        f"{figures['undecidable_checks']} checks in {figures['undecidable_turns']} turns "
        f"({figures['turns_with_free_choices']} turns with free choices, "
        f"{figures['realizations_drawn']} realizations drawn)\n"
        f"irreducible: {figures['irreducible_turns']}/{t} target turns ({figures['irreducible_share']:.1%})\n"
        f"a copy of the latest image passes {figures['atomic_checks_a_copy_passes']}/{figures['atomic_checks']}"
        f" atomic checks ({figures['copy_share']:.1%}); more than half in "
        f"{figures['turns_a_copy_mostly_passes']} turns\n"
        f"{_floor_lines(figures['floors'])}"
        f"per dialogue: {figures['per_dialogue']['turns']:.2f} turns, {figures['per_dialogue']['images']:.2f}"
        f" images, {figures['per_dialogue']['atomic_checks']:.2f} atomic checks\n"
        f"answer letters (four options): {letters}; two questions of a dialogue share their letter"
        f" {battery.same_letter:.1%} of the time (independent letters: 25 %)\n"
        f"{_letter_lines(battery)}"
        f"{_shortcut_lines(battery)}"
        f"{_reader_lines(result.readers or {})}"
        f"visible agent (sees only what a model sees, on the ground truth's history): misses"
        f" {figures['visible_agent']['misses']} of {figures['visible_agent']['items']} turns and questions\n"
        f"language lint: {figures['language_findings']} findings in {figures['messages_linted']} messages\n"
        f"Self-History exposure: {figures['self_history_exposed_checks']} checks in "
        f"{figures['self_history_exposed_turns']} turns name a value an earlier free choice set "
        "(judged against the model's own earlier image)\n"
        f"Self-History decidable: {figures['self_history_checks'] - figures['self_history_undecidable_checks']}"
        f"/{figures['self_history_checks']} checks over {figures['self_history_rollouts']} rollouts per dialogue"
        f" with their own free choices; {figures['self_history_ill_posed_checks']} checks made ill-posed by"
        " a rollout's own choices (the judge leaves them out: never failed);"
        f" {figures['self_history_rollouts_cut_short']} rollouts cut short (their own choices left the words"
        " naming no single object)"
        f"{_picture_line(result.pictures)}"
    )


def _picture_line(pictures: Reparsed | None) -> str:
    """The pictures read again against their hidden state (nothing where they were not)."""
    if pictures is None:
        return ""
    differing = len(pictures.images)
    verdict = f"{differing} differ{'s' * (differing == 1)} from it (listed below)" if differing else "each shows it"
    return f"\npictures parsed against their turn's hidden state: {pictures.pictures}; {verdict}"


def _floor_lines(floors: dict[str, dict[str, float]]) -> str:
    """The trivial strategies' State Consistency beside the stateless reading's (see `yanami.world._audit`)."""
    stateless = floors.get("stateless", {}).get("sc")
    lines = ["floor (GT-History, read as the exact judge reads a picture; overall with answer letters at chance):"]
    for name, f in floors.items():
        below = (
            ""
            if name == "stateless" or stateless is None
            else (" (below stateless)" if f["sc"] < stateless else " (NOT below stateless)")
        )
        lines.append(f"  {name}: SC {f['sc']:.2f}{below}, VQ {f['vq']:.0f}, overall {f['overall_at_chance']:.2f}")
    return "\n".join(lines) + "\n"


def _shortcut_lines(battery: Battery) -> str:
    """The text-only rules' figures, a line per DSU type (see `yanami.world._shortcuts`)."""
    lines = ["text-only rules on the DSU questions (no state tracked; chance 25 %):"]
    for qtype, n in battery.questions.items():
        rule, acc = battery.best_single(qtype)
        pair_acc = battery.best_pair[qtype][1]
        lines.append(
            f"  {qtype}: best rule {acc:.1%} ({rule}), best pair {pair_acc:.1%} (chosen on the other half),"
            f" linear reader {battery.linear[qtype]:.1%} (cross-validated); {n} questions"
        )
    qtype, rule, acc = battery.strongest()
    if acc > SHORTCUT_LIMIT:
        lines.append(f"  shortcut: {qtype} {rule!r} answers {acc:.1%}, above {SHORTCUT_LIMIT:.0%}")
    if battery.short or battery.unmentioned:
        short, silent = battery.short, battery.unmentioned
        lines.append(f"  {short} question(s) with fewer than four options; {silent} option(s) never mentioned")
    return "\n".join(lines) + "\n"


def _letter_lines(battery: Battery) -> str:
    """The answer letters' shares per question type (see `yanami.world._filter.Letters`)."""
    parts = []
    for qtype, counts in battery.letters_by_type.items():
        n = sum(counts.values()) or 1
        parts.append(f"{qtype} " + " ".join(f"{k} {counts.get(k, 0) / n:.1%}" for k in "ABCD"))
    return f"  per type: {'; '.join(parts)}\n" if parts else ""


def _reader_lines(readers: dict[str, dict[str, Figure]]) -> str:
    """The learned readers' held-out accuracies, a line per reader (see `yanami.world._readers`)."""
    if not readers:
        return ""
    lines = [
        "learned text-only readers (held out: 5 folds by dialogue, split and seed apart from the build's filter;"
        " 95 % Wilson intervals):"
    ]
    worst = ("", "", 0.0)
    for name, per in readers.items():
        cells = [f"{t} {f.accuracy:.1%} [{f.low:.1%}, {f.high:.1%}]" for t, f in per.items()]
        lines.append(f"  {name}: " + "; ".join(cells))
        for t, f in per.items():
            if f.accuracy > worst[2]:
                worst = (name, t, f.accuracy)
    if worst[2] > READER_LIMIT:
        lines.append(f"  learned shortcut: {worst[0]} answers {worst[1]} {worst[2]:.1%}, above {READER_LIMIT:.0%}")
    return "\n".join(lines) + "\n"
