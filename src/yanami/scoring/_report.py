"""The self-contained HTML report: the tables, Figure 6's three panels, and a per-sample viewer."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup
from PIL import Image

from yanami._files import atomic_write
from yanami.bench import Results, RunManifest, bench_sha256, open_bench, question_prompt
from yanami.errors import UserError
from yanami.schema import Dialogue, ImagePart
from yanami.scoring._compare import warnings
from yanami.scoring._scores import (
    SCENARIOS,
    Run,
    RunScores,
    history_effect,
    pair_histories,
    progression,
    understanding_realization_gap,
)
from yanami.scoring._tables import Table, html_table, irreducibility
from yanami.scoring._weights import generation_formula
from yanami.store import Dataset

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f")


def grouped_bars(title: str, groups: list[str], series: list[tuple[str, list[float | None]]], ymax: float) -> str:
    """An SVG grouped bar chart: one group per model, one bar per series."""
    width, height, left, bottom, top = 760, 300, 48, 90, 30
    plot_w, plot_h = width - left - 10, height - bottom - top
    n = max(1, len(groups))
    group_w = plot_w / n
    bar_w = group_w * 0.8 / max(1, len(series))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    out.append(f'<text x="{left}" y="18" font-size="14" font-weight="bold">{html.escape(title)}</text>')
    for k in range(5):
        tick = ymax * k / 4
        y = top + plot_h - plot_h * k / 4
        out.append(f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{tick:g}</text>')
    for g, name in enumerate(groups):
        x0 = left + g * group_w + group_w * 0.1
        for s, (series_name, values) in enumerate(series):
            v = values[g]
            if v is None:
                continue
            h = plot_h * max(0.0, min(v, ymax)) / ymax
            x = x0 + s * bar_w
            out.append(
                f'<rect x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w * 0.9:.1f}" height="{h:.1f}" '
                f'fill="{PALETTE[s % len(PALETTE)]}"><title>{html.escape(f"{name}, {series_name}")}: {v:.2f}'
                "</title></rect>"
            )
        label = html.escape(name if len(name) <= 28 else name[:27] + "…")
        cx = left + g * group_w + group_w / 2
        out.append(
            f'<text x="{cx:.1f}" y="{top + plot_h + 12}" font-size="10" text-anchor="end" '
            f'transform="rotate(-30 {cx:.1f} {top + plot_h + 12})">{label}</text>'
        )
    for s, (name, _) in enumerate(series):
        x = width - 170
        y = top + 14 * s
        out.append(f'<rect x="{x}" y="{y}" width="10" height="10" fill="{PALETTE[s % len(PALETTE)]}"/>')
        out.append(f'<text x="{x + 14}" y="{y + 9}" font-size="11">{html.escape(name)}</text>')
    out.append("</svg>")
    return "".join(out)


def figure6(runs: list[Run]) -> list[str]:
    """Figure 6's panels: (a) the understanding-realization gap, (b) first vs last turn, (c) GT vs Self."""
    gt = [r for r in runs if r.history == "gt"]
    gap = understanding_realization_gap(gt)
    labels = list(gap["gap"])
    panels = [
        grouped_bars(
            "(a) Understanding-realization gap (lower is better)",
            labels,
            [
                (name, [gap["gap"][m].get(key) for m in labels])
                for name, key in (("CK", "constraint_adherence"), ("CU", "correction_updating"), ("Overall", "overall"))
            ],
            1.0,
        )
    ]
    prog = [progression(r) for r in gt]
    panels.append(
        grouped_bars(
            f"(b) First vs last generation turn, GT-History ({generation_formula()})",
            [r.label for r in gt],
            [("First", [p["first"] for p in prog]), ("Last", [p["last"] for p in prog])],  # type: ignore[misc]
            100.0,
        )
    )
    pairs = pair_histories(runs)
    effects = [history_effect(g, s) for g, s in pairs]
    panels.append(
        grouped_bars(
            f"(c) GT-History vs Self-History ({generation_formula()})",
            [g.label for g, _ in pairs],
            [("GT-History", [e["gt"] for e in effects]), ("Self-History", [e["self"] for e in effects])],  # type: ignore[misc]
            100.0,
        )
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
    (`yanami.bench.open_bench`): a different bench is never paired with a run's outputs, and
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
    stores = []
    for r in runs:
        store = Results(r.path)
        stores.append((r, store, store.predictions(), store.verdicts(r.judge)))
    samples = []
    try:
        for d in chosen:
            turns = []
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
                    image = pred.image
                    outputs.append(
                        {
                            "run": r.label,
                            "status": pred.status,
                            "error": pred.error or "",
                            "image": thumbs.add(image, lambda s=store, sha=image: s.image(sha)) if image else None,
                            "vq": None if v is None else v.vq,
                            "checks": [
                                {"text": c.text, "kind": c.kind.value, "passed": passed.get(c.id)} for c in t.checks
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
            samples.append({"id": d.id, "scenario": d.group, "turns": turns, "questions": questions})
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
    env = Environment(
        loader=PackageLoader("yanami.scoring", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
    )
    sample_data, images, why = _samples(runs, samples, bench)
    return env.get_template("report.html.j2").render(
        tables=[Markup(html_table(t)) for t in table_list],  # cells are escaped by html_table
        panels=[Markup(p) for p in figure6(runs)],  # the SVG escapes its text
        audit=irreducibility(runs, scores),
        warnings=warnings(scores),
        runs=[
            {
                "label": r.label,
                "path": str(r.path),
                "bench": r.bench_path or "-",
                "bench_sha256": r.bench_sha256,
                "history": r.history,
                "layout": r.layout,
                "judge": r.judge_text,
                "limit": "the whole bench" if r.limit is None else f"--limit {r.limit}",
                "coverage": f"{r.valid}/{r.expected} items valid ({r.coverage_percent} %)",
                "yanami_version": r.setting("yanami_version") or "-",
            }
            for r in runs
        ],
        samples=sample_data,
        images=images,
        viewer_note=why,
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
