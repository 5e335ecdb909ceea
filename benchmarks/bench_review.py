"""The review app (issue 25): page render time, concurrent saves, export.

    python benchmarks/bench_review.py [--only render|saves|export|attacks|human] [--seconds 60] [--clients 30]

  render  server time to render a 12-turn dialogue page with 6 images (a world dialogue of the
          editing scenario, its turns repeated as text-only turns up to 12), measured by a timing
          middleware on a real uvicorn on loopback, over N sequential requests; baseline: the
          history page of a dialogue without edits (session, one query, a small template).
          Target: median <= 150 ms.
  saves   --clients clients (default 30) save edits for --seconds (default 60) against
          `yanami review serve` in its own process, on SQLite and on PostgreSQL
          (127.0.0.1:5432, trust auth: a fresh database made from `test`, dropped after); the
          clients share 4 dialogues, so most saves collide and are answered 409, after which
          the client saves again on the version the 409 names. Reports saves/s, 409s/s, lost
          updates and server errors. Targets: 0 lost updates (every accepted save is in the
          version history exactly once, every rejected one got 409 and is not there), 0
          server errors. Baseline: the same clients' GET of the queue page, for as long.
  export  `export_approved` of 400 reviewed dialogues (built by build_world with 2 workers,
          each decided approve by 3 annotators, one check verdict each and one edit each);
          baseline: copying the source dataset's directory. Target: <= 10 s.
  attacks every attack of issue 35 replayed against the app on a real uvicorn, on SQLite and on
          PostgreSQL: what each request got, against what it must get now.
  human   humans measure the judge: a world bench of --per-scenario dialogues per scenario (seed 7)
          whose reference picture at a share --damage of the target turns (seeded draw) has the
          object a check names recoloured, as a faulty image generator would draw it; it is
          reviewed by three scripted annotators on the app served by uvicorn on loopback, over
          real HTTP: each signs in with their one-time link and posts, with the session's CSRF
          token, a verdict on every check of their dialogues: what the picture shows (the
          check's predicate on the scene drawn), flipped with the annotator's probability
          (--flip, default 5,10,20 %) and a fix instead with 3 % (each a seeded draw per
          annotator). Then the dataset's own pictures are evaluated (`yanami eval --model
          reference:oracle`, the exact judge) and `yanami agreement RUN --judge exact --human DB`
          prints the judge-vs-human table. Also printed: how often the humans' label and the
          exact judge match what the picture shows. SQLite unless --backend says otherwise.

Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import itertools
import json
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from yanami.review import Decision, ReviewDB, Role, Verdict, create_app, export_approved
from yanami.world import build_world

TEXT = "turns.0.user.parts.0.text"
PG = "postgresql://postgres@127.0.0.1:5432"


# -- a small HTTP client ----------------------------------------------------------------


class Client:
    def __init__(self, port: int) -> None:
        self.port, self.csrf = port, ""
        self.cookies: dict[str, str] = {}
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def request(
        self, method: str, path: str, form: dict[str, str] | None = None, extra: dict[str, str] | None = None
    ) -> tuple[int, str]:
        jar = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        headers = {"Cookie": jar} if jar else {}
        headers.update(extra or {})
        body = None
        if form is not None:
            body = urlencode(form).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        for attempt in (0, 1):
            try:
                self.conn.request(method, path, body=body, headers=headers)
                resp = self.conn.getresponse()
                cookies = resp.headers.get_all("set-cookie") or []
                text = resp.read().decode()
                break
            except (http.client.HTTPException, ConnectionError):  # a keep-alive the server closed
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                if attempt:
                    raise
        for c in cookies:
            name, _, value = c.split(";", 1)[0].partition("=")
            if name.startswith("yanami_"):
                self.cookies[name] = value
        return resp.status, text

    def sign_in(self, token: str) -> None:
        """As a browser does: open the link's page (it may set a cookie and a form token), post its form."""
        _, page = self.request("GET", f"/signin?token={token}")
        form = {"token": token}
        for name, value in re.findall(r'<input[^>]*name="(signin_csrf)"[^>]*value="([^"]+)"', page):
            form[name] = value
        status, _ = self.request("POST", "/signin", form)
        assert status == 303, status
        status, page = self.request("GET", "/")
        if status == 303:  # an admin's home is /admin
            _, page = self.request("GET", "/admin")
        self.csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(port: int, proc: subprocess.Popen[bytes] | None = None) -> None:
    for _ in range(600):
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode})")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise RuntimeError("the server did not start")


def dataset(work: Path, n: int) -> Path:
    """A world dataset of ``n`` dialogues under ``work``, built once."""
    path = work / f"world-{n}"
    if not (path / "manifest.json").is_file():
        t = time.perf_counter()
        build_world(path, dialogues=n, seed=7, workers=2, overwrite=True)
        print(f"  built {n} dialogues in {time.perf_counter() - t:.1f} s ({path})")
    return path


def new_review(url: str, source: Path, annotators: int, per_item: int) -> tuple[ReviewDB, dict[str, str]]:
    db = ReviewDB(url, create=True)
    db.load_dataset(source)
    tokens = {f"ann{i:02d}": db.add_user(f"ann{i:02d}", Role.ANNOTATOR) for i in range(annotators)}
    tokens["boss"] = db.add_user("boss", Role.ADMIN)
    db.assign(per_item)
    return db, tokens


@contextlib.contextmanager
def postgres_database() -> Iterator[str]:
    import psycopg

    name = f"yanami_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(f"{PG}/test", autocommit=True, connect_timeout=3) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{PG}/{name}"
    finally:
        with psycopg.connect(f"{PG}/test", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- (a) render ---------------------------------------------------------------------------


def twelve_turns(data: dict[str, Any]) -> dict[str, Any]:
    """The dialogue with its turns repeated, text only, up to 12 turns (its images stay as they are)."""
    turns = list(data["turns"])
    k = 0
    while len(turns) < 12:
        t = json.loads(json.dumps(data["turns"][k % len(data["turns"])]))
        for side in ("user", "assistant"):
            t[side]["parts"] = [p for p in t[side]["parts"] if p["type"] == "text"] or [{"type": "text", "text": "…"}]
        t["index"] = len(turns)
        for c in t["checks"]:
            c["id"] = f"{c['id']}-r{len(turns)}"
        turns.append(t)
        k += 1
    return {**data, "turns": turns}


def bench_render(work: Path, n: int) -> None:
    import uvicorn

    print(f"render: {n} sequential requests per page, server time by middleware")
    source = dataset(work, 8)
    db, tokens = new_review(str(work / f"render-{uuid.uuid4().hex[:6]}.sqlite"), source, 1, 1)
    rows = db.table()
    did = next(r["id"] for r in rows if r["group"] == "editing")
    big = twelve_turns(db.dialogue(did)[0])
    with db.begin() as conn:
        from yanami.review._db import T

        conn.execute(T["dialogues"].update().where(T["dialogues"].c.id == did).values(current=json.dumps(big)))
    images = sum(1 for t in big["turns"] for s in ("user", "assistant") for p in t[s]["parts"] if p["type"] == "image")
    checks = sum(len(t["checks"]) for t in big["turns"])
    print(f"  page: {did}, {len(big['turns'])} turns, {images} images, {checks} checks, {len(big['questions'])} DSU")

    app = create_app(db)
    spent: dict[str, list[float]] = {}

    @app.middleware("http")
    async def timing(request: Any, call_next: Any) -> Any:
        t = time.perf_counter()
        response = await call_next(request)
        spent.setdefault(request.url.path, []).append(time.perf_counter() - t)
        return response

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(port)
    try:
        client = Client(port)
        client.sign_in(tokens["ann00"])
        pages = {"dialogue": f"/d/{did}", "baseline": f"/d/{rows[0]['id']}/history"}
        size = {}
        wall: dict[str, list[float]] = {}
        for _ in range(3):  # warm up the templates and the connection pool
            for path in pages.values():
                client.request("GET", path)
        spent.clear()
        for _ in range(n):
            for name, path in pages.items():
                t = time.perf_counter()
                status, body = client.request("GET", path)
                wall.setdefault(name, []).append(time.perf_counter() - t)
                assert status == 200, (path, status)
                size[name] = len(body)
    finally:
        server.should_exit = True
        thread.join(10)
        db.close()
    base = statistics.median(spent[pages["baseline"]])
    for name, path in pages.items():
        times = sorted(spent[path])
        med, p95 = statistics.median(times), times[int(0.95 * (len(times) - 1))]
        print(
            f"  {name:9s} server median {med * 1e3:6.1f} ms  p95 {p95 * 1e3:6.1f} ms  "
            f"round trip median {statistics.median(wall[name]) * 1e3:6.1f} ms  {size[name] / 1024:6.1f} KiB  "
            f"x{med / base:.1f} baseline"
        )
    met = statistics.median(spent[pages["dialogue"]]) <= 0.15
    print(f"  target: dialogue median <= 150 ms: {'met' if met else 'MISSED'}")


# -- (b) concurrent saves -----------------------------------------------------------------


def bench_saves(work: Path, seconds: float, clients: int, backends: list[str]) -> None:
    print(f"saves: {clients} clients for {seconds:g} s each run, 4 shared dialogues")
    source = dataset(work, 8)
    for backend in backends:
        if backend == "postgresql":
            try:
                ctx: contextlib.AbstractContextManager[str] = postgres_database()
                url = ctx.__enter__()
            except Exception as exc:  # a benchmark reports and goes on
                print(f"  postgresql: skipped ({str(exc).strip().splitlines()[0]})")
                continue
        else:
            ctx, url = contextlib.nullcontext(""), str(work / f"saves-{uuid.uuid4().hex[:6]}.sqlite")
        try:
            _saves_on(backend, url, source, seconds, clients)
        finally:
            ctx.__exit__(None, None, None)


def _saves_on(backend: str, url: str, source: Path, seconds: float, clients: int) -> None:
    db, tokens = new_review(url, source, clients, clients)
    ids = [r["id"] for r in db.table()][:4]
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "yanami", "review", "serve", "--db", url, "--port", str(port)],
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(port, proc)
        names = [n for n in tokens if n != "boss"]
        conns = []
        for name in names:
            c = Client(port)
            c.sign_in(tokens[name])
            conns.append(c)
        baseline = _run_clients(conns, seconds / 4, lambda c, k, n: ("GET", "/", None), ids)
        result = _run_clients(conns, seconds, None, ids)
    finally:
        proc.terminate()
        proc.wait(10)
    # check the history against what the clients were told
    lost = duplicated = phantom = broken_chain = 0
    for did in ids:
        edits = db.edits(did)
        afters = [e.after for e in edits]
        counts: dict[str, int] = {}
        for a in afters:
            counts[a] = counts.get(a, 0) + 1
        accepted = result["accepted"].get(did, set())
        lost += sum(1 for v in accepted if counts.get(v, 0) == 0)
        duplicated += sum(1 for v in accepted if counts.get(v, 0) > 1)
        phantom += sum(1 for v in afters if v not in accepted)
        phantom += sum(1 for v in result["rejected"].get(did, set()) if v in counts)
        broken_chain += sum(1 for a, b in itertools.pairwise(edits) if a.after != b.before)
        versions = [e.version for e in edits]
        broken_chain += int(db.dialogue(did)[1] != len(edits) or versions != list(range(1, len(edits) + 1)))
    db.close()
    n_ok = sum(len(v) for v in result["accepted"].values())
    n_409 = sum(len(v) for v in result["rejected"].values())
    rate = n_ok / result["elapsed"]
    print(
        f"  {backend:10s} {n_ok} saves ({rate:.1f}/s), {n_409} answered 409 ({n_409 / result['elapsed']:.1f}/s), "
        f"lost updates {lost + duplicated + phantom + broken_chain} "
        f"(missing {lost}, twice {duplicated}, not accepted yet there {phantom}, broken chain {broken_chain}), "
        f"server errors {result['errors']}, other statuses {result['other']}"
    )
    print(
        f"  {'':10s} baseline GET / {baseline['requests'] / baseline['elapsed']:.1f}/s; "
        f"saves+409s are x{(n_ok + n_409) / result['elapsed'] / (baseline['requests'] / baseline['elapsed']):.2f} of it"
    )


def _run_clients(conns: list[Client], seconds: float, plain: Any, ids: list[str]) -> dict[str, Any]:
    """Each client saves its own texts in a loop (or, with ``plain``, makes that request)."""
    accepted: dict[str, set[str]] = {}
    rejected: dict[str, set[str]] = {}
    stats = {"errors": 0, "other": 0, "requests": 0}
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def run(k: int, c: Client) -> None:
        did = ids[k % len(ids)]
        version = None
        n = 0
        while time.perf_counter() < stop:
            if plain is not None:
                status, _ = c.request(*plain(c, k, n))
                with lock:
                    stats["requests"] += 1
                    stats["errors"] += status >= 500
                continue
            if version is None:
                _, page = c.request("GET", f"/d/{did}")
                version = int(re.search(r'name="base_version" value="(\d+)"', page).group(1))  # type: ignore[union-attr]
            value = f"client {k} save {n}"
            n += 1
            status, page = c.request(
                "POST", f"/d/{did}/edit", {"csrf": c.csrf, "path": TEXT, "value": value, "base_version": str(version)}
            )
            with lock:
                stats["requests"] += 1
                if status == 303:
                    accepted.setdefault(did, set()).add(value)
                    version += 1
                elif status == 409:
                    rejected.setdefault(did, set()).add(value)
                    version = int(re.search(r'name="base_version" value="(\d+)"', page).group(1))  # type: ignore[union-attr]
                elif status >= 500:
                    stats["errors"] += 1
                    version = None
                else:
                    stats["other"] += 1
                    version = None

    t = time.perf_counter()
    threads = [threading.Thread(target=run, args=(k, c)) for k, c in enumerate(conns)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return {"accepted": accepted, "rejected": rejected, "elapsed": time.perf_counter() - t, **stats}


# -- (c) export ---------------------------------------------------------------------------


def bench_export(work: Path, n: int) -> None:
    print(f"export: {n} reviewed dialogues")
    source = dataset(work, n)
    t = time.perf_counter()
    db, _ = new_review(str(work / f"export-{uuid.uuid4().hex[:6]}.sqlite"), source, 3, 3)
    users = [u for u in db.users() if u.role is Role.ANNOTATOR]
    from yanami.review._db import T

    for row in db.table():
        data, version = db.dialogue(row["id"])
        checks = [c["id"] for turn in data["turns"] for c in turn["checks"]]
        db.edit(users[0], row["id"], version, TEXT, data["turns"][0]["user"]["parts"][0]["text"] + " (reviewed)")
        for u in users:
            db.set_verdict(u, row["id"], checks[0], Verdict.PASS, "")
            with db.begin() as conn:  # the rest at once: a decision needs every check judged
                conn.execute(
                    T["check_verdicts"].insert(),
                    [
                        {"user_id": u.id, "dialogue_id": row["id"], "check_id": c, "verdict": "pass", "comment": "",
                         "at": "2026-01-01T00:00:00+00:00"}
                        for c in checks[1:]
                    ],
                )  # fmt: skip
            db.decide(u, row["id"], Decision.APPROVE, "")
    print(f"  reviewed through the storage API in {time.perf_counter() - t:.1f} s")
    out = work / "export-out"
    t = time.perf_counter()
    done = export_approved(db, out, overwrite=True)
    spent = time.perf_counter() - t
    copy = work / "export-copy"
    shutil.rmtree(copy, ignore_errors=True)
    t = time.perf_counter()
    shutil.copytree(source, copy)
    base = time.perf_counter() - t
    db.close()
    print(
        f"  export {done.dialogues} approved of {done.reviewed}: {spent:.2f} s "
        f"({done.dialogues / spent:.0f} dialogues/s); baseline copytree {base:.2f} s; x{spent / base:.1f} baseline"
    )
    print(f"  target: <= 10 s: {'met' if spent <= 10 else 'MISSED'}")


# -- (d) humans measure the judge ----------------------------------------------------------

FIX_P = 0.03
"""How often a scripted annotator says a check needs fixing instead of judging it."""


def _recoloured(state: Any, turn: Any) -> Any:
    """The turn's scene with the object its first ``exists`` check names recoloured (None: no such check)."""
    from yanami.world import COLOURS, Scene, WorldObject

    named = next(
        (
            c.hidden.predicate["where"]
            for c in turn.checks
            if isinstance(c.hidden.predicate, dict) and c.hidden.predicate.get("op") == "exists"
        ),
        None,
    )
    if not named:
        return None
    objs = []
    for o in state.scene:
        if all(o.get(k) == v for k, v in named.items()):
            o = {**o, "colour": next(c for c in COLOURS if c not in (o["colour"], "gray"))}
        objs.append(o)
    return Scene(objects=tuple(WorldObject.model_validate(o) for o in objs))


def damaged_bench(work: Path, per_scenario: int, damage: float) -> tuple[Path, dict[tuple[str, str], bool], int]:
    """The world bench with the reference picture of a share ``damage`` of its target turns
    recoloured; what each picture shows ((item, check) -> the check's predicate on the scene drawn)
    and how many pictures were damaged."""
    from yanami.contract import ImagePart, ImageSource, seeded
    from yanami.store import Dataset, DatasetWriter, Generator
    from yanami.world import Scene, WorldObject, evaluate, render_png, turn_state

    source = work / f"world-ps{per_scenario}"
    if not (source / "manifest.json").is_file():
        build_world(source, per_scenario=per_scenario, seed=7, workers=2, overwrite=True)
    ds = Dataset(source)
    out = work / f"damaged-ps{per_scenario}-{damage:g}"
    rng = seeded("bench-review", "damage", damage)
    truth: dict[tuple[str, str], bool] = {}
    damaged = 0
    generator = Generator(name="bench-review-damaged", params={"per_scenario": per_scenario, "damage": damage})
    with DatasetWriter(out, split=ds.manifest.split, generator=generator, overwrite=True) as w:
        for d in ds.read_all():
            for part in d.images():
                w.add_encoded(part, ds.image_bytes(part))
            turns = []
            for t in d.turns:
                if t.checks:
                    state = turn_state(t)
                    scene = Scene(objects=tuple(WorldObject.model_validate(o) for o in state.scene))
                    changed = _recoloured(state, t) if rng.random() < damage else None
                    if changed is not None:
                        scene, damaged = changed, damaged + 1
                        new = w.add_image(render_png(scene, state.azimuth, state.style), ImageSource.ASSISTANT)
                        at = next(i for i, p in enumerate(t.assistant.parts) if isinstance(p, ImagePart))
                        parts = [*t.assistant.parts[:at], new, *t.assistant.parts[at + 1 :]]
                        t = t.model_copy(update={"assistant": t.assistant.model_copy(update={"parts": parts})})
                    for c in t.checks:
                        predicate = c.hidden.predicate
                        assert isinstance(predicate, dict), f"{d.id}/{c.id}: not world data"
                        truth[(f"{d.id}/t{t.index}", c.id)] = evaluate(predicate, scene, state.azimuth)
                turns.append(t)
            w.add_dialogue(d.model_copy(update={"turns": turns}))
    return out, truth, damaged


def bench_human(work: Path, per_scenario: int, damage: float, flips: list[float], backend: str) -> None:
    import uvicorn

    from yanami.contract import seeded
    from yanami.review import read_human_verdicts
    from yanami.runner import evaluate

    print(f"human ({backend}): {len(flips)} scripted annotators over HTTP measure the exact judge")
    t = time.perf_counter()
    bench, truth, damaged = damaged_bench(work, per_scenario, damage)
    targets = len({item for item, _ in truth})
    print(
        f"  bench: {targets} target turns, {len(truth)} checks; {damaged} reference pictures damaged "
        f"(an object recoloured); {time.perf_counter() - t:.1f} s"
    )
    with contextlib.ExitStack() as stack:
        if backend == "postgresql":
            url = stack.enter_context(postgres_database())
        else:
            url = str(work / f"human-{uuid.uuid4().hex[:6]}.sqlite")
        db, tokens = new_review(url, bench, len(flips), len(flips))
        app_server = uvicorn.Server(
            uvicorn.Config(create_app(db), host="127.0.0.1", port=free_port(), log_level="error", access_log=False)
        )
        port = app_server.config.port
        thread = threading.Thread(target=app_server.run, daemon=True)
        thread.start()
        wait_for(port)
        said: dict[str, int] = {}
        flipped = posts = 0
        t = time.perf_counter()
        try:
            for (name, token), p_flip in zip(sorted(n for n in tokens.items() if n[0] != "boss"), flips, strict=True):
                rng = seeded("bench-review", "annotator", name)
                client = Client(port)
                client.sign_in(token)
                for row in db.queue(next(u for u in db.users() if u.name == name)):
                    data, _ = db.dialogue(row["id"])
                    for turn in data["turns"]:
                        for c in turn["checks"]:
                            shows = truth[(f"{row['id']}/t{turn['index']}", c["id"])]
                            r = rng.random()
                            if r < FIX_P:
                                verdict = "fix"
                            else:
                                flip = r < FIX_P + p_flip
                                flipped += flip
                                verdict = "pass" if shows != flip else "fail"
                            form = {"csrf": client.csrf, "check_id": c["id"], "verdict": verdict}
                            if verdict == "fix":
                                form["comment"] = "the check names an object the turn does not mention"
                            status, _ = client.request("POST", f"/d/{row['id']}/check", form)
                            assert status == 303, status
                            posts += 1
                            said[verdict] = said.get(verdict, 0) + 1
        finally:
            app_server.should_exit = True
            thread.join(10)
            db.close()
        spent = time.perf_counter() - t
        print(
            f"  review: {posts} verdicts posted over HTTP in {spent:.1f} s ({posts / spent:.0f}/s): "
            + ", ".join(f"{v} {k}" for k, v in sorted(said.items()))
            + f"; {flipped} flipped on purpose (annotators flip {', '.join(f'{100 * p:g} %' for p in flips)})"
        )
        run = work / f"oracle-{uuid.uuid4().hex[:6]}"
        t = time.perf_counter()
        evaluate(bench, "reference:oracle", run)
        spent = time.perf_counter() - t
        print(f"  yanami eval --model reference:oracle (the dataset's own pictures, exact judge): {spent:.1f} s")
        t = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "yanami", "agreement", str(run), "--judge", "exact", "--human", url],
            capture_output=True,
            text=True,
            check=False,
        )
        spent = time.perf_counter() - t
        if done.returncode:
            print(f"  yanami agreement failed ({done.returncode}): {done.stderr.strip()}")
            return
        print(f"  yanami agreement RUN --judge exact --human DB ({spent:.1f} s, whole command):")
        for line in done.stdout.rstrip().splitlines():
            print(f"    {line}")
        # context: the humans' label and the judge against what the picture shows
        labels = read_human_verdicts(url).labels()
        from yanami.contract import read_rows

        verdicts = read_rows(run).verdicts
        judged = {(item, c.id): c.passed for item, v in verdicts.items() for c in v.checks or []}
        human_right = sum(truth[k] == v for k, v in labels.items()) / len(labels)
        judge_right = sum(truth[k] == judged[k] for k in labels) / len(labels)
        print(
            f"  against what the pictures show, on the {len(labels)} labelled checks: the humans' label "
            f"{100 * human_right:.1f} %, the exact judge {100 * judge_right:.1f} %"
        )


# -- (e) the attacks of issue 35, replayed --------------------------------------------------


@contextlib.contextmanager
def served(db: ReviewDB) -> Iterator[int]:
    import uvicorn

    from yanami.review import create_app

    server = uvicorn.Server(
        uvicorn.Config(create_app(db), host="127.0.0.1", port=free_port(), log_level="critical", access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(server.config.port)
    try:
        yield server.config.port
    finally:
        server.should_exit = True
        thread.join(10)


def bench_attacks(work: Path, backends: list[str]) -> None:
    from yanami.review._db import T

    source = dataset(work, 8)
    results: list[tuple[str, str, str, bool]] = []

    def expect(backend: str, attack: str, got: object, want: object) -> None:
        results.append((backend, attack, str(got), got == want))

    for backend in backends:
        with contextlib.ExitStack() as stack:
            if backend == "postgresql":
                try:
                    url = stack.enter_context(postgres_database())
                except Exception as exc:  # no server here: say so, go on
                    print(f"  postgresql: not reachable ({exc.__class__.__name__}); skipped")
                    continue
            else:
                url = str(work / f"attacks-{uuid.uuid4().hex[:6]}.sqlite")
            db, tokens = new_review(url, source, 3, 3)
            port = stack.enter_context(served(db))
            users = {u.name: u for u in db.users()}
            did = db.table()[0]["id"]
            checks = [c["id"] for t in db.dialogue(did)[0]["turns"] for c in t["checks"]]
            a, b = Client(port), Client(port)
            a.sign_in(tokens["ann00"])
            b.sign_in(tokens["ann01"])
            # blind can be bypassed: a throwaway decision, read the others, change it
            got, _ = a.request("POST", f"/d/{did}/decision", {"csrf": a.csrf, "decision": "reject"})
            expect(backend, "throwaway decision with checks unjudged (was 303)", got, 422)
            db.set_verdict(users["ann01"], did, checks[0], Verdict.FAIL, "")
            with db.begin() as conn:
                conn.execute(
                    T["check_verdicts"].insert(),
                    [{"user_id": users["ann00"].id, "dialogue_id": did, "check_id": c, "verdict": "pass",
                      "comment": "", "at": "2026-01-01T00:00:00+00:00"} for c in checks],
                )  # fmt: skip
            got, _ = a.request("POST", f"/d/{did}/decision", {"csrf": a.csrf, "decision": "reject"})
            expect(backend, "a decision once every check is judged", got, 303)
            got, page = a.request("GET", f"/d/{did}")
            expect(backend, "the others' verdicts are shown after it", "ann01: fail" in page, True)
            got, _ = a.request("POST", f"/d/{did}/decision", {"csrf": a.csrf, "decision": "approve"})
            expect(backend, "the decision changed after reading the others (was 303)", got, 409)
            form = {"csrf": a.csrf, "check_id": checks[0], "verdict": "fail"}
            got, _ = a.request("POST", f"/d/{did}/check", form)
            expect(backend, "a verdict changed after reading the others", got, 409)
            # login CSRF from a page on another local port
            c = Client(port)
            _, page = c.request("GET", f"/signin?token={tokens['ann02']}")
            token = re.search(r'name="signin_csrf" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
            got, _ = c.request("POST", "/signin", {"token": tokens["ann02"], "signin_csrf": token},
                               {"Origin": "http://127.0.0.1:9999"})  # fmt: skip
            expect(backend, "POST /signin from another port's page (was 303)", got, 403)
            got, _ = Client(port).request("POST", "/signin", {"token": tokens["ann02"]})
            expect(backend, "POST /signin without the sign-in page's token (was 303)", got, 403)
            # NUL bytes
            for what, path, fields in (
                ("n edit", f"/d/{did}/edit", {"path": TEXT, "value": "a\x00b", "base_version": "0"}),
                (" verdict comment", f"/d/{did}/check", {"check_id": checks[1], "verdict": "fix", "comment": "\x00"}),
                (" decision comment", f"/d/{did}/decision", {"decision": "approve", "comment": "\x00"}),
            ):
                got, _ = b.request("POST", path, {"csrf": b.csrf, **fields})
                expect(backend, f"NUL in a{what} (was 500 on PostgreSQL)", got, 422)
            got, _ = b.request("GET", f"/d/{did}%00")
            expect(backend, "NUL in a path (was 500 on PostgreSQL)", got, 404)
            # signing in again leaves the earlier session valid
            old = dict(b.cookies)
            again = Client(port)
            again.sign_in(db.relink("ann01"))
            stale = Client(port)
            stale.cookies = old
            got, _ = stale.request("GET", "/")
            expect(backend, "the earlier session after signing in again (was 200)", got, 401)
            b = again
            # the 409 page of a stale revert
            db.edit(users["ann01"], did, 0, TEXT, "one")
            db.edit(users["ann02"], did, 1, TEXT, "two")
            got, page = b.request("POST", f"/d/{did}/revert", {"csrf": b.csrf, "base_version": "1", "to_version": "0"})
            button = dict(re.findall(r'name="(base_version|to_version)" value="([^"]*)"', page))
            expect(backend, "a stale revert", got, 409)
            got, _ = b.request("POST", f"/d/{did}/revert", {"csrf": b.csrf, **button})
            expect(backend, "the 409 page's button (was 422)", got, 303)
            _, version = db.dialogue(did)
            k = next(i for i, q in enumerate(db.dialogue(did)[0]["questions"]) if q.get("choices"))
            choices = db.dialogue(did)[0]["questions"][k]["choices"]
            for what, path, value in (
                ("an option list of one", f"questions.{k}.choices", "only one"),
                ("options that differ by a trailing space", f"questions.{k}.choices.1", choices[0] + " "),
                ("an empty turn text", TEXT, "   "),
            ):
                fields = {"csrf": b.csrf, "path": path, "value": value, "base_version": str(version)}
                got, _ = b.request("POST", f"/d/{did}/edit", fields)
                expect(backend, f"{what} (was 303)", got, 422)
            # a check most annotators failed, exported as ground truth
            other = db.table()[1]["id"]
            failed = next(c["id"] for t in db.dialogue(other)[0]["turns"] for c in t["checks"])
            for name in ("ann00", "ann01", "ann02"):
                db.set_verdict(users[name], other, failed, Verdict.FAIL if name != "ann02" else Verdict.PASS, "")
                with db.begin() as conn:
                    conn.execute(
                        T["check_verdicts"].insert(),
                        [{"user_id": users[name].id, "dialogue_id": other, "check_id": cc, "verdict": "pass",
                          "comment": "", "at": "2026-01-01T00:00:00+00:00"}
                         for cc in [c["id"] for t in db.dialogue(other)[0]["turns"] for c in t["checks"]]
                         if cc != failed],
                    )  # fmt: skip
                db.decide(users[name], other, Decision.APPROVE, "")
            done = export_approved(db, work / f"attacks-out-{uuid.uuid4().hex[:6]}")
            expect(backend, "an approved dialogue with a check 2 of 3 failed: exported (was 1)", done.dialogues, 0)
            # the admin's home
            boss = Client(port)
            boss.sign_in(tokens["boss"])
            got, _ = boss.request("GET", "/")
            expect(backend, "the admin's home (was an empty queue, 200)", got, 303)
            # the database changed under the server
            if backend == "postgresql":
                import psycopg

                name = url.rsplit("/", 1)[1]
                with psycopg.connect(f"{PG}/test", autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
                    conn.execute(f'CREATE DATABASE "{name}"')
                what = "the database dropped and re-created empty (was 500)"
            else:
                with open(url, "r+b") as f:
                    f.truncate(0)
                what = "the SQLite file truncated in place (was 500, then a 303 written into it)"
            got, _ = boss.request("GET", "/admin")
            expect(backend, what, got, 503)
            got, _ = boss.request("POST", "/admin/guidelines", {"csrf": boss.csrf, "text": "written late"})
            expect(backend, "  and a write after it", got, 503)
            db.close()
    width = max(len(r[1]) for r in results)
    print(f"attacks: {len(results)} requests replayed")
    for backend, attack, got, ok in results:
        print(f"  {backend:<10} {attack:<{width}}  {got:<6} {'ok' if ok else 'WRONG'}")
    print(f"  {sum(r[3] for r in results)} of {len(results)} as they must be now")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["render", "saves", "export", "attacks", "human"])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long each save run lasts")
    parser.add_argument("--clients", type=int, default=30)
    parser.add_argument("--requests", type=int, default=100, help="requests per page in the render run")
    parser.add_argument("--dialogues", type=int, default=400, help="dialogues in the export run")
    parser.add_argument("--per-scenario", type=int, default=3, help="dialogues per scenario in the human run")
    parser.add_argument("--damage", type=float, default=0.35, help="share of damaged reference pictures (human)")
    parser.add_argument("--flip", default="0.05,0.10,0.20", help="each annotator's flip probability (human)")
    parser.add_argument(
        "--backend", choices=["sqlite", "postgresql"], action="append", help="default: both (human: sqlite)"
    )
    parser.add_argument("--work", type=Path, help="keep the built datasets here (default: a temporary folder)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        work = args.work or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-review-")))
        work.mkdir(parents=True, exist_ok=True)
        if args.only in (None, "render"):
            bench_render(work, args.requests)
        if args.only in (None, "saves"):
            bench_saves(work, args.seconds, args.clients, args.backend or ["sqlite", "postgresql"])
        if args.only in (None, "export"):
            bench_export(work, args.dialogues)
        if args.only in (None, "attacks"):
            bench_attacks(work, args.backend or ["sqlite", "postgresql"])
        if args.only in (None, "human"):
            flips = [float(x) for x in args.flip.split(",")]
            for backend in args.backend or ["sqlite"]:
                bench_human(work, args.per_scenario, args.damage, flips, backend)


if __name__ == "__main__":
    main()
