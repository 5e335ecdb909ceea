"""The benchmark runner: items, requests in three layouts, GT-/Self-History, the results store."""

from yanami._lock import DirLock
from yanami.runner._blind import BlindAudit, blind_audit, blind_text, picture_metadata
from yanami.runner._chains import Chain, ChainRunner, bench_items, chain_of
from yanami.runner._executors import ray_chains
from yanami.runner._items import Item, build_request, composite, frame_of, generation_turns, items_of, question_of
from yanami.runner._run import Summary, evaluate, index_dialogues, rejudge, run_eval
from yanami.runner._spec import EvalSpec, default_concurrency

__all__ = [
    "BlindAudit",
    "Chain",
    "ChainRunner",
    "DirLock",
    "EvalSpec",
    "Item",
    "Summary",
    "bench_items",
    "blind_audit",
    "blind_text",
    "build_request",
    "chain_of",
    "composite",
    "default_concurrency",
    "evaluate",
    "frame_of",
    "generation_turns",
    "index_dialogues",
    "items_of",
    "picture_metadata",
    "question_of",
    "ray_chains",
    "rejudge",
    "run_eval",
]
