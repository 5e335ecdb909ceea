"""Beyond one machine: the stages on Ray Data (``--backend ray [--ray-address ADDR]``).

Ray is optional (the ``ray`` extra); nothing here imports it until a command asks for it.
The stages themselves stay in their packages: this one starts or joins Ray, maps work over
it, and shares each endpoint's limits across the cluster. See docs/scale.md.
"""

from yanami.scale._build import ordered_map
from yanami.scale._ray import (
    BACKENDS,
    actor_rows,
    check_backend,
    cluster_cpus,
    ray_concurrency,
    ray_session,
    require_ray,
    share_endpoint_limits,
)

__all__ = [
    "BACKENDS",
    "actor_rows",
    "check_backend",
    "cluster_cpus",
    "ordered_map",
    "ray_concurrency",
    "ray_session",
    "require_ray",
    "share_endpoint_limits",
]
