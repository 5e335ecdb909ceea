"""Hostile inputs through the command line (issue 24): each case makes its input, runs one `yanami`
command on it in a fresh process under a time limit, and reports the exit code, the wall time, the
process's peak RSS and the last line it wrote to stderr.

    python benchmarks/bench_hostile.py                  # every case
    python benchmarks/bench_hostile.py --only tar --timeout 120

A case holds when the command exits with one of the codes the case expects (non-zero for bad input,
0 where the input is valid or the bad part is recorded and skipped), prints no traceback (and, where
it exits 2, a bad input, exactly one line on stderr), and ends within the time limit. The summary
line counts cases, tracebacks, hangs and unexpected exits, and gives the largest peak RSS; the
baseline is `yanami --version` in the same run (the interpreter and the CLI's imports). The small
versions of these cases are tests; this is the whole kit, the big inputs included (a gzip tar of
40 x 60 MB members, a zstd Parquet of 200 MB cells).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
YANAMI = [sys.executable, "-c", "from yanami.cli import main; main()"]


@dataclass
class Case:
    name: str
    make: Callable[[Path], list[str]]
    """Writes the case's input under the folder and returns the command's arguments."""
    expect: tuple[int, ...]


@dataclass
class Outcome:
    code: int | None
    seconds: float
    rss_mb: float
    traceback: bool
    last: str
    lines: int
    """Non-blank lines on stderr: an error (exit 2) is one."""


def run(args: list[str], timeout: float, cwd: Path) -> Outcome:
    """``yanami ARGS`` in a fresh process: exit code (None when killed at the limit), peak RSS."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [*YANAMI, *args], cwd=cwd, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL
        )
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    killed = proc.returncode < 0
    lines = [line for line in text.splitlines() if line.strip()]
    return Outcome(
        None if killed else proc.returncode,
        time.monotonic() - start,
        usage.ru_maxrss / 1024,
        "Traceback (most recent call last)" in text,
        lines[-1][:150] if lines else "",
        len(lines),
    )


# inputs ---------------------------------------------------------------------------------------


def png(colour: str = "gray", size: tuple[int, int] = (64, 48)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return buf.getvalue()


_BENCH: list[Path] = []


def bench_copy(where: Path) -> Path:
    """A copy of a tiny world bench (built once per run)."""
    if not _BENCH:
        first = where.parent / "tiny-bench"
        subprocess.run([*YANAMI, "build", "--preset", "tiny", "--out", str(first)], check=True, capture_output=True)
        _BENCH.append(first)
    out = where / "bench"
    shutil.copytree(_BENCH[0], out)
    return out


def first_line_edit(bench: Path, edit: Callable[[dict], str]) -> None:
    """Replace the first dialogue line of the first shard with ``edit(line)`` (its raw text)."""
    shard = sorted((bench / "dialogues").glob("*.jsonl"))[0]
    lines = shard.read_text(encoding="utf-8").split("\n")
    lines[0] = edit(json.loads(lines[0]))
    shard.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))


def weave(root: Path, records: list[dict] | None = None) -> Path:
    (root / "imgs").mkdir(parents=True)
    for name in ("a.png", "b.png"):
        (root / "imgs" / name).write_bytes(png())
    record = {
        "domain": "edit",
        "idx": 1,
        "images": ["imgs/a.png", "imgs/b.png"],
        "chats": [
            {"role": "user", "type": "text", "content": "Edit Image #1: make it red."},
            {"role": "assistant", "type": "image", "content": "Image #2", "key_point": {"Text": "It is red."}},
        ],
    }
    (root / "test.json").write_text(json.dumps(records if records is not None else [record]))
    return root


def edit_text(path: Path, old: str, new: str) -> None:
    """Replace the first ``old`` in a text file (JSON, as written: escapes such as ``\\u0000`` stay escapes)."""
    text = path.read_text()
    if old not in text:
        raise ValueError(f"{old!r} is not in {path}")
    path.write_text(text.replace(old, new, 1))


def many_weave(root: Path, n: int = 80, bad: str = "[1]") -> Path:
    """A WEAVE source of ``n`` records (worker processes read their files), record 70 listing ``bad``
    (raw JSON) as its second image."""
    weave(root)
    record = json.loads((root / "test.json").read_text())[0]
    text = ",".join(json.dumps({**record, "idx": k}) for k in range(n))
    (root / "test.json").write_text("[" + text + "]")
    edit_text(root / "test.json", '"idx": 70, "images": ["imgs/a.png", "imgs/b.png"',
              '"idx": 70, "images": ["imgs/a.png", "imgs/b.png", ' + bad)  # fmt: skip
    return root


def imug(root: Path, grid: object = None) -> Path:
    sys.path.insert(0, str(ROOT))
    from tests.families.samples import IMUG_GRID, write_imug

    write_imug(root)
    if grid is not None:
        path = root / "data" / "grid_gt" / "Geometric_Coloring__cubes_coloring__1.jsonl"
        path.write_text(json.dumps({"turn": 2, "grid": grid if grid != "keep" else IMUG_GRID}) + "\n")
    return root


def opening(root: Path) -> Path:
    """OpenING's layout (tests/families/test_opening.py): OpenING-benchmark/ with test_data.jsonl and images/."""
    sys.path.insert(0, str(ROOT))
    from tests.families.test_opening import write_opening

    return write_opening(root)


def deep(n: int = 100_000) -> str:
    return "[" * n + "]" * n


def tar_bomb(path: Path, members: int = 40, size: int = 60 << 20) -> None:
    """A gzip tar of ``members`` images of ``size`` bytes of zeros each (a few MB on disk)."""
    zeros = b"\0" * (1 << 20)
    with gzip.open(path, "wb", compresslevel=1) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for k in range(members):
            info = tarfile.TarInfo(f"s{k:03d}.png")
            info.size = size
            reader = io.BufferedReader(_Zeros(size, zeros))  # type: ignore[arg-type]
            tar.addfile(info, reader)


class _Zeros(io.RawIOBase):
    def __init__(self, n: int, chunk: bytes) -> None:
        self.left, self.chunk = n, chunk

    def readable(self) -> bool:
        return True

    def readinto(self, b: memoryview) -> int:  # type: ignore[override]
        n = min(len(b), self.left, len(self.chunk))
        b[:n] = self.chunk[:n]
        self.left -= n
        return n


def parquet_bomb(path: Path, cells: int = 8, size: int = 200 << 20) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    zeros = b"\0" * size
    table = pa.table({"image": pa.array([zeros] * cells, pa.binary()), "group": [f"g{k}" for k in range(cells)]})
    pq.write_table(table, path, compression="zstd", row_group_size=cells)


def export_bomb(shard: Path) -> None:
    """The export's first row's first image replaced by 200 MB of zeros (zstd: a few KB on disk)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(shard)
    big = pa.array([[{"bytes": b"\0" * (200 << 20), "path": "x.png"}]] + [None] * (len(table) - 1),
                   table.schema.field("images").type)  # fmt: skip
    pq.write_table(table.set_column(table.schema.get_field_index("images"), "images", big), shard, compression="zstd")


def in_child(make: Callable[[Path], None], path: Path) -> None:
    """``make(path)`` in a process of its own: the memory a big input takes to write stays out of
    this process (whose size a forked command would start from)."""
    import multiprocessing

    p = multiprocessing.get_context("spawn").Process(target=make, args=(path,))
    p.start()
    p.join()
    if p.exitcode != 0:
        raise RuntimeError(f"making {path} failed")


def fake_config(where: Path, url: str, **extra: object) -> Path:
    fields = {"kind": "openai", "base_url": f"{url}/v1", "chat_model": "c", "image_model": "i", "timeout_s": 2,
              "max_retries": 0, "requests_per_minute": 60000, **extra}  # fmt: skip
    path = where / "model.yaml"
    path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in fields.items()))
    return path


# cases ----------------------------------------------------------------------------------------


def cases(servers: dict[str, str]) -> list[Case]:
    """Every case; ``servers``: the URL of a fake server per fault it answers with (``plain``: none)."""
    out: list[Case] = []

    def case(name: str, expect: tuple[int, ...]) -> Callable[[Callable[[Path], list[str]]], None]:
        def add(make: Callable[[Path], list[str]]) -> None:
            out.append(Case(name, make, expect))

        return add

    @case("validate: an id of 5,000 digits", (1,))
    def _(w: Path) -> list[str]:
        b = bench_copy(w)
        first_line_edit(b, lambda d: json.dumps(d).replace(json.dumps(d["id"]), "9" * 5000, 1))
        return ["validate", str(b)]

    @case("validate: a NUL byte in an image path", (1,))
    def _(w: Path) -> list[str]:
        b = bench_copy(w)
        first_line_edit(b, lambda d: json.dumps(d).replace('"sha256": "', '"sha256": "\\u0000', 1))
        return ["validate", str(b)]

    @case("validate: a lone surrogate in a text", (0, 1))
    def _(w: Path) -> list[str]:
        b = bench_copy(w)
        first_line_edit(b, lambda d: json.dumps(d).replace('"text": "', '"text": "\\ud800', 1))
        return ["validate", str(b)]

    @case("validate: a line nested 100,000 deep", (1,))
    def _(w: Path) -> list[str]:
        b = bench_copy(w)
        first_line_edit(b, lambda d: deep())
        return ["validate", str(b)]

    @case("validate: a raw U+2028 inside a string (valid JSON)", (0, 1))
    def _(w: Path) -> list[str]:
        b = bench_copy(w)
        first_line_edit(b, lambda d: json.dumps(d, ensure_ascii=False).replace('"text": "', '"text": "\u2028', 1))
        return ["validate", str(b)]

    @case("validate: a shard that is a FIFO", (1, 2))
    def _(w: Path) -> list[str]:
        b = bench_copy(w)
        shard = sorted((b / "dialogues").glob("*.jsonl"))[0]
        shard.unlink()
        os.mkfifo(shard)
        return ["validate", str(b)]

    @case("stats: a shard that is a FIFO", (1, 2))
    def _(w: Path) -> list[str]:
        b = bench_copy(w)
        shard = sorted((b / "dialogues").glob("*.jsonl"))[0]
        shard.unlink()
        os.mkfifo(shard)
        return ["stats", str(b)]

    @case("validate: an image that is a FIFO", (1, 2))
    def _(w: Path) -> list[str]:
        b = bench_copy(w)
        image = next((b / "images").rglob("*.png"))
        image.unlink()
        os.mkfifo(image)
        return ["validate", str(b)]

    @case("import weave: an image that is a FIFO", (2,))
    def _(w: Path) -> list[str]:
        src = weave(w / "src")
        (src / "imgs" / "b.png").unlink()
        os.mkfifo(src / "imgs" / "b.png")
        return ["import", "weave", str(src), "--out", str(w / "out")]

    @case("import weave: an image linked outside the source", (2,))
    def _(w: Path) -> list[str]:
        src = weave(w / "src")
        (w / "outside.png").write_bytes(png("red"))
        (src / "imgs" / "b.png").unlink()
        (src / "imgs" / "b.png").symlink_to(w / "outside.png")
        return ["import", "weave", str(src), "--out", str(w / "out")]

    @case("import weave: an idx of 5,000 digits", (2,))
    def _(w: Path) -> list[str]:
        src = weave(w / "src")
        text = (src / "test.json").read_text().replace('"idx": 1', '"idx": ' + "7" * 5000)
        (src / "test.json").write_text(text)
        return ["import", "weave", str(src), "--out", str(w / "out")]

    @case("import weave: test.json nested 100,000 deep", (2,))
    def _(w: Path) -> list[str]:
        src = weave(w / "src")
        (src / "test.json").write_text(deep())
        return ["import", "weave", str(src), "--out", str(w / "out")]

    @case("import weave: test.json not UTF-8", (2,))
    def _(w: Path) -> list[str]:
        src = weave(w / "src")
        (src / "test.json").write_bytes(b'[{"domain": "\xff\xfe"}]')
        return ["import", "weave", str(src), "--out", str(w / "out")]

    # a path no file can have (JSON's escapes \u0000 and \ud800) or a number int() refuses, where the
    # importer reads a path or an image number: one line naming the file and the field, exit 2
    for label, escaped in (("a NUL byte", "\\u0000"), ("a lone surrogate", "\\ud800")):

        @case(f"import weave: {label} in an image path", (2,))
        def _(w: Path, escaped: str = escaped) -> list[str]:
            src = weave(w / "src")
            edit_text(src / "test.json", '"imgs/b.png"', f'"imgs/b{escaped}.png"')
            return ["import", "weave", str(src), "--out", str(w / "out")]

        @case(f"import weave: {label} in a listed path no chat shows", (2,))
        def _(w: Path, escaped: str = escaped) -> list[str]:
            src = weave(w / "src")
            edit_text(src / "test.json", '"imgs/b.png"', f'"imgs/b.png", "imgs/c{escaped}.png"')
            return ["import", "weave", str(src), "--out", str(w / "out")]

        @case(f"import weave: {label} in a path of record 70 of 80 (worker processes)", (2,))
        def _(w: Path, escaped: str = escaped) -> list[str]:
            return ["import", "weave", str(many_weave(w / "src", bad=f'"imgs/{escaped}.png"')), "--out", str(w / "o")]

        @case(f"import imug: {label} in an image path", (2,))
        def _(w: Path, escaped: str = escaped) -> list[str]:
            src = imug(w / "src")
            edit_text(src / "data" / "benchmark.jsonl", '"cubes_1.png"', f'"cubes{escaped}_1.png"')
            return ["import", "imug", str(src), "--out", str(w / "out")]

        @case(f"import opening: {label} in a picture path", (2,))
        def _(w: Path, escaped: str = escaped) -> list[str]:
            src = opening(w / "src")
            edit_text(src / "test_data.jsonl", "96-o-2.jpg", f"96-o{escaped}-2.jpg")
            return ["import", "opening", str(src), "--out", str(w / "out")]

        @case(f"prepare: {label} in a groups.jsonl path", (2,))
        def _(w: Path, escaped: str = escaped) -> list[str]:
            pool = w / "pool"
            pool.mkdir()
            (pool / "a.png").write_bytes(png())
            (pool / "groups.jsonl").write_text(f'{{"group": "g", "images": ["a.png", "sub{escaped}/b.png"]}}\n')
            return ["prepare", str(pool), "--out", str(w / "out"), "--filter", "stand-ins"]

    @case("import opening: a picture path that leads out of the source folder", (2,))
    def _(w: Path) -> list[str]:
        src = opening(w / "src")
        edit_text(src / "test_data.jsonl", "./images/Storybook Completion/96-o-2.jpg", "../../../etc/hostname")
        return ["import", "opening", str(src), "--out", str(w / "out")]

    @case("import opening: a picture that is a link out of the source folder", (2,))
    def _(w: Path) -> list[str]:
        src = opening(w / "src")
        target = src / "images" / "Storybook Completion" / "96-o-2.jpg"
        target.unlink()
        (w / "outside.jpg").write_bytes(png())
        target.symlink_to(w / "outside.jpg")
        return ["import", "opening", str(src), "--out", str(w / "out")]

    @case("import opening: a picture that is a folder", (2,))
    def _(w: Path) -> list[str]:
        src = opening(w / "src")
        target = src / "images" / "Storybook Completion" / "96-o-2.jpg"
        target.unlink()
        target.mkdir()
        return ["import", "opening", str(src), "--out", str(w / "out")]

    @case("import opening: a picture that is no picture", (2,))
    def _(w: Path) -> list[str]:
        src = opening(w / "src")
        (src / "images" / "Storybook Completion" / "96-o-2.jpg").write_bytes(b"GIF89a not a picture")
        return ["import", "opening", str(src), "--out", str(w / "out")]

    @case("import opening: a record 100,000 lists deep", (2,))
    def _(w: Path) -> list[str]:
        src = opening(w / "src")
        with (src / "test_data.jsonl").open("a") as f:
            f.write(deep() + "\n")
        return ["import", "opening", str(src), "--out", str(w / "out")]

    @case("import opening: a file that is not UTF-8", (2,))
    def _(w: Path) -> list[str]:
        src = opening(w / "src")
        (src / "test_data.jsonl").write_bytes(b'{"total_uid": "\xff\xfe"}\n')
        return ["import", "opening", str(src), "--out", str(w / "out")]

    @case("import weave: an image path that is a list, record 70 of 80 (worker processes)", (2,))
    def _(w: Path) -> list[str]:
        return ["import", "weave", str(many_weave(w / "src", bad='["imgs/a.png"]')), "--out", str(w / "out")]

    @case("import imug: an image path that is an object, line 70 of 80 (worker processes)", (2,))
    def _(w: Path) -> list[str]:
        src = imug(w / "src")
        path = src / "data" / "benchmark.jsonl"
        first, second = path.read_text().splitlines()
        botany = json.loads(second)
        lines = [first] + [json.dumps({**botany, "sample_id": str(100 + k)}) for k in range(80)]
        lines[70] = lines[70].replace('{"image": "sprout.jpg"', '{"image": {"path": "sprout.jpg"}', 1)
        path.write_text("\n".join(lines) + "\n")
        return ["import", "imug", str(src), "--out", str(w / "out")]

    for label, old, new in (
        ("an image number of 5,000 digits", "Edit Image #1:", "Edit Image #" + "1" * 5000 + ":"),
        ("a reply's image number of 5,000 digits", '"content": "Image #2"', '"content": "Image #' + "2" * 5000 + '"'),
        ("a key-point key of 5,000 digits", '{"Text": "It is red."}', '{"Image #' + "3" * 5000 + '": "It is red."}'),
        ("a key-point GT key of 5,000 digits", '{"Text": "It is red."}', '{"GT #' + "4" * 5000 + '": "It is red."}'),
        ("a JSON number of 5,000 digits in images", '"images": [', '"images": [' + "5" * 5000 + ", "),
    ):

        @case(f"import weave: {label}", (2,))
        def _(w: Path, old: str = old, new: str = new) -> list[str]:
            src = weave(w / "src")
            edit_text(src / "test.json", old, new)
            return ["import", "weave", str(src), "--out", str(w / "out")]

    @case("prepare: a WebDataset sample whose .json names a group with a lone surrogate", (0,))
    def _(w: Path) -> list[str]:
        with tarfile.open(w / "pool.tar", "w") as tar:
            for name, data in (("s1.png", png()), ("s1.json", b'{"group": "g\\ud800", "scenario": "\\udfff"}')):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return ["prepare", str(w / "pool.tar"), "--out", str(w / "out"), "--filter", "stand-ins"]

    @case("prepare: a groups.jsonl group named with a lone surrogate", (0,))
    def _(w: Path) -> list[str]:
        pool = w / "pool"
        pool.mkdir()
        (pool / "a.png").write_bytes(png())
        (pool / "groups.jsonl").write_text('{"group": "g\\ud800", "images": ["a.png"]}\n')
        return ["prepare", str(pool), "--out", str(w / "out"), "--filter", "stand-ins"]

    @case("import imug: data/images linked to another folder", (2,))
    def _(w: Path) -> list[str]:
        src = imug(w / "src")
        elsewhere = w / "elsewhere"
        shutil.move(src / "data" / "images", elsewhere)
        (src / "data" / "images").symlink_to(elsewhere, target_is_directory=True)
        return ["import", "imug", str(src), "--out", str(w / "out")]

    for label, grid in (("a ragged grid", [["1", "0", "0"], ["0", "r"], ["0", "0", "g"]]), ("an empty grid", [[]])):

        @case(f"import imug: {label}", (2,))
        def _(w: Path, grid: object = grid) -> list[str]:
            return ["import", "imug", str(imug(w / "src", grid)), "--out", str(w / "out")]

    @case("import imug: a grid file that is a FIFO", (2,))
    def _(w: Path) -> list[str]:
        src = imug(w / "src")
        path = src / "data" / "grid_gt" / "Geometric_Coloring__cubes_coloring__1.jsonl"
        path.unlink()
        os.mkfifo(path)
        return ["import", "imug", str(src), "--out", str(w / "out")]

    @case("prepare: a pool folder with a FIFO and a non-UTF-8 file name", (0,))
    def _(w: Path) -> list[str]:
        pool = w / "pool"
        pool.mkdir()
        for k in range(3):
            (pool / f"p{k}.png").write_bytes(png(("red", "green", "blue")[k]))
        os.mkfifo(pool / "pipe.png")
        with open(os.fsencode(pool) + b"/bad-\xff.png", "wb") as f:
            f.write(png("white"))
        return ["prepare", str(pool), "--out", str(w / "out"), "--filter", "stand-ins"]

    @case("prepare: groups.jsonl nested 100,000 deep", (1, 2))
    def _(w: Path) -> list[str]:
        pool = w / "pool"
        pool.mkdir()
        (pool / "a.png").write_bytes(png())
        (pool / "groups.jsonl").write_text(deep() + "\n")
        return ["prepare", str(pool), "--out", str(w / "out"), "--filter", "stand-ins"]

    @case("prepare: an 11 MB gzip tar of 40 x 60 MB members", (0,))
    def _(w: Path) -> list[str]:
        in_child(tar_bomb, w / "pool.tar")  # (gzip inside, a .tar name: tar's own detection reads it)
        return ["prepare", str(w / "pool.tar"), "--out", str(w / "out"), "--filter", "stand-ins"]

    @case("prepare: a zstd Parquet pool of 8 x 200 MB cells", (0,))
    def _(w: Path) -> list[str]:
        in_child(parquet_bomb, w / "pool.parquet")
        return ["prepare", str(w / "pool.parquet"), "--out", str(w / "out"), "--filter", "stand-ins"]

    @case("import: a Parquet export whose cells decompress to 200 MB", (2,))
    def _(w: Path) -> list[str]:
        b = bench_copy(w)
        subprocess.run([*YANAMI, "export", str(b), "--format", "parquet", "--out", str(w / "pq")], check=True,
                       capture_output=True)  # fmt: skip
        in_child(export_bomb, sorted((w / "pq").glob("*.parquet"))[0])
        return ["import", str(w / "pq"), "--out", str(w / "back")]

    @case("eval: a config whose base_url has no scheme", (2,))
    def _(w: Path) -> list[str]:
        b = bench_copy(w)
        config = fake_config(w, "127.0.0.1:9")
        config.write_text(config.read_text().replace('"http://127.0.0.1:9/v1"', '"127.0.0.1:9/v1"'))
        return ["eval", str(b), "--model", str(config), "--out", str(w / "run")]

    @case("eval: a YAML config of nested aliases (a billion laughs)", (2,))
    def _(w: Path) -> list[str]:
        text, prev = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n', "a"
        for i in range(1, 9):
            text += f"{chr(97 + i)}: &{chr(97 + i)} [" + ",".join(f"*{prev}" for _ in range(9)) + "]\n"
            prev = chr(97 + i)
        (w / "laughs.yaml").write_text(text + f"kind: openai\nname: *{prev}\n")
        return ["eval", str(bench_copy(w)), "--model", str(w / "laughs.yaml"), "--out", str(w / "run")]

    @case("eval: a key variable that is not set", (2,))
    def _(w: Path) -> list[str]:
        config = fake_config(w, servers["plain"], api_key_env="YANAMI_HOSTILE_UNSET")
        return ["eval", str(bench_copy(w)), "--model", str(config), "--out", str(w / "run")]

    for fault in ("trickle", "trickle-head", "endless", "oversized"):

        @case(f"eval: a server that answers {fault} (timeout_s 2, no retries)", (0, 1))
        def _(w: Path, fault: str = fault) -> list[str]:
            config = fake_config(w, servers[fault])
            return ["eval", str(bench_copy(w)), "--model", str(config), "--out", str(w / "run"), "--limit", "2"]

    return out


class _FaultRouter:
    """One fake server per fault kind, each answering every request with its fault."""

    def __init__(self) -> None:
        from yanami.models.fake import FakeServer

        self.servers = {
            kind: FakeServer(faults=[("/", kind)] * 10_000, hang_s=30.0, record=False)
            for kind in ("trickle", "trickle-head", "endless", "oversized")
        }
        self.plain = FakeServer(record=False)

    def __enter__(self) -> _FaultRouter:
        for s in (*self.servers.values(), self.plain):  # (the check before a run, GET /models, is not faulted)
            s.__enter__()
        return self

    def urls(self) -> dict[str, str]:
        return {"plain": self.plain.url, **{kind: s.url for kind, s in self.servers.items()}}

    def __exit__(self, *exc: object) -> None:
        for s in (*self.servers.values(), self.plain):
            s.__exit__(*exc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--timeout", type=float, default=90.0, help="seconds a case may take")
    ap.add_argument("--only", help="run the cases whose name contains this")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, _FaultRouter() as router:
        base = run(["--version"], args.timeout, Path(tmp))
        print(f"baseline: yanami --version {base.seconds:.2f} s, peak RSS {base.rss_mb:.0f} MB")
        chosen = [c for c in cases(router.urls()) if not args.only or args.only in c.name]
        rows = []
        for k, c in enumerate(chosen):
            work = Path(tmp) / f"case{k:02d}"
            work.mkdir()
            o = run(c.make(work), args.timeout, work)
            ok = o.code in c.expect and not o.traceback and (o.code != 2 or o.lines == 1)
            rows.append((c, o, ok))
            code = "hang" if o.code is None else str(o.code)
            print(
                f"{'ok  ' if ok else 'FAIL'} {c.name}: exit {code} (expected {'/'.join(map(str, c.expect))}), "
                f"{o.seconds:.1f} s, peak RSS {o.rss_mb:.0f} MB{', TRACEBACK' if o.traceback else ''}"
                f"{f', {o.lines} lines on stderr' if o.code == 2 and o.lines != 1 else ''}"
                f"\n       {o.last}",
                flush=True,
            )
            shutil.rmtree(work, ignore_errors=True)
    tracebacks = sum(o.traceback for _, o, _ in rows)
    hangs = sum(o.code is None for _, o, _ in rows)
    unexpected = sum(not ok for _, _, ok in rows)
    peak = max((o.rss_mb for _, o, _ in rows), default=0.0)
    print(
        f"{len(rows)} cases: {tracebacks} tracebacks, {hangs} hangs, {unexpected} not as expected; "
        f"largest peak RSS {peak:.0f} MB ({peak / base.rss_mb:.1f}x the bare CLI's)"
    )


if __name__ == "__main__":
    main()
