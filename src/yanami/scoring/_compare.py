"""Which runs of a set are not comparable, and why: the marks and warnings of honest tables.

Rows are comparable when their runs were made on the same bench (SHA-256 of its
manifest), with the same ``--limit``, graded by the same judge (name and version), under the
same history, and when each covers every item and every scenario. Where the runs of a
table differ in one of these, the rows that depart from the rest (the majority; for limits
the whole bench, for histories GT-History) carry `MARK` and a note; a run with coverage
under 100 %, or averaged over fewer than four scenarios, is marked on its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable

from yanami.scoring._runs import SCENARIOS
from yanami.scoring._scores import MIN_COVERAGE, RunScores

MARK = "†"
"""The marker of a row that is not comparable with the others (a footnote says why)."""
PRIVILEGED_MARK = "‡"
"""The marker of a row whose model read the bench (a privileged run): not a model result."""


def _reference(values: list[Hashable], prefer: Hashable | None = None) -> Hashable:
    """The value most runs share (ties: the first run's), or ``prefer`` where a run has it."""
    if prefer is not None and prefer in values:
        return prefer
    counts = Counter(values)
    top = max(counts.values())
    return next(v for v in values if counts[v] == top)


def _limit_text(limit: Hashable) -> str:
    return "the whole bench" if limit is None else f"--limit {limit}"


_SETTINGS: list[tuple[str, Callable[[RunScores], Hashable], Callable[[Hashable], str], Hashable | None]] = [
    ("bench", lambda s: s.bench_sha256, lambda v: f"bench {str(v)[:12]}", None),
    ("limit", lambda s: s.limit, _limit_text, None),
    ("judge", lambda s: s.judge, lambda v: f"judge {v}", None),
    ("history", lambda s: s.history, lambda v: "Self-History" if v == "self" else "GT-History", "gt"),
]
"""(what, the run's value, how a value reads, the preferred reference value)."""


def caveats(scores: list[RunScores]) -> dict[str, list[str]]:
    """Label -> why that row is not comparable with the others (empty: it is)."""
    out: dict[str, list[str]] = {s.label: [] for s in scores}
    for _, key, text, prefer in _SETTINGS:
        values = [key(s) for s in scores]
        if len(set(values)) < 2:
            continue
        ref = _reference(values, prefer)
        for s, v in zip(scores, values, strict=True):
            if v != ref:
                out[s.label].append(f"{text(v)}, the others {text(ref)}")
    for s in scores:
        if "+" in s.judge:
            out[s.label].append(f"verdicts of several versions of a judge ({s.judge})")
        cov = s.coverage
        if cov.get("percent", 100) < 100:
            withheld = f"; under {100 * MIN_COVERAGE:g} %: Avg. and its interval withheld" if s.withheld else ""
            out[s.label].append(
                f"{cov['valid']} of {cov['expected']} items valid ({cov['percent']} % coverage{withheld})"
            )
        if not s.all_scenarios:
            out[s.label].append(f"averages over {len(s.average_over)} of {len(SCENARIOS)} scenarios")
    return out


def warnings(scores: list[RunScores]) -> list[str]:
    """One line per kind of difference that makes rows not comparable (empty: all are)."""
    lines = []
    for what, key, text, prefer in _SETTINGS:
        values = [key(s) for s in scores]
        if len(set(values)) < 2:
            continue
        ref = _reference(values, prefer)
        odd = "; ".join(f"{s.label}: {text(v)}" for s, v in zip(scores, values, strict=True) if v != ref)
        lines.append(f"rows are not comparable: different {what} ({odd}; the others {text(ref)}); marked {MARK}")
    mixed = [s for s in scores if "+" in s.judge]
    if mixed:
        lines.append(
            "verdicts of several versions of one judge in "
            + "; ".join(f"{s.label} ({s.judge})" for s in mixed)
            + f" (`yanami judge` grades again what an older version graded); marked {MARK}"
        )
    partial = [s for s in scores if s.coverage.get("percent", 100) < 100]
    if partial:
        lines.append(
            "coverage under 100 %: "
            + "; ".join(f"{s.label} {s.coverage['valid']}/{s.coverage['expected']} items valid" for s in partial)
            + " (scores are over the valid items only"
            + (
                f"; below {100 * MIN_COVERAGE:g} % the benchmark score and its interval are withheld"
                if any(s.withheld for s in partial)
                else ""
            )
            + f"); marked {MARK}"
        )
    fewer = [s for s in scores if not s.all_scenarios]
    if fewer:
        lines.append(
            f"averages over fewer than {len(SCENARIOS)} scenarios: "
            + "; ".join(f"{s.label} over {', '.join(s.average_over) or 'none'}" for s in fewer)
            + f" (a --limit below {len(SCENARIOS)}, or a scenario without valid items); marked {MARK}"
        )
    return lines
