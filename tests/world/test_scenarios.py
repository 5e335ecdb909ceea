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
from yanami.contract import FACTS, PRESETS, Preset, Scenario, parse_scenarios
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
    # WEAVE's facts name its domains, one of which is also called "fusion", and OpenING's a
    # meta-task "Interactive Image Editing": other concepts
    allowed = {root / "core" / "_scenarios.py", root / "families" / "weave" / "__init__.py"}
    allowed.add(root / "families" / "opening" / "__init__.py")
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
# calls fine are the ones the user names again); issue 33's picture-only CR questions (which
# object stood furthest to a side in a picture the user showed; fusion's sources have four
# objects each) and corrected corrections (fusion and editing correct the correction).
COMPOSED_SHA256 = "736c5c25a52bb6750e8fdd97fbc8087be6a3ab135736727373bbb4130f82befb"


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


def _stand_in_renderer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        yanami.world._compose, "render_png", lambda scene, azimuth, style: repr((scene, azimuth, style)).encode()
    )


def _described(o: dict[str, Any]) -> str:
    return f"the {o['size']} {o['colour']} {o['material']} {o['shape']}"


def test_a_cr_question_asks_where_an_object_stood_in_a_picture_the_user_showed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every CR question asks about a picture the user showed (the first, or in fusion any source):
    its options are that picture's objects, whose listing names them all and never where they stand."""
    _stand_in_renderer(monkeypatch)
    pictures: set[str] = set()
    for s in Scenario:
        for i in range(8):
            d, _ = compose_dialogue(s, f"world-{s.value}-{i:06d}", 42)
            cr = next(q for q in d.questions if q.type.value == "CR")
            m = re.match(r"In (the first picture|picture (\d+)), which object stood (furthest|nearest) ", cr.text)
            assert m, cr.text
            k = int(m.group(2)) - 1 if m.group(2) else 0
            pictures.add(m.group(1) if s.value != "fusion" else "source")
            shown = d.turns[k]  # the user's pictures come first, one a turn
            assert any(p.type == "image" for p in shown.user.parts)
            objects = {_described(o) for o in shown.hidden.state["scene"]}
            assert cr.answer in objects and set(cr.choices or []) <= objects and len(cr.choices or []) == 4
            said = " ".join(
                p.text for t in d.turns for m_ in (t.user, t.assistant) for p in m_.parts if p.type == "text"
            )
            assert not re.search(r"\b(left|right|front|behind|nearest|furthest)\b[^.]*" + cr.answer[4:], said)
    assert pictures == {"the first picture", "source"}


def test_a_corrected_correction_makes_each_colour_the_answer_but_the_current_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fusion and editing correct the edit of "it", then that correction. The CU answer is never the
    colour the object has when the last correction comes, and each of the colours a reader could
    name (before any edit, after the first, after the edit of "it", one passed over) is the answer
    of some dialogues: the colour before any correction (which the first one replaced) as well."""
    _stand_in_renderer(monkeypatch)
    roles: dict[str, int] = {}
    for s in (Scenario("editing"), Scenario("fusion")):
        for i in range(30):
            d, _ = compose_dialogue(s, f"world-{s.value}-{i:06d}", 7)
            cu = next(q for q in d.questions if q.type.value == "CU")
            last = int(re.search(r"turn (\d+)", cu.text).group(1)) - 1  # type: ignore[union-attr]
            first = d.turns[last - 1].hidden.intent["op"]  # the turn before sets the same colour: the first correction
            assert first["op"] == "set" and first["attr"] == "colour"
            where = d.turns[last].hidden.intent["op"]["where"]
            before = d.turns[last - 1].hidden.state["scene"]
            me = next(o for o in before if all(o.get(k) == v for k, v in where.items()))
            key = (me["id"], me["shape"], me["size"], me["material"])
            colours: list[str] = []  # the object's colours, oldest first, each once in a row
            for t in range(last - 1, -1, -1):
                scene = d.turns[t].hidden.state["scene"]
                o = next((o for o in scene if (o["id"], o["shape"], o["size"], o["material"]) == key), None)
                if o is None:
                    break
                if not colours or colours[0] != o["colour"]:
                    colours.insert(0, o["colour"])
            assert cu.answer != colours[-1]  # never the colour it has now
            kinds = ("before any edit", "after the first edit", "after the edit of it")
            named = {c: r for r, c in zip(kinds, colours[-4:-1], strict=False)}
            role = named.get(cu.answer, "passed over")
            roles[role] = roles.get(role, 0) + 1
    assert set(roles) == {"before any edit", "after the first edit", "after the edit of it", "passed over"}, roles
    assert max(roles.values()) <= 0.4 * sum(roles.values()), roles
