"""Human verdicts as a measure of a judge: what a review database's annotators said of each check.

`read_human_verdicts` reads, from a review database (a SQLite file or a PostgreSQL URL), every
annotator's latest verdict on every check of the reviewed dataset, and reduces them to one human
label per check (`HumanCheck.label`):

- a **fix** verdict says the check is wrong as written: it is no vote on whether the picture
  passes the check, so it is left out of the count (and counted); so is any verdict other than
  pass or fail (a skip);
- the label is the verdict more annotators gave among their pass and fail votes; an admin's
  adjudication of the check, where the database records one, is the label instead;
- a tie (as many passes as fails) has no label, nor has a check with no pass or fail vote
  (only fixes or skips); a check whose text was edited during the review has none either: its
  verdicts may be on the new text, and a judge read the dataset's own.

Reading changes nothing in the database; a file or server that is not a review database is
refused before `ReviewDB` opens it (opening one runs its migrations).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from yanami.contract import UserError
from yanami.review._db import ReviewDB, T, database_url

VOTE_VALUES = ("pass", "fail")
"""The verdicts that vote on whether a picture passes a check."""
_COUNTED = {"tie": "ties", "no vote": "no_vote", "edited": "edited"}


@dataclass(frozen=True)
class HumanCheck:
    """One check of the reviewed dataset with every annotator's latest verdict on it."""

    dialogue: str
    turn: int
    check: str
    kind: str
    """The check's kind (``atomic``, ``capability``; `yanami.contract.CheckKind`)."""
    aspect: str | None
    """What it looks at: an atomic check's category, a capability check's capability (None: not given)."""
    scenario: str
    """The dialogue's group: its scenario (or domain)."""
    votes: dict[str, str]
    """Annotator -> their latest verdict (pass, fail, fix, or another value such as skip)."""
    adjudicated: str | None = None
    """The admin's verdict on the check (pass or fail), where the database records one."""
    edited: bool = False
    """Its text was changed during the review."""

    @property
    def item(self) -> str:
        """The run item of the check's turn (``dialogue/tN``)."""
        return f"{self.dialogue}/t{self.turn}"

    @property
    def passes(self) -> int:
        return sum(v == "pass" for v in self.votes.values())

    @property
    def fails(self) -> int:
        return sum(v == "fail" for v in self.votes.values())

    @property
    def left_out(self) -> str | None:
        """Why the check has no human label: ``edited``, ``tie`` or ``no vote``; None when it has one."""
        if self.edited:
            return "edited"
        if self.adjudicated in VOTE_VALUES:
            return None
        if self.passes == self.fails:
            return "tie" if self.passes else "no vote"
        return None

    @property
    def label(self) -> bool | None:
        """Whether the humans say the picture passes the check (None: left out, see `left_out`)."""
        if self.left_out is not None:
            return None
        if self.adjudicated in VOTE_VALUES:
            return self.adjudicated == "pass"
        return self.passes > self.fails


@dataclass(frozen=True)
class HumanVerdicts:
    """A review database's check verdicts, with what identifies the dataset they are about."""

    database: str
    """The database as shown (password hidden)."""
    dataset: Path
    """Where the reviewed dataset was when the review was set up."""
    manifest_sha256: str
    """SHA-256 of the reviewed dataset's ``manifest.json`` (a run's ``bench_sha256`` names its bench so)."""
    annotators: tuple[str, ...]
    """Everyone who gave a check verdict, by name."""
    checks: tuple[HumanCheck, ...]
    """Every check at least one annotator gave a verdict on, in dataset order."""
    pictures: dict[str, str]
    """Run item (``dialogue/tN``) -> SHA-256 of the dataset's own picture at that turn (the
    assistant's image the annotators saw), for every turn with checks."""
    unreviewed: int
    """Checks of the dataset no annotator gave a verdict on."""

    def labels(self) -> dict[tuple[str, str], bool]:
        """(run item, check id) -> the human label, for the checks that have one."""
        return {(c.item, c.check): c.label for c in self.checks if c.label is not None}

    def counts(self) -> dict[str, int]:
        """What was left out, and why: verdicts (fix, and any other value than pass or fail, by
        value: ``skip_verdicts``) and checks (``ties``, ``no_vote``, ``edited``)."""
        out = {"fix_verdicts": 0, "ties": 0, "no_vote": 0, "edited": 0}
        for c in self.checks:
            for v in c.votes.values():
                if v not in VOTE_VALUES:
                    key = f"{v}_verdicts"
                    out[key] = out.get(key, 0) + 1
            reason = c.left_out
            if reason is not None:
                out[_COUNTED[reason]] += 1
        return out

    def adjudicated(self) -> int:
        """Labels that are the admin's adjudication, not the annotators' majority."""
        return sum(1 for c in self.checks if c.label is not None and c.adjudicated in VOTE_VALUES)


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def open_review(db: str) -> ReviewDB:
    """``db`` (a SQLite file or a ``postgresql://`` URL) opened as a review database; a one-line
    `UserError` for anything else, found out without writing to it."""
    try:
        url = sa.make_url(database_url(db))
    except sa.exc.ArgumentError:
        raise UserError(f"{db}: not a database URL or file path") from None
    sqlite = url.get_backend_name() == "sqlite"
    shown = db if sqlite else url.render_as_string(hide_password=True)
    if sqlite and not Path(url.database or "").is_file():
        raise UserError(f"{db}: no such file (give a CSV of ratings, or a review database: a SQLite file or URL)")
    args: dict[str, Any] = {} if sqlite else {"connect_timeout": 5}
    try:
        engine = sa.create_engine(url, connect_args=args)
    except ImportError as exc:
        raise UserError(f"{shown}: no driver for it ({exc})") from None
    try:
        tables = set(sa.inspect(engine).get_table_names())
    except sa.exc.SQLAlchemyError as exc:
        hint = "; a CSV of ratings is named *.csv" if sqlite else ""
        raise UserError(f"{shown}: cannot read it as a review database ({_first_line(exc)}){hint}") from None
    finally:
        engine.dispose()
    if not {"schema_version", "dataset", "dialogues", "check_verdicts"} <= tables:
        raise UserError(f"{shown}: not a review database (`yanami review init DATASET --db URL` makes one)")
    return ReviewDB(db)


def read_human_verdicts(db: str) -> HumanVerdicts:
    """Every annotator's latest check verdicts in the review database ``db`` (see the module docstring)."""
    store = open_review(db)
    try:
        dataset = store.dataset_path()
        _, manifest_sha = store.source_manifest()
        d, cv, u = T["dialogues"], T["check_verdicts"], T["users"]
        adjudications = T.get("check_adjudications")
        with store.begin() as conn:
            dialogues = conn.execute(sa.select(d.c.id, d.c.grp, d.c.original, d.c.current).order_by(d.c.position))
            rows = [(r.id, r.grp, json.loads(r.original), json.loads(r.current)) for r in dialogues]
            votes: dict[tuple[str, str], dict[str, str]] = {}
            for v in conn.execute(
                sa.select(cv.c.dialogue_id, cv.c.check_id, cv.c.verdict, u.c.name).join(u, u.c.id == cv.c.user_id)
            ):
                votes.setdefault((v.dialogue_id, v.check_id), {})[v.name] = v.verdict
            adjudicated: dict[tuple[str, str], str] = {}
            if adjudications is not None:
                for a in conn.execute(
                    sa.select(adjudications.c.dialogue_id, adjudications.c.check_id, adjudications.c.verdict)
                ):
                    adjudicated[(a.dialogue_id, a.check_id)] = a.verdict
    finally:
        store.close()
    checks: list[HumanCheck] = []
    pictures: dict[str, str] = {}
    unreviewed = 0
    for did, group, original, current in rows:
        now = {c["id"]: c["text"] for t in current["turns"] for c in t["checks"]}
        for turn in original["turns"]:
            if not turn["checks"]:
                continue
            image = next((p for p in turn["assistant"]["parts"] if p.get("type") == "image"), None)
            if image is not None:
                pictures[f"{did}/t{turn['index']}"] = image["sha256"]
            for c in turn["checks"]:
                given = votes.get((did, c["id"]))
                if not given:
                    unreviewed += 1
                    continue
                aspect = c.get("category") if c["kind"] == "atomic" else c.get("capability")
                checks.append(
                    HumanCheck(
                        dialogue=did,
                        turn=int(turn["index"]),
                        check=c["id"],
                        kind=str(c["kind"]),
                        aspect=aspect,
                        scenario=str(group),
                        votes=dict(sorted(given.items())),
                        adjudicated=adjudicated.get((did, c["id"])),
                        edited=now.get(c["id"]) != c["text"],
                    )
                )
    annotators = tuple(sorted({name for c in checks for name in c.votes}))
    return HumanVerdicts(store.shown, dataset, manifest_sha, annotators, tuple(checks), pictures, unreviewed)
