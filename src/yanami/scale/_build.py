"""``yanami build --backend ray``: the dialogues composed by Ray Data tasks, written here in plan order.

Every dialogue is planned by its seed (`yanami.world.plan`), so where it is composed changes
no byte of it; the driver writes them in the plan's order through the same `DatasetWriter`
and question balancer as the local backend, so the dataset is byte-identical to a local build
of the same seed and settings, whatever the number of Ray workers.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

from yanami.scale._ray import cluster_cpus, ray_session


def _compose(batch: dict[str, Any]) -> dict[str, list[bytes]]:
    """A Ray Data batch of planned dialogues, composed (pickled: the driver writes them)."""
    from yanami.schema import Scenario
    from yanami.world._scenarios import compose_for_build

    out = []
    for scenario, did, seed in zip(batch["scenario"], batch["id"], batch["seed"], strict=True):
        result = compose_for_build(Scenario(str(scenario)), str(did), int(seed))
        out.append(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
    return {"result": out}


def batch_size(tasks: int, cpus: int) -> int:
    """Dialogues per Ray task: enough to spread over every CPU many times, few enough that one
    task's output stays small (4 to 64)."""
    return max(4, min(64, tasks // max(1, cpus * 16)))


def compose_on_ray(tasks: list[tuple[Any, str, int]], address: str | None) -> Iterator[Any]:
    """`compose_for_build` of each task (scenario, id, seed), on Ray, yielded in the tasks' order."""
    if not tasks:
        return
    with ray_session(address) as ray:
        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True  # the dataset is written in the plan's order
        size = batch_size(len(tasks), cluster_cpus(ray))
        rows = [{"scenario": s.value, "id": did, "seed": seed} for s, did, seed in tasks]
        ds = ray.data.from_items(rows, override_num_blocks=max(1, -(-len(rows) // size)))
        ds = ds.map_batches(_compose, batch_size=size, num_cpus=1, batch_format="numpy")
        for row in ds.iter_rows():
            yield pickle.loads(row["result"])
