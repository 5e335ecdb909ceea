"""``yanami import weave``: WEAVE's ``test.json`` and its ``imgs/`` as a yanami dataset.

WEAVE (public format: ``weichow23/weave``, ``infer/loader.py``) keeps one JSON array of
records ``{domain, idx, images[], chats[]}``; chats alternate user and assistant, each
``{role, type: text|image, content, key_point}``. ``Image #k`` names ``images[k-1]``. An
assistant image chat's content names the image it produces; its ``key_point`` object keys
each requirement by the image it compares with: ``GT #k`` (the dataset's image), ``Image #k``
(the model's own earlier output) or ``Text`` (none).

In yanami's form a turn is a user chat and the assistant chat after it. An image a user
chat mentions for the first time is attached to that user message, after the label
``Image #k:``, so what the text names is what the model sees; an assistant image carries
the same label. Key points become checks of kind ``key_point`` with their references; a text
reply becomes the turn's answer. The turn mode WEAVE derives from the number of image
mentions (t2i, edit, fusion; vqa for a text reply) is kept in ``hidden.intent``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from yanami import __version__, _json
from yanami.contract import Dialogue, ImageSource, read_regular
from yanami.families._import import (
    WORKERS,
    OnRecord,
    SourceImages,
    build_dialogue,
    dialogue_id,
    expect,
    fail,
    source_path,
    text_part,
    write_records,
)
from yanami.families.weave import FACTS, KEY_POINT, WEAVE_MODES
from yanami.store import Generator, Manifest

MENTION = re.compile(r"Image\s*#\s*(\d+)")
GT_MENTION = re.compile(r"GT\s*#\s*(\d+)")
SOURCE_FILE = "test.json"
MAX_DIGITS = 18
"""An image number of more digits than this (leading zeros aside) is beyond every record's images:
it is refused as such, never given to int() (which refuses a string of over 4,300 digits)."""


def weave_mode(user_text: str, answered: bool) -> str:
    """WEAVE's turn mode: vqa for a text reply, else by the number of ``Image #`` mentions."""
    return WEAVE_MODES[3 if answered else min(user_text.count("Image #"), 2)]


def source_file(src: Path) -> Path:
    """``test.json`` given the file, its folder, or the folder above it (``test/test.json``)."""
    for candidate in (src, src / SOURCE_FILE, src / "test" / SOURCE_FILE):
        if candidate.is_file():
            return candidate
    raise fail(str(src), "", f"no {SOURCE_FILE} here (give the file, or the folder that holds it and imgs/)")


def import_weave(
    src: str | Path,
    out: str | Path,
    *,
    overwrite: bool = False,
    link: bool = True,
    on_record: OnRecord | None = None,
    workers: int = WORKERS,
) -> Manifest:
    """Import WEAVE's records; any bad record stops the import and nothing is written."""
    file = source_file(Path(src))
    try:
        records = json.loads(read_regular(file))
    except json.JSONDecodeError as exc:
        raise fail(str(file), f"line {exc.lineno} column {exc.colno}", f"not JSON ({exc.msg})") from None
    except _json.ERRORS as exc:  # nested too deeply, a number too long to read
        raise fail(str(file), "", f"not a WEAVE file: {_json.problem(exc)}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(str(file), "", f"cannot be read ({exc})") from None
    if not isinstance(records, list):
        raise fail(str(file), "", "expected a JSON array of records")
    unshown = [u for n, r in enumerate(records) if (u := _unshown(r, n))]
    params = {"family": "weave", "source": file.name, "unshown": unshown}
    generator = Generator(name="import", version=__version__, params=params)

    def files(record: Any) -> list[object]:
        """Every image a record lists (one it never shows is read, then discarded)."""
        paths = record.get("images") if isinstance(record, dict) else None
        return paths if isinstance(paths, list) else []

    listed = [(f"{file}: record {n}", files(r), (n, r)) for n, r in enumerate(records)]
    return write_records(
        out,
        generator,
        file.parent,
        listed,
        lambda nr, at, images: _dialogue(nr[1], nr[0], at, images),
        overwrite=overwrite,
        link=link,
        workers=workers,
        on_record=on_record,
    )


def _unshown(record: Any, n: int) -> dict[str, Any] | None:
    """A record's listed pictures that no chat shows (``{record, idx, images: [path, ...]}``): not
    imported, since nothing refers to them; the import names them. None where all are shown."""
    if not isinstance(record, dict) or not isinstance(record.get("images"), list):
        return None
    chats = record.get("chats")
    shown: set[int] = set()
    for c in chats if isinstance(chats, list) else []:
        if isinstance(c, dict) and isinstance(c.get("content"), str):
            shown.update(_mentions(c["content"]))
    paths = record["images"]
    left = [str(p) for k, p in enumerate(paths, 1) if k not in shown]
    return {"record": n, "idx": record.get("idx"), "images": left} if left else None


def _number(digits: str) -> int | None:
    """The number ``digits`` (a regex's ``\\d+``) spell; None where it has over `MAX_DIGITS` digits."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= MAX_DIGITS else None


def _too_long(name: str, digits: str) -> str:
    return f"{name} #{digits[:12]}... is a number of {len(digits):,} digits, beyond every record's images"


def _mentions(text: str, at: str | None = None, field: str = "") -> list[int]:
    """The numbers ``k`` of a text's ``Image #k``, each once, in order. A number too long to be one
    (`MAX_DIGITS`) is the error of ``at``'s ``field``; left out where ``at`` is None."""
    found = []
    for digits in MENTION.findall(text):
        k = _number(digits)
        if k is not None:
            found.append(k)
        elif at is not None:
            raise fail(at, field, _too_long("Image", digits))
    return list(dict.fromkeys(found))


def _dialogue(record: Any, n: int, at: str, images: SourceImages) -> Dialogue:
    if not isinstance(record, dict):
        raise fail(at, "", "expected an object")
    idx = expect(record.get("idx"), int, at, "idx")
    at = f"{at} (idx {idx})"
    domain = expect(record.get("domain"), str, at, "domain")
    weave = FACTS
    if weave.class_of(domain) is None:
        raise fail(at, "domain", f"{domain!r} is not a WEAVE domain ({', '.join(weave.domains())})")
    paths = expect(record.get("images"), list, at, "images")
    for k, p in enumerate(paths):
        source_path(p, at, f"images[{k}]")  # every one, shown or not: the manifest lists those not shown
    chats = expect(record.get("chats"), list, at, "chats")
    if not chats:
        raise fail(at, "chats", "no chats")
    for j, c in enumerate(chats):
        expect(c, dict, at, f"chats[{j}]")
        role = "user" if j % 2 == 0 else "assistant"
        if c.get("role") != role:
            raise fail(
                at, f"chats[{j}].role", f"expected {role!r} (chats alternate user, assistant), got {c.get('role')!r}"
            )
        if c.get("type") not in ("text", "image") or (role == "user" and c.get("type") != "text"):
            allowed = "text" if role == "user" else "text or image"
            who = "a user" if role == "user" else "an assistant"
            raise fail(at, f"chats[{j}].type", f"unknown type {c.get('type')!r} for {who} chat ({allowed})")
        expect(c.get("content"), str, at, f"chats[{j}].content")
    if len(chats) % 2:
        raise fail(at, f"chats[{len(chats) - 1}]", "a user chat with no assistant reply (chats alternate)")

    def in_range(k: int, field: str) -> int:
        if not 1 <= k <= len(paths):
            raise fail(at, field, f"Image #{k} is beyond the record's {len(paths)} images")
        return k

    outputs: dict[int, int] = {}  # image number -> the turn whose reply it is
    for t in range(len(chats) // 2):
        a = chats[2 * t + 1]
        if a["type"] == "image":
            ks = _mentions(a["content"], at, f"chats[{2 * t + 1}].content")
            if len(ks) != 1:
                raise fail(at, f"chats[{2 * t + 1}].content", "an image reply names exactly one Image #k")
            k = in_range(ks[0], f"chats[{2 * t + 1}].content")
            if k in outputs:
                raise fail(at, f"chats[{2 * t + 1}].content", f"Image #{k} is already the reply of turn {outputs[k]}")
            outputs[k] = t

    placed: dict[int, tuple[int, str, int]] = {}  # image number -> (turn, side, position among images)
    turns: list[dict[str, Any]] = []
    for t in range(len(chats) // 2):
        u, a = chats[2 * t], chats[2 * t + 1]
        field = f"chats[{2 * t}].content"
        parts: list[dict[str, Any]] = []
        for k in _mentions(u["content"], at, field):
            in_range(k, field)
            if k in placed or outputs.get(k) == t:
                continue
            if k in outputs:
                raise fail(at, field, f"Image #{k} is the reply of a later turn ({outputs[k]})")
            placed[k] = (t, "user", len(parts) // 2)
            parts += [text_part(f"Image #{k}:"), images.part(paths[k - 1], ImageSource.USER, at, f"images[{k - 1}]")]
        user = {"role": "user", "parts": [*parts, text_part(u["content"])]}
        answer = None
        checks: list[dict[str, Any]] = []
        if a["type"] == "image":
            (k,) = [k for k, turn in outputs.items() if turn == t]
            placed[k] = (t, "assistant", 0)
            image = images.part(paths[k - 1], ImageSource.ASSISTANT, at, f"images[{k - 1}]")
            assistant = {"role": "assistant", "parts": [text_part(f"Image #{k}:"), image]}
            checks = _key_points(a.get("key_point"), t, at, f"chats[{2 * t + 1}].key_point", placed, outputs, in_range)
        else:
            assistant = {"role": "assistant", "parts": [text_part(a["content"])]}
            answer = {"text": a["content"]}
        mode = weave_mode(u["content"], answer is not None)
        turns.append(
            {
                "index": t,
                "user": user,
                "assistant": assistant,
                "capabilities": [],
                "checks": checks,
                "answer": answer,
                "references": [],
                "hidden": {"intent": {"mode": mode}},
            }
        )
    meta = {"generator": "import-weave", "version": __version__, "params": {"idx": idx, "record": n}}
    raw = {
        "id": dialogue_id("weave", idx),
        "family": "weave",
        "domain": domain,
        "capabilities": [],
        "turns": turns,
        "questions": [],
        "meta": meta,
    }
    return build_dialogue(raw, at)


def _key_points(
    key_point: Any,
    t: int,
    at: str,
    field: str,
    placed: dict[int, tuple[int, str, int]],
    outputs: dict[int, int],
    in_range: Any,
) -> list[dict[str, Any]]:
    if not isinstance(key_point, dict) or not key_point:
        raise fail(at, field, "an image reply needs its key points (an object of requirements)")
    checks = []
    for j, (key, text) in enumerate(key_point.items(), 1):
        where = f"{field}.{key if len(key) <= 40 else key[:40] + '...'}"  # (a key of 5,000 digits, say)
        expect(text, str, at, where)
        refs: list[dict[str, Any]] = []
        # As WEAVE's evaluator reads a key: "GT" anywhere makes it the dataset's image GT #k, else
        # "Image" the model's own Image #k (the first number of either), else no image at all.
        name = key.strip()
        numbers = GT_MENTION.findall(name) if "GT" in name else MENTION.findall(name) if "Image" in name else None
        if numbers is not None:
            if not numbers:
                raise fail(at, where, "a key that names GT or Image names it as GT #k or Image #k")
            k = _number(numbers[0])
            if k is None:
                raise fail(at, where, _too_long("GT" if "GT" in name else "Image", numbers[0]))
            k = in_range(k, where)
            if "GT" not in name and outputs.get(k, t) < t:  # the model's own earlier output
                refs.append({"turn": outputs[k], "side": "assistant", "image": 0, "of": "model"})
            elif k in placed:  # the dataset's image (for Image #k of a user's picture, the same)
                turn, side, pos = placed[k]
                refs.append({"turn": turn, "side": side, "image": pos, "of": "data"})
            else:
                raise fail(at, where, f"Image #{k} is not shown by turn {t}")
        checks.append({"id": f"t{t}-k{j}", "kind": KEY_POINT, "text": text, "references": refs})
    return checks
