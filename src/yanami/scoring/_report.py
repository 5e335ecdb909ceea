"""The self-contained HTML report: the tables, Figure 6's three panels, and a per-sample viewer."""

from __future__ import annotations

import base64
import html
import io
import math
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup
from PIL import Image

from yanami.contract import Dialogue, ImagePart, Results, RunManifest, UserError, atomic_write
from yanami.models import question_prompt
from yanami.runner import bench_sha256, open_bench
from yanami.scoring._compare import PRIVILEGED_MARK, warnings
from yanami.scoring._scores import (
    PRIVILEGED_NOTE,
    SCENARIOS,
    Run,
    RunScores,
    gap_selection,
    history_effect,
    pair_histories,
    progression,
    understanding_realization_gap,
)
from yanami.scoring._tables import Table, html_table, irreducibility
from yanami.scoring._weights import generation_formula
from yanami.store import Dataset

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f")
MAX_BAR = 48.0
"""The widest a bar is drawn (px), so that a chart of one or two groups does not draw slabs."""
LABEL_CHARS = 40
"""Longer group labels are cut with an ellipsis (the bar's tooltip has the whole label)."""
_TILT = math.radians(30)
"""Group labels are drawn rotated by this much, so long labels do not run into each other."""


def text_width(text: str, size: float) -> float:
    """A generous estimate of a sans-serif text's width in px (at ``size`` px): margins are computed
    from it, so a label never runs out of the figure however the browser's font measures it."""
    return 0.62 * size * len(text)


def _heading(title: str, subtitle: str, names: list[str], left: float, key: str) -> tuple[list[str], float]:
    """A chart's title, subtitle and legend row (a swatch with a dark outline per series, so it never
    vanishes against a mark of its colour), and the y where the plot may start."""
    y = 18
    out = [f'<text x="8" y="{y}" font-size="14" font-weight="bold" class="title">{html.escape(title)}</text>']
    if subtitle:
        y += 17
        out.append(f'<text x="8" y="{y}" font-size="12" class="subtitle">{html.escape(subtitle)}</text>')
    y += 12
    out.append(f'<g class="legend" id="{key}-legend">')
    x = left
    for s, name in enumerate(names):
        out.append(
            f'<rect class="swatch" x="{x:.1f}" y="{y}" width="12" height="12" fill="{PALETTE[s % len(PALETTE)]}" '
            'stroke="#333" stroke-width="1"/>'
        )
        out.append(f'<text x="{x + 17:.1f}" y="{y + 10}" font-size="11">{html.escape(name)}</text>')
        x += 17 + text_width(name, 11) + 16
    out.append("</g>")
    return out, y + 12 + 14


def _y_grid(left: float, right: float, base: float, plot_h: float, ymax: float) -> list[str]:
    """Five horizontal grid lines from 0 to ``ymax``, labelled on the left."""
    out = []
    for k in range(5):
        ty = base - plot_h * k / 4
        out.append(f'<line x1="{left}" x2="{right}" y1="{ty:.1f}" y2="{ty:.1f}" stroke="#ddd"/>')
        label = f"{ymax * k / 4:.3g}"
        out.append(f'<text x="{left - 4:.1f}" y="{ty + 4:.1f}" font-size="10" text-anchor="end">{label}</text>')
    return out


def grouped_bars(
    title: str,
    groups: list[str],
    series: list[tuple[str, list[float | None]]],
    ymax: float,
    *,
    key: str = "chart",
    subtitle: str = "",
    width: int = 760,
) -> str:
    """An inline SVG grouped bar chart: one group per model, one bar per series.

    The legend is a row of its own between the title and the plot, so it never covers a bar,
    and every swatch has a dark outline (a swatch never vanishes against a bar of its colour).
    The left and bottom margins are computed from the longest tilted label, so no label is
    clipped. Elements carry classes for checks in a browser (`tests/scoring/test_browser.py`):
    ``bar`` (with ``data-group`` and ``data-series``), ``legend``, ``label``, ``na`` (no value).
    """
    n = max(1, len(groups))
    names = [g if len(g) <= LABEL_CHARS else g[: LABEL_CHARS - 1] + "…" for g in groups]
    longest = max((text_width(g, 10) for g in names), default=0.0)
    reach_x, reach_y = longest * math.cos(_TILT), longest * math.sin(_TILT) + 10
    left, right = 48.0, 12.0
    for _ in range(3):  # the first label's reach to the left depends on the group width, which depends on ``left``
        group_w = (width - left - right) / n
        left = max(48.0, reach_x - group_w / 2 + 6)
    group_w = (width - left - right) / n
    out, top = _heading(title, subtitle, [name for name, _ in series], left, key)
    plot_h = 190
    base = top + plot_h
    height = math.ceil(base + 6 + reach_y + 8)
    out += _y_grid(left, width - right, base, plot_h, ymax)
    bar_w = min(group_w * 0.8 / max(1, len(series)), MAX_BAR)
    for g, name in enumerate(groups):
        x0 = left + g * group_w + (group_w - bar_w * len(series)) / 2
        for s, (series_name, values) in enumerate(series):
            v = values[g]
            bx = x0 + s * bar_w
            if v is None:
                out.append(
                    f'<text class="na" x="{bx + bar_w * 0.45:.1f}" y="{base - 3:.1f}" font-size="9" '
                    f'text-anchor="middle" fill="#888">n/a<title>{html.escape(f"{name}, {series_name}")}: no value'
                    "</title></text>"
                )
                continue
            h = max(1.0, plot_h * max(0.0, min(v, ymax)) / ymax)  # a zero still shows, as a line
            out.append(
                f'<rect class="bar" data-group="{g}" data-series="{s}" x="{bx:.1f}" y="{base - h:.1f}" '
                f'width="{bar_w * 0.9:.1f}" height="{h:.1f}" fill="{PALETTE[s % len(PALETTE)]}">'
                f"<title>{html.escape(f'{name}, {series_name}')}: {v:.2f}</title></rect>"
            )
        cx = left + g * group_w + group_w / 2
        out.append(
            f'<text class="label" x="{cx:.1f}" y="{base + 14:.1f}" font-size="10" text-anchor="end" '
            f'transform="rotate(-30 {cx:.1f} {base + 14:.1f})">{html.escape(names[g])}</text>'
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" id="{key}" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}">' + "".join(out) + "</svg>"
    )


def line_chart(
    title: str,
    series: list[tuple[str, list[tuple[float, float]]]],
    ymax: float | None,
    *,
    key: str = "chart",
    subtitle: str = "",
    width: int = 760,
) -> str:
    """An inline SVG line chart: one polyline per series of (x, y) points, a legend row under the
    title (as `grouped_bars`), the y axis from 0 to ``ymax`` (None: the data's largest value)."""
    points = [xy for _, pts in series for xy in pts]
    top_y = ymax if ymax is not None else max((y for _, y in points), default=1.0) or 1.0
    max_x = max((x for x, _ in points), default=1.0) or 1.0
    left, right = 48.0, 16.0
    out, top = _heading(title, subtitle, [name for name, _ in series], left, key)
    plot_h, plot_w = 190, width - left - right
    base = top + plot_h
    out += _y_grid(left, width - right, base, plot_h, top_y)
    for k in range(5):
        tx = left + plot_w * k / 4
        out.append(
            f'<text x="{tx:.1f}" y="{base + 14:.1f}" font-size="10" text-anchor="middle">{max_x * k / 4:.0f}</text>'
        )
    for s, (name, pts) in enumerate(series):
        coords = " ".join(
            f"{left + plot_w * px / max_x:.1f},{base - plot_h * max(0.0, min(py, top_y)) / top_y:.1f}" for px, py in pts
        )
        out.append(
            f'<polyline class="line" data-series="{s}" fill="none" stroke="{PALETTE[s % len(PALETTE)]}" '
            f'stroke-width="2" points="{coords}"><title>{html.escape(name)}</title></polyline>'
        )
    height = math.ceil(base + 24)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" id="{key}" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}">' + "".join(out) + "</svg>"
    )


def _figure_label(run: Run) -> str:
    return f"{run.label} {PRIVILEGED_MARK}" if run.privileged else run.label


def figure6(runs: list[Run]) -> list[dict[str, Any]]:
    """Figure 6's panels, each ``{"key", "svg", "notes"}``: (a) the understanding-realization gap over
    the runs `gap_selection` chooses (as Table 21), (b) first vs last turn, (c) GT vs Self."""
    selection = gap_selection(runs)
    gap = understanding_realization_gap(selection.runs)
    eligible = gap["eligible"]
    labels = list(gap["gap"])
    shown = {r.label: _figure_label(r) for r in runs}
    privileged = [f"{PRIVILEGED_MARK} {PRIVILEGED_NOTE}."] if any(r.privileged for r in runs) else []
    ck, cu = eligible.get("constraint_adherence", 0), eligible.get("correction_updating", 0)
    panels = [
        {
            "key": "fig6a",
            "svg": grouped_bars(
                "(a) Understanding-realization gap (lower is better)",
                [shown.get(m, m) for m in labels],
                [
                    (name, [gap["gap"][m].get(k) for m in labels])
                    for name, k in (
                        ("CK", "constraint_adherence"),
                        ("CU", "correction_updating"),
                        ("Overall", "overall"),
                    )
                ],
                1.0,
                key="fig6a",
                subtitle=(
                    f"{ck} CK and {cu} CU dialogues, understood by all {len(labels)} runs of the set (as Table 21)"
                    if labels
                    else "no run in the set (see below)"
                ),
            ),
            "notes": [*selection.notes(), *privileged],
        }
    ]
    gt = [r for r in runs if r.history == "gt"]
    prog = [progression(r) for r in gt]
    counts = sorted({int(p["dialogues"] or 0) for p in prog})
    span = "" if not counts else str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    panels.append(
        {
            "key": "fig6b",
            "svg": grouped_bars(
                f"(b) First vs last generation turn, GT-History ({generation_formula()})",
                [_figure_label(r) for r in gt],
                [("First", [p["first"] for p in prog]), ("Last", [p["last"] for p in prog])],  # type: ignore[misc]
                100.0,
                key="fig6b",
                subtitle=f"{span or 0} dialogues with two or more judged generation turns per run (as Table 20)",
            ),
            "notes": privileged,
        }
    )
    pairs = pair_histories(runs)
    effects = [history_effect(g, s) for g, s in pairs]
    dialogues = sorted({int(e["dialogues"] or 0) for e in effects})
    panels.append(
        {
            "key": "fig6c",
            "svg": grouped_bars(
                f"(c) GT-History vs Self-History ({generation_formula()})",
                [_figure_label(g) for g, _ in pairs],
                [("GT-History", [e["gt"] for e in effects]), ("Self-History", [e["self"] for e in effects])],  # type: ignore[misc]
                100.0,
                key="fig6c",
                subtitle=f"{', '.join(map(str, dialogues)) or 0} Self-History dialogues (as the History effect table)",
            ),
            "notes": privileged,
        }
    )
    return panels


class _Thumbs:
    """Images as small JPEG data URLs, each stored once in the page."""

    def __init__(self) -> None:
        self.urls: dict[str, str] = {}

    def add(self, sha: str, load: Any) -> str:
        if sha not in self.urls:
            try:
                img = Image.open(io.BytesIO(load())).convert("RGB")
                img.thumbnail((256, 256))
                buf = io.BytesIO()
                img.save(buf, format="JPEG", quality=80)
                self.urls[sha] = "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()
            except (OSError, ValueError):
                self.urls[sha] = ""
        return sha


def viewer_bench(runs: list[Run], bench: str | Path | None = None) -> tuple[Dataset, list[Run], str | None]:
    """The bench of the per-sample viewer, checked: the dataset, the runs made on it, and a note
    on those left out.

    ``bench`` (``--bench``) replaces the path the first run recorded. A bench that is gone,
    or whose manifest's SHA-256 is not the one the run recorded, is a `UserError` of one line
    (`yanami.runner.open_bench`): a different bench is never paired with a run's outputs, and
    runs of the set made on another bench are left out of the viewer.
    """
    first = runs[0]
    if not isinstance(first.manifest, RunManifest):
        raise UserError(f"{first.path}: the run's manifest is not typed; load it with load_run")
    hint = "give --bench DIR with its bench, or --samples 0 for no per-sample viewer"
    dataset = open_bench(first.path, first.manifest, bench, hint=hint)
    digest = bench_sha256(dataset)
    left = [r.label for r in runs if r.bench_sha256 != digest]
    note = f"runs made on another bench are not shown here: {', '.join(left)}" if left else None
    return dataset, [r for r in runs if r.bench_sha256 == digest], note


def _samples(
    runs: list[Run], per_scenario: int, bench_dir: str | Path | None = None
) -> tuple[list[dict[str, Any]], dict[str, str], str | None]:
    """The per-sample viewer's data, and a note on what it leaves out."""
    thumbs = _Thumbs()
    if not runs:
        return [], {}, "no run"
    if per_scenario <= 0:
        return [], {}, "none asked for (--samples 0)"
    bench, runs, why = viewer_bench(runs, bench_dir)
    wanted = {s: per_scenario for s in SCENARIOS}
    chosen: list[Dialogue] = []
    for d in bench:
        if wanted.get(d.group, 0) > 0 and any(d.id in r.dialogues for r in runs):
            chosen.append(d)
            wanted[d.group] -= 1
            if not any(wanted.values()):
                break  # the viewer is full: the rest of the bench is not read
    stores = []
    for r in runs:
        store = Results(r.path)
        stores.append((r, store, store.predictions(), store.verdicts(r.judge)))
    samples = []
    try:
        for d in chosen:
            turns = []
            failed: set[str] = set()  # the runs with a failed check in this dialogue
            for t in d.turns:
                msgs = []
                for role, m in (("user", t.user), ("assistant", t.assistant)):
                    parts = []
                    for p in m.parts:
                        if isinstance(p, ImagePart):
                            parts.append({"image": thumbs.add(p.sha256, lambda p=p: bench.image_bytes(p))})
                        else:
                            parts.append({"text": p.text})
                    msgs.append({"role": role, "parts": parts})
                outputs = []
                for r, store, preds, verdicts in stores:
                    pred = preds.get(f"{d.id}/t{t.index}")
                    if pred is None:
                        continue
                    v = verdicts.get(pred.item)
                    passed = {c.id: c.passed for c in (v.checks or [])} if v else {}
                    if any(passed.get(c.id) is False for c in t.checks):
                        failed.add(r.label)
                    image = pred.image
                    outputs.append(
                        {
                            "run": r.label,
                            "status": pred.status,
                            "error": pred.error or "",
                            "image": thumbs.add(image, lambda s=store, sha=image: s.image(sha)) if image else None,
                            "vq": None if v is None else v.vq,
                            "checks": [
                                {"text": c.text, "kind": str(c.kind), "passed": passed.get(c.id)} for c in t.checks
                            ],
                        }
                    )
                turns.append({"index": t.index, "messages": msgs, "outputs": outputs})
            questions = []
            for q in d.questions:
                answers = []
                for r, _, preds, verdicts in stores:
                    pred = preds.get(f"{d.id}/{q.id}")
                    if pred is None:
                        continue
                    v = verdicts.get(pred.item)
                    answers.append(
                        {
                            "run": r.label,
                            "status": pred.status,
                            "text": pred.text or pred.error or "",
                            "score": None if v is None else v.score,
                        }
                    )
                questions.append(
                    {
                        "type": q.type.value,
                        "after": q.after_turn,
                        "prompt": question_prompt(q),
                        "answer": q.answer,
                        "answers": answers,
                    }
                )
            samples.append(
                {"id": d.id, "scenario": d.group, "turns": turns, "questions": questions, "failed_runs": sorted(failed)}
            )
    finally:
        for _, store, _, _ in stores:
            store.close()
    return samples, thumbs.urls, why


def render_report(
    runs: list[Run],
    scores: list[RunScores],
    table_list: list[Table],
    samples: int = 4,
    bench: str | Path | None = None,
) -> str:
    """The report as one self-contained HTML page (``bench``: where the runs' bench is now, if it moved)."""
    sample_data, images, why = _samples(runs, samples, bench)
    return render_page(
        "yanami report",
        runs=[
            {
                "label": r.label,
                "details": f"{r.path}: bench {r.bench_path or '-'} (sha256 {r.bench_sha256[:12]}…), "
                + ("the whole bench" if r.limit is None else f"--limit {r.limit}")
                + f", {r.valid}/{r.expected} items valid ({r.coverage_percent} %), {r.history}-history, "
                f"{r.layout}, judge {r.judge_text}, yanami {r.setting('yanami_version') or '-'}",
                "privileged": f"{PRIVILEGED_MARK} {PRIVILEGED_NOTE}" if r.privileged else "",
            }
            for r in runs
        ],
        warnings=warnings(scores),
        table_list=table_list,
        panels=figure6(runs),
        audit=irreducibility(runs, scores),
        samples=sample_data,
        images=images,
        viewer_note=why,
    )


def render_page(
    title: str,
    *,
    runs: list[dict[str, str]],
    warnings: list[str],
    table_list: list[Table],
    panels: list[dict[str, Any]] | None = None,
    audit: list[tuple[str, float]] | None = None,
    samples: list[dict[str, Any]] | None = None,
    images: dict[str, str] | None = None,
    viewer_note: str | None = None,
    panels_title: str = "Figure 6",
) -> str:
    """One self-contained HTML page from the one report template (Jinja, autoescaped), for every
    family: the runs (``label``, ``details``, ``privileged``), comparability warnings, the tables,
    and what the family has beside them (Figure 6's panels, the irreducibility audit, samples)."""
    env = Environment(
        loader=PackageLoader("yanami.scoring", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
    )
    return env.get_template("report.html.j2").render(
        title=title,
        tables=[Markup(html_table(t)) for t in table_list],  # cells are escaped by html_table
        panels=[{**p, "svg": Markup(p["svg"])} for p in panels or []],  # the SVG escapes its text
        audit=audit or [],
        warnings=warnings,
        runs=runs,
        samples=samples,
        images=images or {},
        sample_runs=sorted(
            {o["run"] for smp in samples or [] for t in smp["turns"] for o in t["outputs"]}
            | {a["run"] for smp in samples or [] for q in smp["questions"] for a in q["answers"]}
        ),
        viewer_note=viewer_note,
        panels_title=panels_title,
    )


def write_report(
    runs: list[Run],
    scores: list[RunScores],
    table_list: list[Table],
    out: Path,
    samples: int = 4,
    bench: str | Path | None = None,
) -> None:
    """Write the report to ``out`` atomically (see `render_report`)."""
    atomic_write(out, render_report(runs, scores, table_list, samples, bench))
