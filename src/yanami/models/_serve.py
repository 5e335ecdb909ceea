"""Serve any model over IMUG-Bench's /infer protocol (`yanami serve`), on loopback.

POST /infer with ``{"history": [...], "output_mode": "image_only" | "text_only"}`` (the
``infer-http`` adapter's request, `yanami.models._infer`) answers ``{"response": {"image":
<base64>}}`` or ``{"response": {"text": ...}}``; a request it cannot read is a 400 with
``{"error": ...}`` naming the field, a model failure a 500 with ``{"error": ...}``. The model
sees exactly what it would see in-process: the messages, with each picture's bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from yanami.contract import QUESTION_FRAME, InputImage, InputMessage, InputText, Model, Refused, Request, output_frame

MAX_BODY = 64 * 1024 * 1024
"""The largest request body read (bytes)."""


class BadRequest(ValueError):
    """A request the server cannot read (its message names the field)."""


def request_of(body: object) -> tuple[Request, str]:
    """The `Request` an /infer body stands for, and its output mode."""
    if not isinstance(body, dict):
        raise BadRequest("the body is not a JSON object")
    mode = body.get("output_mode")
    if mode not in ("image_only", "text_only"):
        raise BadRequest("output_mode: 'image_only' or 'text_only' expected")
    history = body.get("history")
    if not isinstance(history, list) or not history:
        raise BadRequest("history: a non-empty list of messages expected")
    messages = []
    for k, m in enumerate(history):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant"):
            raise BadRequest(f"history[{k}].role: 'system', 'user' or 'assistant' expected")
        content = m.get("content")
        if not isinstance(content, list):
            raise BadRequest(f"history[{k}].content: a list of parts expected")
        parts: list[InputText | InputImage] = []
        for j, p in enumerate(content):
            where = f"history[{k}].content[{j}]"
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str):
                parts.append(InputText(p["text"]))
            elif isinstance(p, dict) and p.get("type") == "image" and isinstance(p.get("image"), str):
                parts.append(_image(p["image"], where))
            else:
                raise BadRequest(f"{where}: a text part or an image part (base64) expected")
        messages.append(InputMessage(m["role"], tuple(parts)))
    images = [p for m in messages for p in m.parts if isinstance(p, InputImage)]
    size = output_frame(images[-1].width, images[-1].height) if images and mode == "image_only" else QUESTION_FRAME
    return Request(item="served", messages=tuple(messages), size=size), mode


def _image(b64: str, where: str) -> InputImage:
    from PIL import Image, UnidentifiedImageError  # only a request with a picture needs Pillow

    try:
        data = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest(f"{where}.image: not valid base64") from None
    try:
        with Image.open(io.BytesIO(data)) as img:
            width, height = img.size
    except (UnidentifiedImageError, OSError):
        raise BadRequest(f"{where}.image: not a picture PNG, JPEG or WebP can hold") from None
    return InputImage(data, hashlib.sha256(data).hexdigest(), width, height)


class InferServer:
    """A model behind /infer on 127.0.0.1 (a context manager: the server runs inside the block)."""

    def __init__(self, model: Model, port: int = 0, host: str = "127.0.0.1") -> None:
        self.model = model
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> InferServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reply(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        """The status and JSON reply for a request body."""
        try:
            request, mode = request_of(json.loads(raw))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return 400, {"error": "the body is not JSON"}
        except BadRequest as exc:
            return 400, {"error": str(exc)}
        try:
            if mode == "text_only":
                if self.model.answer is None:
                    return 400, {"error": f"output_mode: {self.model.name} does not answer in text"}
                return 200, {"response": {"text": self.model.answer(request)}}
            if self.model.generate is None:
                return 400, {"error": f"output_mode: {self.model.name} does not draw pictures"}
            image = self.model.generate(request)
            return 200, {"response": {"image": base64.b64encode(image).decode()}}
        except Refused as exc:
            return 200, {"error": f"refused: {exc}"}
        except Exception as exc:  # a model's failure is the client's 500, never the server's end
            return 500, {"error": f"{type(exc).__name__}: {exc}"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self) -> None:
                if self.path.rstrip("/") != "/infer":
                    return self._send(404, {"error": f"{self.path}: no such endpoint (POST /infer)"})
                try:
                    length = int(self.headers.get("Content-Length", "0"))
                except ValueError:
                    return self._send(400, {"error": "Content-Length: not a number"})
                if length < 0 or length > MAX_BODY:
                    return self._send(413, {"error": f"Content-Length: at most {MAX_BODY} bytes"})
                status, body = server.reply(self.rfile.read(length))
                return self._send(status, body)

            def do_GET(self) -> None:
                self._send(404, {"error": f"{self.path}: no such endpoint (POST /infer)"})

        return Handler
