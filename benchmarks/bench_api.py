"""Throughput against a loopback server that answers after 100 ms (issues 5 and 10), and import time.

    python benchmarks/bench_api.py [--only import|adapter|runner]

Ideal with concurrency 16 and 100 ms per request: 160 requests/s. Target: >= 80 % of it
(128 requests/s) for text requests, so the harness is never the bottleneck of a real run.

  adapter  the openai adapter alone: text-only chat requests from 16 threads
  runner   `yanami eval` with --concurrency 16: DSU questions through the openai adapter
           (each request carries the dialogue's 512-px images as base64), exact judge, on the
           bench (1,600 requests) and on one of 25 dialogues per scenario (400 requests); target
           >= 90 % of ideal for the whole call. The SDK is imported before the call, as a
           process's first call would have it; its import is timed on its own and printed.
           Beside the 400 requests, two same-run baselines on the same bodies, built already:
           16 threads of http.client (what this server and machine allow any client) and of
           the openai SDK alone (what the SDK allows before yanami does anything)
  images   `yanami eval` with --concurrency 16: target turns through the images API (512-px
           images in and out), the judge replaced by an instant one to time the harness alone
  inspect  the same 400 requests (taken off the wire of yanami's eval call) through inspect_ai's
           `eval` (its OpenAI provider on chat completions, max_connections 16, no scorer), against the same server,
           beside yanami's eval call on them: the whole call's rate and this process's CPU per
           request. Needs `pip install inspect-ai` (not a dependency of yanami); without it the
           section says so and is skipped
  import   `import yanami.models` in a fresh interpreter (target <= 150 ms)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench_eval import InstantJudge  # the script's folder is on sys.path
from yanami.contract import InputMessage, InputText, Request
from yanami.models import ModelConfig
from yanami.models._openai import OpenAIModel
from yanami.runner import _run
from yanami.world import build_world

LATENCY = 0.1
CONCURRENCY = 16
IDEAL = CONCURRENCY / LATENCY


def _config(url: str, **kw: object) -> dict[str, object]:
    return {"kind": "openai", "base_url": url + "/v1", "max_concurrency": CONCURRENCY,
            "requests_per_minute": 1_000_000, "timeout_s": 30, **kw}  # fmt: skip


@contextlib.contextmanager
def server() -> Iterator[str]:
    """The scripted server in its own process, as a remote server would be; yields its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "yanami", "serve-fake", "--port", "0", "--latency", str(LATENCY)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().split("/v1")[0]
    finally:
        proc.terminate()
        proc.wait()


def bench_adapter(n: int) -> None:
    with server() as url:
        model = OpenAIModel(ModelConfig.model_validate(_config(url, name="m", chat_model="c")))
        reqs = [
            Request(f"x/q{k}", (InputMessage("user", (InputText(f"Question {k}?"),)),), seed=k, size=(512, 384))
            for k in range(n)
        ]
        t = time.perf_counter()
        with ThreadPoolExecutor(CONCURRENCY) as pool:
            list(pool.map(model.answer, reqs))
        rate = n / (time.perf_counter() - t)
    print(
        f"adapter, text: {rate:.1f} requests/s = {100 * rate / IDEAL:.0f} % of the ideal {IDEAL:.0f}   target >= 80 %"
    )


class _Steady:
    """Completions over time, for the rate once the run is going (set-up excluded)."""

    def __init__(self) -> None:
        self.marks: list[tuple[float, int]] = []

    def __call__(self, done: int, total: int) -> None:
        if done:
            self.marks.append((time.perf_counter(), done))

    def rate(self) -> float:
        (t0, n0), (t1, n1) = self.marks[0], self.marks[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else float("nan")


def _sdk_import_ms() -> float:
    """``import openai`` in a fresh interpreter (median of 3): what a process pays once, before its first call."""
    code = "import time; t = time.perf_counter(); import openai; print(time.perf_counter() - t)"
    return sorted(float(subprocess.check_output([sys.executable, "-c", code])) * 1000 for _ in range(3))[1]


def bench_dsu(bench: Path, tmp: Path, label: str) -> None:
    """The eval call on the bench's DSU questions, timed whole (reading the bench, the run's set-up,
    the last row written): its rate against the ideal, and this process's CPU per request."""
    import openai  # noqa: F401  # loaded once per process, as by a first call; timed on its own below
    import yaml

    with server() as url:
        answers = tmp / f"answers-{label}.yaml"
        answers.write_text(yaml.safe_dump(_config(url, chat_model="c")))
        steady = _Steady()
        cpu, t = time.process_time(), time.perf_counter()
        s = _run.evaluate(bench, str(answers), tmp / f"run-{label}", concurrency=CONCURRENCY, on_progress=steady)
        wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    rate = s.written / wall
    print(
        f"runner, DSU questions with 512-px images, {label}: {rate:.1f} requests/s = {100 * rate / IDEAL:.0f} % of"
        f" ideal ({s.written} requests in {wall:.2f} s, ideal {s.written / IDEAL:.2f} s: the whole eval call, the"
        f" bench's reading and the run's set-up included); once running {steady.rate():.1f}/s ="
        f" {100 * steady.rate() / IDEAL:.0f} %; CPU {1000 * cpu / s.written:.2f} ms per request (this process;"
        f" the server's is its own)   target >= 90 %"
    )


def _wire_requests(bench: Path, tmp: Path) -> list[bytes]:
    """The chat bodies yanami's eval call sends for ``bench``'s questions, as the server received them."""
    import yaml

    from yanami.models.fake import FakeServer

    with FakeServer(capture=True, record=False) as srv:
        config = tmp / "capture.yaml"
        config.write_text(yaml.safe_dump(_config(srv.url, chat_model="c")))
        _run.evaluate(bench, str(config), tmp / "run-capture", concurrency=CONCURRENCY)
        return [raw for path, _, raw in srv.wire if path.endswith("/chat/completions")]


def _send_all(bodies: list[bytes], send: Callable[[bytes], object]) -> float:
    """``bodies`` sent by `CONCURRENCY` threads with nothing else to do; the rate (requests/s)."""
    import threading

    left = iter(bodies)
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                body = next(left, None)
            if body is None:
                return
            send(body)

    t = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(CONCURRENCY)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return len(bodies) / (time.perf_counter() - t)


def _by_http_client(bodies: list[bytes]) -> float:
    import http.client
    import json
    import threading

    local = threading.local()
    with server() as url:
        host, port = url.split("//")[1].split(":")

        def send(body: bytes) -> object:
            if not hasattr(local, "conn"):
                local.conn = http.client.HTTPConnection(host, int(port))
            local.conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            return json.loads(local.conn.getresponse().read())

        return _send_all(bodies, send)


def _by_sdk(bodies: list[bytes]) -> float:
    import json

    import openai

    with server() as url, openai.OpenAI(base_url=url + "/v1", api_key="sk-bench", max_retries=0) as client:
        return _send_all(bodies, lambda body: json.loads(client.post("/chat/completions", content=body, cast_to=bytes)))


def bench_floors(bodies: list[bytes], label: str) -> None:
    """The same chat bodies, built already, sent by 16 threads with nothing else to do: through
    ``http.client`` (what the server and this machine allow any client) and through the openai SDK
    alone (what the SDK allows, before yanami does anything). Same-run baselines for yanami's rate."""
    raw, sdk = _by_http_client(bodies), _by_sdk(bodies)
    print(
        f"  baselines, the same {len(bodies)} bodies built already ({label}), 16 threads doing nothing else:"
        f" http.client {raw:.1f}/s = {100 * raw / IDEAL:.0f} % (this server and machine, any client);"
        f" openai SDK alone {sdk:.1f}/s = {100 * sdk / IDEAL:.0f} %"
    )


def _inspect_messages(body: dict[str, Any]) -> list[Any]:
    """A chat body's messages as inspect_ai's (text parts and data-URL images, in order)."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, ContentImage, ContentText

    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
    out = []
    for m in body["messages"]:
        content = m["content"]
        if isinstance(content, list):
            content = [
                ContentText(text=p["text"]) if p["type"] == "text" else ContentImage(image=p["image_url"]["url"])
                for p in content
            ]
        out.append(kinds[m["role"]](content=content))
    return out


def bench_inspect(bench: Path, tmp: Path) -> None:
    """inspect_ai's eval of the requests yanami sends for ``bench`` against the same server, beside yanami's call."""
    try:
        import inspect_ai
        from inspect_ai import Task
        from inspect_ai import eval as inspect_eval
        from inspect_ai.dataset import Sample
        from inspect_ai.solver import generate
    except ImportError:
        print("inspect: inspect_ai is not installed (pip install inspect-ai); skipped")
        return
    import json

    bodies = _wire_requests(bench, tmp)
    samples = [Sample(input=_inspect_messages(json.loads(b)), id=k) for k, b in enumerate(bodies)]
    bench_dsu(bench, tmp, f"{len(bodies)} requests, beside inspect_ai")
    bench_floors(bodies, "beside inspect_ai")
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")
    with server() as url:
        cpu, t = time.process_time(), time.perf_counter()
        logs = inspect_eval(Task(dataset=samples, solver=generate()), model="openai/c", model_base_url=url + "/v1",
                            max_connections=CONCURRENCY, log_dir=str(tmp / "inspect-logs"), display="none",
                            score=False, model_args={"responses_api": False})  # fmt: skip
        wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    failed = [log.error.message for log in logs if log.error is not None]
    if failed:
        print(f"inspect: inspect_ai's eval failed: {failed[0].splitlines()[0]}")
        return
    done = sum(1 for log in logs for sample in log.samples or [] if sample.error is None)
    rate = done / wall
    print(
        f"inspect_ai {inspect_ai.__version__}, the same {len(bodies)} requests: {rate:.1f} requests/s ="
        f" {100 * rate / IDEAL:.0f} % of ideal ({done} samples in {wall:.2f} s, its eval call whole); CPU"
        f" {1000 * cpu / max(1, done):.2f} ms per request (this process)"
    )


def bench_runner(bench: Path, tmp: Path) -> None:
    import yaml

    print(f"import openai, fresh interpreter: {_sdk_import_ms():.0f} ms (once per process, before the calls below)")
    bench_dsu(bench, tmp, "1,600 requests")
    small = tmp / "bench-400"
    build_world(small, per_scenario=25, seed=5, workers=2)
    bench_dsu(small, tmp, "400 requests")
    bench_floors(_wire_requests(small, tmp), "the 400 requests above")
    with server() as url:
        images = tmp / "images.yaml"
        images.write_text(yaml.safe_dump(_config(url, image_model="i")))
        real_judge = _run.build_judge
        _run.build_judge = lambda *a: InstantJudge()  # type: ignore[assignment]
        steady = _Steady()
        try:
            t = time.perf_counter()
            s = _run.evaluate(bench, str(images), tmp / "run-images", concurrency=CONCURRENCY, on_progress=steady)
            rate = s.written / (time.perf_counter() - t)
        finally:
            _run.build_judge = real_judge
        print(
            f"runner, image edits (512-px images in and out): {rate:.1f} requests/s = {100 * rate / IDEAL:.0f} % of"
            f" ideal ({s.written} requests); once running {steady.rate():.1f}/s = {100 * steady.rate() / IDEAL:.0f} %"
        )


def bench_import(runs: int = 10) -> None:
    """``import yanami.models`` in fresh interpreters (cold: nothing of yanami loaded), median and best."""
    code = "import time; t = time.perf_counter(); import yanami.models; print(time.perf_counter() - t)"
    base = "import time; t = time.perf_counter(); import json, threading, re; print(time.perf_counter() - t)"
    times = sorted(float(subprocess.check_output([sys.executable, "-c", code])) * 1000 for _ in range(runs))
    floor = sorted(float(subprocess.check_output([sys.executable, "-c", base])) * 1000 for _ in range(runs))
    print(
        f"import yanami.models, fresh interpreter: median {times[runs // 2]:.0f} ms, best {times[0]:.0f} ms"
        f" ({runs} runs; json+threading+re alone: {floor[runs // 2]:.0f} ms)   target <= 150 ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=800)
    ap.add_argument("--per-scenario", type=int, default=100)  # the bench's own size: 1,600 DSU requests
    ap.add_argument("--only", choices=("import", "adapter", "runner", "inspect"))
    args = ap.parse_args()
    if args.only in (None, "import"):
        bench_import()
    if args.only in (None, "adapter"):
        bench_adapter(args.requests)
    if args.only in (None, "runner"):
        with tempfile.TemporaryDirectory() as tmp:
            bench = Path(tmp) / "bench"
            build_world(bench, per_scenario=args.per_scenario, seed=5, workers=2)
            bench_runner(bench, Path(tmp))
    if args.only in (None, "inspect"):
        with tempfile.TemporaryDirectory() as tmp:
            small = Path(tmp) / "bench-400"
            build_world(small, per_scenario=25, seed=5, workers=2)
            bench_inspect(small, Path(tmp))


if __name__ == "__main__":
    main()
