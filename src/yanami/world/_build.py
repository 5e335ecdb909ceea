"""``yanami build``: a dataset of world dialogues, deterministic for any number of workers."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from multiprocessing import get_context
from pathlib import Path

from yanami import __version__
from yanami._workers import quiet_worker, starting_workers
from yanami.errors import UserError
from yanami.scenarios import FACTS, PRESETS
from yanami.schema import Dialogue, Scenario
from yanami.store import DatasetWriter, Generator, Manifest, open_dataset_dir, scan_image_files
from yanami.world._filter import Letters, finish_block
from yanami.world._shortcuts import Balancer, OptionSets

TRAIN_MIX = {s: f.train_share for s, f in FACTS.items()}
"""The paper's training mix across scenarios."""


def plan(
    preset: str,
    per_scenario: int | None,
    dialogues: int | None,
    scenarios: list[Scenario],
    prefix: str = "world",
) -> list[tuple[Scenario, str]]:
    """The dialogues to build, in the order they are written: (scenario, id).

    A per-scenario count gives each scenario the same number; a total is split by the
    training mix (renormalised over the chosen scenarios), remainders to the largest
    fractions. Scenarios are interleaved so that any prefix of the dataset is mixed. Ids are
    ``<prefix>-<scenario>-<n>``.
    """
    if per_scenario is None and dialogues is None:
        per_scenario = PRESETS[preset].get("per_scenario")
        dialogues = PRESETS[preset].get("dialogues")
    counts: dict[Scenario, int]
    if per_scenario is not None:
        counts = {s: per_scenario for s in scenarios}
    else:
        assert dialogues is not None
        weights = {s: TRAIN_MIX[s] for s in scenarios}
        total = sum(weights.values())
        exact = {s: dialogues * w / total for s, w in weights.items()}
        counts = {s: int(v) for s, v in exact.items()}
        for s in sorted(scenarios, key=lambda s: -(exact[s] - counts[s]))[: dialogues - sum(counts.values())]:
            counts[s] += 1
    out: list[tuple[Scenario, str]] = []
    for i in range(max(counts.values(), default=0)):
        for s in scenarios:
            if i < counts[s]:
                out.append((s, f"{prefix}-{s.value}-{i:06d}"))
    return out


def _one(task: tuple[Scenario, str, int]) -> tuple[Dialogue, dict[str, bytes], dict[str, OptionSets]]:
    from yanami.world._scenarios import compose_for_build

    scenario, did, seed = task
    return compose_for_build(scenario, did, seed)  # pickled across processes: no JSON round trip


def _results(
    tasks: list[tuple[Scenario, str, int]], workers: int, backend: str = "local", ray_address: str | None = None
) -> Iterator[tuple[Dialogue, dict[str, bytes], dict[str, OptionSets]]]:
    if backend == "ray":
        from yanami.scale import ordered_map

        yield from ordered_map(_one, tasks, ray_address)
        return
    if workers <= 1:
        yield from map(_one, tasks)
        return
    ctx = get_context("forkserver" if os.name == "posix" else "spawn")
    with starting_workers():
        pool = ctx.Pool(workers, initializer=quiet_worker)
    with pool:
        yield from pool.imap(_one, tasks, chunksize=4)


def build_world(
    out: str | Path,
    *,
    preset: str = "bench",
    per_scenario: int | None = None,
    dialogues: int | None = None,
    scenarios: list[Scenario] | None = None,
    seed: int = 42,
    workers: int = 1,
    exclude: str | Path | None = None,
    overwrite: bool = False,
    on_dialogue: Callable[[], None] | None = None,
    backend: str = "local",
    ray_address: str | None = None,
) -> Manifest:
    """Build a world dataset at ``out``; see `plan` for what goes in.

    ``backend`` "ray" composes the dialogues on Ray Data (a local Ray, or the cluster at
    ``ray_address``) instead of ``workers`` processes: the same bytes either way.

    With ``exclude`` (a training set), any image that also occurs there aborts the build
    before anything is written.
    """
    if preset not in PRESETS:
        raise UserError(f"--preset: unknown preset {preset!r} (choose {', '.join(PRESETS)})")
    if backend != "local" or ray_address is not None:
        from yanami.scale import check_backend

        check_backend(backend, ray_address)
    scenarios = scenarios or list(Scenario)
    banned: set[str] = set()
    if exclude is not None:
        root, _, _ = open_dataset_dir(exclude)
        banned = set(scan_image_files(root)[0].values())
    todo = plan(preset, per_scenario, dialogues, scenarios)
    params = {
        "preset": preset,
        "per_scenario": per_scenario,
        "dialogues": dialogues,
        "scenarios": [s.value for s in scenarios],
        "seed": seed,
    }
    generator = Generator(name="world", version=__version__, params=params)
    with DatasetWriter(out, split=PRESETS[preset]["split"], generator=generator, overwrite=overwrite) as w:
        tasks = [(s, did, seed) for s, did in todo]
        balancer = Balancer()
        letters = Letters(seed)
        filtered = PRESETS[preset]["split"] != "train" or per_scenario is not None
        block: list[Dialogue] = []
        for k, (d, images, sets) in enumerate(_results(tasks, workers, backend, ray_address)):
            parts = {p.sha256: p for p in d.images()}
            for sha, data in images.items():
                if sha in banned:
                    raise UserError(
                        f"{d.id}: image {sha} also occurs in {exclude}; build the bench with another --seed",
                        exit_code=1,
                    )
                w.add_encoded(parts[sha], data)
            if k % BALANCE_BLOCK == 0:
                balancer = Balancer()
                for done in finish_block(block, letters, seed, filtered):
                    w.add_dialogue(done)
                block = []
            block.append(balancer.balance(d, sets))  # in the plan's order, as the dialogues come
            if on_dialogue is not None:
                on_dialogue()
        for done in finish_block(block, letters, seed, filtered):  # letters dealt, options filtered
            w.add_dialogue(done)
        return w.commit()


BALANCE_BLOCK = 2000
"""Dialogues whose questions are balanced together (`balance_questions`) and filtered together
(`yanami.world._filter`), in the plan's order: a bench is one block; a training set, blocks of
this many (the same for any number of workers). A training set (preset ``train`` without
``--per-scenario``) is balanced and its letters dealt, but not filtered against learned readers
(see docs/evaluation.md)."""
