"""What every family's importer shares: safe image reading, error lines, the dataset writer."""

from __future__ import annotations

import errno
import os
import re
import sys
from collections.abc import Callable, Iterator
from functools import lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

from pydantic import ValidationError

from yanami._workers import quiet_worker, starting_workers
from yanami.contract import ID_PATTERN, Dialogue, ImageSource, UserError, open_regular, path_problem, sha256_hex
from yanami.store import DatasetWriter, Generator, ImageProblem, Manifest, image_header, place_file

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

MAX_IMAGE_BYTES = 64 << 20
"""An image file larger than this is refused before it is read."""

OnRecord = Callable[[], None]
WORKERS = max(1, min(4, (os.cpu_count() or 2) - 1))
"""Processes that read, hash and place image files during a large import (one core stays with the
process that builds the dialogues)."""
_ID_BAD = re.compile(r"[^A-Za-z0-9._-]+")
_ID = re.compile(ID_PATTERN)
_T = TypeVar("_T")
_U = TypeVar("_U")


def text_part(text: str) -> dict[str, Any]:
    """A text part, in a dialogue's JSON form."""
    return {"type": "text", "text": text}


def build_dialogue(raw: dict[str, Any], at: str) -> Dialogue:
    """A dialogue from its JSON form, validated in one pass; a field the source left invalid
    (an empty requirement, say) is the import's one-line error."""
    try:
        return Dialogue.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise fail(at, ".".join(map(str, err["loc"])), err["msg"]) from None


def fail(at: str, field: str, msg: str) -> UserError:
    """The one-line error of an import: ``file: record: field: message``."""
    return UserError(f"{at}: {field}: {msg}" if field else f"{at}: {msg}")


def dialogue_id(*parts: object) -> str:
    """A dialogue id from a source's own keys, made a plain name (``imug-Botany-growth-12``)."""
    name = _ID_BAD.sub("-", "-".join(str(p) for p in parts)).strip("-.")[:128]
    if not _ID.fullmatch(name):
        raise ValueError(f"no id can be made from {parts!r}")
    return name


@overload
def expect(value: object, kind: type[_T], at: str, field: str) -> _T: ...


@overload
def expect(value: object, kind: tuple[type[_T], type[_U]], at: str, field: str) -> _T | _U: ...


def expect(value: object, kind: type | tuple[type, ...], at: str, field: str) -> object:
    """``value`` when it has the type ``kind`` (a bool is never what a source means), else the error."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, kinds) and not isinstance(value, bool):
        return value
    names = " or ".join(k.__name__ for k in kinds)
    got = "missing" if value is None else f"a {type(value).__name__}"
    raise fail(at, field, f"expected {names}, got {got}")


def source_path(value: object, at: str, field: str) -> str:
    """``value`` when it is a string that can name a file (`path_problem`), else the one-line error:
    a NUL byte or a lone surrogate in a path of the source's JSON is an error of its record."""
    path = expect(value, str, at, field)
    problem = path_problem(path)
    if problem is not None:
        raise fail(at, field, f"{path!r} is not a path: it holds {problem}")
    return path


@lru_cache(maxsize=4096)
def _real_dir(folder: str) -> str:
    return os.path.join(os.path.realpath(folder), "")


def _check(root: str, prefix: str, rel: str) -> str:
    """``root/rel`` when it stays inside the source folder (its folders' links resolved), else ``""``.
    The file itself is opened without following a link (`_read`)."""
    path = os.path.normpath(os.path.join(root, rel))
    if os.path.isabs(rel) or not path.startswith(prefix) or not _real_dir(os.path.dirname(path)).startswith(prefix):
        return ""
    return path


_NOFOLLOW = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)


def _read(path: str, prefix: str) -> tuple[bytes, str, str] | str:
    """A file's bytes, SHA-256 and real path, or why not; a file that is a link is followed only
    where it stays under ``prefix``."""
    try:
        try:
            fd = open_regular(path, _NOFOLLOW)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            path = os.path.realpath(path)
            if not path.startswith(prefix):
                return ""
            fd = open_regular(path)
        with open(fd, "rb") as f:
            size = os.fstat(fd).st_size
            if size > MAX_IMAGE_BYTES:
                return f"{size} bytes is over the limit of {MAX_IMAGE_BYTES}"
            data = f.read()
    except FileNotFoundError:
        return "no such image file"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    return data, sha256_hex(data), path


Probed = tuple[str, str, int, int] | str
"""An image file read, hashed, checked and placed: (sha256, format, width, height), or what is wrong."""


def _probe(root: str, prefix: str, max_pixels: int, work: str, link: bool, rel: object) -> Probed:
    """`SourceImages`'s work on one file (also in a worker process): checked, hashed, and placed
    in the dataset being written (``work``, the writer's folder), its bytes never kept."""
    if not isinstance(rel, str) or path_problem(rel) is not None:
        return "not a path"  # (the record's own check words it)
    path = _check(root, prefix, rel)
    if not path:
        return ""  # leaves the folder: the caller words it
    got = _read(path, prefix)
    if isinstance(got, str):
        return got
    data, sha, path = got
    try:
        fmt, width, height = image_header(data, max_pixels)
    except ImageProblem as exc:
        return str(exc)
    try:
        place_file(path, f"{work}/images/{sha[:2]}/{sha}.{fmt.value}", link)  # = image_relpath: our own hash
    except OSError as exc:
        return f"cannot be stored ({exc.strerror})"
    return sha, fmt.value, width, height


def _probe_all(root: str, prefix: str, max_pixels: int, work: str, link: bool, rels: list[object]) -> list[Probed]:
    return [_probe(root, prefix, max_pixels, work, link, rel) for rel in rels]


PARALLEL_FROM = 64
"""Records from which an import reads its image files in worker processes (fewer: in this one)."""


class SourceImages:
    """Image files of a source folder: read, hashed and checked once each, stored in the dataset.

    With `start`, worker processes read and hash the files of the records ahead (the bytes stay
    there: the dataset's file is a hard link to the source's, or a copy made by the kernel),
    while this process builds the dialogues; results come back in record order, so the first
    problem reported is the same as without them.
    """

    def __init__(self, root: Path, writer: DatasetWriter, *, link: bool = True, within: Path | None = None) -> None:
        self.root = root
        self._root = os.path.realpath(root)
        # every file read lies inside ``within`` (the source's folder): an images folder that is a
        # link to a folder elsewhere would let a record name, and hard-link, any picture there
        self._prefix = os.path.join(os.path.realpath(within if within is not None else root), "")
        if not os.path.join(self._root, "").startswith(self._prefix):
            raise UserError(f"{root}: a link to {self._root}, outside the source {within}; refusing to read it")
        self.writer = writer
        self.link = link
        self._parts: dict[str, dict[str, Any]] = {}
        self._ready: dict[str, Probed] = {}
        self._unused: list[tuple[str, str, int, int]] = []
        self._results: Iterator[list[Probed]] | None = None
        self._batches: Iterator[list[object]] | None = None
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> SourceImages:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def start(self, batches: list[list[object]], workers: int) -> None:
        """Read the files each record names (a batch per record, in order) in ``workers`` processes."""
        if workers > 0 and len(batches) >= PARALLEL_FROM and sys.platform == "linux":
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            # fork (Linux: elsewhere the files are read here): the workers need nothing but this
            # module, and start in milliseconds
            self._pool = ProcessPoolExecutor(
                workers, mp_context=multiprocessing.get_context("fork"), initializer=quiet_worker
            )
            work = partial(_probe_all, *self._args())
            with starting_workers():  # map submits every task at once: the workers start here
                self._results = self._pool.map(work, batches, chunksize=16)
            self._batches = iter(batches)

    def _args(self) -> tuple[str, str, int, str, bool]:
        return self._root, self._prefix, self.writer.max_pixels, str(self.writer.work), self.link

    def next_record(self) -> None:
        """Take the next record's files from the workers (call once per record, in order)."""
        if self._results is not None and self._batches is not None:
            self._unused += [p for p in self._ready.values() if not isinstance(p, str)]
            pairs = zip(next(self._batches), next(self._results), strict=True)
            # a record's list may hold what is no path (a number, a list): its own check words it
            self._ready = {rel: probed for rel, probed in pairs if isinstance(rel, str)}

    def discard_unused(self) -> None:
        """Remove the files workers placed for pictures no record used (after the last record)."""
        for sha, fmt, _, _ in [*self._unused, *(p for p in self._ready.values() if not isinstance(p, str))]:
            self.writer.discard(sha, fmt)

    def part(self, rel: str, source: ImageSource, at: str, field: str) -> dict[str, Any]:
        """The image at ``root/rel`` as a part with ``source``, in a dialogue's JSON form (a file is
        read and hashed once)."""
        source_path(rel, at, field)
        known = self._parts.get(rel)
        if known is None:
            probed = self._ready.pop(rel, None)
            if probed is None:
                probed = _probe(*self._args(), rel)
            if isinstance(probed, str):
                if not probed:
                    raise fail(at, field, f"{rel!r} leaves {self.root}; image paths are relative to it")
                raise fail(
                    at, field, f"{rel}: {probed}" + (f" under {self.root}" if probed.startswith("no such") else "")
                )
            sha, fmt, width, height = probed
            self.writer.adopt(sha)
            known = self._parts[rel] = {"type": "image", "sha256": sha, "format": fmt, "width": width,
                                        "height": height, "source": "user"}  # fmt: skip
        return known if known["source"] == source.value else {**known, "source": source.value}


Record = tuple[str, list[object], Any]
"""A source record: where it is (``file: record n`` or ``file:line``), the image paths it names,
and the record itself."""


def write_records(
    out: str | Path,
    generator: Generator,
    images_root: Path,
    records: list[Record],
    build: Callable[[Any, str, SourceImages], Dialogue],
    *,
    overwrite: bool,
    link: bool,
    workers: int,
    on_record: OnRecord | None,
    finish: Callable[[], None] | None = None,
    within: Path | None = None,
) -> Manifest:
    """The dataset of ``records``, each made a dialogue by ``build``; ``finish`` runs after the last
    (checks of what the records left unused); every file read lies inside ``within`` (default:
    ``images_root``). Any error leaves nothing at ``out``."""
    with (
        DatasetWriter(out, split="bench", generator=generator, overwrite=overwrite) as writer,
        SourceImages(images_root, writer, link=link, within=within) as images,
    ):
        images.start([files for _, files, _ in records], workers)
        for at, _, record in records:
            images.next_record()
            d = build(record, at, images)
            try:
                writer.add_dialogue(d)
            except ValueError as exc:
                raise fail(at, "", str(exc)) from None
            if on_record is not None:
                on_record()
        if finish is not None:
            finish()
        images.discard_unused()
        return writer.commit()
