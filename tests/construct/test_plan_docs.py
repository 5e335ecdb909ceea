"""The docs' example plan is one yanami accepts, and ``yanami schema --of plan`` describes it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from yanami.construct import Plan, plan_problems

DOC = Path(__file__).resolve().parents[2] / "docs" / "construct.md"


def test_the_example_plan_in_the_docs_passes_yanamis_own_checks(cli) -> None:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- example-plan -->\n```json\n(.*?)\n```\n<!-- /example-plan -->", text, re.S)
    assert block is not None
    raw = json.loads(block.group(1))
    plan = Plan.model_validate(raw)
    assert plan_problems(plan, offered=1, bench=True) == []
    assert {q.type.value for q in plan.questions} == {"RR", "CR", "CT", "CU"}
    broken = plan.model_copy(deep=True)
    assert broken.turns[2].image is not None
    broken.turns[2].image.instruction += " Add a red vase."
    assert plan_problems(broken, offered=1, bench=True) == [
        "turns[2].image.instruction: names 'red', which constraint k1 (from turn 0) forbids"
    ]
    r = cli("schema", "--of", "plan")
    assert r.code == 0
    schema = json.loads(r.out)
    assert set(schema["required"]) >= {"capabilities", "turns"} and set(raw) <= set(schema["properties"])
