"""The typed run format: records read by name, a store that owns its transactions, an exact doc."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from yanami.contract import (
    RUN_VERSION,
    CheckResult,
    Prediction,
    Results,
    RunManifest,
    UserError,
    Verdict,
    read_manifest,
    read_rows,
)
from yanami.runner import evaluate
from yanami.scoring import load_run

DOC = Path(__file__).resolve().parents[2] / "docs" / "results-format.md"


@pytest.fixture(scope="module")
def small_run(world_bench: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of the stateless agent on 4 dialogues (read-only: copy it before changing anything)."""
    run = tmp_path_factory.mktemp("format") / "run"
    evaluate(world_bench, "reference:stateless", run, limit=4)
    return run


def _copy(run: Path, dest: Path) -> Path:
    import shutil

    shutil.copytree(run, dest)
    return dest


def test_a_run_reads_as_typed_records(small_run) -> None:
    rows = read_rows(small_run)
    assert isinstance(rows.manifest, RunManifest) and rows.manifest.limit == 4
    assert rows.manifest.judge.name == "exact"
    assert all(isinstance(p, Prediction) for p in rows.predictions.values())
    turns = [v for v in rows.verdicts.values() if v.checks]
    assert turns and all(isinstance(c, CheckResult) for v in turns for c in v.checks or [])
    check = turns[0].checks[0]  # type: ignore[index]
    assert check.kind in ("atomic", "capability") and isinstance(check.passed, bool)
    assert {c.kind for v in turns for c in v.checks or []} == {"atomic", "capability"}
    # scoring reads the same typed manifest, by name
    run = load_run(small_run)
    assert run.manifest == rows.manifest and run.expected == rows.manifest.items


def test_rows_are_read_by_column_name_not_position(small_run, tmp_path) -> None:
    before = read_rows(small_run)
    run = _copy(small_run, tmp_path / "run")
    db = sqlite3.connect(run / "results.sqlite")
    with db:  # the same tables with their columns in reverse order
        for table in ("predictions", "verdicts"):
            cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})")][::-1]
            db.execute(f"CREATE TABLE {table}_r AS SELECT {', '.join(cols)} FROM {table}")
            db.execute(f"DROP TABLE {table}")
            db.execute(f"ALTER TABLE {table}_r RENAME TO {table}")
    db.close()
    after = read_rows(run)
    assert after.predictions == before.predictions and after.verdicts == before.verdicts


def test_an_item_is_written_whole_or_not_at_all(small_run, tmp_path, monkeypatch) -> None:
    run = _copy(small_run, tmp_path / "run")
    rows = read_rows(run)
    item, p = next((k, p) for k, p in rows.predictions.items() if k in rows.verdicts)
    store = Results(run)
    try:
        changed = p.model_copy(update={"text": "changed", "item": p.item + "-new"})
        verdict = rows.verdicts[item].model_copy(update={"item": changed.item})

        def broken(v: Verdict) -> dict:
            raise RuntimeError("disk full")

        monkeypatch.setattr(Results, "_verdict_row", staticmethod(broken))
        with pytest.raises(RuntimeError):
            store.write(changed, verdict)
        monkeypatch.undo()
        assert changed.item not in store.predictions()  # the prediction was rolled back with its verdict
        store.write_verdict(verdict.model_copy(update={"reason": "again"}))
        assert store.verdicts("exact")[changed.item].reason == "again"
    finally:
        store.close()


def test_a_manifest_of_another_format_version_is_one_line(small_run, tmp_path) -> None:
    run = _copy(small_run, tmp_path / "run")
    path = run / "manifest.json"
    path.write_text(path.read_text().replace(f'"version": {RUN_VERSION}', '"version": 9'))
    with pytest.raises(UserError, match="format version 9"):
        read_manifest(run)
    with pytest.raises(UserError, match="not a yanami run"):
        read_manifest(tmp_path)


def _documented(section: str) -> set[str]:
    """The backticked names in the first column of the table under ``section`` in the doc."""
    text = DOC.read_text(encoding="utf-8")
    body = text.split(section, 1)[1]
    rows = []
    for line in body.splitlines()[1:]:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    names: set[str] = set()
    for row in rows[2:]:
        names |= set(re.findall(r"`([a-z_0-9]+)`", row.split("|")[1]))
    return names


def test_the_doc_lists_exactly_the_fields_and_columns(small_run) -> None:
    assert _documented("## manifest.json") == set(RunManifest.model_fields)
    assert _documented("`predictions` (one row per item)") == set(Prediction.model_fields)
    assert _documented("`verdicts` (one row per item and judge") == set(Verdict.model_fields)
    db = sqlite3.connect(small_run / "results.sqlite")
    try:
        for table, model in (("predictions", Prediction), ("verdicts", Verdict)):
            assert {r[1] for r in db.execute(f"PRAGMA table_info({table})")} == set(model.model_fields)
    finally:
        db.close()
    assert f"`yanami-run`, {RunManifest.model_fields['version'].default}" in DOC.read_text(encoding="utf-8")


def test_a_checks_effect_is_stored_and_older_rows_without_it_still_read() -> None:
    from yanami.core._results import _dump_checks, _load_checks

    checks = [
        CheckResult(id="c1", kind="atomic", capability=None, passed=True, effect="change"),
        CheckResult(id="c2", kind="capability", capability="constraint_adherence", passed=False),
    ]
    assert _load_checks(_dump_checks(checks)) == checks
    assert _load_checks('[["c1", "atomic", null, true]]') == [
        CheckResult(id="c1", kind="atomic", capability=None, passed=True, effect=None)
    ]
