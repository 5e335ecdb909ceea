"""Models on loopback: serve (a checkpoint or any model over /infer) and serve-fake (a scripted one)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated

import typer

from yanami.cli._app import err, out
from yanami.cli._options import PortOpt, workers_option
from yanami.contract import UserError
from yanami.models import InferServer, load_model
from yanami.models.fake import FakeServer
from yanami.world import Parser


def serve(
    model: Annotated[
        str, typer.Argument(help="A checkpoint directory (`yanami train`) or any --model spec.", metavar="MODEL")
    ],
    port: PortOpt = 8766,
    workers: Annotated[int, workers_option("Processes that read pictures.")] = 1,
) -> None:
    """Point a config file (kind: infer-http) at the printed URL; `yanami eval` then reaches the
    model over HTTP, as it would a remote one. Ctrl-C stops it.
    """
    spec = model
    if Path(model).is_dir():
        spec = f"checkpoint:{model}"
    with Parser(workers) as parser:
        the_model = load_model(spec, parser=parser)
        try:
            server = InferServer(the_model, port=port)
        except OSError as exc:
            raise UserError(f"--port {port}: cannot listen on 127.0.0.1:{port} ({exc.strerror})") from None
        with server:
            try:
                out.print(f"{server.url}/infer serves {the_model.name}; Ctrl-C stops", markup=False)
                idle = threading.Event()
                while not idle.wait(0.2):  # wake now and then: Ctrl-C reaches the main thread
                    pass
            except KeyboardInterrupt:
                err.print("stopped", markup=False)


def serve_fake(
    port: PortOpt = 8765,
    latency: Annotated[
        float, typer.Option(min=0.0, help="Seconds from a request's arrival to its answer.", metavar="SECONDS")
    ] = 0.0,
) -> None:
    """It answers like a cooperative model and judge (option A, every check passes, quality 8;
    images echo the latest input image). Point a config file's base_url at the printed URL;
    Ctrl-C stops it.
    """
    try:
        server = FakeServer(latency_s=latency, port=port)
    except OSError as exc:
        raise UserError(f"--port {port}: cannot listen on 127.0.0.1:{port} ({exc.strerror})") from None
    with server:
        try:  # entered before the URL is printed: a Ctrl-C right after it is caught too
            out.print(f"{server.url}/v1 (OpenAI-compatible) and {server.url}/infer; Ctrl-C stops", markup=False)
            # Wake now and then: the kernel may hand Ctrl-C's signal to a server thread, and Python
            # runs the handler only when the main thread runs (an endless wait would never see it).
            idle = threading.Event()
            while not idle.wait(0.2):
                pass
        except KeyboardInterrupt:
            err.print("stopped", markup=False)
