"""Judge-reliability statistics as plain arithmetic."""

from __future__ import annotations

import pytest

from yanami.scoring._agreement import agreement, cohen_kappa, pearson, pearson_interval, ranks, spearman


def test_pearson() -> None:
    assert pearson([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx(1.0)
    assert pearson([1, 2, 3, 4], [8, 6, 4, 2]) == pytest.approx(-1.0)
    assert pearson([1, 2, 3], [5, 5, 5]) is None  # a constant rater
    assert pearson([1, 2], [1, 2]) is None  # too few pairs
    assert pearson([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]) == pytest.approx(0.8)


def test_spearman_uses_ranks_with_ties() -> None:
    assert ranks([10, 20, 20, 30]) == [1, 2.5, 2.5, 4]
    assert spearman([1, 2, 3, 4], [1, 4, 9, 16]) == pytest.approx(1.0)  # monotone, not linear


def test_cohen_kappa() -> None:
    a = [True, True, False, False, True, False, True, True, False, False]
    assert cohen_kappa(a, a) == pytest.approx(1.0)
    assert cohen_kappa(a, [not x for x in a]) == pytest.approx(-1.0)
    # 20 items: po = 0.7, pa = pb = 0.5 -> pe = 0.5 -> kappa = 0.4
    b1 = [True] * 10 + [False] * 10
    b2 = [True] * 7 + [False] * 3 + [True] * 3 + [False] * 7
    assert cohen_kappa(b1, b2) == pytest.approx(0.4)
    assert cohen_kappa([], []) is None


def test_bootstrap_interval_brackets_r_and_is_seeded() -> None:
    x = [float(k) for k in range(30)]
    y = [v + (3 if k % 3 else -3) for k, v in enumerate(x)]
    lo, hi = pearson_interval(x, y)
    assert lo <= pearson(x, y) <= hi
    assert pearson_interval(x, y) == (lo, hi)


def test_agreement_on_common_items_only() -> None:
    a = {"i1": 1.0, "i2": 0.0, "i3": 1.0, "i4": 0.5}
    b = {"i1": 1.0, "i2": 0.0, "i3": 1.0, "i9": 0.0}
    ca = {("i1", "c0"): True, ("i1", "c1"): False}
    cb = {("i1", "c0"): True, ("i1", "c1"): True, ("i2", "c0"): False}
    r = agreement(a, b, ca, cb)
    assert r["items"] == 3 and r["pearson"] == pytest.approx(1.0)
    assert r["checks"] == 2 and r["check_agreement"] == 0.5
