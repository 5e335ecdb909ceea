"""A scripted model server on loopback that speaks the OpenAI protocol and IMUG's /infer.

For tests, benchmarks and dry runs of a config file without a real model: adapters reach
it through the official SDK over a real socket. By default it answers like a cooperative
model and judge (option "A"; every check passes; quality 8; images echo the latest input
image or a plain picture), after an optional latency. ``faults`` scripts failures, consumed
in order by the requests whose path contains the given fragment:

    FakeServer(faults=[("/chat", "429"), ("/chat", "500"), ("/infer", "hang"), ("/images", "malformed"),
                       ("/chat", "refuse"), ("/chat", "wrong-json"), ("/chat", "401"), ("/chat", "echo-key")])

(``401``/``403`` and ``echo-key``, a 400, quote the request's Authorization header back;
``trickle``, ``trickle-head`` and ``endless`` never finish a reply, for ``hang_s``;
``oversized`` sends a whole chat reply of ``oversized_bytes``.)

``FakeServer(brain=grading_judge)`` makes the scripted judge grade DSU answers to lettered
options by the rule the DSU prompt states (`dsu_verdict`) instead of accepting every answer.
"""

from __future__ import annotations

import base64
import io
import json
import re
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from PIL import Image

_b64encode: Callable[[bytes], bytes]
try:  # the SIMD codec where the `api` extra brought it: a stand-in's CPU is the client's machine's too
    from pybase64 import b64encode as _b64encode
except ImportError:  # pragma: no cover
    from base64 import b64encode as _b64encode


def to_base64(data: bytes) -> str:
    return _b64encode(data).decode("ascii")


Reply = str | bytes | None
"""What a brain replies (see `Brain`)."""
Brain = Callable[[str, dict[str, Any]], Reply]
"""(path, request JSON) -> a reply: text for chat, PNG bytes for images; None for the default."""

_CHECK_LINE = re.compile(r"^(c\d+): ", re.MULTILINE)


def plain_png(size: tuple[int, int] = (512, 384), colour: tuple[int, int, int] = (120, 130, 140)) -> bytes:
    """A plain picture."""
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return buf.getvalue()


def chat_text(body: dict[str, Any]) -> str:
    """Every text of a chat request's messages, joined by spaces."""
    return " ".join(
        part.get("text", "")
        for m in body.get("messages", [])
        for part in (m["content"] if isinstance(m.get("content"), list) else [{"text": m.get("content") or ""}])
        if isinstance(part, dict)
    )


def _image_urls(body: dict[str, Any]) -> list[str]:
    return [
        part["image_url"]["url"]
        for m in body.get("messages", [])
        for part in (m.get("content") if isinstance(m.get("content"), list) else [])
        if isinstance(part, dict) and part.get("type") == "image_url"
    ]


def chat_images(body: dict[str, Any]) -> list[bytes]:
    """Every image of a chat request's messages, in order."""
    return [base64.b64decode(url.split(",", 1)[1]) for url in _image_urls(body)]


_CRITERION_LINE = re.compile(r"^\d+\. ([A-Z][\w -]+): ", re.MULTILINE)
"""A criterion as yanami's own OpenING prompt lists it ("1. Correctness: ...")."""


def default_text(body: dict[str, Any]) -> str:
    """How the fake answers a chat request: as a judge when asked to judge, else option A."""
    text = chat_text(body)
    if "Please only output the json result" in text:  # OpenING: every criterion 7 of 10
        functions = body.get("functions")
        if isinstance(functions, list) and functions and isinstance(functions[0], dict):
            criteria = list(functions[0].get("parameters", {}).get("properties", {}))
        else:
            criteria = _CRITERION_LINE.findall(text)
        return json.dumps({c: {"Score": 7, "Justification": "scripted"} for c in criteria})
    if '"verdicts"' in text:
        return json.dumps({"verdicts": {cid: True for cid in _CHECK_LINE.findall(text)}})
    if '"correct"' in text:
        return json.dumps({"correct": True, "reason": "matches the reference"})
    if '"letters"' in text:  # IMUG-Bench: a dynamic answer resolved
        return json.dumps({"letters": "A", "reason": "scripted"})
    if '"scores"' in text:  # IMUG-Bench: every evaluation point 4 of 5
        points = _POINT_LINE.findall(text.rsplit("Evaluation points:", 1)[-1])
        return json.dumps({"scores": dict.fromkeys(points, 4), "reason": "scripted"})
    if "<0, 5 or 10>" in text:  # WEAVE: accuracy
        return json.dumps({"score": 10, "reason": "scripted"})
    if '"score"' in text:  # Visual Quality; WEAVE's key points, consistency and quality
        return json.dumps({"score": 8})
    return "A"


_POINT_LINE = re.compile(r"(?m)^(\d+)\. ")


# The scripted judge's DSU reading ---------------------------------------------------------
#
# Written apart from `yanami.judges._choice.read_options`, from the rule the DSU prompt states,
# so that a test comparing the exact judge with a VLM judge over this server compares two
# readings, not one function with itself. It walks tokens (runs of letters and digits, runs
# of space, single marks) where the exact judge scans characters with regular expressions,
# and finds option texts by replacing phrases in a string where the exact judge marks spans.

_OPTION_LINE = re.compile(r"(?m)^([A-G])\. (.+)$")
_FENCE_OPEN = re.compile(r"<answer-([0-9a-f]{16})>\n")
_LETTER_WORDS = ("is", "was", "because", "since", "and", "or")
"""Words after which "a"/"A" is the letter, not the article: the prompt's "A is correct" and
"A because ..." and their like (a shorter list than the exact judge's, on purpose)."""


def _tokens(text: str) -> list[str]:
    """Runs of letters and digits, runs of space, and every other character alone."""
    out: list[str] = []
    for ch in text:
        if out and ((ch.isalnum() and out[-1][-1].isalnum()) or (ch.isspace() and out[-1][-1].isspace())):
            out[-1] += ch
        else:
            out.append(ch)
    return out


def _plain_words(text: str) -> list[str]:
    return [w for w in "".join(c if c.isalnum() else " " for c in text.lower()).split() if w not in ("a", "an", "the")]


def _named_options(answer: str, options: dict[str, str]) -> set[str]:
    """The option letters an answer names, by the DSU prompt's rule (see above)."""
    named: set[str] = set()
    tokens = _tokens(answer)
    for k, tok in enumerate(tokens):
        if len(tok) != 1 or tok.upper() not in options:
            continue
        prev = tokens[max(0, k - 2) : k]  # the two tokens right before it
        nxt = tokens[k + 1 : k + 3]  # and the two right after
        if len(prev) == 2 and prev[1] in ("'", "\u2019") and prev[0][-1].isalnum():
            continue  # the end of a contraction: I'd
        if (len(nxt) == 2 and nxt[0] == "." and nxt[1][0].isalnum()) or (
            len(prev) == 2 and prev[1] == "." and prev[0][-1].isalnum()
        ):
            continue  # an abbreviation: e.g.
        if tok in "aA" and len(nxt) == 2 and nxt[0].isspace() and "\n" not in nxt[0] and nxt[1].isalnum():
            said = [t for t in tokens[:k] if not t.isspace()]
            mid_sentence = bool(said) and (said[-1].isalnum() or said[-1] == ",")
            if nxt[1].lower() not in _LETTER_WORDS and (tok == "a" or not mid_sentence):
                continue  # the article
        named.add(tok.upper())
    words = _plain_words(answer)
    texts = {letter: _plain_words(t) for letter, t in options.items()}
    whole = {letter for letter, w in texts.items() if w and sorted(w) == sorted(words)}
    if whole:
        return named | whole
    line = f" {' '.join(words)} "
    for letter, w in sorted(texts.items(), key=lambda kv: -len(kv[1])):
        phrase = f" {' '.join(w)} "
        if w and phrase in line:
            named.add(letter)
            line = line.replace(phrase, " | ")  # a longer option's words are not a shorter one's
    return named


def dsu_verdict(text: str) -> dict[str, Any] | None:
    """The scripted judge's verdict on a DSU prompt with lettered options; None without options."""
    head, _, tail = text.partition("\nReference answer:\n")
    options = dict(_OPTION_LINE.findall(head.rpartition("\nQuestion:\n")[2]))
    reference = re.search(r"\(option ([A-G])\)", tail.split("\n", 1)[0])
    fence = _FENCE_OPEN.search(tail)
    if not options or reference is None or fence is None:
        return None
    code = fence.group(1)
    answer = tail.partition(f"<answer-{code}>\n")[2].rpartition(f"\n</answer-{code}>")[0]
    named = _named_options(answer, options)
    right = reference.group(1)
    if named == {right}:
        return {"correct": True, "reason": f"names option {right} only"}
    return {"correct": False, "reason": f"names {', '.join(sorted(named)) or 'no option'}; the reference is {right}"}


def grading_judge(path: str, body: dict[str, Any]) -> str | None:
    """A `Brain` whose DSU verdicts follow the prompt's rule (`dsu_verdict`); the default elsewhere."""
    text = chat_text(body) if "messages" in body else ""
    verdict = dsu_verdict(text) if '"correct"' in text else None
    return json.dumps(verdict) if verdict is not None else None


_DISPOSITION = re.compile(rb'content-disposition:[^\r\n]*?\bname="([^"]*)"(?:[^\r\n]*?\bfilename="([^"]*)")?', re.I)


def multipart_fields(content_type: str, raw: bytes) -> dict[str, Any]:
    """A multipart/form-data body as fields: files (in order) under ``images``, others by name.

    Split on the boundary directly (the email parser would cost the server more CPU per
    image edit than the client under test spends on the whole request).
    """
    boundary = content_type.split("boundary=", 1)[1].strip('"').encode()
    out: dict[str, Any] = {"images": []}
    for chunk in raw.split(b"--" + boundary)[1:]:
        if chunk.startswith(b"--"):
            break
        head, _, data = chunk.partition(b"\r\n\r\n")
        data = data.removesuffix(b"\r\n")
        m = _DISPOSITION.search(head)
        if m is None:
            continue
        if m.group(2) is not None:
            out["images"].append(data)
        else:
            out[m.group(1).decode()] = data.decode()
    return out


def last_image(body: dict[str, Any]) -> bytes | None:
    """The last image in a chat or /infer request."""
    found = None
    for m in body.get("messages", body.get("history", [])):
        content = m.get("content")
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "image_url":
                found = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
            elif part.get("type") == "image":
                found = base64.b64decode(part["image"])
    return found


class _Server(ThreadingHTTPServer):
    """The standard threading server, quiet where a client hangs up, with a real server's backlog."""

    request_queue_size = socket.SOMAXCONN
    """Connections the kernel queues before the server accepts them. The standard server's 5 made
    the kernel drop the 6th of 16 clients opening at once, whose connection then waited a second
    for its retry; servers in production queue hundreds (uvicorn 2,048, nginx 511)."""

    def handle_error(self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any) -> None:
        """A client that hung up mid-reply (what the trickle and oversized faults provoke) is no
        error of the server's; anything else is printed as the standard server prints it."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeServer:
    """The scripted server (see the module docstring). Use as a context manager."""

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        faults: list[tuple[str, str]] | None = None,
        brain: Brain | None = None,
        hang_s: float = 5.0,
        port: int = 0,
        host: str = "127.0.0.1",
        record: bool = True,
        image_sizes: tuple[str, ...] | None = None,
        image_urls: bool = False,
        reasoning: str | None = None,
        oversized_bytes: int = 4_000_000,
        capture: bool = False,
    ) -> None:
        """``record=False`` keeps each request's path only, not its body (a long benchmark run
        would otherwise hold every image it was sent). ``image_sizes``: the only sizes its images
        API takes, as OpenAI's does (any other is a 400 with OpenAI's error body; the picture it
        returns has the size asked for); None: any size. ``image_urls``: the images API answers
        with a URL to fetch the picture from (``GET /files/N.png`` on this server), as OpenAI's
        DALL-E models do by default, instead of ``b64_json``. ``reasoning``: a reasoning model
        served by vLLM or SGLang with a reasoning parser: each chat reply carries this text as
        ``reasoning_content`` beside the answer, and its tokens count against ``max_tokens``
        first (a limit it uses up ends the reply with no content, ``finish_reason: length``).
        ``capture``: keep each request as it came on the wire (`wire`: path, headers in order,
        raw body), for `yanami audit`'s look at what each adapter sends."""
        self.latency_s = latency_s
        self.oversized_bytes = oversized_bytes
        self.image_sizes = image_sizes
        self.image_urls = image_urls
        self.reasoning = reasoning
        self.files: list[bytes] = []
        """The pictures served by URL, by number."""
        self.record = record
        self.faults = list(faults or [])
        self.brain = brain
        self.hang_s = hang_s
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.capture = capture
        self.wire: list[tuple[str, list[tuple[str, str]], bytes]] = []
        """With ``capture``: every request's path, headers (in order) and raw body."""
        self.arrivals: list[float] = []
        """When each request arrived (time.monotonic)."""
        self.in_flight = 0
        self.max_in_flight = 0
        """The most requests the server held at once."""
        self._lock = threading.Lock()
        self._server = _Server((host, port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` (add ``/v1`` for OpenAI clients)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def count(self, fragment: str) -> int:
        """How many requests reached a path containing ``fragment``."""
        with self._lock:
            return sum(fragment in path for path, _ in self.requests)

    def _fault(self, path: str) -> str | None:
        with self._lock:
            for k, (fragment, fault) in enumerate(self.faults):
                if fragment in path:
                    del self.faults[k]
                    return fault
        return None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out as separate writes

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
                self._finished()  # before the reply leaves: the client may send its next request at once
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self) -> None:
                with server._lock:
                    server.arrivals.append(time.monotonic())
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                self._counted = True
                try:
                    self._post()
                finally:
                    self._finished()

            def _finished(self) -> None:
                """This request no longer counts as in flight (once, however the handler ends)."""
                if getattr(self, "_counted", False):
                    self._counted = False
                    with server._lock:
                        server.in_flight -= 1

            def do_GET(self) -> None:
                """``GET /v1/models``, as OpenAI-compatible servers list their models (the check a run
                makes before it starts); a fault naming ``/models`` answers instead (401, 403)."""
                with server._lock:
                    server.requests.append((self.path, {}))
                fault = None
                with server._lock:
                    for k, (fragment, kind) in enumerate(server.faults):
                        if "/models" in fragment and fragment in self.path:
                            fault = kind
                            del server.faults[k]
                            break
                if fault in ("401", "403"):
                    err = {"error": {"message": "Incorrect API key provided.", "code": "invalid_api_key"}}
                    return self._send(int(fault), json.dumps(err).encode())
                if self.path.startswith("/files/") and self.path.endswith(".png"):
                    number = self.path[len("/files/") : -len(".png")]
                    if number.isdigit() and int(number) < len(server.files):
                        data = server.files[int(number)]
                        self.send_response(200)
                        self.send_header("Content-Type", "image/png")
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                        return None
                if self.path.rstrip("/").endswith("/models"):
                    body = {"object": "list", "data": [{"id": "chat-model", "object": "model", "owned_by": "fake"}]}
                    return self._send(200, json.dumps(body).encode())
                return self._send(404, b'{"error": {"message": "no such endpoint"}}')

            def _post(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                read = time.monotonic()  # the latency runs from here: this server's parsing is not the client's wait
                body = self._body(raw)
                with server._lock:
                    server.requests.append((self.path, body if server.record else {}))
                    if server.capture:
                        server.wire.append((self.path, list(self.headers.items()), raw))
                if server.latency_s:
                    time.sleep(max(0.0, read + server.latency_s - time.monotonic()))
                fault = server._fault(self.path)
                if fault == "hang":
                    time.sleep(server.hang_s)
                    return self._send(504, b'{"error": "too late"}')
                if fault in ("trickle", "trickle-head", "endless"):
                    return self._drip(fault)
                if fault == "oversized":  # a whole, well-formed reply far longer than any token limit allows
                    text = "word " * (server.oversized_bytes // 5)
                    out = {"id": "fake", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": text}}]}  # fmt: skip
                    return self._send(200, json.dumps(out).encode())
                if fault == "429":
                    return self._send(429, b'{"error": {"message": "slow down"}}', {"Retry-After": "0.05"})
                if fault == "500":
                    return self._send(500, b'{"error": {"message": "internal"}}')
                if fault == "malformed":
                    return self._send(200, b'{"choices": [ this is not json')
                if fault in ("echo-key", "401", "403"):  # a server that quotes the credentials it was sent
                    auth = self.headers.get("Authorization", "")
                    status = 400 if fault == "echo-key" else int(fault)
                    err = {"error": {"message": f"request rejected for {auth}"}}
                    return self._send(status, json.dumps(err).encode())
                if self.path.endswith("/infer"):
                    return self._infer(body, fault)
                if "/chat/completions" in self.path:
                    return self._chat(body, fault)
                if "/images/" in self.path:
                    return self._images(body, fault)
                return self._send(404, b'{"error": {"message": "no such endpoint"}}')

            def _drip(self, fault: str) -> None:
                """A server that never finishes its reply, for at most ``hang_s``: ``trickle-head`` sends
                its status line and headers a byte every 0.1 s, ``trickle`` its body a byte every
                0.1 s after whole headers, ``endless`` a chunked body that never ends (a chunk every
                10 ms). No per-read timeout fires on any of them."""
                self._finished()
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                body = b'{"choices": [{"index": 0, "finish_reason": "stop", "message": {"content": "A"}}]}'
                if fault == "trickle":
                    head += b"Content-Length: %d\r\n\r\n" % len(body)
                    drip, every = body, 0.1
                elif fault == "endless":
                    head += b"Transfer-Encoding: chunked\r\n\r\n"
                    drip, every = b"", 0.01
                else:
                    drip, every = head + b"Content-Length: %d\r\n\r\n" % len(body) + body, 0.1
                    head = b""
                end = time.monotonic() + server.hang_s
                try:
                    self.wfile.write(head)
                    self.wfile.flush()
                    k = 0
                    while time.monotonic() < end:
                        piece = drip[k : k + 1] if drip else b"2\r\n  \r\n"
                        self.wfile.write(piece)
                        self.wfile.flush()
                        k += 1
                        time.sleep(every)
                except OSError:  # the client gave up: what the fault is for
                    pass
                self.close_connection = True

            def _body(self, raw: bytes) -> dict[str, Any]:
                ctype = self.headers.get("Content-Type", "")
                if ctype.startswith("multipart/form-data"):
                    return multipart_fields(ctype, raw)
                try:
                    body: dict[str, Any] = json.loads(raw or b"{}")
                    return body
                except ValueError:
                    return {}

            def _reply(self, body: dict[str, Any]) -> Reply:
                return server.brain(self.path, body) if server.brain else None

            def _chat(self, body: dict[str, Any], fault: str | None) -> None:
                if fault == "refuse":
                    err = {"error": {"message": "Your request was rejected by the content policy.",
                                     "code": "content_policy_violation"}}  # fmt: skip
                    return self._send(400, json.dumps(err).encode())
                reply = self._reply(body)
                if fault == "wrong-json":
                    reply = "I think it looks fine."
                if isinstance(reply, bytes) or (reply is None and body.get("model", "").startswith("image")):
                    image = reply if isinstance(reply, bytes) else (last_image(body) or plain_png())
                    content = f"Here it is: data:image/png;base64,{to_base64(image)}"
                else:
                    content = reply if isinstance(reply, str) else default_text(body)
                finish = "stop"
                limit = body.get("max_tokens")
                thought = server.reasoning or ""
                answer: str | None = content
                if isinstance(limit, int) and len(thought) // 4 >= limit:  # it never stopped thinking
                    thought, answer, finish = thought[: limit * 4], None, "length"
                elif isinstance(limit, int) and (len(thought) + len(content)) // 4 > limit:  # cut at the limit
                    answer, finish = content[: (limit - len(thought) // 4) * 4], "length"
                prompt = len(chat_text(body)) // 4 + 765 * len(_image_urls(body))
                completion = (len(thought) + len(answer or "")) // 4
                # a plausible count, with the total beside it as OpenAI's API (and clients that read it) have it
                usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
                message: dict[str, Any] = {"role": "assistant", "content": answer}
                called = body.get("function_call")
                if isinstance(called, dict) and answer is not None and fault != "wrong-json":
                    # a function the request names (legacy function calling): the reply is its call,
                    # with no content, as OpenAI's API answers (finish "stop" when it was forced)
                    message = {"role": "assistant", "content": None,
                               "function_call": {"name": called.get("name", ""), "arguments": answer}}  # fmt: skip
                if server.reasoning is not None:
                    message["reasoning_content"] = thought
                out = {"id": "fake", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
                       "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                       "usage": usage}  # fmt: skip
                return self._send(200, json.dumps(out).encode())

            def _images(self, body: dict[str, Any], fault: str | None) -> None:
                if fault == "refuse":
                    err = {"error": {"message": "Rejected by the safety system.", "code": "content_policy_violation"}}
                    return self._send(400, json.dumps(err).encode())
                sizes = server.image_sizes
                size = str(body.get("size", ""))
                if sizes is not None and size not in (*sizes, "auto"):
                    listed = ", ".join(f"'{s}'" for s in (*sizes, "auto"))
                    message = f"Invalid value: '{size}'. Supported values are: {listed}."
                    err = {"error": {"message": message, "type": "invalid_request_error", "param": "size",
                                     "code": "invalid_value"}}  # fmt: skip
                    return self._send(400, json.dumps(err).encode())
                reply = self._reply(body)
                image = reply if isinstance(reply, bytes) else (body.get("images") or [None])[-1] or plain_png()
                if sizes is not None and size != "auto":  # the real API answers at the size asked for
                    w, h = (int(v) for v in size.split("x"))
                    with Image.open(io.BytesIO(image)) as im:
                        buf = io.BytesIO()
                        im.convert("RGB").resize((w, h)).save(buf, format="PNG")
                        image = buf.getvalue()
                if server.image_urls:
                    with server._lock:
                        server.files.append(image)
                        number = len(server.files) - 1
                    out = {"created": 0, "data": [{"url": f"{server.url}/files/{number}.png"}]}
                    return self._send(200, json.dumps(out).encode())
                # base64 needs no JSON escaping: the reply is laid out around it (a 500 KB picture is
                # not walked character by character on every reply)
                return self._send(200, b'{"created": 0, "data": [{"b64_json": "' + to_base64(image).encode() + b'"}]}')

            def _infer(self, body: dict[str, Any], fault: str | None) -> None:
                if fault == "refuse":
                    return self._send(200, b'{"error": "refused by the content policy"}')
                if fault == "error":
                    return self._send(200, b'{"error": "model crashed"}')
                reply = self._reply(body)
                if body.get("output_mode") == "image_only":
                    image = reply if isinstance(reply, bytes) else last_image(body) or plain_png()
                    out: dict[str, Any] = {"response": {"image": to_base64(image)}}
                else:
                    out = {"response": {"text": reply if isinstance(reply, str) else "A"}}
                return self._send(200, json.dumps(out).encode())

        return Handler
