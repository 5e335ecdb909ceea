"""Table 21 and Figure 6 (a) over one set of runs, chosen in one place, in the terminal and the report."""

from __future__ import annotations

import html as htmllib
import re
from pathlib import Path

from yanami.scoring import (
    GAP_MIN_UNDERSTANDING,
    DialogueRecord,
    Run,
    figure6,
    gap_selection,
    run_scores,
    shared_gap,
    tables,
)


def _run(label: str, dsu: float, history: str = "gt", answers: bool = True) -> Run:
    """A run of one dialogue per scenario whose every question scores ``dsu``, with aligned checks."""
    recs = {}
    for s in ("fusion", "editing", "world_modeling", "reasoning"):
        recs[s] = DialogueRecord(
            s,
            s,
            dsu=dict.fromkeys(("RR", "CR", "CT", "CU"), dsu) if answers else {},
            aligned={"CT": ["k"], "CU": ["u"]},
            images={1: (1.0, 10.0)},
            checks={"k": ("constraint_adherence", True), "u": ("correction_updating", False)},
        )
    manifest = {"model": label, "model_name": label, "history": history, "layout": "yes-first",
                "answers": answers, "bench_sha256": "x" * 64, "limit": None,
                "judge": {"name": "exact", "version": "3"}}  # fmt: skip
    return Run(Path(label), manifest, recs, {"ok": 8}, 0, 8)


def test_one_function_chooses_the_runs_of_the_shared_subset() -> None:
    tracking, ablation = _run("tracking", 1.0), _run("ablation", 0.75)
    guess, selfh = _run("guess", 0.25), _run("tracking", 1.0, history="self")
    painter = _run("painter", 0.0, answers=False)
    runs = [guess, tracking, ablation, selfh, painter]
    chosen = gap_selection(runs)
    assert chosen.runs == [tracking, ablation]
    why = {r.label: w for r, w in chosen.left_out}
    assert why["guess"] == f"understanding 25.00 < {GAP_MIN_UNDERSTANDING:g}, mostly chance"
    assert why["tracking (Self-History)"] == "not GT-History" and why["painter"] == "answers no questions"
    gap = shared_gap(runs)
    # the ablation understood no dialogue fully (0.75), so equation (4) leaves none: the set is what matters
    assert gap["models"] == ["tracking", "ablation"] and gap["eligible"]["constraint_adherence"] == 0
    assert gap["notes"][0] == "Over 2 runs: tracking, ablation."
    assert gap["notes"][1].startswith("Left out: guess [understanding 25.00")
    # Table 21 and Figure 6 (a) call the same function
    [t21] = [t for t in tables(runs, [run_scores(r, bootstrap=0) for r in runs]) if t.key == "table21"]
    assert [row[0] for row in t21.rows] == ["tracking", "ablation"] and t21.notes[:2] == gap["notes"]
    two = [tracking, _run("second", 1.0), guess]
    panel = figure6(two)[0]
    assert "4 CK and 4 CU dialogues, understood by all 2 runs" in panel["svg"] and panel["notes"][0].startswith(
        "Over 2 runs"
    )


def _table21_of_markdown(text: str) -> tuple[str, list[str], list[str]]:
    block = text[text.index("**Table 21:") :].split("\n\n")
    caption = block[0].strip("*")
    rows = [line.split(" | ")[0][2:] for line in block[1].splitlines()[2:]]
    notes = [n.rstrip() for n in block[2].split("\n")] if len(block) > 2 else []
    return caption, rows, notes


def test_the_demo_prints_the_table_21_its_report_shows(cli, small_demo: Path) -> None:
    r = cli("demo", "--out", small_demo, "--per-scenario", "1", "--workers", "1")
    assert r.code == 0, r.err
    caption, rows, notes = _table21_of_markdown(r.out)
    page = (small_demo / "report.html").read_text()
    table = re.search(r'<table id="table21"><caption>(.*?)</caption>(.*?)</table>', page, flags=re.S)
    assert table is not None
    assert htmllib.unescape(table.group(1)) == caption
    assert [htmllib.unescape(c) for c in re.findall(r"<tr><td>([^<]*)</td>", table.group(2))] == rows
    for note in notes[:2]:  # which runs, which were left out and why
        assert htmllib.escape(note, quote=False) in table.group(2)
    assert notes[0].startswith("Over 6 runs: ") and "reference:copy-input [understanding" in notes[1]
    # Figure 6 (a): the same runs and the same dialogue counts, written on the figure
    ck, cu = re.search(r"(\d+) CK and (\d+) CU dialogues\)", caption).groups()  # type: ignore[union-attr]
    figure = page[page.index('id="fig6a-panel"') :]
    figure = figure[: figure.index("</figure>")]
    assert f"{ck} CK and {cu} CU dialogues, understood by all {len(rows)} runs of the set" in figure
    assert len(re.findall(r'<text class="label"', figure)) == len(rows)
    assert htmllib.escape(notes[0], quote=False) in figure
