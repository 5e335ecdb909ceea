"""Content-addressed image files: hashing, safe path resolution and guarded decoding."""

from __future__ import annotations

import hashlib
import io
import os
import re
import warnings
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from yanami.contract import ImageFormat, UserError, open_regular

DEFAULT_MAX_PIXELS = 40_000_000
"""Images with more pixels than this are refused before decoding (decompression bombs)."""

_HEX64 = re.compile(r"[0-9a-f]{64}")
IMAGE_NAME = re.compile(r"([0-9a-f]{64})\.(png|jpeg|webp)")
"""The file name of an image inside ``images/xx/``."""
_PIL_FORMATS = {"PNG": ImageFormat.PNG, "JPEG": ImageFormat.JPEG, "WEBP": ImageFormat.WEBP}
_CHUNK = 1 << 20


class ImageProblem(ValueError):
    """An image file that cannot be used: missing, corrupt, too large or mislabelled."""


class ImageFileError(UserError, ImageProblem):
    """A dataset's image file that cannot be used, met while reading the dataset.

    A `UserError` (one line naming the dataset and the file, exit 2) and an `ImageProblem`,
    so code that skips unusable images keeps doing so.
    """


def sha256_file(path: Path) -> str:
    """Lower-case hex SHA-256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    with open(open_regular(path), "rb", buffering=0) as f:  # a FIFO or device is an OSError, never a hang
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def is_sha256(value: str) -> bool:
    """Whether ``value`` is a lower-case hex SHA-256 (and so safe to use in a path)."""
    return _HEX64.fullmatch(value) is not None


def image_relpath(sha256: str, fmt: ImageFormat | str) -> str:
    """The path of an image inside a dataset directory, e.g. ``images/ab/ab…ef.png``.

    Raises ValueError for anything that is not a hash or a known format, so a path
    taken from the data can never leave ``images/``.
    """
    if not is_sha256(sha256):
        raise ValueError(f"not a SHA-256 hex digest: {sha256!r}")
    ext = ImageFormat(fmt).value
    return f"images/{sha256[:2]}/{sha256}.{ext}"


def read_image_file(root: Path, sha256: str, fmt: ImageFormat | str) -> bytes:
    """Read an image's bytes from a dataset directory without following symbolic links.

    Raises ImageProblem if the file is missing or reached through a link, so data can
    never make yanami read outside the dataset.
    """
    rel = image_relpath(sha256, fmt)
    path = root / rel
    if any(p.is_symlink() for p in (root / "images", path.parent, path)):
        raise ImageProblem(f"image file {rel} is a symbolic link; refusing to follow it")
    try:
        # O_NOFOLLOW: a link put in place after the check above is refused all the same; only a
        # regular file is opened (a FIFO would block the read forever)
        fd = open_regular(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise ImageProblem(f"image file {rel} is missing") from None
    except OSError as exc:
        if path.is_symlink():
            raise ImageProblem(f"image file {rel} is a symbolic link; refusing to follow it") from None
        raise ImageProblem(f"image file {rel} cannot be read: {exc.strerror}") from None
    try:
        with open(fd, "rb") as f:
            return f.read()
    except OSError as exc:  # a directory where the file belongs, say
        raise ImageProblem(f"image file {rel} cannot be read: {exc.strerror}") from None


def _png_size(data: bytes) -> tuple[int, int] | None:
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":  # the size is at a fixed place
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    return None


_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
"""JPEG's start-of-frame markers (the others in the range are tables)."""


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """A JPEG's (width, height) from its first start-of-frame segment; None if not found plainly."""
    if data[:2] != b"\xff\xd8":
        return None
    i, n = 2, len(data)
    while i + 9 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
        elif marker in _SOF:
            return int.from_bytes(data[i + 7 : i + 9], "big"), int.from_bytes(data[i + 5 : i + 7], "big")
        elif marker == 0x01 or 0xD0 <= marker <= 0xD9:  # markers without a length
            i += 2
        else:
            i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")
    return None


def image_header(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[ImageFormat, int, int]:
    """(format, width, height) from an image's header, without decoding its pixels.

    The pixel limit is checked, and so is the end of the file (PNG's ``IEND`` chunk, JPEG's
    end-of-image marker, the length WebP's header announces), which catches a truncated file.
    Raises ImageProblem like `image_info`; `yanami validate` still decodes every image in full.
    """
    size = _png_size(data)
    fmt = ImageFormat.PNG
    if size is None:
        size, fmt = _jpeg_size(data), ImageFormat.JPEG
    if size is not None and 0 < size[0] * size[1] <= max_pixels:
        width, height = size
    else:  # another format, or a size to refuse: Pillow reads the header and says why
        img = open_image_bytes(data, max_pixels)
        fmt, width, height = _PIL_FORMATS[img.format or ""], img.width, img.height
    if fmt is ImageFormat.PNG:
        whole = data[-8:-4] == b"IEND"
    elif fmt is ImageFormat.JPEG:
        whole = b"\xff\xd9" in data[-64:]
    else:
        whole = len(data) >= 8 + int.from_bytes(data[4:8], "little")
    if not whole:
        raise ImageProblem(f"truncated {fmt.value.upper()} file ({len(data)} bytes)")
    return fmt, width, height


def image_info(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[ImageFormat, int, int]:
    """Decode ``data`` fully and return its (format, width, height).

    The header is read first, so an image over ``max_pixels`` is refused before its
    pixels are decoded. Raises ImageProblem for anything that is not a whole,
    decodable PNG, JPEG or WebP image.
    """
    img = open_image_bytes(data, max_pixels)
    try:
        img.load()
    except Exception as exc:  # Pillow raises many types for corrupt data
        raise ImageProblem(f"cannot decode image: {exc}") from None
    return _PIL_FORMATS[img.format or ""], img.width, img.height


def open_image_bytes(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    """Open image bytes lazily (header only) after checking the pixel limit."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as exc:  # Pillow's own, far higher, limit
        m = re.search(r"\((\d+) pixels\)", str(exc))
        size = f"{m.group(1)} pixels" if m else "the image"
        raise ImageProblem(f"{size} is over the limit of {max_pixels}") from None
    except UnidentifiedImageError:
        raise ImageProblem("not a readable image: no known image format (use PNG, JPEG or WebP)") from None
    except Exception as exc:
        raise ImageProblem(f"not a readable image: {exc}") from None
    if img.format not in _PIL_FORMATS:
        raise ImageProblem(f"unsupported image format {img.format!r} (use PNG, JPEG or WebP)")
    pixels = img.width * img.height
    if pixels > max_pixels:
        raise ImageProblem(f"{img.width}x{img.height} = {pixels} pixels is over the limit of {max_pixels}")
    return img


def scan_image_files(root: Path) -> tuple[dict[str, str], list[str]]:
    """List the files under a dataset's ``images/``.

    Returns the well-named ones (relative path -> SHA-256 from the name, in sorted order)
    and the relative paths of anything else found there.
    """
    good: dict[str, str] = {}
    bad: list[str] = []
    idir = root / "images"
    if not idir.is_dir():
        return good, bad
    for sub in sorted(idir.iterdir()):
        if not sub.is_dir() or sub.is_symlink():
            bad.append(f"images/{sub.name}")
            continue
        for f in sorted(sub.iterdir()):
            rel = f"images/{sub.name}/{f.name}"
            m = IMAGE_NAME.fullmatch(f.name)
            if m is None or m.group(1)[:2] != sub.name or f.is_symlink() or not f.is_file():
                bad.append(rel)
            else:
                good[rel] = m.group(1)
    return good, bad
