"""The review database: one SQLAlchemy Core code path for SQLite and PostgreSQL.

Every table is created by a numbered migration; ``schema_version`` records which have run, and
opening a database runs the ones it lacks (and refuses a database a newer yanami wrote). Each
dialogue is stored as the JSON line of its dataset plus a current version of it that annotators
edit: an edit names the version it was made on, and it applies only if that is still the current
one (one ``UPDATE … WHERE version = ?``), so a stale save is refused, never applied over another.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from pydantic import ValidationError
from sqlalchemy.engine import Connection, Engine

from yanami.contract import UserError

DEFAULT_DB = "review.sqlite"
"""The database ``--db`` names when it is not given: a SQLite file in the working directory."""
MAX_TEXT = 20_000
"""The longest text an edit or a comment may hold, in characters."""
SESSION_S = 12 * 3600
"""How long a sign-in lasts."""


class Role(StrEnum):
    """What a user may do: review their assignments, or also assign, adjudicate and export."""

    ANNOTATOR = "annotator"
    ADMIN = "admin"


class Verdict(StrEnum):
    """An annotator's verdict on one check."""

    PASS = "pass"
    FAIL = "fail"
    FIX = "fix"
    """The check is wrong as written; the comment says how (or an edit corrects it)."""
    SKIP = "skip"
    """The annotator cannot judge the check; the comment says why. Not a vote on it."""


VOTES = (Verdict.PASS.value, Verdict.FAIL.value, Verdict.FIX.value)
"""The verdicts that count in agreement and majorities (a skip is no vote)."""


class Decision(StrEnum):
    """An annotator's decision on a whole dialogue (the paper's stage d)."""

    APPROVE = "approve"
    REFINE = "refine"
    """Needs image refinement."""
    REJECT = "reject"


DECISION_LABELS = {Decision.APPROVE: "approve", Decision.REFINE: "needs image refinement", Decision.REJECT: "reject"}


class ReviewError(UserError):
    """A request the review store refuses; ``status`` is the HTTP status the server answers with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Unavailable(ReviewError):
    """The database cannot be reached, is locked, or is gone."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 503)


@dataclass(frozen=True)
class User:
    id: int
    name: str
    role: Role


@dataclass(frozen=True)
class Session:
    user: User
    csrf: str
    """The token every change this session makes must carry."""


@dataclass
class Conflict(Exception):
    """A save made on a version that is no longer the current one."""

    dialogue: str
    path: str
    base_version: int
    current_version: int
    yours: str
    """The text the stale save wanted to write."""
    current: str
    """The text there now."""
    by: str
    """Who made the version that is current now."""


@dataclass(frozen=True)
class Edit:
    dialogue: str
    version: int
    """The dialogue's version this edit produced."""
    user: str
    at: str
    path: str
    before: str
    after: str


# -- schema and migrations ----------------------------------------------------------------

meta = sa.MetaData()
schema_version = sa.Table("schema_version", meta, sa.Column("version", sa.Integer, primary_key=True))
_V1 = [
    sa.Table(
        "dataset",
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("manifest", sa.Text, nullable=False),
        sa.Column("manifest_sha256", sa.String(64), nullable=False),
    ),
    sa.Table(
        "dialogues",
        meta,
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("grp", sa.String(64), nullable=False),
        sa.Column("original", sa.Text, nullable=False),
        sa.Column("current", sa.Text, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
    ),
    sa.Table(
        "images",
        meta,
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("format", sa.String(8), nullable=False),
        sa.Column("path", sa.Text, nullable=False),
    ),
    sa.Table(
        "dialogue_images",
        meta,
        sa.Column("dialogue_id", sa.String(128), sa.ForeignKey("dialogues.id"), primary_key=True),
        sa.Column("sha256", sa.String(64), sa.ForeignKey("images.sha256"), primary_key=True),
    ),
    sa.Table(
        "users",
        meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(64), nullable=False, unique=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=True, unique=True),
    ),
    sa.Table(
        "sessions",
        meta,
        sa.Column("token_sha256", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
        sa.Column("csrf", sa.String(64), nullable=False),
        sa.Column("expires", sa.Float, nullable=False),
    ),
    sa.Table(
        "assignments",
        meta,
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), primary_key=True),
        sa.Column("dialogue_id", sa.String(128), sa.ForeignKey("dialogues.id"), primary_key=True),
    ),
    sa.Table(
        "check_verdicts",
        meta,
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), primary_key=True),
        sa.Column("dialogue_id", sa.String(128), sa.ForeignKey("dialogues.id"), primary_key=True),
        sa.Column("check_id", sa.String(128), primary_key=True),
        sa.Column("verdict", sa.String(8), nullable=False),
        sa.Column("comment", sa.Text, nullable=False),
        sa.Column("at", sa.String(32), nullable=False),
    ),
    sa.Table(
        "decisions",
        meta,
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), primary_key=True),
        sa.Column("dialogue_id", sa.String(128), sa.ForeignKey("dialogues.id"), primary_key=True),
        sa.Column("decision", sa.String(8), nullable=False),
        sa.Column("comment", sa.Text, nullable=False),
        sa.Column("at", sa.String(32), nullable=False),
    ),
    sa.Table(
        "edits",
        meta,
        sa.Column("dialogue_id", sa.String(128), sa.ForeignKey("dialogues.id"), primary_key=True),
        sa.Column("version", sa.Integer, primary_key=True),
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
        sa.Column("at", sa.String(32), nullable=False),
        sa.Column("path", sa.String(128), nullable=False),
        sa.Column("before", sa.Text, nullable=False),
        sa.Column("after", sa.Text, nullable=False),
    ),
    sa.Table(
        "adjudications",
        meta,
        sa.Column("dialogue_id", sa.String(128), sa.ForeignKey("dialogues.id"), primary_key=True),
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
        sa.Column("decision", sa.String(8), nullable=False),
        sa.Column("comment", sa.Text, nullable=False),
        sa.Column("at", sa.String(32), nullable=False),
    ),
]
_V2 = [
    sa.Table(
        "snapshots",
        meta,
        sa.Column("dialogue_id", sa.String(128), sa.ForeignKey("dialogues.id"), primary_key=True),
        sa.Column("version", sa.Integer, primary_key=True),
        sa.Column("content", sa.Text, nullable=False),
    ),
    sa.Table(
        "removed_users",
        meta,
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), primary_key=True),
        sa.Column("at", sa.String(32), nullable=False),
    ),
]
"""Version 2: the dialogue's whole content after each edit (what a revert brings back), and the
users removed (kept, so their verdicts stay under their name)."""
_V3 = [
    sa.Table(
        "verdict_history",
        meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
        sa.Column("dialogue_id", sa.String(128), sa.ForeignKey("dialogues.id"), nullable=False),
        sa.Column("check_id", sa.String(128), nullable=True),  # None: a decision on the whole dialogue
        sa.Column("value", sa.String(8), nullable=False),
        sa.Column("comment", sa.Text, nullable=False),
        sa.Column("at", sa.String(32), nullable=False),
        sa.Index("verdict_history_dialogue", "dialogue_id"),
    ),
]
"""Version 3: every verdict and decision an annotator gave, in order (the latest counts)."""
_V4 = [
    sa.Table("instance", meta, sa.Column("id", sa.String(64), primary_key=True)),
    sa.Table(
        "check_adjudications",
        meta,
        sa.Column("dialogue_id", sa.String(128), sa.ForeignKey("dialogues.id"), primary_key=True),
        sa.Column("check_id", sa.String(128), primary_key=True),
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
        sa.Column("verdict", sa.String(8), nullable=False),
        sa.Column("comment", sa.Text, nullable=False),
        sa.Column("at", sa.String(32), nullable=False),
    ),
]
"""Version 4: the database's identity (a random id: a database swapped or re-created under a
running server is noticed) and the admin's verdict on single checks (what the export follows)."""
_V5 = [
    sa.Table(
        "flags",
        meta,
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), primary_key=True),
        sa.Column("dialogue_id", sa.String(128), sa.ForeignKey("dialogues.id"), primary_key=True),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("at", sa.String(32), nullable=False),
    ),
    sa.Table(
        "guidelines",
        meta,
        sa.Column("version", sa.Integer, primary_key=True),
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=True),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("at", sa.String(32), nullable=False),
    ),
    sa.Table(
        "item_times",
        meta,
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), primary_key=True),
        sa.Column("dialogue_id", sa.String(128), sa.ForeignKey("dialogues.id"), primary_key=True),
        sa.Column("opened", sa.Float, nullable=False),
        sa.Column("decided", sa.Float, nullable=True),
    ),
]
"""Version 5: an annotator's flag on a dialogue (with a reason, for the admin), the lead's
guidelines (every version kept) and when an annotator first opened and then decided a dialogue
(the time per item)."""
T = {t.name: t for t in [*_V1, *_V2, *_V3, *_V4, *_V5]}


def _v1(conn: Connection) -> None:
    meta.create_all(conn, tables=_V1)


def _v2(conn: Connection) -> None:
    meta.create_all(conn, tables=_V2)


def _v3(conn: Connection) -> None:
    meta.create_all(conn, tables=_V3)


def _v4(conn: Connection) -> None:
    meta.create_all(conn, tables=_V4)
    conn.execute(T["instance"].insert(), {"id": secrets.token_hex(16)})


def _v5(conn: Connection) -> None:
    meta.create_all(conn, tables=_V5)


MIGRATIONS: list[Callable[[Connection], None]] = [_v1, _v2, _v3, _v4, _v5]
"""Applied in order; migration k (from 1) brings a database to schema version k. Append, never edit:
a later migration alters the tables with its own statements, not by changing the ones above."""
SCHEMA_VERSION = len(MIGRATIONS)


def database_url(db: str) -> str:
    """The SQLAlchemy URL for ``--db``: a URL as given (``postgresql://`` uses psycopg 3), a plain path as SQLite."""
    if db.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + db.split("://", 1)[1]
    if "://" in db:
        return db
    return f"sqlite:///{Path(db).expanduser()}"


def _header(path: Path) -> bytes:
    """A SQLite file's magic string and ``user_version`` (bytes 0-16 and 60-64), or what is there instead."""
    try:
        with path.open("rb") as f:
            head = f.read(100)
    except OSError:
        return b""
    return head[:16] + head[60:64]


def _reason(exc: sa.exc.DBAPIError) -> str:
    return str(exc.orig).strip().splitlines()[0] if exc.orig is not None and str(exc.orig).strip() else "unavailable"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# -- editing ------------------------------------------------------------------------------

EDITABLE = re.compile(
    r"turns\.\d+\.(?:user|assistant)\.parts\.\d+\.text"
    r"|turns\.\d+\.checks\.\d+\.text"
    r"|questions\.\d+\.(?:text|answer|answer_letters|choices|choices\.\d+)"
)
"""The fields an annotator may edit: every text of a turn, question, option, answer and check, a
question's options as a whole (one a line: add, remove, reorder) and its answer letters."""
LETTERS = "ABCDEFG"
REVERT = "revert:"
"""The ``path`` of an edit that reverted the dialogue: ``revert:N`` brought back version N's content."""


def _node(data: Any, path: str) -> Any:
    if EDITABLE.fullmatch(path) is None:
        raise ReviewError(f"field {path!r}: not an editable text", 422)
    node = data
    for key in path.split("."):
        try:
            node = node[int(key)] if isinstance(node, list) else node[key]
        except (KeyError, IndexError, ValueError, TypeError):
            raise ReviewError(f"field {path!r}: no such field in this dialogue", 422) from None
    return node


def field_at(data: Any, path: str) -> str:
    """The text at an editable ``path`` of a dialogue's JSON; ReviewError if there is none.

    A question's ``answer_letters`` read as ``A, C``; its ``choices`` as one option a line.
    """
    node = _node(data, path)
    if path.endswith((".answer_letters", ".choices")):
        if not isinstance(node, list) or not all(isinstance(x, str) for x in node):
            raise ReviewError(f"field {path!r}: not a list of texts", 422)
        return (", " if path.endswith("letters") else "\n").join(node)
    if not isinstance(node, str):
        raise ReviewError(f"field {path!r}: not a text", 422)
    return node


def _parse_letters(path: str, value: str) -> list[str]:
    letters = value.replace(",", " ").upper().split()
    if any(x not in LETTERS or len(x) != 1 for x in letters):
        raise ReviewError(f"field {path!r}: {value[:40]!r} is not option letters (write e.g. B or A, C)", 422)
    return sorted(set(letters))


def _correct_text(q: dict[str, Any]) -> str | None:
    """The text of a question's correct options ("; " between several); None if a letter has no option."""
    choices, letters = q.get("choices", []), q.get("answer_letters", [])
    idx = [LETTERS.index(x) for x in letters if x in LETTERS]
    if not letters or len(idx) != len(letters) or any(i >= len(choices) for i in idx):
        return None
    return "; ".join(choices[i] for i in idx)


def _set_field(data: Any, path: str, value: str) -> None:
    """Write ``value`` at ``path``; an answer that was the correct options' text follows them."""
    field_at(data, path)
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    question = re.fullmatch(r"questions\.(\d+)\.(answer_letters|choices(?:\.\d+)?)", path)
    q = data["questions"][int(question[1])] if question else None
    linked = q is not None and q.get("choices") and q["answer"] == _correct_text(q)
    if last == "answer_letters":
        node[last] = _parse_letters(path, value)
    elif last == "choices":
        node[last] = [line.strip() for line in value.split("\n") if line.strip()]
    else:
        node[int(last) if isinstance(node, list) else last] = value
    if q is not None and linked:
        q["answer"] = _correct_text(q) or q["answer"]


def _question_problem(q: dict[str, Any]) -> str | None:
    """What makes an edited question's options unusable beyond the dataset's own rules."""
    choices = q.get("choices", [])
    if len(choices) == 1:
        return "a question needs at least two options (or none: an open question)"
    seen: dict[str, int] = {}
    for i, c in enumerate(choices):
        if not c.strip():
            return f"option {LETTERS[i]} is empty"
        same = " ".join(c.split()).casefold()  # options that differ only in spaces or case read as one
        if same in seen:
            return f"option {LETTERS[i]} repeats option {LETTERS[seen[same]]}"
        seen[same] = i
    return None


def _answer_problem(q: dict[str, Any]) -> str | None:
    """An answer that is the text of an option not marked correct."""
    choices = q.get("choices", [])
    if q["answer"] in choices:
        letter = LETTERS[choices.index(q["answer"])]
        if letter not in q.get("answer_letters", []):
            marked = ", ".join(q.get("answer_letters", [])) or "none"
            return (
                f"the answer {q['answer'][:60]!r} is option {letter}'s text but the correct option(s) are {marked}: "
                "change the answer letters or the answer"
            )
    return None


def _checked_dialogue(dialogue_id: str, data: Any, path: str) -> None:
    from yanami.contract import Dialogue
    from yanami.store import dialogue_problems

    if path.endswith(".text") and not field_at(data, path).strip():
        raise ReviewError(f"field {path!r}: empty; write the text (or revert to an earlier version)", 422)
    question = re.match(r"questions\.(\d+)\.", path)
    q = data["questions"][int(question[1])] if question else None
    problem = _question_problem(q) if q is not None else None  # the options first: what to change
    if problem:
        raise ReviewError(f"field {path!r}: {problem}", 422)
    try:
        problems = dialogue_problems(Dialogue.model_validate(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ReviewError(f"field {path!r}: {first['msg']}", 422) from None
    if problems:
        loc, msg = problems[0]
        raise ReviewError(f"dialogue {dialogue_id}: {'.'.join(map(str, loc))}: {msg}", 422)
    problem = _answer_problem(q) if q is not None else None
    if problem:
        raise ReviewError(f"field {path!r}: {problem}", 422)


def _edited_fields(data: Any) -> dict[str, str]:
    """Every editable field of a dialogue and its text (what a revert's record compares)."""
    out: dict[str, str] = {}
    for t in data["turns"]:
        for side in ("user", "assistant"):
            for j, part in enumerate(t[side]["parts"]):
                if part["type"] == "text":
                    out[f"turns.{t['index']}.{side}.parts.{j}.text"] = part["text"]
        for k, c in enumerate(t["checks"]):
            out[f"turns.{t['index']}.checks.{k}.text"] = c["text"]
    for k in range(len(data.get("questions", []))):
        for name in ("text", "answer", "answer_letters", "choices"):
            out[f"questions.{k}.{name}"] = field_at(data, f"questions.{k}.{name}")
    return out


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def check_text(text: str, what: str) -> str:
    """``text`` if both databases can store it: at most `MAX_TEXT` characters (413 otherwise), no
    NUL character and no lone surrogate (422 otherwise: PostgreSQL refuses them, UTF-8 cannot hold them)."""
    if len(text) > MAX_TEXT:
        raise ReviewError(f"{what}: {len(text)} characters, at most {MAX_TEXT}", 413)
    if "\x00" in text:
        raise ReviewError(f"{what}: contains a NUL character, which cannot be stored", 422)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ReviewError(f"{what}: not valid Unicode text", 422) from None
    return text


# -- the store ----------------------------------------------------------------------------


class ReviewDB:
    """A review database opened by URL (``sqlite:///…``, ``postgresql://…``) or SQLite path."""

    def __init__(self, db: str = DEFAULT_DB, *, create: bool = False, wait_s: float = 5.0) -> None:
        """``wait_s``: how long a statement waits for a lock before the database counts as unavailable."""
        self.url = database_url(db)
        try:
            url = sa.make_url(self.url)
        except sa.exc.ArgumentError:
            raise UserError(f"--db {db}: not a database URL or file path") from None
        self.shown = url.render_as_string(hide_password=True)
        self._instance: str | None = None
        """The database's identity (`_V4`), read when opened and checked by every new connection."""
        self._header = b""
        """A SQLite file's magic and identity as its first page holds them (`_stamp`)."""
        self._file: tuple[Path, int] | None = None
        """A SQLite database's file and inode: a file deleted or replaced while open is 'gone'."""
        if url.get_backend_name() == "sqlite":
            path = Path(url.database or "")
            if not create and not path.is_file():
                raise UserError(f"{path}: no review database here (run `yanami review init DATASET --db {db}`)")
            if create and not path.absolute().parent.is_dir():
                raise UserError(f"{path.absolute().parent}: no such directory")
            self.engine: Engine = sa.create_engine(url, connect_args={"timeout": wait_s})
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        else:
            try:
                self.engine = sa.create_engine(
                    url,
                    pool_pre_ping=True,
                    connect_args={
                        "connect_timeout": max(1, round(wait_s)),
                        "options": f"-c lock_timeout={round(wait_s * 1000)}",
                    },
                )
            except ImportError as exc:
                raise UserError(f"--db {self.shown}: no driver for it ({exc})") from None
        with self.begin() as conn:
            _migrate(conn, self.shown)
            self._instance = str(conn.execute(sa.select(T["instance"].c.id)).scalar_one())
        # every connection opened from now on must reach this database: one dropped and re-created,
        # or another one put at its URL, is refused (an open connection dies with a dropped database)
        sa.event.listen(self.engine, "connect", self._same_database)
        if url.get_backend_name() == "sqlite" and url.database:
            self._file = (Path(url.database), Path(url.database).stat().st_ino)
            self._header = self._stamp()

    def _same_database(self, dbapi_conn: Any, _: Any) -> None:
        """A new connection's check (an engine ``connect`` event): the database's identity row."""
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute("SELECT id FROM instance")
            row = cursor.fetchone()
        except Exception as exc:  # the driver's own error: a table gone, a file that is no database
            raise Unavailable(f"database {self.shown}: {str(exc).strip().splitlines()[0]}") from None
        finally:
            cursor.close()
        if row is None or row[0] != self._instance:
            raise Unavailable(f"database {self.shown}: replaced by another database while in use")

    def _stamp(self) -> bytes:
        """Write the database's identity into the SQLite file's header (``user_version``, once)
        and move the log into the file, so that the header on disk says which database it is:
        `begin` compares it before every transaction, and a file truncated or overwritten in
        place (whose pages SQLite could otherwise still serve from its write-ahead log) is noticed."""
        identity = int((self._instance or "1")[:7], 16) or 1
        with self.engine.connect() as conn:
            if conn.exec_driver_sql("PRAGMA user_version").scalar_one() != identity:
                conn.exec_driver_sql(f"PRAGMA user_version = {identity}")
                conn.commit()
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        assert self._file is not None
        return _header(self._file[0])

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        """A transaction; a locked, gone or unreachable database is one `Unavailable` line."""
        if self._file is not None:
            # an open SQLite connection would go on writing to a deleted file's inode, losing it all
            path, inode = self._file
            try:
                now = path.stat().st_ino
            except OSError:
                raise Unavailable(f"database {self.shown}: the file is gone") from None
            if now != inode:
                raise Unavailable(f"database {self.shown}: the file was replaced by another one")
            if _header(path) != self._header:  # truncated or overwritten in place, the same inode
                raise Unavailable(
                    f"database {self.shown}: the file was changed in place; it is not the database opened"
                )
        try:
            with self.engine.begin() as conn:
                yield conn
        except (sa.exc.OperationalError, sa.exc.ProgrammingError) as exc:
            # a database dropped and re-created, a table gone: the database is not the one opened
            raise Unavailable(f"database {self.shown}: {_reason(exc)}") from None
        except sa.exc.DatabaseError as exc:
            if type(exc) is not sa.exc.DatabaseError:  # integrity and data errors are the caller's
                raise
            raise Unavailable(f"database {self.shown}: {_reason(exc)}") from None  # a file overwritten in place

    # dataset ----------------------------------------------------------------------------

    def load_dataset(self, path: str | Path) -> int:
        """Copy a dataset's dialogues and image index in; returns how many dialogues. Once per database."""
        from yanami.store import MANIFEST, Dataset, image_relpath

        ds = Dataset(path)
        manifest = (ds.root / MANIFEST).read_text(encoding="utf-8")
        with self.begin() as conn:
            if conn.execute(sa.select(sa.func.count()).select_from(T["dataset"])).scalar_one():
                raise UserError(f"{self.shown}: already holds a dataset (one database reviews one dataset)")
            conn.execute(
                T["dataset"].insert(),
                {"id": 1, "path": str(ds.root.resolve()), "manifest": manifest, "manifest_sha256": _sha(manifest)},
            )
            images: dict[str, str] = {}
            links: list[dict[str, str]] = []
            n = 0
            for position, (_, _, line, dialogue) in enumerate(ds.records()):
                conn.execute(
                    T["dialogues"].insert(),
                    {
                        "id": dialogue.id,
                        "position": position,
                        "grp": dialogue.group,
                        "original": line,
                        "current": line,
                        "version": 0,
                    },
                )
                for p in dialogue.images():
                    images.setdefault(p.sha256, p.format.value)
                links += [
                    {"dialogue_id": dialogue.id, "sha256": s} for s in sorted({p.sha256 for p in dialogue.images()})
                ]
                n += 1
            if images:
                conn.execute(
                    T["images"].insert(),
                    [{"sha256": s, "format": f, "path": image_relpath(s, f)} for s, f in images.items()],
                )
            if links:
                conn.execute(T["dialogue_images"].insert(), links)
        return n

    def dataset_path(self) -> Path:
        with self.begin() as conn:
            row = conn.execute(sa.select(T["dataset"].c.path)).first()
        if row is None:
            raise UserError(f"{self.shown}: holds no dataset (run `yanami review init DATASET`)")
        return Path(row.path)

    def source_manifest(self) -> tuple[str, str]:
        """The reviewed dataset's ``manifest.json`` text and its SHA-256."""
        with self.begin() as conn:
            row = conn.execute(sa.select(T["dataset"].c.manifest, T["dataset"].c.manifest_sha256)).one()
        return row.manifest, row.manifest_sha256

    # users and sessions ---------------------------------------------------------------

    def add_user(self, name: str, role: Role) -> str:
        """Create a user; returns their one-time sign-in token (only its hash is stored)."""
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", name):
            raise UserError(f"user name {name!r}: use 1-64 letters, digits, '.', '_' or '-'")
        token = secrets.token_urlsafe(32)
        with self.begin() as conn:
            if conn.execute(sa.select(T["users"].c.id).where(T["users"].c.name == name)).first():
                raise UserError(f"user {name!r} already exists")
            conn.execute(T["users"].insert(), {"name": name, "role": role.value, "token_sha256": _sha(token)})
        return token

    def users(self, *, removed: bool = False) -> list[User]:
        """The users by name: those not removed (``removed``: only the removed ones)."""
        u, gone = T["users"], T["removed_users"]
        cond = u.c.id.in_(sa.select(gone.c.user_id))
        with self.begin() as conn:
            rows = conn.execute(sa.select(u).where(cond if removed else ~cond).order_by(u.c.name)).all()
        return [User(r.id, r.name, Role(r.role)) for r in rows]

    def _active_user(self, conn: Connection, name: str) -> Any:
        u, gone = T["users"], T["removed_users"]
        row = conn.execute(sa.select(u).where(u.c.name == name)).first()
        if row is None:
            raise UserError(f"user {name!r}: no such user (see `yanami review users list`)")
        if conn.execute(sa.select(gone.c.user_id).where(gone.c.user_id == row.id)).first() is not None:
            raise UserError(f"user {name!r} was removed")
        return row

    def relink(self, name: str) -> str:
        """A new one-time sign-in token for a user; their unspent old one stops working."""
        token = secrets.token_urlsafe(32)
        with self.begin() as conn:
            row = self._active_user(conn, name)
            conn.execute(T["users"].update().where(T["users"].c.id == row.id).values(token_sha256=_sha(token)))
        return token

    def remove_user(self, name: str) -> tuple[int, int]:
        """Remove a user: their sessions and sign-in link end, and the assignments they have not
        decided go (``assign`` tops them up); their verdicts and decisions stay under their name.
        Returns (sessions ended, assignments dropped)."""
        s, a, dec = T["sessions"], T["assignments"], T["decisions"]
        with self.begin() as conn:
            row = self._active_user(conn, name)
            conn.execute(T["removed_users"].insert(), {"user_id": row.id, "at": _now()})
            conn.execute(T["users"].update().where(T["users"].c.id == row.id).values(token_sha256=None))
            ended = conn.execute(s.delete().where(s.c.user_id == row.id)).rowcount
            decided = sa.select(dec.c.dialogue_id).where(dec.c.user_id == row.id)
            dropped = conn.execute(a.delete().where(a.c.user_id == row.id, a.c.dialogue_id.not_in(decided))).rowcount
        return int(ended), int(dropped)

    def redeem(self, token: str) -> tuple[str, Session]:
        """Spend a one-time sign-in token: a new session's cookie value and the session."""
        users = T["users"]
        with self.begin() as conn:
            # the UPDATE spends the token; only the request whose UPDATE matched signs in
            row = conn.execute(sa.select(users).where(users.c.token_sha256 == _sha(token))).first()
            if row is None:
                raise ReviewError("this sign-in link is not valid or was already used; ask an admin for a new one", 401)
            spent = conn.execute(
                users.update()
                .where(users.c.id == row.id, users.c.token_sha256 == _sha(token))
                .values(token_sha256=None)
            )
            if spent.rowcount != 1:
                raise ReviewError("this sign-in link was already used; ask an admin for a new one", 401)
            cookie, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
            # signing in again ends the earlier sessions: one live session per user
            conn.execute(T["sessions"].delete().where(T["sessions"].c.user_id == row.id))
            conn.execute(
                T["sessions"].insert(),
                {"token_sha256": _sha(cookie), "user_id": row.id, "csrf": csrf, "expires": time.time() + SESSION_S},
            )
        return cookie, Session(User(row.id, row.name, Role(row.role)), csrf)

    def session(self, cookie: str) -> Session | None:
        s, u, gone = T["sessions"], T["users"], T["removed_users"]
        with self.begin() as conn:
            row = conn.execute(
                sa.select(u.c.id, u.c.name, u.c.role, s.c.csrf, s.c.expires)
                .join(u, u.c.id == s.c.user_id)
                .where(s.c.token_sha256 == _sha(cookie), u.c.id.not_in(sa.select(gone.c.user_id)))
            ).first()
        if row is None or row.expires < time.time():
            return None
        return Session(User(row.id, row.name, Role(row.role)), row.csrf)

    def sign_out(self, cookie: str) -> None:
        with self.begin() as conn:
            conn.execute(T["sessions"].delete().where(T["sessions"].c.token_sha256 == _sha(cookie)))

    # assignments ------------------------------------------------------------------------

    def assign(self, per_item: int) -> int:
        """Give every dialogue ``per_item`` annotators, the least loaded first; returns new assignments.

        Dialogues keep the annotators they have; running it again after adding annotators tops up.
        """
        annotators = [u for u in self.users() if u.role is Role.ANNOTATOR]
        if per_item < 1:
            raise UserError(f"--per-item {per_item}: must be at least 1")
        if len(annotators) < per_item:
            raise UserError(
                f"--per-item {per_item}: only {len(annotators)} annotator(s); add more with `yanami review users add`"
            )
        a = T["assignments"]
        with self.begin() as conn:
            have: dict[str, set[int]] = {}
            for r in conn.execute(sa.select(a)):
                have.setdefault(r.dialogue_id, set()).add(r.user_id)
            load = {u.id: 0 for u in annotators}
            for users in have.values():
                for uid in users:
                    if uid in load:
                        load[uid] += 1
            new = []
            ids = conn.execute(sa.select(T["dialogues"].c.id).order_by(T["dialogues"].c.position)).scalars()
            for did in ids:
                got = have.get(did, set())
                for uid in sorted((u for u in load if u not in got), key=lambda u: (load[u], u))[
                    : max(0, per_item - len(got))
                ]:
                    new.append({"user_id": uid, "dialogue_id": did})
                    load[uid] += 1
            if new:
                conn.execute(a.insert(), new)
        return len(new)

    def is_assigned(self, user: User, dialogue_id: str) -> bool:
        a = T["assignments"]
        with self.begin() as conn:
            return (
                conn.execute(
                    sa.select(a.c.user_id).where(a.c.user_id == user.id, a.c.dialogue_id == dialogue_id)
                ).first()
                is not None
            )

    def queue(self, user: User) -> list[dict[str, Any]]:
        """A user's assigned dialogues in dataset order: id, group, checks judged, decision."""
        a, d, dec, cv = T["assignments"], T["dialogues"], T["decisions"], T["check_verdicts"]
        with self.begin() as conn:
            rows = conn.execute(
                sa.select(d.c.id, d.c.grp, d.c.current, dec.c.decision)
                .join(a, a.c.dialogue_id == d.c.id)
                .outerjoin(dec, sa.and_(dec.c.dialogue_id == d.c.id, dec.c.user_id == user.id))
                .where(a.c.user_id == user.id)
                .order_by(d.c.grp, d.c.position)
            ).all()
            judged: dict[str, int] = dict(
                conn.execute(
                    sa.select(cv.c.dialogue_id, sa.func.count())
                    .where(cv.c.user_id == user.id)
                    .group_by(cv.c.dialogue_id)
                ).all()
            )
        flagged = self.flags()
        out = []
        for r in rows:
            checks = sum(len(t["checks"]) for t in json.loads(r.current)["turns"])
            out.append(
                {
                    "id": r.id,
                    "group": r.grp,
                    "checks": checks,
                    "judged": judged.get(r.id, 0),
                    "decision": r.decision,
                    "flag": flagged.get(r.id, {}).get(user.name),
                }
            )
        return out

    # a dialogue -------------------------------------------------------------------------

    def dialogue(self, dialogue_id: str) -> tuple[dict[str, Any], int]:
        """A dialogue's current JSON and version; 404 ReviewError if there is none."""
        d = T["dialogues"]
        with self.begin() as conn:
            row = conn.execute(sa.select(d.c.current, d.c.version).where(d.c.id == dialogue_id)).first()
        if row is None:
            raise ReviewError(f"dialogue {dialogue_id!r}: not in this review", 404)
        return json.loads(row.current), row.version

    def image(self, sha256: str, user: User) -> tuple[Path, str]:
        """The file of an image a user may see (an admin: any; an annotator: their dialogues')."""
        if not re.fullmatch(r"[0-9a-f]{64}", sha256):
            raise ReviewError(f"image {sha256[:80]!r}: not a SHA-256 (64 lower-case hex digits)", 404)
        i, di, a = T["images"], T["dialogue_images"], T["assignments"]
        query = sa.select(i.c.path, i.c.format).where(i.c.sha256 == sha256)
        if user.role is not Role.ADMIN:
            query = (
                query.join(di, di.c.sha256 == i.c.sha256)
                .join(a, sa.and_(a.c.dialogue_id == di.c.dialogue_id, a.c.user_id == user.id))
                .limit(1)
            )
        with self.begin() as conn:
            row = conn.execute(query).first()
        if row is None:
            raise ReviewError(f"image {sha256}: no such image in your dialogues", 404)
        return self.dataset_path() / row.path, row.format

    def set_verdict(self, user: User, dialogue_id: str, check_id: str, verdict: Verdict, comment: str) -> None:
        """Record a verdict (the same one again changes nothing). Refused (409) once the annotator
        has decided the dialogue: the others' verdicts are shown from then on, so a change goes
        through the admin's adjudication."""
        data, _ = self.dialogue(dialogue_id)
        if check_id not in {c["id"] for t in data["turns"] for c in t["checks"]}:
            raise ReviewError(f"dialogue {dialogue_id}: no check {check_id!r}", 422)
        if verdict in (Verdict.FIX, Verdict.SKIP) and not comment.strip():
            why = "what is wrong" if verdict is Verdict.FIX else "why it cannot be judged"
            raise ReviewError(f"check {check_id}: a {verdict.value} needs a comment saying {why}", 422)
        check_text(comment, "comment")
        cv = T["check_verdicts"]
        key = sa.and_(cv.c.user_id == user.id, cv.c.dialogue_id == dialogue_id, cv.c.check_id == check_id)
        with self.begin() as conn:
            was = conn.execute(sa.select(cv.c.verdict, cv.c.comment).where(key)).first()
            if was is not None and (was.verdict, was.comment) == (verdict.value, comment):
                return
            self._still_open(conn, user, dialogue_id)
            at = _now()
            conn.execute(cv.delete().where(key))
            row = {"user_id": user.id, "dialogue_id": dialogue_id, "check_id": check_id, "comment": comment, "at": at}
            conn.execute(cv.insert(), {**row, "verdict": verdict.value})
            conn.execute(T["verdict_history"].insert(), {**row, "value": verdict.value})

    def _still_open(self, conn: Connection, user: User, dialogue_id: str) -> None:
        """ReviewError 409 if the user has decided the dialogue (their verdicts are final then)."""
        dec = T["decisions"]
        decided = conn.execute(
            sa.select(dec.c.decision).where(dec.c.user_id == user.id, dec.c.dialogue_id == dialogue_id)
        ).first()
        if decided is not None:
            raise ReviewError(
                f"dialogue {dialogue_id}: your decision ({decided.decision}) is final, and the other annotators' "
                "verdicts are shown to you now; flag the dialogue with a reason for the admin to adjudicate",
                409,
            )

    def decide(self, user: User, dialogue_id: str, decision: Decision, comment: str) -> None:
        """Record the annotator's decision: once, after every check has a verdict (a skip counts)."""
        data, _ = self.dialogue(dialogue_id)
        check_text(comment, "comment")
        dec, cv = T["decisions"], T["check_verdicts"]
        key = sa.and_(dec.c.user_id == user.id, dec.c.dialogue_id == dialogue_id)
        with self.begin() as conn:
            was = conn.execute(sa.select(dec.c.decision, dec.c.comment).where(key)).first()
            if was is not None and (was.decision, was.comment) == (decision.value, comment):
                return
            self._still_open(conn, user, dialogue_id)
            judged = set(
                conn.execute(
                    sa.select(cv.c.check_id).where(cv.c.user_id == user.id, cv.c.dialogue_id == dialogue_id)
                ).scalars()
            )
            missing = [c["id"] for t in data["turns"] for c in t["checks"] if c["id"] not in judged]
            if missing:
                raise ReviewError(
                    f"dialogue {dialogue_id}: {len(missing)} check(s) not judged yet (first: {missing[0]}); "
                    "give each a verdict, or skip it with a reason, before deciding",
                    422,
                )
            at = _now()
            row = {"user_id": user.id, "dialogue_id": dialogue_id, "comment": comment, "at": at}
            conn.execute(dec.insert(), {**row, "decision": decision.value})
            conn.execute(T["verdict_history"].insert(), {**row, "check_id": None, "value": decision.value})
            it = T["item_times"]
            key_t = sa.and_(it.c.user_id == user.id, it.c.dialogue_id == dialogue_id)
            if conn.execute(sa.update(it).where(key_t).values(decided=time.time())).rowcount == 0:
                conn.execute(it.insert(), {"user_id": user.id, "dialogue_id": dialogue_id, "opened": time.time(),
                                           "decided": time.time()})  # fmt: skip

    def verdict_history(self, dialogue_id: str | None = None) -> list[dict[str, Any]]:
        """Every verdict and decision given (on one dialogue, or all), oldest first: dialogue, user,
        at, check (None for a decision), value, comment, and whether it is the one that counts now."""
        h, u = T["verdict_history"], T["users"]
        q = sa.select(h, u.c.name).join(u, u.c.id == h.c.user_id).order_by(h.c.id)
        if dialogue_id is not None:
            q = q.where(h.c.dialogue_id == dialogue_id)
        with self.begin() as conn:
            rows = conn.execute(q).all()
        out: list[dict[str, Any]] = []
        latest: dict[tuple[str, str, str | None], int] = {}
        for r in rows:
            latest[(r.dialogue_id, r.name, r.check_id)] = len(out)
            out.append(
                {
                    "dialogue": r.dialogue_id,
                    "user": r.name,
                    "at": r.at,
                    "check": r.check_id,
                    "value": r.value,
                    "comment": r.comment,
                    "current": False,
                }
            )
        for i in latest.values():
            out[i]["current"] = True
        return out

    def has_decided(self, user: User, dialogue_id: str) -> bool:
        dec = T["decisions"]
        with self.begin() as conn:
            q = sa.select(dec.c.decision).where(dec.c.user_id == user.id, dec.c.dialogue_id == dialogue_id)
            return conn.execute(q).first() is not None

    def verdicts(self, dialogue_id: str) -> dict[str, dict[str, Any]]:
        """Every annotator's verdicts on a dialogue: name -> {decision, comment, checks: {id: (verdict, comment)}}."""
        u, cv, dec = T["users"], T["check_verdicts"], T["decisions"]
        out: dict[str, dict[str, Any]] = {}
        with self.begin() as conn:
            for r in conn.execute(
                sa.select(u.c.name, dec.c.decision, dec.c.comment)
                .join(u, u.c.id == dec.c.user_id)
                .where(dec.c.dialogue_id == dialogue_id)
            ):
                out.setdefault(r.name, {"decision": None, "comment": "", "checks": {}})
                out[r.name].update(decision=r.decision, comment=r.comment)
            for c in conn.execute(
                sa.select(u.c.name, cv.c.check_id, cv.c.verdict, cv.c.comment)
                .join(u, u.c.id == cv.c.user_id)
                .where(cv.c.dialogue_id == dialogue_id)
            ):
                entry = out.setdefault(c.name, {"decision": None, "comment": "", "checks": {}})
                entry["checks"][c.check_id] = (c.verdict, c.comment)
        return dict(sorted(out.items()))

    def edit(self, user: User, dialogue_id: str, base_version: int, path: str, value: str) -> int:
        """Write ``value`` at ``path`` if ``base_version`` is still current; returns the new version.

        Raises `Conflict` when another save came first, ReviewError for a field that is not
        editable, a text that is too long or an edit that would make the dialogue invalid.
        """
        check_text(value, f"field {path!r}")
        with self.begin() as conn:
            row = self._current(conn, dialogue_id)
            data = json.loads(row.current)
            before = field_at(data, path)
            if row.version != base_version:
                raise Conflict(
                    dialogue_id,
                    path,
                    base_version,
                    row.version,
                    value,
                    before,
                    self._by(conn, dialogue_id, row.version),
                )
            answer = data["questions"][int(path.split(".")[1])]["answer"] if path.startswith("questions.") else None
            _set_field(data, path, value)
            after = field_at(data, path)
            if before == after and (answer is None or data["questions"][int(path.split(".")[1])]["answer"] == answer):
                return int(row.version)
            _checked_dialogue(dialogue_id, data, path)
            if answer is not None and not path.endswith(".answer"):
                now = data["questions"][int(path.split(".")[1])]["answer"]
                if now != answer:  # the answer followed its options: the record shows both
                    before, after = f"{before}\n(answer: {answer})", f"{after}\n(answer: {now})"
            return self._commit(conn, user, dialogue_id, base_version, data, path, before, after, value)

    def revert(self, user: User, dialogue_id: str, base_version: int, to_version: int) -> int:
        """Make a new version whose content is version ``to_version``'s; returns the new version.

        Raises `Conflict` if ``base_version`` is no longer current, ReviewError for a version that
        does not exist. Returns the current version unchanged if it already has that content.
        """
        with self.begin() as conn:
            row = self._current(conn, dialogue_id)
            if not 0 <= to_version < row.version:
                raise ReviewError(
                    f"dialogue {dialogue_id}: no version {to_version} to revert to (0-{row.version - 1})", 422
                )
            path = f"{REVERT}{to_version}"
            if row.version != base_version:
                by = self._by(conn, dialogue_id, row.version)
                raise Conflict(
                    dialogue_id, path, base_version, row.version, f"version {to_version}", f"version {row.version}", by
                )
            data, old = json.loads(row.current), json.loads(self._content(conn, dialogue_id, to_version))
            if old == data:
                return int(row.version)
            _checked_dialogue(dialogue_id, old, path)
            now, then = _edited_fields(data), _edited_fields(old)
            changed = [k for k in sorted(now.keys() | then.keys()) if now.get(k) != then.get(k)]
            before = "\n".join(f"{k}: {now.get(k, '')}" for k in changed)
            after = "\n".join(f"{k}: {then.get(k, '')}" for k in changed)
            return self._commit(conn, user, dialogue_id, base_version, old, path, before, after, after)

    def _current(self, conn: Connection, dialogue_id: str) -> Any:
        d = T["dialogues"]
        row = conn.execute(sa.select(d.c.current, d.c.version).where(d.c.id == dialogue_id)).first()
        if row is None:
            raise ReviewError(f"dialogue {dialogue_id!r}: not in this review", 404)
        return row

    def _by(self, conn: Connection, dialogue_id: str, version: int) -> str:
        """Who made a version of a dialogue."""
        e, u = T["edits"], T["users"]
        name = conn.execute(
            sa.select(u.c.name)
            .join(e, e.c.user_id == u.c.id)
            .where(e.c.dialogue_id == dialogue_id, e.c.version == version)
        ).scalar_one_or_none()
        return str(name or "?")

    def _content(self, conn: Connection, dialogue_id: str, version: int) -> str:
        """A dialogue's JSON at ``version`` (0: as loaded); replays text edits made before snapshots were kept."""
        d, sn, e = T["dialogues"], T["snapshots"], T["edits"]
        if version == 0:
            return str(conn.execute(sa.select(d.c.original).where(d.c.id == dialogue_id)).scalar_one())
        kept = conn.execute(
            sa.select(sn.c.content).where(sn.c.dialogue_id == dialogue_id, sn.c.version == version)
        ).scalar_one_or_none()
        if kept is not None:
            return str(kept)
        data = json.loads(self._content(conn, dialogue_id, version - 1))
        edit = conn.execute(
            sa.select(e.c.path, e.c.after).where(e.c.dialogue_id == dialogue_id, e.c.version == version)
        ).one()
        _set_field(data, edit.path, edit.after)
        return _dumps(data)

    def _commit(
        self,
        conn: Connection,
        user: User,
        dialogue_id: str,
        base_version: int,
        data: Any,
        path: str,
        before: str,
        after: str,
        yours: str,
    ) -> int:
        d, e = T["dialogues"], T["edits"]
        new, content = base_version + 1, _dumps(data)
        done = conn.execute(
            d.update().where(d.c.id == dialogue_id, d.c.version == base_version).values(current=content, version=new)
        )
        if done.rowcount != 1:  # another save committed between our read and this update
            raise Conflict(dialogue_id, path, base_version, new, yours, before, "another reviewer")
        conn.execute(
            e.insert(),
            {
                "dialogue_id": dialogue_id,
                "version": new,
                "user_id": user.id,
                "at": _now(),
                "path": path,
                "before": before,
                "after": after,
            },
        )
        conn.execute(T["snapshots"].insert(), {"dialogue_id": dialogue_id, "version": new, "content": content})
        return new

    def edits(self, dialogue_id: str | None = None) -> list[Edit]:
        """Every edit (of one dialogue, or of all), in the order they were made."""
        e, u = T["edits"], T["users"]
        q = sa.select(e, u.c.name).join(u, u.c.id == e.c.user_id).order_by(e.c.dialogue_id, e.c.version)
        if dialogue_id is not None:
            q = q.where(e.c.dialogue_id == dialogue_id)
        with self.begin() as conn:
            rows = conn.execute(q).all()
        return [Edit(r.dialogue_id, r.version, r.name, r.at, r.path, r.before, r.after) for r in rows]

    # flags, guidelines, time per item ---------------------------------------------------

    def opened(self, user: User, dialogue_id: str) -> None:
        """Note when an annotator first opened a dialogue (the start of its time per item)."""
        it = T["item_times"]
        with self.begin() as conn:
            seen = conn.execute(
                sa.select(it.c.opened).where(it.c.user_id == user.id, it.c.dialogue_id == dialogue_id)
            ).first()
            if seen is None:
                conn.execute(it.insert(), {"user_id": user.id, "dialogue_id": dialogue_id, "opened": time.time()})

    def item_seconds(self) -> dict[str, dict[str, float]]:
        """Per dialogue, per annotator who decided it: seconds from first opening it to the decision."""
        it, u = T["item_times"], T["users"]
        out: dict[str, dict[str, float]] = {}
        with self.begin() as conn:
            for r in conn.execute(
                sa.select(it.c.dialogue_id, it.c.opened, it.c.decided, u.c.name)
                .join(u, u.c.id == it.c.user_id)
                .where(it.c.decided.is_not(None))
            ):
                out.setdefault(r.dialogue_id, {})[r.name] = round(max(0.0, r.decided - r.opened), 1)
        return out

    def flag(self, user: User, dialogue_id: str, reason: str) -> None:
        """Flag a dialogue for the admin with a reason (again: the new reason replaces the old)."""
        self.dialogue(dialogue_id)
        if not reason.strip():
            raise ReviewError(f"dialogue {dialogue_id}: a flag needs a reason", 422)
        check_text(reason, "reason")
        f = T["flags"]
        with self.begin() as conn:
            conn.execute(f.delete().where(f.c.user_id == user.id, f.c.dialogue_id == dialogue_id))
            conn.execute(f.insert(), {"user_id": user.id, "dialogue_id": dialogue_id, "reason": reason, "at": _now()})

    def unflag(self, user: User, dialogue_id: str, who: str | None = None) -> None:
        """Take a flag back (an admin may clear anyone's: ``who``)."""
        f, u = T["flags"], T["users"]
        with self.begin() as conn:
            q = f.delete().where(f.c.dialogue_id == dialogue_id)
            if who is None:
                q = q.where(f.c.user_id == user.id)
            else:
                q = q.where(f.c.user_id.in_(sa.select(u.c.id).where(u.c.name == who)))
            conn.execute(q)

    def flags(self) -> dict[str, dict[str, str]]:
        """Per flagged dialogue: who flagged it and why."""
        f, u = T["flags"], T["users"]
        out: dict[str, dict[str, str]] = {}
        with self.begin() as conn:
            for r in conn.execute(sa.select(f.c.dialogue_id, f.c.reason, u.c.name).join(u, u.c.id == f.c.user_id)):
                out.setdefault(r.dialogue_id, {})[r.name] = r.reason
        return out

    def guidelines(self) -> tuple[str, int]:
        """The lead's guidelines (Markdown) and their version (0: none written yet)."""
        g = T["guidelines"]
        with self.begin() as conn:
            row = conn.execute(sa.select(g.c.text, g.c.version).order_by(g.c.version.desc()).limit(1)).first()
        return (str(row.text), int(row.version)) if row is not None else ("", 0)

    def set_guidelines(self, text: str, admin: User | None = None) -> int:
        """Write a new version of the guidelines; returns its number."""
        check_text(text, "guidelines")
        g = T["guidelines"]
        with self.begin() as conn:
            last = conn.execute(sa.select(sa.func.max(g.c.version))).scalar_one() or 0
            conn.execute(
                g.insert(), {"version": last + 1, "user_id": admin.id if admin else None, "text": text, "at": _now()}
            )
        return int(last + 1)

    # admin ------------------------------------------------------------------------------

    def adjudicate(self, admin: User, dialogue_id: str, decision: Decision, comment: str) -> None:
        self.dialogue(dialogue_id)
        check_text(comment, "comment")
        adj = T["adjudications"]
        with self.begin() as conn:
            conn.execute(adj.delete().where(adj.c.dialogue_id == dialogue_id))
            row = {"dialogue_id": dialogue_id, "user_id": admin.id, "decision": decision.value}
            conn.execute(adj.insert(), {**row, "comment": comment, "at": _now()})

    def table(self) -> list[dict[str, Any]]:
        """One row per dialogue: id, group, assigned names, {name: decision}, {name: {check: verdict}},
        the adjudicated decision and the final decision (adjudicated, else a strict majority of the
        assigned annotators, else None)."""
        d, a, u, dec, cv, adj = (
            T[n] for n in ("dialogues", "assignments", "users", "decisions", "check_verdicts", "adjudications")
        )
        with self.begin() as conn:
            rows: dict[str, dict[str, Any]] = {
                r.id: {"id": r.id, "group": r.grp, "assigned": [], "decisions": {}, "checks": {}, "adjudicated": None}
                for r in conn.execute(sa.select(d.c.id, d.c.grp).order_by(d.c.position))
            }
            for asg in conn.execute(sa.select(a.c.dialogue_id, u.c.name).join(u, u.c.id == a.c.user_id)):
                rows[asg.dialogue_id]["assigned"].append(asg.name)
            for dc in conn.execute(
                sa.select(dec.c.dialogue_id, dec.c.decision, u.c.name).join(u, u.c.id == dec.c.user_id)
            ):
                rows[dc.dialogue_id]["decisions"][dc.name] = dc.decision
            for cvr in conn.execute(
                sa.select(cv.c.dialogue_id, cv.c.check_id, cv.c.verdict, u.c.name).join(u, u.c.id == cv.c.user_id)
            ):
                rows[cvr.dialogue_id]["checks"].setdefault(cvr.name, {})[cvr.check_id] = cvr.verdict
            for ad in conn.execute(sa.select(adj.c.dialogue_id, adj.c.decision)):
                rows[ad.dialogue_id]["adjudicated"] = ad.decision
            for row in rows.values():
                row["check_adjudicated"] = {}
            ca = T["check_adjudications"]
            for c in conn.execute(sa.select(ca.c.dialogue_id, ca.c.check_id, ca.c.verdict)):
                rows[c.dialogue_id]["check_adjudicated"][c.check_id] = c.verdict
        flags, seconds = self.flags(), self.item_seconds()
        for row in rows.values():
            row["flags"] = flags.get(row["id"], {})
            row["seconds"] = seconds.get(row["id"], {})
            row["assigned"].sort()
            row["final"] = row["adjudicated"] or majority(row["decisions"], len(row["assigned"]))
            row["failed_checks"] = failed_checks(row)
            row["open_checks"] = [c for c in row["failed_checks"] if c not in row["check_adjudicated"]]
            row["dropped_checks"] = sorted(c for c, v in row["check_adjudicated"].items() if v == Verdict.FAIL.value)
        return list(rows.values())

    def adjudicate_check(self, admin: User, dialogue_id: str, check_id: str, verdict: Verdict, comment: str) -> None:
        """The admin's verdict on one check (pass keeps it in the export, fail drops it); the latest counts."""
        data, _ = self.dialogue(dialogue_id)
        if check_id not in {c["id"] for t in data["turns"] for c in t["checks"]}:
            raise ReviewError(f"dialogue {dialogue_id}: no check {check_id!r}", 422)
        if verdict not in (Verdict.PASS, Verdict.FAIL):
            raise ReviewError(f"check {check_id}: adjudicate with pass or fail", 422)
        check_text(comment, "comment")
        ca = T["check_adjudications"]
        with self.begin() as conn:
            conn.execute(ca.delete().where(ca.c.dialogue_id == dialogue_id, ca.c.check_id == check_id))
            row = {"dialogue_id": dialogue_id, "check_id": check_id, "user_id": admin.id, "verdict": verdict.value}
            conn.execute(ca.insert(), {**row, "comment": comment, "at": _now()})


def majority(decisions: dict[str, str], assigned: int) -> str | None:
    """The decision more than half of the ``assigned`` annotators made, if any."""
    counts: dict[str, int] = {}
    for v in decisions.values():
        counts[v] = counts.get(v, 0) + 1
    best = max(counts.items(), key=lambda kv: kv[1], default=None)
    return best[0] if best is not None and best[1] * 2 > max(assigned, len(decisions)) else None


def median_seconds(rows: list[dict[str, Any]], name: str) -> float | None:
    """An annotator's median time per decided dialogue (first opened to decision), or None."""
    import statistics

    times = [r["seconds"][name] for r in rows if name in r["seconds"]]
    return float(statistics.median(times)) if times else None


def seconds_text(seconds: float | None) -> str:
    """A time per item for people: ``95 s``, ``4 min 10 s``."""
    if seconds is None:
        return "—"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


def to_adjudicate(row: dict[str, Any]) -> dict[str, Any]:
    """What of a dialogue (a `ReviewDB.table` row) waits for the admin: its decisions split (1) or
    not (0) while no adjudication settles them, the checks its annotators split on and the checks
    most of them failed, each until the admin gives the check a verdict; ``any``: whether anything does."""
    decided = row["decisions"]
    decisions = int(len(decided) >= 2 and len(set(decided.values())) > 1 and row["adjudicated"] is None)
    votes: dict[str, set[str]] = {}
    for verdicts in row["checks"].values():
        for cid, v in verdicts.items():
            if v != Verdict.SKIP.value:
                votes.setdefault(cid, set()).add(v)
    checks = sorted(c for c, vs in votes.items() if len(vs) > 1 and c not in row["check_adjudicated"])
    failed = list(row["open_checks"])
    return {"decisions": decisions, "checks": checks, "failed": failed, "any": bool(decisions or checks or failed)}


def failed_checks(row: dict[str, Any]) -> list[str]:
    """The checks that more than half of a dialogue's assigned annotators failed (`table` rows):
    never exported as ground truth until the admin adjudicates them."""
    fails: dict[str, int] = {}
    for verdicts in row["checks"].values():
        for cid, v in verdicts.items():
            fails[cid] = fails.get(cid, 0) + (v == Verdict.FAIL.value)
    voters = max(len(row["assigned"]), len(row["checks"]))
    return sorted(c for c, n in fails.items() if n * 2 > voters)


def disagreement(row: dict[str, Any]) -> int:
    """How much a dialogue's annotators disagree: distinct decisions beyond one, weighted above
    the checks on which their verdicts differ (0: they agree, or fewer than two have judged)."""
    decisions = set(row["decisions"].values())
    per_check: dict[str, set[str]] = {}
    for verdicts in row["checks"].values():
        for cid, v in verdicts.items():
            if v in VOTES:
                per_check.setdefault(cid, set()).add(v)
    checks = sum(1 for vs in per_check.values() if len(vs) > 1)
    return 1000 * max(0, len(decisions) - 1) + checks


def _sqlite_pragmas(dbapi_conn: Any, _: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.close()


def _migrate(conn: Connection, shown: str) -> None:
    schema_version.create(conn, checkfirst=True)
    current = conn.execute(sa.select(sa.func.max(schema_version.c.version))).scalar_one() or 0
    if current > SCHEMA_VERSION:
        raise UserError(
            f"{shown}: review schema version {current} is newer than this yanami's ({SCHEMA_VERSION}); upgrade yanami"
        )
    for version in range(current + 1, SCHEMA_VERSION + 1):
        MIGRATIONS[version - 1](conn)
        conn.execute(schema_version.insert(), {"version": version})


def current_schema_version(db: ReviewDB) -> int:
    with db.begin() as conn:
        return int(conn.execute(sa.select(sa.func.max(schema_version.c.version))).scalar_one() or 0)
