"""The run format: the typed records of a run directory (docs/results-format.md), and the run
settings every part names: `History`, `Layout`, `GLOBAL_SEED`.

``RUN/manifest.json`` is a `RunManifest`; the rows of ``RUN/results.sqlite`` are
`Prediction` and `Verdict`, and a verdict's per-check results are `CheckResult`. Readers
get these models, read by field name, never raw dicts or positional rows. This module needs
pydantic alone: reading a run never loads numpy, Pillow or the world.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from yanami.core._errors import UserError
from yanami.core._frame import OUTPUT_LONG_EDGE

GLOBAL_SEED = 42
"""The global seed from which runs of format 4 and older derived each item's request seed."""


class History(StrEnum):
    """What a target turn's earlier images are: the dataset's (GT-History) or the model's own."""

    GT = "gt"
    SELF = "self"


class Layout(StrEnum):
    """How a request places the images of the turn (docs/evaluation.md: yes-first, yes-front, concatenate)."""

    YES_FIRST = "yes-first"
    YES_FRONT = "yes-front"
    CONCATENATE = "concatenate"


HISTORIES: tuple[History, ...] = tuple(History)
LAYOUTS: tuple[Layout, ...] = tuple(Layout)

RUN_FORMAT = "yanami-run"
RUN_VERSION = 5
"""The run format's version (2: verdicts carry a status; 3: a family, reply items, metric scores
and graded checks, for WEAVE and IMUG-Bench; a version 2 run is read as a YANAMI run; 4: the
manifest records ``privileged``, which older runs read as None, not recorded; 5: requests carry
the run's ``seed`` (the model config's, none by default), no longer one derived from each item's
id, which told a model the item: ``global_seed`` is recorded by older runs only, and a
prediction's ``seed`` may be null)."""
READS = (2, 3, 4, 5)
RUN_MANIFEST = "manifest.json"

Status = Literal["ok", "refused", "error", "missing"]
STATUSES: tuple[Status, ...] = ("ok", "refused", "error", "missing")


class JudgeInfo(BaseModel):
    """Which judge produced a run's verdicts."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    version: str


class RunManifest(BaseModel):
    """Every setting of a run (``RUN/manifest.json``); a resumed run must match it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format: str = RUN_FORMAT
    version: int = RUN_VERSION
    """The run format's version (`RUN_VERSION`)."""
    family: str = "yanami"
    """The bench's family (``yanami``, ``weave``, ``imug``): it decides how the run is scored."""
    strategy: str = "none"
    """The test-time strategy the model ran under (``--strategy``: none, cot, self-verify:N, best-of:N)."""
    bench: str
    """The bench directory: its absolute path when the run was made (runs of yanami 0.2.0 and
    earlier stored the path as given, which `bench_path` resolves against the working folder)."""
    bench_sha256: str
    """SHA-256 of the bench's manifest, which holds the hash of every shard and image."""
    bench_split: str
    model: str
    """The --model spec."""
    model_settings: dict[str, Any] | None = None
    """The model's config file, as read (it names the API key's variable, never the key)."""
    model_name: str
    privileged: bool | None = None
    """Whether the model read the bench: the runner handed it the bench directory, hidden
    annotations and all (it implements `yanami.models.ReadsBench`), so its scores are not a
    model result. None: a run of format 3 or older, which did not record it."""
    answers: bool
    """Whether the model answers questions (DSU is scored only then)."""
    generates: bool
    history: History
    layout: Layout
    judge: JudgeInfo
    judge_settings: dict[str, Any] | None = None
    """The judge's config file, as read, for a VLM judge."""
    limit: int | None
    """--limit: the run's dialogues are the first ``limit`` of the bench, round-robin over
    scenarios (None: all). A resumed run may raise it (see `yanami.runner.select_dialogues`)."""
    items: int
    """How many items the run has in all."""
    seed: int | None = None
    """The seed every request carried (the model config's ``seed``); None: none was sent."""
    global_seed: int | None = None
    """Runs of format 4 and older: the global seed from which each item's request seed was
    derived (`GLOBAL_SEED`); None in newer runs, whose requests never vary with the item."""
    output_long_edge: int = OUTPUT_LONG_EDGE
    max_tokens: int = 512
    temperature: float = 0.0
    yanami_version: str

    @property
    def bench_path(self) -> Path:
        """Where the bench is: the stored absolute path (a relative one, from an older yanami,
        is taken from the working folder, as that yanami did)."""
        return Path(self.bench)


class CheckResult(BaseModel):
    """A judge's result for one check of a target image."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str
    kind: str
    """``atomic`` (State Consistency) or ``capability`` (the gap analysis)."""
    capability: str | None
    """The capability a capability-specific check isolates (None for atomic checks)."""
    passed: bool | None
    """YANAMI's checks pass or fail; None for a graded check (see ``score``), and for a check
    undecidable for this model (no ``score``: under Self-History its own admissible earlier
    choices made the check ill-posed), which scores leave out and count."""
    effect: str | None = None
    """For an atomic check, what it tests: ``change`` (what the turn changes or the history
    requires, which copying the latest image cannot satisfy) or ``preservation``; None when
    the data does not say."""
    score: float | None = None
    """A graded check: its score on its kind's scale (IMUG-Bench's evaluation points, 0-5)."""


class Prediction(BaseModel):
    """What a model produced for one item (a row of ``predictions``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    item: str
    dialogue: str
    scenario: str
    kind: Literal["turn", "question", "reply"]
    """``turn``: an image for a target turn; ``question``: an answer to a DSU question; ``reply``:
    the text of a target text turn (WEAVE, IMUG-Bench)."""
    turn: int
    qtype: str | None = None
    status: Status
    text: str | None = None
    image: str | None = None
    """SHA-256 of the output image under ``RUN/outputs/``."""
    error: str | None = None
    seed: int | None = None
    """The seed the request carried (None: none)."""
    history_fallbacks: int = 0
    calls: int = 1
    """Model calls the item took (more than one under a test-time strategy)."""


NOT_SCORED = "not scored by the benchmark's code"
"""The reason a verdict with no metrics starts with: under ``--protocol-source`` the benchmark's
own code would score nothing there (a judge reply it cannot parse, a turn it cannot read). Such
a verdict is final (status ``ok``, ``scores`` empty): every reading leaves the item out, and
coverage counts it with its reason. Every family's judge, a plug-in's too, marks it so."""


class Verdict(BaseModel):
    """A judge's grade of one prediction (a row of ``verdicts``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    item: str
    judge: str
    judge_version: str
    status: Literal["ok", "error"]
    """``ok``, or ``error`` when the judge failed (the item is then not scored)."""
    score: float | None = None
    """Questions: 0..1."""
    vq: float | None = None
    """Turns: Visual Quality 0..10."""
    checks: list[CheckResult] | None = None
    """Turns: every check of the turn."""
    aligned: list[str] | None = None
    """Questions: the aligned capability-check ids."""
    scores: dict[str, float] | None = None
    """A family's protocol metrics for this item (WEAVE, IMUG-Bench, OpenING: docs/benchmarks.md)."""
    reason: str = ""


def read_manifest(run: Path) -> RunManifest:
    """The manifest of a run directory; a `UserError` for anything that is not a run this yanami reads."""
    path = run / RUN_MANIFEST
    if not path.is_file():
        raise UserError(f"{run}: not a yanami run (no {RUN_MANIFEST})")
    try:
        raw = json.loads(path.read_bytes())
    except ValueError:
        raise UserError(f"{path}: not a yanami run manifest (invalid JSON)") from None
    if not isinstance(raw, dict) or raw.get("format") != RUN_FORMAT:
        raise UserError(f"{path}: not a yanami run manifest")
    if raw.get("version") not in READS:
        raise UserError(f"{run}: a run in format version {raw.get('version')}, which this yanami does not read")
    try:
        return RunManifest.model_validate({**raw, "version": RUN_VERSION})  # read as this version
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(map(str, first["loc"])) or "-"
        raise UserError(f"{path}: not a yanami run manifest ({loc}: {first['msg']})") from None
