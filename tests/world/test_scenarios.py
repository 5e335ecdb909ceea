"""The scenario facts table, what derives from it, and the scripts that compose each scenario."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import yanami
import yanami.world._compose
from yanami.scenarios import FACTS, PRESETS, Preset, Scenario, parse_scenarios
from yanami.world._build import TRAIN_MIX
from yanami.world._scenarios import COMPOSERS, compose_dialogue


def test_the_facts_table_and_the_enum_agree_one_to_one() -> None:
    assert list(FACTS) == list(Scenario)
    assert all(f.scenario is s for s, f in FACTS.items())
    numbers = [n for f in FACTS.values() for n in (f.dsu_table, f.realization_table)]
    assert sorted(numbers) == list(range(12, 20))  # the paper's Tables 12-19, each once
    assert len({f.short for f in FACTS.values()}) == len({f.title for f in FACTS.values()}) == len(FACTS)
    assert sum(f.train_share for f in FACTS.values()) == pytest.approx(1.0)
    assert [p.value for p in Preset] == list(PRESETS)


def test_every_scenario_has_one_composer_module_named_by_its_value() -> None:
    package = Path(yanami.world._scenarios.__file__).parent
    assert {p.stem for p in package.glob("*.py") if not p.stem.startswith("_")} == {s.value for s in Scenario}
    assert list(COMPOSERS) == list(Scenario)
    for s, compose in COMPOSERS.items():
        assert compose.__module__ == f"yanami.world._scenarios.{s.value}"


def test_a_new_scenario_touches_two_files() -> None:
    """Only the facts table and a scenario's own world module spell a scenario out; the
    scores, tables, build mix and command line derive from the table."""
    root = Path(yanami.__file__).parent
    pattern = re.compile(
        "|".join(
            [rf"[\"']{s.value}[\"']" for s in Scenario]
            + [rf"\bScenario\.{s.name}\b" for s in Scenario]
            + [re.escape(f.title) for f in FACTS.values()]
        )
    )
    # families.py names WEAVE's domains, one of which is also called "fusion": another concept
    allowed = {root / "scenarios.py", root / "families.py"}
    allowed |= {root / "world" / "_scenarios" / f"{s.value}.py" for s in Scenario}
    offenders = [
        f"{path.relative_to(root)}:{n}: {line.strip()}"
        for path in sorted(root.rglob("*"))
        if path.suffix in (".py", ".j2") and path not in allowed
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []


def test_scores_tables_and_build_mix_derive_from_the_table() -> None:
    from yanami.scoring import SCENARIOS
    from yanami.scoring._scores import SCENARIO_TITLES
    from yanami.scoring._tables import tables

    assert tuple(s.value for s in Scenario) == SCENARIOS
    assert {s.value: f.title for s, f in FACTS.items()} == SCENARIO_TITLES
    assert {s: f.train_share for s, f in FACTS.items()} == TRAIN_MIX
    titles = {t.key: t.title for t in tables([], [])}
    for f in FACTS.values():
        assert titles[f"table{f.dsu_table}"].endswith(f.title)
        assert titles[f"table{f.realization_table}"].endswith(f.title)
    table2 = next(t for t in tables([], []) if t.key == "table2")
    assert table2.header[1 : 1 + len(FACTS)] == [f.short for f in FACTS.values()]


def test_build_help_lists_the_choices_and_an_unknown_scenario_is_one_line(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    r = cli("build", "--help")
    assert r.code == 0
    text = " ".join(r.out.split())
    assert "<bench|train|tiny>" in text
    for s in Scenario:
        assert s.value in text
    r = cli("build", "--out", tmp_path / "b", "--scenarios", "fusion,painting")
    assert r.code == 2
    assert r.err.strip() == (
        "error: --scenarios: unknown scenario 'painting' (choose from fusion, editing, world_modeling, reasoning)"
    )
    r = cli("build", "--out", tmp_path / "b", "--scenarios", "fusion,fusion")
    assert r.code == 2 and "given twice" in r.err
    assert not (tmp_path / "b").exists()


def test_parse_scenarios_keeps_the_order_given() -> None:
    assert parse_scenarios(" reasoning,,fusion ") == [Scenario.REASONING, Scenario.FUSION]
    assert parse_scenarios("") == []


# A refactor of the move skeleton must leave every dialogue byte for byte as it was. Only a
# deliberate change of a script's output may update it; last: issue 11 (the bench's shape: a
# one-picture scenario opens with the picture and the rule in one message; fusion asks its
# rule and what to combine in one message, from 2 or 3 source pictures); then issue 13, whose
# schema 1.1 adds fields (family, domain, answer, references) with defaults: every line gains them,
# the scripts' output is unchanged; then issue 21 (questions only state tracking answers: rules
# named through things and places, references by listing order, replies that do not give the
# answer away, distractors chosen against a shallow reader, letters drawn per question); then
# issue 21's throughput (a push, a move and a placement try every choice with room before the
# dialogue starts over; a scene without room for what a later turn adds is dropped at once; a
# turn's change checks are worked out only as far as needed); issue 33's stays checks (one per
# object whose place the words fix, stated in place of a kept check that the object is there);
# issue 33's answer places (a correction goes back before the last or an earlier edit, or to a
# colour the user passed over; a colour ban is acknowledged in varied frames and the colours it
# calls fine are the ones the user names again).
COMPOSED_SHA256 = "9de89355837794b73f1e93c6d87d0abb5df73eec27e1f157e1184e246b291d6d"


def test_scripts_compose_exactly_the_pinned_dialogues(monkeypatch: pytest.MonkeyPatch) -> None:
    # A stand-in renderer keeps it fast: what is pinned is the scripts' output (turns,
    # words, checks, questions, hidden state), not the pixels.
    monkeypatch.setattr(
        yanami.world._compose, "render_png", lambda scene, azimuth, style: repr((scene, azimuth, style)).encode()
    )
    h = hashlib.sha256()
    for s in Scenario:
        for i in range(6):
            d, images = compose_dialogue(s, f"world-{s.value}-{i:06d}", 42)
            h.update(d.model_dump_json(exclude={"meta": {"version"}}).encode())
            for sha in sorted(images):
                h.update(images[sha])
    assert h.hexdigest() == COMPOSED_SHA256


def test_a_colour_ban_names_its_colour_nowhere_and_its_four_options_are_alike() -> None:
    """A colour ban's four colours (the banned one and the CT question's three distractors) are
    named in no message, taken by no object of any picture and offered by no other question, so
    nothing but the rule (through an everyday thing) tells the answer from the distractors."""
    bans = 0
    for s in Scenario:
        for i in range(6):
            d, _ = compose_dialogue(s, f"world-{s.value}-{i:06d}", 42)
            ct = next(q for q in d.questions if q.type.value == "CT")
            if "ruled out" not in ct.text:
                continue
            bans += 1
            four = set(ct.choices or [])
            assert len(four) == 4 and ct.answer in four and "cyan" not in four
            words = {w for t in d.turns for m in (t.user, t.assistant) for p in m.parts
                     if p.type == "text" for w in re.findall(r"[a-z]+", p.text.lower())}  # fmt: skip
            assert not words & four, (d.id, words & four)
            colours = {o["colour"] for t in d.turns if isinstance(t.hidden.state, dict)
                       for o in t.hidden.state.get("scene") or []}  # fmt: skip
            assert not colours & four, (d.id, colours & four)
            offered = {w for q in d.questions if q is not ct for c in q.choices or [] for w in c.split()}
            assert not offered & four, (d.id, offered & four)
    assert bans >= 12  # fusion always bans a colour, the others mostly
