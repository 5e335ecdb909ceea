"""The benchmark runner: items, requests in three layouts, GT-/Self-History, the results store."""

from yanami.bench._items import (
    GLOBAL_SEED,
    HISTORIES,
    LAYOUTS,
    History,
    Item,
    Layout,
    build_request,
    composite,
    generation_turns,
    item_seed,
    items_of,
    question_prompt,
)
from yanami.bench._results import RESULTS, STATUSES, Prediction, Results, Verdict, read_rows
from yanami.bench._run import RUN_MANIFEST, RunManifest, Summary, bench_items, evaluate, rejudge, select_dialogues

__all__ = [
    "GLOBAL_SEED",
    "HISTORIES",
    "LAYOUTS",
    "RESULTS",
    "RUN_MANIFEST",
    "STATUSES",
    "History",
    "Item",
    "Layout",
    "Prediction",
    "Results",
    "RunManifest",
    "Summary",
    "Verdict",
    "bench_items",
    "build_request",
    "composite",
    "evaluate",
    "generation_turns",
    "item_seed",
    "items_of",
    "question_prompt",
    "read_rows",
    "rejudge",
    "select_dialogues",
]
