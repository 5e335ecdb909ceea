"""The human-review web app (the paper's stage d): three annotators verify each dialogue.

Importing this package loads only the command line (`review_app`); the web stack, the database
layer, the agreement statistics and the reading of human verdicts for `yanami agreement` (the
``review`` extra) load when a command or name needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yanami.review._cli import review_app

if TYPE_CHECKING:
    from yanami.review._annotators import agreement
    from yanami.review._app import create_app
    from yanami.review._db import Conflict, Decision, ReviewDB, ReviewError, Role, Verdict
    from yanami.review._export import Exported, export_approved
    from yanami.review._human import HumanCheck, HumanVerdicts, read_human_verdicts

_LAZY = {
    "agreement": "yanami.review._annotators",
    "create_app": "yanami.review._app",
    "Conflict": "yanami.review._db",
    "Decision": "yanami.review._db",
    "ReviewDB": "yanami.review._db",
    "ReviewError": "yanami.review._db",
    "Role": "yanami.review._db",
    "Verdict": "yanami.review._db",
    "Exported": "yanami.review._export",
    "export_approved": "yanami.review._export",
    "HumanCheck": "yanami.review._human",
    "HumanVerdicts": "yanami.review._human",
    "read_human_verdicts": "yanami.review._human",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Conflict",
    "Decision",
    "Exported",
    "HumanCheck",
    "HumanVerdicts",
    "ReviewDB",
    "ReviewError",
    "Role",
    "Verdict",
    "agreement",
    "create_app",
    "export_approved",
    "read_human_verdicts",
    "review_app",
]
