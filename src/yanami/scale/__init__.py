"""Beyond one machine: the stages on Ray Data (``--backend ray [--ray-address ADDR]``).

Ray is optional (the ``ray`` extra); nothing here imports it until a command asks for it.
See docs/scale.md.
"""

from yanami.scale._build import compose_on_ray
from yanami.scale._ray import BACKENDS, check_backend, ray_session, require_ray, share_endpoint_limits

__all__ = ["BACKENDS", "check_backend", "compose_on_ray", "ray_session", "require_ray", "share_endpoint_limits"]
