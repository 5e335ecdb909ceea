"""The consistency rules of one dialogue, in one pass (`DialogueWalk`, `dialogue_problems`): what
the store's writer refuses and `yanami validate` reports, beyond the field types the data model
(`yanami.contract`) checks. The validator's fast path runs it on decoded objects that mirror the
models field by field."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from yanami.contract import CHOICE_LETTERS, CheckKind, Dialogue, ImageSource, UnknownFamily, family_of

Loc = tuple[str | int, ...]

_CAPABILITY = CheckKind.CAPABILITY
_ASSISTANT = ImageSource.ASSISTANT


class DialogueWalk:
    """One pass over a dialogue: its consistency problems, ids, image hashes and image parts.

    `dialogue_problems` is the public face; the dataset validator also reads the ids
    and hashes (to check their patterns in one regex call each) and the image parts,
    each as ``(turn index, "user" | "assistant", part index, part)``.
    """

    __slots__ = ("dialogue", "ids", "images", "n_checks", "problems", "shas")

    def __init__(self, d: Any) -> None:
        # Reads attributes only, and compares enums by value, so it also accepts the
        # fast decoder's objects (yanami.store), which mirror these models field by field.
        # Written for speed: validation runs this on every line of a dataset.
        out: list[tuple[Loc, str]] = []
        ids: list[str] = [d.id]
        images: list[tuple[int, str, int, Any]] = []
        shas: list[str] = []
        turns = d.turns
        check_ids: dict[str, Any] = {}
        used: set[str] = set()
        n_checks = 0
        family = d.family
        kinds: Collection[str]
        try:
            facts = family_of(family)
            kinds = facts.check_kinds
        except UnknownFamily as exc:
            out.append((("family",), str(exc)))
            facts, kinds = None, ()
        by_scenario = facts is not None and facts.by_scenario
        needs_reference = facts is not None and facts.checks_need_reference
        if facts is not None and by_scenario:
            if d.scenario is None:
                out.append((("scenario",), f"a {facts.title} dialogue needs a scenario"))
            if d.domain is not None:
                out.append((("domain",), f"a {facts.title} dialogue has a scenario, not a domain"))
        elif facts is not None:
            if d.scenario is not None:
                out.append((("scenario",), f"a {facts.title} dialogue has a domain, not a scenario"))
            if d.domain is None:
                out.append((("domain",), f"a {facts.title} dialogue needs a domain"))
            elif not facts.open_domains and facts.class_of(d.domain) is None:
                out.append((("domain",), f"{d.domain!r} is not a {facts.title} domain"))
        for i, t in enumerate(turns):
            if t.index != i:
                out.append((("turns", i, "index"), f"turn indices must run 0, 1, 2, …: expected {i}, got {t.index}"))
            user, assistant = t.user, t.assistant
            if user.role != "user":
                out.append((("turns", i, "user", "role"), f"expected 'user', got {user.role!r}"))
            if assistant.role != "assistant":
                out.append((("turns", i, "assistant", "role"), f"expected 'assistant', got {assistant.role!r}"))
            for j, p in enumerate(user.parts):
                if p.type == "image":
                    images.append((i, "user", j, p))
                    shas.append(p.sha256)
            generated = False
            for j, p in enumerate(assistant.parts):
                if p.type == "image":
                    images.append((i, "assistant", j, p))
                    shas.append(p.sha256)
                    if p.source == _ASSISTANT:
                        generated = True
            used.update(t.capabilities)
            if t.references:
                _refs(out, turns, i, ("turns", i, "references"), t.references)
            answer = t.answer
            if answer is not None:
                if t.checks:
                    out.append((("turns", i, "answer"), "a turn is graded by its checks or by its answer, not both"))
                for a, letter in enumerate(answer.letters):
                    if letter not in CHOICE_LETTERS:
                        out.append((("turns", i, "answer", "letters", a), f"{letter!r} is not an option letter A-G"))
                if answer.dynamic and not t.references:
                    out.append((("turns", i, "answer", "dynamic"), "a dynamic answer needs the turns it depends on"))
            checks = t.checks
            if not checks:
                continue
            if needs_reference and not generated:
                out.append((("turns", i, "checks"), "a turn with checks needs an assistant-generated image"))
            n_checks += len(checks)
            for j, c in enumerate(checks):
                cid = c.id
                ids.append(cid)
                if cid in check_ids:
                    out.append((("turns", i, "checks", j, "id"), f"duplicate check id {cid!r}"))
                check_ids[cid] = c
                if c.kind not in kinds:
                    allowed = ", ".join(kinds)
                    out.append((("turns", i, "checks", j, "kind"), f"a {family} dialogue's checks are {allowed}"))
                if c.capability is None and c.kind == _CAPABILITY:
                    out.append((("turns", i, "checks", j, "capability"), "a capability check needs a capability"))
                if c.references:
                    _refs(out, turns, i, ("turns", i, "checks", j, "references"), c.references, judged=True)
        if len(set(d.capabilities)) != len(d.capabilities):
            out.append((("capabilities",), "duplicate capability"))
        missing = used.difference(d.capabilities)
        if missing:
            names = ", ".join(sorted(str(c) for c in missing))
            out.append((("capabilities",), f"turns exercise capabilities the dialogue does not list: {names}"))
        question_ids: set[str] = set()
        n = len(turns)
        for k, q in enumerate(d.questions):
            ids.append(q.id)
            if q.id in question_ids:
                out.append((("questions", k, "id"), f"duplicate question id {q.id!r}"))
            question_ids.add(q.id)
            if q.after_turn >= n:
                out.append(
                    (("questions", k, "after_turn"), f"turn {q.after_turn} does not exist (the dialogue has {n})")
                )
            for a, cid in enumerate(q.aligned_checks):
                ids.append(cid)
                if cid not in check_ids:
                    out.append((("questions", k, "aligned_checks", a), f"check {cid!r} does not exist"))
                elif check_ids[cid].kind != _CAPABILITY:
                    out.append((("questions", k, "aligned_checks", a), f"check {cid!r} is not a capability check"))
            if q.choices:
                letters = CHOICE_LETTERS[: len(q.choices)]
                if not q.answer_letters:
                    out.append((("questions", k, "answer_letters"), "a question with choices needs answer letters"))
                for a, letter in enumerate(q.answer_letters):
                    if letter not in letters:
                        out.append(
                            (("questions", k, "answer_letters", a), f"{letter!r} is not one of the options {letters}")
                        )
            elif q.answer_letters:
                out.append((("questions", k, "answer_letters"), "answer letters without choices"))
        self.dialogue = d
        self.problems = out
        self.ids = ids
        self.images = images
        self.shas = shas
        self.n_checks = n_checks


def _refs(out: list[tuple[Loc, str]], turns: Any, i: int, loc: Loc, refs: Any, *, judged: bool = False) -> None:
    """References from turn ``i``: to an earlier turn, or to its own user message; a check's
    references (``judged``: what a judge compares with) may also name the turn's own reference image."""
    for r, ref in enumerate(refs):
        where = (*loc, r)
        own = judged and ref.turn == i and ref.side == "assistant" and ref.of == "data"
        if ref.turn > i or (ref.turn == i and ref.side == "assistant" and not own):
            out.append(((*where, "turn"), f"turn {i} cannot depend on turn {ref.turn}'s {ref.side} message (later)"))
            continue
        if ref.of == "model" and ref.side != "assistant":
            out.append(((*where, "of"), "only an assistant message has a model version"))
        if ref.image is not None and ref.of == "data":
            msg = turns[ref.turn].user if ref.side == "user" else turns[ref.turn].assistant
            n = sum(1 for p in msg.parts if p.type == "image")
            if ref.image >= n:
                out.append(((*where, "image"), f"turn {ref.turn}'s {ref.side} message has {n} image(s)"))


def dialogue_problems(d: Dialogue) -> list[tuple[Loc, str]]:
    """Return what is inconsistent inside one dialogue, as (field location, message) pairs.

    The field types are already valid here; this checks ordering, references and the
    rules that span fields (turn indices, roles, check and question ids, capabilities).
    """
    return DialogueWalk(d).problems
