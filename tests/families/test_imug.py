from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.families.samples import IMUG_GRID, imug_samples, write_imug, write_weave
from yanami.contract import TextPart, TurnRef
from yanami.store import Dataset, dataset_stats, validate_dataset


def test_imug_samples_and_side_files_become_a_valid_imug_dataset(tmp_path: Path, cli: Callable[..., Any]) -> None:
    src = write_imug(tmp_path / "imug")
    r = cli("import", "imug", src, "--out", tmp_path / "ds")
    assert r.code == 0, r.err
    assert "2 dialogues, 2 images (imug, protocol imug-2)" in r.out
    assert validate_dataset(tmp_path / "ds") == []
    ds = Dataset(tmp_path / "ds")
    assert ds.manifest.family == "imug"
    grid, botany = list(ds)
    assert (grid.id, grid.domain, grid.subdomain) == ("imug-Geometric_Coloring-cubes_coloring-1", "Geometric_Coloring",
                                                      "cubes_coloring")  # fmt: skip
    assert grid.system_prompt == "You draw 3 x 3 grids of cubes."
    t1, t2, t3 = grid.turns
    # a static answer: its letters, and the assistant's text for GT-History
    assert t1.answer is not None and (t1.answer.letters, t1.answer.dynamic) == (["B"], False)
    assert t1.assistant.parts == [TextPart(text="B")]
    assert [p.type for p in t1.user.parts] == ["text", "image"]
    # an image turn: evaluation points, the grid on each, the input it is judged against, no reference image
    assert [c.kind for c in t2.checks] == ["evaluation_point"] * 4 and t2.assistant.parts == []
    assert [c.hidden.predicate for c in t2.checks] == [{"grid": IMUG_GRID, "point": j} for j in (1, 2, 3, 4)]
    # an ``input`` reference is the first picture the user gave there, as IMUG-Bench's scorer takes it
    assert t2.references == [TurnRef(turn=0, side="user", image=0, of="data")]
    # a dynamic answer: the static letters before the marker, resolved later from turn 2's output
    assert t3.answer is not None and (t3.answer.letters, t3.answer.dynamic) == (["A"], True)
    assert t3.references == [TurnRef(turn=1, side="assistant", of="model")] and t3.assistant.parts == []
    assert [t.hidden.intent for t in grid.turns] == [
        {"turn": 1, "modality": "text"}, {"turn": 2, "modality": "image"}, {"turn": 3, "modality": "text"}
    ]  # fmt: skip
    assert botany.turns[0].answer is not None and botany.turns[0].answer.letters == ["A", "C"]
    assert [p.type for p in botany.turns[0].user.parts] == ["image", "text", "text"]  # an item with both keys

    s = dataset_stats(ds)
    assert (s.families, s.evaluation_points, s.answered_turns, s.dynamic_answers) == ({"imug": 2}, 4, 3, 1)
    assert set(s.by_scenario) == {"Geometric_Coloring", "Botany"}


def _sample(change: Callable[[list[dict[str, Any]]], Any]) -> list[dict[str, Any]]:
    samples = imug_samples()
    change(samples)
    return samples


BAD = [
    ("unknown modality", lambda s: s[0]["tasks"][0].__setitem__("modality", "audio"),
     "benchmark.jsonl:1: tasks[0].modality: unknown modality 'audio' (text or image)"),
    ("missing image", lambda s: s[1]["tasks"][0]["input"][0].__setitem__("image", "gone.jpg"),
     "benchmark.jsonl:2: tasks[0].input[0].image: gone.jpg: no such image file"),
    ("turns out of order", lambda s: s[0]["tasks"][2].__setitem__("turn", 1),
     "benchmark.jsonl:1: tasks[2].turn: turn 1 after turn 2 (turns must increase)"),
    ("no letter", lambda s: s[1]["tasks"][0]["output"].__setitem__("answer", "leaves"),
     "benchmark.jsonl:2: tasks[0].output.answer: names no option letter A-G"),
    ("bad input", lambda s: s[1]["tasks"][0]["input"].__setitem__(0, {"audio": "x.wav"}),
     "benchmark.jsonl:2: tasks[0].input[0]: an input is"),
    # hostile text where a path is read: one line, never ValueError or UnicodeEncodeError
    ("a NUL byte in a path", lambda s: s[1]["tasks"][0]["input"][0].__setitem__("image", "sprout\0.jpg"),
     "benchmark.jsonl:2: tasks[0].input[0].image: 'sprout\\x00.jpg' is not a path: it holds a NUL byte at position 6"),
    ("a lone surrogate in a path", lambda s: s[0]["tasks"][0]["input"][1].__setitem__("image", "\ud800/cubes_1.png"),
     "benchmark.jsonl:1: tasks[0].input[1].image: '\\ud800/cubes_1.png' is not a path: it holds a lone surrogate"),
    ("an image that is no text", lambda s: s[1]["tasks"][0]["input"][0].__setitem__("image", ["sprout.jpg"]),
     "benchmark.jsonl:2: tasks[0].input[0].image: expected str, got a list"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "change", "expected"), BAD, ids=[b[0] for b in BAD])
def test_bad_samples_are_one_line_and_nothing_is_written(
    tmp_path: Path, cli: Callable[..., Any], case: str, change: Any, expected: str
) -> None:
    src = write_imug(tmp_path / "imug", _sample(change))
    r = cli("import", "imug", src, "--out", tmp_path / "ds")
    assert r.code == 2
    assert f"{src / 'data'}/{expected}" in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
    assert not (tmp_path / "ds").exists()


def _side(src: Path, name: str, obj: dict[str, Any]) -> None:
    (src / "data" / name).write_text(json.dumps(obj) + "\n")


KEY = {"domain": "Geometric_Coloring", "subdomain": "cubes_coloring", "sample_id": "1"}


def test_a_dependency_on_a_later_turn_is_refused(tmp_path: Path, cli: Callable[..., Any]) -> None:
    src = write_imug(tmp_path / "imug")
    _side(src, "dynamic_references.jsonl", {**KEY, "turn_idx": 1, "ref_turn_idxs": [3]})
    r = cli("import", "imug", src, "--out", tmp_path / "ds")
    assert r.code == 2 and not (tmp_path / "ds").exists()
    assert f"{src / 'data' / 'dynamic_references.jsonl'}:1: turn 1 cannot depend on turn 3 (a later turn" in r.err
    _side(src, "dynamic_references.jsonl", {**KEY, "turn_idx": 2, "ref_turn_idxs": [1]})
    r = cli("import", "imug", src, "--out", tmp_path / "ds")
    assert r.code == 2 and "jsonl:1: turn: turn 2 of sample 1 is an image turn; this entry is for text turns" in r.err
    (src / "data" / "dynamic_references.jsonl").write_text("")  # turn 3's dynamic answer has no entry
    r = cli("import", "imug", src, "--out", tmp_path / "ds")
    assert r.code == 2 and "tasks[2].output.answer: a <DYNAMIC> answer with no entry in dynamic_references" in r.err
    _side(src, "dynamic_references.jsonl", {**KEY, "turn_idx": 3, "ref_turn_idxs": [2]})
    _side(src, "image_references.jsonl", {**KEY, "reference_links": [{"turn_idx": 2, "refs": [
        {"ref_turn": 3, "ref_type": "output"}]}]})  # fmt: skip
    r = cli("import", "imug", src, "--out", tmp_path / "ds")
    assert r.code == 2 and not (tmp_path / "ds").exists()
    assert f"{src / 'data' / 'image_references.jsonl'}:1: turn 2 cannot depend on turn 3" in r.err


def test_a_grid_for_a_turn_that_does_not_exist_is_refused(tmp_path: Path, cli: Callable[..., Any]) -> None:
    src = write_imug(tmp_path / "imug")
    grid = src / "data" / "grid_gt" / "Geometric_Coloring__cubes_coloring__1.jsonl"
    grid.write_text(grid.read_text() + json.dumps({"turn": 9, "grid": IMUG_GRID}) + "\n")
    r = cli("import", "imug", src, "--out", tmp_path / "ds")
    assert r.code == 2 and not (tmp_path / "ds").exists()
    assert f"{grid}:2: turn: sample Geometric_Coloring/cubes_coloring/1 has no turn 9" in r.err


@pytest.mark.parametrize(
    ("grid", "expected"),
    [
        ([], "grid: empty; a 3 x 3 grid of cells 0, 1, g, r expected"),
        ([[]], "grid: empty; a 3 x 3 grid of cells 0, 1, g, r expected"),
        ([["1", "0", "0"], ["0", "r"], ["0", "0", "g"]], "grid: ragged (rows of 3, 2, 3 cells); a 3 x 3 grid"),
        ([["1", "0"], ["0", "r"]], "grid: 2 x 2; a 3 x 3 grid of cells 0, 1, g, r expected"),
        ([["1", "0", "0", "0"]] * 3, "grid: 3 x 4; a 3 x 3 grid"),
        ([["1", "0", "0"]] * 4, "grid: 4 x 3; a 3 x 3 grid"),
        ([["1", "0", "0"], ["0", ["r"], "0"], ["0", "0", "g"]], "grid[1]: not a row of cells 0, 1, g, r"),
        ([["1", "0", "0"], "0r0", ["0", "0", "g"]], "grid[1]: not a row of cells 0, 1, g, r"),
        ([["1", "0", "0"], ["0", "b", "0"], ["0", "0", "g"]], "grid[1]: not a row of cells 0, 1, g, r"),
        ({"rows": 3}, "grid: expected list, got a dict"),
    ],
    ids=["empty", "one empty row", "ragged", "2 x 2", "3 x 4", "4 x 3", "a cell that is a list", "a row that is text",
         "an unknown cell", "not a list"],
)  # fmt: skip
def test_a_grid_that_is_not_3_by_3_is_refused_in_one_line(
    tmp_path: Path, cli: Callable[..., Any], grid: Any, expected: str
) -> None:
    src = write_imug(tmp_path / "imug")
    path = src / "data" / "grid_gt" / "Geometric_Coloring__cubes_coloring__1.jsonl"
    path.write_text(json.dumps({"turn": 2, "grid": grid}) + "\n")
    r = cli("import", "imug", src, "--out", tmp_path / "ds")
    assert r.code == 2 and not (tmp_path / "ds").exists()
    assert f"{path}:1: {expected}" in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err


def test_classes_come_from_the_sources_own_config(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """As IMUG-Bench's summary reads ``config/domain_classes.json``: a domain it lists is in that
    class (even one yanami's built-in list lacks), a domain it does not list is "Unassigned"
    (with a warning), and without the file the public release's classes apply."""
    samples = imug_samples()
    samples[1]["domain"] = "Astrology"  # in no list at all
    src = write_imug(tmp_path / "imug", samples)
    r = cli("import", "imug", src, "--out", tmp_path / "builtin")
    assert r.code == 0, r.err
    assert "warning: domain 'Astrology' is not in built-in: filed under Unassigned" in r.err
    classes = {d.domain: d.meta.params["class"] for d in Dataset(tmp_path / "builtin")}
    assert classes == {"Geometric_Coloring": "Static Spatial", "Astrology": "Unassigned"}

    (src / "config").mkdir()
    (src / "config" / "domain_classes.json").write_text(json.dumps({"Divination": ["Astrology"]}))
    r = cli("import", "imug", src, "--out", tmp_path / "own")
    assert r.code == 0, r.err
    assert "warning: domain 'Geometric_Coloring' is not in config/domain_classes.json" in r.err
    ds = Dataset(tmp_path / "own")
    classes = {d.domain: d.meta.params["class"] for d in ds}
    assert classes == {"Geometric_Coloring": "Unassigned", "Astrology": "Divination"}
    assert ds.manifest.generator.params["unassigned"] == ["Geometric_Coloring"]
    assert validate_dataset(tmp_path / "own") == []

    (src / "config" / "domain_classes.json").write_text(json.dumps({"Divination": "Astrology"}))
    r = cli("import", "imug", src, "--out", tmp_path / "bad")
    assert r.code == 2 and "domain_classes.json: Divination: expected a list of domain names" in r.err


def test_an_input_reference_is_the_turns_first_picture(tmp_path: Path, cli: Callable[..., Any]) -> None:
    samples = imug_samples()
    samples[0]["tasks"][0]["input"].append({"image": "sprout.jpg"})  # a second picture at turn 1
    src = write_imug(tmp_path / "imug", samples)
    assert cli("import", "imug", src, "--out", tmp_path / "ds").code == 0
    grid = next(iter(Dataset(tmp_path / "ds")))
    first = grid.turns[0].user.images()[0]
    assert len(grid.turns[0].user.images()) == 2
    assert grid.turns[1].references == [TurnRef(turn=0, side="user", image=0, of="data")]
    assert first.sha256 != grid.turns[0].user.images()[1].sha256


def test_a_raw_line_separator_inside_a_string_is_data(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """JSON Lines split on newline alone: U+2028 and NEL inside a string do not end the line."""
    samples = imug_samples()
    samples[0]["tasks"][0]["input"][0]["text"] = "How many cubes?\u2028Count them.\x85 A. one B. two C. three"
    src = write_imug(tmp_path / "imug", samples)
    lines = [json.dumps(s, ensure_ascii=False) for s in samples]  # the characters raw, as a source may hold them
    (src / "data" / "benchmark.jsonl").write_text("\n".join(lines) + "\r\n", encoding="utf-8")
    assert cli("import", "imug", src, "--out", tmp_path / "ds").code == 0
    from yanami.store import Dataset

    texts = [p.text for d in Dataset(tmp_path / "ds") for t in d.turns for p in t.user.parts if hasattr(p, "text")]
    assert any("?\u2028Count them.\x85 A." in t for t in texts)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"domain": "Botany", "sample_id": 1' + "0" * 5000 + "}", "not readable JSON (Exceeds the limit"),
        ("[" * 100_000, "JSON nested too deeply"),
    ],
    ids=["a 5,001-digit number", "deep nesting"],
)
def test_a_hostile_line_is_one_line(tmp_path: Path, cli: Callable[..., Any], line: str, expected: str) -> None:
    src = write_imug(tmp_path / "imug")
    with (src / "data" / "benchmark.jsonl").open("a") as f:
        f.write(line + "\n")
    r = cli("import", "imug", src, "--out", tmp_path / "ds")
    assert r.code == 2 and f"benchmark.jsonl:{len(imug_samples()) + 1}: not an IMUG-Bench line: {expected}" in r.err
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize(
    "path", ["sprout\0.jpg", "\udcff.jpg", {"file": "sprout.jpg"}], ids=["NUL", "surrogate", "an object"]
)
def test_a_path_that_is_no_path_is_one_line_with_worker_processes(tmp_path: Path, path: Any) -> None:
    """With worker processes (reading the files of the lines ahead), an image path that names no file
    or is not text is still its line's one-line error, and nothing is written."""
    from yanami.contract import UserError
    from yanami.families._import import PARALLEL_FROM
    from yanami.families.imug.importer import import_imug

    grid, botany = imug_samples()
    samples = [grid, *({**botany, "sample_id": 100 + k} for k in range(PARALLEL_FROM + 8))]
    bad = json.loads(json.dumps(botany))
    bad["sample_id"], bad["tasks"][0]["input"] = 99, [*bad["tasks"][0]["input"], {"image": path}]
    samples[PARALLEL_FROM] = bad
    src = write_imug(tmp_path / "imug", samples)
    with pytest.raises(UserError, match=rf"benchmark.jsonl:{PARALLEL_FROM + 1}: tasks\[0\]\.input\[2\]\.image: "):
        import_imug(src, tmp_path / "ds", workers=2)
    assert not (tmp_path / "ds").exists()


def _import_in_a_process(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """``yanami import ARGS`` in its own process, stopped after a minute: a hang fails the test."""
    cmd = [sys.executable, "-m", "yanami", "import", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_a_fifo_in_a_source_is_an_error_not_a_hang(tmp_path: Path) -> None:
    """Only regular files are read: a FIFO (nothing ever writes to it) where a grid file, an image
    or WEAVE's picture should be is one line and exit 2, at once."""
    imug = write_imug(tmp_path / "imug")
    grid = next((imug / "data" / "grid_gt").iterdir())
    grid.unlink()
    os.mkfifo(grid)
    r = _import_in_a_process("imug", imug, "--out", tmp_path / "a")
    assert r.returncode == 2 and "not a regular file" in r.stderr and str(grid) in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "a").exists()

    imug = write_imug(tmp_path / "imug2")
    picture = imug / "data" / "images" / "cubes_1.png"
    picture.unlink()
    os.mkfifo(picture)
    r = _import_in_a_process("imug", imug, "--out", tmp_path / "b")
    assert r.returncode == 2 and "cubes_1.png" in r.stderr and "not a regular file" in r.stderr, r.stderr

    weave = write_weave(tmp_path / "weave")
    (weave / "imgs" / "cat.png").unlink()
    os.mkfifo(weave / "imgs" / "cat.png")
    r = _import_in_a_process("weave", weave, "--out", tmp_path / "c")
    assert r.returncode == 2 and "cat.png" in r.stderr and "not a regular file" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "c").exists()


def test_an_images_folder_that_links_outside_the_source_is_refused(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """``data/images`` as a link to a folder elsewhere would let a sample name, and hard-link, any
    picture there: one line, exit 2, nothing written."""
    src = write_imug(tmp_path / "imug")
    outside = tmp_path / "elsewhere"
    (src / "data" / "images").rename(outside)
    (src / "data" / "images").symlink_to(outside, target_is_directory=True)
    r = cli("import", "imug", src, "--out", tmp_path / "ds")
    assert r.code == 2 and "outside the source" in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert not (tmp_path / "ds").exists()
    inside = src / "data" / "pictures"  # a link that stays inside the source is followed
    (src / "data" / "images").unlink()
    outside.rename(inside)
    (src / "data" / "images").symlink_to(inside, target_is_directory=True)
    assert cli("import", "imug", src, "--out", tmp_path / "ds").code == 0
