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
from yanami.store import (
    Dataset,
    export_bagel,
    export_llava,
    export_llava_next,
    export_webdataset,
    read_webdataset,
)
from yanami.store._trainers import (
    EARLIER,
    NOW,
    conversation,
    edit_chains,
    edit_steps,
    one_picture,
    question_text,
    read_pictures,
)


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


def _human_tokens(rec: dict[str, Any]) -> list[int]:
    return [m["value"].count("<image>") for m in rec["conversations"] if m["from"] == "human"]


def test_llava_next_alternates_and_lists_every_picture(world_bench: Path, tmp_path: Path) -> None:
    out = export_llava_next(world_bench, tmp_path / "llava-next")
    records = json.loads((out / "llava_next.json").read_text(encoding="utf-8"))
    dialogues = list(Dataset(world_bench))
    assert len(records) == len(dialogues) + sum(len(d.questions) for d in dialogues)
    for rec in records:
        _llava_asserts(rec["conversations"])
        # LLaVA-NeXT opens each entry of the list and feeds them in the order of the placeholders.
        assert isinstance(rec["image"], list) and rec["image"], rec["id"]
        assert sum(_human_tokens(rec)) == len(rec["image"]), rec["id"]
        assert all("<image>" not in m["value"] for m in rec["conversations"] if m["from"] == "gpt")
        for rel in rec["image"]:  # each picture is there, and is the picture its name says
            assert sha256_hex((out / "images" / rel).read_bytes()) == Path(rel).stem
    # A dialogue's record: its user pictures in place, each assistant picture opening the next human value.
    d, rec = dialogues[0], records[0]
    assert rec["id"] == d.id
    shown = [p.sha256 for t in d.turns for p in t.user.images()]
    made = [p.sha256 for t in d.turns[:-1] for p in t.assistant.images()]
    assert sorted(Path(r).stem for r in rec["image"]) == sorted(shown + made)
    # A question's record ends with the question as `yanami eval` asks it and the reference letter.
    q = d.questions[0]
    qrec = next(r for r in records if r["id"] == f"{d.id}:{q.id}")
    assert qrec["conversations"][-2]["value"].endswith(question_text(q))
    assert qrec["conversations"][-1]["value"] == ", ".join(q.answer_letters)
    info = json.loads((out / "export.json").read_text())
    assert info["format"] == "llava-next" and info["counts"]["records"] == len(records)
    assert any("hidden state" in x["what"] for x in info["not_carried"])
    assert (out / "yanami" / "dialogues.jsonl").read_text().splitlines() == [
        line for _, _, line, _ in Dataset(world_bench).records()
    ]


def test_llava_gives_each_record_one_picture_as_llava_15_reads_it(world_bench: Path, tmp_path: Path) -> None:
    out = export_llava(world_bench, tmp_path / "llava")
    records = json.loads((out / "llava.json").read_text(encoding="utf-8"))
    for rec in records:
        _llava_asserts(rec["conversations"])
        tokens = _human_tokens(rec)
        if "image" not in rec:
            assert sum(tokens) == 0
            continue
        # LLaVA-1.5's LazySupervisedDataset: Image.open(os.path.join(image_folder, record["image"])), one
        # picture per sample, which its model puts where the one <image> placeholder is.
        assert isinstance(rec["image"], str), rec["id"]
        Image.open(os.path.join(out / "images", rec["image"])).convert("RGB")
        assert tokens[0] == 1 and sum(tokens) == 1, rec["id"]
        assert rec["conversations"][0]["value"].startswith("<image>\n")  # where preprocess_multimodal puts it
    by_id = {r["id"]: r for r in records}
    assert len(by_id) == len(records)
    info = json.loads((out / "export.json").read_text())
    counts = info["counts"]
    assert info["format"] == "llava" and counts["records"] == len(records)
    for d in Dataset(world_bench):
        whole = conversation(d, d.turns, rid=d.id)
        parts = [r for r in records if r["id"].startswith(f"{d.id}#")]
        # Every gpt value of the dialogue is trained on once, in order, with every word said before it.
        gpt = [m["value"] for r in parts for m in r["conversations"] if m["from"] == "gpt"]
        assert gpt == [m["value"] for m in whole.conversations if m["from"] == "gpt"]
        numbers = [int(r["id"].rsplit("#", 1)[1]) for r in parts]
        assert numbers == sorted(numbers) and set(numbers) <= set(range(len(whole.images) + 1))
        for r, n in zip(parts, numbers, strict=True):
            first = r["conversations"][0]["value"]
            if n:
                assert r["image"] == Path(_rel(whole.images[n - 1])).as_posix()
                assert f"[picture {n}" in first and "shown above]" in first
            # Every earlier picture is written as a marker, none silently dropped.
            for k in range(1, n):
                assert f"[picture {k}" in first and "not shown]" in first.split(f"[picture {k}", 1)[1]
            assert (EARLIER in first) == (r is not parts[0])
        # A question is kept only where its conversation has at most one picture (the one it may ask about).
        for q in d.questions:
            qc = conversation(d, d.turns[: q.after_turn + 1], rid="x", question=q)
            assert (f"{d.id}:{q.id}" in by_id) == (len(qc.images) <= 1)
    assert counts["questions"] == counts["questions_left_out"] + sum(":" in r["id"] for r in records)
    assert counts["pictures_shown"] == sum("image" in r for r in records if "#" in r["id"])


def _rel(p: Any) -> str:
    return f"{p.sha256[:2]}/{p.sha256}.png"


def test_one_picture_records_of_a_text_opening_and_two_pictures_in_one_message() -> None:
    a, b = "a" * 64, "b" * 64
    turns = [
        {"index": 0, "user": {"role": "user", "parts": [{"type": "text", "text": "hello"}]},
         "assistant": {"role": "assistant", "parts": [{"type": "text", "text": "hi"}]}},
        {"index": 1, "user": {"role": "user", "parts": [_image(a, "user"), {"type": "text", "text": "and"},
                                                        _image(b, "user")]},
         "assistant": {"role": "assistant", "parts": [{"type": "text", "text": "two pictures"}]}},
    ]  # fmt: skip
    d = Dialogue.model_validate(
        {"id": "x", "family": "weave", "domain": "d", "turns": turns, "meta": {"generator": "t"}}
    )
    parts = one_picture(conversation(d, d.turns, rid="x"))
    assert [p.id for p in parts] == ["x#0", "x#2"]
    assert parts[0].conversations == [{"from": "human", "value": "hello"}, {"from": "gpt", "value": "hi"}]
    assert parts[0].images == []
    assert [p.sha256 for p in parts[1].images] == [b]
    assert parts[1].conversations == [
        {"from": "human", "value": f"<image>\n{EARLIER}\nUser: hello\nAssistant: hi\n\n{NOW}\n"
         "[picture 1, not shown]\nand\n[picture 2, shown above]"},
        {"from": "gpt", "value": "two pictures"},
    ]  # fmt: skip


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


@pytest.fixture(scope="module")
def weave_bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """WEAVE's sample records imported: an edit dialogue whose two steps read alone."""
    from tests.families.samples import write_weave
    from yanami.families.weave.importer import import_weave

    root = tmp_path_factory.mktemp("weave")
    import_weave(write_weave(root / "src"), root / "bench")
    return root / "bench"


def _image_dialogue(steps: list[dict[str, Any]]) -> Dialogue:
    """A user picture, then one assistant picture per step (``text``, ``capabilities``)."""
    turns = []
    for k, step in enumerate(steps):
        user: list[dict[str, Any]] = [_image(f"{k:064x}", "user")] if k == 0 else []
        turns.append({
            "index": k,
            "user": {"role": "user", "parts": [*user, {"type": "text", "text": step["text"]}]},
            "assistant": {"role": "assistant", "parts": [_image(f"{k + 100:064x}", "assistant")]},
            "capabilities": step.get("capabilities", []),
        })  # fmt: skip
    return Dialogue.model_validate(
        {"id": "x", "family": "weave", "domain": "d", "turns": turns, "meta": {"generator": "t"}}
    )


def test_an_edit_step_that_needs_the_dialogue_cuts_its_chain() -> None:
    d = _image_dialogue(
        [
            {"text": "make the sky red"},
            {"text": "paint the first one you suggested purple", "capabilities": ["coreference"]},
            {"text": "add a moon"},
        ]
    )
    e = edit_steps(d)
    assert [row.turns for row in e.rows] == [[0, 0], [1, 2]]
    assert [row.instructions for row in e.rows] == [["make the sky red"], ["add a moon"]]
    assert [(s["turn"], s["row"], s["needs_dialogue"]) for s in e.steps] == [
        (0, 0, []), (1, None, ["capability"]), (2, 1, [])
    ]  # fmt: skip


def test_world_edits_need_their_dialogue_and_the_readme_counts_them(world_bench: Path, tmp_path: Path) -> None:
    out = export_bagel(world_bench, tmp_path / "bagel")
    steps = [json.loads(line) for line in (out / "yanami" / "edit_steps.jsonl").read_text().splitlines()]
    chains = [c for d in Dataset(world_bench) for c in edit_chains(d)[0]]
    assert len(steps) == sum(len(c.instructions) for c in chains) > 0
    # Every judged edit of a world dialogue is built so that its words read alone against the latest
    # picture do something else (world/_compose.py); the warm-up edits are asked about by an RR question.
    for d in Dataset(world_bench):
        for step in (s for s in steps if s["dialogue"] == d.id):
            turn = d.turns[step["turn"]]
            assert step["row"] is None and step["needs_dialogue"], step
            assert ("stateless_reading" in step["needs_dialogue"]) == turn.is_target
    counts = json.loads((out / "export.json").read_text())["counts"]
    assert counts["edit_steps"] == counts["edit_steps_left_out"] == len(steps) and counts["edit_chains"] == 0
    readme = (out / "README.md").read_text()
    assert f"- edit_steps_left_out: {len(steps)}" in readme and "needs the dialogue" in readme
    # Nothing left to register: BAGEL's file listing fails on an empty unified_edit folder.
    assert "unified_edit" not in yaml.safe_load((out / "yanami.yaml").read_text())


def test_bagel_layout_is_what_bagels_loaders_read(weave_bench: Path, tmp_path: Path) -> None:
    out = export_bagel(weave_bench, tmp_path / "bagel")
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


def test_bagel_root_names_where_bagel_will_find_the_files(weave_bench: Path, tmp_path: Path) -> None:
    out = export_bagel(weave_bench, tmp_path / "bagel", root="/data/yanami/")
    (key,) = json.loads((out / "parquet_info" / "yanami_edit.json").read_text())
    assert key == "/data/yanami/unified_edit/yanami_edit/part-00000.parquet"
    assert "'/data/yanami/vlm_sft/images'" in (out / "dataset_info.py").read_text().replace('"', "'")


def _expected_samples(bench: Path) -> list[tuple[str, list[bytes]]]:
    ds = Dataset(bench)
    return [
        (line, [ds.image_bytes(p) for p in dict((p.sha256, p) for p in d.images()).values()])
        for _, _, line, d in ds.records()
    ]


@pytest.mark.parametrize("bench", ["world_bench", "weave_bench"])
def test_webdataset_reads_back_byte_for_byte(bench: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    wds = pytest.importorskip("webdataset")
    source = request.getfixturevalue(bench)
    out = export_webdataset(source, tmp_path / "wds", shard_bytes=100_000)  # several shards for the world bench
    expected = _expected_samples(source)
    urls = sorted(glob.glob(str(out / "shard-*.tar")))
    assert len(urls) > 1 or bench == "weave_bench"
    # WebDataset's own reader groups each dialogue's files into one sample, the same two in each.
    samples = list(wds.WebDataset(urls, shardshuffle=False))
    assert [s["__key__"] for s in samples] == [json.loads(line)["id"] for line, _ in expected]
    for s, (line, images) in zip(samples, expected, strict=True):
        assert set(s) - {"__key__", "__url__", "__local_path__"} == {"dialogue.txt", "pictures.tar"}
        assert s["dialogue.txt"] == line.encode()
        assert read_pictures(s["pictures.tar"]) == images
    assert list(read_webdataset(out)) == expected


@pytest.mark.parametrize("bench", ["world_bench", "weave_bench"])
def test_webdataset_loads_in_hugging_face_datasets(
    bench: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    datasets = pytest.importorskip("datasets")
    source = request.getfixturevalue(bench)
    out = export_webdataset(source, tmp_path / "wds", shard_bytes=100_000)
    # HF's builder takes the first samples' files as the columns and refuses samples whose files differ.
    hf = datasets.load_dataset(
        "webdataset", data_files=sorted(glob.glob(str(out / "shard-*.tar"))), split="train",
        cache_dir=str(tmp_path / "hf"),
    )  # fmt: skip
    expected = _expected_samples(source)
    assert hf.num_rows == len(expected)
    for row, (line, images) in zip(hf, expected, strict=True):
        assert row["dialogue.txt"] == line  # a string, not JSON decoded into columns
        assert read_pictures(row["pictures.tar"]) == images


def test_same_dataset_same_bytes(world_bench: Path, tmp_path: Path) -> None:
    for export in (export_llava, export_llava_next, export_bagel, export_webdataset):
        out = tmp_path / export.__name__
        export(world_bench, out)
        first = snapshot(out)
        export(world_bench, out, overwrite=True)
        assert snapshot(out) == first, export.__name__


@pytest.mark.parametrize("fmt", ["llava", "llava-next", "bagel", "webdataset"])
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
