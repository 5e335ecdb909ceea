"""Trainer exports (LLaVA, BAGEL, WebDataset) read back as their trainers read them."""

from __future__ import annotations

import glob
import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml
from PIL import Image

from tests.helpers import snapshot
from yanami.contract import Dialogue, sha256_hex
from yanami.store import Dataset, export_bagel, export_llava, export_webdataset, read_webdataset
from yanami.store._trainers import conversation, edit_chains, question_text


def _llava_asserts(conv: list[dict[str, str]]) -> None:
    """LLaVA's ``preprocess``: after an optional non-human first message is skipped,
    ``assert role == conv.roles[j % 2]`` for every sentence j (roles: human, gpt)."""
    roles = ("human", "gpt")
    for j, sentence in enumerate(conv):
        assert sentence["from"] == roles[j % 2], f"message {j}"
    assert conv and conv[-1]["from"] == "gpt"


def _images_of(rec: dict[str, Any]) -> list[str]:
    image = rec.get("image", [])
    return [image] if isinstance(image, str) else image


def test_llava_alternates_and_places_one_token_per_image(world_bench: Path, tmp_path: Path) -> None:
    out = export_llava(world_bench, tmp_path / "llava")
    records = json.loads((out / "llava.json").read_text(encoding="utf-8"))
    dialogues = list(Dataset(world_bench))
    assert len(records) == len(dialogues) + sum(len(d.questions) for d in dialogues)
    for rec in records:
        _llava_asserts(rec["conversations"])
        images = _images_of(rec)
        tokens = sum(m["value"].count("<image>") for m in rec["conversations"] if m["from"] == "human")
        assert tokens == len(images), rec["id"]
        assert all("<image>" not in m["value"] for m in rec["conversations"] if m["from"] == "gpt")
        for rel in images:  # each picture is there, and is the picture its name says
            assert sha256_hex((out / "images" / rel).read_bytes()) == Path(rel).stem
    # A dialogue's record: its user pictures in place, each assistant picture opening the next human value.
    d, rec = dialogues[0], records[0]
    assert rec["id"] == d.id
    shown = [p.sha256 for t in d.turns for p in t.user.images()]
    made = [p.sha256 for t in d.turns[:-1] for p in t.assistant.images()]
    assert sorted(Path(r).stem for r in _images_of(rec)) == sorted(shown + made)
    # A question's record ends with the question as `yanami eval` asks it and the reference letter.
    q = d.questions[0]
    qrec = next(r for r in records if r["id"] == f"{d.id}:{q.id}")
    assert qrec["conversations"][-2]["value"].endswith(question_text(q))
    assert qrec["conversations"][-1]["value"] == ", ".join(q.answer_letters)
    info = json.loads((out / "export.json").read_text())
    assert info["format"] == "llava" and info["counts"]["records"] == len(records)
    assert any("hidden state" in x["what"] for x in info["not_carried"])
    assert (out / "yanami" / "dialogues.jsonl").read_text().splitlines() == [
        line for _, _, line, _ in Dataset(world_bench).records()
    ]


def test_question_wording_is_the_evaluations(world_dialogues: list[Dialogue]) -> None:
    from yanami.models import question_prompt

    for d in world_dialogues:
        for q in d.questions:
            assert question_text(q) == question_prompt(q)


def _image(sha: str, source: str) -> dict[str, Any]:
    return {"type": "image", "sha256": sha, "format": "png", "width": 4, "height": 4, "source": source}


def test_empty_messages_merge_so_roles_still_alternate() -> None:
    a, b, c = "a" * 64, "b" * 64, "c" * 64
    turns = [
        {"index": 0, "user": {"role": "user", "parts": [{"type": "text", "text": "hi <image> there"}]}},
        {"index": 1, "user": {"role": "user", "parts": [_image(a, "user")]}},
        {"index": 2, "user": {"role": "user", "parts": [{"type": "text", "text": "edit it"}]}},
        {"index": 3, "user": {"role": "user", "parts": [{"type": "text", "text": "more"}]}},
    ]
    replies: list[list[dict[str, Any]]] = [
        [{"type": "text", "text": "hello"}],
        [],  # nothing said: the human messages around it merge
        [_image(b, "assistant")],  # a picture alone: it opens the next human value
        [_image(c, "assistant")],  # the last picture: nothing follows to show it in
    ]
    for t, parts in zip(turns, replies, strict=True):
        t["assistant"] = {"role": "assistant", "parts": parts}
    d = Dialogue.model_validate(
        {
            "id": "x",
            "family": "weave",
            "domain": "d",
            "system_prompt": "be kind",
            "turns": turns,
            "meta": {"generator": "t"},
        }
    )
    c_ = conversation(d, d.turns, rid="x")
    # Only the first exchange has a gpt reply; the rest has nothing to train on and is left out.
    assert c_.conversations == [
        {"from": "human", "value": "be kind\nhi <Image> there"},
        {"from": "gpt", "value": "hello"},
    ]
    assert c_.images == [] and c_.escaped_tokens == 1 and c_.assistant_images_left_out == 2
    # With a reply after them, the merged human value holds the user's and the assistant's pictures.
    replies[3] = [{"type": "text", "text": "done"}]
    turns[3]["assistant"] = {"role": "assistant", "parts": replies[3]}
    d = Dialogue.model_validate({**d.model_dump(mode="json"), "turns": turns})
    c_ = conversation(d, d.turns, rid="x")
    _llava_asserts(c_.conversations)
    assert c_.conversations[2] == {"from": "human", "value": "<image>\nedit it\n<image>\nmore"}
    assert [p.sha256 for p in c_.images] == [a, b]


def test_edit_chains_follow_one_picture_and_leave_fusions_out(world_dialogues: list[Dialogue]) -> None:
    for d in world_dialogues:
        chains, fused = edit_chains(d)
        made = [t.index for t in d.turns for _ in t.assistant.images()]
        if d.scenario == "fusion":  # several pictures in: the first result fuses them and starts the chain
            assert fused == 1 and chains[0].turns == made
        else:  # one picture in, every result an edit of the one before
            assert fused == 0 and chains[0].turns == [0, *made]
        for chain in chains:
            assert len(chain.instructions) == len(chain.images) - 1
            assert all(s.strip() for s in chain.instructions)


def test_bagel_layout_is_what_bagels_loaders_read(world_bench: Path, tmp_path: Path) -> None:
    out = export_bagel(world_bench, tmp_path / "bagel")
    ns: dict[str, Any] = {}
    exec((out / "dataset_info.py").read_text(), ns)
    info = ns["YANAMI_DATASET_INFO"]
    config = yaml.safe_load((out / "yanami.yaml").read_text())
    for group, entry in config.items():
        assert set(entry["dataset_names"]) <= set(info[group])
        assert sum(entry["num_used_data"]) > 0
    assert "frame_sampler_args" in config["vlm_sft"]  # SftJSONLIterableDataset takes a frame_sampler

    # unified_edit: BAGEL lists data_dir, joins each .parquet name onto it and looks that up in
    # parquet_info; a file it does not find there is skipped without a word.
    edit = info["unified_edit"]["yanami_edit"]
    parquet_info = json.loads(Path(edit["parquet_info_path"]).read_text())
    paths = [os.path.join(edit["data_dir"], n) for n in os.listdir(edit["data_dir"]) if n.endswith(".parquet")]
    assert paths and sorted(paths) == sorted(parquet_info)
    rows = 0
    for path in paths:
        f = pq.ParquetFile(path)
        assert parquet_info[path]["num_row_groups"] == f.metadata.num_row_groups
        for g in range(f.metadata.num_row_groups):
            for row in f.read_row_group(g).to_pylist():
                rows += 1
                assert len(row["instruction_list"]) == len(row["image_list"]) - 1 >= 1
                assert all(
                    isinstance(s, list) and s and all(isinstance(x, str) for x in s) for s in row["instruction_list"]
                )
                for data in row["image_list"]:
                    Image.open(io.BytesIO(data)).convert("RGB")
    assert rows == edit["num_total_samples"] == json.loads((out / "export.json").read_text())["counts"]["edit_chains"]

    # vlm_sft: JSONL records whose human values split on <image> into as many pictures as `image` names.
    vlm = info["vlm_sft"]["yanami_vlm"]
    lines = Path(vlm["jsonl_path"]).read_text().splitlines()
    assert len(lines) == vlm["num_total_samples"]
    for line in lines:
        rec = json.loads(line)
        assert {m["from"] for m in rec["conversations"]} <= {"human", "gpt"}
        assert any(m["from"] == "gpt" and m["value"] for m in rec["conversations"])  # else BAGEL skips it
        images = _images_of(rec)
        assert sum(m["value"].count("<image>") for m in rec["conversations"] if m["from"] == "human") == len(images)
        for rel in images:
            assert (Path(vlm["data_dir"]) / rel).is_file()


def test_bagel_root_names_where_bagel_will_find_the_files(world_bench: Path, tmp_path: Path) -> None:
    out = export_bagel(world_bench, tmp_path / "bagel", root="/data/yanami/")
    (key,) = json.loads((out / "parquet_info" / "yanami_edit.json").read_text())
    assert key == "/data/yanami/unified_edit/yanami_edit/part-00000.parquet"
    assert "'/data/yanami/vlm_sft/images'" in (out / "dataset_info.py").read_text().replace('"', "'")


def test_webdataset_reads_back_byte_for_byte(world_bench: Path, tmp_path: Path) -> None:
    wds = pytest.importorskip("webdataset")
    out = export_webdataset(world_bench, tmp_path / "wds", shard_bytes=100_000)  # several shards
    ds = Dataset(world_bench)
    expected = [
        (line, [ds.image_bytes(p) for p in dict((p.sha256, p) for p in d.images()).values()])
        for _, _, line, d in ds.records()
    ]
    assert len(glob.glob(str(out / "shard-*.tar"))) > 1
    # WebDataset's own reader groups each dialogue's files into one sample.
    samples = list(wds.WebDataset(sorted(glob.glob(str(out / "shard-*.tar"))), shardshuffle=False))
    assert [s["__key__"] for s in samples] == [json.loads(line)["id"] for line, _ in expected]
    for s, (line, images) in zip(samples, expected, strict=True):
        assert s["json"] == line.encode()
        assert [s[f"{k}.png"] for k in range(len(images))] == images
    assert list(read_webdataset(out)) == expected


def test_same_dataset_same_bytes(world_bench: Path, tmp_path: Path) -> None:
    for export in (export_llava, export_bagel, export_webdataset):
        out = tmp_path / export.__name__
        export(world_bench, out)
        first = snapshot(out)
        export(world_bench, out, overwrite=True)
        assert snapshot(out) == first, export.__name__


@pytest.mark.parametrize("fmt", ["llava", "bagel", "webdataset"])
def test_cli_bad_input_is_one_line(cli: Callable[..., Any], world_bench: Path, tmp_path: Path, fmt: str) -> None:
    def one_line_error(*args: str | Path) -> str:
        r = cli("export", *args)
        assert r.code != 0 and "Traceback" not in r.err and r.err.strip().count("\n") == 0, r.err
        return str(r.err)

    assert "no such" in one_line_error(tmp_path / "missing", "--format", fmt, "--out", tmp_path / "o")
    (tmp_path / "empty").mkdir()
    one_line_error(tmp_path / "empty", "--format", fmt, "--out", tmp_path / "o")
    (tmp_path / "taken").mkdir()
    assert "already exists" in one_line_error(world_bench, "--format", fmt, "--out", tmp_path / "taken")
    assert "refusing" in one_line_error(world_bench, "--format", fmt, "--out", tmp_path / "taken", "--overwrite")
    assert not (tmp_path / "o").exists()
    r = cli("export", world_bench, "--format", fmt, "--out", tmp_path / "o")
    assert r.code == 0, r.err
    assert "README.md" in r.out and (tmp_path / "o" / "README.md").is_file()
    r = cli("export", world_bench, "--format", fmt, "--out", tmp_path / "o", "--overwrite")
    assert r.code == 0, r.err
    if fmt != "bagel":
        assert "--bagel-root" in one_line_error(
            world_bench, "--format", fmt, "--out", tmp_path / "p", "--bagel-root", "/x"
        )
