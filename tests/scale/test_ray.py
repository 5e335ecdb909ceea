"""``--backend ray`` on a real Ray (a head on this machine, 2 CPUs): the same bytes and the same rows
as the local backend, a worker or a driver killed mid-run, and one budget per endpoint."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from yanami.models.fake import FakeServer
from yanami.scale._pace import HORIZON_S

pytestmark = [pytest.mark.xdist_group("ray")]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _rows(run: Path) -> tuple[list[tuple], list[tuple]]:
    db = sqlite3.connect(run / "results.sqlite")
    try:
        predictions = db.execute(
            "SELECT item, dialogue, kind, turn, status, text, image, error, seed, history_fallbacks, calls"
            " FROM predictions ORDER BY item"
        ).fetchall()
        verdicts = db.execute(
            "SELECT item, judge, judge_version, status, score, vq, checks, aligned, reason, scores"
            " FROM verdicts ORDER BY item, judge"
        ).fetchall()
        return predictions, verdicts
    finally:
        db.close()


def _count(run: Path) -> int:
    if not (run / "results.sqlite").exists():
        return 0
    db = sqlite3.connect(run / "results.sqlite")
    try:
        return int(db.execute("SELECT count(*) FROM predictions").fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()


def _config(tmp_path: Path, srv: FakeServer, name: str = "model.yaml", **extra: object) -> Path:
    settings = {"max_concurrency": 8, "requests_per_minute": 600000, **extra}
    path = tmp_path / name
    path.write_text(
        f"kind: openai\nchat_model: chat-model\nimage_model: image-model\nbase_url: {srv.url}/v1\n"
        "backoff_s: 0.01\ntimeout_s: 20\n" + "".join(f"{k}: {v}\n" for k, v in settings.items())
    )
    return path


def _yanami(*args: str | Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "yanami", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_rows(run: Path, n: int, proc: subprocess.Popen[str], limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    while _count(run) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no rows came"
        time.sleep(0.05)


def _map_workers() -> list[int]:
    """The processes of Ray Data's actors that run eval chains on this machine."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"MapWorker(MapBatches(_ChainActor))" in cmdline:
            found.append(int(entry.name))
    return found


def test_build_on_ray_is_byte_identical_to_local(cli, ray_address, tmp_path) -> None:
    local, on_ray = tmp_path / "local", tmp_path / "ray"
    assert cli("build", "--out", local, "--per-scenario", "3", "--seed", "5").code == 0
    r = cli("build", "--out", on_ray, "--per-scenario", "3", "--seed", "5", "--backend", "ray",
            "--ray-address", ray_address)  # fmt: skip
    assert r.code == 0, r.err
    assert _tree(local) == _tree(on_ray)
    assert len(list((local / "images").rglob("*.png"))) > 20


def test_without_an_address_a_local_ray_starts_here(tmp_path) -> None:
    local, on_ray = tmp_path / "local", tmp_path / "ray"
    assert subprocess.run([sys.executable, "-m", "yanami", "build", "--out", str(local), "--per-scenario", "1"],
                          capture_output=True).returncode == 0  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-m", "yanami", "build", "--out", str(on_ray), "--per-scenario", "1", "--backend", "ray"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert _tree(local) == _tree(on_ray)
    assert "Traceback" not in r.stderr and "core_worker" not in r.stderr  # Ray's own notices stay off the terminal


def test_eval_through_ray_actors_with_a_worker_killed_gives_the_local_rows(ray_address, world_bench, tmp_path) -> None:
    with FakeServer(latency_s=0.15, record=False) as srv:
        model = _config(tmp_path, srv)
        local, on_ray = tmp_path / "local", tmp_path / "ray"
        r = subprocess.run([sys.executable, "-m", "yanami", "eval", str(world_bench), "--model", str(model), "--out",
                            str(local), "--concurrency", "4"], capture_output=True, text=True)  # fmt: skip
        assert r.returncode == 0, r.stderr
        proc = _yanami("eval", world_bench, "--model", model, "--out", on_ray, "--concurrency", "4",
                       "--backend", "ray", "--ray-address", ray_address)  # fmt: skip
        _wait_rows(on_ray, 6, proc)
        workers = _map_workers()
        assert workers, "no Ray actor runs the chains"
        os.kill(workers[0], signal.SIGKILL)  # Ray restarts the actor and runs its chains again
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
        assert _rows(on_ray) == _rows(local)
        assert len(_rows(local)[0]) > 40


def test_eval_resumes_after_the_driver_is_killed(ray_address, world_bench, tmp_path) -> None:
    with FakeServer(latency_s=0.15, record=False) as srv:
        model = _config(tmp_path, srv)
        local, on_ray = tmp_path / "local", tmp_path / "ray"
        args = ("--model", model, "--history", "self", "--concurrency", "4")
        r = subprocess.run([sys.executable, "-m", "yanami", "eval", str(world_bench), *map(str, args), "--out",
                            str(local)], capture_output=True, text=True)  # fmt: skip
        assert r.returncode == 0, r.stderr
        ray_args = (*args, "--out", on_ray, "--backend", "ray", "--ray-address", ray_address)
        proc = _yanami("eval", world_bench, *ray_args)
        _wait_rows(on_ray, 6, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        written = _count(on_ray)
        assert 6 <= written < len(_rows(local)[0])
        again = subprocess.run([sys.executable, "-m", "yanami", "eval", str(world_bench), *map(str, ray_args)],
                               capture_output=True, text=True, timeout=300)  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert f"{written} already done" in again.stdout
        assert _rows(on_ray) == _rows(local)  # Self-History resumed from the stored images: the same rows


def _through_shared_limits(
    url: str, processes: int | None, slots: int, rpm: float, threads: int, requests: int, idle_s: float = 0.0
) -> int:
    """In a Ray worker of a pool of ``processes``: ``requests`` requests to ``url``, ``threads`` at
    once, through the endpoint's shared limits (``slots`` in flight, ``rpm`` a minute, for the
    cluster), then ``idle_s`` idle; how many the server answered."""
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    from yanami.models._http import endpoint_for
    from yanami.scale import share_endpoint_limits

    share_endpoint_limits(processes)
    endpoint = endpoint_for(url, slots, rpm, 10.0)
    body = b'{"model": "m", "messages": [{"role": "user", "content": "Hello?"}]}'
    headers = {"Content-Type": "application/json"}

    def one(_: int) -> int:
        request = urllib.request.Request(f"{url}/v1/chat/completions", data=body, headers=headers)
        return endpoint.call(lambda: urllib.request.urlopen(request, timeout=10).status)

    with ThreadPoolExecutor(threads) as pool:
        done = sum(s == 200 for s in pool.map(one, range(requests)))
    time.sleep(idle_s)
    return done


def _calls_through_shared_limits(url: str, threads: int, processes: int | None) -> int:
    """``3 * threads`` requests, ``threads`` at once, two in flight for the whole cluster."""
    return _through_shared_limits(url, processes, 2, 600000.0, threads, 3 * threads)


@pytest.mark.parametrize("processes", [None, 2], ids=["leases from one actor", "an even share each"])
def test_one_concurrency_budget_per_endpoint_across_the_cluster(ray_address, processes) -> None:
    from yanami.scale import ray_session

    # two worker processes of four threads each; the endpoint allows two requests in flight, in all
    with FakeServer(latency_s=0.2, record=False) as srv, ray_session(ray_address) as ray:
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import the tests
        work = ray.remote(num_cpus=1)(_calls_through_shared_limits)
        done = ray.get([work.remote(srv.url, 4, processes), work.remote(srv.url, 4, processes)])
        assert done == [12, 12]
        assert srv.max_in_flight == 2


def test_one_rate_budget_per_endpoint_across_the_cluster(cli, ray_address, world_bench, tmp_path) -> None:
    # 300 requests a minute for the whole cluster: starts 0.2 s apart, whatever the actors
    with FakeServer(record=False) as srv:
        model = _config(tmp_path, srv, name="paced.yaml", requests_per_minute=300)
        r = cli("eval", world_bench, "--model", model, "--out", tmp_path / "paced", "--concurrency", "8", "--limit",
                "2", "--backend", "ray", "--ray-address", ray_address)  # fmt: skip
        assert r.code == 0, r.err
        arrivals = sorted(srv.arrivals)[1:]  # the first is the driver's check of the server
        assert len(arrivals) >= 10
        rate = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])
        assert rate <= 5 * 1.1, rate


def _busy_or_idle(url: str, processes: int, threads: int, requests: int, idle_s: float) -> int:
    """``requests`` requests, ``threads`` at once, 600 a minute for the whole cluster, then ``idle_s`` idle."""
    return _through_shared_limits(url, processes, 16, 600.0, threads, requests, idle_s)


def test_one_busy_actor_of_four_uses_the_whole_rate_budget(ray_address) -> None:
    """A pool of four actors, every request on one of them (the chains landing on one actor): it
    starts 600 a minute, the cluster's whole budget, and the cluster never more. An even, fixed
    share each would have held it to 150 a minute."""
    from yanami.scale import ray_session

    with FakeServer(latency_s=0.05, record=False) as srv, ray_session(ray_address) as ray:
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import the tests
        work = ray.remote(num_cpus=0.5)(_busy_or_idle)
        idle = [work.remote(srv.url, 4, 1, 1, 8.0) for _ in range(3)]  # a request each, then idle
        busy = work.remote(srv.url, 4, 8, 60, 0.0)
        assert ray.get([busy, *idle]) == [60, 1, 1, 1]
        arrivals = sorted(srv.arrivals)
    assert len(arrivals) == 63
    rate = 60 * (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])
    assert 0.9 * 600 <= rate <= 1.05 * 600, rate
    most = max(sum(1 for b in arrivals[k:] if b < a + 2.0) for k, a in enumerate(arrivals))
    assert most <= (2 + HORIZON_S) * 10 + 2, most  # 2 s hold 20 starts, and those a start may come late


def test_judge_on_ray_writes_the_local_verdicts(cli, ray_address, world_bench, tmp_path) -> None:
    run = tmp_path / "run"
    assert cli("eval", world_bench, "--model", "reference:stateless", "--out", run, "--limit", "4").code == 0
    local, before = _rows(run)
    db = sqlite3.connect(run / "results.sqlite")
    with db:
        db.execute("DELETE FROM verdicts")
    db.close()
    r = cli("judge", run, "--judge", "exact", "--backend", "ray", "--ray-address", ray_address)
    assert r.code == 0, r.err
    assert _rows(run) == (local, before)
    assert any(v[3] == "ok" for v in before)


def test_a_cluster_nobody_answers_at_is_one_line_and_nothing_written(cli, tmp_path) -> None:
    out = tmp_path / "ds"
    r = cli("build", "--out", out, "--per-scenario", "1", "--backend", "ray", "--ray-address", "127.0.0.1:1")
    assert r.code == 2 and "--ray-address 127.0.0.1:1: nothing answers there" in r.err
    assert len(r.err.strip().splitlines()) == 1 and not out.exists()
    r = cli("build", "--out", out, "--per-scenario", "1", "--ray-address", "127.0.0.1:1")
    assert r.code == 2 and "only with --backend ray" in r.err


@pytest.mark.parametrize(("reply", "says"), [(None, "says nothing in 3 s"), (b"HTTP/1.1 200 OK\r\n\r\n", "not gRPC")])
def test_an_address_that_accepts_but_is_no_ray_head_fails_within_five_seconds(cli, tmp_path, reply, says) -> None:
    """A server that accepts and stays silent (or answers, but not as a gRPC server does) is one
    line, after the probe's 3 s at most, before Ray is imported (Ray itself would wait 25 s). The
    real head of the other tests passes the probe."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)  # kept open, never closed by this side while the test runs
            if reply is not None:
                conn.recv(64)
                conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    address = f"127.0.0.1:{listener.getsockname()[1]}"
    try:
        r = cli("build", "--out", tmp_path / "ds", "--per-scenario", "1", "--backend", "ray", "--ray-address", address)
    finally:
        listener.close()
        for conn in held:
            conn.close()
    assert r.code == 2 and f"--ray-address {address}: " in r.err and says in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1 and not (tmp_path / "ds").exists()


def test_without_ray_installed_the_backend_says_how_to_install_it(cli, monkeypatch, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # an import of ray fails, as where the extra is not installed
    monkeypatch.setitem(sys.modules, "ray.data", None)
    r = cli("build", "--out", tmp_path / "ds", "--per-scenario", "1", "--backend", "ray")
    assert r.code == 2 and r.err.strip() == (
        "error: --backend ray: Ray is not installed; pip install -e '.[ray]' (or pip install 'yanami[ray]')"
    )
    assert not (tmp_path / "ds").exists()
    assert cli("build", "--out", tmp_path / "ds", "--per-scenario", "1").code == 0  # the local backend needs no Ray


class _Echo:
    """A Ray actor that hands its rows back."""

    def __call__(self, batch: dict) -> dict:
        return {"k": list(batch["k"])}


def test_on_ray_the_driver_keeps_what_it_made_out_of_the_collectors_sweeps(ray_address) -> None:
    """As the local threads do: a full sweep in the driver would hold its reading of the rows."""
    import contextlib
    import gc

    from yanami.scale import RayExecutor, ray_session

    with ray_session(ray_address) as ray:
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import the tests

    @contextlib.contextmanager
    def setup(ray, actors, per_actor):  # type: ignore[no-untyped-def]
        yield ()

    seen: list[int] = []
    rows: list[dict] = []

    def on_results(got: list[dict]) -> None:
        seen.append(gc.get_freeze_count())
        rows.extend(got)

    executor = RayExecutor(
        _Echo, setup, lambda k: {"k": k}, lambda row: [dict(row)], concurrency=2, address=ray_address
    )
    executor.run(iter(range(6)), on_results)
    assert sorted(r["k"] for r in rows) == list(range(6))
    assert seen and min(seen) > 0
    assert gc.get_freeze_count() == 0


def test_on_ray_a_tasks_items_reach_the_driver_a_block_at_a_time(ray_address, world_bench, tmp_path) -> None:
    """Ray Data cuts a batch of several rows into blocks of one row, and each block costs the actor
    and the driver milliseconds of CPU: an actor's block of items travels as one row, and arrives whole."""
    from yanami.runner import evaluate

    done: list[int] = []
    with FakeServer(record=False) as srv:
        s = evaluate(world_bench, str(_config(tmp_path, srv)), tmp_path / "run", concurrency=4, backend="ray",
                     ray_address=ray_address, on_progress=lambda n, total: done.append(n))  # fmt: skip
    arrived = [b - a for a, b in zip([0, *done], done, strict=False)]
    assert sum(arrived) == s.written > 40
    assert max(arrived) > 1
