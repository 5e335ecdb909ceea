"""The benchmark runner: items, requests in three layouts, GT-/Self-History, the results store."""

from yanami._lock import DirLock
from yanami.bench._blind import BlindAudit, blind_audit, blind_text, picture_metadata
from yanami.bench._format import (
    RUN_FORMAT,
    RUN_MANIFEST,
    RUN_VERSION,
    STATUSES,
    CheckResult,
    JudgeInfo,
    Prediction,
    RunManifest,
    Status,
    Verdict,
    bench_sha256,
    open_bench,
    read_manifest,
)
from yanami.bench._items import (
    Item,
    build_request,
    composite,
    frame_of,
    generation_turns,
    items_of,
)
from yanami.bench._results import RESULTS, Results, RunRows, read_rows
from yanami.bench._run import (
    Summary,
    bench_items,
    default_concurrency,
    evaluate,
    index_dialogues,
    rejudge,
    select_dialogues,
)
from yanami.models import question_prompt, reads_bench
from yanami.run_format import GLOBAL_SEED, HISTORIES, LAYOUTS, History, Layout

__all__ = [
    "GLOBAL_SEED",
    "HISTORIES",
    "LAYOUTS",
    "RESULTS",
    "RUN_FORMAT",
    "RUN_MANIFEST",
    "RUN_VERSION",
    "STATUSES",
    "BlindAudit",
    "CheckResult",
    "DirLock",
    "History",
    "Item",
    "JudgeInfo",
    "Layout",
    "Prediction",
    "Results",
    "RunManifest",
    "RunRows",
    "Status",
    "Summary",
    "Verdict",
    "bench_items",
    "bench_sha256",
    "blind_audit",
    "blind_text",
    "build_request",
    "composite",
    "default_concurrency",
    "evaluate",
    "frame_of",
    "generation_turns",
    "index_dialogues",
    "items_of",
    "open_bench",
    "picture_metadata",
    "question_prompt",
    "read_manifest",
    "read_rows",
    "reads_bench",
    "rejudge",
    "select_dialogues",
]
