"""Agreement coefficients: the libraries' numbers on cases worked by hand, and n/a where undefined."""

from __future__ import annotations

import pytest

from yanami.review._annotators import agreement, alpha, cohen, fleiss


def test_fleiss_kappa_on_decisions() -> None:
    assert fleiss([["approve"] * 3, ["reject"] * 3, ["refine"] * 3]) == pytest.approx(1.0)
    # two subjects, three raters: P_i = 1/3 each; p = (1/2, 1/2, 0); P_e = 1/2 -> kappa = (1/3 - 1/2)/(1/2) = -1/3
    assert fleiss([["approve", "approve", "reject"], ["reject", "reject", "approve"]]) == pytest.approx(-1 / 3)
    assert fleiss([["approve"] * 3, ["approve"] * 3]) is None  # one category everywhere: undefined
    assert fleiss([["approve"]]) is None
    # the most common rater count is used: the 2-rater subject is left out
    assert fleiss([["approve"] * 3, ["reject"] * 3, ["approve", "reject"]]) == pytest.approx(1.0)


def test_krippendorff_alpha_on_check_verdicts() -> None:
    raters = ["a", "b"]
    assert alpha([{"a": "pass", "b": "pass"}, {"a": "fail", "b": "fail"}], raters) == pytest.approx(1.0)
    # nominal, 2 raters, 2 units disagreeing completely: observed 1, expected 4/6 -> alpha = 1 - 1/(2/3) = -0.5
    assert alpha([{"a": "pass", "b": "fail"}, {"a": "fail", "b": "pass"}], raters) == pytest.approx(-0.5)
    assert alpha([{"a": "pass", "b": "pass"}], raters) is None
    assert alpha([{"a": "pass"}], raters) is None


def test_agreement_per_group_and_per_annotator() -> None:
    rows = [
        {
            "group": "fusion",
            "decisions": {"a": "approve", "b": "approve"},
            "checks": {"a": {"c1": "pass"}, "b": {"c1": "fail"}},
        },
        {"group": "editing", "decisions": {"a": "reject", "b": "approve"}, "checks": {}},
    ]
    result = agreement(rows)
    assert set(result["per_group"]) == {"fusion", "editing"}
    assert result["per_annotator"]["a"] == {
        "decisions": 2,
        "decision_kappa": 0.0,  # po = 1/2; a: approve, reject; b: approve twice -> pe = 1/2
        "check_kappa": 0.0,  # one (pass, fail) pair: po = 0, pe = 0
        "decision_agreement": 0.5,
        "check_agreement": 0.0,
    }
    assert result["overall"]["decided_by_two_or_more"] == 2


def test_cohens_kappa_against_the_others_majority() -> None:
    cats = ["approve", "refine", "reject"]
    # po = 3/4; rater approve 1/2, reject 1/2; reference approve 1/4, reject 3/4 -> pe = 1/2 -> kappa 1/2
    pairs = [("approve", "approve"), ("approve", "reject"), ("reject", "reject"), ("reject", "reject")]
    assert cohen(pairs, cats) == pytest.approx(0.5)
    assert cohen([("approve", "approve"), ("reject", "reject")], cats) == pytest.approx(1.0)
    assert cohen([("approve", "approve")] * 3, cats) is None  # one category: chance agreement is 1
    assert cohen([], cats) is None
    # three annotators: c against the majority of a and b; where a and b split there is no majority
    rows = [
        {"group": "g", "decisions": {"a": "approve", "b": "approve", "c": "approve"}, "checks": {}},
        {"group": "g", "decisions": {"a": "reject", "b": "reject", "c": "approve"}, "checks": {}},
        {"group": "g", "decisions": {"a": "reject", "b": "reject", "c": "reject"}, "checks": {}},
        {"group": "g", "decisions": {"a": "reject", "b": "reject", "c": "reject"}, "checks": {}},
        {"group": "g", "decisions": {"a": "approve", "b": "reject", "c": "refine"}, "checks": {}},
    ]
    per = agreement(rows)["per_annotator"]
    assert per["c"]["decision_kappa"] == pytest.approx(0.5)  # the four items above, the split one left out
    # a against the majority of b and c: (approve, approve), (reject, ?), (reject, reject) x2, (approve, ?)
    assert per["a"]["decision_kappa"] == pytest.approx(1.0)
