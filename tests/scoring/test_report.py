"""`yanami eval`, `score` and `report` from the command line, on the small world bench."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from yanami.scoring import SCENARIOS, SHORT


@pytest.fixture(scope="module")
def runs(world_bench: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    from yanami.runner import evaluate

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
    assert "written (ok" in r.out and "| reference:oracle (limit 2) †" in r.out  # a limited run says so
    again = cli("eval", world_bench, "--model", "reference:oracle", "--out", tmp_path / "run", "--limit", "2")
    assert "already done" in again.out and "0 written" in again.out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "reference:nobody"], "no such reference agent"),
        (["--model", "acme:x"], "no registered kind 'acme'"),
        (["--model", "reference:oracle", "--judge", "gpt"], "no registered kind 'gpt'"),
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
    assert "**Table 2:" in md.out and "**Table 21:" in md.out and "| reference:stateless ‡ |" in md.out
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


# Honest tables, one loader, outputs, one-line errors -----------------------------------


def _copy_run(src: Path, dest: Path, **manifest: object) -> Path:
    import shutil

    shutil.copytree(src, dest)
    if manifest:
        path = dest / "manifest.json"
        data = json.loads(path.read_text())
        data.update(manifest)
        path.write_text(json.dumps(data))
    return dest


@pytest.fixture(scope="module")
def odd_runs(runs: list[Path], world_bench: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Runs that are not comparable with the full stateful run: a --limit run, an interrupted
    one, one on another bench, and the same model again."""
    import sqlite3

    from yanami.runner import evaluate

    root = tmp_path_factory.mktemp("odd")
    limited = root / "limited"
    evaluate(world_bench, "reference:stateless", limited, limit=4)
    interrupted = _copy_run(runs[1], root / "interrupted")
    db = sqlite3.connect(interrupted / "results.sqlite")
    with db:
        db.execute("DELETE FROM predictions WHERE rowid IN (SELECT rowid FROM predictions ORDER BY item LIMIT 9)")
    db.close()
    other_bench = _copy_run(runs[1], root / "other-bench", bench_sha256="0" * 64)
    again = _copy_run(runs[0], root / "again")
    return {"limited": limited, "interrupted": interrupted, "other_bench": other_bench, "again": again}


def _sha8(run: Path) -> str:
    return json.loads((run / "manifest.json").read_text())["bench_sha256"][:8]


def _warnings(err: str) -> list[str]:
    lines = err.strip().splitlines()
    assert all(line.startswith("warning: ") for line in lines), err
    return lines


def test_score_and_report_warn_and_mark_rows_that_are_not_comparable(cli, runs, odd_runs, tmp_path) -> None:
    args = [runs[0], odd_runs["limited"], odd_runs["interrupted"], odd_runs["other_bench"]]
    r = cli("score", *args)
    assert r.code == 0, r.err
    lines = _warnings(r.err)
    for what in ("different bench", "different limit", "coverage under 100 %"):
        assert sum(what in line for line in lines) == 1, (what, lines)
    # every label says its bench (they differ); the full run is the reference: not marked †;
    # the others are, with a note saying why (and every one reads the bench: ‡)
    rows = {line.split(" | ")[0][2:]: line for line in r.out.splitlines() if line.startswith("| reference:")}
    assert len(rows) == 4
    assert "†" not in rows[f"reference:stateful (bench {_sha8(runs[0])}) ‡"]
    limited = f"reference:stateless (limit 4, bench {_sha8(runs[0])}) † ‡"
    assert limited in rows and "--limit 4, the others the whole bench" in r.out
    assert any("% coverage" in k and "bench" in k and "†" in k for k in rows) and "items valid" in r.out
    assert "reference:stateless (bench 00000000) † ‡" in rows and "bench 000000000000, the others" in r.out
    md = cli("score", *args, "--format", "md")
    assert md.out.count(f"| {limited}") >= 5 and "**Table 2:" in md.out
    assert f"| {limited} | --limit 4 |" in md.out  # the coverage table says the limit
    tex = cli("score", *args, "--format", "latex")
    assert limited.replace(" †", " \\textsuperscript{\\dag}").replace(" ‡", " \\textsuperscript{\\ddag}") in tex.out
    data = json.loads(cli("score", *args, "--json").out)
    assert data["comparability"]["warnings"] == [line.removeprefix("warning: ") for line in lines]
    page = tmp_path / "r.html"
    rep = cli("report", *args, "--out", page, "--samples", "1")
    assert rep.code == 0, rep.err
    assert _warnings(rep.err) == lines
    html = page.read_text()
    assert "Comparability" in html and limited in html
    assert "runs made on another bench are not shown" in html


def test_two_runs_of_one_model_keep_their_own_rows(cli, runs, odd_runs) -> None:
    r = cli("score", runs[0], odd_runs["again"], "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    labels = [x["label"] for x in data["runs"]]
    assert labels == [f"reference:stateful ({runs[0].name})", "reference:stateful (again)"]
    assert set(data["gap"]["gap"]) == set(labels)
    md = cli("score", runs[0], odd_runs["again"], "--format", "md").out
    table21 = md[md.index("**Table 21:") :].split("\n\n")[1]
    assert all(f"| {label} ‡ |" in table21 for label in labels)  # the stateful agent reads the bench


def test_score_text_names_the_tables_and_degenerate_intervals(cli, runs) -> None:
    r = cli("score", *runs)
    assert r.code == 0, r.err
    assert "Tables for these runs: Table 2, Table 3, Table 11," in r.out and "Table 21" in r.out
    assert "--format md or --format latex" in r.out and "--json" in r.out and "yanami report" in r.out
    # 2 dialogues per scenario, the scenario named as its column is headed
    assert "100.00-100.00" not in r.out and "n/a (2 dialogues in Fusion)" in r.out


def test_output_names_follow_the_format_and_dash_is_standard_output(cli, runs, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli("report", runs[0], "--format", "md").code == 0
    assert "| Model |" in (tmp_path / "report.md").read_text() and not (tmp_path / "report.html").exists()
    assert cli("report", runs[0], "--format", "latex").code == 0
    assert "\\begin{tabular}" in (tmp_path / "report.tex").read_text()
    assert cli("report", runs[0], "--samples", "0").code == 0
    assert (tmp_path / "report.html").read_text().startswith("<!doctype html>")
    r = cli("report", runs[0], "--format", "md", "--out", "-")
    assert r.code == 0 and r.out.startswith("**Table 2:") and not (tmp_path / "-").exists()
    r = cli("report", runs[0], "--out", "-", "--samples", "0")
    assert r.out.startswith("<!doctype html>") and not (tmp_path / "-").exists()
    r = cli("score", runs[0], "--out", "-", "--format", "md")
    assert r.out.startswith("**Table 2:") and not (tmp_path / "-").exists()
    assert cli("score", runs[0], "--json", "--out", tmp_path / "s.json").out == ""
    assert json.loads((tmp_path / "s.json").read_text())["runs"][0]["label"] == "reference:stateful"
    bad = cli("report", runs[0], "--format", "pdf")
    assert bad.code == 2 and "html" in bad.err and "latex" in bad.err
    helptext = cli("report", "--help").out
    assert "html|md|latex" in helptext  # the choices show


def test_score_with_a_judge_the_run_lacks_names_the_judges_it_has(cli, runs) -> None:
    for command in ("score", "report"):
        r = cli(command, runs[0], "--judge", "fake-judge.yaml")
        assert r.code == 2, r.out
        assert len(r.err.strip().splitlines()) == 1
        assert "no verdicts of judge 'fake-judge.yaml'" in r.err and "exact (" in r.err and "verdicts)" in r.err
    assert cli("score", runs[0], "--judge", "exact").code == 0


def test_a_dataset_or_any_other_directory_is_no_run(cli, world_bench, tmp_path) -> None:
    for command in ("score", "report"):
        r = cli(command, world_bench)
        assert r.code == 2
        assert (
            r.err.strip()
            == f"error: {world_bench}: a yanami dataset, not a run (give a run directory made by yanami eval)"
        )
        r = cli(command, tmp_path)
        assert r.code == 2 and len(r.err.strip().splitlines()) == 1
        assert "not a yanami run" in r.err and "give a run directory made by yanami eval" in r.err
        r = cli(command, tmp_path / "nowhere")
        assert r.code == 2 and "no such directory" in r.err
    assert not (tmp_path / "report.html").exists()


def test_score_and_report_share_one_loader(cli, runs, monkeypatch, tmp_path) -> None:
    import yanami.scoring._load as loader

    calls = []
    real = loader.load_runs

    def spy(paths, judge=None, **kw):
        calls.append(([Path(p) for p in paths], judge))
        return real(paths, judge, **kw)

    monkeypatch.setattr(loader, "load_runs", spy)  # the one loader YANAMI's scorer reads runs with
    assert cli("score", *runs, "--judge", "exact").code == 0
    assert cli("report", *runs, "--judge", "exact", "--out", tmp_path / "r.md", "--format", "md").code == 0
    assert calls == [(runs, "exact"), (runs, "exact")]


def test_report_checks_the_bench_before_pairing_samples(cli, runs, world_bench, built, tmp_path) -> None:
    moved = _copy_run(runs[0], tmp_path / "moved", bench=str(tmp_path / "gone"))
    r = cli("report", moved, "--out", tmp_path / "r.html")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "is gone" in r.err and "--bench" in r.err and not (tmp_path / "r.html").exists()
    r = cli("report", moved, "--out", tmp_path / "r.html", "--bench", world_bench, "--samples", "1")
    assert r.code == 0, r.err
    assert (tmp_path / "r.html").read_text().count('class="sample"') == 4
    other = cli("report", moved, "--out", tmp_path / "o.html", "--bench", built)
    assert other.code == 2 and len(other.err.strip().splitlines()) == 1
    assert "SHA-256 differs" in other.err and not (tmp_path / "o.html").exists()
    swapped = _copy_run(runs[0], tmp_path / "swapped", bench=str(built))  # another bench now at the recorded path
    r = cli("report", swapped, "--out", tmp_path / "s.html")
    assert r.code == 2 and "SHA-256 differs" in r.err
    assert cli("report", moved, "--out", tmp_path / "t.html", "--samples", "0").code == 0  # no viewer, no bench


def test_markdown_tables_show_hostile_text_as_text() -> None:
    """A run's label or a config's name is data: rendered by a real Markdown renderer (markdown-it,
    CommonMark with tables), it makes no element, no link and no extra column."""
    from markdown_it import MarkdownIt

    from yanami.scoring import Table
    from yanami.scoring._tables import markdown

    hostile = "<img src=x onerror=alert(1)>|*b* [l](http://x) `c` _u_ \\ #h"
    page = (
        MarkdownIt("commonmark")
        .enable("table")
        .render(markdown(Table("k", f"Table 2: {hostile}", ["Run", "Score"], [[hostile, 1.5]], [hostile])))
    )
    assert "<img" not in page and "<a " not in page and "<em>" not in page and "<code>" not in page
    assert page.count("<td>") == 2 and page.count("<th>") == 2  # the pipe stayed inside its cell
    shown = "&lt;img src=x onerror=alert(1)&gt;|*b* [l](http://x) `c` _u_ \\ #h"
    assert page.count(shown) == 3  # title, cell and note each read as the text itself


def test_latex_tables_show_hostile_text_as_text() -> None:
    """A label that holds LaTeX commands, specials, a blank line and an escape sequence is text in
    the tabular: no command, no math, no comment, no column or paragraph break of its own."""
    from yanami.scoring import Table
    from yanami.scoring._tables import latex

    hostile = "\\input{/etc/passwd} $x^2$ 100% a_b #1 & ~ {}\n\n\\end{tabular}\x1b[31m"
    tex = latex(Table("k", f"Table 2: {hostile}", ["Run", "Score"], [[hostile, 1.5]], [hostile]))
    assert "\\input{" not in tex and "\x1b" not in tex
    row = next(line for line in tex.splitlines() if "1.5" in line)
    assert row.count(" & ") == 1 and row.endswith(" \\\\")  # the & in the label did not make a column
    body = tex.split("\\midrule", 1)[1]
    assert "\n\n" not in tex and tex.count("\\end{tabular}") == 1
    assert "\\textbackslash{}input\\{/etc/passwd\\}" in body and "\\$x\\textasciicircum{}2\\$" in body
    assert "100\\%" in body and "a\\_b" in body and "\\#1" in body


def test_every_form_names_each_scenario_as_its_column_is_headed(cli, runs, tmp_path) -> None:
    """One name per scenario (`SHORT`, the paper's heading: Modeling, never world_modeling) in the
    terminal, Markdown, LaTeX and the HTML report: headers, notes and the viewer alike."""
    page = tmp_path / "report.html"
    assert cli("report", *runs, "--out", page, "--samples", "1").code == 0
    html = page.read_text()
    shown = re.sub(r"<[^>]*>", " ", html)  # the page's text, without tags and their attributes
    forms = {
        "terminal": (cli("score", *runs).out, " | "),
        "markdown": (cli("score", *runs, "--format", "md").out, " | "),
        "latex": (cli("score", *runs, "--format", "latex").out, " & "),
        "html": (re.sub(r"\bworld-\w+-\d+\b", "", shown), "</th><th>"),  # less the dialogues' ids
    }
    names = [SHORT[s] for s in SCENARIOS]
    assert "Modeling" in names and "world_modeling" in SCENARIOS
    for form, (text, between) in forms.items():
        header = html if form == "html" else text
        assert f"Model{between}{between.join(names)}{between}" in header, form
        assert not re.search(r"\b(fusion|editing|world(_|\\_)modeling|reasoning)\b", text), form
        assert "n/a (2 dialogues in Fusion)" in text, form
    # the viewer's scenario filter and each sample's title
    assert re.findall(r'<option value="world_modeling">([^<]*)</option>', html) == ["Modeling"]
    assert "(Modeling)" in shown
