"""Trust and coverage: a model that reads the bench is marked in every table; below 95 % coverage
the benchmark score and its interval are withheld, and a failures-as-zero score stands beside it."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from yanami.contract import ImagePart, Refused, Request, read_manifest, read_rows
from yanami.scoring import (
    MIN_COVERAGE,
    PRIVILEGED_MARK,
    PRIVILEGED_NOTE,
    DialogueRecord,
    Run,
    failures_as_zero,
    load_run,
    run_scores,
    summary_table,
    tables,
)
from yanami.store import Dataset

LIMIT = 4
"""Dialogues per run (one per scenario): every table has a row, and the runs stay fast."""


class Copier:
    """A plug-in that reads nothing but its request: answers A, returns the latest image."""

    name = "copier"

    def answer(self, request: Request) -> str:
        return "A"

    def generate(self, request: Request) -> bytes:
        return request.images()[-1].data


class Peeker:
    """A plug-in with ``bind_bench``: it reads the bench it is handed and returns the ground truth."""

    name = "peeker"

    def __init__(self) -> None:
        self.bench: Dataset | None = None
        self.dialogues: dict[str, object] = {}

    def bind_bench(self, bench: Path) -> None:
        self.bench = Dataset(bench)
        self.dialogues = {d.id: d for d in self.bench}

    def answer(self, request: Request) -> str:
        dialogue, _, local = request.item.rpartition("/")
        q = next(q for q in self.dialogues[dialogue].questions if q.id == local)  # type: ignore[attr-defined]
        return "".join(q.answer_letters) if q.choices else q.answer

    def generate(self, request: Request) -> bytes:
        dialogue, _, local = request.item.rpartition("/")
        turn = self.dialogues[dialogue].turns[int(local.removeprefix("t"))]  # type: ignore[attr-defined]
        assert self.bench is not None
        return self.bench.image_bytes(next(p for p in turn.assistant.parts if isinstance(p, ImagePart)))


class Refuser(Copier):
    """The copier, refusing the items it is told to (as a provider's content policy might)."""

    def __init__(self, refuse: set[str]) -> None:
        self.refuse = refuse

    def answer(self, request: Request) -> str:
        if request.item in self.refuse:
            raise Refused("content policy")
        return super().answer(request)

    def generate(self, request: Request) -> bytes:
        if request.item in self.refuse:
            raise Refused("content policy")
        return super().generate(request)


def _evaluate(monkeypatch: pytest.MonkeyPatch, bench: Path, model: object, out: Path, spec: str = "plugin:x") -> Path:
    """A run of ``model``, registered as tests register plug-ins (the runner's `load_model`)."""
    from yanami.runner import _build, _run

    with monkeypatch.context() as m:
        m.setattr(_build, "load_model", lambda *a: model)
        _run.evaluate(bench, spec, out, limit=LIMIT)
    return out


# Privileged runs ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def trust_runs(world_bench: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A plug-in that reads the bench, one that does not, and two reference agents."""
    from yanami.runner import evaluate

    root = tmp_path_factory.mktemp("trust")
    mp = pytest.MonkeyPatch()
    try:
        out = {
            "peeker": _evaluate(mp, world_bench, Peeker(), root / "peeker", "acme:peeker"),
            "copier": _evaluate(mp, world_bench, Copier(), root / "copier", "acme:copier"),
        }
    finally:
        mp.undo()
    for spec in ("reference:copy-input", "reference:oracle"):
        out[spec] = root / spec.split(":")[1]
        evaluate(world_bench, spec, out[spec], limit=LIMIT)
    return out


def test_the_runner_records_which_models_read_the_bench(trust_runs) -> None:
    assert read_manifest(trust_runs["peeker"]).privileged is True  # a plug-in with bind_bench
    assert read_manifest(trust_runs["copier"]).privileged is False
    assert read_manifest(trust_runs["reference:oracle"]).privileged is True
    assert read_manifest(trust_runs["reference:copy-input"]).privileged is False  # the trivial floor reads nothing
    scores = run_scores(load_run(trust_runs["peeker"]), bootstrap=0)
    assert scores.privileged and scores.average["scene"] == pytest.approx(100.0)  # what made it worth marking


def _rows_of(text: str, label: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"| {label}")]


def test_a_privileged_run_is_marked_in_every_table_and_format(cli, trust_runs, tmp_path) -> None:
    runs = [trust_runs[k] for k in ("peeker", "copier", "reference:copy-input", "reference:oracle")]
    data = json.loads(cli("score", *runs, "--json").out)
    flags = {r["model"]: r["privileged"] for r in data["runs"]}
    assert flags == {"peeker": True, "copier": False, "reference:copy-input": False, "reference:oracle": True}
    label = {r["model"]: r["label"] for r in data["runs"]}
    peeker, oracle = label["peeker"], label["reference:oracle"]
    assert data["comparability"]["privileged"] == {peeker: PRIVILEGED_NOTE, oracle: PRIVILEGED_NOTE}
    text = cli("score", *runs)
    assert text.code == 0, text.err
    rows = _rows_of(text.out, peeker)
    assert rows and all(f"| {peeker} {PRIVILEGED_MARK} |" in r for r in rows)
    assert PRIVILEGED_NOTE in text.out
    plain = _rows_of(text.out, label["copier"]) + _rows_of(text.out, label["reference:copy-input"])
    assert plain and all(PRIVILEGED_MARK not in r for r in plain)
    md = cli("score", *runs, "--format", "md").out
    marked = [b for b in md.split("\n**") if f"| {peeker}" in b]
    assert len(marked) >= 10  # Tables 2, 3, 11-19, 20, 21, coverage
    for block in marked:
        for name in (peeker, oracle):
            assert all(f"| {name} {PRIVILEGED_MARK} |" in r for r in _rows_of(block, name)), block
        assert PRIVILEGED_NOTE in block, block
    tex = cli("score", *runs, "--format", "latex").out
    rows = [line for line in tex.splitlines() if line.startswith(peeker)]
    assert rows and all(line.startswith(f"{peeker} \\textsuperscript{{\\ddag}} &") for line in rows)
    page = tmp_path / "report.html"
    assert cli("report", *runs, "--out", page, "--samples", "0").code == 0
    html = page.read_text()
    found = 0
    for table in re.findall(r"<table id=.*?</table>", html, flags=re.S):
        cells = re.findall(rf"<tr><td>({re.escape(peeker)}[^<]*)</td>", table)
        found += bool(cells)
        assert all(c == f"{peeker} {PRIVILEGED_MARK}" for c in cells), table
        if cells:
            assert PRIVILEGED_NOTE in table
    assert found >= 10
    provenance = html.split('<details id="provenance">')[1].split("</details>")[0]
    assert f"{PRIVILEGED_MARK} {PRIVILEGED_NOTE}" in provenance  # the run list says it too


def test_a_run_of_an_older_format_is_read_and_privilege_is_asked_of_the_agent(trust_runs, tmp_path) -> None:
    import shutil

    from yanami.contract import RUN_VERSION
    from yanami.runner import evaluate

    for key, expected in (("reference:oracle", True), ("reference:copy-input", False), ("peeker", False)):
        old = tmp_path / key.replace(":", "-")
        shutil.copytree(trust_runs[key], old)
        path = old / "manifest.json"
        m = json.loads(path.read_text())
        del m["privileged"]
        path.write_text(json.dumps({**m, "version": 3}))
        assert read_manifest(old).privileged is None  # format 3 did not record it
        assert load_run(old).privileged is expected  # the reference kind is asked; a plug-in's old run is not
    # resuming a format-3 run records it
    old = tmp_path / "reference-oracle"
    bench = read_manifest(old).bench
    evaluate(bench, "reference:oracle", old, limit=LIMIT)
    m = json.loads((old / "manifest.json").read_text())
    assert m["version"] == RUN_VERSION and m["privileged"] is True


# Coverage ------------------------------------------------------------------------------


def test_failures_as_zero_counts_every_invalid_item_as_zero() -> None:
    full = {"RR": 1.0, "CR": 1.0, "CT": 1.0, "CU": 1.0}
    recs = [
        DialogueRecord("a", "editing", dsu=full, images={1: (1.0, 10.0)}),
        DialogueRecord("b", "editing", dsu={"RR": 1.0, "CR": 1.0, "CT": 1.0}, images={},
                       invalid_questions={"CU"}, invalid_turns={1}),
    ]  # fmt: skip
    # DSU: RR, CR, CT 100, CU 50 -> 87.5; SC (100 + 0) / 2; VQ (100 + 0) / 2
    assert failures_as_zero(recs, answers=True) == pytest.approx(0.4 * 87.5 + 0.4 * 50 + 0.2 * 50)
    assert failures_as_zero(recs[:1], answers=True) == pytest.approx(100.0)
    assert failures_as_zero([DialogueRecord("c", "editing", invalid_turns={1})], answers=False) == 0.0


@pytest.fixture(scope="module")
def coverage_runs(world_bench: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The copier in full, then refusing the items it did worst on: a few (coverage above 95 %),
    then many (below)."""
    root = tmp_path_factory.mktemp("coverage")
    mp = pytest.MonkeyPatch()
    try:
        full = _evaluate(mp, world_bench, Copier(), root / "full")
        rows = read_rows(full)
        scored = []
        for item, v in rows.verdicts.items():
            checks = [c for c in v.checks or [] if c.kind == "atomic"]
            if v.score is not None:
                scored.append((v.score, item))
            elif checks:  # a turn's SC (a turn with capability checks alone has none)
                scored.append((sum(bool(c.passed) for c in checks) / len(checks), item))
        turns = [(s, i) for s, i in scored if rows.predictions[i].kind == "turn"]
        # SC averages each dialogue's images: a turn below its dialogue's mean is one whose
        # refusal raises the valid-only SC (one equal to it would leave the SC as it was)
        by_dialogue: dict[str, list[float]] = {}
        for s, i in turns:
            by_dialogue.setdefault(rows.predictions[i].dialogue, []).append(s)
        below = sorted(
            (s, i) for s, i in turns if s < sum(by_dialogue[d := rows.predictions[i].dialogue]) / len(by_dialogue[d])
        )
        items = len(rows.predictions)
        few = {i for _, i in below[: max(1, int(items * (1 - MIN_COVERAGE)))]}  # the hardest turns
        many = {i for _, i in sorted(scored)[: items // 5]}  # the hardest fifth of the items
        out = {"full": full}
        out["few"] = _evaluate(mp, world_bench, Refuser(few), root / "few")
        out["many"] = _evaluate(mp, world_bench, Refuser(many), root / "many")
    finally:
        mp.undo()
    return out


def test_refusals_never_raise_failures_as_zero_and_low_coverage_withholds_the_score(cli, coverage_runs) -> None:
    full, few, many = (run_scores(load_run(coverage_runs[k])) for k in ("full", "few", "many"))
    assert full.coverage["percent"] == 100 and full.failures_as_zero == pytest.approx(full.average["scene"])
    assert MIN_COVERAGE * 100 <= few.coverage["valid"] * 100 / few.coverage["expected"] < 100
    assert many.coverage["percent"] < MIN_COVERAGE * 100
    # refusing the hardest items raises the valid-only SC and score, never the failures-as-zero one
    assert few.average["sc"] > full.average["sc"] and few.average["scene"] > full.average["scene"]
    assert few.failures_as_zero < full.failures_as_zero
    assert many.failures_as_zero <= full.failures_as_zero
    # above 95 %: the score and its interval are shown (the row is marked for its coverage)
    assert few.withheld is None and few.interval_text != "n/a"
    # below 95 %: withheld, and said so
    note = f"n/a, coverage {many.coverage['percent']} %"
    assert many.withheld == note and many.average["scene"] is None and many.interval is None
    assert many.interval_text == note and many.average_text == note
    assert isinstance(many.failures_as_zero, float)


def test_withheld_scores_read_the_same_in_every_format(cli, coverage_runs, tmp_path) -> None:
    runs = [coverage_runs[k] for k in ("full", "few", "many")]
    many = run_scores(load_run(coverage_runs["many"]))
    note = f"n/a, coverage {many.coverage['percent']} %"
    zero = f"{many.failures_as_zero:.2f}"
    text = cli("score", *runs)
    assert text.code == 0, text.err
    [row] = [line for line in text.out.splitlines() if line.startswith(f"| {many.label}")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[5:8] == [note, zero, note]  # Avg., Avg. failures as 0, 95 % CI
    assert "Avg. failures as 0" in text.out and "withheld" in text.err
    md = cli("score", *runs, "--format", "md").out
    table2 = md[md.index("**Table 2:") :].split("\n\n")[1]
    [row] = [line for line in table2.splitlines() if line.startswith(f"| {many.label}")]
    assert [c.strip() for c in row.strip("|").split("|")][5:8] == [note, zero, note]
    tex = cli("score", *runs, "--format", "latex").out
    assert f"{note.replace('%', chr(92) + '%')} & {zero} & {note.replace('%', chr(92) + '%')}" in tex
    data = json.loads(cli("score", *runs, "--json").out)
    entry = next(r for r in data["runs"] if r["label"] == many.label)
    assert entry["average"]["scene"] is None and entry["interval"] is None
    assert entry["withheld"] == note and entry["failures_as_zero"] == pytest.approx(many.failures_as_zero)
    page = tmp_path / "r.html"
    assert cli("report", *runs, "--out", page, "--samples", "0").code == 0
    html = page.read_text()
    table2 = re.search(r'<table id="table2">.*?</table>', html, flags=re.S)
    assert table2 and f"<td>{note}</td><td>{zero}</td><td>{note}</td>" in table2.group(0)


def test_an_interrupted_run_has_no_failures_as_zero_score(coverage_runs, tmp_path) -> None:
    import shutil

    run = tmp_path / "interrupted"
    shutil.copytree(coverage_runs["full"], run)
    db = sqlite3.connect(run / "results.sqlite")
    with db:
        db.execute("DELETE FROM predictions WHERE rowid IN (SELECT rowid FROM predictions ORDER BY item LIMIT 3)")
    db.close()
    s = run_scores(load_run(run))
    assert s.failures_as_zero is None and s.failures_as_zero_text == "n/a, 3 items not run"
    assert s.withheld is None or s.withheld.startswith("n/a, coverage")
    row = summary_table([s]).rows[0]
    assert "n/a, 3 items not run" in row


def test_the_tables_of_synthetic_runs_withhold_too() -> None:
    recs = [DialogueRecord(f"{s}{k}", s, images={1: (1.0, 10.0)}) for s in ("editing",) for k in range(6)]
    manifest = {"model": "m", "model_name": "m", "history": "gt", "layout": "yes-first", "answers": False,
                "bench_sha256": "x" * 64, "limit": None, "judge": {"name": "exact", "version": "2"}}  # fmt: skip
    run = Run(Path("m"), manifest, {r.id: r for r in recs}, {"ok": 6, "refused": 4}, 0, 10)
    [t2] = [t for t in tables([run], [run_scores(run, bootstrap=50)]) if t.key == "table2"]
    assert t2.rows[0][5] == "n/a, coverage 60 %" and t2.rows[0][7] == "n/a, coverage 60 %"
