"""Reading dataset directories: dialogues streamed shard by shard, images opened lazily."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from PIL import Image
from pydantic import ValidationError

from yanami.contract import Dialogue, ImagePart, UserError, open_regular, sha256_hex
from yanami.store._fast import fast_walk
from yanami.store._images import (
    DEFAULT_MAX_PIXELS,
    ImageFileError,
    ImageProblem,
    image_relpath,
    open_image_bytes,
    read_image_file,
)
from yanami.store._manifest import DIALOGUES_DIR, FORMAT_NAME, MANIFEST, SHARD_NAME, Manifest


def open_dataset_dir(path: str | Path) -> tuple[Path, dict[str, object] | None, str | None]:
    """Check that ``path`` is a dataset directory and read its manifest's JSON.

    Returns the path, the manifest's JSON object (None when it does not parse) and the
    parse error. Raises UserError (exit 2) for a path that is no dataset at all: missing,
    not a directory, no manifest, or a manifest of another format.
    """
    root = Path(path)
    if not root.exists():
        raise UserError(f"{root}: no such directory")
    if not root.is_dir():
        raise UserError(f"{root}: not a directory (a yanami dataset is a directory with a {MANIFEST})")
    mpath = root / MANIFEST
    if not mpath.is_file():
        hint = ""
        if any(p.suffix == ".parquet" for p in root.iterdir()):
            hint = f"; it holds a Parquet export: import it first (yanami import {root} --out DIR)"
        raise UserError(f"{root}: not a yanami dataset (no {MANIFEST}){hint}")
    text = mpath.read_text(encoding="utf-8", errors="replace")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        if FORMAT_NAME not in text:
            raise UserError(f"{mpath}: not a yanami dataset manifest ({exc.msg})") from None
        return root, None, f"{exc.lineno}: -: invalid JSON: {exc.msg}"
    if not isinstance(raw, dict) or raw.get("format") != FORMAT_NAME:
        raise UserError(f"{mpath}: not a yanami dataset manifest (format is not {FORMAT_NAME!r})")
    return root, raw, None


class Location(NamedTuple):
    """Where a dialogue is in a dataset: its shard, the byte offset and number of its line."""

    shard: str
    """The shard's path relative to the dataset (``dialogues/00000.jsonl``)."""
    offset: int
    line: int
    """1-based."""


class Scanned(NamedTuple):
    """A dialogue as `Dataset.scanned` read it: checked, but not yet made a `Dialogue`."""

    where: Location
    line: bytes
    """The line as the shard holds it."""
    fields: Any
    """The fast decoder's object (`yanami.store._fast`), which mirrors ``Dialogue`` field by field:
    read its fields, not the model's properties (`group_of` gives its group), and a free-form JSON
    field through `json_object`; the `Dialogue` itself where the fast path left the line to pydantic."""


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while many objects without cycles are made and kept
    (dialogues read into memory): its runs over the growing heap would cost more than the reading.

    At the end, what was made goes straight to the oldest generation (`gc.freeze` then
    `gc.unfreeze`: no collection runs). Only re-enabled, the collector would walk every new
    object at the next allocation, then again a little later from the middle generation:
    for a 400-dialogue bench, 0.3 s spent finding nothing (more than the reading), in the
    middle of a run's first requests. A cycle made meanwhile is still collected, by the next
    full collection.
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.freeze()  # every tracked object to the permanent generation, the young ones' count reset ...
            gc.unfreeze()  # ... and from there to the oldest generation, where full collections still look
            gc.enable()


class Dataset:
    """A dataset directory opened for reading.

    Iterating yields dialogues one at a time, shard by shard, so memory does not grow
    with the dataset. Images are read only when asked for, and resolved only inside
    ``images/`` from their hash. Everything read is checked against what the manifest
    (whose SHA-256 is the bench identity) vouches for: each shard's bytes against its
    checksum, each image's bytes against its name, so a changed dataset is refused
    instead of passing under its old identity.
    """

    def __init__(self, path: str | Path, *, max_pixels: int = DEFAULT_MAX_PIXELS) -> None:
        self.root, raw, error = open_dataset_dir(path)
        if raw is None:
            raise UserError(f"{self.root / MANIFEST}:{error}")
        try:
            self.manifest = Manifest.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(map(str, first["loc"])) or "-"
            raise UserError(f"{self.root / MANIFEST}: {loc}: {first['msg']} (run `yanami validate`)") from None
        self.max_pixels = max_pixels
        self._verified: dict[str, tuple[int, int, int]] = {}
        """Shards whose checksum this object checked, with their (inode, size, mtime) then."""
        self.shard_paths()  # a missing, linked or escaping shard is refused now, not half-way through

    def __len__(self) -> int:
        return self.manifest.counts.dialogues

    def shard_paths(self) -> list[Path]:
        """The dialogue shards, in order.

        Raises UserError for a shard the manifest lists that is missing, is a symbolic link
        or lies outside ``dialogues/`` (``../x.jsonl``, an absolute path).
        """
        paths = []
        for rel in self.manifest.shards:
            problem = shard_problem(self.root, rel)
            if problem is not None:
                raise UserError(f"{self.root}: {MANIFEST}: shards: {rel}: {problem} (run `yanami validate`)")
            paths.append(self.root / rel)
        return paths

    def __iter__(self) -> Iterator[Dialogue]:
        for _, _, _, dialogue in self.records():
            yield dialogue

    def read_all(self) -> list[Dialogue]:
        """Every dialogue, in memory (for a bench: a few hundred to a few thousand).

        The cyclic garbage collector is paused while they are read: dialogues hold no cycles,
        and a collector run over the growing list on every few thousand new objects would
        more than double the time.
        """
        with collector_paused():
            return list(self)

    def records(self) -> Iterator[tuple[str, int, str, Dialogue]]:
        """Each dialogue with where it is: (shard path relative to the dataset, line, line text, dialogue).

        The line text is exactly what the shard holds, without its newline.
        """
        for where, line, dialogue in self._lines():
            yield where.shard, where.line, line, dialogue

    def located(self) -> Iterator[tuple[Location, Dialogue]]:
        """Each dialogue with its `Location`, from which `read_at` reads it again alone."""
        for where, _, dialogue in self._lines():
            yield where, dialogue

    def scanned(self) -> Iterator[Scanned]:
        """Each dialogue as `located` gives it, refused where it refuses one (the same one-line
        `UserError`), but several times faster (100 dialogues of 25 KB: 6 ms, not 70): the fast
        decoder checks the line, and `dialogue` makes the `Dialogue` when it is needed."""
        for where, raw in self._raw_lines():
            walk = fast_walk(raw)
            if walk is None:  # pydantic, the reference, says what is wrong (or makes the Dialogue)
                yield Scanned(where, raw, self._dialogue(self.root / where.shard, where.line, raw)[1])
            else:
                yield Scanned(where, raw, walk.dialogue)

    def fields(self) -> Iterator[Any]:
        """Each dialogue's fields (`Scanned.fields`), in order: for reading many dialogues' fields
        without paying for their `Dialogue` objects."""
        for scanned in self.scanned():
            yield scanned.fields

    def dialogue(self, scanned: Scanned) -> Dialogue:
        """The `Dialogue` of a line `scanned` read (which the fast decoder passed: pydantic takes it)."""
        if isinstance(scanned.fields, Dialogue):
            return scanned.fields
        where = scanned.where
        return self._dialogue(self.root / where.shard, where.line, scanned.line)[1]

    def read_at(self, where: Location) -> Dialogue:
        """The dialogue at a `Location` that `located` gave, read alone (one line, not its shard).

        The shard's checksum was checked when `located` read it; it must not have changed since
        (same size and modification time), or this is a one-line `UserError`.
        """
        seen = self._verified.get(where.shard)
        path = self.root / where.shard
        with _open_shard(self.root, where.shard) as f:
            if seen is None or _identity(f) != seen:
                raise UserError(
                    f"{path}: changed while it was being read (the dataset changed after it was written; "
                    "run `yanami validate`)"
                )
            f.seek(where.offset)
            return self._dialogue(path, where.line, f.readline())[1]

    def _lines(self) -> Iterator[tuple[Location, str, Dialogue]]:
        for where, raw in self._raw_lines():
            line, dialogue = self._dialogue(self.root / where.shard, where.line, raw)
            yield where, line, dialogue

    def _raw_lines(self) -> Iterator[tuple[Location, bytes]]:
        """Each line that is not blank, with where it is, every shard checked against its checksum first."""
        for shard in self.shard_paths():
            rel = shard.relative_to(self.root).as_posix()
            with _open_shard(self.root, rel) as f:
                digest = hashlib.sha256()
                while block := f.read(1 << 20):
                    digest.update(block)
                if digest.hexdigest() != self.manifest.shards[rel]:
                    raise UserError(
                        f"{shard}: its bytes do not match its checksum in {MANIFEST} "
                        "(the dataset changed after it was written; run `yanami validate`)"
                    )
                self._verified[rel] = _identity(f)
                f.seek(0)
                offset = 0
                for lineno, raw in enumerate(f, 1):
                    start, offset = offset, offset + len(raw)
                    if raw.strip():
                        yield Location(rel, start, lineno), raw

    @staticmethod
    def _dialogue(shard: Path, lineno: int, raw: bytes) -> tuple[str, Dialogue]:
        try:
            line = raw.decode("utf-8").removesuffix("\n")
        except UnicodeDecodeError as exc:
            raise UserError(
                f"{shard}:{lineno}: not UTF-8 (byte {exc.start + 1} of the line; run `yanami validate`)"
            ) from None
        try:
            return line, Dialogue.model_validate_json(line)
        except ValidationError as exc:
            raise UserError(
                f"{shard}:{lineno}: invalid dialogue ({exc.error_count()} problems; run `yanami validate`)"
            ) from None

    def image_path(self, part: ImagePart) -> Path:
        """Where the file of an image part lives (inside ``images/`` by construction)."""
        return self.root / image_relpath(part.sha256, part.format)

    def image_bytes(self, part: ImagePart) -> bytes:
        """The bytes of an image part's file, checked before they are returned.

        The file is read without following symbolic links, its bytes must hash to its name
        (so the manifest, which lists the names, vouches for the content) and its header
        must be a PNG, JPEG or WebP image within the pixel limit (read without decoding a
        pixel). Raises ImageFileError (a one-line UserError naming the dataset and the file)
        otherwise.
        """
        return self._checked(part)[0]

    def open_image(self, part: ImagePart) -> Image.Image:
        """Open an image lazily (header read, pixels decoded on first use), checked as by `image_bytes`."""
        return self._checked(part)[1]

    def _checked(self, part: ImagePart) -> tuple[bytes, Image.Image]:
        rel = image_relpath(part.sha256, part.format)
        try:
            data = read_image_file(self.root, part.sha256, part.format)
        except ImageProblem as exc:
            raise ImageFileError(f"{self.root}: {exc} (run `yanami validate`)") from None
        if sha256_hex(data) != part.sha256:
            raise ImageFileError(
                f"{self.root}: image file {rel}: its bytes do not match its name (the image changed "
                "after the dataset was written; run `yanami validate`)"
            )
        try:
            img = open_image_bytes(data, self.max_pixels)
        except ImageProblem as exc:
            raise ImageFileError(f"{self.root}: image file {rel}: {exc}") from None
        return data, img


def shard_problem(root: Path, rel: str) -> str | None:
    """What is wrong with a shard path listed in a manifest, or None when it can be read.

    A shard must be ``dialogues/NAME.jsonl`` (so no listed path leaves the dataset), a
    regular file, and reached through no symbolic link.
    """
    folder, _, name = rel.partition("/")
    if folder != DIALOGUES_DIR or SHARD_NAME.fullmatch(name) is None:
        return f"not a shard path inside the dataset (shards are {DIALOGUES_DIR}/NAME.jsonl); refusing it"
    if (root / DIALOGUES_DIR).is_symlink():
        return f"{DIALOGUES_DIR}/ is a symbolic link; refusing to follow it"
    path = root / rel
    if path.is_symlink():
        return "shard is a symbolic link; refusing to follow it"
    if not path.exists():
        return "shard file is missing"
    if not path.is_file():
        return "shard is not a file"
    return None


def _open_shard(root: Path, rel: str) -> BinaryIO:
    """Open a shard for reading in binary, refusing a symbolic link put in place since the check."""
    try:
        fd = open_regular(root / rel, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))  # never a FIFO's hang
    except OSError as exc:
        raise UserError(f"{root / rel}: cannot be read ({exc.strerror}; run `yanami validate`)") from None
    return open(fd, "rb")


def _identity(f: BinaryIO) -> tuple[int, int, int]:
    st = os.fstat(f.fileno())
    return st.st_ino, st.st_size, st.st_mtime_ns
