"""``yanami serve-fake``: the scripted server as a command, on loopback, stopped by Ctrl-C without a traceback."""

from __future__ import annotations

import signal
import subprocess
import sys

from yanami.contract import InputMessage, InputText, Request
from yanami.models import ModelConfig
from yanami.models._openai import OpenAIModel


def default_sigint() -> None:
    """Ctrl-C as a terminal delivers it: a shell that starts a suite in the background (CI) hands
    its children SIGINT ignored, and a Python started that way keeps ignoring it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_serve_fake_answers_and_stops_cleanly() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "yanami", "serve-fake", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        base = line.split()[0]
        assert base.startswith("http://127.0.0.1:") and base.endswith("/v1")
        model = OpenAIModel(ModelConfig(kind="openai", name="fake", base_url=base, chat_model="c"))
        request = Request("d/q1", (InputMessage("user", (InputText("Which one?"),)),), seed=1, size=(64, 64))
        assert model.answer is not None and model.answer(request) == "A"
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert "Traceback" not in stderr and "stopped" in stderr


def test_serve_fake_on_a_port_in_use_is_one_line(cli) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = cli("serve-fake", "--port", port)
    assert r.code == 2 and r.err.count("\n") == 1 and f"--port {port}: cannot listen" in r.err


def test_the_scripted_server_queues_a_burst_of_connections_as_real_servers_do() -> None:
    """Sixty-four clients connect before the server accepts any: the kernel queues them all (the
    standard library's backlog of 5 drops the rest, and each dropped client waits a second to retry)."""
    import select
    import socket

    from yanami.models.fake import FakeServer

    srv = FakeServer()  # listening, not yet accepting
    host, port = srv.url.removeprefix("http://").split(":")
    socks = [socket.socket() for _ in range(64)]
    try:
        for s in socks:
            s.setblocking(False)
            s.connect_ex((host, int(port)))
        _, ready, _ = select.select([], socks, [], 0.5)
        assert len(ready) == 64 and all(s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0 for s in ready)
    finally:
        for s in socks:
            s.close()
        srv._server.server_close()
