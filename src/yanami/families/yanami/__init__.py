"""YANAMI's own facts as a family: dialogues grouped by scenario, atomic and capability checks
that pass or fail on the assistant's reference image, scored by `yanami.scoring`."""

from yanami.contract import CheckKind, FamilyFacts

FACTS = FamilyFacts(
    "yanami",
    "YANAMI",
    "yanami-1",
    {},
    self_history_min_turns=2,
    check_kinds={CheckKind.ATOMIC.value: 1, CheckKind.CAPABILITY.value: 1},
    by_scenario=True,
    checks_need_reference=True,
)
