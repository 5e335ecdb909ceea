"""``yanami review …`` through the real entry point: each command's output, and each bad input
one line with a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.review.conftest import judge_rest
from yanami.review import Decision, ReviewDB


def test_the_commands_from_init_to_export(cli: Callable[..., Any], review_dataset: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "r.sqlite")
    r = cli("review", "init", review_dataset, "--db", db)
    assert r.code == 0 and "4 dialogues" in r.out
    links = []
    for name in ("a", "b", "c"):
        r = cli("review", "users", "add", name, "--db", db, "--url", "http://127.0.0.1:9000/")
        assert r.code == 0 and r.out.startswith(f"{name}: http://127.0.0.1:9000/signin?token=")
        links.append(r.out.strip())
    assert cli("review", "users", "add", "boss", "--role", "admin", "--db", db).code == 0
    assert len(set(links)) == 3
    r = cli("review", "assign", "--per-item", "3", "--db", db)
    assert r.code == 0 and r.out.strip() == "12 new assignment(s)"
    store = ReviewDB(db)
    users = {u.name: u for u in store.users()}
    did = store.table()[0]["id"]
    for name, decision in (("a", Decision.APPROVE), ("b", Decision.APPROVE), ("c", Decision.REJECT)):
        judge_rest(store, users[name], did)
        store.decide(users[name], did, decision, "")
    r = cli("review", "status", "--db", db)
    assert (
        r.code == 0
        and "a: 1/4 decided" in r.out
        and "4 dialogues: approve 1, undecided 3; 1 with disagreements" in r.out
    )
    r = cli("review", "agreement", "--db", db, "--json")
    assert r.code == 0 and json.loads(r.out)["per_annotator"]["c"]["decision_agreement"] == 0.0
    assert cli("review", "agreement", "--db", db).out.splitlines()[0].startswith("scope\tdialogues")
    r = cli("review", "export", "--db", db, "--out", tmp_path / "bench")
    assert r.code == 0 and "1 approved of 4 reviewed dialogues (3 undecided left out)" in r.out
    assert cli("validate", tmp_path / "bench").code == 0


def test_bad_input_is_one_line_and_a_non_zero_exit(
    cli: Callable[..., Any], review_dataset: Path, tmp_path: Path
) -> None:
    db = str(tmp_path / "r.sqlite")
    cases = [
        (("review", "status", "--db", db), "no review database here"),
        (("review", "init", tmp_path / "nothing", "--db", db), "nothing"),
        (("review", "init", review_dataset, "--db", str(tmp_path / "no" / "r.sqlite")), "no such directory"),
    ]
    for args, message in cases:
        r = cli(*args)
        assert r.code != 0 and message in r.err and len(r.err.strip().splitlines()) == 1, (args, r.err)
    assert cli("review", "init", review_dataset, "--db", db).code == 0
    cases = [
        (("review", "init", review_dataset, "--db", db), "already holds a dataset"),
        (("review", "users", "add", "bad name!", "--db", db), "use 1-64 letters"),
        (("review", "assign", "--per-item", "3", "--db", db), "only 0 annotator(s)"),
        (("review", "export", "--db", db, "--out", tmp_path / "x" / "y"), "no such directory"),
    ]
    for args, message in cases:
        r = cli(*args)
        assert r.code != 0 and message in r.err and len(r.err.strip().splitlines()) == 1, (args, r.err)
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:  # a port another server holds
        port = str(taken.getsockname()[1])
        r = cli("review", "serve", "--db", db, "--port", port)
    assert r.code == 2 and f"127.0.0.1:{port}: cannot listen there" in r.err
    assert "choose another --port" in r.err and "Traceback" not in r.err


def test_the_base_cli_does_not_load_the_web_stack() -> None:
    code = (
        "import sys, yanami, yanami.cli; "
        "print(sorted(m for m in ('fastapi', 'sqlalchemy', 'uvicorn', 'starlette', 'statsmodels', 'krippendorff', "
        "'psycopg') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
