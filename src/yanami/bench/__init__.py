"""The benchmark runner: items, requests in three layouts, GT-/Self-History, the results store."""

from yanami._lock import DirLock
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
    generation_turns,
    item_seed,
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
    "build_request",
    "composite",
    "default_concurrency",
    "evaluate",
    "generation_turns",
    "index_dialogues",
    "item_seed",
    "items_of",
    "open_bench",
    "question_prompt",
    "read_manifest",
    "read_rows",
    "reads_bench",
    "rejudge",
    "select_dialogues",
]
