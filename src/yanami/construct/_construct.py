"""Stages b and c of the paper's pipeline: dialogues written by an author LLM over a prepared
pool, their images made by an image model, both verified and repaired, with provenance and cost.

``construct(POOLDIR, OUT, author=…, image_model=…, verifier=…)`` plans the dialogues like
``yanami build`` does (a preset, ``per_scenario`` or ``dialogues``, the scenarios interleaved)
and gives dialogue *k* of a scenario a group of that scenario's pool (in an order drawn from
the seed) and at least four of the scenario's capabilities (drawn from the seed). Then, per
dialogue and on its own:

1. **plan** (stage b): the author template filled (scenario × capabilities × the split, the pool
   notes fenced as data, the plan's JSON Schema) and sent with the group's pictures. The reply
   must parse as a `Plan`, pass `plan_problems` (references resolve, turn order, constraints not
   broken by the plan's own instructions, a bench's checks and questions) and the verifier's
   logic review; otherwise the problems go back to the author (``revise-plan``), at most
   ``rounds`` times.
2. **images** (stages b and c): each assistant image generated or edited from its inputs at the
   output frame of its first input (or of the first pool picture), then checked by the verifier
   against its instruction and its checks; a failure goes back to the image model with the
   finding (``revise-image``), at most ``rounds`` times.
3. **probe** (optional): a target turn keeps its checks only if a history-free attempt (the
   turn's user message alone) fails them.
4. **assemble**: `plan_dialogue`, validated like any dataset line, with the provenance in
   ``meta.params["construct"]``.

The construction store beside OUT (``OUT.construct/``) keeps the settings, the response cache,
the images made, and ``construction.sqlite``: every call (role, stage, model, status, tokens,
images, latency, cost) and every settled dialogue (accepted with its line, rejected with its
stage and reason). A rerun of the same command skips settled dialogues and answers repeated
requests from the cache: kill it at any moment and nothing paid for is paid again. OUT is
written from the store, in plan order, when the run ends: byte-identical for the same
responses whatever the concurrency.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import io
import json
import pickle
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, ValidationError

from yanami import __version__
from yanami._lock import LOCK, DirLock
from yanami.construct._plan import MIN_CAPABILITIES, Plan, PlanTurn, plan_dialogue, plan_problems, plan_schema
from yanami.construct._prepare import GROUPS, MANIFEST, STAND_INS, Group, Label, PoolManifest
from yanami.construct._templates import Templates
from yanami.contract import (
    FACTS,
    PRESETS,
    Capability,
    Dialogue,
    DialogueMeta,
    ImagePart,
    ImageSource,
    InputImage,
    InputMessage,
    InputText,
    Model,
    Refused,
    Request,
    Scenario,
    UserError,
    atomic_write,
    derived,
    output_frame,
    seeded,
    sha256_hex,
)
from yanami.judges import ask_json, fence_code, parse_reply_source
from yanami.models import CutOff, Fatal, Malformed, ResponseCache, Transient, Usage, load_model
from yanami.scale import Executor, LocalExecutor, RayExecutor, check_backend, share_endpoint_limits
from yanami.store import (
    DEFAULT_MAX_PIXELS,
    DatasetWriter,
    Generator,
    ImageProblem,
    image_header,
    image_info,
    image_relpath,
)

if TYPE_CHECKING:
    from yanami.models import ModelConfig

STORE_SUFFIX = ".construct"
SETTINGS = "settings.json"
SUMMARY = "summary.json"
LEDGER = "construction.sqlite"
DEFAULT_ROUNDS = 2
"""Revisions per plan, and new attempts per image, at most."""
PLAN_MAX_TOKENS = 16_384
"""Asked of the author (a config file's ``max_tokens``, where set, is what it gets instead)."""
DRY_RUN_SAMPLE = 8
"""Dialogues a dry run makes to estimate the whole construction."""
CHARS_PER_TOKEN = 3
"""For the budget's estimate of a call's input tokens (conservative: real text is nearer 4)."""
FIRST_REPLY_TOKENS = 2_048
"""For the budget's estimate of a reply before any of its kind came back (then their mean)."""
TOKENS_PER_IMAGE = 1_500
"""For the budget's estimate of an input image (a 512-px picture is about 800 tokens for most VLMs)."""
SHOWS_WHAT_WAS_ASKED = "The image shows everything the request describes, and nothing it excludes."
"""The statement every made image is checked on, beside the turn's own checks."""

Role = Literal["author", "image_model", "verifier"]
Stage = Literal["plan", "image", "probe", "assemble"]
_T = TypeVar("_T")
_Reply = TypeVar("_Reply", bound=BaseModel)


class LogicProblem(BaseModel):
    model_config = ConfigDict(extra="ignore")
    turn: int | None = None
    problem: str


class LogicReply(BaseModel):
    """The verifier's review of a plan."""

    model_config = ConfigDict(extra="ignore")
    passed: bool
    problems: list[LogicProblem] = []


class ImageReply(BaseModel):
    """The verifier's verdicts on one image, by statement id."""

    model_config = ConfigDict(extra="ignore")
    verdicts: dict[str, bool]
    reason: str = ""


class _Reject(Exception):
    def __init__(self, stage: Stage, reason: str) -> None:
        super().__init__(reason)
        self.stage = stage
        self.reason = reason


class BudgetReached(Exception):
    """The next call could take the spending past ``--budget``."""


@dataclass(frozen=True)
class _Task:
    k: int
    scenario: Scenario
    id: str
    group: Group
    requested: list[Capability]


@dataclass
class _Picture:
    part: ImagePart
    data: bytes

    def input(self) -> InputImage:
        return InputImage(self.data, self.part.sha256, self.part.width, self.part.height)


@dataclass
class ConstructSummary:
    """What a construction did (also ``summary.json`` in the store)."""

    out: Path
    store: Path
    planned: int
    accepted: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    """``stage: reason`` -> dialogues."""
    errors: int = 0
    """Dialogues whose calls failed for now (the same command retries them)."""
    pending: int = 0
    """Dialogues not reached (a budget stop, a dry run)."""
    plan_rounds: dict[str, int] = field(default_factory=dict)
    """Revisions a settled plan needed -> dialogues."""
    image_rounds: dict[str, int] = field(default_factory=dict)
    """New attempts an image needed -> images."""
    calls: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per role: requests answered by the server (``paid``) and by the cache (``cached``), failures."""
    tokens_in: int = 0
    tokens_out: int = 0
    images_made: int = 0
    cost: float = 0.0
    budget: float | None = None
    stopped: str = ""
    """Why the run stopped before every dialogue settled (``budget``), if it did."""
    faults: dict[str, dict[str, int]] = field(default_factory=dict)
    """With stand-ins and ``--faults``: injected faults per kind, and how many the checks caught."""
    false_alarms: dict[str, str] = field(default_factory=dict)
    """Per stage: first attempts without an injected fault that were rejected anyway, ``n/m``."""
    estimate: dict[str, float] = field(default_factory=dict)
    """A dry run's extrapolation: ``cost``, ``seconds`` (at the given concurrency), from ``sample``."""
    written: bool = False

    def lines(self) -> list[str]:
        """The construction's summary, a line each, as ``yanami construct`` prints it."""
        s = self
        lines = []
        if s.estimate:
            e = s.estimate
            lines.append(
                f"dry run: {int(e['sample'])} dialogue(s) made in {s.store}; for all {s.planned}: about "
                f"{e['cost']:g} in cost and {e['seconds']:g} s at this concurrency "
                f"({e['cost_per_dialogue']:g} and {e['seconds_per_dialogue']:g} s of calls per dialogue)"
            )
        else:
            where = f"{s.out}" if s.written else "(nothing written)"
            lines.append(
                f"{where}: {s.accepted} of {s.planned} dialogues accepted, {sum(s.rejected.values())} rejected, "
                f"{s.errors} failed for now, {s.pending} not made"
            )
        for reason, n in sorted(s.rejected.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"  rejected: {n}: {reason}")
        rounds = ", ".join(f"{k}: {v}" for k, v in s.plan_rounds.items())
        image_rounds = ", ".join(f"{k}: {v}" for k, v in s.image_rounds.items())
        lines.append(f"revisions per plan: {rounds or '-'}; new attempts per image: {image_rounds or '-'}")
        calls = "; ".join(
            f"{role} {c['paid']} paid, {c['cached']} cached, {c['failed']} failed"
            + (
                f", {c['interrupted']} interrupted (sent, never answered: counted at their estimate)"
                if c.get("interrupted")
                else ""
            )
            for role, c in sorted(s.calls.items())
        )
        lines.append(f"calls: {calls or 'none'}")
        budget = f" of a budget of {s.budget:g}" if s.budget is not None else ""
        lines.append(
            f"tokens {s.tokens_in:,} in, {s.tokens_out:,} out; {s.images_made} images made; cost {s.cost:g}{budget}"
        )
        for kind, f in s.faults.items():
            by = ", ".join(f"{k[len('caught_by_') :]} {v}" for k, v in sorted(f.items()) if k.startswith("caught_by_"))
            lines.append(
                f"injected {kind}: {f.get('caught', 0)} of {f.get('injected', 0)} caught"
                + (f" (by {by})" if by else "")
            )
        if s.faults:
            alarms = ", ".join(f"{k} {v}" for k, v in s.false_alarms.items())
            lines.append(f"false alarms on clean first attempts: {alarms}")
        lines.append(f"store: {s.store} (calls, verdicts, summary.json)")
        return lines

    def as_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("out", "store")}
        return {"out": str(self.out), "store": str(self.store), **out}


Progress = Callable[[str, int, int], None]


def _progress_noop(stage: str, done: int, total: int) -> None:
    pass


def store_path(out: Path) -> Path:
    """The construction store of an output folder: ``OUT.construct`` beside it."""
    return out.parent / f"{out.name}{STORE_SUFFIX}"


def _int_seed(*parts: object) -> int:
    return derived(*parts, bits=32) % 2**31


# the ledger -----------------------------------------------------------------------------------


def _provenance(config: ModelConfig | None, request: Request, kind: str) -> tuple[str, str]:
    """Where a call went (the endpoint's host) and with what sampling parameters, as the ledger
    keeps them beside the model the server says answered."""
    if config is None:
        return "", "{}"
    host = urlsplit(config.base_url).netloc if config.base_url else ""
    params: dict[str, Any] = {"seed": request.seed}
    if kind == "image":
        params["size"] = f"{request.size[0]}x{request.size[1]}"
    else:
        params |= {"temperature": config.temperature, "max_tokens": config.tokens(request.max_tokens)}
    return host, json.dumps(params, sort_keys=True)


class _Ledger:
    """``construction.sqlite``: every call, every settled dialogue (one connection, one lock).

    On Ray every actor has its own connection to the same file (``recover=False``: the calls
    other processes have in flight are theirs, not a killed run's); SQLite's lock orders the
    writes of them all, and the driver's."""

    def __init__(self, path: Path, *, recover: bool = True) -> None:
        self._lock = threading.Lock()
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=60)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        # both tables in one transaction: a reader never sees the file with one of them
        self.db.executescript(
            "BEGIN; CREATE TABLE IF NOT EXISTS calls (k INTEGER, role TEXT, stage TEXT, model TEXT, status TEXT,"
            " cached INTEGER, tokens_in INTEGER, tokens_out INTEGER, images INTEGER, latency_s REAL, cost REAL,"
            " served_model TEXT, endpoint TEXT, params TEXT);"
            " CREATE TABLE IF NOT EXISTS dialogues (k INTEGER PRIMARY KEY, id TEXT, scenario TEXT, status TEXT,"
            " stage TEXT, reason TEXT, record TEXT, line TEXT); COMMIT;"
        )
        have = {row[1] for row in self.db.execute("PRAGMA table_info(calls)")}
        for column in ("served_model", "endpoint", "params"):  # a store an older yanami began
            if column not in have:
                self.db.execute(f"ALTER TABLE calls ADD COLUMN {column} TEXT")
        if recover:  # calls a killed run sent and never saw end: their estimated cost stays counted as spent
            self.db.execute("UPDATE calls SET status = 'interrupted' WHERE status = 'sent'")
        self.spent = float(self.db.execute("SELECT COALESCE(SUM(cost), 0) FROM calls").fetchone()[0])

    def begin(self, k: int, role: str, stage: str, model: str, estimate: float, provenance: tuple[str, str]) -> int:
        """A call about to be sent, recorded first (status ``sent``, its estimated cost): one that
        never comes back (``kill -9``) is still known, and counted as spent; the row's id."""
        with self._lock:
            cur = self.db.execute(
                "INSERT INTO calls (k, role, stage, model, status, cached, tokens_in, tokens_out, images, latency_s,"
                " cost, served_model, endpoint, params) VALUES (?,?,?,?,'sent',0,0,0,0,0.0,?,'',?,?)",
                (k, role, stage, model, estimate, *provenance),
            )
            self.spent += estimate
            return int(cur.lastrowid or 0)

    def finish(self, row: int, status: str, usage: Usage | None, cost: float, estimate: float) -> None:
        """How the call ``row`` ended: its outcome, usage and cost (the estimate gives way to it), and
        the model the server says answered."""
        values = (status, int(bool(usage and usage.cached)), usage.tokens_in if usage else 0,
                  usage.tokens_out if usage else 0, usage.images_out if usage else 0,
                  usage.latency_s if usage else 0.0, cost, usage.served_model if usage else "", row)  # fmt: skip
        with self._lock:
            self.db.execute(
                "UPDATE calls SET status=?, cached=?, tokens_in=?, tokens_out=?, images=?, latency_s=?, cost=?,"
                " served_model=? WHERE rowid=?",
                values,
            )
            self.spent += cost - estimate

    def settle(self, t: _Task, status: str, stage: str, reason: str, record: dict[str, Any], line: str) -> None:
        with self._lock:
            self.db.execute(
                "INSERT OR REPLACE INTO dialogues VALUES (?,?,?,?,?,?,?,?)",
                (t.k, t.id, t.scenario.value, status, stage, reason, json.dumps(record, sort_keys=True), line),
            )

    def settled(self) -> set[int]:
        rows = self.db.execute("SELECT k FROM dialogues WHERE status IN ('accepted', 'rejected')")
        return {k for (k,) in rows}

    def rows(self, status: str) -> Iterator[tuple[int, str, str, str, str]]:
        yield from self.db.execute(
            "SELECT k, stage, reason, record, line FROM dialogues WHERE status = ? ORDER BY k", (status,)
        )

    def close(self) -> None:
        self.db.close()


# the constructor ----------------------------------------------------------------------------


class _Constructor:
    def __init__(
        self,
        *,
        pooldir: Path,
        store: Path,
        models: dict[Role, Model],
        templates: Templates,
        bench: bool,
        rounds: int,
        probe: bool,
        seed: int,
        budget: float | None,
        fault_rate: float | None,
        ledger: _Ledger,
    ) -> None:
        self.pooldir = pooldir
        self.store = store
        self.models = models
        self.templates = templates
        self.bench = bench
        self.rounds = rounds
        self.probe = probe
        self.seed = seed
        self.budget = budget
        self.fault_rate = fault_rate
        self.ledger = ledger
        self.stop = threading.Event()
        self.gate: _SharedBudget | None = None
        """On Ray: the cluster's budget, asked before every call instead of this process's own count."""
        self._reserved = 0.0
        self._replies: dict[tuple[str, str], tuple[int, int]] = {}
        """(model, kind) -> (replies paid for, their output tokens): what the budget expects of the next."""
        self._lock = threading.Lock()
        self._schema = plan_schema()
        self._schema_text = json.dumps(self._schema, separators=(",", ":"))
        self._pool_paths = {p.stem: p for p in (pooldir / "images").glob("*/*")}

    # calls --------------------------------------------------------------------------------

    def _estimate(self, model: Model, request: Request, kind: str) -> float:
        config = getattr(model, "config", None)
        if config is None or config.prices is None:
            return 0.0
        chars = sum(len(p.text) for m in request.messages for p in m.parts if isinstance(p, InputText))
        tokens_in = chars // CHARS_PER_TOKEN + TOKENS_PER_IMAGE * len(request.images())
        if kind == "image":
            return float(config.cost(tokens_in, 0, 1))
        # the reply's length as this role's replies have run so far (its limit is the worst case,
        # which would hold back far more than one dialogue costs); before any reply, a plausible one
        done, total = self._replies.get((model.name, kind), (0, 0))
        asked = config.tokens(request.max_tokens) or FIRST_REPLY_TOKENS
        typical = total / done if done else min(asked, FIRST_REPLY_TOKENS)
        return float(config.cost(tokens_in, round(typical), 0))

    def call(self, t: _Task, role: Role, stage: Stage, kind: str, fn: Callable[[Request], _T], request: Request) -> _T:
        """One request of a dialogue: gated by the budget, recorded in the ledger however it ends."""
        model = self.models[role]
        reserve = self._estimate(model, request, kind)
        gate = self.gate
        if gate is not None:
            if self.stop.is_set():
                raise BudgetReached
            gate.reserve(reserve, self.stop)  # the cluster's spending, not this process's
        else:
            with self._lock:
                if self.stop.is_set():
                    raise BudgetReached
                if self.budget is not None and self.ledger.spent + self._reserved + reserve > self.budget:
                    self.stop.set()
                    raise BudgetReached
                self._reserved += reserve
        provenance = _provenance(getattr(model, "config", None), request, kind)
        try:
            row = self.ledger.begin(t.k, role, stage, model.name, reserve, provenance)
        except BaseException:
            if gate is not None:
                gate.settle(-reserve)
            else:
                with self._lock:
                    self._reserved -= reserve
            raise
        if gate is None:
            with self._lock:
                self._reserved -= reserve  # now counted as spent, until the call's own cost replaces it
        status = "ok"
        try:
            return fn(request)
        except Refused:
            status = "refused"
            raise
        except Malformed:
            status = "malformed"
            raise
        except Fatal:
            status = "fatal"
            raise
        except Transient:
            status = "failed"
            raise
        except Exception:
            status = "error"
            raise
        finally:
            usage = model.last_usage() if hasattr(model, "last_usage") else None
            config = getattr(model, "config", None)
            cost = 0.0
            if usage is not None and not usage.cached and config is not None:
                cost = float(config.cost(usage.tokens_in, usage.tokens_out, usage.images_out))
            with self._lock:
                if usage is not None and not usage.cached and kind != "image":
                    done, total = self._replies.get((model.name, kind), (0, 0))
                    self._replies[(model.name, kind)] = (done + 1, total + usage.tokens_out)
            self.ledger.finish(row, status, usage, cost, reserve)
            if gate is not None:
                gate.settle(cost - reserve)

    def ask(
        self, t: _Task, stage: Stage, item: str, parts: list[InputText | InputImage], schema: type[_Reply]
    ) -> _Reply:
        """A JSON question to the verifier (one repair request on an invalid reply)."""
        verifier = self.models["verifier"]
        assert verifier.answer is not None
        answer = verifier.answer

        def counted(request: Request) -> str:
            return self.call(t, "verifier", stage, "text", answer, request)

        try:
            result: _Reply = ask_json(counted, item, parts, schema)
        except Refused as exc:
            raise _Reject(stage, f"the verifier refused ({exc})") from None
        except (ValueError, Malformed) as exc:
            raise _Reject(stage, f"the verifier's reply stayed invalid ({exc})") from None
        return result

    # the pool -------------------------------------------------------------------------------

    def pictures(self, group: Group) -> list[_Picture]:
        out = []
        for sha in group.images:
            path = self._pool_paths.get(sha)
            if path is None:
                raise UserError(f"{self.pooldir}: image {sha} of group {group.group} is missing from images/")
            data = path.read_bytes()
            fmt, width, height = image_header(data)  # decoded in full when the pool was prepared
            out.append(_Picture(ImagePart(sha256=sha, format=fmt, width=width, height=height,
                                          source=ImageSource.USER), data))  # fmt: skip
        return out

    def notes(self, group: Group, labels: dict[str, Label]) -> str:
        lines = [f"group: {group.group}", f"pictures: {len(group.images)}"]
        for n, sha in enumerate(group.images, 1):
            lab = labels.get(sha)
            if lab is not None:
                why = f" ({lab.reason})" if lab.reason else ""
                lines.append(f"picture {n}: {lab.source.rsplit('/', 1)[-1]}{why}")
        return "\n".join(lines)

    # one dialogue -----------------------------------------------------------------------------

    def one(self, t: _Task, notes: str) -> tuple[str, str, str, dict[str, Any], str]:
        """(status, stage, reason, record, line) of one dialogue; BudgetReached and Fatal pass through."""
        record: dict[str, Any] = {"group": t.group.group, "requested": [c.value for c in t.requested]}
        try:
            offered = self.pictures(t.group)
            plan = self.plan(t, offered, notes, record)
            made = self.realize(t, plan, offered, record)
            if self.probe and self.bench:
                plan = self.run_probe(t, plan, offered, made, record)
            d = self.assemble(t, plan, offered, made, record)
        except _Reject as r:
            return "rejected", r.stage, r.reason, record, ""
        except (Transient, RuntimeError, OSError) as exc:
            return "error", "", f"{type(exc).__name__}: {exc}", record, ""
        for pic in made.values():
            path = self.store / image_relpath(pic.part.sha256, pic.part.format)
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(path, pic.data, fsync=False)
        return "accepted", "", "", record, d.model_dump_json()

    def plan(self, t: _Task, offered: list[_Picture], notes: str, record: dict[str, Any]) -> Plan:
        author = self.models["author"]
        assert author.answer is not None
        answer = author.answer
        tp = self.templates
        _, scenario_text = tp.scenario(t.scenario)
        caps_text = "\n".join(f"- {c.value}: {tp.get(f'capabilities/{c.value}').text.strip()}" for c in t.requested)
        text = tp.get("author").fill(
            scenario_title=FACTS[t.scenario].title,
            scenario_text=scenario_text,
            capabilities_text=caps_text,
            offered=len(offered),
            fence=fence_code(notes),
            pool_notes=notes,
            split_text=tp.get("split-bench" if self.bench else "split-train").text.strip(),
            schema=self._schema_text,
        )
        messages = [InputMessage("user", (InputText(text), *(p.input() for p in offered)))]
        rounds: list[dict[str, Any]] = []
        record["plan"] = {"model": author.name, "rounds": rounds}
        problems: list[str] = []
        for r in range(self.rounds + 1):
            request = Request(f"{t.id}/plan", tuple(messages), seed=_int_seed(self.seed, t.id, "plan"),
                              size=(512, 512), max_tokens=PLAN_MAX_TOKENS,
                              json_schema=self._schema)  # fmt: skip
            try:
                raw = self.call(t, "author", "plan", "text", answer, request)
            except Refused as exc:
                raise _Reject("plan", f"the author refused ({exc})") from None
            except CutOff as exc:  # another round would be cut off the same way: say what to change
                raise _Reject("plan", f"the author's reply was {exc}") from None
            except Malformed as exc:
                raw, plan, problems, by = "", None, [f"reply: {exc}"], "reply"
            else:
                plan, problems, by = self._plan_problems(t, raw, len(offered))
            rounds.append({"round": r, "by": by, "problems": problems[:10]})
            if plan is not None and not problems:
                record["plan"]["logic"] = "passed"
                return plan
            listing = "\n".join(f"- {p}" for p in problems)
            revise = tp.get("revise-plan").fill(fence=fence_code(listing), problems=listing)
            messages += [InputMessage("assistant", (InputText(raw or "(no reply)"),)),
                         InputMessage("user", (InputText(revise),))]  # fmt: skip
        raise _Reject("plan", f"still invalid after {self.rounds} revision(s): {problems[0]}")

    def _plan_problems(self, t: _Task, raw: str, offered: int) -> tuple[Plan | None, list[str], str]:
        """The plan in a reply and what is wrong with it, and which check found it."""
        try:
            # shown: the author's own JSON, as it wrote it (its reasoning and prose left out)
            plan, shown = parse_reply_source(raw, Plan)
        except ValueError as exc:
            return None, [f"reply: {exc}"], "reply"
        problems = plan_problems(plan, offered, bench=self.bench, requested=t.requested)
        if problems:
            return plan, problems, "checks"
        prompt = self.templates.get("verify-logic").fill(
            fence=fence_code(shown),
            plan=shown,
            capabilities=", ".join(c.value for c in plan.capabilities),
            scenario_title=FACTS[t.scenario].title,
        )
        reply = self.ask(t, "plan", f"{t.id}/review", [InputText(prompt)], LogicReply)
        if reply.passed:
            return plan, [], "review"
        found = [f"turn {p.turn}: {p.problem}" if p.turn is not None else p.problem for p in reply.problems]
        return plan, found or ["the reviewer did not pass the plan (no reason given)"], "review"

    def realize(self, t: _Task, plan: Plan, offered: list[_Picture], record: dict[str, Any]) -> dict[int, _Picture]:
        made: dict[int, _Picture] = {}
        images: list[dict[str, Any]] = []
        record["images"] = images
        for i, turn in enumerate(plan.turns):
            if turn.image is None:
                continue
            inputs = [self._resolve(ref, offered, made) for ref in turn.image.inputs]
            first = inputs[0] if inputs else offered[0]
            frame = output_frame(first.part.width, first.part.height)
            statements = {"s0": SHOWS_WHAT_WAS_ASKED} | {c.id: c.text for c in turn.checks}
            made[i] = self._draw(t, i, turn, inputs, frame, statements, images)
        return made

    @staticmethod
    def _resolve(ref: str, offered: list[_Picture], made: dict[int, _Picture]) -> _Picture:
        kind, _, n = ref.partition(":")
        return offered[int(n) - 1] if kind == "pool" else made[int(n)]

    def _draw(
        self,
        t: _Task,
        i: int,
        turn: PlanTurn,
        inputs: list[_Picture],
        frame: tuple[int, int],
        statements: dict[str, str],
        images: list[dict[str, Any]],
    ) -> _Picture:
        """The turn's image, once the verifier passes it; its attempts are recorded in ``images``
        as they are made (a rejected dialogue's record shows what failed)."""
        image_model = self.models["image_model"]
        assert image_model.generate is not None and turn.image is not None
        generate = image_model.generate
        instruction = turn.image.instruction
        seed = _int_seed(self.seed, t.id, f"t{i}")
        info: dict[str, Any] = {"turn": i, "model": image_model.name, "mode": turn.image.mode, "inputs":
                                turn.image.inputs, "instruction": instruction, "seed": seed, "size": list(frame),
                                "attempts": []}  # fmt: skip
        images.append(info)
        prompt = instruction
        finding = ""
        for r in range(self.rounds + 1):
            parts: tuple[InputText | InputImage, ...] = (InputText(prompt), *(p.input() for p in inputs))
            request = Request(f"{t.id}/t{i}", (InputMessage("user", parts),), seed=seed, size=frame)
            try:
                pic = self._image(self.call(t, "image_model", "image", "image", generate, request), frame)
            except Refused as exc:
                raise _Reject("image", f"turn {i}: the image model refused ({exc})") from None
            except (Malformed, ImageProblem) as exc:
                finding = f"the image model returned no usable image ({exc})"
                info["attempts"].append({"round": r, "passed": False, "finding": finding})
            else:
                verdicts, finding = self._verify(t, "image", f"{t.id}/t{i}/verify", instruction, statements, pic)
                info["attempts"].append({"round": r, "passed": not finding, "verdicts": verdicts, "finding": finding,
                                         "sha256": pic.part.sha256})  # fmt: skip
                if not finding:
                    info["rounds"] = r
                    return pic
            prompt = self.templates.get("revise-image").fill(
                instruction=instruction, fence=fence_code(finding), finding=finding
            )
        raise _Reject("image", f"turn {i}: still failing after {self.rounds} new attempt(s): {finding}")

    def _image(self, data: bytes, frame: tuple[int, int]) -> _Picture:
        """The image model's output in the output frame: a picture of another size (an images API
        answers at the published size nearest the frame's aspect) is cut to the frame's aspect
        about its centre, then resized, so nothing in it is stretched.

        The adapter has verified the file's structure and checksums (`validate_image`); the
        header gives its format and size without decoding the pixels again."""
        fmt, width, height = image_header(data)
        if (width, height) != frame:
            from PIL import Image

            with Image.open(io.BytesIO(data)) as im:
                w, h = im.size
                keep_w, keep_h = min(w, round(h * frame[0] / frame[1])), min(h, round(w * frame[1] / frame[0]))
                box = ((w - keep_w) // 2, (h - keep_h) // 2, (w - keep_w) // 2 + keep_w, (h - keep_h) // 2 + keep_h)
                buf = io.BytesIO()
                im.convert("RGB").resize(frame, Image.Resampling.LANCZOS, box=box).save(buf, format="PNG")
            data = buf.getvalue()
            fmt, width, height = image_info(data, DEFAULT_MAX_PIXELS)
        part = ImagePart(sha256=sha256_hex(data), format=fmt, width=width, height=height, source=ImageSource.ASSISTANT)
        return _Picture(part, data)

    def _verify(
        self, t: _Task, stage: Stage, item: str, instruction: str, statements: dict[str, str], pic: _Picture
    ) -> tuple[dict[str, bool], str]:
        """The verifier's verdicts on an image and a finding ('' when every statement holds)."""
        listing = "\n".join(f"{sid}: {text}" for sid, text in statements.items())
        # one fence for both fenced texts, from both: neither can forge the closing tag
        prompt = self.templates.get("verify-image").fill(
            fence=fence_code(instruction + "\n" + listing), instruction=instruction, checks=listing
        )
        reply = self.ask(t, stage, item, [InputText(prompt), pic.input()], ImageReply)
        verdicts = {sid: bool(reply.verdicts.get(sid, False)) for sid in statements}
        failed = [sid for sid, ok in verdicts.items() if not ok]
        if not failed:
            return verdicts, ""
        missing = [sid for sid in failed if sid not in reply.verdicts]
        finding = reply.reason.strip() or "; ".join(f"not true: {statements[sid]}" for sid in failed)
        if missing:
            finding += f" (no verdict on {', '.join(missing)})"
        return verdicts, finding

    def run_probe(
        self, t: _Task, plan: Plan, offered: list[_Picture], made: dict[int, _Picture], record: dict[str, Any]
    ) -> Plan:
        """Drop the checks of every target turn that a history-free attempt already passes."""
        image_model = self.models["image_model"]
        assert image_model.generate is not None
        generate = image_model.generate
        probes: list[dict[str, Any]] = []
        record["probe"] = probes
        reducible: set[str] = set()
        turns = list(plan.turns)
        for i, turn in enumerate(plan.turns):
            if not turn.checks or i not in made:
                continue
            shown = [offered[n - 1] for n in turn.pool_images]
            frame = (made[i].part.width, made[i].part.height)
            request = Request(f"{t.id}/t{i}/probe", (InputMessage("user", (InputText(turn.user),
                              *(p.input() for p in shown))),), seed=_int_seed(self.seed, t.id, f"probe{i}"),
                              size=frame)  # fmt: skip
            try:
                pic = self._image(self.call(t, "image_model", "probe", "image", generate, request), frame)
            except (Refused, Malformed, ImageProblem) as exc:
                probes.append({"turn": i, "kept": True, "why": f"no history-free image ({exc})"})
                continue
            assert turn.image is not None
            statements = {c.id: c.text for c in turn.checks}
            verdicts, finding = self._verify(t, "probe", f"{t.id}/t{i}/probe-verify", turn.image.instruction,
                                             statements, pic)  # fmt: skip
            kept = bool(finding)
            probes.append({"turn": i, "kept": kept, "verdicts": verdicts})
            if not kept:
                reducible |= set(statements)
                turns[i] = turn.model_copy(update={"checks": []})
        if not reducible:
            return plan
        if not any(turn.checks for turn in turns):
            raise _Reject("probe", "every target turn was passed by a history-free attempt")
        questions = [q.model_copy(update={"aligned_checks": [c for c in q.aligned_checks if c not in reducible]})
                     for q in plan.questions]  # fmt: skip
        return plan.model_copy(update={"turns": turns, "questions": questions})

    def assemble(
        self, t: _Task, plan: Plan, offered: list[_Picture], made: dict[int, _Picture], record: dict[str, Any]
    ) -> Dialogue:
        provenance = {
            "group": t.group.group,
            "requested_capabilities": [c.value for c in t.requested],
            "templates": self.templates.used_by(t.scenario, t.requested, self.bench),
            "author": record["plan"],
            "verifier": self.models["verifier"].name,
            "images": record["images"],
            "probe": record.get("probe"),
            "rounds": self.rounds,
        }
        meta = DialogueMeta(generator="construct", version=__version__, seed=self.seed,
                            params={"construct": provenance})  # fmt: skip
        try:
            return plan_dialogue(plan, t.id, t.scenario, [p.part for p in offered],
                                 {i: p.part for i, p in made.items()}, meta)  # fmt: skip
        except (ValueError, ValidationError) as exc:
            raise _Reject("assemble", f"the dialogue breaks the data model ({exc})") from None


# the run --------------------------------------------------------------------------------------


class _Stopped(Exception):
    """The run is stopping (a budget stop or a fatal error elsewhere): leave the dialogue unsettled."""


def _open_pool(pooldir: Path) -> tuple[PoolManifest, list[Group], dict[str, Label]]:
    manifest_path = pooldir / MANIFEST
    if not manifest_path.is_file():
        raise UserError(f"{pooldir}: not a prepared pool (no {MANIFEST}; run yanami prepare, or let it finish)")
    try:
        manifest = PoolManifest.model_validate_json(manifest_path.read_bytes())
        groups = [Group.model_validate_json(line) for line in (pooldir / GROUPS).read_bytes().splitlines() if line]
        labels = {}
        for line in (pooldir / "labels.jsonl").read_bytes().splitlines():
            if line:
                lab = Label.model_validate_json(line)
                labels[lab.image or lab.sha256 or ""] = lab
    except (OSError, ValidationError, ValueError) as exc:
        raise UserError(f"{pooldir}: not a readable prepared pool ({str(exc).splitlines()[0]})") from None
    return manifest, [g for g in groups if g.status == "kept"], labels


def _tasks(
    groups: list[Group],
    templates: Templates,
    preset: str,
    per_scenario: int | None,
    dialogues: int | None,
    scenarios: list[Scenario],
    seed: int,
    pooldir: Path,
) -> list[_Task]:
    from yanami.world import plan as schedule

    by_scenario: dict[Scenario, list[Group]] = {s: [] for s in Scenario}
    for g in groups:
        if g.scenario is not None:
            by_scenario[g.scenario].append(g)
    for s in scenarios:
        if not by_scenario[s]:
            raise UserError(f"{pooldir}: no group of the pool is routed to {s.value}; leave it out with --scenarios")
        seeded(seed, "groups", s.value).shuffle(by_scenario[s])
    tasks = []
    seen: Counter[Scenario] = Counter()
    for k, (s, did) in enumerate(schedule(preset, per_scenario, dialogues, scenarios, prefix="construct")):
        pool = by_scenario[s]
        group = pool[seen[s] % len(pool)]
        seen[s] += 1
        offered, _ = templates.scenario(s)
        rng = seeded(seed, did)
        n = rng.randint(min(MIN_CAPABILITIES, len(offered)), len(offered))
        chosen = set(rng.sample(offered, n))
        tasks.append(_Task(k, s, did, group, [c for c in offered if c in chosen]))
    return tasks


def _open_store(store: Path, out: Path, settings: dict[str, Any], stack: contextlib.ExitStack) -> str:
    """Create the store or check it holds this construction; the settings' digest. The store stays
    locked until ``stack`` closes (`DirLock`): a second ``construct`` on it stops at once, before
    any call."""
    text = json.dumps(settings, indent=2, sort_keys=True) + "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    if store.exists():
        mine = store / SETTINGS
        if not mine.is_file():
            if any(p.name != LOCK for p in store.iterdir()):  # only its lock: a run killed as it began
                raise UserError(f"{store}: exists and is not a construction store; remove it or choose another --out")
        elif mine.read_text(encoding="utf-8") != text:
            old = json.loads(mine.read_text(encoding="utf-8"))
            diff = next((k for k in sorted(set(old) | set(settings)) if old.get(k) != settings.get(k)), "?")
            raise UserError(f"{store}: was started with another {diff!r} ({mine}); rerun it as it was, or "
                            "choose another --out")  # fmt: skip
    elif not out.absolute().parent.is_dir():
        raise UserError(f"{out}: the folder {out.absolute().parent} does not exist")
    if out.exists():
        try:
            manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
            ours = manifest["generator"]["name"] == "construct" and manifest["generator"]["params"]["digest"] == digest
        except (OSError, ValueError, KeyError, TypeError):
            ours = False
        if not ours:
            raise UserError(f"{out}: exists and is not this construction's output; choose another --out")
    store.mkdir(exist_ok=True)
    stack.enter_context(DirLock(store))
    if not (store / SETTINGS).is_file():
        atomic_write(store / SETTINGS, text)
    return digest


def _models(specs: dict[Role, str], stand_ins: str | None, cache: ResponseCache) -> dict[Role, Model]:
    """The models of the specs: a config file's, or a stand-in on the server at ``stand_ins``."""
    models: dict[Role, Model] = {}
    for role, spec in specs.items():
        if spec == STAND_INS:
            from yanami.construct._prepare import stand_in_model

            assert stand_ins is not None
            models[role] = stand_in_model(f"stand-in-{role.replace('_', '-')}", stand_ins, cache,
                                          answers=role != "image_model")  # fmt: skip
        else:
            models[role] = load_model(spec, cache)
    return models


def construct(
    pooldir: Path,
    out: Path,
    *,
    author: str,
    image_model: str,
    verifier: str,
    preset: str = "bench",
    per_scenario: int | None = None,
    dialogues: int | None = None,
    scenarios: list[Scenario] | None = None,
    seed: int = 42,
    rounds: int = DEFAULT_ROUNDS,
    budget: float | None = None,
    dry_run: bool = False,
    concurrency: int = 4,
    templates: Path | None = None,
    probe: bool = False,
    faults: float = 0.0,
    sample: int = DRY_RUN_SAMPLE,
    on_progress: Progress = _progress_noop,
    backend: str = "local",
    ray_address: str | None = None,
) -> ConstructSummary:
    """Construct dialogues from a prepared pool into ``out`` (see the module docstring).

    ``backend="ray"``: the dialogues are made by Ray actors (`_on_ray`); everything
    else (the checks, the store, the ledger's settling, OUT) stays in this process, and OUT is
    the same bytes as a local run's for the same responses."""
    if preset not in ("bench", "train"):
        raise UserError(f"--preset: {preset!r} is not bench or train")
    if rounds < 0:
        raise UserError("--rounds: must be 0 or more")
    if concurrency < 1:
        raise UserError("--concurrency: must be 1 or more")
    if not 0.0 <= faults <= 1.0:
        raise UserError("--faults: a share between 0 and 1")
    specs: dict[Role, str] = {"author": author, "image_model": image_model, "verifier": verifier}
    if faults and STAND_INS not in (author, image_model):
        raise UserError("--faults: only the stand-ins inject faults (--author or --image-model stand-ins)")
    if sample < 1:
        raise UserError("--sample: must be 1 or more")
    if budget is not None and budget < 0:
        raise UserError("--budget: must be 0 or more")
    if backend != "local" or ray_address is not None:
        check_backend(backend, ray_address)  # before any store is made
    scenarios = scenarios or list(Scenario)
    manifest, groups, labels = _open_pool(pooldir)
    tp = Templates(templates)
    tasks = _tasks(groups, tp, preset, per_scenario, dialogues, scenarios, seed, pooldir)
    bench = PRESETS[preset]["split"] == "bench"
    settings: dict[str, Any] = {
        "pool": str(pooldir.resolve()),
        "pool_images_sha256": manifest.images_sha256,
        "preset": preset,
        "per_scenario": per_scenario,
        "dialogues": dialogues,
        "scenarios": [s.value for s in scenarios],
        "seed": seed,
        "rounds": rounds,
        "probe": probe,
        "faults": faults,
        "templates": tp.used(),
    }
    store = store_path(out)
    cache = ResponseCache(store / "cache.sqlite")
    with contextlib.ExitStack() as stack:
        stack.callback(cache.close)
        stand_ins: str | None = None
        if STAND_INS in specs.values():
            from yanami.construct._standins import StandIns
            from yanami.models.fake import FakeServer

            stand_ins = stack.enter_context(FakeServer(brain=StandIns(fault_rate=faults).brain)).url
        models = _models(specs, stand_ins, cache)
        for role in ("author", "verifier"):
            if models[role].answer is None:
                raise UserError(f"--{role} {specs[role]}: must answer (a chat_model that takes images)")
        if models["image_model"].generate is None:
            raise UserError(f"--image-model {image_model}: must make images (an image_model)")
        if budget is not None:
            for role, m in models.items():
                config = getattr(m, "config", None)
                if specs[role] != STAND_INS and (config is None or config.prices is None):
                    raise UserError(f"--budget: {specs[role]} has no prices (add a prices table to the config file)")
        digest = _open_store(store, out, settings, stack)  # only once every option has been checked
        ledger = _Ledger(store / LEDGER)
        stack.callback(ledger.close)
        c = _Constructor(pooldir=pooldir, store=store, models=models, templates=tp, bench=bench, rounds=rounds,
                         probe=probe, seed=seed, budget=budget, ledger=ledger,
                         fault_rate=faults if STAND_INS in (author, image_model) else None)  # fmt: skip
        notes = {g.group: c.notes(g, labels) for g in groups}
        chosen = tasks[:sample] if dry_run else tasks
        settled = ledger.settled()
        todo = [t for t in chosen if t.k not in settled]
        started = time.perf_counter()
        gc.freeze()  # what exists now (modules, schemas, clients) lives for the run: collections skip it
        executor: Executor[_Task, _Outcome]
        try:
            if backend == "ray":
                parts = _RayParts(pooldir=str(pooldir), store=str(store), specs=dict(specs), stand_ins=stand_ins,
                                  templates=None if templates is None else str(templates), bench=bench,
                                  rounds=rounds, probe=probe, seed=seed, cwd=str(Path.cwd()))  # fmt: skip
                executor, stop = _on_ray(c, notes, concurrency, parts, ray_address)
            else:
                executor, stop = _locally(c, notes, concurrency)
            stopped, fatal = _drive(c, todo, executor, stop, len(chosen) - len(todo), len(chosen), on_progress)
        finally:
            gc.unfreeze()
        if fatal is not None:
            raise UserError(f"stopped: {fatal} (nothing settled is lost; fix it and rerun the same command)")
        summary = _summary(c, out, store, tasks, budget, stopped)
        if dry_run:
            summary.estimate = _estimate(ledger, chosen, len(tasks), concurrency, time.perf_counter() - started)
        else:
            _write(out, ledger, pooldir, store, bench, settings, digest, summary, on_progress)
        atomic_write(store / SUMMARY, json.dumps(summary.as_json(), indent=2, sort_keys=True) + "\n")
        return summary


def _drive(
    c: _Constructor,
    todo: list[_Task],
    executor: Executor[_Task, _Outcome],
    stop: Callable[[str], None],
    done: int,
    total: int,
    on_progress: Progress,
) -> tuple[str, Exception | None]:
    """Run the dialogues with ``executor`` (threads here, or Ray actors: `_on_ray`), settling each
    in the ledger, in this process, as its outcome arrives. The budget and the stop are the run's
    (``stop`` stops it everywhere: a fatal error, a failed dialogue).

    Every outcome is awaited: after a stop the dialogues still to start end at their first call,
    and no call is left unsettled; a failed dialogue's error is raised then."""
    on_progress("constructing", done, total)
    stopped = ""
    fatal: Exception | None = None
    failure: Exception | None = None
    tasks = {t.k: t for t in todo}

    def on_results(rows: list[_Outcome]) -> None:
        nonlocal stopped, fatal, failure, done
        for row in rows:
            outcome, message = row["outcome"], str(row["message"])
            if outcome == "budget":
                stopped = "budget"
                continue
            if outcome == "stopped":
                continue
            if outcome != "done":
                if outcome == "fatal":
                    fatal = fatal or Fatal(message)
                elif failure is None and fatal is None:
                    failure = UserError(message) if outcome == "user" else RuntimeError(message)
                stop(message)
                continue
            t = tasks[int(row["k"])]
            record = json.loads(str(row["record"]))
            c.ledger.settle(t, str(row["status"]), str(row["stage"]), str(row["reason"]), record, str(row["line"]))
            done += 1
            on_progress("constructing", done, total)

    try:
        executor.run(iter(todo), on_results)
    finally:
        c.stop.set()  # an interrupt: the workers here stop at their next call
    if failure is not None and fatal is None:
        raise failure
    return stopped, fatal


_Outcome = dict[str, int | str]
"""A dialogue's outcome as a row (`_outcome`): what to settle, or why it was not made."""

_COLUMNS = ("k", "outcome", "message", "status", "stage", "reason", "record", "line")


def _row(k: int, outcome: str, message: str = "", *, done: tuple[str, str, str, str, str] | None = None) -> _Outcome:
    status, stage, reason, record, line = done or ("", "", "", "", "")
    return {"k": k, "outcome": outcome, "message": message, "status": status, "stage": stage, "reason": reason,
            "record": record, "line": line}  # fmt: skip


def _outcome(c: _Constructor, t: _Task, note: str, *, bugs: bool = True) -> _Outcome:
    """Make one dialogue: ``done`` with what to settle, or why it was not made (``bugs`` False:
    an error of the code itself is raised here, with its traceback, rather than reported)."""
    try:
        status, stage, reason, record, line = c.one(t, note)
    except BudgetReached:
        return _row(t.k, "budget")
    except _Stopped:
        return _row(t.k, "stopped")
    except Fatal as exc:
        return _row(t.k, "fatal", str(exc))
    except UserError as exc:
        return _row(t.k, "user", str(exc))
    except Exception as exc:
        if not bugs:
            raise
        return _row(t.k, "error", f"{type(exc).__name__}: {exc}")
    return _row(t.k, "done", done=(status, stage, reason, json.dumps(record, sort_keys=True), line))


def _locally(
    c: _Constructor, notes: dict[str, str], concurrency: int
) -> tuple[LocalExecutor[_Task, _Outcome], Callable[[str], None]]:
    """The dialogues in threads of this process, ``concurrency`` at once, and the run's stop."""

    def work(t: _Task, stop: threading.Event) -> list[_Outcome]:
        return [_outcome(c, t, notes[t.group.group], bugs=False)]

    return LocalExecutor(work, concurrency, c.stop), lambda message: c.stop.set()


# on Ray --------------------------------------------------------------------------------------


RAY_QUEUED = 2
"""Ray tasks given to an actor per dialogue it makes at once: the rest wait in its queue, ready."""


class _Budget:
    """A construction's spending for every process of a Ray cluster: the ledger's sum when the
    run began, plus every call since (its estimate while in flight, then its cost).

    Each actor's `_Ledger.spent` knows only its own calls, so on Ray `_Constructor.call` asks
    this instead (`_SharedBudget`). A plain actor, one method at a time: ``reserve`` checks and
    adds in one step, so two processes can never both take the budget's last share, and no
    lock or lease is needed. Once it refuses (the budget, or ``stop``: a fatal error, a failed
    actor) it refuses every later call, as a local run's shared stop does: the whole cluster
    stops at its next call, and every call it sent is still settled in the ledger.
    """

    def __init__(self, budget: float | None, spent: float) -> None:
        self.budget = budget
        self.committed = spent
        self.stopped = ""

    def reserve(self, amount: float) -> str:
        """'' when a call estimated at ``amount`` may be sent (now counted), else why not."""
        if self.stopped:
            return self.stopped
        if self.budget is not None and self.committed + amount > self.budget:
            self.stopped = "budget"
            return self.stopped
        self.committed += amount
        return ""

    def settle(self, delta: float) -> None:
        """A call's cost in place of its estimate (``cost - estimate``; ``-estimate``: never sent)."""
        self.committed += delta

    def stop(self, reason: str) -> None:
        self.stopped = self.stopped or reason


class _SharedBudget:
    """`_Constructor.call`'s gate in a Ray actor: the cluster's one `_Budget`, asked before
    every call and told every call's cost (a round trip of a millisecond, beside a model call)."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def reserve(self, amount: float, stop: threading.Event) -> None:
        import ray

        why = ray.get(self.actor.reserve.remote(amount))
        if why:
            stop.set()  # this actor's other dialogues stop at their next call without asking
            if why == "budget":
                raise BudgetReached
            raise _Stopped(why)

    def settle(self, delta: float) -> None:
        import ray

        if delta:
            ray.get(self.actor.settle.remote(delta))


def _budget_actor(ray: Any, store: Path, budget: float | None, spent: float) -> Any:
    """A new `_Budget` for a run on ``store``: named (``yanami-budget-…`` in the yanami
    namespace, to be found with ``ray list actors``), on no CPU, owned by this driver (it ends
    with it)."""
    import uuid

    job = ray.get_runtime_context().get_job_id()
    key = hashlib.sha256(str(store.absolute()).encode()).hexdigest()[:16]
    remote = ray.remote(num_cpus=0)(_Budget)
    return remote.options(name=f"yanami-budget-{job}-{key}-{uuid.uuid4().hex[:8]}", namespace="yanami").remote(
        budget, spent
    )


@dataclass(frozen=True)
class _RayParts:
    """What a Ray actor needs to make dialogues as this process would (all picklable)."""

    pooldir: str
    store: str
    specs: dict[Role, str]
    stand_ins: str | None
    """The URL of the stand-ins' server this process started, if a role is ``stand-ins``."""
    templates: str | None
    bench: bool
    rounds: int
    probe: bool
    seed: int
    cwd: str
    """The driver's working directory: relative paths (a config file, the pool, the store) mean the same there."""


class _DialogueMaker:
    """A Ray actor's share of a construction: its own models (from the same specs), the store's
    response cache, its own connection to the store's ledger (every call recorded before it is
    sent, as here); one dialogue per call, several at once (Ray's threads)."""

    def __init__(self, parts: _RayParts, budget: Any, actors: int) -> None:
        share_endpoint_limits(actors)  # the pool's actors share each endpoint's limits
        self.broken: tuple[str, str] | None = None
        """Why this actor cannot make dialogues (each row it gets says so, and the run stops)."""
        try:
            if Path(parts.cwd).is_dir():
                import os

                os.chdir(parts.cwd)
            store = Path(parts.store)
            self.cache = ResponseCache(store / "cache.sqlite")
            models = _models(parts.specs, parts.stand_ins, self.cache)
            ledger = _Ledger(store / LEDGER, recover=False)
            self.c = _Constructor(pooldir=Path(parts.pooldir), store=store, models=models,
                                  templates=Templates(None if parts.templates is None else Path(parts.templates)),
                                  bench=parts.bench, rounds=parts.rounds, probe=parts.probe, seed=parts.seed,
                                  budget=None, fault_rate=None, ledger=ledger)  # fmt: skip
            self.c.gate = _SharedBudget(budget)
        except UserError as exc:
            self.broken = ("user", str(exc))
        except Exception as exc:
            self.broken = ("error", f"{type(exc).__name__}: {exc}")
        gc.freeze()  # what is made so far, out of the sweeps for the actor's life (as `frozen` in the driver)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[int | str]]:
        rows = [self._one(int(k), bytes(blob)) for k, blob in zip(batch["k"], batch["task"], strict=True)]
        return {column: [row[column] for row in rows] for column in _COLUMNS}

    def _one(self, k: int, blob: bytes) -> _Outcome:
        if self.broken is not None:
            return _row(k, *self.broken)
        t, note = pickle.loads(blob)
        return _outcome(self.c, t, note)


class _SharedStop:
    """A Ray run's `_Budget`, made for the run's actors (`setup`) and ended with it; ``stop`` stops
    the whole cluster at its next call."""

    def __init__(self, c: _Constructor, parts: _RayParts) -> None:
        self.c, self.parts = c, parts
        self.actor: Any = None

    @contextlib.contextmanager
    def setup(self, ray: Any, actors: int, per_actor: int) -> Iterator[tuple[Any, ...]]:
        self.actor = _budget_actor(ray, self.c.store, self.c.budget, self.c.ledger.spent)
        try:
            yield self.parts, self.actor, actors
        finally:
            with contextlib.suppress(Exception):
                ray.kill(self.actor)
            self.actor = None

    def stop(self, message: str) -> None:
        if self.actor is not None:
            self.actor.stop.remote(message)


def _on_ray(
    c: _Constructor, notes: dict[str, str], concurrency: int, parts: _RayParts, address: str | None
) -> tuple[RayExecutor[_Task, _Outcome], Callable[[str], None]]:
    """The dialogues made by Ray actors (`_DialogueMaker`), each a row of a Ray Data dataset,
    ``concurrency`` at once across the cluster (one actor per CPU at most), and the run's stop.
    The budget and the stop are the cluster's (`_Budget`)."""
    shared = _SharedStop(c, parts)

    def encode(t: _Task) -> dict[str, Any]:
        return {"k": t.k, "task": pickle.dumps((t, notes[t.group.group]))}

    # each actor makes its share at once in Ray's threads, with as many more queued
    executor: RayExecutor[_Task, _Outcome] = RayExecutor(
        _DialogueMaker, shared.setup, encode, lambda row: [dict(row)], concurrency=concurrency, address=address,
        threads=1, queued=RAY_QUEUED - 1,
    )  # fmt: skip
    return executor, shared.stop


def _reason_kind(stage: str, reason: str) -> str:
    """The group of a rejection's reason: its stage and the reason's head, without the turn,
    check or object it names (``plan: check cN names object #N, which ...``)."""
    import re

    short = re.sub(r"^turn \d+: ", "", reason).split(" (")[0]
    short = re.sub(r"\b(turn|check|image|c|t) ?\d+\b", lambda m: m.group(1) + "N", short)
    short = re.sub(r"\[\d+\]", "[N]", re.sub(r"#\d+", "#N", short))
    return f"{stage}: {short}"


def _first_reason(stage: str, reason: str, record: dict[str, Any]) -> str:
    """Why the dialogue's first attempt at the stage that rejected it failed (the reason it was
    rejected with, where that attempt recorded none): what the summary groups rejections by."""
    if stage == "plan":
        rounds = (record.get("plan") or {}).get("rounds") or []
        problems = rounds[0].get("problems") if rounds else None
        return str(problems[0]) if problems else reason
    failing = [im for im in record.get("images") or [] if "rounds" not in im]
    attempts = failing[-1].get("attempts") if failing else None
    finding = attempts[0].get("finding") if attempts else None
    return str(finding) if finding else reason


def _summary(
    c: _Constructor, out: Path, store: Path, tasks: list[_Task], budget: float | None, stopped: str
) -> ConstructSummary:
    s = ConstructSummary(out=out, store=store, planned=len(tasks), budget=budget, stopped=stopped)
    rejected: Counter[str] = Counter()
    plan_rounds: Counter[str] = Counter()
    image_rounds: Counter[str] = Counter()
    faults: dict[str, Counter[str]] = {}
    alarms = {"plan": [0, 0], "image": [0, 0]}
    known = {t.k for t in tasks}
    settled = 0
    for status in ("accepted", "rejected", "error"):
        for k, stage, reason, record_text, _ in c.ledger.rows(status):
            if k not in known:
                continue
            record = json.loads(record_text)
            if status == "accepted":
                s.accepted += 1
            elif status == "rejected":
                rejected[_reason_kind(stage, _first_reason(stage, reason, record))] += 1
            else:
                s.errors += 1
            settled += status != "error"
            rounds = (record.get("plan") or {}).get("rounds") or []
            if rounds and (not rounds[-1]["problems"] or status == "rejected"):
                plan_rounds[str(len(rounds) - 1)] += 1
            for im in record.get("images") or []:
                if "rounds" in im:
                    image_rounds[str(im["rounds"])] += 1
            if c.fault_rate is not None:
                _count_faults(c.fault_rate, record, faults, alarms)
    s.rejected = dict(sorted(rejected.items()))
    s.pending = len(tasks) - settled - s.errors
    s.plan_rounds = dict(sorted(plan_rounds.items()))
    s.image_rounds = dict(sorted(image_rounds.items()))
    db = c.ledger.db
    for role, cached, status, n in db.execute(
        "SELECT role, cached, status, COUNT(*) FROM calls GROUP BY role, cached, status"
    ):
        key = (
            "interrupted" if status == "interrupted" else "failed" if status != "ok" else "cached" if cached else "paid"
        )
        s.calls.setdefault(role, {"paid": 0, "cached": 0, "failed": 0, "interrupted": 0})[key] += n
    tin, tout, images, cost = db.execute(
        "SELECT COALESCE(SUM(tokens_in),0), COALESCE(SUM(tokens_out),0), COALESCE(SUM(images),0),"
        " COALESCE(SUM(cost),0) FROM calls"
    ).fetchone()
    s.tokens_in, s.tokens_out, s.images_made, s.cost = int(tin), int(tout), int(images), round(float(cost), 6)
    s.faults = {k: dict(v) for k, v in sorted(faults.items())}
    s.false_alarms = {k: f"{a}/{m}" for k, (a, m) in alarms.items() if m}
    return s


def _count_faults(
    rate: float, record: dict[str, Any], faults: dict[str, Counter[str]], alarms: dict[str, list[int]]
) -> None:
    """Injected faults (recomputed by the stand-ins' own rules) and whether the first check caught them."""
    from yanami.construct._standins import author_fault, image_fault

    rounds = (record.get("plan") or {}).get("rounds") or []
    if rounds:
        kind = author_fault(record["group"], rate)
        caught = bool(rounds[0]["problems"])
        if kind is not None:
            faults.setdefault(kind, Counter())["injected"] += 1
            faults[kind]["caught"] += caught
            faults[kind][f"caught_by_{rounds[0]['by']}"] += caught
        else:
            alarms["plan"][0] += caught
            alarms["plan"][1] += 1
    for im in record.get("images") or []:
        attempts = im.get("attempts") or []
        if not attempts:
            continue
        kind = image_fault(im.get("instruction", ""), rate)
        caught = not attempts[0]["passed"]
        if kind is not None:
            faults.setdefault(kind, Counter())["injected"] += 1
            faults[kind]["caught"] += caught
        else:
            alarms["image"][0] += caught
            alarms["image"][1] += 1


def _estimate(ledger: _Ledger, sample: list[_Task], total: int, concurrency: int, wall: float) -> dict[str, float]:
    ks = [t.k for t in sample]
    if not ks:
        return {}
    marks = ",".join("?" * len(ks))
    cost, latency = ledger.db.execute(
        f"SELECT COALESCE(SUM(cost),0), COALESCE(SUM(latency_s),0) FROM calls WHERE cached = 0 AND k IN ({marks})",
        ks,
    ).fetchone()
    per_cost = float(cost) / len(ks)
    per_seconds = float(latency) / len(ks)
    return {
        "sample": float(len(ks)),
        "cost_per_dialogue": round(per_cost, 6),
        "cost": round(per_cost * total, 4),
        "seconds_per_dialogue": round(per_seconds, 3),
        "seconds": round(per_seconds * total / concurrency, 1),
        "sample_wall_seconds": round(wall, 2),
    }


def _write(
    out: Path,
    ledger: _Ledger,
    pooldir: Path,
    store: Path,
    bench: bool,
    settings: dict[str, Any],
    digest: str,
    summary: ConstructSummary,
    on_progress: Progress,
) -> None:
    """OUT from the ledger's accepted dialogues, in plan order (replacing this construction's older OUT)."""
    complete = summary.pending == 0 and summary.errors == 0
    params = {**settings, "digest": digest, "complete": complete}
    generator = Generator(name="construct", version=__version__, params=params)
    paths = {p.stem: p for root in (pooldir / "images", store / "images") for p in root.glob("*/*")}
    with DatasetWriter(out, split="bench" if bench else "train", generator=generator, overwrite=True) as w:
        for n, (_, _, _, _, line) in enumerate(ledger.rows("accepted"), 1):
            d = Dialogue.model_validate_json(line)
            for part in d.images():
                w.add_encoded(part, paths[part.sha256].read_bytes())
            w.add_dialogue(d, line=line)
            on_progress("writing", n, summary.accepted)
    summary.written = True
