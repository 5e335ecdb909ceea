"""Which dialogues a run evaluates, read from the bench as far as needed and no further.

`select_dialogues` is the rule (``--limit N``: the first N dialogues round-robin over the
groups, prefix-stable so a run can be extended); `Selection` applies it to a bench on disk
while streaming it: with a limit it stops reading once no later dialogue can change the
choice, and keeps only where each chosen dialogue is (`Pick`), reading it again when its
turn comes; without one it is the whole bench in order, read as it is evaluated. A selection
of no more than `KEPT` dialogues is kept from the first read instead. Memory follows the work
(the limit), never the size of the bench.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar, cast

from yanami.contract import Dialogue, Scenario, UnknownFamily, UserError, family_of, group_of
from yanami.store._reader import Dataset, Location, Scanned, collector_paused


class Grouped(Protocol):
    """What the selection rule reads of a dialogue."""

    @property
    def id(self) -> str: ...

    @property
    def group(self) -> str: ...


D = TypeVar("D", bound=Grouped)


def select_dialogues(dialogues: Sequence[D], limit: int | None) -> list[D]:
    """The first ``limit`` dialogues taken round-robin over scenarios (all, in bench order, when None).

    The selection is prefix-stable: the dialogues of a smaller limit are the first ones of
    a larger limit's, which is what lets a run be extended with a larger ``--limit``.
    """
    if limit is None:
        return list(dialogues)
    by: dict[str, list[D]] = {}
    for d in dialogues:
        by.setdefault(d.group, []).append(d)
    out: list[D] = []
    k = 0
    while len(out) < min(limit, len(dialogues)):
        for group in by.values():
            if k < len(group) and len(out) < limit:
                out.append(group[k])
        k += 1
    return out


class Pick(NamedTuple):
    """A dialogue the selection read: its id, group, where it is and how many items it gives."""

    id: str
    group: str
    where: Location | None
    """None for a dialogue the caller handed over in memory."""
    items: int


def groups_of(family: str) -> frozenset[str] | None:
    """Every group a dialogue of ``family`` can have (its scenarios, or its domains); None where
    the family's domains are open, or the family unknown."""
    try:
        facts = family_of(family)
    except UnknownFamily:
        return None
    if facts.by_scenario:
        return frozenset(s.value for s in Scenario)
    return None if facts.open_domains else frozenset(facts.domains())


BATCH = 32
"""The most dialogues a selection makes at once from the lines it kept (`Selection._made`)."""

KEPT = 1024
"""Dialogues a selection keeps from its first read, where it chooses no more than that: a run
then reads the bench once, not once to choose and again to evaluate."""


class Selection:
    """The dialogues of a run, in the order it evaluates them (`select_dialogues` on the bench).

    ``count`` gives each dialogue's number of items (0: the run skips it). ``also`` is another
    limit whose selection must be known too (that of the run being resumed); ``loaded``: the
    bench's dialogues, already in memory. Iterating reads the chosen dialogues again, one
    at a time, unless there are no more than `KEPT` of them (then they are kept from the first
    read). A dialogue id used twice among those read is a one-line `UserError`.
    """

    def __init__(
        self,
        dataset: Dataset,
        limit: int | None,
        count: Callable[[Dialogue], int],
        *,
        also: int | None = None,
        loaded: list[Dialogue] | None = None,
        on_duplicate: Callable[[str], UserError] | None = None,
    ) -> None:
        self.dataset, self.limit = dataset, limit
        self._loaded: dict[str, Dialogue | Scanned] | None = {d.id: d for d in loaded} if loaded is not None else None
        """What the selection holds: the caller's dialogues, or the lines it kept from its own
        reading (made `Dialogue`s only as they are handed out, `Dataset.dialogue`)."""
        self._given = loaded is not None
        """Whether the dialogues were handed over by the caller (who keeps them), not read here."""
        self._duplicate = on_duplicate or (lambda i: UserError(f"{dataset.root}: the dialogue id {i!r} is used twice"))
        wide = None if limit is None else max(limit, also or 0)
        self.pool: list[Pick] = []
        """What was read, in bench order (with a limit: at most that many of each group)."""
        self.items = 0
        """The items of the chosen dialogues."""
        with collector_paused():  # (the lines it keeps)
            if wide is None:
                self.chosen: list[Pick] | None = None
                self.items = self._scan_all(count, loaded)
            else:
                self.pool = self._scan(wide, count, loaded)
                self.chosen = select_dialogues(self.pool, limit)
                self.items = sum(p.items for p in self.chosen)

    def __len__(self) -> int:
        return len(self.dataset) if self.chosen is None else len(self.chosen)

    def __iter__(self) -> Iterator[Dialogue]:
        """The chosen dialogues, in order, read one at a time."""
        if self._loaded is not None:
            yield from self._made(self._loaded, keep=True)
        elif self.chosen is None:
            yield from self.dataset
        else:
            for p in self.chosen:
                assert p.where is not None
                yield self.dataset.read_at(p.where)

    def fields(self) -> Iterator[Any]:
        """The chosen dialogues' fields (`Scanned.fields`), in order, as `__iter__` gives the
        dialogues but without making `Dialogue`s where they are not made yet (a check that reads
        every chosen dialogue before the run, such as the exact judge's, costs no more than a scan)."""
        if self._loaded is not None:
            source = self._loaded
            for i in self._order(source):
                kept = source[i]
                yield kept.fields if isinstance(kept, Scanned) else kept
        elif self.chosen is None:
            yield from self.dataset.fields()
        else:
            yield from self

    def release(self) -> Iterator[Dialogue]:
        """The chosen dialogues, as iterating gives them, each let go by the selection as it is
        handed out: what it kept from its own reading is freed a chain at a time as a run goes,
        not all at once at its end. Iterating again reads them again. Dialogues the caller handed
        over stay (the caller holds them: freeing them frees nothing)."""
        if self._given or self._loaded is None:
            yield from self
            return
        kept, self._loaded = self._loaded, None
        yield from self._made(kept, keep=False)

    def ids(self, limit: int | None) -> list[str] | None:
        """The ids `select_dialogues` chooses under another ``limit`` from what was read (for
        comparing a resumed run's selection); None where that needs the whole bench."""
        if self.chosen is None or limit is None:
            return None
        return [p.id for p in select_dialogues(self.pool, limit)]

    def _order(self, held: dict[str, Dialogue | Scanned]) -> list[str]:
        """The ids of what the selection holds, in the order it gives them."""
        return list(held) if self.chosen is None else [p.id for p in self.chosen]

    def _made(self, held: dict[str, Dialogue | Scanned], *, keep: bool) -> Iterator[Dialogue]:
        """What the selection holds, in order, made `Dialogue`s (pydantic) where it holds a line it
        read: as the run hands them out rather than all before its first request, a batch at a time
        (4, 8, 16, then 32) with the collector paused. Made one at a time amid the run's requests,
        their objects kept the collector's young generations busy: 100 dialogues of 25 KB, 35 to
        80 ms. ``keep``: each made one replaces its line in ``held`` (a judge that reads the run's
        dialogues before it runs makes them once, not again when the run hands them out); else
        each leaves ``held`` as it is handed out."""
        ids = iter(self._order(held))
        batch = 4
        while chunk := list(itertools.islice(ids, batch)):
            made = [held[i] if keep else held.pop(i) for i in chunk]
            if any(isinstance(k, Scanned) for k in made):
                with collector_paused():
                    made = [self.dataset.dialogue(k) if isinstance(k, Scanned) else k for k in made]
                if keep:
                    held.update(zip(chunk, made, strict=True))
            made.reverse()
            while made:
                yield cast(Dialogue, made.pop())  # (held here no longer than until it is handed out)
            batch = min(2 * batch, BATCH)

    def _read(self, loaded: list[Dialogue] | None) -> Iterator[tuple[Scanned | None, Any]]:
        """(what was read, the dialogue's fields) for each dialogue: read from the bench on the fast
        path (`Dataset.scanned`), or the caller's (nothing read)."""
        if loaded is not None:
            return ((None, d) for d in loaded)
        return ((s, s.fields) for s in self.dataset.scanned())

    def _scan_all(self, count: Callable[[Dialogue], int], loaded: list[Dialogue] | None) -> int:
        seen: set[str] = set()
        items = 0
        kept: dict[str, Dialogue | Scanned] | None = {} if loaded is None and len(self.dataset) <= KEPT else None
        for scanned, d in self._read(loaded):
            if d.id in seen:
                raise self._duplicate(d.id)
            seen.add(d.id)
            items += count(d)
            if kept is not None and scanned is not None:
                kept[d.id] = scanned
                if len(kept) > KEPT:  # (the manifest's count was wrong)
                    kept = None
        if kept is not None:
            self._loaded = kept
        return items

    def _scan(self, limit: int, count: Callable[[Dialogue], int], loaded: list[Dialogue] | None) -> list[Pick]:
        """Read until no later dialogue can change the first ``limit``: every group the family
        can have is seen, and each has at least its share of the rounds the limit takes."""
        known = groups_of(self.dataset.manifest.family)
        kept: dict[str, int] = {}
        seen: set[str] = set()
        pool: list[Pick] = []
        held: dict[str, Dialogue | Scanned] | None = {} if loaded is None else None
        for scanned, d in self._read(loaded):
            if d.id in seen:
                raise self._duplicate(d.id)
            seen.add(d.id)
            group = group_of(d)
            n = kept.get(group, 0)
            if n < limit:  # no group gives more than the limit
                kept[group] = n + 1
                pool.append(Pick(d.id, group, None if scanned is None else scanned.where, count(d)))
                if held is not None and scanned is not None:
                    held[d.id] = scanned
                    if len(held) > KEPT:
                        held = None
            if known is not None and known <= kept.keys():
                rounds = math.ceil(limit / len(kept))
                if min(kept.values()) >= rounds:
                    break
        if held is not None:
            self._loaded = held
        return pool
