"""OpenING, the family written through the plug-in API alone: its import (a pair of turns per step,
records without their pictures left out), its judge in both modes (yanami's, and OpenING's code:
its prompt, function call, pictures and reading) and its summary (the mean of rounded means)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.families.samples import picture
from tests.families.test_families_eval import _configs
from yanami.contract import read_rows
from yanami.families.opening import CRITERIA
from yanami.families.opening.judge import code_scores
from yanami.families.opening.scores import summary
from yanami.models.fake import FakeServer, chat_images, chat_text, plain_png
from yanami.store import Dataset


def record(uid: str, inputs: list[tuple[str, str | None]], outputs: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "total_uid": uid, "meta_task_id": "3", "meta_task_name": "Multimodal Content Completion", "subtask_id": "1",
        "subtask_name": "Storybook Completion", "data_id": uid[-2:],
        "conversations": [{"input": [{"text": t, "image": i} for t, i in inputs]},
                          {"output": [{"text": t, "image": i} for t, i in outputs]}],
    }  # fmt: skip


def write_opening(root: Path, extra: list[dict[str, Any]] | None = None) -> Path:
    """OpenING-benchmark/ with two complete records (one of two input pictures and three steps,
    one text-only input of one step) and one whose pictures are missing."""
    folder = root / "OpenING-benchmark"
    for name, colour in (("96-i-1", "navy"), ("96-i-2", "teal"), ("96-o-1", "red"), ("96-o-2", "gold"),
                         ("96-o-3", "plum"), ("10-o-1", "olive")):  # fmt: skip
        picture(folder / "images" / "Storybook Completion" / f"{name}.jpg", colour, "JPEG")
    at = "./images/Storybook Completion/"
    records = [
        record("0301096", [("Please continue the story. <BEGIN> George looked up. <image>", f"{at}96-i-1.jpg"),
                           ("He heard a sound. <image>", f"{at}96-i-2.jpg")],
               [("He found a bird. <image>", f"{at}96-o-1.jpg"), ("He helped it. <image>", f"{at}96-o-2.jpg"),
                ("It flew home. <image>", f"{at}96-o-3.jpg")]),
        record("0301010", [("<BEGIN> Show a gradient chart.", None)], [("Here it is. <image>", f"{at}10-o-1.jpg")]),
        record("0301011", [("<BEGIN> Draw a cat.", None)], [("A cat. <image>", f"{at}missing.jpg")]),
        *(extra or []),
    ]  # fmt: skip
    (folder / "test_data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def source_checkout(root: Path) -> Path:
    """A stand-in for a checkout of LanceZPF/OpenING: its system prompt file, and a GPT_score_A.py
    whose get_gpt4answer assigns the function it sends (written here, in the code's layout)."""
    (root / "prompts").mkdir(parents=True)
    (root / "prompts" / "detailed_score_system.txt").write_text("SYSTEM: grade the interleaved output.")
    props = {c: {"type": "object", "properties": {"Score": {"type": "integer"}, "Justification": {"type": "string"}},
                 "required": ["Score", "Justification"]} for c in CRITERIA}  # fmt: skip
    function = {"name": "evaluate_multimodal_content", "description": "grade it",
                "parameters": {"type": "object", "properties": props, "required": list(CRITERIA)}}  # fmt: skip
    (root / "GPT_score_A.py").write_text(
        "import json\n\ndef get_gpt4answer(a, b, c, d):\n"
        f"    functions = [\n        {json.dumps(function)}\n    ]\n    return functions\n"
    )
    return root


def reply(*scores: int | None) -> dict[str, Any]:
    return {c: {"Score": s, "Justification": "because"} for c, s in zip(CRITERIA, scores, strict=True)}


def rgba_png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGBA", (40, 40), (0, 200, 0, 128)).save(buf, format="PNG")
    return buf.getvalue()


def model_brain(path: str, body: dict[str, Any]) -> Any:
    if "/images/" in path:
        last = str(body.get("prompt", "")).rstrip().endswith("Step 2 of 3: draw its picture.")
        return rgba_png() if last else plain_png(colour=(9, 99, 199))
    text = chat_text(body)
    return "" if text.rstrip().endswith("Step 2 of 3: write its text.") else f"My step. <image> ({text.count('Step')})"


def test_import_makes_a_pair_of_turns_per_step_and_leaves_out_records_without_pictures(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    r = cli("import", "opening", write_opening(tmp_path), "--out", tmp_path / "bench")
    assert r.code == 0, r.err
    assert "2 dialogues, 6 images (opening, protocol opening-1)" in r.out
    assert "warning: 1 record(s) left out: some of their pictures are not under" in r.err and "0301011" in r.err
    assert cli("validate", tmp_path / "bench").code == 0
    ds = Dataset(tmp_path / "bench")
    assert ds.manifest.generator.params["skipped"] == {"records": 1, "first": ["0301011"]}
    d = next(d for d in ds if d.id == "opening-0301096")
    assert d.domain == "Storybook Completion" and d.meta.params["class"] == "Multimodal Content Completion"
    assert len(d.turns) == 6 and [bool(t.checks) for t in d.turns] == [False, True] * 3
    assert [t.answer.text for t in d.turns[::2] if t.answer] == ["He found a bird.", "He helped it.", "It flew home."]
    first = d.turns[0].user.parts
    assert [p.type for p in first] == ["text", "image", "text", "image", "text"]
    assert first[0].text == "Please continue the story.  George looked up."  # type: ignore[union-attr]
    assert first[-1].text == "Answer in 3 steps, each a text followed by a picture. Step 1 of 3: write its text."  # type: ignore[union-attr]
    assert [c.kind for c in d.turns[-1].checks] == ["criterion"] * 7 and d.turns[1].checks[0].kind == "step"
    assert d.meta.params["input"][0] == {"text": "Please continue the story. <BEGIN> George looked up. <image>",
                                         "image": True}  # fmt: skip


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("{not json", "test_data.jsonl:4: not a JSON record"),
        (json.dumps(record("x1", [("a", "../../etc/passwd")], [("b", "./images/a.jpg")])),
         "conversations[0].input[0].image: '../../etc/passwd': a picture's path must stay inside"),
        (json.dumps(record("x2", [("a", "/etc/passwd")], [("b", "./images/a.jpg")])), "must stay inside"),
        (json.dumps(record("x3", [("a", None)], [("b", "./im\u0000ages/a.jpg")])), "a NUL byte at position 4"),
        (json.dumps(record("x4", [("a", None)], [("b", "./images/\ud800.jpg")])).replace("\\\\", "\\"),
         "a lone surrogate"),
        (json.dumps({**record("x5", [("a", None)], [("b", "./i.jpg")]), "conversations": [{"input": []}]}),
         "conversations: expected [{input: [...]}, {output: [...]}]"),
        (json.dumps(record("x6", [("a", None)], [("b", None)])),  # type: ignore[list-item]
         "conversations[1].output[0].image: every step of OpenING's reference output has a picture"),
        (json.dumps(record("x 7", [("a", None)], [("b", "./i.jpg")])), "total_uid: 'x 7' is not a plain name"),
        (json.dumps(record("0301096", [("a", None)], [("b", "./i.jpg")])), "total_uid: '0301096' is another"),
    ],
)  # fmt: skip
def test_a_bad_record_is_one_line_naming_its_line_and_field(
    tmp_path: Path, cli: Callable[..., Any], line: str, said: str
) -> None:
    folder = write_opening(tmp_path)
    with (folder / "test_data.jsonl").open("a") as f:
        f.write(line + "\n")
    r = cli("import", "opening", folder, "--out", tmp_path / "bench")
    assert r.code == 2 and said in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert "Traceback" not in r.err and not (tmp_path / "bench").exists()


def test_a_source_with_no_complete_record_is_one_line(tmp_path: Path, cli: Callable[..., Any]) -> None:
    folder = tmp_path / "OpenING-benchmark"
    folder.mkdir()
    (folder / "test_data.jsonl").write_text(json.dumps(record("1", [("a", None)], [("b", "./images/x.jpg")])) + "\n")
    r = cli("import", "opening", folder, "--out", tmp_path / "bench")
    assert r.code == 2 and "none of its 1 record(s) has all its pictures" in r.err
    assert not (tmp_path / "bench").exists()


def test_eval_asks_each_step_in_turn_and_judges_the_whole_answer_once(tmp_path: Path, cli: Callable[..., Any]) -> None:
    assert cli("import", "opening", write_opening(tmp_path), "--out", tmp_path / "bench").code == 0
    replies = iter([reply(8, 7, 6, 5, 4, 3, 2), reply(5, 5, 5, 5, 5, 5, 5)])

    def judge_brain(path: str, body: dict[str, Any]) -> Any:
        return json.dumps(next(replies))

    with FakeServer(brain=model_brain) as msrv, FakeServer(brain=judge_brain) as jsrv:
        model, judge = _configs(tmp_path, msrv, jsrv)
        r = cli("eval", tmp_path / "bench", "--model", model, "--out", tmp_path / "none")
        assert r.code == 2 and "an OpenING bench is graded by a VLM judge: --judge FILE" in r.err
        r = cli("eval", tmp_path / "bench", "--model", model, "--judge", judge, "--out", tmp_path / "run")
        assert r.code == 0, r.err
        asked = [chat_text(b) for p, b in msrv.requests if "/chat/" in p]
        bodies = [b for _, b in jsrv.requests]
    assert "OpenING: scores by criterion (0-10)" in r.out and "| run | 5.00 |" in r.out
    assert sum("Step 3 of 3: write its text." in a for a in asked) == 1  # the third step's text, asked once
    assert any("My step." in a and "Step 3 of 3" in a for a in asked)  # it sees its own earlier steps
    assert len(bodies) == 2  # one call a record, at its last picture
    three = next(b for b in bodies if "George" in chat_text(b))
    user = three["messages"][1]["content"]
    texts = [p["text"] for p in user if p["type"] == "text"]
    assert texts[0] == "INPUT: Please continue the story.  George looked up.  <IMG_0></IMG_0>"
    assert texts[2] == "\nOUTPUT: My step.  (1) <IMG_2></IMG_2>"  # the model's text, its mark taken out
    assert texts[3] == " <IMG_3></IMG_3>" and texts[-1] == "\nPlease only output the json result: "
    assert len(chat_images(three)) == 5 and three["temperature"] == 0.0 and "functions" not in three
    data = json.loads(cli("score", tmp_path / "run", "--json").out)
    (run,) = data["runs"]
    assert run["criteria"] == dict(zip(CRITERIA, [6.5, 6.0, 5.5, 5.0, 4.5, 4.0, 3.5], strict=True))
    assert run["scored"] == 2 and run["records"] == 2 and run["prompts"] == "yanami"
    assert run["overall"] == 5.0  # (the mean of 6.5, 6, 5.5, 5, 4.5, 4, 3.5)
    assert cli("report", tmp_path / "run", "--out", tmp_path / "r.html").code == 0
    assert "OpenING: Overall by meta-task" in (tmp_path / "r.html").read_text()


def test_with_the_benchmarks_code_the_call_the_pictures_and_the_reading_are_its_own(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    assert cli("import", "opening", write_opening(tmp_path), "--out", tmp_path / "bench").code == 0
    checkout = source_checkout(tmp_path / "OpenING")
    replies = iter([{"scores": reply(9, 9, 9, 9, 9, 9, 9)}, reply(10, 9, 8, 7, 6, 5, 4)])

    def judge_brain(path: str, body: dict[str, Any]) -> Any:
        return json.dumps(next(replies))

    with FakeServer(brain=model_brain) as msrv, FakeServer(brain=judge_brain) as jsrv:
        model, judge = _configs(tmp_path, msrv, jsrv)
        r = cli("eval", tmp_path / "bench", "--model", model, "--judge", judge, "--protocol-source", checkout,
                "--out", tmp_path / "run")  # fmt: skip
        assert r.code == 0, r.err
        bodies = [b for _, b in jsrv.requests]
    for body in bodies:
        assert body["function_call"] == {"name": "evaluate_multimodal_content"} and len(body["functions"]) == 1
        assert not {"temperature", "max_tokens", "seed", "response_format"} & set(body)
        assert body["messages"][0] == {"role": "system", "content": "SYSTEM: grade the interleaved output."}
        urls = [p["image_url"]["url"] for p in body["messages"][1]["content"] if p["type"] == "image_url"]
        assert all(u.startswith("data:image/jpeg;base64,") for u in urls)
        for data in chat_images(body):
            with Image.open(io.BytesIO(data)) as img:
                assert (img.format, img.size) == ("JPEG", (512, 512))
    three = next(b for b in bodies if "George" in chat_text(b))
    texts = [p["text"] for p in three["messages"][1]["content"] if p["type"] == "text"]
    # the RGBA picture of step 2 cannot be saved as JPEG: the code leaves it out, and its mark
    assert texts[2:5] == ["\nOUTPUT: My step.  (1) <IMG_2></IMG_2>", "", "My step.  (5) <IMG_3></IMG_3>"]
    assert len(chat_images(three)) == 4
    rows = read_rows(tmp_path / "run")
    graded = {k: v for k, v in rows.verdicts.items() if not v.reason.startswith("graded with the whole answer")}
    assert sorted(bool(v.scores) for v in graded.values()) == [False, True]
    dropped = next(v for v in graded.values() if not v.scores)
    assert dropped.reason.startswith("not scored by the benchmark's code: the reply wraps its criteria in")
    assert "-source-" in dropped.judge_version
    data = json.loads(cli("score", tmp_path / "run", "--json").out)
    (run,) = data["runs"]
    assert run["scored"] == 1 and run["overall"] == 7.0 and run["prompts"] == "opening"
    assert list(run["not_scored"].values()) == [1]


def test_a_checkout_without_the_function_is_one_line(tmp_path: Path, cli: Callable[..., Any]) -> None:
    assert cli("import", "opening", write_opening(tmp_path), "--out", tmp_path / "bench").code == 0
    checkout = source_checkout(tmp_path / "OpenING")
    (checkout / "GPT_score_A.py").write_text("def get_gpt4answer():\n    return 1\n")
    with FakeServer() as srv:
        model, judge = _configs(tmp_path, srv, srv)
        r = cli("eval", tmp_path / "bench", "--model", model, "--judge", judge, "--protocol-source", checkout,
                "--out", tmp_path / "run")  # fmt: skip
    assert r.code == 2 and "get_gpt4answer assigns no `functions` list of one function" in r.err


def test_the_code_drops_a_wrapped_or_null_reply_and_counts_only_numbers() -> None:
    assert code_scores(reply(1, 2, 3, 4, 5, 6, 7)) == dict(zip(CRITERIA, map(float, range(1, 8)), strict=True))
    assert "wraps its criteria" in str(code_scores({"scores": reply(1, 2, 3, 4, 5, 6, 7)}))
    assert "Score is null" in str(code_scores(reply(1, 2, None, 4, 5, 6, 7)))
    loose = {**reply(1, 2, 3, 4, 5, 6, 7), "Completeness": {"Score": "8"}}
    assert "Completeness" not in code_scores(loose)  # type: ignore[operator]
    assert "no object" in str(code_scores([1, 2]))


def test_overall_is_the_mean_of_the_rounded_means() -> None:
    s = summary([{"a": 7.0, "b": 10.0}, {"a": 10.0, "b": 5.0}, {"a": 8.0, "b": 9.0}])
    assert s == {"a": 8.33, "b": 8.0, "Overall": 8.16}  # the unrounded means give 8.17
    assert summary([]) == {}


def test_a_reply_that_does_not_read_is_asked_again_past_the_cache_and_again_by_the_next_run(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    """OpenING's code repeats a request until its reply reads as JSON: yanami asks again (up to 5
    times, past the response cache), and a run that gave up asks again when run again."""
    assert cli("import", "opening", write_opening(tmp_path), "--out", tmp_path / "bench").code == 0
    checkout = source_checkout(tmp_path / "OpenING")
    script = ["not json", "{}", json.dumps(reply(6, 6, 6, 6, 6, 6, 6))] + ["still not json"] * 5

    def judge_brain(path: str, body: dict[str, Any]) -> Any:
        return script.pop(0) if script else json.dumps(reply(4, 4, 4, 4, 4, 4, 4))

    with FakeServer(brain=model_brain) as msrv, FakeServer(brain=judge_brain) as jsrv:
        model, judge = _configs(tmp_path, msrv, jsrv)
        args = ("eval", tmp_path / "bench", "--model", model, "--judge", judge, "--protocol-source", checkout,
                "--out", tmp_path / "run", "--concurrency", "1")  # fmt: skip
        r = cli(*args)
        assert r.code == 0 and "the judge could not grade 1 item(s)" in r.err, r.err
        assert "no reply of 5 read as JSON (the last: " in r.err
        assert len(jsrv.requests) == 3 + 5  # the first record read at its third ask; the second never
        r = cli(*args)  # the next run: the cached bad reply, then the server again
        assert r.code == 0, r.err
        assert len(jsrv.requests) == 3 + 5 + 1
    runs = json.loads(cli("score", tmp_path / "run", "--json").out)["runs"]
    assert runs[0]["scored"] == 2 and runs[0]["judge_errors"] == 0
    assert sorted(runs[0]["criteria"].values()) == [5.0] * 7  # (6 and 4)
