"""The construction pipeline (issue 12): request rate, its own CPU per dialogue, and memory.

    python benchmarks/bench_construct.py                      # all three
    python benchmarks/bench_construct.py --only rate --dialogues 128

A loopback server in its own process plays the three models (as remote ones would be): the
author is the world-backed stand-in (a real plan per pool group, memoized), the image model
answers every request with the same 512 x 384 photo-like PNG (~300 KB: 512-px payloads both
ways, since edits send their input pictures), the verifier passes everything. Every dialogue
has its own pool group, so no request repeats and the response cache answers none of them.

  rate      `yanami construct` at --concurrency 16 against the server answering after 100 ms.
            Ideal: 16 / 0.1 s = 160 requests/s. Target: >= 80 % of it, through the whole pipeline.
  overhead  the same against an instant server, at --concurrency 1: the client process's CPU per
            dialogue, split by thread CPU time into the model calls (adapters, response cache, ledger),
            the images made (hashing and the store's file, timed on the same bytes in the same run),
            the pipeline's own logic (the rest of a dialogue's work), and the run around it.
            Target: the pipeline's own logic <= 5 ms per dialogue.
  memory    peak RSS of a construction of N and of 4 N dialogues in fresh processes (flat: the
            larger run holds no more than a few MB more).
  behaviours  `construct` (2 dialogues per scenario, the world-backed stand-ins, prices set) against
            a server that answers as the real APIs do, one run per behaviour: OpenAI's images API
            (its published sizes only, a 400 with its error body otherwise; b64_json, or URLs to
            fetch), an author served as a reasoning model (reasoning_content counted against
            max_tokens; with and without max_tokens in its config; a limit it spends thinking),
            an author that thinks aloud in <think> and wraps its plan in prose: accepted, rejected
            by reason, calls paid per role, images made, cost. Not in the default run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

LATENCY = 0.1
CONCURRENCY = 16
IDEAL = CONCURRENCY / LATENCY


def photo(width: int = 512, height: int = 384) -> bytes:
    """A photo-like picture: smooth shapes plus sensor noise (PNG of a few hundred KB)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    base = np.stack([128 + 90 * np.sin(xx / 37 + c) * np.cos(yy / 53 - c) for c in (0.0, 1.3, 2.6)], axis=-1)
    pixels = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


class Canned:
    """The server's brain (see the module docstring)."""

    def __init__(self) -> None:
        from yanami.construct._standins import StandIns

        self.world = StandIns()
        self.image = photo()
        self.plans: dict[str, str] = {}

    def brain(self, path: str, body: dict[str, Any]) -> Any:
        from yanami.models.fake import chat_text

        if "/images/" in path:
            return self.image
        text = chat_text(body)
        if "<pool-notes-" in text:
            group = re.search(r"group: (\S+)", text)
            key = group[1] if group else ""
            if key not in self.plans:
                self.plans[key] = self.world.author(body, text)
            return self.plans[key]
        if '"passed"' in text:
            return '{"passed": true, "problems": []}'
        if '"verdicts"' in text:
            ids = re.findall(r"^(\S+): ", text.split("</request-", 1)[-1], re.M)
            return json.dumps({"verdicts": dict.fromkeys(ids, True), "reason": ""})
        return None


def serve(latency: float) -> None:
    from yanami.models.fake import FakeServer

    with FakeServer(brain=Canned().brain, latency_s=latency, record=False) as s:
        print(s.url, flush=True)
        sys.stdin.read()  # until the parent closes it


SERVER_PID: list[int] = []
"""The running server process's pid (for its CPU time)."""


@contextlib.contextmanager
def server(latency: float) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(latency)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdin is not None
    SERVER_PID[:] = [proc.pid]
    try:
        yield proc.stdout.readline().strip()
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def cpu_of(pid: int) -> float:
    """Seconds of CPU (user + system) a live process has used, from /proc (0 where there is none)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def configs(tmp: Path, url: str) -> dict[str, str]:
    out = {}
    for role, model in (("author", "chat_model: author"), ("image_model", "image_model: painter"),
                        ("verifier", "chat_model: verifier")):  # fmt: skip
        path = tmp / f"{role}.yaml"
        path.write_text(f"kind: openai\nbase_url: {url}/v1\n{model}\nmax_tokens: 16384\nmax_concurrency: 64\n"
                        "requests_per_minute: 10000000\ntimeout_s: 60\n")  # fmt: skip
        out[role] = str(path)
    return out


def pool(tmp: Path, groups_per_scenario: int) -> Path:
    from yanami.construct import prepare

    out = tmp / f"pool-{groups_per_scenario}"
    if not out.exists():
        prepare(Path(f"world:{groups_per_scenario}"), out, filter_spec="stand-ins", concurrency=8)
    return out


def paid_calls(out: Path) -> tuple[int, float]:
    """The requests sent and the sum of their latencies as the client saw them."""
    import sqlite3

    from yanami.construct import store_path

    db = sqlite3.connect(store_path(out) / "construction.sqlite")
    try:
        n, seen = db.execute("SELECT COUNT(*), COALESCE(SUM(latency_s), 0) FROM calls WHERE cached = 0").fetchone()
        return int(n), float(seen)
    finally:
        db.close()


def bench_rate(tmp: Path, dialogues: int) -> None:
    from yanami.construct import construct

    pooldir = pool(tmp, dialogues // 4)
    with server(LATENCY) as url:
        models = configs(tmp, url)
        # a warm-up run memoizes the stand-in plans, so the timed run measures the pipeline
        construct(pooldir, tmp / "warm", **models, per_scenario=dialogues // 4, concurrency=CONCURRENCY)
        served = cpu_of(SERVER_PID[0])
        start, cpu = time.perf_counter(), time.process_time()
        s = construct(pooldir, tmp / "rate", **models, per_scenario=dialogues // 4, concurrency=CONCURRENCY, seed=7)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        server_cpu = cpu_of(SERVER_PID[0]) - served  # during the timed run only
    n, seen = paid_calls(tmp / "rate")
    rate = n / wall
    print(f"rate: {s.accepted} dialogues, {n} requests in {wall:.2f} s = {rate:.1f} requests/s = "
          f"{100 * rate / IDEAL:.0f} % of the ideal {IDEAL:.0f}   target >= 80 %")  # fmt: skip
    print(f"      client CPU {1000 * cpu / n:.1f} ms/request ({cpu / wall:.2f} cores); the stand-in server "
          f"{1000 * server_cpu / n:.1f} ms/request ({server_cpu / wall:.2f} cores); this machine has "
          f"{os.cpu_count()} cores")  # fmt: skip
    print(f"      a request as the client saw it: {1000 * seen / n:.0f} ms on average (the server waits "
          f"{1000 * LATENCY:.0f}); the {CONCURRENCY} slots held a request {100 * seen / (CONCURRENCY * wall):.0f} % "
          f"of the run, the rest is between requests and the run's tail")  # fmt: skip


def bench_overhead(tmp: Path, dialogues: int) -> None:
    """CPU per dialogue, split by where it is spent (thread CPU time, one dialogue at a time)."""
    import hashlib
    import threading

    import yanami.construct._construct as cons
    from yanami.construct import construct

    pooldir = pool(tmp, dialogues // 4)
    spent = {"dialogue": 0.0, "calls": 0.0}
    made: list[bytes] = []
    one, call, image = cons._Constructor.one, cons._Constructor.call, cons._Constructor._image

    def timed(key: str, fn: Any) -> Any:
        def wrapper(*args: Any) -> Any:
            start = time.thread_time()
            try:
                return fn(*args)
            finally:
                spent[key] += time.thread_time() - start

        return wrapper

    def keep(self: Any, data: bytes, frame: Any) -> Any:
        made.append(data)
        return image(self, data, frame)

    with server(0.0) as url:
        models = configs(tmp, url)
        construct(pooldir, tmp / "warm0", **models, per_scenario=dialogues // 4, concurrency=CONCURRENCY)
        cons._Constructor.one = timed("dialogue", one)  # type: ignore[method-assign]
        cons._Constructor.call = timed("calls", call)  # type: ignore[method-assign]
        cons._Constructor._image = keep  # type: ignore[method-assign]
        cpu = time.process_time()
        s = construct(pooldir, tmp / "cpu", **models, per_scenario=dialogues // 4, concurrency=1, seed=11)
        cpu = time.process_time() - cpu
        cons._Constructor.one, cons._Constructor.call, cons._Constructor._image = one, call, image  # type: ignore[method-assign]
    assert threading.active_count() >= 1
    # image handling inside the dialogue, measured on the same bytes: hashing, and the file in the store
    start = time.thread_time()
    for data in made:
        hashlib.sha256(data).hexdigest()
        (tmp / "image.png").write_bytes(data)
    images = time.thread_time() - start
    n = s.accepted
    per = {k: v / n * 1000 for k, v in spent.items()}
    logic = per["dialogue"] - per["calls"] - images / n * 1000
    run = cpu / n * 1000 - per["dialogue"]
    print(f"overhead: {n} dialogues, {len(made)} images made, {cpu / n * 1000:.1f} ms of CPU per dialogue in all: "
          f"model calls {per['calls']:.1f} ms (the adapters' encoding, HTTP and decoding, the response cache, the "
          f"ledger); images made {images / n * 1000:.1f} ms (hashing, the store's file); the pipeline's own logic "
          f"{logic:.1f} ms (plans, checks, prompts, verdicts, assembly); the run around them {run:.1f} ms (start, "
          f"settling, writing OUT)   target: logic <= 5 ms")  # fmt: skip


def peak_rss(tmp: Path, url: str, per_scenario: int, pooldir: Path) -> float:
    code = (
        "import resource, sys; from pathlib import Path; from yanami.construct import construct;"
        f"construct(Path({str(pooldir)!r}), Path({str(tmp / f'mem-{per_scenario}')!r}),"
        f"author={str(tmp / 'author.yaml')!r},"
        f"image_model={str(tmp / 'image_model.yaml')!r}, verifier={str(tmp / 'verifier.yaml')!r},"
        f"per_scenario={per_scenario}, concurrency=8);"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1]) / 1024


def bench_memory(tmp: Path, dialogues: int) -> None:
    pooldir = pool(tmp, dialogues // 4)
    with server(0.0) as url:
        configs(tmp, url)
        small = peak_rss(tmp, url, dialogues // 16, pooldir)
        large = peak_rss(tmp, url, dialogues // 4, pooldir)
    print(f"memory: peak RSS {small:.0f} MB for {dialogues // 4} dialogues, {large:.0f} MB for {dialogues} "
          f"({large - small:+.0f} MB for 4x the dialogues)   target: flat")  # fmt: skip


def bench_behaviours(tmp: Path, dialogues: int) -> None:
    from yanami.construct import construct, prepare
    from yanami.construct._standins import StandIns
    from yanami.models._config import IMAGES_API_SIZES
    from yanami.models.fake import FakeServer

    def configs(where: Path, url: str, author_tokens: int | None) -> dict[str, str]:
        where.mkdir()
        base = f"kind: openai\nbase_url: {url}/v1\nmax_retries: 0\n"
        chat = "prices: {input_per_million: 1.0, output_per_million: 4.0}\n"
        limit = f"max_tokens: {author_tokens}\n" if author_tokens else ""
        files = {
            "author": base + "chat_model: author-llm\nstructured_output: true\n" + limit + chat,
            "image_model": base + "image_model: image-model\nprices: {per_image: 0.04}\n",
            "verifier": base + "chat_model: verifier-vlm\nmax_tokens: 4096\n" + chat,
        }
        for role, text in files.items():
            (where / f"{role}.yaml").write_text(text)
        return {role: str(where / f"{role}.yaml") for role in files}

    pool = tmp / "behaviours-pool"
    prepare(Path("world:2@7"), pool, filter_spec="stand-ins")
    sizes = {"image_sizes": IMAGES_API_SIZES}
    thought = "x" * 8_000  # about 2,000 tokens of reasoning before each reply
    runs = [
        ("images API: published sizes only, b64_json", StandIns().brain, sizes, 16_384),
        ("images API: published sizes only, URLs to fetch", StandIns().brain, {**sizes, "image_urls": True}, 16_384),
        ("author a reasoning model, max_tokens 16384", StandIns().brain, {**sizes, "reasoning": thought}, 16_384),
        ("author a reasoning model, no max_tokens (each request's own)", StandIns().brain,
         {**sizes, "reasoning": thought}, None),
        ("author a reasoning model that spends max_tokens 1500 thinking", StandIns().brain,
         {**sizes, "reasoning": thought}, 1_500),
        ("author thinks aloud (<think> with braces) around a fenced plan", StandIns(thinks_aloud=True).brain,
         sizes, 16_384),
    ]  # fmt: skip
    for k, (name, brain, behaviour, tokens) in enumerate(runs):
        with FakeServer(brain=brain, record=False, **behaviour) as server:  # type: ignore[arg-type]
            s = construct(pool, tmp / f"b{k}" / "out", **configs(tmp / f"b{k}", server.url, tokens), per_scenario=2)
        paid = ", ".join(
            f"{role} {v.get('paid', 0)} (+{v.get('failed', 0)} failed)" for role, v in sorted(s.calls.items())
        )
        rejected = "; ".join(f"{n} x {why}" for why, n in sorted(s.rejected.items())) or "none"
        print(
            f"behaviour: {name}: accepted {s.accepted} of {s.planned}, failed for now {s.errors}; rejected: "
            f"{rejected}; answered calls: {paid}; images made {s.images_made}; cost {s.cost:.4f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["rate", "overhead", "memory", "behaviours"])
    ap.add_argument("--dialogues", type=int, default=64, help="dialogues per run (a multiple of 16)")
    ap.add_argument("--serve", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve is not None:
        return serve(args.serve)
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in (("rate", bench_rate), ("overhead", bench_overhead), ("memory", bench_memory)):
            if args.only in (None, name):
                fn(Path(tmp), args.dialogues)
        if args.only == "behaviours":
            bench_behaviours(Path(tmp), args.dialogues)
    print(f"(max RSS of this process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")


if __name__ == "__main__":
    main()
