"""The paper's data pipeline over real image pools (YANAMI paper §3.1, Appendix A.2–A.4).

Stage a, `prepare`: a pool of images (a folder, a Parquet export, WebDataset tars) decoded
safely, screened by a filter VLM, repaired by an image-edit model and routed to the four
scenario pools. Model calls reuse the evaluation's config files, adapters, limits, retries
and response cache.
"""

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
    "FilterReply",
    "Group",
    "Label",
    "PoolEntry",
    "PoolFormat",
    "PoolManifest",
    "PrepareSummary",
    "RouteReply",
    "load_routes",
    "pool_format",
    "prepare",
    "prompt",
    "read_pool",
]
