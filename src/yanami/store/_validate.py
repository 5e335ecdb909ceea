"""``yanami validate``: every problem in a dataset directory, as ``path:line: field: message``."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from yanami.contract import Dialogue, sha256_hex
from yanami.store._fast import fast_walk
from yanami.store._ids import SeenIds
from yanami.store._images import (
    DEFAULT_MAX_PIXELS,
    ImageProblem,
    image_info,
    image_relpath,
    read_image_file,
    scan_image_files,
)
from yanami.store._manifest import DIALOGUES_DIR, MANIFEST, SHARD_NAME, Manifest
from yanami.store._reader import open_dataset_dir, shard_problem
from yanami.store._walk import DialogueWalk
from yanami.store._writer import images_digest


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a dataset; line 0 means the whole file."""

    path: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.field}: {self.message}"


@dataclass(slots=True)
class _Ref:
    """Where an image is first referenced."""

    part: Any  # an ImagePart, or its fast-path mirror
    path: str
    line: int
    where: tuple[int, str, int]  # (turn, side, part index)


class _Digest(Protocol):
    """What `_read_lines` feeds: a hash (``hashlib``'s), or nothing (`_NoDigest`)."""

    def update(self, data: bytes, /) -> None: ...


def _image_field(where: tuple[int, str, int]) -> str:
    i, side, j = where
    return f"turns.{i}.{side}.parts.{j}.sha256"


def _read_lines(path: Path, digest: _Digest) -> Iterator[memoryview | bytes]:
    """The lines of a file without their newline, read in blocks that also feed ``digest``.

    Lines come as views into the block (no copy per line); use one before the next.
    """
    rest = b""
    with open(os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)), "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
            start = 0
            if rest:
                cut = block.find(b"\n")
                if cut < 0:
                    rest += block
                    continue
                yield rest + block[:cut]
                start = cut + 1
            view = memoryview(block)
            find = block.find
            while (end := find(b"\n", start)) >= 0:
                yield view[start:end]
                start = end + 1
            rest = block[start:]
    if rest:
        yield rest


def format_loc(loc: tuple[str | int, ...]) -> str:
    """A pydantic or dialogue location as a dotted field path (``turns.2.user.parts.0``)."""
    return ".".join(str(x) for x in loc) or "-"


def validate_dataset(
    path: str | Path,
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    on_dialogue: Callable[[], None] | None = None,
    on_image: Callable[[], None] | None = None,
) -> list[Problem]:
    """Check a dataset directory and return its problems (empty when it is valid).

    Raises UserError when ``path`` is not a dataset at all. Reads only inside ``path``
    and writes nothing. ``on_dialogue`` and ``on_image`` are called once per dialogue
    line and per image checked, for progress display.
    """
    root, raw, manifest_error = open_dataset_dir(path)
    problems: list[Problem] = []
    manifest_text = (root / MANIFEST).read_text(encoding="utf-8", errors="replace")
    manifest: Manifest | None = None

    def manifest_problem(loc: tuple[str | int, ...], msg: str) -> None:
        problems.append(Problem(MANIFEST, _json_key_line(manifest_text, loc), format_loc(loc), msg))

    if manifest_error is not None:
        at, _, rest = manifest_error.partition(": ")
        field, _, msg = rest.partition(": ")
        problems.append(Problem(MANIFEST, int(at), field, msg))
    else:
        try:
            manifest = Manifest.model_validate(raw)
        except ValidationError as exc:
            for err in exc.errors():
                manifest_problem(tuple(err["loc"]), err["msg"])

    # Dialogue shards: the files on disk, compared with the manifest's list.
    # Nothing is read through a symbolic link, and no listed path may leave the dataset.
    ddir = root / DIALOGUES_DIR
    shards = []
    linked: set[str] = set()
    if ddir.is_symlink():
        problems.append(Problem(DIALOGUES_DIR, 0, "-", "is a symbolic link; refusing to follow it"))
    elif ddir.is_dir():
        for p in sorted(ddir.iterdir(), key=lambda p: p.name):
            rel = f"{DIALOGUES_DIR}/{p.name}"
            if p.is_symlink():
                linked.add(rel)
                problems.append(Problem(rel, 0, "-", "shard is a symbolic link; refusing to follow it"))
            elif not p.is_file() or SHARD_NAME.fullmatch(p.name) is None:
                problems.append(Problem(rel, 0, "-", "unexpected file (shards are NAME.jsonl)"))
            else:
                shards.append(rel)
    if manifest is not None:
        for rel in manifest.shards:
            if rel not in shards and rel not in linked and not ddir.is_symlink():
                manifest_problem(("shards", rel), shard_problem(root, rel) or "shard file is missing")
        for rel in shards:
            if rel not in manifest.shards:
                problems.append(Problem(rel, 0, "-", f"shard is not listed in {MANIFEST}"))

    seen = SeenIds()
    suspects: list[_Suspect] = []
    refs: dict[str, _Ref] = {}
    n_dialogues = n_turns = n_questions = n_checks = 0
    for rel in shards:
        digest = hashlib.sha256()
        for lineno, line in enumerate(_read_lines(root / rel, digest), 1):
            if on_dialogue is not None:
                on_dialogue()
            walk = fast_walk(line) or _slow_walk(line, rel, lineno, problems)
            if walk is None:
                continue
            d = walk.dialogue
            if manifest is not None and d.family != manifest.family:
                msg = f"a {d.family} dialogue in a {manifest.family} dataset (the manifest's family)"
                problems.append(Problem(rel, lineno, "family", msg))
            if seen.add(hash(d.id)):  # maybe a duplicate: named, or dropped, once the shards are read
                suspects.append(_Suspect(len(problems), d.id, rel, lineno))
                problems.append(Problem(rel, lineno, "id", ""))
            for i, side, j, part in walk.images:
                first = refs.get(part.sha256)
                if first is None:
                    refs[part.sha256] = _Ref(part, rel, lineno, (i, side, j))
                elif (first.part.format, first.part.width, first.part.height) != (
                    part.format,
                    part.width,
                    part.height,
                ):
                    problems.append(
                        Problem(
                            rel,
                            lineno,
                            _image_field((i, side, j)),
                            f"image {part.sha256[:12]}… is declared differently at {first.path}:{first.line}",
                        )
                    )
            n_dialogues += 1
            n_turns += len(d.turns)
            n_questions += len(d.questions)
            n_checks += walk.n_checks
        if manifest is not None and rel in manifest.shards and manifest.shards[rel] != digest.hexdigest():
            manifest_problem(("shards", rel), f"checksum does not match the shard's bytes ({digest.hexdigest()[:12]}…)")

    del seen
    if suspects:
        _name_duplicates(root, shards, problems, suspects)
    problems.extend(_check_images(root, refs, max_pixels, on_image))
    files = _image_files(root, problems)
    for rel, sha in files.items():
        if sha not in refs:
            problems.append(Problem(rel, 0, "-", "image file is not referenced by any dialogue"))

    if manifest is not None:
        actual = {
            "dialogues": n_dialogues,
            "turns": n_turns,
            "images": len(files),
            "questions": n_questions,
            "checks": n_checks,
        }
        for key, value in actual.items():
            declared = getattr(manifest.counts, key)
            if declared != value:
                manifest_problem(("counts", key), f"manifest says {declared}, the data has {value}")
        if manifest.images_sha256 != images_digest(list(files.values())):
            manifest_problem(("images_sha256",), "checksum does not match the image files")
    return problems


@dataclass(frozen=True, slots=True)
class _Suspect:
    """A line whose dialogue id hashes like an earlier one's, and its placeholder problem."""

    at: int  # index of the placeholder in the problem list
    id: str
    path: str
    line: int


class _NoDigest:
    def update(self, data: bytes) -> None:
        pass


def _name_duplicates(root: Path, shards: list[str], problems: list[Problem], suspects: list[_Suspect]) -> None:
    """Replace each suspect's placeholder with its duplicate-id problem naming the id's first
    line, or drop it where the id was not seen before (a hash shared by two ids).

    Reads the shards again, in order, only until the first line of every suspect id is found.
    """
    wanted = {s.id for s in suspects}
    first_at: dict[str, tuple[str, int]] = {}
    for rel in shards:
        if len(first_at) == len(wanted):
            break
        for lineno, line in enumerate(_read_lines(root / rel, _NoDigest()), 1):
            walk = fast_walk(line) or _slow_walk(line, rel, lineno, [])
            if walk is not None and (did := walk.dialogue.id) in wanted and did not in first_at:
                first_at[did] = (rel, lineno)
                if len(first_at) == len(wanted):
                    break
    drop = set()
    for s in suspects:
        at = first_at.get(s.id)
        if at is None or at == (s.path, s.line):
            drop.add(s.at)
        else:
            msg = f"duplicate dialogue id {s.id!r} (first at {at[0]}:{at[1]})"
            problems[s.at] = Problem(s.path, s.line, "id", msg)
    if drop:
        problems[:] = [p for i, p in enumerate(problems) if i not in drop]


def _slow_walk(line: memoryview | bytes, rel: str, lineno: int, problems: list[Problem]) -> DialogueWalk | None:
    """Validate a line with pydantic (strict), the reference, and report what is wrong."""
    raw_line = bytes(line)
    if not raw_line.strip():
        problems.append(Problem(rel, lineno, "-", "empty line"))
        return None
    try:
        raw_line.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(Problem(rel, lineno, "-", f"not UTF-8 (byte {exc.start + 1} of the line)"))
        return None
    try:
        d = Dialogue.model_validate_json(raw_line, strict=True)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        if errors and errors[0]["type"] == "json_invalid":
            problems.append(Problem(rel, lineno, "-", f"malformed JSON: {errors[0]['ctx']['error']}"))
            return None
        for err in errors:
            problems.append(Problem(rel, lineno, format_loc(tuple(err["loc"])), _message(err)))
        return None
    walk = DialogueWalk(d)
    for loc, msg in walk.problems:
        problems.append(Problem(rel, lineno, format_loc(loc), msg))
    return walk


def _message(err: ErrorDetails) -> str:
    if err["type"] == "string_pattern_mismatch" and err["loc"] and err["loc"][-1] == "sha256":
        return "not a SHA-256 hex digest (64 lower-case hex characters)"
    if err["type"] == "string_pattern_mismatch":
        return "not a valid id (letters, digits, '.', '_' and '-', starting with a letter or digit)"
    return str(err["msg"])


def _check_images(
    root: Path, refs: dict[str, _Ref], max_pixels: int, on_image: Callable[[], None] | None
) -> Iterator[Problem]:
    for sha, ref in refs.items():
        if on_image is not None:
            on_image()
        rel = image_relpath(sha, ref.part.format)

        def problem(msg: str, ref: _Ref = ref) -> Problem:
            return Problem(ref.path, ref.line, _image_field(ref.where), msg)

        try:
            data = read_image_file(root, sha, ref.part.format)
        except ImageProblem as exc:
            yield problem(str(exc))
            continue
        if sha256_hex(data) != sha:
            yield problem(f"image file {rel}: its bytes do not match its hash")
            continue
        try:
            fmt, width, height = image_info(data, max_pixels)
        except ImageProblem as exc:
            yield problem(f"image file {rel}: {exc}")
            continue
        if fmt != ref.part.format:
            yield problem(f"image file {rel} is {fmt}, declared {ref.part.format}")
        if (width, height) != (ref.part.width, ref.part.height):
            yield problem(f"image file {rel} is {width}x{height}, declared {ref.part.width}x{ref.part.height}")


def _image_files(root: Path, problems: list[Problem]) -> dict[str, str]:
    """Every well-named file under ``images/`` (relative path -> hash); reports the rest."""
    good, bad = scan_image_files(root)
    for rel in bad:
        problems.append(Problem(rel, 0, "-", "unexpected file (images are images/xx/SHA256.png|jpeg|webp)"))
    return good


def _json_key_line(text: str, loc: tuple[str | int, ...]) -> int:
    """Best-effort line number of a key path in an indented JSON file (1 if not found)."""
    lines = text.splitlines()
    start = 0
    found = 1
    for key in loc:
        if isinstance(key, int):
            continue
        needle = json.dumps(str(key)) + ":"
        for i in range(start, len(lines)):
            if needle in lines[i]:
                found, start = i + 1, i + 1
                break
        else:
            return found
    return found
