"""``yanami construct --backend ray``: the dialogues made by Ray actors, settled and written here —
the same bytes as the local backend, one budget for the whole cluster, a bad address one line.

The Ray tests join the session's one Ray head (``ray_address``, tests/conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.construct.test_construct import configs, ledger, tree
from yanami.construct import prepare, store_path
from yanami.construct._standins import StandIns
from yanami.models.fake import FakeServer
from yanami.store import Dataset, validate_dataset

pytestmark = [pytest.mark.xdist_group("ray")]

STAND_INS = ["--author", "stand-ins", "--image-model", "stand-ins", "--verifier", "stand-ins"]


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prepared pool of world pictures: two groups per scenario (as tests/construct/test_construct.py's)."""
    out = tmp_path_factory.mktemp("pool") / "pool"
    prepare(Path("world:2@7"), out, filter_spec="stand-ins")
    return out


def _calls(out: Path) -> list[tuple[Any, ...]]:
    """The ledger's calls, counted by what they were and how they ended (not by when)."""
    return ledger(
        out, "SELECT k, role, stage, status, cached, COUNT(*) FROM calls GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5"
    )


def _summary(out: Path) -> dict[str, Any]:
    return dict(json.loads((store_path(out) / "summary.json").read_text()))


def test_on_ray_the_stand_ins_give_the_same_bytes_and_the_same_ledger_as_the_local_backend(
    pool: Path, tmp_path: Path, cli: Callable[..., Any], ray_address: str
) -> None:
    args = [pool, *STAND_INS, "--per-scenario", "1", "--faults", "0.5", "--concurrency", "3"]
    local = cli("construct", *args, "--out", tmp_path / "local")
    assert local.code == 0, local.err
    ray = cli("construct", *args, "--out", tmp_path / "ray", "--backend", "ray", "--ray-address", ray_address)
    assert ray.code == 0, ray.err
    # dialogues shards, images, manifest: byte for byte
    assert tree(tmp_path / "ray") == tree(tmp_path / "local")
    assert validate_dataset(tmp_path / "ray") == [] and len(Dataset(tmp_path / "ray")) == 4
    # every call the actors made is in the one ledger, each ended (none left as sent)
    assert _calls(tmp_path / "ray") == _calls(tmp_path / "local")
    assert ledger(tmp_path / "ray", "SELECT COUNT(*) FROM calls WHERE status = 'sent'") == [(0,)]
    assert ledger(tmp_path / "ray", "SELECT k, status, stage, reason, record, line FROM dialogues ORDER BY k") == (
        ledger(tmp_path / "local", "SELECT k, status, stage, reason, record, line FROM dialogues ORDER BY k")
    )
    # the same summary, the faults injected and caught included
    assert ray.out.replace(str(tmp_path / "ray"), str(tmp_path / "local")) == local.out
    assert "injected wrong-colour" in ray.out


def test_on_ray_the_budget_holds_for_the_whole_cluster_and_stops_as_a_local_run_does(
    pool: Path, tmp_path: Path, cli: Callable[..., Any], ray_address: str
) -> None:
    budget = 0.15
    with FakeServer(brain=StandIns().brain) as server:
        models = configs(tmp_path, server.url, prices=True)
        args = [pool, "--author", models["author"], "--image-model", models["image_model"], "--verifier",
                models["verifier"], "--per-scenario", "1", "--budget", str(budget), "--concurrency", "4"]  # fmt: skip
        local = cli("construct", *args, "--out", tmp_path / "local")
        ray = cli("construct", *args, "--out", tmp_path / "ray", "--backend", "ray", "--ray-address", ray_address)
        for run, out in ((local, tmp_path / "local"), (ray, tmp_path / "ray")):
            assert run.code == 3, run.err
            assert "stopped before the budget (0.15) would be passed" in run.err
            s = _summary(out)
            assert s["stopped"] == "budget" and s["pending"] > 0 and 0 < s["cost"] <= budget
            spent = ledger(out, "SELECT COALESCE(SUM(cost), 0) FROM calls")[0][0]
            assert 0 < spent <= budget  # never over, whatever the actors had in flight
            assert ledger(out, "SELECT COUNT(*) FROM calls WHERE status = 'sent'") == [(0,)]
            assert validate_dataset(out) == [] and len(Dataset(out)) == s["accepted"]
        # the store Ray began, continued here with a larger budget: nothing settled or paid for is redone
        settled = {k for (k,) in ledger(tmp_path / "ray", "SELECT k FROM dialogues")}
        before = ledger(tmp_path / "ray", "SELECT MAX(rowid) FROM calls")[0][0]
        more = cli("construct", *args[:-4], "--budget", "100", "--concurrency", "2", "--out", tmp_path / "ray")
        assert more.code == 0, more.err
        later = {k for (k,) in ledger(tmp_path / "ray", f"SELECT DISTINCT k FROM calls WHERE rowid > {before}")}
        assert later and not settled & later
        cached = ledger(tmp_path / "ray", f"SELECT COUNT(*) FROM calls WHERE rowid > {before} AND cached = 1")[0][0]
        # what the actors paid for before the stop, for the dialogues it left unsettled, comes from the
        # cache (how many such calls there were depends on where the actors stood when the budget ran
        # out: on a loaded machine, at times none)
        unsettled = ",".join(str(k) for k in later)
        paid = ledger(
            tmp_path / "ray",
            f"SELECT COUNT(*) FROM calls WHERE rowid <= {before} AND status = 'ok' AND cached = 0"
            f" AND k IN ({unsettled})",
        )[0][0]
        if paid:
            assert cached > 0, (paid, cached)
        assert _summary(tmp_path / "ray")["accepted"] == 4


def test_a_ray_address_nothing_answers_at_is_one_line_and_leaves_nothing(
    pool: Path, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    out = tmp_path / "out"
    r = cli("construct", pool, *STAND_INS, "--out", out, "--backend", "ray", "--ray-address", "127.0.0.1:1")
    assert r.code == 2 and r.err.count("\n") == 1 and "--ray-address 127.0.0.1:1: nothing answers there" in r.err
    assert "Traceback" not in r.err
    r = cli("construct", pool, *STAND_INS, "--out", out, "--ray-address", "127.0.0.1:1")
    assert r.code == 2 and r.err.strip() == "error: --ray-address: only with --backend ray"
    assert sorted(p.name for p in tmp_path.iterdir()) == []
