"""The ``infer-http`` adapter: IMUG-Bench's model-server protocol.

POST {base_url}/infer
{"history": [{"role": "system" | "user" | "assistant",
              "content": [{"type": "text", "text": ...} | {"type": "image", "image": <base64>}]}],
 "output_mode": "image_only" | "text_only", "temperature": 0.0}
-> {"response": {"text": ...}} | {"response": {"image": <base64>}} | {"error": ...}
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from yanami.contract import InputText, Refused, Request
from yanami.models._bounds import open_url, text_reply_cap
from yanami.models._client import (
    Client,
    from_base64,
    key_messages,
    policy_refusal,
    to_base64,
    validate_image,
    validate_text,
)
from yanami.models._config import ModelConfig
from yanami.models._http import Fatal, Malformed, ResponseCache, Transient, parse_retry_after


def infer_history(request: Request) -> list[dict[str, Any]]:
    """The request as an /infer history."""
    return [
        {
            "role": m.role,
            "content": [
                {"type": "text", "text": p.text}
                if isinstance(p, InputText)
                else {"type": "image", "image": to_base64(p.data)}
                for p in m.parts
            ],
        }
        for m in request.messages
    ]


class InferHTTPModel(Client):
    """A model behind an /infer server (see the module docstring)."""

    PROMPT_VERSION = "infer-1"
    answer: Callable[[Request], str] | None
    generate: Callable[[Request], bytes] | None

    def __init__(self, config: ModelConfig, cache: ResponseCache | None = None) -> None:
        super().__init__(config, cache)
        self.url = config.base_url.rstrip("/") + "/infer"
        self.answer = self._answer if config.answers else None
        self.generate = self._generate if config.generates else None

    def _post(self, body: dict[str, Any], max_bytes: int) -> dict[str, Any]:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.secrets:
            headers["Authorization"] = f"Bearer {self.secrets[0]}"

        def attempt() -> dict[str, Any]:
            req = urllib.request.Request(self.url, data=data, headers=headers)
            try:
                raw = open_url(req, self.config.timeout_s)[1]
            except urllib.error.HTTPError as exc:
                if exc.code == 429 or exc.code >= 500:
                    raise Transient(f"HTTP {exc.code}", parse_retry_after(exc.headers.get("Retry-After"))) from None
                detail = exc.read(300).decode("utf-8", "replace")
                if exc.code in (401, 403):
                    raise Fatal(f"{self.url}: HTTP {exc.code} ({detail}); the server refused this client") from None
                if policy_refusal(detail):
                    raise Refused(detail) from None
                raise RuntimeError(f"HTTP {exc.code}: {detail}") from None
            except TimeoutError:
                raise Transient("timed out") from None
            except (urllib.error.URLError, ConnectionError) as exc:
                raise Transient(f"connection failed ({getattr(exc, 'reason', exc)})") from None
            try:
                out = json.loads(raw)
            except ValueError:
                raise Malformed("the /infer reply is not JSON") from None
            if not isinstance(out, dict):
                raise Malformed("the /infer reply is not a JSON object")
            return out

        result: dict[str, Any] = self.call(attempt, max_bytes)
        return result

    def _infer(self, request: Request, mode: str) -> dict[str, Any]:
        c = self.config
        tokens = c.tokens(request.max_tokens)
        cap = text_reply_cap(tokens) if mode == "text_only" and tokens is not None else c.max_image_bytes
        body: dict[str, Any] = {"history": infer_history(request), "output_mode": mode}
        if c.temperature is not None:
            body["temperature"] = c.temperature
        out = self._post(body, cap)
        if "error" in out:
            message = str(out["error"])
            if policy_refusal(message):
                raise Refused(message)
            raise RuntimeError(f"/infer error: {message}")
        response = out.get("response")
        if not isinstance(response, dict):
            raise Malformed("the /infer reply has neither response nor error")
        return response

    def _cached(
        self, request: Request, mode: str, make: Callable[[], bytes], validate: Callable[[bytes], None]
    ) -> bytes:
        payload = {"api": "infer", "url": self.url, "mode": mode, "messages": key_messages(request),
                   "temperature": self.config.temperature}  # fmt: skip
        return self.cached(payload, mode, make, validate, fresh=request.fresh)

    def _answer(self, request: Request) -> str:
        def make() -> bytes:
            text = self._infer(request, "text_only").get("text")
            if not isinstance(text, str):
                raise Malformed("the /infer reply has no text")
            return text.encode()

        return self._cached(request, "text_only", make, validate_text).decode()

    def _generate(self, request: Request) -> bytes:
        def make() -> bytes:
            image = self._infer(request, "image_only").get("image")
            if not isinstance(image, str):
                raise Malformed("the /infer reply has no image")
            try:
                return from_base64(image)
            except ValueError:
                raise Malformed("the /infer image is not valid base64") from None

        return self._cached(request, "image_only", make, validate_image)
