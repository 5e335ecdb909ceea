"""The paper's equations as plain arithmetic, and the analyses across runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from yanami.scoring import (
    MARK,
    SCENARIOS,
    DialogueRecord,
    Run,
    caveats,
    history_effect,
    html_table,
    image_generation_score,
    image_sc,
    label_runs,
    latex,
    markdown,
    progression,
    run_scores,
    scenario_scores,
    scene_score,
    summary_table,
    tables,
    understanding_realization_gap,
)
from yanami.scoring import warnings as comparability_warnings


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


def _run(
    label: str,
    records: list[DialogueRecord],
    history: str = "gt",
    answers: bool = True,
    *,
    path: str | None = None,
    statuses: dict[str, int] | None = None,
    expected: int = 1,
    **settings: object,
) -> Run:
    manifest = {
        "model": label,
        "model_name": label,
        "history": history,
        "layout": "yes-first",
        "answers": answers,
        "bench_sha256": "x" * 64,
        "limit": None,
        "judge": {"name": "exact", "version": "2"},
        **settings,
    }
    return Run(Path(path or label), manifest, {r.id: r for r in records}, statuses or {"ok": expected}, 0, expected)


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


# Labels: unique, saying what differs --------------------------------------------------


def _gap_record(did: str) -> DialogueRecord:
    return _rec(
        did,
        dsu={"CT": 1.0, "CU": 1.0},
        aligned={"CT": ["k1"], "CU": ["u1"]},
        checks={"k1": ("constraint_adherence", True), "u1": ("correction_updating", False)},
    )


def test_two_runs_of_one_model_never_collapse_into_one_row() -> None:
    a = _run("m", [_gap_record("d1")], path="runs/a")
    b = _run("m", [_rec("d1", dsu={"CT": 1.0, "CU": 1.0}, aligned={"CT": ["k1"], "CU": ["u1"]},
                        checks={"k1": ("constraint_adherence", False), "u1": ("correction_updating", True)})],
             path="runs/b")  # fmt: skip
    # even without naming them apart, the gap keeps both runs
    g = understanding_realization_gap([a, b])
    assert len(g["gap"]) == 2 and g["models"] == ["m", "m #2"]
    assert g["gap"]["m"]["constraint_adherence"] == 0.0 and g["gap"]["m #2"]["constraint_adherence"] == 1.0
    # named apart, the directory tells them apart
    label_runs([a, b])
    assert (a.label, b.label) == ("m (a)", "m (b)")
    g = understanding_realization_gap([a, b])
    assert set(g["gap"]) == {"m (a)", "m (b)"}
    # the same directory name twice: a number
    c, d = _run("m", [], path="x/run"), _run("m", [], path="y/run")
    label_runs([c, d])
    assert c.label != d.label


def test_labels_show_what_differs_and_a_partial_run() -> None:
    full = _run("m", [], expected=10)
    limited = _run("m", [], expected=10, limit=40, statuses={"ok": 5, "error": 5})
    other_judge = _run("n", [], expected=10, judge={"name": "gpt-judge", "version": "1"})
    selfh = _run("m", [], history="self", expected=10, layout="yes-front")
    runs = [full, limited, other_judge, selfh]
    label_runs(runs)
    assert full.label == "m (judge exact v2)"
    assert limited.label == "m (limit 40, 50 % coverage, judge exact v2)"
    assert other_judge.label == "n (judge gpt-judge v1)"
    assert selfh.label == "m (Self-History, yes-front, judge exact v2)"
    assert len({r.label for r in runs}) == len(runs)
    # a bench of its own shows in every label of the set
    a, b = _run("m", []), _run("m", [], bench_sha256="f" * 64)
    label_runs([a, b])
    assert a.label == "m (bench xxxxxxxx)" and b.label == "m (bench ffffffff)"


# Honest tables ------------------------------------------------------------------------


def _scores_of(*runs: Run) -> list:
    label_runs(list(runs))
    return [run_scores(r, bootstrap=50) for r in runs]


def test_rows_that_are_not_comparable_are_marked_in_every_format() -> None:
    recs = [_rec(f"{s}{k}", s, images={1: (1.0, 10.0)}) for s in SCENARIOS for k in range(2)]
    full = _run("m1", recs, answers=False, expected=8)
    limited = _run("m2", recs[:4], answers=False, expected=8, limit=4, statuses={"ok": 4})
    other = _run("m3", recs, answers=False, expected=8, bench_sha256="f" * 64, judge={"name": "j", "version": "1"})
    scores = _scores_of(full, limited, other)
    why = caveats(scores)
    assert why[full.label] == []
    assert any("--limit 4" in w for w in why[limited.label])
    assert any("50 % coverage" in w for w in why[limited.label])
    assert any(w.startswith("bench ffffffffffff") for w in why[other.label])
    assert any("judge j v1" in w for w in why[other.label])
    lines = comparability_warnings(scores)
    assert all("\n" not in w for w in lines)
    assert {w.split(":")[0] for w in lines} >= {"rows are not comparable", "coverage under 100 %"}
    table = summary_table(scores)
    labels = [row[0] for row in table.rows]
    assert labels[0] == full.label and labels[1] == f"{limited.label} {MARK}" and labels[2].endswith(MARK)
    for text in (markdown(table), html_table(table)):
        assert f"{limited.label} {MARK}" in text and "50 % coverage" in text
    tex = latex(table)
    assert "\\textsuperscript{\\dag}" in tex and "50 \\% coverage" in tex


def test_a_lone_partial_run_is_marked_and_histories_are_not_mixed_silently() -> None:
    recs = [_rec(f"e{k}", "editing", images={1: (1.0, 10.0)}) for k in range(3)]
    [s] = _scores_of(_run("m", recs, answers=False, expected=3))
    assert caveats([s]) == {s.label: [f"averages over 1 of {len(SCENARIOS)} scenarios"]}
    assert _cells(summary_table([s]))[5] == f"100.00 (1/{len(SCENARIOS)} scen.)"
    gt, selfh = _scores_of(_run("m", recs, expected=3), _run("m", recs, history="self", expected=3))
    why = caveats([gt, selfh])
    assert not any("History" in w for w in why[gt.label])
    assert any("Self-History, the others GT-History" in w for w in why[selfh.label])


def _cells(t) -> list[str]:
    return [str(c) for c in t.rows[0]]


def test_degenerate_bootstrap_intervals_print_as_such() -> None:
    one = [_rec(f"{s}0", s, images={1: (0.5, 10.0)}) for s in SCENARIOS]
    s = run_scores(_run("m", one, answers=False))
    assert s.interval is None and s.interval_text == "n/a (1 dialogue in Fusion)"
    same = [_rec(f"{s}{k}", s, images={1: (1.0, 10.0)}) for s in SCENARIOS for k in range(6)]
    s = run_scores(_run("m", same, answers=False))
    assert s.interval is None and s.interval_text == "n/a (every resample gives 100.00)"
    row = summary_table([s]).rows[0]
    assert "100.00-100.00" not in " ".join(map(str, row))
    spread = [_rec(f"{s}{k}", s, images={1: (k / 5, 10.0)}) for s in SCENARIOS for k in range(6)]
    s = run_scores(_run("m", spread, answers=False))
    assert s.interval is not None and s.interval_text == f"{s.interval[0]:.2f}-{s.interval[1]:.2f}"


# Scoring choices (docs/evaluation.md, "Scoring choices") -------------------------------


def test_an_image_without_atomic_checks_or_without_vq_is_left_out_of_that_component() -> None:
    assert image_sc([]) is None and image_sc([True, False, True, True]) == 0.75
    recs = [_rec("a", images={1: (None, 10.0), 2: (0.5, None), 3: (1.0, 6.0)})]
    s = scenario_scores(recs, answers=False)
    assert s.sc == pytest.approx(75.0)  # (0.5 + 1.0) / 2, not (1.0 + 0.5 + 1.0) / 3
    assert s.vq == pytest.approx(80.0)  # (10 + 6) / 2, not (10 + 0 + 6) / 3
    # progression and the History effect use the images that have both
    assert image_generation_score(None, 10.0) is None
    p = progression(_run("m", recs))
    assert p["dialogues"] == 0  # one image has both components: no first-vs-last pair


def test_a_scenario_missing_a_dsu_type_has_no_understanding_and_no_scene_score() -> None:
    recs = [_rec("a", dsu={"RR": 1.0, "CR": 1.0, "CT": 1.0}, images={1: (1.0, 10.0)})]
    s = scenario_scores(recs, answers=True)
    assert s.dsu["CU"] is None and s.understanding is None and s.scene is None
    assert s.sc == 100.0  # the other components stay


def test_the_history_effect_is_given_in_points_and_relative() -> None:
    gt = _run("m", [_rec("a", images={1: (1.0, 10.0)})])
    self_ = _run("m", [_rec("a", images={1: (0.5, 10.0)})], history="self")
    e = history_effect(gt, self_)
    assert e["drop_points"] == pytest.approx(30.0)  # 100 - 70 on 0-100
    assert e["drop_percent"] == pytest.approx(30.0)
    gt2 = _run("m", [_rec("a", images={1: (0.5, 5.0)})])  # 0.6 * 50 + 0.4 * 50 = 50
    e = history_effect(gt2, _run("m", [_rec("a", images={1: (0.0, 5.0)})], history="self"))  # 20
    assert e["drop_points"] == pytest.approx(30.0) and e["drop_percent"] == pytest.approx(60.0)


def test_the_weights_live_in_one_place(monkeypatch: pytest.MonkeyPatch) -> None:
    import yanami.scoring._weights as w
    from yanami.scoring._agreement import item_scores

    monkeypatch.setattr(
        w, "WEIGHTS", w.Weights(understanding=0.5, sc=0.5, vq=0.0, generation_sc=1.0, generation_vq=0.0)
    )
    recs = [_rec(f"e{k}", "editing", dsu=dict.fromkeys(("RR", "CR", "CT", "CU"), 1.0), images={1: (k / 5, 0.0)})
            for k in range(6)]  # fmt: skip
    s = scenario_scores(recs, answers=True)
    assert s.scene == pytest.approx(0.5 * 100 + 0.5 * s.sc)
    assert scene_score(None, 40.0, 90.0) == pytest.approx(40.0)
    run = _run("m", recs)
    assert run_scores(run).interval[1] <= 0.5 * 100 + 0.5 * 100 + 1e-9  # the bootstrap uses them too
    two = _run("m", [_rec("a", images={1: (1.0, 0.0), 2: (0.5, 0.0)})])
    assert progression(two)["first"] == pytest.approx(100.0) and progression(two)["last"] == pytest.approx(50.0)
    assert history_effect(two, _run("m", [_rec("a", images={1: (0.5, 0.0)})], history="self"))["gt"] == 75.0
    from yanami.contract import Prediction, Verdict

    p = Prediction(item="d/t1", dialogue="d", scenario="editing", kind="turn", turn=1, status="ok", seed=0)
    v = Verdict(item="d/t1", judge="exact", judge_version="2", status="ok", vq=0.0,
                checks=[{"id": "c", "kind": "atomic", "capability": None, "passed": True}])  # fmt: skip
    assert item_scores({"d/t1": p}, {"d/t1": v}) == {"d/t1": pytest.approx(1.0)}
    titles = {t.key: t.title for t in tables([two], [run_scores(two)])}
    assert "(1 SC + 0 VQ;" in titles["table20"] and "(1 SC + 0 VQ on" in titles["history"]


def test_build_run_leaves_out_an_image_without_atomic_checks_or_vq() -> None:
    from pathlib import Path

    from yanami.contract import Prediction, RunManifest, Verdict
    from yanami.scoring._scores import build_run

    preds = {
        f"d/t{k}": Prediction(
            item=f"d/t{k}", dialogue="d", scenario="editing", kind="turn", turn=k, status="ok", seed=0
        )
        for k in (1, 2)
    }
    cap = {"id": "c", "kind": "capability", "capability": "constraint_adherence", "passed": True}
    atomic = {"id": "a", "kind": "atomic", "capability": None, "passed": True}
    verdicts = {
        "d/t1": Verdict(item="d/t1", judge="exact", judge_version="2", status="ok", vq=10.0, checks=[cap]),
        "d/t2": Verdict(item="d/t2", judge="exact", judge_version="2", status="ok", vq=None, checks=[atomic]),
    }
    run = build_run(Path("r"), RunManifest.model_construct(items=2), preds, verdicts)
    assert run.dialogues["d"].images == {1: (None, 10.0), 2: (1.0, None)}
