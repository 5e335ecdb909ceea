"""The paper's equations as plain arithmetic, and the analyses across runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from yanami.scoring import (
    DialogueRecord,
    Run,
    history_effect,
    progression,
    run_scores,
    scenario_scores,
    scene_score,
    understanding_realization_gap,
)


@pytest.mark.parametrize(
    ("understanding", "sc", "vq", "expected"),
    [
        (80.0, 70.0, 90.0, 0.4 * 80 + 0.4 * 70 + 0.2 * 90),
        (None, 70.0, 90.0, 0.6 * 70 + 0.4 * 90),
        (100.0, 100.0, 100.0, 100.0),
    ],
)
def test_scene_score_equations_2_and_3(understanding, sc, vq, expected) -> None:
    assert scene_score(understanding, sc, vq) == pytest.approx(expected)


def _rec(did: str, scenario: str = "editing", **kw) -> DialogueRecord:
    return DialogueRecord(did, scenario, **kw)


def _run(label: str, records: list[DialogueRecord], history: str = "gt", answers: bool = True) -> Run:
    manifest = {"model": label, "history": history, "layout": "yes-first", "answers": answers, "bench_sha256": "x"}
    return Run(Path(label), manifest, {r.id: r for r in records}, {"ok": 1}, 0, 1)


def test_scenario_scores_equation_1_and_component_means() -> None:
    recs = [
        _rec("a", dsu={"RR": 1.0, "CR": 0.0, "CT": 1.0, "CU": 0.5}, images={1: (1.0, 10.0), 3: (0.5, 8.0)}),
        _rec("b", dsu={"RR": 1.0, "CR": 1.0, "CT": 0.0, "CU": 0.5}, images={2: (0.0, 6.0)}),
    ]
    s = scenario_scores(recs, answers=True)
    assert s.dsu == {"RR": 100.0, "CR": 50.0, "CT": 50.0, "CU": 50.0}
    assert s.understanding == pytest.approx(62.5)  # (1)
    assert s.sc == pytest.approx(50.0)  # mean over target images of passed / total
    assert s.vq == pytest.approx(80.0)
    assert s.scene == pytest.approx(0.4 * 62.5 + 0.4 * 50 + 0.2 * 80)
    gen_only = scenario_scores(recs, answers=False)
    assert gen_only.understanding is None and gen_only.scene == pytest.approx(0.6 * 50 + 0.4 * 80)


def test_benchmark_score_is_the_macro_average_with_a_bootstrap_interval() -> None:
    recs = [_rec(f"e{k}", "editing", images={1: (1.0, 10.0)}) for k in range(5)]
    recs += [_rec(f"f{k}", "fusion", images={1: (k / 4, 10.0)}) for k in range(5)]
    s = run_scores(_run("m", recs, answers=False))
    assert s.scenarios["editing"].scene == pytest.approx(100.0)
    assert s.scenarios["fusion"].scene == pytest.approx(0.6 * 50 + 40)
    assert s.average["scene"] == pytest.approx((100 + 70) / 2)
    lo, hi = s.interval
    assert lo < s.average["scene"] < hi
    assert run_scores(_run("m", recs, answers=False)).interval == s.interval  # seeded


def test_understanding_realization_gap_equations_4_to_7() -> None:
    def rec(did, ct, cu, passed):
        return _rec(
            did,
            dsu={"CT": ct, "CU": cu},
            aligned={"CT": ["k1", "k2"], "CU": ["u1"]},
            checks={"k1": ("constraint_adherence", passed[0]), "k2": ("constraint_adherence", passed[1]),
                    "u1": ("correction_updating", passed[2])},
        )  # fmt: skip

    m1 = _run("m1", [rec("d1", 1.0, 1.0, (True, False, True)), rec("d2", 1.0, 0.0, (True, True, False))])
    m2 = _run("m2", [rec("d1", 1.0, 1.0, (True, True, False)), rec("d2", 1.0, 1.0, (False, False, False))])
    g = understanding_realization_gap([m1, m2])
    # CK: both models understood d1 and d2 -> E = {d1, d2}; CU: m1 missed d2 -> E = {d1}
    assert g["eligible"] == {"constraint_adherence": 2, "correction_updating": 1}
    assert g["gap"]["m1"]["constraint_adherence"] == pytest.approx(1 - (0.5 + 1.0) / 2)
    assert g["gap"]["m2"]["constraint_adherence"] == pytest.approx(1 - (1.0 + 0.0) / 2)
    assert g["gap"]["m1"]["correction_updating"] == pytest.approx(0.0)
    assert g["gap"]["m2"]["correction_updating"] == pytest.approx(1.0)
    assert g["gap"]["m2"]["overall"] == pytest.approx((0.5 + 1.0) / 2)


def test_progression_compares_first_and_last_generation_turns() -> None:
    run = _run("m", [_rec("a", images={1: (1.0, 10.0), 4: (0.5, 10.0)}), _rec("b", images={2: (1.0, 10.0)})])
    p = progression(run)
    assert p["dialogues"] == 1
    assert p["first"] == pytest.approx(100.0)
    assert p["last"] == pytest.approx(0.6 * 50 + 40)
    assert p["delta"] == pytest.approx(-30.0)


def test_history_effect_on_the_self_history_dialogues() -> None:
    gt = _run("m", [_rec("a", images={1: (1.0, 10.0), 2: (1.0, 10.0)}), _rec("b", images={1: (0.0, 0.0)})])
    self_ = _run("m", [_rec("a", images={1: (1.0, 10.0), 2: (0.5, 10.0)})], history="self")
    e = history_effect(gt, self_)
    assert e["dialogues"] == 1
    assert e["gt"] == pytest.approx(100.0)
    assert e["self"] == pytest.approx((100 + 70) / 2)
    assert e["drop_percent"] == pytest.approx(15.0)
