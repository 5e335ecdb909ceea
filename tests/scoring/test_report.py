"""`yanami eval`, `score` and `report` from the command line, on the small world bench."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def runs(world_bench: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    from yanami.bench import evaluate

    root = tmp_path_factory.mktemp("runs")
    out = []
    for spec, history in (("reference:stateful", "gt"), ("reference:stateless", "gt"), ("reference:stateful", "self")):
        path = root / f"{spec.split(':')[1]}-{history}"
        evaluate(world_bench, spec, path, history=history)  # type: ignore[arg-type]
        out.append(path)
    return out


def test_eval_prints_the_run_and_its_scores(cli, world_bench, tmp_path) -> None:
    r = cli("eval", world_bench, "--model", "reference:oracle", "--out", tmp_path / "run", "--limit", "2")
    assert r.code == 0, r.err
    assert "written (ok" in r.out and "| reference:oracle |" in r.out
    again = cli("eval", world_bench, "--model", "reference:oracle", "--out", tmp_path / "run", "--limit", "2")
    assert "already done" in again.out and "0 written" in again.out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "reference:nobody"], "no such reference agent"),
        (["--model", "acme:x"], "unknown model"),
        (["--model", "reference:oracle", "--judge", "gpt"], "unknown judge"),
        (["--model", "reference:stateful", "--layout", "concatenate"], "takes yes-first or yes-front only"),
    ],
)
def test_eval_user_errors_are_one_line(cli, world_bench, tmp_path, args, message) -> None:
    r = cli("eval", world_bench, *args, "--out", tmp_path / "run", "--limit", "1")
    assert r.code == 2
    assert message in r.err and "Traceback" not in r.err
    assert len(r.err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_score_json_and_tables(cli, runs) -> None:
    r = cli("score", *runs, "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    by = {x["label"]: x for x in data["runs"]}
    assert by["reference:stateful"]["average"]["scene"] > by["reference:stateless"]["average"]["scene"] + 20
    assert "constraint_adherence" in data["gap"]["eligible"]
    md = cli("score", *runs, "--format", "md")
    assert "**Table 2:" in md.out and "**Table 21:" in md.out and "| reference:stateless |" in md.out
    tex = cli("score", *runs, "--format", "latex")
    assert "\\begin{tabular}" in tex.out and "\\toprule" in tex.out


def test_report_is_one_self_contained_html_file(cli, runs, tmp_path) -> None:
    out = tmp_path / "report.html"
    r = cli("report", *runs, "--out", out, "--samples", "1")
    assert r.code == 0, r.err
    page = out.read_text()
    for key in ("table2", "table3", "table11", "table12", "table19", "table20", "table21", "coverage", "history"):
        assert f'id="{key}"' in page, key
    assert page.count("<svg") == 3  # Figure 6 (a), (b), (c)
    assert "Irreducibility audit" in page
    assert page.count('class="sample"') == 4  # one dialogue per scenario
    assert "data:image/jpeg;base64," in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    md = tmp_path / "tables.md"
    assert cli("report", *runs, "--out", md, "--format", "md").code == 0
    assert "| Model |" in md.read_text()


def test_score_of_a_directory_that_is_no_run(cli, tmp_path) -> None:
    r = cli("score", tmp_path)
    assert r.code == 2 and "not a yanami run" in r.err
