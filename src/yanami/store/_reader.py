"""Reading dataset directories: dialogues streamed shard by shard, images opened lazily."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from PIL import Image
from pydantic import ValidationError

from yanami.errors import UserError
from yanami.schema import Dialogue, ImagePart
from yanami.store._images import DEFAULT_MAX_PIXELS, image_relpath, open_image_bytes, read_image_file
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
        raise UserError(f"{root}: not a yanami dataset (no {MANIFEST})")
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


class Dataset:
    """A dataset directory opened for reading.

    Iterating yields dialogues one at a time, shard by shard, so memory does not grow
    with the dataset. Images are read only when asked for, and resolved only inside
    ``images/`` from their hash.
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

    def __len__(self) -> int:
        return self.manifest.counts.dialogues

    def shard_paths(self) -> list[Path]:
        """The dialogue shards, in order."""
        return [self.root / rel for rel in self.manifest.shards if _safe_shard(rel)]

    def __iter__(self) -> Iterator[Dialogue]:
        for shard in self.shard_paths():
            with open(shard, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        yield Dialogue.model_validate_json(line)
                    except ValidationError as exc:
                        rel = shard.relative_to(self.root)
                        raise UserError(
                            f"{rel}:{lineno}: invalid dialogue ({exc.error_count()} problems; run `yanami validate`)"
                        ) from None

    def image_path(self, part: ImagePart) -> Path:
        """Where the file of an image part lives (inside ``images/`` by construction)."""
        return self.root / image_relpath(part.sha256, part.format)

    def image_bytes(self, part: ImagePart) -> bytes:
        """The bytes of an image part's file (never through a symbolic link)."""
        return read_image_file(self.root, part.sha256, part.format)

    def open_image(self, part: ImagePart) -> Image.Image:
        """Open an image lazily (header read, pixels decoded on first use), pixel limit enforced."""
        return open_image_bytes(self.image_bytes(part), self.max_pixels)


def _safe_shard(rel: str) -> bool:
    folder, _, name = rel.partition("/")
    return folder == DIALOGUES_DIR and SHARD_NAME.fullmatch(name) is not None
