"""The bench's floor in every table (issue 33, 7): the best trivial strategy, and each run above it."""

from __future__ import annotations

import json

import pytest

from yanami.scoring._floor import CHANCE_DSU, BenchFacts, above_floor, floor_of

FLOORS = {
    "fusion": {"copy-input": (40.0, 100), "blank": (10.0, 100), "stateless": (90.0, 100)},
    "editing": {"copy-input": (60.0, 100), "blank": (10.0, 100), "stateless": (95.0, 100)},
}


def test_the_floor_is_the_best_trivial_strategy_scored_as_the_run_is() -> None:
    facts = BenchFacts("public", "public", FLOORS)
    answering = floor_of(facts, ["fusion", "editing"], answers=True)
    assert answering is not None and answering.strategy == "copy-input"  # the stateless reading is no floor
    # equation (2): DSU at chance, SC from the recorded shares, a clean render's VQ 100
    fusion = 0.4 * CHANCE_DSU + 0.4 * 40 + 0.2 * 100
    editing = 0.4 * CHANCE_DSU + 0.4 * 60 + 0.2 * 100
    assert answering.scenarios == pytest.approx({"fusion": fusion, "editing": editing})
    assert answering.score == pytest.approx((fusion + editing) / 2)
    assert answering.sc == pytest.approx(50) and answering.vq == 100 and answering.dsu == CHANCE_DSU
    # equation (3) for a generation-only run, over its own scenarios
    gen = floor_of(facts, ["fusion"], answers=False)
    assert gen is not None and gen.score == pytest.approx(0.6 * 40 + 0.4 * 100) and gen.dsu is None


@pytest.mark.parametrize(
    ("score", "floor", "expected"),
    [(55.0, 50.0, 10.0), (50.0, 50.0, 0.0), (100.0, 50.0, 100.0), (40.0, 50.0, -20.0), (None, 50.0, None),
     (60.0, None, None)],
)  # fmt: skip
def test_above_floor_is_the_share_of_the_way_from_the_floor_to_100(score, floor, expected) -> None:
    got = above_floor(score, floor)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_no_floor_without_recorded_floors_or_a_scenario_without_one() -> None:
    assert floor_of(BenchFacts("public", "public", None), ["fusion"], True) is None
    assert floor_of(BenchFacts("public", "public", FLOORS), ["reasoning"], True) is None


def test_tables_show_the_floor_row_and_each_run_above_it(cli, world_bench, tmp_path) -> None:
    manifest = json.loads((world_bench / "manifest.json").read_text())
    assert manifest["floors"], "a world bench records its floors when it is built"
    run = tmp_path / "run"
    assert cli("eval", world_bench, "--model", "reference:stateless", "--out", run).code == 0
    data = json.loads(cli("score", run, "--json").out)["runs"][0]
    floor = data["floor"]
    assert floor["strategy"] in {n for per in manifest["floors"].values() for n in per} - {"stateless"}
    avg = data["average"]["scene"]
    assert data["above_floor"] == pytest.approx(100 * (avg - floor["score"]) / (100 - floor["score"]))
    assert data["bench"].startswith("public")
    text = cli("score", run).out
    assert f"Floor: best trivial ({floor['strategy']})" in text and "Above floor" in text
    assert "Bench: public" in text
    table2 = cli("score", run, "--format", "md").out.split("Table 2")[1].split("Table 3")[0]
    assert "Floor: best trivial" in table2
