"""``yanami import imug``: IMUG-Bench's ``data/`` folder as a yanami dataset.

IMUG-Bench (public: ``ccccEsion/IMUG-Bench``, ``scripts/``) keeps ``benchmark.jsonl``, one
sample per line: ``{domain, subdomain, sample_id, system_prompt?, tasks[]}``, each task
``{turn, modality: text|image, input: [{text} | {image}], output: {answer} |
{evaluation_points}}``, images under ``images/``. Beside it:

- ``dynamic_references.jsonl``: ``{domain, subdomain, sample_id, turn_idx, ref_turn_idxs}``,
  the earlier turns a ``<DYNAMIC>`` answer is resolved from once the model has answered;
- ``image_references.jsonl``: ``{domain, subdomain, sample_id, reference_links: [{turn_idx,
  refs: [{ref_turn, ref_type: input|output}]}]}``, the images an image turn is judged against;
- ``grid_gt/Geometric_Coloring__<subdomain>__<sample_id>.jsonl``: ``{turn, grid}`` per image
  turn, the 3 x 3 grid its picture must show (``0`` empty, ``1`` filled, ``r`` red, ``g`` green).

A task becomes a turn: its input the user message, a text task's answer the turn's answer
(option letters, ``dynamic`` for ``<DYNAMIC>``), an image task's evaluation points checks of
kind ``evaluation_point``. IMUG-Bench has no reference image for an image turn, so its
assistant message is empty; a static answer is the assistant's text (for GT-History). The
source's turn number and modality are kept in ``hidden.intent``; grids in each check's
``hidden.predicate``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from yanami import __version__, _json
from yanami.contract import Dialogue, ImageSource, read_regular
from yanami.families._import import (
    WORKERS,
    OnRecord,
    SourceImages,
    build_dialogue,
    dialogue_id,
    expect,
    fail,
    text_part,
    write_records,
)
from yanami.families.imug import EVALUATION_POINT, FACTS
from yanami.store import Generator, Manifest

BENCHMARK = "benchmark.jsonl"
DYNAMIC_REFERENCES = "dynamic_references.jsonl"
IMAGE_REFERENCES = "image_references.jsonl"
GRID_DIR = "grid_gt"
IMAGES_DIR = "images"
CLASS_CONFIG = "config/domain_classes.json"
"""Beside ``data/`` in IMUG-Bench's repository: class name -> its domains."""
UNASSIGNED = "Unassigned"
"""Where IMUG-Bench's summary files a domain its class config does not list."""
DYNAMIC = "<DYNAMIC>"
GRID_CELLS = frozenset({"0", "1", "r", "g"})
GRID_SIZE = 3
"""A grid's rows and columns: the cube grids of Geometric Coloring are 3 x 3."""
_LETTERS = re.compile(r"[A-G]")

Key = tuple[str, str, str]
"""(domain, subdomain, sample_id)."""


def data_dir(src: Path) -> Path:
    """The folder that holds ``benchmark.jsonl``: SRC itself or SRC/data."""
    for candidate in (src, src / "data"):
        if (candidate / BENCHMARK).is_file():
            return candidate
    raise fail(str(src), "", f"no {BENCHMARK} here or in data/ (give IMUG-Bench's folder)")


def class_map(src: Path, data: Path) -> tuple[dict[str, str], str]:
    """Domain -> class from the source's own ``config/domain_classes.json`` (in SRC or beside its
    ``data/``), as IMUG-Bench's summary reads it, and where it came from; yanami's built-in list
    of the public release where the source has no such file."""
    for root in dict.fromkeys((src, data.parent)):
        path = root / CLASS_CONFIG
        if not path.is_file():
            continue
        try:
            config = json.loads(read_regular(path).decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise fail(str(path), "", f"cannot be read as JSON ({exc})") from None
        if not isinstance(config, dict):
            raise fail(str(path), "", "expected an object of class name -> list of domains")
        out: dict[str, str] = {}
        for name, domains in config.items():
            if not isinstance(domains, list) or not all(isinstance(d, str) for d in domains):
                raise fail(str(path), name, "expected a list of domain names")
            for d in domains:
                out.setdefault(d, name)  # the summary's dict keeps the last; a domain listed twice is the source's slip
        return out, CLASS_CONFIG
    imug = FACTS
    return {d: c for c, ds in imug.classes.items() for d in ds}, "built-in"


def _lines(path: Path) -> Iterator[tuple[str, Any]]:
    """(``path:line``, the parsed object) for each non-blank line; a one-line error otherwise."""
    try:
        text = read_regular(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(str(path), "", f"cannot be read ({exc})") from None
    for n, line in _json.lines(text):
        try:
            obj = json.loads(line)
        except _json.ERRORS as exc:
            raise fail(f"{path}:{n}", "", f"not an IMUG-Bench line: {_json.problem(exc)}") from None
        if not isinstance(obj, dict):
            raise fail(f"{path}:{n}", "", "expected an object")
        yield f"{path}:{n}", obj


def _key(obj: dict[str, Any], at: str) -> Key:
    domain = expect(obj.get("domain"), str, at, "domain")
    subdomain = expect(obj.get("subdomain"), str, at, "subdomain")
    sample = expect(obj.get("sample_id"), (str, int), at, "sample_id")
    return domain, subdomain, str(sample)


class _Side:
    """A side file's entries by (sample, turn number), each remembering where it was read."""

    def __init__(self) -> None:
        self.entries: dict[tuple[Key, int], tuple[str, Any]] = {}

    def add(self, key: Key, turn: int, at: str, value: Any) -> None:
        if (key, turn) in self.entries:
            raise fail(at, "turn", f"a second entry for sample {key[2]} turn {turn}")
        self.entries[(key, turn)] = (at, value)

    def take(self, key: Key, turn: int) -> tuple[str, Any] | None:
        return self.entries.pop((key, turn), None)

    def leftover(self, name: str) -> None:
        for (key, turn), (at, _) in self.entries.items():
            raise fail(at, "turn", f"sample {'/'.join(key)} has no turn {turn} in {BENCHMARK} ({name})")


def _side_files(data: Path) -> tuple[_Side, _Side, _Side]:
    dynamic, image_refs, grids = _Side(), _Side(), _Side()
    if (data / DYNAMIC_REFERENCES).is_file():
        for at, obj in _lines(data / DYNAMIC_REFERENCES):
            refs = expect(obj.get("ref_turn_idxs"), list, at, "ref_turn_idxs")
            for r in refs:
                expect(r, int, at, "ref_turn_idxs")
            dynamic.add(_key(obj, at), expect(obj.get("turn_idx"), int, at, "turn_idx"), at, refs)
    if (data / IMAGE_REFERENCES).is_file():
        for at, obj in _lines(data / IMAGE_REFERENCES):
            key = _key(obj, at)
            for j, link in enumerate(expect(obj.get("reference_links"), list, at, "reference_links")):
                field = f"reference_links[{j}]"
                expect(link, dict, at, field)
                refs = []
                for r, ref in enumerate(expect(link.get("refs"), list, at, f"{field}.refs")):
                    expect(ref, dict, at, f"{field}.refs[{r}]")
                    kind = ref.get("ref_type")
                    if kind not in ("input", "output"):
                        raise fail(at, f"{field}.refs[{r}].ref_type", f"{kind!r} is not input or output")
                    refs.append((expect(ref.get("ref_turn"), int, at, f"{field}.refs[{r}].ref_turn"), kind))
                image_refs.add(key, expect(link.get("turn_idx"), int, at, f"{field}.turn_idx"), at, refs)
    if (data / GRID_DIR).is_dir():
        for path in sorted((data / GRID_DIR).glob("*.jsonl")):
            parts = path.stem.split("__")
            if len(parts) != 3:
                raise fail(str(path), "", "a grid file is named DOMAIN__SUBDOMAIN__SAMPLE.jsonl")
            key = (parts[0], parts[1], parts[2])
            for at, obj in _lines(path):
                grid = _grid(obj.get("grid"), at)
                grids.add(key, expect(obj.get("turn"), int, at, "turn"), at, grid)
    return dynamic, image_refs, grids


def _grid(value: Any, at: str) -> list[list[str]]:
    """A grid file's ``grid``: `GRID_SIZE` rows of `GRID_SIZE` cells, each one of `GRID_CELLS`, as
    its picture is read (`rules.read_grid`) and scored (IMUG-Bench's ``score_logic`` reads 3 x 3)."""
    grid = expect(value, list, at, "grid")
    want = f"a {GRID_SIZE} x {GRID_SIZE} grid of cells {', '.join(sorted(GRID_CELLS))} expected"
    for r, row in enumerate(grid):
        if not isinstance(row, list) or any(not isinstance(c, str) or c not in GRID_CELLS for c in row):
            raise fail(at, f"grid[{r}]", f"not a row of cells {', '.join(sorted(GRID_CELLS))}")
    lengths = [len(row) for row in grid]
    if not any(lengths):
        raise fail(at, "grid", f"empty; {want}")
    if len(set(lengths)) > 1:
        raise fail(at, "grid", f"ragged (rows of {', '.join(map(str, lengths))} cells); {want}")
    if (len(grid), lengths[0]) != (GRID_SIZE, GRID_SIZE):
        raise fail(at, "grid", f"{len(grid)} x {lengths[0]}; {want}")
    return grid


def import_imug(
    src: str | Path,
    out: str | Path,
    *,
    overwrite: bool = False,
    link: bool = True,
    on_record: OnRecord | None = None,
    workers: int = WORKERS,
) -> Manifest:
    """Import IMUG-Bench's samples and side files; any bad line stops it and nothing is written.

    Each dialogue's class comes from the source's class config (`class_map`); a domain it does
    not list is filed under "Unassigned", as IMUG-Bench's summary files it, and named in the
    manifest's ``generator.params.unassigned`` (the command warns about each)."""
    data = data_dir(Path(src))
    classes, classes_from = class_map(Path(src), data)
    dynamic, image_refs, grids = _side_files(data)
    samples = list(_lines(data / BENCHMARK))
    found = {obj.get("domain") for _, obj in samples}
    unassigned = sorted(d for d in found if isinstance(d, str) and d not in classes)
    params = {"family": "imug", "source": BENCHMARK, "classes": classes_from, "unassigned": unassigned}
    generator = Generator(name="import", version=__version__, params=params)

    def files(obj: dict[str, Any]) -> list[object]:
        tasks = obj.get("tasks")
        inputs = [t.get("input") for t in tasks if isinstance(t, dict)] if isinstance(tasks, list) else []
        return [i.get("image") for items in inputs if isinstance(items, list) for i in items if isinstance(i, dict)]

    def finish() -> None:
        dynamic.leftover(DYNAMIC_REFERENCES)
        image_refs.leftover(IMAGE_REFERENCES)
        grids.leftover(f"{GRID_DIR}/")

    return write_records(
        out,
        generator,
        data / IMAGES_DIR,
        [(at, files(obj), obj) for at, obj in samples],
        lambda obj, at, images: _dialogue(obj, at, images, classes, dynamic, image_refs, grids),
        overwrite=overwrite,
        link=link,
        workers=workers,
        on_record=on_record,
        finish=finish,
        within=data,
    )


def _dialogue(
    obj: dict[str, Any],
    at: str,
    images: SourceImages,
    classes: dict[str, str],
    dynamic: _Side,
    image_refs: _Side,
    grids: _Side,
) -> Dialogue:
    key = _key(obj, at)
    domain, subdomain, sample = key
    system = obj.get("system_prompt")
    if system is not None:
        expect(system, str, at, "system_prompt")
    tasks = expect(obj.get("tasks"), list, at, "tasks")
    if not tasks:
        raise fail(at, "tasks", "no tasks")
    index: dict[int, int] = {}  # the source's turn number -> yanami's turn index
    for i, task in enumerate(tasks):
        expect(task, dict, at, f"tasks[{i}]")
        number = expect(task.get("turn"), int, at, f"tasks[{i}].turn")
        if index and number <= max(index):
            raise fail(at, f"tasks[{i}].turn", f"turn {number} after turn {max(index)} (turns must increase)")
        index[number] = i
    turns = [_turn(task, i, key, at, images, index, dynamic, image_refs, grids) for i, task in enumerate(tasks)]
    for turn in turns:
        # An ``input`` reference is the first picture the user gave at that turn, as IMUG-Bench's
        # scorer finds it (``find_image_path``); a turn without one adds nothing.
        refs = []
        for ref in turn["references"]:
            if ref["side"] == "user":
                if not any(p.get("type") == "image" for p in turns[ref["turn"]]["user"]["parts"]):
                    continue
                ref = {**ref, "image": 0}
            refs.append(ref)
        turn["references"] = refs
    params = {"sample_id": sample, "class": classes.get(domain, UNASSIGNED)}
    meta = {"generator": "import-imug", "version": __version__, "params": params}
    raw = {
        "id": dialogue_id("imug", domain, subdomain, sample),
        "family": "imug",
        "domain": domain,
        "subdomain": subdomain,
        "system_prompt": system,
        "capabilities": [],
        "turns": turns,
        "questions": [],
        "meta": meta,
    }
    return build_dialogue(raw, at)


def _turn(
    task: dict[str, Any],
    i: int,
    key: Key,
    at: str,
    images: SourceImages,
    index: dict[int, int],
    dynamic: _Side,
    image_refs: _Side,
    grids: _Side,
) -> dict[str, Any]:
    field = f"tasks[{i}]"
    number = task["turn"]
    modality = task.get("modality")
    if modality not in ("text", "image"):
        raise fail(at, f"{field}.modality", f"unknown modality {modality!r} (text or image)")
    inputs = expect(task.get("input"), list, at, f"{field}.input")
    if not inputs:
        raise fail(at, f"{field}.input", "no input")
    parts: list[dict[str, Any]] = []
    for j, item in enumerate(inputs):
        where = f"{field}.input[{j}]"
        if not isinstance(item, dict) or not item or not item.keys() <= {"text", "image"}:
            raise fail(at, where, 'an input is {"text": ...} or {"image": ...} (or both, read in order)')
        for kind, value in item.items():  # the public client reads an item's keys in order
            if kind == "text":
                parts.append(text_part(expect(value, str, at, f"{where}.text")))
            else:
                parts.append(
                    images.part(expect(value, str, at, f"{where}.image"), ImageSource.USER, at, f"{where}.image")
                )
    output = expect(task.get("output"), dict, at, f"{field}.output")
    refs: list[dict[str, Any]] = []

    def earlier(ref: int, where: str, side: str = "assistant") -> int:
        if ref not in index:
            raise fail(where, "", f"sample {key[2]} has no turn {ref} (referenced from turn {number})")
        if ref > number or (ref == number and side == "assistant"):
            raise fail(where, "", f"turn {number} cannot depend on turn {ref} (a later turn, or its own output)")
        return index[ref]

    answer = None
    checks: list[dict[str, Any]] = []
    assistant: list[dict[str, Any]] = []
    if modality == "text":
        text = expect(output.get("answer"), str, at, f"{field}.output.answer")
        static = text.split(DYNAMIC, 1)[0]
        letters = list(dict.fromkeys(_LETTERS.findall(static)))
        is_dynamic = DYNAMIC in text
        answer = {"text": text, "letters": letters, "dynamic": is_dynamic}
        if not is_dynamic and not letters:
            raise fail(at, f"{field}.output.answer", "names no option letter A-G")
        entry = dynamic.take(key, number)
        if entry is not None:
            where, numbers = entry
            refs += [{"turn": earlier(r, where), "side": "assistant", "of": "model"} for r in numbers]
        elif is_dynamic:
            raise fail(at, f"{field}.output.answer", f"a {DYNAMIC} answer with no entry in {DYNAMIC_REFERENCES}")
        if not is_dynamic:
            assistant = [text_part(text)]
    else:
        points = expect(output.get("evaluation_points"), list, at, f"{field}.output.evaluation_points")
        if not points:
            raise fail(at, f"{field}.output.evaluation_points", "no evaluation points")
        grid = grids.take(key, number)
        for j, point in enumerate(points, 1):
            text = expect(point, str, at, f"{field}.output.evaluation_points[{j - 1}]")
            hidden = {"predicate": {"grid": grid[1], "point": j}} if grid else {}
            checks.append({"id": f"t{i}-p{j}", "kind": EVALUATION_POINT, "text": text, "hidden": hidden})
        entry = image_refs.take(key, number)
        if entry is not None:
            where, links = entry
            for ref, kind in links:
                if kind == "input":
                    refs.append({"turn": earlier(ref, where, "user"), "side": "user", "of": "data"})
                else:
                    refs.append({"turn": earlier(ref, where), "side": "assistant", "of": "model"})
    for side, belongs in ((grids, "image"), (image_refs, "image"), (dynamic, "text")):
        if belongs != modality and (key, number) in side.entries:
            where, _ = side.entries[(key, number)]
            kind = "an image" if modality == "image" else "a text"
            msg = f"turn {number} of sample {key[2]} is {kind} turn; this entry is for {belongs} turns"
            raise fail(where, "turn", msg)
    intent: dict[str, Any] = {"turn": number, "modality": modality}
    if "text" not in inputs[0]:  # IMUG-Bench's scorers read ``input[0]["text"]``: noted where there is none
        intent["first_text"] = False
    return {
        "index": i,
        "user": {"role": "user", "parts": parts},
        "assistant": {"role": "assistant", "parts": assistant},
        "capabilities": [],
        "checks": checks,
        "answer": answer,
        "references": refs,
        "hidden": {"intent": intent},
    }
