"""Blind requests: nothing a model receives outside the conversation varies with the item.

A seed derived from the item id once let a model that read only that field answer every DSU
question of a public bench (a table of public ids inverts it; the answer letter is a public
function of the item). `blind_audit` proves, for a bench, that no such channel is left:

1. *the request*: every field of each item's `Request` but its messages (seed, output frame,
   token limit, temperature, schema) is the same for every item, except the frame, which must
   be the one the latest picture shown gives (`frame_of`); over every item of the bench, built
   as a GT-History run builds them;
2. *the pictures*: no picture the requests show carries metadata (PNG text, time or Exif
   chunks; JPEG application and comment segments; WebP EXIF or XMP chunks);
3. *the wire*: each adapter (OpenAI chat, the images API's generate and edit, images in chat
   replies, IMUG's /infer for text and for images) sends a sample of the requests to a
   capturing server on loopback, each twice and once more with only its ``item`` changed.
   Every header, JSON field and multipart part is classified: ``constant``; ``conversation``
   (the messages themselves) or ``follows the conversation`` (it differs between items but not
   when only the item id changes: with 1, a function of the conversation, like the body's
   length); ``random per send`` (it differs between two sends of one request, so it
   carries nothing of the item, e.g. a multipart boundary). A field that changes when only
   the item id does is ``per item``: the audit fails.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from yanami.contract import QUESTION_FRAME, Dialogue, InputImage, Layout, Request
from yanami.models import ModelConfig
from yanami.runner._items import Conversation, ImageBytes, Item, frame_of, items_of

WIRE_SAMPLE = 24
"""Items of the bench each adapter sends (each three times) in the wire part of the audit."""

CONVERSATION_FIELDS = frozenset(
    {"json messages", "json history", "json prompt", "multipart prompt", "multipart image[] data"}
)
"""Where each adapter carries the conversation itself (other fields that differ between items but
not with the item id alone follow from it: the body's length, the endpoint that a request with
or without pictures goes to)."""

_PNG_TEXT = {b"tEXt", b"zTXt", b"iTXt", b"tIME", b"eXIf"}
_WEBP_META = {b"EXIF", b"XMP "}


@dataclass
class WireField:
    """One field an adapter puts on the wire, over the items it sent."""

    adapter: str
    name: str
    """``path``, ``header NAME``, ``json KEY`` or ``multipart NAME [filename|type|data]``."""
    kind: str = "constant"
    """``constant``, ``conversation``, ``follows the conversation``, ``random per send`` or ``per
    item`` (a failure)."""
    values: set[str] = field(default_factory=set)

    @property
    def example(self) -> str:
        shown = min(self.values, key=len) if self.values else ""
        return shown if len(shown) <= 60 else shown[:57] + "..."


@dataclass
class BlindAudit:
    """What `blind_audit` found."""

    items: int = 0
    """Items whose requests were built (every item of the bench)."""
    request_fields: dict[str, list[str]] = field(default_factory=dict)
    """Each `Request` field but the messages -> its distinct values over the items."""
    request_problems: list[str] = field(default_factory=list)
    pictures: int = 0
    """Distinct pictures the requests show."""
    metadata: list[str] = field(default_factory=list)
    """Pictures that carry metadata: ``sha256: chunk``."""
    wire: list[WireField] = field(default_factory=list)
    sent: int = 0
    """Requests the capturing server received."""
    skipped: str | None = None
    """Why the wire part did not run (the ``api`` extra is missing), or None."""

    @property
    def failed(self) -> bool:
        return bool(self.request_problems or self.metadata or any(f.kind == "per item" for f in self.wire))

    def summary(self) -> dict[str, Any]:
        """The figures, as JSON."""
        return {
            "items": self.items,
            "request_fields": self.request_fields,
            "request_problems": self.request_problems,
            "pictures": self.pictures,
            "pictures_with_metadata": self.metadata,
            "wire_requests": self.sent,
            "wire_skipped": self.skipped,
            "wire_fields": [
                {"adapter": f.adapter, "field": f.name, "kind": f.kind, "distinct": len(f.values), "example": f.example}
                for f in self.wire
            ],
            "blind": not self.failed,
        }


def request_fields(r: Request) -> dict[str, str]:
    """A request's fields other than its messages and its item, as text."""
    return {
        "seed": repr(r.seed),
        "size": "x".join(map(str, r.size)),
        "max_tokens": repr(r.max_tokens),
        "temperature": repr(r.temperature),
        "json_schema": json.dumps(r.json_schema, sort_keys=True) if r.json_schema is not None else "None",
        "function": json.dumps(r.function, sort_keys=True) if r.function is not None else "None",
        "fresh": repr(r.fresh),
    }


def picture_metadata(data: bytes) -> list[str]:
    """The metadata chunks or segments a PNG, JPEG or WebP picture carries (empty: none)."""
    found: list[str] = []
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        at = 8
        while at + 8 <= len(data):
            length, kind = struct.unpack(">I4s", data[at : at + 8])
            if kind in _PNG_TEXT:
                found.append(kind.decode("latin-1"))
            if kind == b"IEND":
                break
            at += 12 + length
    elif data.startswith(b"\xff\xd8"):
        at = 2
        while at + 4 <= len(data) and data[at] == 0xFF:
            marker = data[at + 1]
            if marker in (0xD9, 0xDA):  # end of image, start of scan: no more headers
                break
            length = struct.unpack(">H", data[at + 2 : at + 4])[0]
            if 0xE1 <= marker <= 0xEF or marker == 0xFE:  # APP1-APP15 (Exif, XMP, ...), COM
                found.append(f"JPEG {'COM' if marker == 0xFE else f'APP{marker - 0xE0}'}")
            at += 2 + length
    elif data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        at = 12
        while at + 8 <= len(data):
            kind, length = data[at : at + 4], struct.unpack("<I", data[at + 4 : at + 8])[0]
            if kind in _WEBP_META:
                found.append(f"WebP {kind.decode('latin-1').strip()}")
            at += 8 + length + (length & 1)
    return found


def bench_requests(
    dialogues: Iterable[Dialogue], image_bytes: ImageBytes, seed: int | None = None
) -> Iterable[tuple[Item, Request]]:
    """Every item with its request, as a GT-History run in the yes-first layout builds it."""
    for d in dialogues:
        conversation = Conversation(d, Layout.YES_FIRST, image_bytes, seed=seed)
        for item in items_of(d):
            yield item, conversation.request(item)[0]


def check_requests(requests: Iterable[tuple[Item, Request]], audit: BlindAudit) -> list[tuple[Item, Request]]:
    """Parts 1 and 2 of `blind_audit` over ``requests``; a sample spread over them for part 3."""
    values: dict[str, set[str]] = {}
    seen: set[str] = set()
    kinds: dict[bool, list[tuple[Item, Request]]] = {True: [], False: []}
    for item, r in requests:
        audit.items += 1
        fields = request_fields(r)
        want = QUESTION_FRAME if item.kind == "question" else frame_of(r.messages)
        if r.size != want and len(audit.request_problems) < 10:
            audit.request_problems.append(
                f"{r.item}: the output frame {fields['size']} is not the one its conversation's latest picture"
                f" gives ({want[0]}x{want[1]})"
            )
        for k, v in fields.items():
            values.setdefault(k, set()).add(v)
        for im in r.images():
            if im.sha256 not in seen:
                seen.add(im.sha256)
                audit.metadata += [f"{im.sha256}: {m}" for m in picture_metadata(im.data)]
        bucket = kinds[item.kind == "turn"]
        if len(bucket) < WIRE_SAMPLE * 8:
            bucket.append((item, r))
    audit.pictures = len(seen)
    for k, vs in values.items():
        audit.request_fields[k] = sorted(vs)
        if k != "size" and len(vs) > 1:  # the frame follows the conversation (checked above), not the item
            shown = ", ".join(sorted(vs)[:3])
            audit.request_problems.append(f"request field {k} varies over the items ({len(vs)} values: {shown}...)")
    sample: list[tuple[Item, Request]] = []
    for bucket in kinds.values():  # half questions and replies, half target turns, spread over the bench
        step = max(1, len(bucket) // (WIRE_SAMPLE // 2))
        sample += bucket[::step][: WIRE_SAMPLE // 2]
    return sample


def _configs(url: str) -> list[tuple[str, ModelConfig, bool]]:
    """(adapter, config, draws) for every adapter, each pointed at the capturing server."""
    openai = {"kind": "openai", "base_url": url + "/v1", "max_retries": 0, "requests_per_minute": 1e9}
    infer = {"kind": "infer-http", "base_url": url, "max_retries": 0, "requests_per_minute": 1e9}
    return [
        ("openai chat", ModelConfig.model_validate({**openai, "chat_model": "m"}), False),
        ("openai images", ModelConfig.model_validate({**openai, "image_model": "im"}), True),
        ("openai chat images", ModelConfig.model_validate({**openai, "image_model": "im", "image_api": "chat"}), True),
        ("infer text", ModelConfig.model_validate({**infer, "generates": False}), False),
        ("infer image", ModelConfig.model_validate({**infer, "answers": False}), True),
    ]


def wire_fields(path: str, headers: Sequence[tuple[str, str]], body: bytes) -> dict[str, str]:
    """One captured request as named fields (see `WireField.name`)."""
    out = {"path": path}
    for k, v in headers:
        key = f"header {k.lower()}"
        out[key] = out[key] + ", " + v if key in out else v
    ctype = dict((k.lower(), v) for k, v in headers).get("content-type", "")
    if ctype.startswith("multipart/form-data"):
        boundary = ctype.split("boundary=", 1)[1].strip('"').encode()
        counts: dict[str, int] = {}
        for chunk in body.split(b"--" + boundary)[1:]:
            if chunk.startswith(b"--"):
                break
            head, _, data = chunk.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").strip().split("\r\n")
            disposition = next((h for h in lines if h.lower().startswith("content-disposition")), "")
            name = disposition.partition('name="')[2].partition('"')[0]
            n = counts[name] = counts.get(name, 0) + 1
            key = f"multipart {name}" + (f" #{n}" if n > 1 else "")
            if 'filename="' in disposition:
                out[f"{key} filename"] = disposition.partition('filename="')[2].partition('"')[0]
                out[f"{key} type"] = next((h.split(":", 1)[1].strip() for h in lines if h.lower().startswith(
                    "content-type")), "")  # fmt: skip
                out[f"{key} data"] = hashlib.sha256(data.removesuffix(b"\r\n")).hexdigest()
            else:
                out[key] = data.removesuffix(b"\r\n").decode("utf-8", "replace")
        return out
    try:
        parsed = json.loads(body or b"null")
    except ValueError:
        return {**out, "body": body.decode("utf-8", "replace")}
    if isinstance(parsed, dict):
        out.update({f"json {k}": json.dumps(v, sort_keys=True) for k, v in parsed.items()})
    else:
        out["body"] = json.dumps(parsed)
    return out


def _base(name: str) -> str:
    """A multipart field's name without its repeat number (``image[] #2 data`` -> ``image[] data``)."""
    parts = name.split(" ")
    return " ".join(p for p in parts if not p.startswith("#"))


def check_wire(sample: list[tuple[Item, Request]], audit: BlindAudit) -> None:
    """Part 3 of `blind_audit`: every adapter sends ``sample`` to a capturing server on loopback."""
    try:
        import openai  # noqa: F401  (the api extra: the OpenAI adapter's SDK)
    except ImportError:
        audit.skipped = "the OpenAI SDK is not installed (pip install 'yanami[api]'): the wire was not looked at"
        return
    from yanami.models import model_from_config
    from yanami.models.fake import FakeServer

    with FakeServer(capture=True) as server:
        for adapter, config, draws in _configs(server.url):
            model = model_from_config(config)
            call = model.generate if draws else model.answer
            assert call is not None
            requests = [r for item, r in sample if (item.kind == "turn") == draws]
            if adapter == "openai images":  # the generate endpoint: a request without a picture
                requests += [_without_pictures(r) for r in requests[:2]]
            sends: list[tuple[int, int, dict[str, str]]] = []  # (request, send, fields)
            for k, r in enumerate(requests):
                for send, what in enumerate((r, r, replace(r, item=f"{r.item}-x"))):
                    before = len(server.wire)
                    with contextlib.suppress(Exception):  # what was sent is the point, not the reply
                        call(what)
                    sends += [(k, send, wire_fields(*w)) for w in server.wire[before:]]
            audit.sent += len(sends)
            audit.wire += _classify(adapter, sends)


def _without_pictures(r: Request) -> Request:
    from yanami.contract import InputMessage

    return replace(r, messages=tuple(InputMessage(m.role, tuple(p for p in m.parts if not isinstance(p, InputImage)))
                                     for m in r.messages))  # fmt: skip


def _classify(adapter: str, sends: list[tuple[int, int, dict[str, str]]]) -> list[WireField]:
    names = sorted({n for _, _, f in sends for n in f})
    out = []
    by: dict[tuple[int, int], dict[str, str]] = {(k, s): f for k, s, f in sends}
    for name in names:
        wf = WireField(adapter, name, values={f.get(name, "(absent)") for _, _, f in sends})
        random = any(by.get((k, 0), {}).get(name) != by.get((k, 1), {}).get(name) for k, _, _ in sends)
        item = any(
            by.get((k, 0), {}).get(name) != by.get((k, 2), {}).get(name)
            and by.get((k, 0), {}).get(name) == by.get((k, 1), {}).get(name)
            for k, _, _ in sends
        )
        if item:
            wf.kind = "per item"
        elif random:
            wf.kind = "random per send"
        elif len(wf.values) > 1:
            # it differs between items, yet not when only the item id does: with the request's
            # other fields the same for every item (part 1), it follows the conversation
            wf.kind = "conversation" if _base(name) in CONVERSATION_FIELDS else "follows the conversation"
        out.append(wf)
    return out


def blind_audit(dialogues: Iterable[Dialogue], image_bytes: ImageBytes, wire: bool = True) -> BlindAudit:
    """Prove that nothing a model receives outside the conversation varies with the item (see the module)."""
    audit = BlindAudit()
    sample = check_requests(bench_requests(dialogues, image_bytes), audit)
    if wire and sample:
        check_wire(sample, audit)
    return audit


def _merged(names: list[str]) -> list[str]:
    """Field names with a multipart part's repeats folded (``image[] #2 data`` into ``image[] data``)."""
    return list(dict.fromkeys(_base(n) for n in names))


def blind_text(audit: BlindAudit) -> str:
    """The audit's part as ``yanami audit`` prints it."""
    fields = "; ".join(f"{k} {', '.join(v) if len(v) <= 2 else f'{len(v)} values'}"
                       for k, v in audit.request_fields.items())  # fmt: skip
    lines = [
        f"blind requests: {audit.items} requests built; fields besides the conversation: {fields}",
        f"  pictures shown: {audit.pictures}, with metadata: {len(audit.metadata)}",
    ]
    if audit.skipped:
        lines.append(f"  wire: {audit.skipped}")
    else:
        lines.append(f"  wire ({audit.sent} requests captured on loopback; each sent twice, and once with only"
                     " its item id changed):")  # fmt: skip
        by: dict[str, list[WireField]] = {}
        for f in audit.wire:
            by.setdefault(f.adapter, []).append(f)
        for adapter, fs in by.items():
            groups: dict[str, list[str]] = {}
            for f in fs:
                if f.kind == "constant" and f.name.startswith("header "):
                    continue  # the HTTP client's own (user agent, SDK version ...): in --json
                groups.setdefault(f.kind, []).append(f.name if f.kind != "constant" else f"{f.name}={f.example}")
            headers = sum(f.kind == "constant" and f.name.startswith("header ") for f in fs)
            shown = "; ".join(f"{kind}: {', '.join(_merged(ns))}" for kind, ns in groups.items())
            lines.append(f"    {adapter}: {shown}; {headers} constant headers")
    verdict = "none varies with the item" if not audit.failed else "FAILED: a field varies with the item"
    lines.append(f"  {verdict}")
    lines += [f"  {p}" for p in audit.request_problems]
    lines += [f"  picture with metadata {m}" for m in audit.metadata[:10]]
    lines += [f"  {f.adapter}: {f.name} varies per item" for f in audit.wire if f.kind == "per item"]
    return "\n".join(lines)
