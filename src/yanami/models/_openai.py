"""The ``openai`` adapter: any OpenAI-compatible server through the official SDK.

Answers come from chat completions with the request's images as base64 data URLs, in the
run's layout. Images come from the images API (``generations`` without input images,
``edits`` with one or more) or, with ``image_api: chat``, from chat replies that carry an
image (as an ``image_url`` content part, an ``images`` list, or a data URL in the text).
"""

from __future__ import annotations

import base64
import json
import re
import threading
import urllib.request
from collections import OrderedDict
from typing import Any

from yanami.errors import UserError
from yanami.models._config import ModelConfig
from yanami.models._http import (
    Malformed,
    ResponseCache,
    RetryPolicy,
    Transient,
    call_with_retries,
    endpoint_for,
    parse_retry_after,
    request_key,
)
from yanami.models._protocol import InputText, Refused, Request

_POLICY = re.compile(r"content[_ ]?policy|safety system|moderation|refus", re.IGNORECASE)
_DATA_URL = re.compile(r"data:image/[a-z+]+;base64,([A-Za-z0-9+/=]+)")


def mime_of(data: bytes) -> str:
    """The MIME type of encoded image bytes, from their magic number."""
    if data.startswith(b"\x89PNG"):
        return "image/png"
    if data.startswith(b"\xff\xd8"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return "application/octet-stream"


def data_url(data: bytes) -> str:
    """An image as a base64 data URL."""
    return f"data:{mime_of(data)};base64,{base64.b64encode(data).decode()}"


_URLS: OrderedDict[str, str] = OrderedDict()
_URLS_LOCK = threading.Lock()


def _image_url(sha256: str, data: bytes) -> str:
    """`data_url`, remembered by the image's hash: a dialogue's images recur in every request about it."""
    with _URLS_LOCK:
        url = _URLS.get(sha256)
    if url is None:
        url = data_url(data)
        with _URLS_LOCK:
            _URLS[sha256] = url
            if len(_URLS) > 256:
                _URLS.popitem(last=False)
    return url


def chat_messages(request: Request) -> list[dict[str, Any]]:
    """The request as OpenAI chat messages with interleaved text and image parts."""
    out = []
    for m in request.messages:
        content: list[dict[str, Any]] = []
        for p in m.parts:
            if isinstance(p, InputText):
                content.append({"type": "text", "text": p.text})
            else:
                content.append({"type": "image_url", "image_url": {"url": _image_url(p.sha256, p.data)}})
        if m.role == "assistant":  # assistant turns are text in the chat API; their images become a note
            text = " ".join(c["text"] for c in content if c["type"] == "text")
            images = [c for c in content if c["type"] == "image_url"]
            out.append({"role": "assistant", "content": text or "(an image)"})
            if images:
                out.append({"role": "user", "content": [{"type": "text", "text": "(the image you produced)"}, *images]})
        else:
            out.append({"role": "user", "content": content})
    return out


def transcript(request: Request) -> str:
    """The conversation as one prompt, for APIs that take a single prompt (images are attached in order)."""
    lines = []
    k = 0
    for m in request.messages:
        words = []
        for p in m.parts:
            if isinstance(p, InputText):
                words.append(p.text)
            else:
                k += 1
                words.append(f"[attached image {k}]")
        lines.append(f"{m.role.capitalize()}: {' '.join(words)}")
    last = lines.pop() if lines else ""
    head = "Conversation so far:\n" + "\n".join(lines) + "\n\n" if lines else ""
    return f"{head}Respond to the last message with an image.\n{last}"


def key_messages(request: Request) -> list[Any]:
    """The messages for the cache key: images by SHA-256."""
    return [
        [m.role, [p.text if isinstance(p, InputText) else {"image": p.sha256} for p in m.parts]]
        for m in request.messages
    ]


def translate(exc: Exception) -> Exception:
    """An SDK exception as what the runner needs: Transient (retry), Refused, Malformed or an error."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return Transient("timed out")
    if isinstance(exc, openai.APIConnectionError):
        return Transient(f"connection failed ({exc})")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = _error_message(exc)
        if status == 429 or status >= 500:
            return Transient(f"HTTP {status}: {message}", parse_retry_after(exc.response.headers.get("retry-after")))
        if _POLICY.search(message) or "content_policy" in json.dumps(getattr(exc, "body", None) or {}):
            return Refused(message)
        return RuntimeError(f"HTTP {status}: {message}")
    if isinstance(exc, openai.APIResponseValidationError | json.JSONDecodeError | ValueError):
        return Malformed(f"malformed response ({exc})")
    return exc


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(getattr(exc, "message", exc))


class OpenAIModel:
    """A model behind an OpenAI-compatible server (see the module docstring)."""

    PROMPT_VERSION = "openai-1"

    def __init__(self, config: ModelConfig, cache: ResponseCache | None = None) -> None:
        try:
            import openai
        except ImportError:
            raise UserError("the openai adapter needs the api extra: pip install 'yanami[api]'") from None
        self.config = config
        self.name = config.name
        self.client = openai.OpenAI(
            base_url=config.base_url, api_key=config.api_key() or "unused", timeout=config.timeout_s, max_retries=0
        )
        self.endpoint = endpoint_for(config.base_url, config.max_concurrency, config.requests_per_minute)
        self.policy = RetryPolicy(config.max_retries, config.backoff_s)
        self.cache = cache
        self.answer = self._answer if config.chat_model else None
        self.generate = self._generate if config.image_model else None

    # plumbing ---------------------------------------------------------------------------

    def _call(self, fn: Any) -> Any:
        def attempt() -> Any:
            try:
                return fn()
            except Exception as exc:
                raise translate(exc) from None

        return call_with_retries(attempt, self.policy, self.endpoint)

    def _cached(self, payload: dict[str, Any], kind: str, make: Any) -> bytes:
        if self.cache is None:
            return make()
        return self.cache.fetch(request_key({**payload, "prompt_version": self.PROMPT_VERSION}), kind, make)

    # chat ------------------------------------------------------------------------------

    def chat(self, messages: list[dict[str, Any]], key: Any, *, seed: int | None, max_tokens: int) -> str:
        """One chat completion's text (cached, retried, rate-limited)."""
        c = self.config
        payload = {"api": "chat", "model": c.chat_model, "messages": key, "temperature": c.temperature,
                   "max_tokens": max_tokens, "seed": seed}  # fmt: skip

        def make() -> bytes:
            resp = self._call(
                lambda: self.client.chat.completions.create(
                    model=c.chat_model,  # type: ignore[arg-type]
                    messages=messages,  # type: ignore[arg-type]
                    temperature=c.temperature,
                    max_tokens=max_tokens,
                    **({"seed": seed} if seed is not None else {}),
                )
            )
            choice = _first_choice(resp)
            if choice.finish_reason == "content_filter":
                raise Refused("the server's content filter stopped the reply")
            text = choice.message.content
            if not isinstance(text, str):
                raise Malformed("the chat reply has no text")
            return text.encode()

        return self._cached(payload, "text", make).decode()

    def _answer(self, request: Request) -> str:
        return self.chat(
            chat_messages(request),
            key_messages(request),
            seed=request.seed,
            max_tokens=min(self.config.max_tokens, 512),
        )

    # images ----------------------------------------------------------------------------

    def _generate(self, request: Request) -> bytes:
        c = self.config
        size = f"{request.size[0]}x{request.size[1]}"
        payload = {"api": c.image_api, "model": c.image_model, "messages": key_messages(request), "size": size,
                   "seed": request.seed}  # fmt: skip
        if c.image_api == "chat":
            return self._cached(payload, "image", lambda: self._chat_image(request))
        images = request.images()
        prompt = transcript(request)

        def make() -> bytes:
            if images:
                files = [(f"image{k}.png", im.data, mime_of(im.data)) for k, im in enumerate(images, 1)]
                resp = self._call(
                    lambda: self.client.images.edit(model=c.image_model, image=files, prompt=prompt, size=size)  # type: ignore[arg-type]
                )
            else:
                resp = self._call(lambda: self.client.images.generate(model=c.image_model, prompt=prompt, size=size))  # type: ignore[arg-type]
            data = getattr(resp, "data", None)
            if not data:
                raise Malformed("the images response has no data")
            return self._image_bytes(data[0].b64_json, data[0].url)

        return self._cached(payload, "image", make)

    def _chat_image(self, request: Request) -> bytes:
        c = self.config
        resp = self._call(
            lambda: self.client.chat.completions.create(
                model=c.image_model,  # type: ignore[arg-type]
                messages=chat_messages(request),  # type: ignore[arg-type]
                temperature=c.temperature,
                seed=request.seed,
            )
        )
        choice = _first_choice(resp)
        if choice.finish_reason == "content_filter":
            raise Refused("the server's content filter stopped the reply")
        msg = choice.message
        extra = getattr(msg, "model_extra", None) or {}
        for image in extra.get("images") or []:
            url = (image.get("image_url") or {}).get("url") if isinstance(image, dict) else None
            if url:
                return self._image_bytes(None, url)
        content = msg.content
        if isinstance(content, list):
            for part in content:
                url = part.get("image_url", {}).get("url") if isinstance(part, dict) else None
                if url:
                    return self._image_bytes(None, url)
        if isinstance(content, str) and (m := _DATA_URL.search(content)):
            return base64.b64decode(m.group(1))
        if isinstance(content, str) and _POLICY.search(content):
            raise Refused(content[:200])
        raise Malformed("the chat reply carries no image")

    def _image_bytes(self, b64: str | None, url: str | None) -> bytes:
        if b64:
            try:
                return base64.b64decode(b64, validate=True)
            except ValueError:
                raise Malformed("the image is not valid base64") from None
        if url and (m := _DATA_URL.match(url)):
            return base64.b64decode(m.group(1))
        if url and url.startswith(("http://", "https://")):
            with urllib.request.urlopen(url, timeout=self.config.timeout_s) as r:
                return r.read()
        raise Malformed("the response holds no image")


def _first_choice(resp: Any) -> Any:
    choices = getattr(resp, "choices", None)
    if not choices:
        raise Malformed("the chat response has no choices")
    return choices[0]
