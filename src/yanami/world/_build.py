"""``yanami build``: a dataset of world dialogues, deterministic for any number of workers."""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Callable, Iterator
from multiprocessing import get_context
from pathlib import Path

from yanami import __version__
from yanami._workers import quiet_worker, starting_workers
from yanami.contract import FACTS, PRESETS, Dialogue, Scenario, UserError
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


Composed = tuple[Dialogue, dict[str, bytes], dict[str, OptionSets], dict[str, dict[int, float]]]
"""A dialogue as a worker returns it: the dialogue, its encoded images by hash, its questions'
option sets, and its trivial floors per strategy and target turn (empty where not measured)."""


def _one(task: tuple[Scenario, str, int, bool]) -> Composed:
    from yanami.world._floors import floor_shares
    from yanami.world._scenarios import compose_for_build

    scenario, did, seed, measure = task
    d, images, sets = compose_for_build(scenario, did, seed)  # pickled across processes: no JSON round trip
    return d, images, sets, floor_shares(d) if measure else {}


def _results(
    tasks: list[tuple[Scenario, str, int, bool]], workers: int, backend: str = "local", ray_address: str | None = None
) -> Iterator[Composed]:
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
    seed: int | None = 42,
    workers: int = 1,
    exclude: str | Path | None = None,
    overwrite: bool = False,
    on_dialogue: Callable[[], None] | None = None,
    backend: str = "local",
    ray_address: str | None = None,
    private: bool = False,
) -> Manifest:
    """Build a world dataset at ``out``; see `plan` for what goes in.

    ``backend`` "ray" composes the dialogues on Ray Data (a local Ray, or the cluster at
    ``ray_address``) instead of ``workers`` processes: the same bytes either way.

    With ``exclude`` (a training set), any image that also occurs there aborts the build
    before anything is written.

    ``private`` draws a secret seed (``seed`` must then be None): the manifest records only its
    SHA-256, no dialogue records it, and the secret is kept nowhere, so the bench is one that no
    model can have seen and nobody can rebuild (`PRIVATE_SEED_BITS`).
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
    if private and seed is not None:
        raise UserError("--private draws its own secret seed: leave out --seed")
    secret = secrets.randbits(PRIVATE_SEED_BITS) if private else None
    todo = plan(preset, per_scenario, dialogues, scenarios)
    params: dict[str, object] = {
        "preset": preset,
        "per_scenario": per_scenario,
        "dialogues": dialogues,
        "scenarios": [s.value for s in scenarios],
        "seed": seed,
    }
    if secret is not None:
        params["private"] = True
        params["seed_sha256"] = hashlib.sha256(str(secret).encode()).hexdigest()
        seed = secret
    elif seed is None:
        seed = params["seed"] = DEFAULT_SEED
    generator = Generator(name="world", version=__version__, params=params)
    with DatasetWriter(out, split=PRESETS[preset]["split"], generator=generator, overwrite=overwrite) as w:
        measure = PRESETS[preset]["split"] != "train"  # a bench records its floors (`Manifest.floors`)
        tasks = [(s, did, seed, measure) for s, did in todo]
        floors: dict[str, dict[str, list[float]]] = {}
        balancer = Balancer()
        letters = Letters(seed)
        filtered = PRESETS[preset]["split"] != "train" or per_scenario is not None
        block: list[Dialogue] = []
        for k, (d, images, sets, shares) in enumerate(_results(tasks, workers, backend, ray_address)):
            for name, by_turn in shares.items():  # summed in the plan's order: the same for any --workers
                total = floors.setdefault(d.group, {}).setdefault(name, [0.0, 0])
                total[0] += sum(by_turn.values())
                total[1] += len(by_turn)
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
                    w.add_dialogue(published(done, private))
                block = []
            block.append(balancer.balance(d, sets))  # in the plan's order, as they come
            if on_dialogue is not None:
                on_dialogue()
        for done in finish_block(block, letters, seed, filtered):  # letters dealt, options filtered
            w.add_dialogue(published(done, private))
        if measure:
            w.floors = {sc: {n: (t, int(c)) for n, (t, c) in per.items()} for sc, per in floors.items()}
        return w.commit()


def published(d: Dialogue, private: bool) -> Dialogue:
    """A dialogue as written: a private bench's keeps no trace of its secret seed."""
    return d.model_copy(update={"meta": d.meta.model_copy(update={"seed": None})}) if private else d


DEFAULT_SEED = 42
"""The public bench's seed (``yanami build`` without ``--seed``)."""

PRIVATE_SEED_BITS = 128
"""The secret seed of ``--private``: too many bits to find from the SHA-256 the manifest records."""

BALANCE_BLOCK = 2000
"""Dialogues whose questions are balanced together (`balance_questions`) and filtered together
(`yanami.world._filter`), in the plan's order: a bench is one block; a training set, blocks of
this many (the same for any number of workers). A training set (preset ``train`` without
``--per-scenario``) is balanced and its letters dealt, but not filtered against learned readers
(see docs/evaluation.md)."""
