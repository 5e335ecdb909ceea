"""Model and judge config files (YAML): what to call, where, and how hard.

kind: openai                      # openai | infer-http | reference | checkpoint
name: qwen-vl-judge               # how runs and verdicts name it (default: the file's stem)
base_url: http://127.0.0.1:8000/v1
api_key_env: OPENAI_API_KEY       # the environment variable holding the key, never the key
chat_model: Qwen/Qwen2.5-VL-7B-Instruct   # understanding (optional)
image_model: gpt-image-1          # generation and editing (optional)
image_api: images                 # images (generations / edits) or chat (images in chat replies)
layout: yes-first                 # the input layout this model wants
temperature: 0.0
seed: 42                          # optional: sent with every request, the same for every item (default: none)
max_tokens: 8192                  # optional: what every request gets (default: what each asks, 512 for answers)
timeout_s: 120                    # the most one request may take, connecting to the last byte
max_image_bytes: 50000000         # the most an image reply may take on the wire (base64 included)
max_concurrency: 8                # requests in flight to this endpoint, at most
requests_per_minute: 600          # per endpoint
max_retries: 5                    # on 429, 5xx, timeouts and connection errors
structured_output: false          # send a reply's JSON Schema as response_format (construction)
prices:                           # for the construction ledger and --budget (optional)
  input_per_million: 0.5
  output_per_million: 1.5
  per_image: 0.04
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from yanami.contract import UserError


class Prices(BaseModel):
    """A model's price table (any one currency; the ledger adds the numbers as they are)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_million: float = Field(0.0, ge=0)
    """Per million input (prompt) tokens."""
    output_per_million: float = Field(0.0, ge=0)
    """Per million output tokens."""
    per_image: float = Field(0.0, ge=0)
    """Per image made."""


TRANSPORT = (
    "base_url",
    "timeout_s",
    "max_image_bytes",
    "max_concurrency",
    "requests_per_minute",
    "max_retries",
    "backoff_s",
)
"""Settings of how a model is reached, not what it answers: a resumed run may change them (a
server restarted on another port, a higher rate)."""


IMAGES_API_SIZES = ("1024x1024", "1536x1024", "1024x1536")
"""The sizes OpenAI's images API publishes for its image models (besides ``auto``)."""


def pick_size(frame: tuple[int, int], sizes: tuple[str, ...]) -> str:
    """The size to ask for: ``frame`` -> the output frame itself; else the ``WxH`` whose aspect is
    closest to the frame's (the first of equals), else ``auto``."""
    if "frame" in sizes:
        return f"{frame[0]}x{frame[1]}"
    want = math.log(frame[0] / frame[1])
    fixed = [s for s in sizes if s not in ("auto", "frame")]
    if not fixed:
        return "auto"
    return min(fixed, key=lambda s: abs(math.log(int(s.split("x")[0]) / int(s.split("x")[1])) - want))


class ModelConfig(BaseModel):
    """One model or judge endpoint (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["openai", "infer-http", "reference", "checkpoint"]
    name: str = ""
    """How runs and verdicts name this model (default: the config file's stem)."""
    base_url: str = ""
    """The server's base URL (``…/v1`` for OpenAI-compatible servers; /infer is appended for infer-http)."""
    api_key_env: str | None = None
    """The environment variable that holds the API key (the key itself never goes in a file)."""
    chat_model: str | None = None
    """The model that answers (and, for a judge, grades); None: the model does not answer."""
    image_model: str | None = None
    """The model that generates and edits images; None: the model does not generate."""
    image_api: Literal["images", "chat"] = "images"
    """``images``: the images API (generations, edits); ``chat``: images returned inside chat replies."""
    agent: str | None = None
    """For ``kind: reference``: which reference agent."""
    path: str | None = None
    """For ``kind: checkpoint``: the checkpoint directory (`yanami train`), relative to the config file."""
    answers: bool = True
    """For ``kind: infer-http``: whether the server answers questions."""
    generates: bool = True
    """For ``kind: infer-http``: whether the server generates images."""
    layout: Literal["yes-first", "yes-front", "concatenate"] = "yes-first"
    temperature: float | None = Field(0.0, ge=0.0, le=2.0)
    """None: no temperature is sent (the server's default), as a benchmark's own code that sends
    none calls its judge (``--protocol-source``)."""
    seed: int | None = Field(None, ge=0, lt=2**63)
    """The seed every request of a run carries (the same for every item); None: none is sent."""
    max_tokens: int | None = Field(None, ge=1)
    """The most tokens a reply may have; None: what each request asks (512 for an answer, as the
    protocol says; more for a construction plan). Set, it is what every request gets, never less
    and never silently capped."""

    def tokens(self, asked: int | None) -> int | None:
        """The token limit a request that asks for ``asked`` gets (None: none is sent)."""
        return self.max_tokens if self.max_tokens is not None else asked

    timeout_s: float = Field(120.0, gt=0)
    """The most one request may take, from connecting to the reply's last byte (not a per-read
    timeout: a server that trickles a byte at a time is cut off here too); then it is retried."""
    max_image_bytes: int = Field(50_000_000, ge=1024)
    """The most bytes a reply that carries an image may take on the wire (base64 and JSON
    included); a larger one is cut off and recorded as an error. A text reply's cap comes from
    its token limit (`yanami.models._bounds.text_reply_cap`)."""
    max_concurrency: int = Field(8, ge=1)
    requests_per_minute: float = Field(600.0, gt=0)
    max_retries: int = Field(5, ge=0)
    backoff_s: float = Field(0.5, ge=0)
    """First retry delay; doubles each time (with full jitter), capped at 30 s."""
    structured_output: bool = False
    """Send a reply's JSON Schema as ``response_format`` (vLLM, SGLang and OpenAI take it)."""
    sizes: tuple[Annotated[str, StringConstraints(pattern=r"^(\d+x\d+|auto|frame)$")], ...] = IMAGES_API_SIZES
    """The image sizes the images API takes (``WxH``, ``auto``); a request asks for the one whose
    aspect is closest to the output frame's (`pick_size`), and the picture comes back at that
    size (a model keeps its native output; construction brings it to the frame). ``frame``: ask
    for the output frame itself (a server that takes any size). Default: OpenAI's published sizes."""
    prices: Prices | None = None
    """What calls cost, for the construction pipeline's ledger and ``--budget``."""

    def cost(self, tokens_in: int, tokens_out: int, images_out: int) -> float:
        """The price of one call (0 without a price table)."""
        p = self.prices
        if p is None:
            return 0.0
        return (
            tokens_in * p.input_per_million / 1e6 + tokens_out * p.output_per_million / 1e6 + images_out * p.per_image
        )

    def api_key(self) -> str:
        """The key from the named environment variable ('' when none is named)."""
        import os

        if not self.api_key_env:
            return ""
        key = os.environ.get(self.api_key_env)
        if key is None:
            raise UserError(f"{self.name}: the environment variable {self.api_key_env} (api_key_env) is not set")
        return key


def load_config(path: str | Path) -> ModelConfig:
    """Read a config file; a problem is one line naming the file, line and field."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{p}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise UserError(f"{p}: not a text file (a config file is UTF-8 YAML)") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise UserError(f"{p}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(raw, dict):
        raise UserError(f"{p}: a config file is a YAML mapping (kind: openai, base_url: …)")
    raw.setdefault("name", p.stem)
    try:
        config = ModelConfig.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(x) for x in first["loc"]) or "-"
        line = _line_of(text, str(first["loc"][0])) if first["loc"] else 0
        raise UserError(f"{p}:{line}: {field}: {first['msg']}") from None
    if config.kind == "checkpoint":
        if not config.path:
            raise UserError(f"{p}:{_line_of(text, 'kind')}: path: required for kind checkpoint")
        config = config.model_copy(update={"path": str((p.parent / Path(config.path).expanduser()).resolve())})
    elif config.kind != "reference" and not config.base_url:
        raise UserError(f"{p}:{_line_of(text, 'kind')}: base_url: required for kind {config.kind}")
    if config.base_url and urlsplit(config.base_url).scheme not in ("http", "https"):
        raise UserError(
            f"{p}:{_line_of(text, 'base_url')}: base_url: {config.base_url!r} needs its scheme "
            f"(http://{config.base_url.split('://')[-1]} or https://…)"
        )
    if config.kind == "reference" and not config.agent:
        raise UserError(f"{p}:{_line_of(text, 'kind')}: agent: required for kind reference")
    if config.kind == "openai" and not (config.chat_model or config.image_model):
        raise UserError(
            f"{p}:{_line_of(text, 'kind')}: chat_model, image_model: give at least one (a model that neither "
            "answers nor generates has nothing to evaluate)"
        )
    if config.kind == "infer-http" and not (config.answers or config.generates):
        raise UserError(f"{p}:{_line_of(text, 'answers')}: answers, generates: at least one must be true")
    return config


def _line_of(text: str, key: str) -> int:
    for k, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(f"{key}:"):
            return k
    return 0
