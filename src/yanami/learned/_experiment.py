"""``yanami experiment train-vs-control``: the paper's headline claim in miniature.

Builds a bench (or takes one) and a training set whose images the bench does not share
(``--exclude``), trains the stateful model and the single-turn control on it (the same
examples, order, steps and batch size), evaluates both and the untrained model with the exact
judge, fits the audit's best learned text-only reader on the same training set and lets it
answer the bench's questions, and writes the table and the learning curves (``report.html``,
``experiment.json``) into the output directory. Every step resumes: a finished checkpoint or
run is kept, an unfinished one goes on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from yanami.contract import UserError, atomic_write
from yanami.learned._settings import Setting, TrainSettings
from yanami.learned._train import CONFIG_FILE, RESUME_FILE, parse_all, train
from yanami.store import Dataset

BOOTSTRAP = 1000
QTYPES = ("RR", "CR", "CT", "CU")
MODELS = (("stateful", "stateful"), ("single-turn", "single-turn control"), ("untrained", "untrained"))
"""(directory, label) of the three checkpoints the experiment evaluates."""
SELF_HISTORY = ("stateful", "single-turn")
"""The checkpoints also evaluated under Self-History (their own pictures fed back)."""


Stage = Callable[[str, int, int], None]


def run_experiment(
    out: Path,
    setting: Setting,
    bench: Path | None = None,
    on_stage: Stage = lambda s, d, t: None,
    *,
    tag: str = "",
    self_history: bool = True,
) -> dict[str, Any]:
    """Run the whole experiment into ``out`` (see the module docstring); returns its figures.

    ``tag`` names a further bench's evaluation of the same checkpoints: its runs go to
    ``out/runs-TAG`` and its figures to ``experiment-TAG.json`` and ``report-TAG.html`` (a bench
    that shares a picture with the training set is refused). ``self_history`` adds the
    Self-History rows."""
    from yanami.world import build_world

    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a directory; name a new directory")
    if bench is not None:
        Dataset(bench)  # a bench that cannot be read is one line, before anything is written
    out.mkdir(parents=True, exist_ok=True)
    if bench is None:
        bench = out / "bench"
        if not (bench / "manifest.json").is_file():
            build_world(bench, per_scenario=setting.per_scenario, seed=42, workers=setting.workers,
                        on_dialogue=_counter(on_stage, "building the bench", 4 * setting.per_scenario))  # fmt: skip
    train_dir = out / "train"
    if not (train_dir / "manifest.json").is_file():
        build_world(train_dir, preset="train", dialogues=setting.train_dialogues, seed=1000 + setting.seed,
                    workers=setting.workers, exclude=bench,
                    on_dialogue=_counter(on_stage, "building the training set", setting.train_dialogues))  # fmt: skip
    ds = Dataset(train_dir)
    shared = {p.sha256 for d in ds for p in d.images()} & {p.sha256 for d in Dataset(bench) for p in d.images()}
    if shared:
        raise UserError(f"{bench}: shares {len(shared)} pictures with the training set {train_dir}; name another bench")
    configs = _train_all(out, setting, train_dir, ds, on_stage)
    rows = []
    from yanami.runner import evaluate
    from yanami.scoring import load_run, run_scores

    evaluations = [(name, label, "gt") for name, label in MODELS]
    if self_history:
        evaluations += [(name, f"{label} (Self-History)", "self") for name, label in MODELS if name in SELF_HISTORY]
    runs = out / (f"runs-{tag}" if tag else "runs")
    for name, label, history in evaluations:
        run = runs / (name if history == "gt" else f"{name}-self")
        evaluate(bench, f"checkpoint:{out / name}", run, history=history, workers=setting.workers,
                 on_progress=_named(on_stage, f"evaluating {name} ({history.upper()}-History)"))  # fmt: skip
        loaded = load_run(run)
        loaded.given_label = label
        scores = run_scores(loaded)
        rows.append({**_model_row(label, loaded, scores), "history": history})
    rows.append(_reader_row(Dataset(bench), ds, setting.seed))
    figures = {
        "setting": setting.__dict__,
        "bench": str(bench),
        "train": str(train_dir),
        "rows": rows,
        "curves": {name: configs[name].get("curve", []) for name, _ in MODELS if name != "untrained"},
        "parameters": configs["stateful"]["parameters"],
    }
    suffix = f"-{tag}" if tag else ""
    atomic_write(out / f"experiment{suffix}.json", (json.dumps(figures, indent=1) + "\n").encode())
    atomic_write(out / f"report{suffix}.html", render(figures).encode())
    return figures


def _train_all(out: Path, setting: Setting, train_dir: Path, ds: Dataset, on_stage: Stage) -> dict[str, dict[str, Any]]:
    """The three checkpoints (a finished one is kept, an unfinished one resumed); their configs."""
    configs: dict[str, dict[str, Any]] = {}
    parsed = None
    for name, _ in MODELS:
        ckpt = out / name
        if (ckpt / CONFIG_FILE).is_file() and not (ckpt / RESUME_FILE).is_file():
            configs[name] = json.loads((ckpt / CONFIG_FILE).read_text(encoding="utf-8"))
            continue
        if parsed is None:
            parsed = parse_all(
                ds, list(ds), setting.workers, lambda d, t: on_stage("reading the training pictures", d, t)
            )
        steps = 0 if name == "untrained" else setting.steps
        control = "single-turn" if name == "single-turn" else "stateful"
        settings = TrainSettings(steps=steps, batch=setting.batch, seed=setting.seed, control=control)
        configs[name] = train(train_dir, ckpt, settings, parsed=parsed, on_stage=_prefixed(on_stage, name))
    return configs


def _prefixed(on_stage: Stage, prefix: str) -> Stage:
    def update(stage: str, done: int, total: int) -> None:
        on_stage(f"{prefix}: {stage}", done, total)

    return update


def _named(on_stage: Stage, stage: str) -> Callable[[int, int], None]:
    def update(done: int, total: int) -> None:
        on_stage(stage, done, total)

    return update


def _counter(on_stage: Stage, stage: str, total: int) -> Callable[[], None]:
    done = [0]

    def advance() -> None:
        done[0] += 1
        on_stage(stage, done[0], total)

    return advance


def _interval(values: Sequence[float], seed: int = 42) -> tuple[float, float] | None:
    """95 % percentile bootstrap interval of a mean (values per dialogue, resampled)."""
    if len(values) < 2:
        return None
    x = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(BOOTSTRAP, len(x)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _model_row(label: str, run: Any, scores: Any) -> dict[str, Any]:
    from yanami.scoring import understanding_realization_gap

    records = list(run.dialogues.values())
    row: dict[str, Any] = {"label": label, "overall": scores.average.get("scene"), "overall_ci": scores.interval}
    for t in QTYPES:
        per = [100 * r.dsu[t] for r in records if t in r.dsu]
        row[t] = float(np.mean(per)) if per else None
        row[f"{t}_ci"] = _interval(per)
    for key in ("sc", "vq"):
        scale = 100 if key == "sc" else 10
        per = [
            scale * float(np.mean(vals))
            for r in records
            if (
                vals := [
                    (s if key == "sc" else q) for s, q in r.images.values() if (s if key == "sc" else q) is not None
                ]
            )
        ]
        row[key] = float(np.mean(per)) if per else None
        row[f"{key}_ci"] = _interval(per)
    row["dsu"] = scores.average.get("understanding")
    gap = understanding_realization_gap([run])["gap"].get(run.label, {})
    row["gap"] = gap.get("overall")
    return row


def _reader_row(bench: Dataset, train_set: Dataset, seed: int) -> dict[str, Any]:
    """The audit's best learned text-only reader, fitted on the training set, on the bench's questions."""
    from yanami.world import best_text_reader

    reader = best_text_reader(list(train_set), seed)
    per: dict[str, list[float]] = {t: [] for t in QTYPES}
    for d in bench:
        mine: dict[str, list[float]] = {}
        for q in d.questions:
            if q.choices and len(q.choices) == 4:
                mine.setdefault(q.type.value, []).append(float(reader.answer(d, q) in q.answer_letters))
        for t, v in mine.items():
            per[t].append(100 * float(np.mean(v)))
    row: dict[str, Any] = {"label": f"text-only reader ({reader.reader.name})", "overall": None, "overall_ci": None}
    for t in QTYPES:
        row[t] = float(np.mean(per[t])) if per[t] else None
        row[f"{t}_ci"] = _interval(per[t])
    row["dsu"] = float(np.mean([row[t] for t in QTYPES])) if all(row[t] is not None for t in QTYPES) else None
    row.update({"sc": None, "sc_ci": None, "vq": None, "vq_ci": None, "gap": None, "history": "gt"})
    return row


# The page ------------------------------------------------------------------------------


def _fmt(v: float | None, ci: Sequence[float] | None = None) -> str:
    if v is None:
        return "-"
    return f"{v:.1f}" + (f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")


def table_rows(figures: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The experiment's table: header and rows of cells."""
    header = ["Model", "Overall", "DSU", *QTYPES, "SC", "VQ", "Gap"]
    rows = []
    for r in figures["rows"]:
        rows.append([
            r["label"],
            _fmt(r["overall"], r["overall_ci"]),
            _fmt(r["dsu"]),
            *[_fmt(r[t], r[f"{t}_ci"]) for t in QTYPES],
            _fmt(r["sc"], r["sc_ci"]),
            _fmt(r["vq"], r["vq_ci"]),
            "-" if r["gap"] is None else f"{r['gap']:.3f}",
        ])  # fmt: skip
    return header, rows


def render(figures: dict[str, Any]) -> str:
    """The experiment's report page: the table and the learning curves."""
    from yanami.scoring import Table, line_chart, render_page

    header, rows = table_rows(figures)
    s = figures["setting"]
    table = Table(
        "experiment",
        "Stateful training against the single-turn control",
        header,
        [list(row) for row in rows],  # (a table's rows are lists of any cell type)
        notes=[
            f"Bench {figures['bench']}; training set {figures['train']} ({s['train_dialogues']} dialogues, built "
            f"with --exclude BENCH); {s['steps']} steps of {s['batch']} examples, seed {s['seed']}; "
            f"{figures['parameters']:,} parameters.",
            "GT-History unless a row says Self-History (the model's own earlier pictures in its history); "
            "the exact judge. Overall: the paper's scene score (equation 3), macro over scenarios. "
            "DSU and its types: accuracy (%); SC, VQ: as `yanami score` computes them. [a, b]: 95 % bootstrap "
            "interval over dialogues. Gap: the understanding-realization gap (equation 7), each model over the "
            "dialogues it understood.",
            "The text-only reader sees no picture and draws none: DSU only.",
        ],
    )
    curves = figures["curves"]
    panels = []
    for key, title, y_max in (
        ("train_loss", "Training loss", None),
        ("accuracy", "Held-out DSU accuracy (%, the mean over the four types)", 100.0),
    ):
        series = []
        for name, points in curves.items():
            if key == "accuracy":
                xs = [(p["step"], float(np.mean([p.get(f"accuracy_{t}", 0.0) for t in QTYPES]))) for p in points]
            else:
                xs = [(p["step"], p[key]) for p in points]
            series.append((name, xs))
        panels.append({"key": key, "svg": line_chart(title, series, y_max, key=key), "notes": []})
    return render_page(
        "yanami experiment train-vs-control",
        runs=[{"label": r["label"], "details": "", "privileged": ""} for r in figures["rows"]],
        warnings=[],
        table_list=[table],
        panels=panels,
        panels_title="Learning curves",
    )


def check_setting(setting: Setting) -> None:
    if setting.train_dialogues < 20:
        raise UserError("--train-dialogues: at least 20")
