"""The benchmark runner: items, requests in three layouts, GT-/Self-History, the results store."""

from yanami._lock import DirLock
from yanami.models import question_prompt, reads_bench
from yanami.runner._bench import bench_sha256, open_bench
from yanami.runner._blind import BlindAudit, blind_audit, blind_text, picture_metadata
from yanami.runner._items import Item, build_request, composite, frame_of, generation_turns, items_of, question_of
from yanami.runner._run import (
    Summary,
    bench_items,
    default_concurrency,
    evaluate,
    index_dialogues,
    rejudge,
    select_dialogues,
)

__all__ = [
    "BlindAudit",
    "DirLock",
    "Item",
    "Summary",
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
    "question_of",
    "question_prompt",
    "reads_bench",
    "rejudge",
    "select_dialogues",
]
