"""Writing dataset directories atomically: all of the new dataset appears, or none of it."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import json
import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from yanami._lock import OutputLock, work_prefix
from yanami.contract import (
    DEFAULT_FAMILY,
    Dialogue,
    ImagePart,
    ImageSource,
    UserError,
    atomic_write,
    family_of,
    sha256_hex,
)
from yanami.store._ids import SeenIds
from yanami.store._images import DEFAULT_MAX_PIXELS, image_info, image_relpath, sha256_file
from yanami.store._manifest import (
    DIALOGUES_DIR,
    FORMAT_NAME,
    IMAGES_DIR,
    MANIFEST,
    SHARD_NAME,
    SHARD_SIZE,
    Counts,
    Generator,
    Manifest,
)
from yanami.store._walk import dialogue_problems


def images_digest(hashes: list[str]) -> str:
    """Checksum of a set of images: SHA-256 of their sorted hashes, one per line."""
    return sha256_hex("".join(h + "\n" for h in sorted(hashes)).encode())


def is_dataset_dir(path: Path) -> bool:
    """Whether ``path`` holds a manifest that names the yanami dataset format."""
    try:
        return FORMAT_NAME in (path / MANIFEST).read_text(encoding="utf-8")[:4096]
    except OSError:
        return False


class DatasetWriter:
    """Write a dataset directory; it appears at ``path`` only when `commit` succeeds.

    Everything goes to a hidden sibling directory first, which `commit` renames into
    place (swapping atomically with an older dataset when ``overwrite`` is set). Used
    as a context manager, it commits on success and removes its work on any exception,
    Ctrl-C included, so an interrupted write leaves the old state untouched.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        split: str,
        generator: Generator,
        overwrite: bool = False,
        shard_size: int = SHARD_SIZE,
        max_pixels: int = DEFAULT_MAX_PIXELS,
        shard_layout: Sequence[tuple[str, int]] | None = None,
        keep_manifest: str | None = None,
    ) -> None:
        """``shard_layout`` lists the shards to fill, in order, and how many dialogues each
        holds (instead of numbered shards of ``shard_size``); ``keep_manifest`` is the text of
        a manifest to write verbatim if it describes exactly what was written (both for
        `import_parquet`, which rebuilds a dataset byte for byte)."""
        self.path = Path(path)
        self.overwrite = overwrite
        _check_target(self.path, overwrite)
        self.split = split
        self.generator = generator
        self.shard_size = shard_size
        self.max_pixels = max_pixels
        parent = self.path.absolute().parent
        if not parent.is_dir():
            raise UserError(f"{parent}: no such directory (yanami creates --out, not the folders above it)")
        self._lock = OutputLock(self.path)  # one writer per --out; what a killed one left is removed
        try:
            self.work = parent / f"{work_prefix(self.path)}{os.getpid()}-{uuid.uuid4().hex[:8]}"
            self.work.mkdir()
        except BaseException:
            self._lock.release()
            raise
        (self.work / DIALOGUES_DIR).mkdir()
        (self.work / IMAGES_DIR).mkdir()
        self._ids = SeenIds()  # 8 bytes an id; a hit is confirmed against what was written
        self._dialogues = 0
        self._image_hashes: list[str] = []
        self._stored: set[str] = set()
        self._folders: set[str] = set()
        self._shards: list[str] = []
        self._shard_file: BinaryIO | None = None
        self._in_shard = 0
        self._capacity = shard_size
        self._layout = list(shard_layout) if shard_layout is not None else None
        for rel, _ in self._layout or []:
            folder, _, name = rel.partition("/")
            if folder != DIALOGUES_DIR or SHARD_NAME.fullmatch(name) is None:
                raise ValueError(f"not a shard path: {rel!r} (shards are {DIALOGUES_DIR}/NAME.jsonl)")
        self.keep_manifest = keep_manifest
        self.floors: dict[str, dict[str, tuple[float, int]]] | None = None
        """The bench's trivial floors, for the manifest (`Manifest.floors`): set before `commit`."""
        self._turns = self._questions = self._checks = 0
        self._family: str | None = None
        self._done = False

    # images ---------------------------------------------------------------------------

    def add_image(self, data: bytes, source: ImageSource) -> ImagePart:
        """Store image bytes (deduplicated by hash) and return a part referencing them.

        The bytes are decoded once to learn their format and size; a corrupt image or
        one over the pixel limit raises ImageProblem.
        """
        fmt, width, height = image_info(data, self.max_pixels)
        sha = sha256_hex(data)
        self._put(sha, image_relpath(sha, fmt), data)
        return ImagePart(sha256=sha, format=fmt, width=width, height=height, source=source)

    def image_target(self, sha: str, fmt: str) -> str:
        """Where the image file of this hash and format goes in the dataset being written (its
        folder may not exist yet): for a caller that places files itself, then calls `adopt`."""
        return f"{self.work}/{image_relpath(sha, fmt)}"

    def adopt(self, sha: str) -> None:
        """Count an image file the caller placed at its `image_target` (idempotent)."""
        if sha not in self._stored:
            self._stored.add(sha)
            self._image_hashes.append(sha)

    def discard(self, sha: str, fmt: str) -> None:
        """Remove an image file placed at its `image_target` and never adopted (a caller's worker
        that read ahead for a picture no dialogue shows); an adopted one stays."""
        if sha not in self._stored:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.image_target(sha, fmt))

    def add_encoded(self, part: ImagePart, data: bytes) -> None:
        """Store bytes the caller encoded and hashed itself, described by ``part``.

        Nothing is decoded or hashed again: the caller vouches for the part (a renderer
        that just produced the bytes and took their SHA-256, say), which keeps a build
        to one hash per image. `yanami validate` checks everything afterwards.
        """
        self._put(part.sha256, image_relpath(part.sha256, part.format), data)

    def _put(self, sha: str, rel: str, data: bytes) -> None:
        if sha in self._stored:
            return
        dest = f"{self.work}/{rel}"
        folder = rel.rsplit("/", 1)[0]
        if folder not in self._folders:
            os.makedirs(f"{self.work}/{folder}", exist_ok=True)
            self._folders.add(folder)
        # No temporary name per file: the whole work directory is what commits atomically.
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        self._stored.add(sha)
        self._image_hashes.append(sha)

    # dialogues ------------------------------------------------------------------------

    def add_dialogue(self, dialogue: Dialogue, *, line: str | None = None) -> None:
        """Append a dialogue; its images must have been added first.

        ``line`` is the JSON text to store for it (without a newline) where the caller has
        it already, validated into ``dialogue``; by default the dialogue's own JSON.
        Raises ValueError if the dialogue is inconsistent, repeats an id or references
        an image that was not added.
        """
        problems = dialogue_problems(dialogue)
        if problems:
            loc, msg = problems[0]
            raise ValueError(f"dialogue {dialogue.id}: {'.'.join(map(str, loc))}: {msg}")
        if self._ids.add(hash(dialogue.id)) and self._written(dialogue.id):
            raise ValueError(f"duplicate dialogue id {dialogue.id!r}")
        if self._family is None:
            self._family = dialogue.family
        elif dialogue.family != self._family:
            raise ValueError(f"dialogue {dialogue.id}: a {dialogue.family} dialogue in a {self._family} dataset")
        for part in dialogue.images():
            if part.sha256 not in self._stored:
                raise ValueError(f"dialogue {dialogue.id}: image {part.sha256} was not added")
        self._dialogues += 1
        if line is not None and ("\n" in line or not line.strip()):
            raise ValueError(f"dialogue {dialogue.id}: a dataset line must be one non-empty line")
        self._write_line((dialogue.model_dump_json() if line is None else line) + "\n")
        self._turns += len(dialogue.turns)
        self._questions += len(dialogue.questions)
        self._checks += sum(len(t.checks) for t in dialogue.turns)

    def _written(self, dialogue_id: str) -> bool:
        """Whether a dialogue with this id is among those written (read back only when its id's
        hash was seen before: a repeat, or rarely two ids with one hash)."""
        if self._shard_file is not None:
            self._shard_file.flush()
        for rel in self._shards:
            with open(self.work / rel, "rb") as f:
                for raw in f:
                    if raw.strip() and json.loads(raw).get("id") == dialogue_id:
                        return True
        return False

    def _write_line(self, line: str) -> None:
        if self._shard_file is None or self._in_shard >= self._capacity:
            self._close_shard()
            self._open_shard()
        assert self._shard_file is not None
        self._shard_file.write(line.encode("utf-8"))
        self._in_shard += 1

    def _open_shard(self) -> None:
        if self._layout is None:
            rel = f"{DIALOGUES_DIR}/{len(self._shards):05d}.jsonl"
        else:
            self._empty_shards()
            if not self._layout:
                raise ValueError("more dialogues than the shard layout holds")
            rel, self._capacity = self._layout.pop(0)
        if rel in self._shards:
            raise ValueError(f"shard {rel} is listed twice")
        self._shards.append(rel)
        self._shard_file = open(self.work / rel, "wb")  # noqa: SIM115
        self._in_shard = 0

    def _empty_shards(self) -> None:
        """Create the shards of the layout that hold no dialogue, up to the next that does."""
        assert self._layout is not None
        while self._layout and self._layout[0][1] <= 0:
            rel = self._layout.pop(0)[0]
            if rel in self._shards:
                raise ValueError(f"shard {rel} is listed twice")
            (self.work / rel).touch()
            self._shards.append(rel)
            self._in_shard = self._capacity = 0  # full as it is

    def _close_shard(self) -> None:
        if self._shard_file is not None:
            self._shard_file.flush()
            os.fsync(self._shard_file.fileno())
            self._shard_file.close()
            self._shard_file = None

    # commit ---------------------------------------------------------------------------

    def commit(self) -> Manifest:
        """Write the manifest and move the dataset into place."""
        if self._done:
            raise RuntimeError("writer already finished")
        self._close_shard()
        if self._layout is not None:
            self._empty_shards()
            if self._layout or (self._shards and self._in_shard < self._capacity):
                raise ValueError("fewer dialogues than the shard layout holds")
        if not self._shards:  # an empty dataset still has one (empty) shard
            self._capacity = 0
            self._open_shard()
            self._close_shard()
        family = self._family or DEFAULT_FAMILY
        manifest = Manifest(
            split=self.split,
            family=family,
            protocol=family_of(family).protocol,
            generator=self.generator,
            counts=Counts(
                dialogues=self._dialogues,
                turns=self._turns,
                images=len(self._image_hashes),
                questions=self._questions,
                checks=self._checks,
            ),
            shards={rel: sha256_file(self.work / rel) for rel in self._shards},
            images_sha256=images_digest(self._image_hashes),
            floors=self.floors,
        )
        kept = self.keep_manifest
        write_manifest(self.work, kept if kept is not None and _describes(kept, manifest) else manifest)
        _check_target(self.path, self.overwrite)
        move_into_place(self.work, self.path)
        self._done = True
        self._lock.release()
        return manifest

    def abort(self) -> None:
        """Throw away everything written so far."""
        self._close_shard()
        shutil.rmtree(self.work, ignore_errors=True)
        self._done = True
        self._lock.release()

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._done:
            return
        if exc_type is None:
            try:
                self.commit()
            except BaseException:
                self.abort()
                raise
        else:
            self.abort()


def manifest_text(manifest: Manifest) -> str:
    """The text of ``manifest.json``: indented JSON, keys in schema order, a final newline."""
    return manifest.model_dump_json(indent=2) + "\n"


def write_manifest(directory: Path, manifest: Manifest | str) -> None:
    """Write ``manifest.json`` (a model, or its exact text) atomically."""
    atomic_write(directory / MANIFEST, manifest if isinstance(manifest, str) else manifest_text(manifest))


def _describes(text: str, manifest: Manifest) -> bool:
    """Whether a manifest's text says exactly what ``manifest`` says (its floors aside: only the build
    that made a bench measured them, and a copy keeps them)."""
    try:
        kept = Manifest.model_validate_json(text)
    except ValueError:
        return False
    return kept == manifest.model_copy(update={"floors": kept.floors})


def _check_target(path: Path, overwrite: bool) -> None:
    if not path.exists() and not path.is_symlink():
        return
    if not overwrite:
        raise UserError(f"{path}: already exists (choose another path, or replace it with --overwrite)")
    if not path.is_dir() or path.is_symlink():
        raise UserError(f"{path}: exists and is not a directory; refusing to replace it")
    if any(path.iterdir()) and not is_dataset_dir(path):
        raise UserError(f"{path}: exists and is not a yanami dataset; refusing to replace it")


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2); False where unsupported."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None:
        return False
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def place_file(origin: str, dest: str, link: bool) -> None:
    """Put a copy of the file ``origin`` at ``dest`` (a writer's `image_target`): a hard link with
    ``link`` where the file system allows (no bytes copied), else a copy made by the kernel. A
    file already there (the same content, by its hash) is kept."""
    for attempt in (0, 1):
        try:
            if link:
                try:
                    os.link(origin, dest, follow_symlinks=False)
                    return
                except FileExistsError:
                    return
                except FileNotFoundError:
                    raise
                except OSError:  # another file system, or links refused: copy
                    link = False
            if os.path.exists(dest):
                return
            shutil.copyfile(origin, dest)
            return
        except FileNotFoundError:
            if attempt:
                raise
            # The hash's folder, made once. Not "raise where it exists": another process may
            # have made it since this one found it missing (the origin missing fails again).
            os.makedirs(os.path.dirname(dest), exist_ok=True)


def move_into_place(work: Path, path: Path) -> None:
    """Move the directory ``work`` to ``path``, atomically replacing what is there."""
    if not path.exists():
        work.rename(path)
        return
    if _exchange(work, path):  # the old dataset is now at `work`
        shutil.rmtree(work, ignore_errors=True)
        return
    old = work.with_name(work.name + ".old")
    path.rename(old)
    work.rename(path)
    with contextlib.suppress(OSError):
        shutil.rmtree(old)
