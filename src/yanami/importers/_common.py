"""What every family's importer shares: safe image reading, error lines, the dataset writer."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from yanami.errors import UserError
from yanami.schema import ID_PATTERN, ImagePart, ImageSource
from yanami.store import DatasetWriter, ImageProblem, image_header, sha256_hex

MAX_IMAGE_BYTES = 64 << 20
"""An image file larger than this is refused before it is read."""

OnRecord = Callable[[], None]
_ID_BAD = re.compile(r"[^A-Za-z0-9._-]+")
_ID = re.compile(ID_PATTERN)


def fail(at: str, field: str, msg: str) -> UserError:
    """The one-line error of an import: ``file: record: field: message``."""
    return UserError(f"{at}: {field}: {msg}" if field else f"{at}: {msg}")


def dialogue_id(*parts: object) -> str:
    """A dialogue id from a source's own keys, made a plain name (``imug-Botany-growth-12``)."""
    name = _ID_BAD.sub("-", "-".join(str(p) for p in parts)).strip("-.")[:128]
    if not _ID.fullmatch(name):
        raise ValueError(f"no id can be made from {parts!r}")
    return name


def expect(value: Any, kind: type | tuple[type, ...], at: str, field: str) -> Any:
    """``value`` when it has the type ``kind`` (a bool is never what a source means), else the error."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, kinds) and not isinstance(value, bool):
        return value
    names = " or ".join(k.__name__ for k in kinds)
    got = "missing" if value is None else f"a {type(value).__name__}"
    raise fail(at, field, f"expected {names}, got {got}")


@lru_cache(maxsize=4096)
def _real_dir(folder: str) -> str:
    return os.path.join(os.path.realpath(folder), "")


def _check(root: str, prefix: str, rel: str) -> str:
    """``root/rel`` when it stays inside the source folder (symbolic links resolved), else ``""``."""
    path = os.path.normpath(os.path.join(root, rel))
    if os.path.isabs(rel) or not path.startswith(prefix) or not _real_dir(os.path.dirname(path)).startswith(prefix):
        return ""
    if os.path.islink(path):  # the file itself is a link: where it leads must be inside too
        path = os.path.realpath(path)
        if not path.startswith(prefix):
            return ""
    return path


def _read(path: str) -> tuple[bytes, str] | str:
    """A file's bytes and SHA-256, or why not."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_IMAGE_BYTES:
                return f"{size} bytes is over the limit of {MAX_IMAGE_BYTES}"
            data = f.read()
    except FileNotFoundError:
        return "no such image file"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    return data, sha256_hex(data)


class SourceImages:
    """Image files of a source folder: read, hashed and checked once each, stored in the dataset."""

    def __init__(self, root: Path, writer: DatasetWriter, *, link: bool = True) -> None:
        self.root = root
        self._root = os.path.realpath(root)
        self._prefix = os.path.join(self._root, "")
        self.writer = writer
        self.link = link
        self._parts: dict[str, ImagePart] = {}

    def part(self, rel: str, source: ImageSource, at: str, field: str) -> ImagePart:
        """The image at ``root/rel`` as a part with ``source`` (a file is read and hashed once)."""
        known = self._parts.get(rel)
        if known is None:
            path = _check(self._root, self._prefix, rel)
            if not path:
                raise fail(at, field, f"{rel!r} leaves {self.root}; image paths are relative to it")
            got = _read(path)
            if isinstance(got, str):
                raise fail(at, field, f"{rel}: {got}" + (f" under {self.root}" if got.startswith("no such") else ""))
            data, sha = got
            try:
                fmt, width, height = image_header(data, self.writer.max_pixels)
            except ImageProblem as exc:
                raise fail(at, field, f"{rel}: {exc}") from None
            origin = Path(path) if self.link else None
            known = self._parts[rel] = self.writer.add_loaded(sha, fmt, width, height, data, origin, ImageSource.USER)
        if known.source == source:
            return known
        return ImagePart.model_construct(**{**known.__dict__, "source": source})  # checked already
