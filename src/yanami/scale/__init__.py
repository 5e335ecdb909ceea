"""Beyond one machine: the stages on Ray Data (``--backend ray [--ray-address ADDR]``).

Ray is optional (the ``ray`` extra); nothing here imports it until a command asks for it.
The stages themselves stay in their packages: this one starts or joins Ray, maps work over
it, and shares each endpoint's limits across the cluster. Its executors run a command's tasks
in threads here or in Ray actors, behind one interface (`Executor`). See docs/scale.md.
"""

from yanami.scale._build import ordered_map
from yanami.scale._executors import Executor, LocalExecutor, RayExecutor, Setup, Work
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
    "Executor",
    "LocalExecutor",
    "RayExecutor",
    "Setup",
    "Work",
    "actor_rows",
    "check_backend",
    "cluster_cpus",
    "ordered_map",
    "ray_concurrency",
    "ray_session",
    "require_ray",
    "share_endpoint_limits",
]
