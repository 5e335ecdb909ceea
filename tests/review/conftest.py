"""Fixtures of the review tests: a small world dataset, a database per test on SQLite and (when
one listens on loopback) PostgreSQL, and the app served by a real uvicorn on 127.0.0.1."""

from __future__ import annotations

import http.client
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

import pytest

pytest.importorskip("sqlalchemy", reason="the review extra is not installed")

from yanami.review import ReviewDB, Role, Verdict
from yanami.review._db import User

PG_HOST, PG_PORT = "127.0.0.1", 5432


def postgres_reachable() -> bool:
    try:
        with socket.create_connection((PG_HOST, PG_PORT), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def review_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four world dialogues, one per scenario (read-only)."""
    from yanami.world import build_world

    path = tmp_path_factory.mktemp("review") / "ds"
    build_world(path, per_scenario=1, seed=3)
    return path


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty review database: a SQLite file, or a new PostgreSQL database dropped afterwards."""
    if request.param == "sqlite":
        yield str(tmp_path / "review.sqlite")
        return
    if not postgres_reachable():
        pytest.skip("PostgreSQL not reachable on 127.0.0.1:5432")
    import psycopg

    name = f"yanami_review_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"postgresql://postgres@{PG_HOST}:{PG_PORT}/test", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@{PG_HOST}:{PG_PORT}/{name}"
    finally:
        with psycopg.connect(f"postgresql://postgres@{PG_HOST}:{PG_PORT}/test", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass
class Review:
    """A loaded review: the database, and each user's one-time sign-in token."""

    db: ReviewDB
    tokens: dict[str, str]


def make_review(url: str, dataset: Path, per_item: int = 2, annotators: tuple[str, ...] = ("ann1", "ann2")) -> Review:
    db = ReviewDB(url, create=True)
    db.load_dataset(dataset)
    tokens = {name: db.add_user(name, Role.ANNOTATOR) for name in annotators}
    tokens["boss"] = db.add_user("boss", Role.ADMIN)
    db.assign(per_item)
    return Review(db, tokens)


@pytest.fixture
def review(db_url: str, review_dataset: Path) -> Iterator[Review]:
    r = make_review(db_url, review_dataset)
    yield r
    r.db.close()


class Server:
    """The review app on a real uvicorn, on a free port of 127.0.0.1, in a thread."""

    def __init__(self, db: ReviewDB, delay_s: float = 0.0) -> None:
        """``delay_s``: a slow server, each request answered that much later."""
        import asyncio

        import uvicorn

        from yanami.review import create_app

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        app = create_app(db)
        if delay_s:

            @app.middleware("http")
            async def slow(request, call_next):  # type: ignore[no-untyped-def]
                await asyncio.sleep(delay_s)
                return await call_next(request)

        config = uvicorn.Config(app, log_level="error", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        for _ in range(500):
            if self.server.started:
                return self
            threading.Event().wait(0.01)
        raise RuntimeError("uvicorn did not start")

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(5)
        self.sock.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def sqlite_review(tmp_path: Path, review_dataset: Path) -> Iterator[Review]:
    """A review on SQLite, for the tests of the web layer (the storage tests cover PostgreSQL)."""
    r = make_review(str(tmp_path / "review.sqlite"), review_dataset)
    yield r
    r.db.close()


@pytest.fixture
def server(sqlite_review: Review) -> Iterator[Server]:
    with Server(sqlite_review.db) as s:
        yield s


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


@dataclass
class Client:
    """A browser-like client on the stdlib: keeps its cookie, never follows redirects."""

    port: int
    cookie: str | None = None
    csrf: str | None = None
    set_cookies: list[str] = field(default_factory=list)
    signin_cookie: str | None = None
    """The sign-in page's cookie (login CSRF), kept for the POST that signs in."""

    def request(
        self, method: str, path: str, form: dict[str, str] | None = None, headers: dict[str, str] | None = None
    ) -> Reply:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        hdrs = dict(headers or {})
        cookies = [f"yanami_review={self.cookie}"] if self.cookie else []
        if self.signin_cookie and path.startswith("/signin"):
            cookies.append(f"yanami_signin={self.signin_cookie}")
        if cookies:
            hdrs["Cookie"] = "; ".join(cookies)
        body = None
        if form is not None:
            body = urlencode(form).encode()
            hdrs["Content-Type"] = "application/x-www-form-urlencoded"
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        reply = Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
        self.set_cookies += resp.headers.get_all("set-cookie") or []
        conn.close()
        return reply

    def get(self, path: str, **kw: dict[str, str]) -> Reply:
        return self.request("GET", path, **kw)

    def post(self, path: str, form: dict[str, str], *, csrf: bool = True, **kw: dict[str, str]) -> Reply:
        if csrf and self.csrf is not None:
            form = {"csrf": self.csrf, **form}
        return self.request("POST", path, form, **kw)

    def signin_form(self, token: str = "") -> str:
        """Open the sign-in page as a browser does: keep its cookie, return its form token."""
        import re

        page = self.get(f"/signin?token={token}")
        got = [c for c in self.set_cookies if c.startswith("yanami_signin=")]
        self.signin_cookie = got[-1].split(";", 1)[0].split("=", 1)[1]
        return re.search(r'name="signin_csrf" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]

    def sign_in(self, token: str) -> Reply:
        import re

        form_token = self.signin_form(token)
        reply = self.request("POST", "/signin", {"token": token, "signin_csrf": form_token})
        if reply.status == 303:
            cookie = next(c for c in self.set_cookies if c.startswith("yanami_review="))
            self.cookie = cookie.split(";", 1)[0].split("=", 1)[1]
            page = self.get("/")
            if page.status == 303:  # an admin's home is /admin
                page = self.get(page.headers["location"])
            self.csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
        return reply


@pytest.fixture
def client(server: Server) -> Client:
    return Client(server.port)


def judge_rest(db: ReviewDB, user: User, dialogue_id: str, verdict: Verdict = Verdict.PASS) -> None:
    """Give every check of the dialogue the user has not judged yet ``verdict`` (a decision needs them all)."""
    mine = db.verdicts(dialogue_id).get(user.name, {"checks": {}})["checks"]
    for t in db.dialogue(dialogue_id)[0]["turns"]:
        for c in t["checks"]:
            if c["id"] not in mine:
                db.set_verdict(user, dialogue_id, c["id"], verdict, "")
