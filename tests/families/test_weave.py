from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.families.samples import picture, weave_records, write_weave
from yanami.contract import ImagePart, TextPart, TurnRef
from yanami.families.weave.importer import import_weave
from yanami.store import Dataset, dataset_stats, export_parquet, validate_dataset


def test_weave_records_become_a_valid_weave_dataset(tmp_path: Path, cli: Callable[..., Any]) -> None:
    src = write_weave(tmp_path / "weave")
    r = cli("import", "weave", src, "--out", tmp_path / "ds")
    assert r.code == 0, r.err
    assert "2 dialogues, 4 images (weave, protocol weave-2)" in r.out
    assert validate_dataset(tmp_path / "ds") == []
    ds = Dataset(tmp_path / "ds")
    assert (ds.manifest.family, ds.manifest.split) == ("weave", "bench")
    edit, story = list(ds)
    assert (edit.id, edit.domain, edit.scenario, edit.family) == ("weave-7", "edit", None, "weave")

    # Image #1 is first mentioned by the user: attached there, after its label
    first = edit.turns[0]
    assert [type(p).__name__ for p in first.user.parts] == ["TextPart", "ImagePart", "TextPart"]
    assert first.user.parts[0] == TextPart(text="Image #1:")
    assert first.user.text().endswith("Edit Image #1: make the sky red.")
    out0 = first.assistant.images()[0]
    assert first.assistant.parts[0] == TextPart(text="Image #2:") and out0.source == "assistant"
    assert [c.kind for c in first.checks] == ["key_point", "key_point"]
    assert first.checks[0].references == [TurnRef(turn=0, side="user", image=0, of="data")]  # GT #1
    assert first.checks[1].references == [] and first.checks[1].text == "The sky is red."  # Text

    # Image #2 was the reply of turn 0: not attached again; "Image #2" in a key point is the model's own
    second = edit.turns[1]
    assert second.user.images() == []
    assert second.checks[0].references == [TurnRef(turn=0, side="assistant", image=0, of="model")]
    assert second.checks[1].references == [TurnRef(turn=1, side="assistant", image=0, of="data")]  # GT #3
    assert second.assistant.images()[0].format == "jpeg"

    third = edit.turns[2]
    assert third.checks == [] and third.answer is not None and third.answer.text == "Image #3 has the moon."
    assert [t.hidden.intent for t in edit.turns] == [{"mode": "edit"}, {"mode": "edit"}, {"mode": "vqa"}]
    assert story.turns[0].hidden.intent == {"mode": "t2i"} and story.turns[0].user.images() == []
    assert all(t.is_target for t in edit.turns)

    s = dataset_stats(ds)
    assert s.families == {"weave": 2} and s.key_points == 5 and s.answered_turns == 1
    assert set(s.by_scenario) == {"edit", "story"} and s.by_scenario["edit"].graded_checks == 4
    assert cli("stats", tmp_path / "ds").code == 0

    # export and back, byte for byte
    export_parquet(tmp_path / "ds", tmp_path / "pq")
    assert cli("import", tmp_path / "pq", "--out", tmp_path / "back").code == 0
    assert (tmp_path / "back" / "manifest.json").read_bytes() == (tmp_path / "ds" / "manifest.json").read_bytes()


def test_a_repeated_image_file_is_stored_once(tmp_path: Path) -> None:
    records = weave_records()
    records[1]["images"] = ["imgs/street.png"]  # the same file as record 0's Image #1
    src = write_weave(tmp_path / "weave", records)
    m = import_weave(src / "test.json", tmp_path / "ds")
    assert m.counts.images == 3
    (part,) = [p for p in next(iter(reversed(list(Dataset(tmp_path / "ds"))))).images() if isinstance(p, ImagePart)]
    assert part.source == "assistant"


def _edit(change: Callable[[list[dict[str, Any]]], Any]) -> list[dict[str, Any]]:
    records = weave_records()
    change(records)
    return records


BAD = [
    ("missing image", lambda r: r[0]["images"].__setitem__(0, "imgs/nowhere.png"),
     "record 0 (idx 7): images[0]: imgs/nowhere.png: no such image file"),
    ("not alternating", lambda r: r[0]["chats"].__setitem__(1, {**r[0]["chats"][0]}),
     "record 0 (idx 7): chats[1].role: expected 'assistant' (chats alternate user, assistant), got 'user'"),
    ("odd length", lambda r: r[1]["chats"].pop(),
     "record 1 (idx 8): chats[0]: a user chat with no assistant reply"),
    ("beyond the list", lambda r: r[0]["chats"][2].__setitem__("content", "Add a moon to Image #9."),
     "record 0 (idx 7): chats[2].content: Image #9 is beyond the record's 3 images"),
    ("unknown type", lambda r: r[0]["chats"][1].__setitem__("type", "video"),
     "record 0 (idx 7): chats[1].type: unknown type 'video' for an assistant chat (text or image)"),
    ("later turn", lambda r: r[0]["chats"][0].__setitem__("content", "Edit Image #1 like Image #3."),
     "record 0 (idx 7): chats[0].content: Image #3 is the reply of a later turn (1)"),
    ("unknown domain", lambda r: r[1].__setitem__("domain", "poetry"),
     "record 1 (idx 8): domain: 'poetry' is not a WEAVE domain"),
    ("bad key", lambda r: r[1]["chats"][1].__setitem__("key_point", {"GT 1": "x"}),
     "record 1 (idx 8): chats[1].key_point.GT 1: a key that names GT or Image names it as GT #k or Image #k"),
    ("corrupt image", None, "record 0 (idx 7): images[0]: imgs/street.png: "),
    # hostile text where a path or a number is read: one line, never ValueError or UnicodeEncodeError
    ("a NUL byte in a path", lambda r: r[0]["images"].__setitem__(0, "imgs/st\0reet.png"),
     "record 0 (idx 7): images[0]: 'imgs/st\\x00reet.png' is not a path: it holds a NUL byte at position 7"),
    ("a lone surrogate in a path", lambda r: r[1]["images"].__setitem__(0, "imgs/\ud800.png"),
     "record 1 (idx 8): images[0]: 'imgs/\\ud800.png' is not a path: it holds a lone surrogate '\\ud800'"),
    ("a NUL byte in a path no chat shows", lambda r: r[1]["images"].append("imgs/\0.png"),
     "record 1 (idx 8): images[1]: 'imgs/\\x00.png' is not a path: it holds a NUL byte"),
    ("a lone surrogate in a path no chat shows", lambda r: r[1]["images"].append("imgs/\udfff"),
     "record 1 (idx 8): images[1]: 'imgs/\\udfff' is not a path: it holds a lone surrogate"),
    ("an image number of 5,000 digits", lambda r: r[1]["chats"][0].__setitem__("content", "Draw Image #" + "7" * 5000),
     "record 1 (idx 8): chats[0].content: Image #777777777777... is a number of 5,000 digits, beyond every record's"),
    ("a reply's image number of 5,000 digits",
     lambda r: r[1]["chats"][1].__setitem__("content", "Image #" + "1" * 5000),
     "record 1 (idx 8): chats[1].content: Image #111111111111... is a number of 5,000 digits"),
    ("a key's Image number of 5,000 digits",
     lambda r: r[1]["chats"][1].__setitem__("key_point", {"Image #" + "2" * 5000: "x"}),
     f"record 1 (idx 8): chats[1].key_point.Image #{'2' * 33}...: Image #{'2' * 12}... is a number of 5,000 digits"),
    ("a key's GT number of 5,000 digits",
     lambda r: r[1]["chats"][1].__setitem__("key_point", {"GT #" + "3" * 5000: "x"}),
     f"record 1 (idx 8): chats[1].key_point.GT #{'3' * 36}...: GT #{'3' * 12}... is a number of 5,000 digits"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "change", "expected"), BAD, ids=[b[0] for b in BAD])
def test_bad_records_are_one_line_and_nothing_is_written(
    tmp_path: Path, cli: Callable[..., Any], case: str, change: Any, expected: str
) -> None:
    src = write_weave(tmp_path / "weave", _edit(change) if change else None)
    if case == "corrupt image":
        data = (src / "imgs" / "street.png").read_bytes()
        (src / "imgs" / "street.png").write_bytes(data[: len(data) // 2])
    r = cli("import", "weave", src, "--out", tmp_path / "ds")
    assert r.code == 2
    assert f"{src / 'test.json'}: {expected}" in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
    assert not (tmp_path / "ds").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["weave"]


def test_a_json_number_of_5000_digits_is_one_line(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """A number of more digits than Python converts (4,300), as an image number or anywhere else in
    test.json, is refused by the parser: one line naming the file, nothing written."""
    src = write_weave(tmp_path / "weave")
    for where in ('"idx": 7', '"role": "user"'):
        text = (src / "test.json").read_text().replace(where, where + ', "n": ' + "9" * 5000, 1)
        (src / "test.json").write_text(text)
        r = cli("import", "weave", src, "--out", tmp_path / "ds")
        assert r.code == 2 and f"{src / 'test.json'}: not a WEAVE file: not readable JSON (Exceeds the limit" in r.err
        assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
        assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize("path", ["imgs/\0.png", "imgs/\ud800.png", ["imgs/cat.png"], {"path": "imgs/cat.png"}],
                         ids=["NUL", "lone surrogate", "a list", "an object"])  # fmt: skip
def test_a_path_that_is_no_path_is_one_line_with_worker_processes(tmp_path: Path, path: Any) -> None:
    """With worker processes (reading the files of the records ahead), a record's path that names no
    file (a NUL byte, a lone surrogate) or is not text at all is still its record's one-line error."""
    from yanami.contract import UserError
    from yanami.families._import import PARALLEL_FROM

    story = weave_records()[1]
    records = [{**story, "idx": k} for k in range(PARALLEL_FROM + 8)]
    records[PARALLEL_FROM] = {**story, "idx": 99, "images": ["imgs/cat.png", path]}
    src = write_weave(tmp_path / "weave", records)
    with pytest.raises(UserError, match=rf"record {PARALLEL_FROM} \(idx 99\): images\[1\]: "):
        import_weave(src, tmp_path / "ds", workers=2)
    assert not (tmp_path / "ds").exists()


def test_not_json_names_the_line(tmp_path: Path, cli: Callable[..., Any]) -> None:
    src = write_weave(tmp_path / "weave")
    (src / "test.json").write_text('[{"domain": "edit",\n  "idx": }]')
    r = cli("import", "weave", src, "--out", tmp_path / "ds")
    assert r.code == 2 and f"{src / 'test.json'}: line 2 column 10: not JSON" in r.err


def test_an_image_path_may_not_leave_the_source(tmp_path: Path, cli: Callable[..., Any]) -> None:
    src = write_weave(tmp_path / "weave", _edit(lambda r: r[1].__setitem__("images", ["../secret.png"])))
    (tmp_path / "secret.png").write_bytes((src / "imgs" / "cat.png").read_bytes())
    r = cli("import", "weave", src, "--out", tmp_path / "ds")
    assert r.code == 2 and "images[0]: '../secret.png' leaves" in r.err


def test_import_of_an_unknown_kind_is_refused(tmp_path: Path, cli: Callable[..., Any]) -> None:
    r = cli("import", "vqav2", tmp_path, "--out", tmp_path / "ds")
    assert r.code == 2 and "'vqav2': not a kind of source (parquet, imug, opening, weave)" in r.err


def test_image_files_are_linked_unless_copy_is_asked(tmp_path: Path, cli: Callable[..., Any]) -> None:
    src = write_weave(tmp_path / "weave")
    cat = (src / "imgs" / "cat.png").stat().st_ino

    def inodes(ds: Path) -> set[int]:
        return {p.stat().st_ino for p in (ds / "images").rglob("*.png")}

    assert cli("import", "weave", src, "--out", tmp_path / "linked").code == 0
    assert cat in inodes(tmp_path / "linked")  # one file system here: a hard link, no bytes copied
    assert cli("import", "weave", src, "--out", tmp_path / "copied", "--copy").code == 0
    assert cat not in inodes(tmp_path / "copied")
    assert validate_dataset(tmp_path / "copied") == [] and validate_dataset(tmp_path / "linked") == []


def test_a_linked_file_that_leads_outside_is_refused(tmp_path: Path, cli: Callable[..., Any]) -> None:
    src = write_weave(tmp_path / "weave", _edit(lambda r: r[1].__setitem__("images", ["imgs/link.png"])))
    (tmp_path / "secret.png").write_bytes((src / "imgs" / "cat.png").read_bytes())
    (src / "imgs" / "link.png").symlink_to(tmp_path / "secret.png")
    r = cli("import", "weave", src, "--out", tmp_path / "ds")
    assert r.code == 2 and "images[0]: 'imgs/link.png' leaves" in r.err and not (tmp_path / "ds").exists()


def test_worker_processes_give_the_same_dataset_byte_for_byte(tmp_path: Path) -> None:
    from yanami.families._import import PARALLEL_FROM

    one, story = weave_records()
    records = [{**one, "idx": k} for k in range(PARALLEL_FROM // 2)] + [
        {**story, "idx": 1000 + k} for k in range(PARALLEL_FROM // 2)
    ]
    records[0] = {**records[0], "images": [*records[0]["images"], "imgs/unused.png"]}  # listed, never shown
    records[0]["chats"] = [*records[0]["chats"][:-1], {**records[0]["chats"][-1], "content": "Not Image #4."}]
    src = write_weave(tmp_path / "weave", records)
    picture(src / "imgs" / "unused.png", "purple")
    import_weave(src, tmp_path / "serial", workers=0)
    import_weave(src, tmp_path / "parallel", workers=2)  # PARALLEL_FROM records: worker processes
    for name in ("manifest.json", "dialogues/00000.jsonl"):
        assert (tmp_path / "serial" / name).read_bytes() == (tmp_path / "parallel" / name).read_bytes()
    assert validate_dataset(tmp_path / "parallel") == []


def test_keys_are_read_as_weaves_evaluator_reads_them(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """ "GT" anywhere in a key makes it the dataset's picture GT #k, even after an "Image #k"; a key
    naming neither has no picture (WEAVE's evaluator skips it); a listed picture no chat shows is
    named by the import, not dropped without a word."""
    records = weave_records()
    records[0]["chats"][3]["key_point"] = {"Image #2, GT #1": "Compared to <image>, the street is kept.",
                                           "Style": "Night colours."}  # fmt: skip
    records[1]["images"].append("imgs/street.png")  # listed, never shown
    src = write_weave(tmp_path / "weave", records)
    r = cli("import", "weave", src, "--out", tmp_path / "ds")
    assert r.code == 0, r.err
    assert "warning: 1 listed picture(s) in 1 record(s) are shown by no chat and were not imported" in r.err
    assert "record 1, idx 8: imgs/street.png" in r.err
    ds = Dataset(tmp_path / "ds")
    assert ds.manifest.generator.params["unshown"] == [{"record": 1, "idx": 8, "images": ["imgs/street.png"]}]
    second = next(iter(ds)).turns[1]
    assert second.checks[0].references == [TurnRef(turn=0, side="user", image=0, of="data")]  # GT #1, not Image #2
    assert second.checks[1].references == []
