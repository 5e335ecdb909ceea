"""The paper's data pipeline over real image pools (YANAMI paper §3.1, Appendix A.2–A.4).

Stage a, `prepare`: a pool of images (a folder, a Parquet export, WebDataset tars) decoded
safely, screened by a filter VLM, repaired by an image-edit model and routed to the four
scenario pools. Stages b and c, `construct`: dialogues planned by an author LLM, their images
made by an image model, both verified and repaired, with provenance and cost. Model calls
reuse the evaluation's config files, adapters, limits, retries and response cache.
"""

from yanami.construct._construct import ConstructSummary, construct, store_path
from yanami.construct._plan import Plan, plan_problems, plan_schema
from yanami.construct._pool import DEFAULT_MAX_BYTES, PoolEntry, PoolFormat, pool_format, read_pool
from yanami.construct._prepare import (
    GROUPS,
    LABELS,
    MANIFEST,
    POOL_FORMAT,
    PROMPT_VERSION,
    FilterReply,
    Group,
    Label,
    PoolManifest,
    PrepareSummary,
    RouteReply,
    load_routes,
    prepare,
    prompt,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "GROUPS",
    "LABELS",
    "MANIFEST",
    "POOL_FORMAT",
    "PROMPT_VERSION",
    "ConstructSummary",
    "FilterReply",
    "Group",
    "Label",
    "Plan",
    "PoolEntry",
    "PoolFormat",
    "PoolManifest",
    "PrepareSummary",
    "RouteReply",
    "construct",
    "load_routes",
    "plan_problems",
    "plan_schema",
    "pool_format",
    "prepare",
    "prompt",
    "read_pool",
    "store_path",
]
