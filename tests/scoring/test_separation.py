"""Compute, then render: a report's scores are one value (`ScoreSet`) computed from its runs, its
tables are data (rows, cells, notes), and the page is rendered from them by the templates alone."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest

import yanami.scoring
from yanami.scoring import (
    DialogueRecord,
    Page,
    Run,
    RunLine,
    ScoreSet,
    Table,
    Viewer,
    build_tables,
    html_table,
    render,
    render_page,
    render_report,
    report_page,
    run_scores,
    score_set,
)

NO_SAMPLES = Viewer([], {}, "none asked for (--samples 0)")


def _run(label: str, dsu: float = 1.0, history: str = "gt") -> Run:
    """A run of one dialogue per scenario whose questions score ``dsu``, with two judged turns each."""
    recs = {
        s: DialogueRecord(
            s,
            s,
            dsu=dict.fromkeys(("RR", "CR", "CT", "CU"), dsu),
            aligned={"CT": ["k"], "CU": ["u"]},
            images={1: (1.0, 10.0), 2: (0.5, 8.0)},
            checks={"k": ("constraint_adherence", True), "u": ("correction_updating", False)},
        )
        for s in ("fusion", "editing", "world_modeling", "reasoning")
    }
    manifest = {"model": label, "model_name": label, "history": history, "layout": "yes-first", "answers": True,
                "bench_sha256": "x" * 64, "limit": None, "judge": {"name": "exact", "version": "3"},
                "privileged": False}  # fmt: skip
    return Run(Path(label), manifest, recs, {"ok": 12}, 0, 12)


@pytest.fixture
def runs() -> list[Run]:
    return [_run("tracker <b>"), _run("tracker <b>", history="self"), _run("guesser", dsu=0.25)]


def _refuse(*args: object, **kwargs: object) -> NoReturn:
    raise AssertionError("rendered while computing")


def test_the_scores_are_one_value_computed_without_rendering(runs: list[Run], monkeypatch: pytest.MonkeyPatch) -> None:
    import yanami.scoring._charts as charts
    import yanami.scoring._page as page_module

    for module, name in ((page_module, "_environment"), (charts, "grouped_bars"), (charts, "line_chart")):
        monkeypatch.setattr(module, name, _refuse)
    value = score_set(runs, [run_scores(r, bootstrap=0) for r in runs])
    table_list = build_tables(value)
    page = report_page(value, table_list, NO_SAMPLES)  # the page too is data: its charts are not drawn yet
    assert isinstance(value, ScoreSet) and [r.label for r in value.runs] == [s.label for s in value.scores]
    assert json.loads(json.dumps(value.as_json()))["history_effect"]  # JSON-ready as it is
    assert [p.key for p in page.panels] == ["fig6a", "fig6b", "fig6c"] and page.tables is table_list
    cells = [c for t in table_list for row in t.rows for c in row]
    assert all(c is None or isinstance(c, str | int | float) for c in cells)
    assert not any(isinstance(c, str) and re.search(r"<(td|tr|th|table)\b", c) for c in cells)


def test_rendering_twice_gives_the_same_bytes_and_changes_no_score(runs: list[Run]) -> None:
    scores = [run_scores(r, bootstrap=0) for r in runs]
    value = score_set(runs, scores)
    before = json.dumps(value.as_json())
    table_list = build_tables(value)
    page = report_page(value, table_list, NO_SAMPLES)
    first = render(page)
    assert render(page) == first and first.startswith("<!doctype html>")
    assert json.dumps(value.as_json()) == before
    assert "tracker &lt;b&gt;" in first and "tracker <b>" not in first  # texts are escaped by the templates
    # the one-call form (`write_report`'s) computes the same value and renders the same page
    assert render_report(runs, scores, table_list, samples=0) == first


def test_table_markup_lives_in_the_templates() -> None:
    package = Path(yanami.scoring.__file__).parent
    tags = re.compile(r"<(table|caption|tr|th|td|tfoot)\b")
    assert [p.name for p in sorted(package.glob("*.py")) if tags.search(p.read_text(encoding="utf-8"))] == []
    assert tags.search((package / "templates" / "table.html.j2").read_text(encoding="utf-8"))
    t = Table("k", "A 'title' & <more>", ["Run", "Score"], [["<script>", 1.5], ["b", None]], ["note <i>"])
    assert html_table(t) == (
        '<table id="k"><caption>A &#x27;title&#x27; &amp; &lt;more&gt;</caption><tr><th>Run</th><th>Score</th></tr>'
        "<tr><td>&lt;script&gt;</td><td>1.50</td></tr><tr><td>b</td><td>-</td></tr>"
        '<tfoot><tr><td class="note" colspan="2">note &lt;i&gt;</td></tr></tfoot></table>'
    )


def test_a_family_page_is_its_value_rendered() -> None:
    """`render_page`, as a plug-in family calls it, renders the `Page` its arguments make."""
    t = Table("toy", "Toy: accuracy", ["Run", "Accuracy", "Items"], [["run", 50.0, 2]])
    page = render_page("Toy report", runs=[{"label": "run", "details": "a toy run", "privileged": ""}],
                       warnings=[], table_list=[t])  # fmt: skip
    assert page == render(Page("Toy report", [RunLine("run", "a toy run")], [], [t]))
    assert "<h1>Toy report</h1>" in page and html_table(t) in page and 'id="samples"' not in page


def test_a_report_computes_its_scores_once(
    cli: Callable[..., Any], world_bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yanami.scoring._analyses as analyses
    import yanami.scoring._scoreset as scoreset
    from yanami.runner import evaluate

    paths = []
    for history in ("gt", "self"):
        paths.append(tmp_path / history)
        evaluate(world_bench, "reference:stateful", paths[-1], history=history, limit=4)
    calls: dict[str, int] = {}

    def counted(module: object, name: str) -> None:
        real = getattr(module, name)

        def spy(*args: object, **kwargs: object) -> object:
            calls[name] = calls.get(name, 0) + 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, spy)

    for module, name in ((scoreset, "score_set"), (analyses, "understanding_realization_gap"),
                         (scoreset, "progression_of"), (scoreset, "history_effect_of")):  # fmt: skip
        counted(module, name)
    r = cli("report", *paths, "--out", tmp_path / "r.html", "--samples", "1")
    assert r.code == 0, r.err
    assert calls == {"score_set": 1, "understanding_realization_gap": 1, "progression_of": 1, "history_effect_of": 1}
    assert (tmp_path / "r.html").read_text().count("<svg") == 3
