"""The dataset manifest: what a directory holds and how to check it."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from yanami.contract import DEFAULT_FAMILY, SCHEMA_VERSION, family_of

FORMAT_NAME = "yanami-dataset"
FORMAT_VERSION = "1.0"
MANIFEST = "manifest.json"
DIALOGUES_DIR = "dialogues"
IMAGES_DIR = "images"
SHARD_SIZE = 10_000
"""Dialogues per JSONL shard."""
SHARD_NAME = re.compile(r"[A-Za-z0-9_-]+\.jsonl")
"""The file name of a dialogue shard inside ``dialogues/``."""


class Generator(BaseModel):
    """What built the dataset."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """e.g. ``world``, ``llm``, ``synthetic`` or ``import``."""
    version: str = ""
    params: dict[str, Any] = {}
    """The settings it ran with (seed, preset, …)."""


class Counts(BaseModel):
    """How many of each thing the dataset holds."""

    model_config = ConfigDict(extra="forbid")

    dialogues: int = Field(ge=0)
    turns: int = Field(ge=0)
    images: int = Field(ge=0)
    """Distinct image files."""
    questions: int = Field(ge=0)
    checks: int = Field(ge=0)


def _default_protocol(schema: dict[str, Any]) -> None:
    schema["default"] = family_of(DEFAULT_FAMILY).protocol  # the default family's, read when the schema is written


class Manifest(BaseModel):
    """``manifest.json``: format, split, generator, counts and checksums."""

    model_config = ConfigDict(extra="forbid")

    format: str = FORMAT_NAME
    format_version: str = FORMAT_VERSION
    schema_version: str = SCHEMA_VERSION
    split: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")
    """``bench``, ``train`` or another lower-case name."""
    family: str = DEFAULT_FAMILY
    """The benchmark family every dialogue belongs to."""
    protocol: str = Field(
        default_factory=lambda: family_of(DEFAULT_FAMILY).protocol, json_schema_extra=_default_protocol
    )
    """The protocol version the family is scored under (`yanami.families`)."""
    generator: Generator
    counts: Counts
    shards: dict[str, str]
    """Each dialogue shard's path (``dialogues/00000.jsonl``) and the SHA-256 of its bytes."""
    images_sha256: str
    """SHA-256 of the sorted image hashes, one per line: a checksum of the image set."""
    floors: dict[str, dict[str, tuple[float, int]]] | None = None
    """A world bench's trivial floors under GT-History, as the exact judge of the yanami that built
    it reads them (`yanami.world.floor_shares`): per scenario and strategy (``copy-input``,
    ``jitter-first``, ``blank`` …, and ``stateless``), the sum over target images of the share of
    atomic checks the strategy's picture passes, and the number of images. Tables show the best
    trivial strategy as the bench's floor. None: none recorded (a training set, imported data)."""


def provenance(generator: Generator) -> tuple[str, str]:
    """Whether a bench is public or private, and a line saying why it matters (contamination):
    ``("public", ...)`` for a world bench anyone can rebuild from the code and its seed, or data
    imported from a published benchmark; ``("private", ...)`` for a world bench built with
    ``--private``; ``("unknown", ...)`` otherwise. docs/evaluation.md, "Contamination"."""
    p = generator.params
    if generator.name == "world" and p.get("private"):
        digest = str(p.get("seed_sha256", ""))[:12]
        return "private", f"private (a secret seed, SHA-256 {digest}…): no model can have seen it"
    if generator.name == "world":
        return "public", (
            f"public (the world's seed {p.get('seed')}: anyone can rebuild it from the code, so a model may have"
            " been trained on it)"
        )
    if generator.name == "import":
        return "public", f"public (imported from {p.get('family', 'a benchmark')}'s published data)"
    return "unknown", f"made by {generator.name!r}: public or private as its maker kept it"
