"""``yanami import opening SRC --out DIR``: OpenING's records as dialogues, a pair of turns per step.

SRC is OpenING's ``OpenING-benchmark/`` folder (its ``test_data.jsonl`` and ``images/``) or the
JSON Lines file itself. A record ``{total_uid, meta_task_name, subtask_name, conversations:
[{input: [{text, image}]}, {output: [{text, image}]}]}`` asks for an answer of N steps, each a text
followed by a picture (every step of OpenING's reference output has both). It becomes a dialogue
of 2N turns: turn 2k asks for the text of step k+1 (turn 0 shows the record's input first, its
texts without OpenING's ``<BEGIN>`` and ``<image>`` marks, its pictures where they stand), turn
2k+1 for its picture. The reference output is each turn's assistant message. The last picture's
turn carries OpenING's seven criteria (kind ``criterion``, 0-10), graded on the whole answer; the
earlier pictures' turns one ``step`` check each, so that the model is asked for them.

A record whose pictures are not all under the source folder is left out and counted (a warning,
and ``generator.params.skipped`` in the manifest): the public repository holds the pictures of a
few records only, the full set is a separate download. The record's own texts, marks included,
stay in ``meta.params.input`` for the judge, which lays them out as OpenING's code does.
"""

from __future__ import annotations

import errno
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from yanami import __version__
from yanami.contract import Dialogue, ImagePart, ImageSource, UserError, path_problem, read_regular
from yanami.families.opening import CRITERIA, CRITERION, STEP
from yanami.store import DatasetWriter, Generator, ImageProblem, Manifest

SOURCE_FILE = "test_data.jsonl"
MAX_IMAGE_BYTES = 64 << 20
"""A picture file larger than this is refused before it is read."""
MAX_SOURCE_BYTES = 1 << 30
"""A source file larger than this is refused before it is read (OpenING's is 3 MB)."""
MAX_LINE_BYTES = 16 << 20
"""A record's line longer than this is refused (OpenING's longest is under 20 kB)."""
_UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

CRITERION_TEXT = {
    "Correctness": "The answer is right for the request: sound reasoning and facts in its text, plausible and "
    "faithful pictures.",
    "Image-Text Coherency": "Each picture shows what the text beside it says, and the text describes its picture.",
    "Multi-step Consistency": "Style and entities stay the same across the pictures, and each step's text follows "
    "on from the one before.",
    "Content Quality": "The pictures are clear and realistic; the text is well written.",
    "Human Preference Alignment": "Nothing undesirable in the text, and pictures that are pleasing to look at.",
    "Completeness": "Every step the request calls for is there, none left out.",
    "Content Richness": "The pictures vary where they should and the text is detailed without padding.",
}
"""Each criterion in yanami's own words (a check's text; yanami's own judge prompt lists them)."""
assert tuple(CRITERION_TEXT) == CRITERIA


def criterion_id(name: str) -> str:
    """A criterion's check id (``image-text-coherency``)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def clean(text: str) -> str:
    """A source text as the model is shown it: without OpenING's ``<BEGIN>`` and ``<image>`` marks."""
    return text.replace("<BEGIN>", "").replace("<image>", "").strip()


def ask_text(step: int, steps: int) -> str:
    """What the user says at the turn that asks for a step's text (after the input, for the first)."""
    if step == 1:
        plural = "s, each a text followed by a picture" if steps > 1 else ": a text followed by a picture"
        return f"Answer in {steps} step{plural}. Step 1 of {steps}: write its text."
    return f"Step {step} of {steps}: write its text."


def ask_picture(step: int, steps: int) -> str:
    """What the user says at the turn that asks for a step's picture."""
    return f"Step {step} of {steps}: draw its picture."


def import_opening(
    src: str | Path,
    out: str | Path,
    *,
    overwrite: bool = False,
    link: bool = True,
    on_record: Callable[[], None] | None = None,
) -> Manifest:
    """Import OpenING's records (see the module docstring); ``link`` has no effect (every picture
    is read and stored, as its bytes are needed to check it)."""
    src = Path(src)
    jsonl = src / SOURCE_FILE if src.is_dir() else src
    root = jsonl.parent
    if not jsonl.is_file():
        raise UserError(f"{jsonl}: not found (give OpenING's OpenING-benchmark/ folder or its {SOURCE_FILE})")
    skipped: list[str] = []
    generator = Generator(name="import", version=__version__, params={"family": "opening", "source": SOURCE_FILE})
    with DatasetWriter(out, split="bench", generator=generator, overwrite=overwrite) as w:
        seen: set[str] = set()
        written = 0
        for n, line in enumerate(_lines(jsonl), 1):
            if not line.strip():
                continue
            at = f"{jsonl}:{n}"
            record = _record(line, at)
            uid = record["total_uid"]
            if uid in seen:
                raise UserError(f"{at}: total_uid: {uid!r} is another record's too")
            seen.add(uid)
            pictures = _pictures(record, root, at)
            if pictures is None:
                skipped.append(uid)
                continue
            parts: dict[str, ImagePart] = {}
            for name, (data, source) in pictures.items():
                try:
                    parts[name] = w.add_image(data, source)
                except ImageProblem as exc:
                    raise UserError(f"{at}: {name[:120]}: {exc}") from None
            try:
                w.add_dialogue(_dialogue(record, parts, at))
            except ValueError as exc:  # (not one the checks above let through, but never a traceback)
                raise UserError(f"{at}: {exc}") from None
            written += 1
            if on_record is not None:
                on_record()
        if not written:
            raise UserError(
                f"{jsonl}: none of its {len(skipped)} record(s) has all its pictures under {root}/images "
                "(the repository holds few of them: download OpenING's full benchmark)"
            )
        params = w.generator.params
        params["skipped"] = {"records": len(skipped), "first": skipped[:10]}
        if skipped:
            params["warnings"] = [
                f"{len(skipped)} record(s) left out: some of their pictures are not under {root} "
                f"(first: {', '.join(skipped[:3])}); the manifest's generator.params.skipped counts them"
            ]
        return w.commit()


def _lines(path: Path) -> list[str]:
    try:
        data = read_regular(path, MAX_SOURCE_BYTES)
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return text.split("\n")


def _fail(at: str, field: str, msg: str) -> UserError:
    return UserError(f"{at}: {field}: {msg}")


def _text(value: object, at: str, field: str) -> str:
    if not isinstance(value, str):
        raise _fail(at, field, f"expected text, found {type(value).__name__}")
    problem = path_problem(value.replace("\0", " "))  # a lone surrogate is no text; a NUL is, but in no path
    if problem is not None:
        raise _fail(at, field, problem)
    return value


def _steps(value: object, at: str, field: str, *, pictures: bool) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise _fail(at, field, "expected a non-empty list of steps")
    steps = []
    for i, step in enumerate(value):
        where = f"{field}[{i}]"
        if not isinstance(step, dict):
            raise _fail(at, where, f"expected an object, found {type(step).__name__}")
        text = _text(step.get("text"), at, f"{where}.text")
        image = step.get("image") or None  # "" names no picture, as OpenING's code reads it
        if image is None and pictures:
            raise _fail(at, f"{where}.image", "every step of OpenING's reference output has a picture")
        if image is not None:
            image = _text(image, at, f"{where}.image")
            if (problem := path_problem(image)) is not None:
                raise _fail(at, f"{where}.image", problem)
        steps.append({"text": text, "image": image})
    return steps


def _record(line: str, at: str) -> dict[str, Any]:
    if len(line) > MAX_LINE_BYTES:
        raise UserError(f"{at}: a line of {len(line)} characters is over the limit of {MAX_LINE_BYTES}")
    try:
        raw = json.loads(line)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise UserError(f"{at}: not a JSON record ({getattr(exc, 'msg', 'nested too deeply')})") from None
    if not isinstance(raw, dict):
        raise UserError(f"{at}: not a JSON object")
    record: dict[str, Any] = {}
    for field in ("total_uid", "meta_task_name", "subtask_name"):
        value = raw.get(field)
        record[field] = _text(value, at, field).strip() if value is not None else None
        if not record[field]:
            raise _fail(at, field, "missing")
    if not _UID.fullmatch(record["total_uid"]):
        raise _fail(at, "total_uid", f"{record['total_uid'][:40]!r} is not a plain name (letters, digits, . _ -)")
    for field in ("meta_task_id", "subtask_id", "data_id"):
        value = raw.get(field)
        record[field] = value if isinstance(value, str | int) and not isinstance(value, bool) else None
    talk = raw.get("conversations")
    if not isinstance(talk, list) or len(talk) != 2 or not all(isinstance(c, dict) for c in talk):
        raise _fail(at, "conversations", "expected [{input: [...]}, {output: [...]}]")
    record["input"] = _steps(talk[0].get("input"), at, "conversations[0].input", pictures=False)
    record["output"] = _steps(talk[1].get("output"), at, "conversations[1].output", pictures=True)
    return record


def _pictures(record: dict[str, Any], root: Path, at: str) -> dict[str, tuple[bytes, ImageSource]] | None:
    """Every picture the record names (its path -> bytes, who shows it); None where one is missing."""
    out: dict[str, tuple[bytes, ImageSource]] = {}
    for side, source in (("input", ImageSource.USER), ("output", ImageSource.ASSISTANT)):
        for i, step in enumerate(record[side]):
            name = step["image"]
            if name is None or name in out:
                continue
            field = f"conversations[{0 if side == 'input' else 1}].{side}[{i}].image"
            path = _inside(root, name, at, field)
            try:
                data = read_regular(path, MAX_IMAGE_BYTES)
            except FileNotFoundError:
                return None
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                    return None
                raise _fail(at, field, f"{path}: cannot be read ({exc.strerror or exc})") from None
            out[name] = (data, source)
    return out


def _inside(root: Path, name: str, at: str, field: str) -> Path:
    """The file a record names, which must lie inside the source folder."""
    rel = Path(name)
    if rel.is_absolute() or ".." in rel.parts or not name.strip():
        raise _fail(at, field, f"{name[:80]!r}: a picture's path must stay inside {root}")
    path = root / rel
    try:
        inside = path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError, ValueError) as exc:
        raise _fail(at, field, f"{name[:80]!r}: {exc}") from None
    if not inside:
        raise _fail(at, field, f"{name[:80]!r}: leads outside {root} (a link)")
    return path


def _dialogue(record: dict[str, Any], parts: dict[str, ImagePart], at: str) -> Dialogue:
    steps = record["output"]
    n = len(steps)
    first: list[dict[str, Any]] = []
    for step in record["input"]:
        if text := clean(step["text"]):
            first.append({"type": "text", "text": text})
        if step["image"] is not None:
            first.append(parts[step["image"]].model_dump(mode="json"))
    turns: list[dict[str, Any]] = []
    for k, step in enumerate(steps, 1):
        said = [{"type": "text", "text": ask_text(k, n)}]
        text = clean(step["text"]) or "(no text)"
        turns.append({
            "index": len(turns),
            "user": {"role": "user", "parts": (first if k == 1 else []) + said},
            "assistant": {"role": "assistant", "parts": [{"type": "text", "text": text}]},
            "answer": {"text": text},
        })  # fmt: skip
        if k == n:
            checks = [{"id": criterion_id(c), "kind": CRITERION, "text": CRITERION_TEXT[c]} for c in CRITERIA]
        else:
            checks = [{"id": f"picture-{k}", "kind": STEP, "text": f"The picture of step {k} (graded with the whole "
                       f"answer after step {n})."}]  # fmt: skip
        turns.append({
            "index": len(turns),
            "user": {"role": "user", "parts": [{"type": "text", "text": ask_picture(k, n)}]},
            "assistant": {"role": "assistant", "parts": [parts[step["image"]].model_dump(mode="json")]},
            "checks": checks,
        })  # fmt: skip
    params = {
        key: record[key]
        for key in ("total_uid", "meta_task_id", "meta_task_name", "subtask_id", "subtask_name", "data_id")
        if record[key] is not None
    }
    params["class"] = record["meta_task_name"]
    params["input"] = [{"text": s["text"], "image": s["image"] is not None} for s in record["input"]]
    try:
        return Dialogue.model_validate({
            "id": f"opening-{record['total_uid']}",
            "family": "opening",
            "domain": record["subtask_name"],
            "turns": turns,
            "meta": {"generator": "import-opening", "params": params},
        })  # fmt: skip
    except ValidationError as exc:
        err = exc.errors()[0]
        raise _fail(at, ".".join(map(str, err["loc"])), err["msg"]) from None
