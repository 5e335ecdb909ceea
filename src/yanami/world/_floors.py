"""The trivial floors of a world dialogue, turn by turn: what a table shows as the bench's floor.

The audit sums the floors over a bench (`yanami.world._audit`); a table needs them per
dialogue and per target turn, to score them with the same equations as a run over the same
dialogues (`yanami.scoring`, "Floor"). Each trivial strategy's picture is read as the exact
judge reads a candidate, under GT-History.
"""

from __future__ import annotations

from yanami.contract import Dialogue
from yanami.world._audit import CLEAN, FLOORS, Audit, _floors, pictured_turns
from yanami.world._hidden import turn_intent
from yanami.world._ops import apply_op

FLOOR_VQ = {name: 10.0 if name in CLEAN else 0.0 for name in (*FLOORS, "stateless")}
"""Each strategy's Visual Quality (0-10): a clean world render reads 10, a picture with no object 0."""


def floor_shares(d: Dialogue) -> dict[str, dict[int, float]]:
    """Per trivial strategy (and ``stateless``): target turn -> the share of its atomic checks the
    strategy's picture passes, under GT-History (turns without atomic checks left out)."""
    seed = d.meta.seed if d.meta.seed is not None else 0
    out: dict[str, dict[int, float]] = {}
    for t, after, before, shown in pictured_turns(d):
        if t.checks and before is not None and shown:
            stateless = turn_intent(t).stateless
            naive = apply_op(stateless, shown[-1], shown) if isinstance(stateless, dict) else shown[-1]
            one = Audit()
            _floors(one, d, t, after, shown, naive, seed)
            for name, sc in one.floor_sc.items():
                out.setdefault(name, {})[t.index] = sc
    return out
