"""What every family's importer shares: safe image reading, error lines, the dataset writer."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from yanami.errors import UserError
from yanami.schema import ID_PATTERN, ImagePart, ImageSource
from yanami.store import DatasetWriter, ImageProblem

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


class SourceImages:
    """Image files of a source folder, read once each, checked, and stored in the dataset."""

    def __init__(self, root: Path, writer: DatasetWriter) -> None:
        self.root = root
        self._resolved = root.resolve()
        self.writer = writer
        self._parts: dict[str, ImagePart] = {}

    def part(self, rel: str, source: ImageSource, at: str, field: str) -> ImagePart:
        """The image at ``root/rel`` as a part with ``source`` (a file is read and hashed once)."""
        known = self._parts.get(rel)
        if known is None:
            known = self._parts[rel] = self._read(rel, at, field)
        return known if known.source == source else known.model_copy(update={"source": source})

    def _read(self, rel: str, at: str, field: str) -> ImagePart:
        path = (self.root / rel).resolve()
        if Path(rel).is_absolute() or not path.is_relative_to(self._resolved) or path == self._resolved:
            raise fail(at, field, f"{rel!r} leaves {self.root}; image paths are relative to it")
        try:
            size = path.stat().st_size
            if size > MAX_IMAGE_BYTES:
                raise fail(at, field, f"{rel}: {size} bytes is over the limit of {MAX_IMAGE_BYTES}")
            data = path.read_bytes()
        except FileNotFoundError:
            raise fail(at, field, f"{rel}: no such image file under {self.root}") from None
        except OSError as exc:
            raise fail(at, field, f"{rel}: cannot be read ({exc.strerror})") from None
        try:
            return self.writer.add_image(data, ImageSource.USER, decode=False)
        except ImageProblem as exc:
            raise fail(at, field, f"{rel}: {exc}") from None
