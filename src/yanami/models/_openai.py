"""The ``openai`` adapter: any OpenAI-compatible server through the official SDK.

Answers come from chat completions with the request's images as base64 data URLs, in the
run's layout. Images come from the images API (``generations`` without input images,
``edits`` with one or more) or, with ``image_api: chat``, from chat replies that carry an
image (as an ``image_url`` content part, an ``images`` list, or a data URL in the text).

A chat request is sent through the SDK's own client (its HTTP stack, timeouts, headers
and error types) with a body this module serializes once: the SDK's per-call transform
of nested parameters walks every message part and costs more CPU than the request itself
when a dialogue's images ride along.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from yanami.contract import Refused, Request, UserError
from yanami.models._bounds import bounded, bounded_transport, open_url, text_reply_cap
from yanami.models._client import (
    Client,
    chat_body,
    from_base64,
    key_messages,
    mime_of,
    policy_refusal,
    transcript,
    validate_image,
    validate_text,
)
from yanami.models._config import ModelConfig, pick_size
from yanami.models._http import CutOff, Fatal, Malformed, ResponseCache, Transient, parse_retry_after

_DATA_URL = re.compile(r"data:image/[a-z+]+;base64,([A-Za-z0-9+/=]+)")


def _error_message(exc: object) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(getattr(exc, "message", exc))


class OpenAIModel(Client):
    """A model behind an OpenAI-compatible server (see the module docstring)."""

    PROMPT_VERSION = "openai-1"
    answer: Callable[[Request], str] | None
    generate: Callable[[Request], bytes] | None

    def __init__(self, config: ModelConfig, cache: ResponseCache | None = None) -> None:
        try:
            import openai
        except ImportError:
            raise UserError("the openai adapter needs the api extra: pip install 'yanami[api]'") from None
        super().__init__(config, cache)
        # A plain-HTTP server (a local vLLM) needs no TLS context, which costs 0.1 s to build.
        plain = config.base_url.startswith("http://")
        transport = bounded_transport(
            openai.DefaultHttpxClient, verify=not plain, keepalive=max(100, config.max_concurrency)
        )
        self.client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key() or "unused",
            timeout=config.timeout_s,
            max_retries=0,
            http_client=openai.DefaultHttpxClient(transport=transport),
        )
        self.answer = self._answer if config.chat_model else None
        self.generate = self._generate if config.image_model else None

    def check(self) -> None:
        """One cheap request (``GET /models``, no retries) before anything is written: a one-line
        `UserError` when the server cannot be reached or refuses the key; any other answer (a
        server without that route, say) means it is there."""
        import openai

        try:
            with bounded(self.config.timeout_s, text_reply_cap(0)):
                self.client.get("/models", cast_to=bytes, options={"max_retries": 0})
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise UserError(
                f"{self.config.base_url}: the server cannot be reached ({exc}); check base_url and that it is up"
            ) from None
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403):
                var = self.config.api_key_env or "no api_key_env"
                raise UserError(
                    f"{self.config.base_url}: HTTP {exc.status_code} ({_error_message(exc)}); the server refused "
                    f"the key ({var})"
                ) from None

    def translate(self, exc: Exception) -> Exception:
        """An SDK exception as Transient (retry), Refused, Malformed, Fatal (401/403) or an error."""
        import openai

        if isinstance(exc, openai.APITimeoutError):
            return Transient("timed out")
        if isinstance(exc, openai.APIConnectionError):
            return Transient(f"connection failed ({exc})")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            message = _error_message(exc)
            if status == 429 or status >= 500:
                return Transient(
                    f"HTTP {status}: {message}", parse_retry_after(exc.response.headers.get("retry-after"))
                )
            if status in (401, 403):
                var = self.config.api_key_env or "no api_key_env"
                return Fatal(f"{self.config.base_url}: HTTP {status} ({message}); the server refused the key ({var})")
            if policy_refusal(message) or "content_policy" in json.dumps(getattr(exc, "body", None) or {}):
                return Refused(message)
            return RuntimeError(f"HTTP {status}: {message}")
        if isinstance(exc, openai.APIResponseValidationError | json.JSONDecodeError | ValueError):
            return Malformed(f"malformed response ({exc})")
        return exc

    # chat ------------------------------------------------------------------------------

    def chat(
        self, request: Request, model: str, *, max_tokens: int | None = None, structured: bool = False
    ) -> dict[str, Any]:
        """One chat completion for a request (retried, rate-limited; not cached): the first choice's message.

        The SDK sends the request and raises its errors; the reply is read as plain JSON (the
        few fields used here), not built into the SDK's nested response models.
        """
        params: dict[str, Any] = {"model": model}
        if self.config.temperature is not None:  # None: the server's default, as a benchmark's code may leave it
            params["temperature"] = self.config.temperature
        if request.seed is not None:  # the run's (or a Best-of candidate's), never the item's
            params["seed"] = request.seed
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        if structured and request.json_schema is not None:
            schema = {"name": "reply", "schema": dict(request.json_schema)}
            params["response_format"] = {"type": "json_schema", "json_schema": schema}
        if request.function is not None:
            params["functions"] = [dict(request.function)]
            params["function_call"] = {"name": request.function["name"]}
        raw = chat_body(request, params)
        cap = text_reply_cap(max_tokens) if max_tokens is not None else self.config.max_image_bytes
        reply = self.call(lambda: json.loads(self.client.post("/chat/completions", content=raw, cast_to=bytes)), cap)
        self._tokens(reply)
        if isinstance(reply, dict) and isinstance(reply.get("model"), str):
            self.note_served(reply["model"])
        choices = reply.get("choices") if isinstance(reply, dict) else None
        choice = choices[0] if isinstance(choices, list) and choices else None
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            raise Malformed("the chat response has no choices")
        assert isinstance(choice, dict)
        if choice.get("finish_reason") == "content_filter":
            raise Refused("the server's content filter stopped the reply")
        if (
            choice.get("finish_reason") == "length"
            and max_tokens is not None
            and (request.json_schema is not None or not message.get("content"))
        ):
            # a JSON reply cut off is no reply, nor is a reasoning model's that never stopped
            # thinking (its thoughts in reasoning_content, no answer): never parsed (nor cached)
            raise CutOff(max_tokens)
        return message

    def _tokens(self, reply: object) -> None:
        usage = reply.get("usage") if isinstance(reply, dict) else None
        if isinstance(usage, dict):
            tokens_in = usage.get("prompt_tokens", usage.get("input_tokens", 0))
            tokens_out = usage.get("completion_tokens", usage.get("output_tokens", 0))
            self.note_tokens(
                tokens_in if isinstance(tokens_in, int) else 0, tokens_out if isinstance(tokens_out, int) else 0
            )

    def _answer(self, request: Request) -> str:
        c = self.config
        max_tokens = c.tokens(request.max_tokens)
        structured = c.structured_output and request.json_schema is not None
        payload: dict[str, Any] = {"api": "chat", "model": c.chat_model, "messages": key_messages(request),
                   "temperature": c.temperature, "max_tokens": max_tokens, "seed": request.seed}  # fmt: skip
        if structured:
            payload["json_schema"] = request.json_schema
        if request.function is not None:
            payload["function"] = request.function

        def make() -> bytes:
            assert c.chat_model is not None
            message = self.chat(request, c.chat_model, max_tokens=max_tokens, structured=structured)
            text = _called(message) if request.function is not None else message.get("content")
            if not isinstance(text, str):
                raise Malformed("the chat reply has no text")
            return text.encode()

        return self.cached(payload, "text", make, validate_text, fresh=request.fresh).decode()

    # images ----------------------------------------------------------------------------

    def _generate(self, request: Request) -> bytes:
        c = self.config
        size = pick_size(request.size, c.sizes)  # a size the images API takes, the frame's aspect as near as may be
        payload = {"api": c.image_api, "model": c.image_model, "messages": key_messages(request), "size": size,
                   "seed": request.seed}  # fmt: skip
        if c.image_api == "chat":
            return self.cached(payload, "image", lambda: self._chat_image(request), validate_image)
        images = request.images()
        prompt = transcript(request)

        params = {"model": c.image_model, "prompt": prompt, "size": size}

        def post() -> Any:
            # The SDK's own client sends the request; the images travel as the multipart file
            # fields its images.edit would send (image[]), without its per-call parameter copy.
            if images:
                files: Any = [
                    ("image[]", (f"image{k}.png", im.data, mime_of(im.data))) for k, im in enumerate(images, 1)
                ]
                multipart: Any = {"headers": {"Content-Type": "multipart/form-data"}}
                return json.loads(
                    self.client.post("/images/edits", body=params, files=files, options=multipart, cast_to=bytes)
                )
            return json.loads(self.client.post("/images/generations", body=params, cast_to=bytes))

        def make() -> bytes:
            reply = self.call(post, c.max_image_bytes)
            self._tokens(reply)
            served = reply.get("model") if isinstance(reply, dict) else None
            self.note_served(served if isinstance(served, str) else c.image_model or "")  # images replies rarely say
            data = reply.get("data") if isinstance(reply, dict) else None
            first = data[0] if isinstance(data, list) and data else None
            if not isinstance(first, dict):
                raise Malformed("the images response has no data")
            return self._image_bytes(first.get("b64_json"), first.get("url"))

        return self.cached(payload, "image", make, validate_image)

    def _chat_image(self, request: Request) -> bytes:
        assert self.config.image_model is not None
        msg = self.chat(request, self.config.image_model)
        for image in msg.get("images") or []:
            url = (image.get("image_url") or {}).get("url") if isinstance(image, dict) else None
            if url:
                return self._image_bytes(None, url)
        content = msg.get("content")
        if isinstance(content, list):
            for part in content:
                url = part.get("image_url", {}).get("url") if isinstance(part, dict) else None
                if url:
                    return self._image_bytes(None, url)
        if isinstance(content, str) and (m := _DATA_URL.search(content)):
            return self._image_bytes(m.group(1), None)
        if isinstance(content, str) and policy_refusal(content):
            raise Refused(content[:200])
        raise Malformed("the chat reply carries no image")

    def _image_bytes(self, b64: str | None, url: str | None) -> bytes:
        if b64:
            try:
                return from_base64(b64)
            except ValueError:
                raise Malformed("the image is not valid base64") from None
        if url and (m := _DATA_URL.match(url)):
            return self._image_bytes(m.group(1), None)
        if url and url.startswith(("http://", "https://")):
            return self.call(lambda: open_url(url, self.config.timeout_s)[1], self.config.max_image_bytes)
        raise Malformed("the response holds no image")


def _called(message: dict[str, Any]) -> object:
    """A reply to a request that names a function: the call's arguments (a JSON text), or the
    message's content where the server answered without calling it (as OpenING's code reads it)."""
    call = message.get("function_call")
    if isinstance(call, dict) and "arguments" in call:
        return call["arguments"]
    return message.get("content")
