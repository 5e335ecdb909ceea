"""One chat client for every adapter and judge: what a request looks like on the wire, what a
reply means, and what may be kept.

- rendering: `chat_messages` (OpenAI chat messages, images as data URLs, encoded once per
  image), `conversation_text` (a conversation as text with numbered image markers, for
  single-prompt APIs and for judges), `options_text` (lettered options), `key_messages`
  (the request for a cache key: images by hash);
- meaning: `refusal` (the one rule that tells a refusal from an answer, for server errors
  and for plain-text replies alike), `redact` (secrets never reach a result, a log or a
  report);
- keeping: `Client`, the base of the adapters: retries, the endpoint's limits, a stop after
  401/403, error translation with redaction, and `Client.cached`, which stores a response
  only after it passed validation (`validate_text`, `validate_image`).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from yanami.contract import InputImage, InputText, Refused, Request
from yanami.models._bounds import bounded
from yanami.models._http import (
    Fatal,
    Malformed,
    ResponseCache,
    RetryPolicy,
    Transient,
    call_with_retries,
    endpoint_for,
    request_key,
)

if TYPE_CHECKING:
    from yanami.contract import Question
    from yanami.models._config import ModelConfig

_T = TypeVar("_T")

# The refusal rule ---------------------------------------------------------------------

_POLICY = re.compile(
    r"content[_ ]?(policy|filter|management)|safety (system|policy|filter)|moderation|"
    r"refus(ed|al)|not allowed|violat(es|ion)",
    re.IGNORECASE,
)
"""A server's error that declines the request on policy grounds."""
_APOLOGY = re.compile(
    r"^\W*(i'?m sorry|i am sorry|sorry|unfortunately|i apologi[sz]e|as an ai)\b|"
    r"^\W*i\s+(can(no|')?t|am unable to|'m unable to|am not able to|won'?t|will not|must decline)\b",
    re.IGNORECASE,
)
_DECLINE = re.compile(
    r"\b(can(no|')?t|unable to|not able to|won'?t|will not|must decline|decline to|not (allowed|permitted) to)"
    r"\s+(help|assist|comply|do (that|this)|provide|create|generate|fulfil+|answer|continue)",
    re.IGNORECASE,
)
REFUSAL_MAX_CHARS = 400
"""A reply longer than this is an answer that may mention a limitation, not a refusal."""


def refusal(text: str) -> bool:
    """Whether a reply (or a server's error message) declines the request.

    One rule for every path: an error message that names a content policy, safety system or
    moderation; or a short reply that opens with an apology or "I can't" and declines to
    help ("I'm sorry, but I can't help with that."). A refusal is stored as ``refused`` and
    excluded from scores; it is never scored as a wrong answer, and never cached.
    """
    t = text.strip()
    if not t or len(t) > REFUSAL_MAX_CHARS:
        return False
    return bool(_APOLOGY.search(t) and _DECLINE.search(t))


def policy_refusal(message: str) -> bool:
    """Whether a server's error message declines on policy grounds (or reads as a refusal)."""
    return bool(_POLICY.search(message)) or refusal(message)


# Secrets --------------------------------------------------------------------------------

_SECRET_PATTERNS = re.compile(
    r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{8,}|\bBearer\s+[A-Za-z0-9_\-.=]{8,}|"
    r"\b(api[_-]?key|token|secret|password)(\"?\s*[:=]\s*\"?)[^\s\"',;]{6,}",
    re.IGNORECASE,
)
REDACTED = "[redacted]"


def secret_forms(secret: str) -> tuple[str, ...]:
    """``secret`` as a server or a log may write it back: as it is, URL-encoded, and inside any
    base64 text (standard or URL-safe alphabet, at each of the three byte offsets: the
    characters only the secret's own bytes determine), so each form can be redacted."""
    if len(secret) < 6:
        return ()
    raw = secret.encode()
    forms = {secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret)}
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode()
        inner = encoded[-(-offset * 8 // 6) : (offset + len(raw)) * 8 // 6]
        forms |= {inner, inner.translate(str.maketrans("+/", "-_"))}
    return tuple(sorted(forms, key=len, reverse=True))


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every given secret and anything shaped like a key or token replaced."""
    for s in secrets:
        if s and len(s) >= 6:
            text = text.replace(s, REDACTED)

    def hide(m: re.Match[str]) -> str:
        if m.group(2):  # "api_key: value": keep the name
            return f"{m.group(2)}{m.group(3)}{REDACTED}"
        return REDACTED

    return _SECRET_PATTERNS.sub(hide, text)


# Rendering ------------------------------------------------------------------------------


def mime_of(data: bytes) -> str:
    """The MIME type of encoded image bytes, from their magic number."""
    if data.startswith(b"\x89PNG"):
        return "image/png"
    if data.startswith(b"\xff\xd8"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return "application/octet-stream"


try:  # the `api` extra's SIMD codec: 40x the standard library's on a picture, and the GIL is free sooner
    import pybase64 as _pybase64
except ImportError:  # pragma: no cover - the base install: the standard library's
    _pybase64 = None  # type: ignore[assignment]  # mypy types the name as the module


def from_base64(text: str | bytes) -> bytes:
    """Strict base64 (nothing outside the alphabet, padding only at the end); ValueError otherwise.

    Not `base64.b64decode(validate=True)`, which runs a regular expression over the text before
    it decodes: on a picture-sized reply that is a millisecond with the GIL held.
    """
    if _pybase64 is not None:
        return _pybase64.b64decode(text, validate=True)
    return binascii.a2b_base64(text, strict_mode=True)


def to_base64(data: bytes) -> str:
    """``data`` in standard base64, as text."""
    if _pybase64 is not None:
        return _pybase64.b64encode(data).decode("ascii")
    return base64.b64encode(data).decode("ascii")


def data_url(data: bytes, media_type: str | None = None) -> str:
    """An image as a base64 data URL (of the type its bytes are, unless ``media_type`` says otherwise)."""
    return f"data:{media_type or mime_of(data)};base64,{to_base64(data)}"


_FRAGMENTS: OrderedDict[tuple[str, str | None], bytes] = OrderedDict()
_FRAGMENTS_LOCK = threading.Lock()


def _image_fragment(image: InputImage) -> bytes:
    """An image's chat content part as JSON bytes, made once per image hash.

    A dialogue's images recur in every request about it; base64 needs no JSON escaping, so
    the encoded part can be spliced into any body as it is.
    """
    key = (image.sha256, image.media_type)
    with _FRAGMENTS_LOCK:
        fragment = _FRAGMENTS.get(key)
    if fragment is None:
        url = data_url(image.data, image.media_type)
        fragment = b'{"type":"image_url","image_url":{"url":"' + url.encode("ascii") + b'"}}'
        with _FRAGMENTS_LOCK:
            _FRAGMENTS[key] = fragment
            if len(_FRAGMENTS) > 256:
                _FRAGMENTS.popitem(last=False)
    return fragment


def image_url(image: InputImage) -> str:
    """`data_url` of an input image (from the cached content part)."""
    return _image_fragment(image)[len(b'{"type":"image_url","image_url":{"url":"') : -3].decode("ascii")


ASSISTANT_IMAGE_NOTE = "(the image you produced)"

Content = str | list[InputText | InputImage]
"""A chat message's content: a string, or interleaved parts."""


def _chat_layout(request: Request) -> list[tuple[str, Content]]:
    """The request's messages as chat messages (role, content).

    Chat APIs take no images in assistant messages, so an assistant's images follow in a user
    message of their own, introduced by `ASSISTANT_IMAGE_NOTE`.
    """
    out: list[tuple[str, Content]] = []
    for m in request.messages:
        if m.role == "system":
            out.append(("system", "\n".join(p.text for p in m.parts if isinstance(p, InputText))))
        elif m.role == "assistant":
            text = " ".join(p.text for p in m.parts if isinstance(p, InputText))
            images: list[InputText | InputImage] = [p for p in m.parts if isinstance(p, InputImage)]
            out.append(("assistant", text or "(an image)"))
            if images:
                out.append(("user", [InputText(ASSISTANT_IMAGE_NOTE), *images]))
        else:
            out.append(("user", list(m.parts)))
    return out


def chat_messages(request: Request) -> list[dict[str, Any]]:
    """The request as OpenAI chat messages with interleaved text and image parts (data URLs)."""
    return [
        {
            "role": role,
            "content": content
            if isinstance(content, str)
            else [
                {"type": "text", "text": p.text}
                if isinstance(p, InputText)
                else {"type": "image_url", "image_url": {"url": image_url(p)}}
                for p in content
            ],
        }
        for role, content in _chat_layout(request)
    ]


def chat_body(request: Request, params: dict[str, Any]) -> bytes:
    """A chat completion's JSON body: ``params`` plus ``messages``, equal to
    ``json.dumps({**params, "messages": chat_messages(request)})`` once parsed, but with each
    image's part encoded once per image instead of once per request."""
    dumps = json.dumps
    head = dumps(params).encode()
    out = [head[:-1], b',"messages":[' if params else b'"messages":[']
    for k, (role, content) in enumerate(_chat_layout(request)):
        out += [b',{"role":' if k else b'{"role":', dumps(role).encode(), b',"content":']
        if isinstance(content, str):
            out.append(dumps(content).encode())
        else:
            for j, p in enumerate(content):
                out.append(b"," if j else b"[")
                out += (
                    [b'{"type":"text","text":', dumps(p.text).encode(), b"}"]
                    if isinstance(p, InputText)
                    else [_image_fragment(p)]
                )
            out.append(b"]" if content else b"[]")
        out.append(b"}")
    out.append(b"]}")
    return b"".join(out)


Turn = tuple[str, Sequence[str | None]]
"""A message as (role, parts), each part a text or None for an image."""


def conversation_text(messages: Iterable[Turn], marker: str = "[image {k}]") -> list[str]:
    """A conversation as lines ``Role: words``, its images as numbered markers in order."""
    lines, k = [], 0
    for role, parts in messages:
        words = []
        for p in parts:
            if p is None:
                k += 1
                words.append(marker.format(k=k))
            else:
                words.append(p)
        lines.append(f"{role.capitalize()}: {' '.join(words)}")
    return lines


def request_turns(request: Request) -> list[Turn]:
    """A request's messages as `Turn` s for `conversation_text`."""
    return [(m.role, [p.text if isinstance(p, InputText) else None for p in m.parts]) for m in request.messages]


def transcript(request: Request) -> str:
    """The conversation as one prompt, for image APIs that take a single prompt (images attached in order)."""
    lines = conversation_text(request_turns(request), "[attached image {k}]")
    last = lines.pop() if lines else ""
    head = "Conversation so far:\n" + "\n".join(lines) + "\n\n" if lines else ""
    return f"{head}Respond to the last message with an image.\n{last}"


def options_text(choices: Sequence[str]) -> str:
    """Lettered options, one per line: ``A. first``."""
    from yanami.contract import CHOICE_LETTERS

    return "\n".join(f"{CHOICE_LETTERS[i]}. {c}" for i, c in enumerate(choices))


def question_prompt(q: Question) -> str:
    """The user message that asks a DSU question (options lettered A, B, ...)."""
    if not q.choices:
        return f"{q.text}\n\nAnswer briefly."
    return f"{q.text}\n\nOptions:\n{options_text(q.choices)}\n\nReply with the letter of the correct option only."


def key_messages(request: Request) -> list[list[object]]:
    """The messages for a cache key: images by SHA-256 (and the type their data URL names, where
    it is not their own)."""
    return [
        [m.role, [p.text if isinstance(p, InputText) else _image_key(p) for p in m.parts]] for m in request.messages
    ]


def _image_key(image: InputImage) -> dict[str, str]:
    return {"image": image.sha256} if image.media_type is None else {"image": image.sha256, "as": image.media_type}


# Validation: nothing invalid is ever cached --------------------------------------------------


def validate_text(value: bytes) -> None:
    """A text reply may be kept unless it is a refusal (raised as `Refused`, never cached)."""
    text = value.decode("utf-8", "replace")
    if refusal(text):
        raise Refused(text[:200])


def validate_image(value: bytes) -> None:
    """An image reply may be kept only if it is a whole PNG, JPEG or WebP within the pixel limit."""
    from yanami.store import ImageProblem, open_image_bytes

    try:
        open_image_bytes(value).verify()  # header, pixel limit, structure and checksums; no decoding
    except ImageProblem as exc:
        raise Malformed(f"the output is not a decodable image ({exc})") from None
    except Exception as exc:  # Pillow raises many types for corrupt data
        raise Malformed(f"the output is not a decodable image ({exc})") from None


# The client -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    """What the last request of a thread used: tokens, images made, whether the cache answered."""

    tokens_in: int = 0
    tokens_out: int = 0
    images_out: int = 0
    cached: bool = False
    latency_s: float = 0.0
    served_model: str = ""
    """The model id the server says answered (its reply's ``model``), where it says one."""


class Client:
    """What every adapter of a remote model shares: limits, retries, translation, cache.

    Subclasses set ``PROMPT_VERSION`` (part of every cache key) and implement ``translate``
    (a client library's exception as `Transient`, `Refused`, `Malformed`, `Fatal` or an error).
    """

    PROMPT_VERSION = "1"

    def __init__(self, config: ModelConfig, cache: ResponseCache | None = None) -> None:
        self.config = config
        self.name = config.name
        self.endpoint = endpoint_for(
            config.base_url, config.max_concurrency, config.requests_per_minute, config.timeout_s
        )
        self.policy = RetryPolicy(config.max_retries, config.backoff_s)
        self.cache = cache
        if cache is not None:
            cache.held = True
        key = config.api_key()
        self.secrets = secret_forms(key) if key else ()
        self._local = threading.local()
        self.refused: str | None = None
        """Why the server refused this model's credentials (HTTP 401 or 403), once it has: no
        request is sent after that. A model made later, with a corrected key, has its own."""

    def last_usage(self) -> Usage | None:
        """What this thread's last request used (None before any); read by the construction pipeline."""
        usage: Usage | None = getattr(self._local, "usage", None)
        return usage

    def note_tokens(self, tokens_in: int, tokens_out: int) -> None:
        """Record the token counts a server reported for the current request (adapters call this)."""
        self._local.tokens = (tokens_in, tokens_out)

    def note_served(self, model: str) -> None:
        """Record the model id the server says answered the current request (adapters call this)."""
        self._local.served = model

    def translate(self, exc: Exception) -> Exception:
        """A failure of one attempt as what the runner needs (override per client library)."""
        return exc

    def call(self, fn: Callable[[], _T], max_bytes: int) -> _T:
        """``fn()`` within the endpoint's limits, retried on transient failures, errors redacted.

        Each attempt has ``timeout_s`` from its first byte sent to its last byte read, and may read
        at most ``max_bytes`` (`bounded`): a server that trickles or never stops is a timeout, a
        reply over the cap is `Malformed` (an error, never stored)."""

        def attempt() -> _T:
            if self.refused:
                raise Fatal(self.refused)
            with bounded(self.config.timeout_s, max_bytes) as bounds:
                try:
                    return fn()
                except Exception as exc:
                    failed: Exception = exc
            if bounds.over:
                failed = Malformed(f"the reply is over {bounds.max_bytes:,} bytes (the cap for this request)")
            elif bounds.expired:
                failed = Transient(f"no complete reply within {bounds.seconds:g} s (timeout_s)")
            elif not isinstance(failed, Fatal | Refused | Malformed | Transient):
                failed = self.translate(failed)
            out = self._redacted(failed)
            if isinstance(out, Fatal):
                self.refused = self.refused or str(out)
                self.endpoint.stop(self.refused)
            raise out from None

        return call_with_retries(attempt, self.policy, self.endpoint)

    def _redacted(self, exc: Exception) -> Exception:
        """``exc`` with its message redacted (the same object when there is nothing to hide)."""
        message = str(exc)
        clean = redact(message, self.secrets)
        if clean == message:
            return exc
        if isinstance(exc, Transient):
            return Transient(clean, exc.retry_after)
        try:
            return type(exc)(clean)
        except Exception:
            return RuntimeError(clean)

    def cached(
        self,
        payload: dict[str, Any],
        kind: str,
        make: Callable[[], bytes],
        validate: Callable[[bytes], None],
        fresh: bool = False,
    ) -> bytes:
        """The response stored under the request's key, or ``make()``'s once it passed ``validate``
        (``fresh``: ``make()``'s in any case, replacing what is stored: `Request.fresh`)."""
        key = request_key({**payload, "prompt_version": self.PROMPT_VERSION}) if self.cache is not None else ""
        self._local.usage = None
        if self.cache is not None and not fresh:
            hit = self.cache.get(key)
            if hit is not None:
                self._local.usage = Usage(cached=True)
                return hit[1]
        self._local.tokens = (0, 0)
        self._local.served = ""
        start = time.perf_counter()
        try:
            value = make()
        finally:  # what the server said it used counts even for a reply then refused (cut off, say): it is billed
            tokens_in, tokens_out = self._local.tokens
            latency = time.perf_counter() - start
            served = self._local.served
            self._local.usage = Usage(tokens_in, tokens_out, 0, False, latency, served)
        validate(value)  # only a reply that is an image counts (and is charged) as an image made
        if kind in ("image", "image_only"):
            self._local.usage = Usage(tokens_in, tokens_out, 1, False, latency, served)
        elif self.secrets and any(s.encode() in value for s in self.secrets):
            # a reply that quotes the key (in any of its forms) keeps it nowhere: not in the cache,
            # the run's results, a report, nor what the caller is given
            for s in self.secrets:  # longest first
                value = value.replace(s.encode(), REDACTED.encode())
        if self.cache is not None and value.strip():
            self.cache.put(key, kind, value)
        return value
