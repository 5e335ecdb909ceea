"""``yanami review …``: set up a review, run its web app, follow it and export what it approved.

Only typer is imported here; each command loads the database layer and the web stack when it runs,
so ``yanami --help`` stays light and a missing ``review`` extra is one line, not a traceback.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from yanami.contract import UserError

if TYPE_CHECKING:
    from yanami.review._db import ReviewDB

DEFAULT_PORT = 8780

review_app = typer.Typer(
    help="Human review of a dataset by annotators in a web app (SQLite or PostgreSQL).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
users_app = typer.Typer(help="Reviewers and admins.", no_args_is_help=True, rich_markup_mode=None)
review_app.add_typer(users_app, name="users")

Db = Annotated[
    str,
    typer.Option(
        "--db",
        envvar="YANAMI_REVIEW_DB",
        metavar="URL",
        help="The review database: a SQLite file path, or postgresql://user@host/db.",
    ),
]


class RoleName(StrEnum):
    annotator = "annotator"
    admin = "admin"


def _open(db: str, *, create: bool = False) -> ReviewDB:
    try:
        from yanami.review._db import ReviewDB
    except ImportError as exc:
        raise UserError(
            f"yanami review needs the review extra ({exc.name} is missing): pip install 'yanami[review]'"
        ) from None
    return ReviewDB(db, create=create)


@review_app.command()
def init(
    dataset: Annotated[
        Path, typer.Argument(help="A dataset directory (from yanami build or construct).", metavar="DATASET")
    ],
    db: Db = "review.sqlite",
) -> None:
    """Create a review database for a dataset (its dialogues and image index)."""
    store = _open(db, create=True)
    n = store.load_dataset(dataset)
    typer.echo(f"{store.shown}: {n} dialogues of {dataset} ready for review")


@users_app.command("add")
def users_add(
    name: Annotated[str, typer.Argument(metavar="NAME")],
    role: Annotated[RoleName, typer.Option(help="annotator or admin")] = RoleName.annotator,
    db: Db = "review.sqlite",
    url: Annotated[
        str, typer.Option(help="Where the app is served, for the link.", metavar="URL")
    ] = f"http://127.0.0.1:{DEFAULT_PORT}",
) -> None:
    """Add a user and print their one-time sign-in link."""
    from yanami.review._db import Role

    token = _open(db).add_user(name, Role(role.value))
    typer.echo(f"{name}: {url.rstrip('/')}/signin?token={token}")


@users_app.command("link")
def users_link(
    name: Annotated[str, typer.Argument(metavar="NAME")],
    db: Db = "review.sqlite",
    url: Annotated[
        str, typer.Option(help="Where the app is served, for the link.", metavar="URL")
    ] = f"http://127.0.0.1:{DEFAULT_PORT}",
) -> None:
    """Print a new one-time sign-in link for a user (their unspent old link stops working)."""
    token = _open(db).relink(name)
    typer.echo(f"{name}: {url.rstrip('/')}/signin?token={token}")


@users_app.command("remove")
def users_remove(name: Annotated[str, typer.Argument(metavar="NAME")], db: Db = "review.sqlite") -> None:
    """Remove a user: their sessions end; their verdicts and decisions stay under their name."""
    ended, dropped = _open(db).remove_user(name)
    typer.echo(
        f"{name} removed: {ended} session(s) ended, {dropped} undecided assignment(s) dropped "
        "(run `yanami review assign` to top them up)"
    )


@users_app.command("list")
def users_list(db: Db = "review.sqlite") -> None:
    """List users and their roles (removed users last)."""
    store = _open(db)
    for user in store.users():
        typer.echo(f"{user.name}\t{user.role.value}")
    for user in store.users(removed=True):
        typer.echo(f"{user.name}\t{user.role.value}\tremoved")


@review_app.command()
def assign(
    per_item: Annotated[int, typer.Option(help="Annotators per dialogue.", metavar="N")] = 3,
    db: Db = "review.sqlite",
) -> None:
    """Give every dialogue N annotators, spreading the load evenly (tops up on a second run)."""
    added = _open(db).assign(per_item)
    typer.echo(f"{added} new assignment(s)")


@review_app.command()
def serve(
    db: Db = "review.sqlite",
    host: Annotated[str, typer.Option(help="The address to bind (loopback unless told otherwise).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, metavar="PORT")] = DEFAULT_PORT,
) -> None:
    """Serve the review app (Ctrl-C stops it)."""
    import socket

    import uvicorn

    from yanami.review._app import create_app

    store = _open(db)
    try:  # the socket first: a port in use or an address not here is one line, before anything is served
        sock = socket.create_server((host, port))
    except OSError as exc:
        raise UserError(
            f"{host}:{port}: cannot listen there ({exc.strerror or exc}); choose another --port or --host"
        ) from None
    with sock:
        typer.echo(f"serving {store.shown} on http://{host}:{sock.getsockname()[1]} (Ctrl-C stops)", err=True)
        # access_log off: a sign-in URL carries its one-time token until it is spent
        config = uvicorn.Config(create_app(store), log_level="warning", access_log=False)
        uvicorn.Server(config).run(sockets=[sock])


@review_app.command()
def status(db: Db = "review.sqlite") -> None:
    """Progress per annotator and the state of every dialogue."""
    from yanami.review._db import Role, disagreement, median_seconds, seconds_text, to_adjudicate

    store = _open(db)
    rows = store.table()
    for user in store.users():
        if user.role is Role.ANNOTATOR:
            assigned = sum(1 for r in rows if user.name in r["assigned"])
            decided = sum(1 for r in rows if user.name in r["decisions"])
            median = median_seconds(rows, user.name)
            timing = f", median {seconds_text(median)} per dialogue" if median is not None else ""
            typer.echo(f"{user.name}: {decided}/{assigned} decided{timing}")
    finals: dict[str, int] = {}
    for r in rows:
        key = r["final"] or "undecided"
        finals[key] = finals.get(key, 0) + 1
    summary = ", ".join(f"{k} {v}" for k, v in sorted(finals.items()))
    disputed = sum(1 for r in rows if len(r["decisions"]) >= 2 and disagreement(r) > 0)
    waiting = sum(1 for r in rows if to_adjudicate(r)["any"])
    flagged = sum(1 for r in rows if r["flags"])
    typer.echo(
        f"{len(rows)} dialogues: {summary}; {disputed} with disagreements; "
        f"{waiting} waiting for the admin; {flagged} flagged"
    )


@review_app.command()
def guidelines(
    source: Annotated[
        Path | None, typer.Argument(help="A Markdown file: its text becomes the new version.", metavar="FILE")
    ] = None,
    db: Db = "review.sqlite",
) -> None:
    """Set the annotators' guidelines from a Markdown file (or print the current ones)."""
    store = _open(db)
    if source is None:
        text, version = store.guidelines()
        typer.echo(text if version else "no guidelines yet (yanami review guidelines FILE.md sets them)")
        return
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{source}: cannot be read ({exc.strerror or exc.__class__.__name__})") from None
    except UnicodeDecodeError:
        raise UserError(f"{source}: not UTF-8 text (the guidelines are Markdown)") from None
    typer.echo(f"guidelines version {store.set_guidelines(text)} ({len(text)} characters)")


@review_app.command("agreement")
def agreement_(
    db: Db = "review.sqlite",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Fleiss' kappa and Krippendorff's alpha per scenario; Cohen's kappa per annotator against the others."""
    from yanami.review._annotators import agreement, fmt

    result = agreement(_open(db).table())
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    typer.echo("scope\tdialogues\tdecided>=2\tfleiss_kappa\tkrippendorff_alpha")
    for scope, b in [("all", result["overall"]), *result["per_group"].items()]:
        typer.echo(
            f"{scope}\t{b['dialogues']}\t{b['decided_by_two_or_more']}\t"
            f"{fmt(b['fleiss_kappa_decisions'])}\t{fmt(b['krippendorff_alpha_checks'])}"
        )
    typer.echo("annotator\tdecisions\tdecision_kappa\tcheck_kappa\tdecision_agreement\tcheck_agreement")
    for name, a in result["per_annotator"].items():
        typer.echo(
            f"{name}\t{a['decisions']}\t{fmt(a['decision_kappa'])}\t{fmt(a['check_kappa'])}\t"
            f"{fmt(a['decision_agreement'])}\t{fmt(a['check_agreement'])}"
        )


@review_app.command()
def export(
    out: Annotated[Path, typer.Option(help="The dataset directory to write.", metavar="BENCH")],
    db: Db = "review.sqlite",
    exclude: Annotated[
        Path | None,
        typer.Option(
            help="A training set: refuse if an approved image is an exact copy of one of its.", metavar="TRAIN"
        ),
    ] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing dataset at BENCH.")] = False,
) -> None:
    """Write the approved dialogues (majority or adjudicated), edits applied, as a dataset."""
    from yanami.review._export import export_approved

    done = export_approved(_open(db), out, exclude=exclude, overwrite=overwrite)
    typer.echo(
        f"{done.path}: {done.dialogues} approved of {done.reviewed} reviewed dialogues "
        f"({done.undecided} undecided left out)"
    )
    if done.held or done.dropped_checks:
        typer.echo(
            f"{done.held} approved dialogue(s) held back: a check most annotators failed awaits adjudication "
            f"(/admin); {done.dropped_checks} check(s) the admin failed left out"
        )
    if done.near_duplicates:
        typer.echo(
            f"warning: {done.near_duplicates} near-duplicate image(s) of {exclude} (run yanami leakage)", err=True
        )


for _typer in (review_app, users_app):  # each command's whole first docstring line in --help
    for _info in _typer.registered_commands:
        _doc = (_info.callback.__doc__ if _info.callback else None) or ""
        if _info.short_help is None and _doc.strip():
            _info.short_help = _doc.strip().splitlines()[0]
