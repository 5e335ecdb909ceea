"""A Ray session for one command, and the limits of an endpoint shared by every process of it.

``--backend ray`` runs a stage's work on Ray Data: without ``--ray-address`` a local Ray starts
on this machine (every core) and stops with the command; with one, the command joins that
cluster as a driver and leaves it running. Ray is imported here only, and only then.

The driver alone writes the stage's output (a dataset, a run's rows, a construction's
ledger), in the order and format of the local backend; the workers compute.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from yanami.contract import UserError
from yanami.scale._pace import ClusterPace, Schedule

T = TypeVar("T")

BACKENDS = ("local", "ray")
"""What ``--backend`` takes: this process and its pools (the default), or Ray Data."""

NAMESPACE = "yanami"
"""The Ray namespace of yanami's named actors (the shared limits of each endpoint)."""

INSTALL_HINT = "pip install -e '.[ray]' (or pip install 'yanami[ray]')"


def require_ray() -> Any:
    """The ``ray`` module, or one line saying how to install it."""
    if "RAY_AUTH_MODE" not in os.environ and _token_at_hand():
        # a head started where a token is at hand runs with token authentication (Ray 2.60's `ray
        # start`); Ray reads the mode once, when it is imported, and a driver must name it to join
        os.environ["RAY_AUTH_MODE"] = "token"
    try:
        import ray
        import ray.data
    except ImportError:
        raise UserError(f"--backend ray: Ray is not installed; {INSTALL_HINT}") from None
    return ray


def check_backend(backend: str, address: str | None) -> None:
    """One line for a backend this command does not know, or an address without Ray."""
    if backend not in BACKENDS:
        raise UserError(f"--backend {backend}: not one of {', '.join(BACKENDS)}")
    if address is not None and backend != "ray":
        raise UserError("--ray-address: only with --backend ray")
    if backend == "ray":
        if address is not None:
            _check_reachable(address)  # first: it needs no Ray, which takes a second to import
        require_ray()


@contextlib.contextmanager
def ray_session(address: str | None = None) -> Iterator[Any]:
    """Ray, started on this machine for the block (``address`` None) or joined at ``address``.

    Ray's own log lines and progress bars are kept quiet (yanami shows its progress); a
    cluster that cannot be reached is one line naming the address.
    """
    ray = require_ray()
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")  # C++ notices (an actor's arguments in the object store)
    for name in ("ray", "ray.data", "ray._private", "ray.util"):
        logging.getLogger(name).setLevel(logging.ERROR)
    started = not ray.is_initialized()
    scratch = None
    if started and address is None:
        import tempfile

        # the local Ray's sessions and logs in a folder of its own, removed with it (not /tmp/ray);
        # short, for the Unix sockets under it
        scratch = tempfile.mkdtemp(prefix="yr-", dir="/tmp" if os.path.isdir("/tmp") else None)
    if started and address is not None:
        _check_reachable(address)
    if started:
        try:
            quiet = _stderr_quiet()  # the driver's core worker says its log level once, on the terminal
            if address is None:
                ray.init(
                    address="local",  # a new Ray of this command's own, even where `ray start` runs one here
                    _temp_dir=scratch,
                    num_cpus=os.cpu_count() or 1,
                    include_dashboard=False,
                    logging_level=logging.ERROR,
                    log_to_driver=False,
                    namespace=NAMESPACE,
                )
            else:
                extra = {"_node_ip_address": "127.0.0.1"} if _loopback(address) else {}  # a head on loopback here
                ray.init(
                    address=address, logging_level=logging.ERROR, log_to_driver=False, namespace=NAMESPACE, **extra
                )
            quiet.close()
        except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
            quiet.close()
            where = f"--ray-address {address}" if address else "a local Ray"
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if "AuthToken" in repr(exc.__cause__) or "AuthToken" in str(exc):
                first = ("the cluster wants its token: copy the head's ~/.ray/auth_token here, or set RAY_AUTH_TOKEN "
                         "(docs/scale.md)")  # fmt: skip
            if scratch is not None:
                import shutil

                shutil.rmtree(scratch, ignore_errors=True)
            raise UserError(f"{where}: could not start or join Ray: {first}") from None
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    ctx.execution_options.verbose_progress = False
    with contextlib.suppress(AttributeError):
        ctx.enable_operator_progress_bars = False
    # no thread per task that polls the worker's memory each second (a task is a few chains, a
    # dataset row, and its memory is the actor's own)
    ctx.memory_usage_poll_interval_s = None
    try:
        yield ray
    finally:
        _end_limits(ray)
        if started:
            ray.shutdown()
        if scratch is not None:
            import shutil

            shutil.rmtree(scratch, ignore_errors=True)


def _end_limits(ray: Any) -> None:
    """End this job's endpoint limits (`limits_actor`)."""
    with contextlib.suppress(Exception):
        mine = f"{LIMITS_PREFIX}{ray.get_runtime_context().get_job_id()}-"
        for actor in ray.util.list_named_actors(all_namespaces=True):
            if actor.get("namespace") == NAMESPACE and str(actor.get("name", "")).startswith(mine):
                ray.kill(ray.get_actor(actor["name"], namespace=NAMESPACE))


def _token_at_hand() -> bool:
    """Whether this machine holds a Ray cluster token (Ray's own places for it)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    return os.path.isfile(path)


def _loopback(address: str) -> bool:
    host = address.split("://", 1)[-1].rpartition(":")[0].strip("[]")
    return host in ("127.0.0.1", "localhost", "::1")


PROBE_S = 3.0
"""How long a cluster address may take to connect, and then to answer as a gRPC server does."""

_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
"""HTTP/2's client connection preface and an empty SETTINGS frame: what a gRPC client sends first."""


def _check_reachable(address: str) -> None:
    """One line, within `PROBE_S` twice, for a cluster address that is not a Ray head: nothing
    listens there, or something accepts and stays silent, or answers but not as gRPC (Ray itself
    would retry for minutes, or 25 s). A head's GCS (and a Ray client server) speaks gRPC, whose
    server answers HTTP/2's connection preface with a SETTINGS frame of its own."""
    import socket

    if address in ("auto", "local"):
        return
    rest = address.split("://", 1)[-1]
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isdigit():
        raise UserError(f"--ray-address {address}: not HOST:PORT (the head's GCS port, 6379, or ray://HOST:10001)")
    hint = "start the head with `ray start --head` (docs/scale.md)"
    try:
        conn = socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_S)
    except OSError as exc:
        raise UserError(f"--ray-address {address}: nothing answers there ({exc.strerror or exc}); {hint}") from None
    with conn:
        try:
            conn.settimeout(PROBE_S)
            conn.sendall(_H2_PREFACE)
            head = b""
            while len(head) < 9:  # a frame header: 3 bytes of length, its type, flags, stream id
                got = conn.recv(9 - len(head))
                if not got:
                    break
                head += got
        except TimeoutError:
            raise UserError(f"--ray-address {address}: it accepts a connection but says nothing in {PROBE_S:g} s; "
                            f"not a Ray head? {hint}") from None  # fmt: skip
        except OSError as exc:
            raise UserError(f"--ray-address {address}: the connection failed ({exc.strerror or exc}); {hint}") from None
    if len(head) < 9 or head[3] != 0x04:  # SETTINGS
        raise UserError(f"--ray-address {address}: what answers there is not a Ray head (not gRPC); {hint}")


class _stderr_quiet:
    """File descriptor 2 sent to /dev/null until ``close`` (what Ray's C++ side prints on it
    while it starts; Python exceptions still say what went wrong)."""

    def __init__(self) -> None:
        import sys

        sys.stderr.flush()
        self.saved = os.dup(2)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)

    def close(self) -> None:
        if self.saved >= 0:
            os.dup2(self.saved, 2)
            os.close(self.saved)
            self.saved = -1


def cluster_cpus(ray: Any) -> int:
    """The CPUs of the Ray cluster this process is connected to (at least 1)."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def ray_concurrency(cpus: int, concurrency: int) -> tuple[int, int]:
    """(actors, chains in flight per actor) for exactly ``concurrency`` chains in flight on
    ``cpus`` CPUs: as many actors as divide it evenly, one per CPU at most."""
    actors = max(k for k in range(1, max(1, min(cpus, concurrency)) + 1) if concurrency % k == 0)
    return actors, concurrency // actors


def actor_rows(
    ray: Any, rows: list[dict[str, Any]], cls: type, args: tuple[Any, ...], actors: int, threads: int, queued: int
) -> Iterator[dict[str, Any]]:
    """``rows`` through a pool of ``actors`` Ray actors of ``cls`` (built with ``args``), one row
    per call, each output row handed back as it is made, in no particular order.

    Every actor runs ``threads`` calls at once and holds ``queued`` more calls waiting, so none
    waits for Ray to hand it its next row; each output row is its own block (Ray Data cuts every
    batch an actor yields into blocks of one row here), so it reaches the driver at once rather
    than with its task's last."""
    import warnings

    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = False
    ctx.target_max_block_size = 1
    ds = ray.data.from_items(rows, override_num_blocks=len(rows))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Ray's deprecation notices about its own arguments
        ds = ds.map_batches(
            cls,
            fn_constructor_args=args,
            batch_size=1,
            compute=ray.data.ActorPoolStrategy(size=actors, max_tasks_in_flight_per_actor=threads + queued),
            num_cpus=1,
            max_concurrency=threads,
        )
    yield from ds.iter_rows()


# ---------------------------------------------------------------------------------------------
# One budget per endpoint for the whole cluster


class _Limits:
    """An endpoint's requests in flight and requests per minute, for every process of a cluster.

    An asyncio actor: ``acquire`` waits for a free slot and for the request's start time, and
    returns a lease (or, once the server refused the credentials, the reason). A lease not
    released in ``lease_s`` (its holder died) is taken back.
    """

    def __init__(self, max_concurrency: int, requests_per_minute: float, lease_s: float) -> None:
        self.slots = max_concurrency
        self.interval = 60.0 / requests_per_minute
        self.lease_s = lease_s
        self.schedule = Schedule(self.interval)
        self.leases: dict[str, float] = {}
        self.stopped: str | None = None
        self.changed = asyncio.Event()
        self.peak = 0

    def _reclaim(self, now: float) -> None:
        for k in [k for k, until in self.leases.items() if until < now]:
            del self.leases[k]

    async def acquire(self) -> tuple[str, str | None]:
        while True:
            if self.stopped:
                return "", self.stopped
            now = time.monotonic()
            self._reclaim(now)
            if len(self.leases) < self.slots:
                break
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), timeout=1.0)
        token = uuid.uuid4().hex
        delay, _, _ = self.schedule.take(1)
        self.leases[token] = now + delay + self.lease_s
        self.peak = max(self.peak, len(self.leases))
        if delay > 0:
            await asyncio.sleep(delay)
        return token, None

    async def take(self, n: int) -> tuple[float, int, str | None]:
        """``n`` request starts for a process that holds its own slots (`ClusterPace`): the
        first's delay from now and ``n``, ``interval`` apart; or why the server refused."""
        if self.stopped:
            return 0.0, 0, self.stopped
        return self.schedule.take(max(1, n))

    async def release(self, token: str) -> None:
        self.leases.pop(token, None)
        self.changed.set()

    async def stop(self, reason: str) -> None:
        self.stopped = self.stopped or reason
        self.changed.set()

    async def stats(self) -> dict[str, Any]:
        return {"in_flight": len(self.leases), "peak": self.peak, "slots": self.slots, "interval": self.interval}


LIMITS_PREFIX = "yanami-limits-"


def limits_name(job: str, url: str, max_concurrency: int, requests_per_minute: float) -> str:
    """The named actor that holds one endpoint's limits (a server URL with its settings) for the
    command whose Ray job is ``job``: a driver killed and started again gets fresh limits, not
    the slots its dead workers held."""
    key = f"{url}\0{max_concurrency}\0{requests_per_minute!r}"
    return f"{LIMITS_PREFIX}{job}-" + hashlib.sha256(key.encode()).hexdigest()[:20]


def limits_actor(ray: Any, url: str, max_concurrency: int, requests_per_minute: float, lease_s: float) -> Any:
    """The cluster's one `_Limits` of an endpoint for this job (made by the first process that
    asks; detached, so a worker that dies does not take it along; the driver ends it)."""
    job = ray.get_runtime_context().get_job_id()
    remote = ray.remote(num_cpus=0, max_concurrency=1000)(_Limits)
    return remote.options(
        name=limits_name(job, url, max_concurrency, requests_per_minute),
        namespace=NAMESPACE,
        lifetime="detached",
        get_if_exists=True,
    ).remote(max_concurrency, requests_per_minute, lease_s)


def share_endpoint_limits(processes: int | None = None) -> None:
    """In a Ray worker: every endpoint this process makes from now on keeps to the config's
    limits for the whole cluster.

    Requests per minute: one schedule of starts per endpoint (its `_Limits`), from which a
    process takes what its waiting requests need, a few at a time (`ClusterPace`): a process
    that idles holds none, so one busy process can use the whole budget. Requests in flight,
    where ``processes`` (a fixed pool of actors) may each have at least one: an even share of
    the slots each, kept here with no round trip per request (an actor runs its share of the
    chains, so its share of the slots is what it can use). Otherwise (``processes`` unknown,
    or more processes than slots) each request takes a slot and its start from the `_Limits`."""
    import ray

    from yanami.models import Endpoint, Fatal, use_endpoint_factory

    class PacedEndpoint(Endpoint):
        """An `Endpoint` with slots of its own and the cluster's pace (`ClusterPace`)."""

        def __init__(self, limits: Any, max_concurrency: int, requests_per_minute: float) -> None:
            super().__init__(max_concurrency, requests_per_minute)
            self.limits = limits
            self.pace = ClusterPace(lambda n: ray.get(limits.take.remote(n)), self.interval)

        def stop(self, reason: str) -> None:
            self.stopped = self.stopped or reason
            self.limits.stop.remote(reason)  # every process of the command stops calling this server

        def _pace(self) -> None:
            start = self.pace.next_start()
            if isinstance(start, str):
                self.stopped = self.stopped or start
                raise Fatal(start)
            if (wait := start - time.monotonic()) > 0:
                time.sleep(wait)

    class SharedEndpoint(Endpoint):
        """An `Endpoint` whose slots and pace are the cluster's (`_Limits`), not this process's."""

        def __init__(self, limits: Any, max_concurrency: int, requests_per_minute: float) -> None:
            super().__init__(max_concurrency, requests_per_minute)
            self.limits = limits

        def stop(self, reason: str) -> None:
            self.stopped = self.stopped or reason
            self.limits.stop.remote(reason)  # every process of the command stops calling this server

        def call(self, fn: Callable[[], T]) -> T:
            if self.stopped:
                raise Fatal(self.stopped)
            token, stopped = ray.get(self.limits.acquire.remote())
            if stopped:
                self.stopped = self.stopped or stopped
                raise Fatal(stopped)
            try:
                return fn()
            finally:
                self.limits.release.remote(token)

    def make(url: str, max_concurrency: int, requests_per_minute: float, timeout_s: float) -> Endpoint:
        lease = timeout_s + 30.0  # an attempt ends by its deadline: only a dead holder's lease runs out
        limits = limits_actor(ray, url, max_concurrency, requests_per_minute, lease)
        if processes is not None and max_concurrency >= processes:
            return PacedEndpoint(limits, max_concurrency // processes, requests_per_minute)
        return SharedEndpoint(limits, max_concurrency, requests_per_minute)

    use_endpoint_factory(make)


def retrying(fn: Callable[[], T], attempts: int = 3) -> T:
    """``fn()``, again after a short wait if Ray lost the actor it was talking to."""
    for k in range(attempts):
        try:
            return fn()
        except Exception as exc:
            if k == attempts - 1 or "Actor" not in type(exc).__name__:
                raise
            time.sleep(0.5 * (k + 1))
    raise AssertionError("unreachable")
