"""Every request within one deadline and one size cap, whatever the server does.

A per-read timeout does not bound a request: a server that sends one byte a second, or
streams without end, never lets a read wait long enough to trip it. `bounded` opens the
bounds of one attempt in the calling thread (`Client.call` opens them around every attempt);
every byte the thread then reads from the network counts against them:

- the OpenAI SDK's HTTP stack (httpx or httpx2 over httpcore): `bounded_transport` wraps the
  connection pool's network backend, so each read and write waits at most until the
  deadline, connection set-up and TLS included, and the bytes read are counted;
- ``urllib`` (the /infer adapter, a picture fetched by URL): `open_url` uses connections that
  hand their socket to the bounds, which shut it down at the deadline, and reads the body in
  chunks, counted.

Past the deadline the attempt ends as `Transient` ("no complete reply within N s"; retried
as a timeout is); past the cap it ends as `Malformed` ("the reply is over N bytes"), which is
recorded as the item's error and never stored.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import sys
import threading
import time
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from types import ModuleType
from typing import Any

TEXT_REPLY_BASE = 64 * 1024
"""Bytes a text reply may take besides its tokens: the JSON envelope, usage, ids."""
TEXT_REPLY_PER_TOKEN = 64
"""Bytes a reply may take per token of its limit: a token JSON-escaped (``\\uXXXX`` twice over)
with room to spare, its reasoning text included (reasoning tokens count against the limit)."""


def text_reply_cap(max_tokens: int) -> int:
    """The most bytes a text reply with a limit of ``max_tokens`` may take on the wire."""
    return TEXT_REPLY_BASE + TEXT_REPLY_PER_TOKEN * max_tokens


class Bounds:
    """One attempt's deadline and byte cap (see the module docstring)."""

    def __init__(self, seconds: float, max_bytes: int) -> None:
        self.seconds = seconds
        self.max_bytes = max_bytes
        self.deadline = time.monotonic() + seconds
        self.read = 0
        self._expired = False
        self.over = False
        """Whether the reply went past the cap."""
        self._sockets: list[socket.socket] = []
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    @property
    def expired(self) -> bool:
        """Whether the deadline has passed (an attempt that failed now failed for it)."""
        return self._expired or time.monotonic() >= self.deadline

    def remaining(self, timeout: float | None) -> float:
        """The wait a read or connect may have now: ``timeout`` shortened to the deadline.

        Raises `TimeoutError` once the deadline has passed."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            self._expired = True
            raise TimeoutError(f"no complete reply within {self.seconds:g} s")
        return left if timeout is None else min(timeout, left)

    def count(self, n: int) -> None:
        """``n`` more bytes read; `OverflowError` past the cap."""
        self.read += n
        if self.read > self.max_bytes:
            self.over = True
            raise OverflowError(f"the reply is over {self.max_bytes:,} bytes")

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` down at the deadline (a blocking read on it then ends at once)."""
        with self._lock:
            self._sockets.append(sock)
            if self._timer is None:
                self._timer = threading.Timer(max(0.0, self.deadline - time.monotonic()), self._expire)
                self._timer.daemon = True
                self._timer.start()

    def _expire(self) -> None:
        with self._lock:
            self._expired = True
            for sock in self._sockets:
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self._sockets.clear()


_local = threading.local()


def current() -> Bounds | None:
    """The bounds of this thread's attempt in progress (None outside one)."""
    bounds: Bounds | None = getattr(_local, "bounds", None)
    return bounds


@contextmanager
def bounded(seconds: float, max_bytes: int) -> Iterator[Bounds]:
    """Bounds for what this thread reads from the network until the block ends."""
    outer = current()
    bounds = Bounds(seconds, max_bytes)
    _local.bounds = bounds
    try:
        yield bounds
    finally:
        bounds.close()
        _local.bounds = outer


# httpcore (under httpx or httpx2) ----------------------------------------------------------------


def _backend_class(hc: ModuleType) -> type:
    """A network backend for the httpcore module ``hc`` that keeps each connection within the bounds."""

    def wait(timeout: float | None) -> float | None:
        bounds = current()
        if bounds is None:
            return timeout
        try:
            return bounds.remaining(timeout)
        except TimeoutError as exc:
            raise hc.ReadTimeout(str(exc)) from None

    # the bases are those of the httpcore module the client runs on, known only at run time
    class BoundedStream(hc.NetworkStream):  # type: ignore[misc,name-defined]
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            data: bytes = self._inner.read(max_bytes, wait(timeout))
            bounds = current()
            if bounds is not None:
                try:
                    bounds.count(len(data))
                except OverflowError as exc:
                    raise hc.ReadError(str(exc)) from None
            return data

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self._inner.write(buffer, wait(timeout))

        def close(self) -> None:
            self._inner.close()

        def start_tls(
            self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
        ) -> BoundedStream:
            return BoundedStream(self._inner.start_tls(ssl_context, server_hostname, wait(timeout)))

        def get_extra_info(self, info: str) -> Any:
            return self._inner.get_extra_info(info)

    class BoundedBackend(hc.NetworkBackend):  # type: ignore[misc,name-defined]
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Iterable[Any] | None = None,
        ) -> BoundedStream:
            return BoundedStream(self._inner.connect_tcp(host, port, wait(timeout), local_address, socket_options))

        def connect_unix_socket(
            self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
        ) -> BoundedStream:
            return BoundedStream(self._inner.connect_unix_socket(path, wait(timeout), socket_options))

        def sleep(self, seconds: float) -> None:
            self._inner.sleep(seconds)

    return BoundedBackend


def bounded_transport(client_class: type, *, verify: bool, keepalive: int) -> Any:
    """An HTTP transport for ``client_class`` (an httpx or httpx2 ``Client`` subclass, such as the
    SDK's ``DefaultHttpxClient``) whose connections keep within the thread's bounds."""
    httpx = sys.modules[next(c for c in client_class.__mro__ if c.__name__ == "Client").__module__.split(".")[0]]
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=keepalive)
    transport = httpx.HTTPTransport(verify=verify, limits=limits)
    pool = getattr(transport, "_pool", None)
    inner = getattr(pool, "_network_backend", None)
    if pool is None or inner is None:  # an HTTP stack laid out otherwise: the per-read timeout alone (a test says so)
        return transport
    hc = sys.modules[type(pool).__module__.split(".")[0]]
    pool._network_backend = _backend_class(hc)(inner)
    return transport


def is_bounded(transport: object) -> bool:
    """Whether ``transport`` came out of `bounded_transport` with its bounds in place."""
    backend = getattr(getattr(transport, "_pool", None), "_network_backend", None)
    return type(backend).__name__ == "BoundedBackend"


# urllib -------------------------------------------------------------------------------------------


class _Watched(http.client.HTTPConnection):
    def connect(self) -> None:
        super().connect()
        bounds = current()
        if bounds is not None:
            bounds.watch(self.sock)


class _HTTPConnection(_Watched, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_Watched, http.client.HTTPSConnection):
    pass


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_HTTPConnection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        # typeshed's HTTPSHandler lacks the private _context its __init__ sets
        return self.do_open(_HTTPSConnection, req, context=self._context)  # type: ignore[attr-defined]


_OPENER = urllib.request.build_opener(_HTTPHandler, _HTTPSHandler)


def open_url(request: urllib.request.Request | str, timeout: float) -> tuple[Any, bytes]:
    """The response (closed) and its whole body, within this thread's bounds (the deadline
    shuts the socket down; the body is read in chunks and counted): for urllib's clients."""
    bounds = current()
    with _OPENER.open(request, timeout=timeout if bounds is None else bounds.remaining(timeout)) as r:
        chunks = []
        while chunk := r.read(64 * 1024):
            if bounds is not None:
                bounds.count(len(chunk))
            chunks.append(chunk)
    if bounds is not None and bounds.expired:  # the socket was shut down: what came is not the whole reply
        raise TimeoutError(f"no complete reply within {bounds.seconds:g} s")
    return r, b"".join(chunks)
