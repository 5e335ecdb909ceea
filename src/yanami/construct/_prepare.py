"""Stage a of the paper's pipeline: an image pool screened, repaired and routed to scenarios.

``prepare(POOL, OUT, filter=…)`` reads every entry of a pool (`read_pool`), decodes it under
the size and pixel limits, folds duplicates by SHA-256, and asks the filter VLM about each
image on its own with the paper's permissive rule (reject only severe corruption, generation
failure, invalid content or extremely poor visibility); the label and the reason are
recorded per image. Then, per group: more than half rejected drops the group; otherwise the
rejected images go to the repair model (an image-edit model) and back through the same
filter, at most ``rounds`` times, and what still fails is dropped with its reason. Each kept
group is routed to one of the four scenario pools: by the user's mapping, the pool's own
metadata, or the filter VLM.

OUT is content-addressed like a dataset (``images/ab/<sha256>.<ext>``: the kept images),
with ``labels.jsonl`` (one line per pool entry), ``groups.jsonl`` (one line per group) and
``manifest.json``, written last: a folder without it is a preparation in progress, and the
same command continues it. Model calls go through the adapters, their limits, retries and
the response cache (``OUT/cache.sqlite`` unless ``cache`` names another file), so nothing
paid for is paid again; with the same responses, OUT is byte-identical whatever the
concurrency.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from yanami._lock import LOCK, DirLock
from yanami.construct._pool import (
    DEFAULT_MAX_BYTES,
    PoolEntry,
    PoolFormat,
    check_groups,
    pool_format,
    read_pool,
)
from yanami.contract import (
    FACTS,
    InputImage,
    InputMessage,
    InputText,
    Model,
    Refused,
    Request,
    Scenario,
    UserError,
    atomic_write,
    sha256_hex,
)
from yanami.judges import ask_json, fence_code
from yanami.models import Malformed, ResponseCache, Transient, load_model
from yanami.store import DEFAULT_MAX_PIXELS, ImageProblem, image_info, image_relpath, images_digest

POOL_FORMAT = "yanami-pool"
POOL_FORMAT_VERSION = 1
PROMPT_VERSION = "v1"
MANIFEST = "manifest.json"
LABELS = "labels.jsonl"
GROUPS = "groups.jsonl"
SETTINGS = "settings.json"
"""What the preparation in OUT was started with (a different command cannot redo a finished one)."""
DEFAULT_ROUNDS = 2
"""Repair rounds per rejected image, at most."""
ROUTE_IMAGES = 4
"""How many of a group's images the routing question shows."""
REPAIR_LONG_EDGE = 1024

Category = Literal["usable", "corrupt", "generation_failure", "invalid_content", "poor_visibility"]


def prompt(name: str) -> str:
    """A prompt shipped with the package (``filter``, ``repair``, ``route``), at `PROMPT_VERSION`."""
    return files("yanami.construct").joinpath("prompts", f"{name}-{PROMPT_VERSION}.txt").read_text(encoding="utf-8")


class FilterReply(BaseModel):
    """The filter VLM's verdict on one image."""

    model_config = ConfigDict(extra="forbid", strict=True)
    keep: bool
    category: Category
    reason: str = ""


class RouteReply(BaseModel):
    """The filter VLM's choice of scenario for a group."""

    model_config = ConfigDict(extra="forbid", strict=True)
    scenario: Scenario
    reason: str = ""


class Label(BaseModel):
    """One line of ``labels.jsonl``: what became of one pool entry."""

    model_config = ConfigDict(extra="forbid")
    source: str
    group: str
    sha256: str | None
    """The entry's own bytes (None when they could not be read)."""
    status: Literal["kept", "repaired", "rejected", "unreadable", "duplicate", "dropped"]
    """``dropped``: the image passed, but its group did not."""
    category: str | None = None
    """The filter's label of the original image (``usable``, ``corrupt``, …)."""
    reason: str = ""
    image: str | None = None
    """The image that enters the pool: the entry's own, or its repair."""
    repair_rounds: int = 0


class Group(BaseModel):
    """One line of ``groups.jsonl``."""

    model_config = ConfigDict(extra="forbid")
    group: str
    status: Literal["kept", "dropped"]
    reason: str = ""
    scenario: Scenario | None = None
    routed_by: Literal["routes", "pool", "filter", ""] = ""
    images: list[str] = []
    """The pool's images of this group (SHA-256), in the pool's order."""


class PoolManifest(BaseModel):
    """``manifest.json`` of a prepared pool."""

    model_config = ConfigDict(extra="forbid")
    format: Literal["yanami-pool"] = "yanami-pool"
    version: int = POOL_FORMAT_VERSION
    settings: dict[str, Any]
    counts: dict[str, int]
    by_scenario: dict[str, int]
    """Kept groups per scenario."""
    images_sha256: str
    """`images_digest` of the kept images."""


@dataclass
class _Image:
    sha: str
    ext: str
    width: int
    height: int


@dataclass
class _Verdict:
    keep: bool
    category: str
    reason: str
    error: bool = False


@dataclass
class PrepareSummary:
    """What a preparation did, for the command line."""

    out: Path
    counts: dict[str, int]
    by_scenario: dict[str, int]
    reasons: dict[str, int] = field(default_factory=dict)
    """Dropped groups by reason."""
    errors: int = 0
    """Model calls that failed (not cached: the same command asks again)."""
    calls: dict[str, int] = field(default_factory=dict)
    """Questions asked per kind (filter, repair, route), answered by the cache or the server."""

    def lines(self) -> list[str]:
        """The preparation's summary, a line each, as ``yanami prepare`` prints it."""
        c = self.counts
        routed = ", ".join(f"{k} {v}" for k, v in self.by_scenario.items())
        return [
            f"{self.out}: {c['entries']} entries: {c['kept']} kept, {c['repaired']} repaired, {c['rejected']} "
            f"rejected, {c['unreadable']} unreadable, {c['duplicate']} duplicates, {c['dropped']} dropped with "
            "their group",
            f"groups: {c['groups_kept']} of {c['groups']} kept ({routed}); {c['images']} images",
            *(
                f"  dropped: {n} group(s): {reason}"
                for reason, n in sorted(self.reasons.items(), key=lambda kv: (-kv[1], kv[0]))
            ),
        ]


Progress = Callable[[str, int, int], None]


def _progress_noop(stage: str, done: int, total: int) -> None:
    pass


def load_routes(path: Path) -> dict[str, Scenario]:
    """A mapping from group to scenario (JSON or YAML object); one line per problem."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not JSON or YAML ({exc})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping from group to scenario")
    out = {}
    for group, scenario in data.items():
        try:
            out[str(group)] = Scenario(scenario)
        except ValueError:
            names = ", ".join(s.value for s in Scenario)
            raise UserError(f"{path}: {group}: {scenario!r} is not a scenario ({names})") from None
    return out


class _Preparer:
    def __init__(
        self, out: Path, filter_model: Model, repair_model: Model | None, rounds: int, max_pixels: int
    ) -> None:
        self.out = out
        self.filter = filter_model
        self.repair = repair_model
        self.rounds = rounds
        self.max_pixels = max_pixels
        self.errors = 0
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.repaired: dict[str, _Image] = {}
        """Repairs made, by SHA-256."""

    # images on disk ----------------------------------------------------------------------

    def store(self, data: bytes, sha: str, ext: str) -> None:
        path = self.out / image_relpath(sha, ext)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, data, fsync=False)

    def load(self, im: _Image) -> bytes:
        return (self.out / image_relpath(im.sha, im.ext)).read_bytes()

    def decode(self, data: bytes) -> _Image:
        fmt, width, height = image_info(data, self.max_pixels)
        return _Image(sha256_hex(data), fmt.value, width, height)

    # model calls ---------------------------------------------------------------------------

    def _count(self, what: str) -> None:
        with self._lock:
            self.calls[what] += 1

    def _failed(self, what: str, exc: Exception) -> _Verdict:
        with self._lock:
            self.errors += 1
        return _Verdict(False, "error", f"the {what} failed: {exc}", error=True)

    def screen(self, im: _Image, data: bytes) -> _Verdict:
        """The filter's verdict on one image (an error is a verdict too, never a crash)."""
        assert self.filter.answer is not None
        self._count("filter")
        parts: list[InputText | InputImage] = [
            InputText(prompt("filter")),
            InputImage(data, im.sha, im.width, im.height),
        ]
        try:
            reply = ask_json(self.filter.answer, f"prepare/filter/{im.sha[:16]}", parts, FilterReply)
        except Refused as exc:
            return _Verdict(False, "refused", f"the filter refused ({exc})")
        except (ValueError, Transient, Malformed, RuntimeError) as exc:
            return self._failed("filter", exc)
        category = "usable" if reply.keep else reply.category
        return _Verdict(reply.keep, category, reply.reason)

    def mend(self, im: _Image, data: bytes, reason: str) -> tuple[_Image, bytes] | str:
        """The repair model's new version of an image, or why there is none."""
        assert self.repair is not None and self.repair.generate is not None
        self._count("repair")
        edge = min(REPAIR_LONG_EDGE, max(im.width, im.height))
        scale = edge / max(im.width, im.height)
        size = (max(16, round(im.width * scale / 16) * 16), max(16, round(im.height * scale / 16) * 16))
        text = prompt("repair").format(reason=reason, fence=fence_code(reason))
        request = Request(
            f"prepare/repair/{im.sha[:16]}",
            (InputMessage("user", (InputText(text), InputImage(data, im.sha, im.width, im.height))),),
            seed=0,
            size=size,
        )
        try:
            new = self.repair.generate(request)
            repaired = self.decode(new)
        except Refused as exc:
            return f"the repair model refused ({exc})"
        except ImageProblem as exc:
            return f"the repair is not a usable image ({exc})"
        except (Transient, Malformed, RuntimeError) as exc:
            with self._lock:
                self.errors += 1
            return f"the repair model failed: {exc}"
        self.store(new, repaired.sha, repaired.ext)
        return repaired, new

    def route(self, images: list[_Image]) -> tuple[Scenario | None, str]:
        """The filter VLM's scenario for a group, or None and why."""
        assert self.filter.answer is not None
        self._count("route")
        shown = images[:ROUTE_IMAGES]
        parts: list[InputText | InputImage] = [InputText(prompt("route"))]
        parts += [InputImage(self.load(im), im.sha, im.width, im.height) for im in shown]
        key = sha256_hex("".join(im.sha for im in shown).encode())[:16]
        try:
            reply = ask_json(self.filter.answer, f"prepare/route/{key}", parts, RouteReply)
        except Refused as exc:
            return None, f"the router refused ({exc})"
        except (ValueError, Transient, Malformed, RuntimeError) as exc:
            self._failed("router", exc)
            return None, f"the router failed: {exc}"
        return reply.scenario, reply.reason


STAND_INS = "stand-ins"
"""``--filter``/``--repair`` value for the world-backed stand-ins on a loopback server (offline)."""
WORLD_POOL = re.compile(r"world:(\d+)(?:@(\d+))?")
"""``world:N[@SEED]``: a pool of the world's pictures, N dialogues' worth per scenario (offline)."""


def pool_entries(
    pool: Path, fmt: PoolFormat, image_column: str | None, group_column: str | None, max_bytes: int
) -> Iterator[PoolEntry]:
    """The entries of a pool path, or of a ``world:N[@SEED]`` pool."""
    m = WORLD_POOL.fullmatch(str(pool))
    if m is not None:
        from yanami.construct._standins import world_pool

        return world_pool(int(m[1]), int(m[2] or 42))
    return read_pool(pool, fmt, image_column=image_column, group_column=group_column, max_bytes=max_bytes)


def stand_in_model(name: str, url: str, cache: ResponseCache, *, answers: bool) -> Model:
    """A model config for a stand-in on the loopback server at ``url``: one that answers (a chat
    model) or one that makes images."""
    from yanami.models import ModelConfig, model_from_config

    role = {"chat_model": name} if answers else {"image_model": name}
    # the stand-ins' server takes any size, as a local server does: the frame itself is asked for
    config = ModelConfig.model_validate({"kind": "openai", "name": name, "base_url": f"{url}/v1", "max_concurrency": 64,
                                         "requests_per_minute": 1e7, "sizes": ("frame",), **role})  # fmt: skip
    return model_from_config(config, cache)


def prepare(
    pool: Path,
    out: Path,
    *,
    filter_spec: str,
    repair_spec: str | None = None,
    routes: Path | None = None,
    rounds: int = DEFAULT_ROUNDS,
    fmt: PoolFormat = "auto",
    image_column: str | None = None,
    group_column: str | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    max_bytes: int = DEFAULT_MAX_BYTES,
    concurrency: int = 4,
    cache: Path | None = None,
    on_progress: Progress = _progress_noop,
) -> PrepareSummary:
    """Prepare ``pool`` into ``out`` (see the module docstring)."""
    route_map = load_routes(routes) if routes is not None else {}
    if not WORLD_POOL.fullmatch(str(pool)):
        fmt = pool_format(pool, fmt)  # a missing or unreadable kind of pool stops here, before OUT exists
        if fmt == "folder":
            check_groups(pool)  # and so does a groups.jsonl with a bad line (a path no file can have, say)
    settings: dict[str, Any] = {
        "pool": str(pool) if WORLD_POOL.fullmatch(str(pool)) else str(pool.resolve()),
        "format": fmt,
        "image_column": image_column,
        "group_column": group_column,
        "filter": filter_spec,
        "repair": repair_spec,
        "rounds": rounds,
        "routes": {k: v.value for k, v in sorted(route_map.items())} if routes else None,
        "max_pixels": max_pixels,
        "max_bytes": max_bytes,
        "prompt_version": PROMPT_VERSION,
    }
    response_cache = ResponseCache(cache or out / "cache.sqlite")  # opened on first use
    with contextlib.ExitStack() as stack:
        stack.callback(response_cache.close)
        if STAND_INS in (filter_spec, repair_spec):
            from yanami.construct._standins import StandIns
            from yanami.models.fake import FakeServer

            server = stack.enter_context(FakeServer(brain=StandIns().brain))
            filter_model = stand_in_model("stand-in-filter", server.url, response_cache, answers=True)
            repair_model = (
                stand_in_model("stand-in-repair", server.url, response_cache, answers=False) if repair_spec else None
            )
        else:
            filter_model = load_model(filter_spec, response_cache)
            repair_model = load_model(repair_spec, response_cache) if repair_spec else None
        if filter_model.answer is None:
            raise UserError(f"--filter {filter_spec}: the filter must answer (a chat_model that takes images)")
        if repair_model is not None and repair_model.generate is None:
            raise UserError(f"--repair {repair_spec}: the repair model must make images (an image_model)")
        stack.enter_context(_open_out(out, settings))  # only once every option has been checked
        settings["filter_model"] = filter_model.name
        settings["repair_model"] = repair_model.name if repair_model else None
        p = _Preparer(out, filter_model, repair_model, rounds, max_pixels)
        return _run(p, pool, out, settings, route_map, fmt, image_column, group_column, max_bytes, concurrency,
                    on_progress)  # fmt: skip


def _open_out(out: Path, settings: dict[str, Any]) -> DirLock:
    """Create OUT, or check that it holds a preparation: a finished one (with its manifest) only
    of the same command; an unfinished one may continue with other settings (what it wrote is
    recomputed, and its answers are cached per request). OUT stays locked while the preparation
    writes it (`DirLock`): a second ``prepare`` on it stops at once; the temporary files a killed
    one left are removed as the lock is taken."""
    text = json.dumps(settings, indent=2, sort_keys=True) + "\n"
    if out.exists():
        if not out.is_dir():
            raise UserError(f"{out}: exists and is not a folder")
        if not (out / SETTINGS).is_file() and any(p.name != LOCK for p in out.iterdir()):
            raise UserError(f"{out}: exists and is not a prepared pool; refusing to write into it")
    elif not out.parent.is_dir():
        raise UserError(f"{out}: the folder {out.parent} does not exist")
    out.mkdir(exist_ok=True)
    lock = DirLock(out)
    try:  # checked again under the lock: another preparation may have written it meanwhile
        _remove_leftovers(out)
        mine = out / SETTINGS
        if mine.is_file() and (out / MANIFEST).is_file() and mine.read_text(encoding="utf-8") != text:
            raise UserError(f"{out}: was prepared with other settings ({mine}); choose another --out")
        atomic_write(out / SETTINGS, text)
    except BaseException:
        lock.release()
        raise
    return lock


def _remove_leftovers(out: Path) -> None:
    """Remove the temporary files a killed preparation left in OUT (`atomic_write`'s hidden
    ``.NAME.….tmp``, beside a file it wrote or an image it stored): OUT is locked, so no other
    process is writing one."""
    for stale in [*out.glob(".*.tmp"), *out.glob("images/*/.*.tmp")]:
        stale.unlink(missing_ok=True)


def _run(
    p: _Preparer,
    pool: Path,
    out: Path,
    settings: dict[str, Any],
    route_map: dict[str, Scenario],
    fmt: PoolFormat,
    image_column: str | None,
    group_column: str | None,
    max_bytes: int,
    concurrency: int,
    on_progress: Progress,
) -> PrepareSummary:
    # 1. read, decode, fold duplicates; the bytes go to OUT/images as they come (memory stays flat)
    labels: list[Label] = []
    decoded: dict[str, _Image] = {}
    groups: dict[str, list[int]] = {}
    pool_scenario: dict[str, str] = {}
    for entry in pool_entries(pool, fmt, image_column, group_column, max_bytes):
        groups.setdefault(entry.group, []).append(len(labels))
        if entry.scenario and entry.group not in pool_scenario:
            pool_scenario[entry.group] = entry.scenario
        labels.append(_ingest(p, entry, decoded))
        on_progress("reading", len(labels), 0)
    if unknown := [g for g in route_map if g not in groups]:
        raise UserError(f"--routes: no group named {unknown[0]!r} in {pool}")

    # 2. the filter, on every distinct image on its own
    verdicts: dict[str, _Verdict] = {}
    todo = list(decoded.values())
    with ThreadPoolExecutor(max_workers=concurrency) as ex:
        for k, (im, v) in enumerate(zip(todo, ex.map(lambda im: p.screen(im, p.load(im)), todo), strict=True), 1):
            verdicts[im.sha] = v
            on_progress("filtering", k, len(todo))

    # 3. per group: the group rule, repairs, routing
    names = list(groups)

    def settle(name: str) -> Group:
        members = [labels[i] for i in groups[name]]
        group = _settle(p, name, members, decoded, verdicts, route_map, pool_scenario)
        if group.status == "dropped":  # what passed goes with its group, and says why
            for lab in members:
                if lab.status in ("kept", "repaired"):
                    lab.status, lab.reason = "dropped", f"its group was dropped: {group.reason}"
        return group

    results: list[Group] = []
    with ThreadPoolExecutor(max_workers=concurrency) as ex:
        for k, g in enumerate(ex.map(settle, names), 1):
            results.append(g)
            on_progress("repairing and routing", k, len(names))

    # 4. write: the labels, the groups, then the manifest; images no group kept are removed
    kept = {sha for g in results for sha in g.images}
    for path in (out / "images").glob("*/*"):
        if path.stem not in kept:
            path.unlink()
    counts = _counts(labels, results)
    by_scenario = Counter(g.scenario.value for g in results if g.scenario is not None and g.status == "kept")
    manifest = PoolManifest(
        settings=settings,
        counts=counts,
        by_scenario={s.value: by_scenario[s.value] for s in Scenario},
        images_sha256=images_digest(sorted(kept)),
    )
    (out / MANIFEST).unlink(missing_ok=True)  # no manifest: a reader knows the folder is not finished
    atomic_write(out / LABELS, "".join(lab.model_dump_json() + "\n" for lab in labels))
    atomic_write(out / GROUPS, "".join(g.model_dump_json() + "\n" for g in results))
    atomic_write(out / MANIFEST, manifest.model_dump_json(indent=2) + "\n")
    reasons = Counter(g.reason.split(" (")[0] for g in results if g.status == "dropped")
    return PrepareSummary(out, counts, manifest.by_scenario, dict(reasons), p.errors, dict(p.calls))


def _ingest(p: _Preparer, entry: PoolEntry, decoded: dict[str, _Image]) -> Label:
    if entry.data is None:
        return Label(source=entry.source, group=entry.group, sha256=None, status="unreadable",
                     reason=entry.problem or "unreadable")  # fmt: skip
    sha = sha256_hex(entry.data)
    if sha in decoded:
        return Label(source=entry.source, group=entry.group, sha256=sha, status="duplicate",
                     reason=f"the same bytes as an earlier entry ({sha[:12]})")  # fmt: skip
    try:
        im = p.decode(entry.data)
    except ImageProblem as exc:
        return Label(source=entry.source, group=entry.group, sha256=sha, status="unreadable", reason=str(exc))
    p.store(entry.data, im.sha, im.ext)
    decoded[sha] = im
    return Label(source=entry.source, group=entry.group, sha256=sha, status="kept")


def _settle(
    p: _Preparer,
    name: str,
    members: list[Label],
    decoded: dict[str, _Image],
    verdicts: dict[str, _Verdict],
    route_map: dict[str, Scenario],
    pool_scenario: dict[str, str],
) -> Group:
    """Apply the group rule, repair what may be repaired, route what is kept (labels updated in place)."""
    own = [lab for lab in members if lab.status != "duplicate"]  # a duplicate belongs to its first group
    for lab in own:
        if lab.status == "kept":
            v = verdicts[lab.sha256 or ""]
            lab.category, lab.reason = v.category, v.reason
            if not v.keep:
                lab.status = "rejected"
    rejected = [lab for lab in own if lab.status in ("rejected", "unreadable")]
    if not own:
        return Group(group=name, status="dropped", reason="every entry repeats an image of another group")
    if 2 * len(rejected) > len(own):
        return Group(group=name, status="dropped",
                     reason=f"more than half of the group rejected ({len(rejected)} of {len(own)})")  # fmt: skip
    for lab in own:
        if lab.status == "rejected" and p.repair is not None and not verdicts[lab.sha256 or ""].error:
            _repair(p, lab, decoded[lab.sha256 or ""])
    images = [lab.image or lab.sha256 for lab in own if lab.status in ("kept", "repaired")]
    shas = [s for s in images if s]
    if not shas:
        return Group(group=name, status="dropped", reason="no image of the group is left")
    scenario: Scenario | None
    by: Literal["routes", "pool", "filter"]
    if name in route_map:
        scenario, by, why = route_map[name], "routes", ""
    elif name in pool_scenario:
        try:
            scenario, by, why = Scenario(pool_scenario[name]), "pool", ""
        except ValueError:
            return Group(group=name, status="dropped", images=shas,
                         reason=f"the pool names an unknown scenario {pool_scenario[name]!r}")  # fmt: skip
    else:
        known = {**decoded, **p.repaired}
        scenario, why = p.route([known[s] for s in shas])
        by = "filter"
        if scenario is None:
            return Group(group=name, status="dropped", reason=why, images=shas)
    need = FACTS[scenario].min_pool_images
    if len(shas) < need:
        return Group(group=name, status="dropped", scenario=scenario, routed_by=by, images=shas,
                     reason=f"{scenario.value} needs at least {need} images, the group has {len(shas)}")  # fmt: skip
    return Group(group=name, status="kept", scenario=scenario, routed_by=by, reason=why, images=shas)


def _repair(p: _Preparer, lab: Label, im: _Image) -> None:
    data = p.load(im)
    reason = lab.reason or lab.category or "rejected"
    for k in range(1, p.rounds + 1):
        lab.repair_rounds = k
        made = p.mend(im, data, reason)
        if isinstance(made, str):
            lab.reason = f"{lab.reason}; {made}"
            return
        im, data = made
        with p._lock:
            p.repaired[im.sha] = im
        v = p.screen(im, data)
        if v.keep:
            lab.status, lab.image = "repaired", im.sha
            return
        reason = v.reason or v.category
    lab.reason = f"{lab.reason}; still rejected after {p.rounds} repair round(s) ({reason})"


def _counts(labels: Iterable[Label], groups: list[Group]) -> dict[str, int]:
    status = Counter(lab.status for lab in labels)
    categories = Counter(lab.category for lab in labels if lab.category and lab.category != "usable")
    out = {"entries": sum(status.values())}
    out |= {s: status[s] for s in ("kept", "repaired", "rejected", "unreadable", "duplicate", "dropped")}
    out |= {f"rejected_{c}": n for c, n in sorted(categories.items())}
    out["groups"] = len(groups)
    out["groups_kept"] = sum(g.status == "kept" for g in groups)
    out["groups_dropped"] = sum(g.status == "dropped" for g in groups)
    out["images"] = len({s for g in groups for s in g.images})
    return out
