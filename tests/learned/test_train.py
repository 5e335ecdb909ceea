"""The learned model: what it reads, that training lowers the loss, checkpoints that round-trip and
resume to the same bytes, and a checkpoint evaluated by `yanami eval` like any model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from yanami.contract import InputImage, Layout, UserError
from yanami.learned._features import OBJECT, PICTURE, SLOT, encode, single_turn
from yanami.learned._net import Net, NetConfig
from yanami.learned._train import (
    MODEL_FILE,
    RESUME_FILE,
    TrainSettings,
    attribute_words,
    collate,
    examples_of,
    load_net,
    losses,
    parse_all,
    train,
    vocabulary_of,
)
from yanami.runner._items import build_request, items_of
from yanami.store import Dataset
from yanami.world import build_world

SMALL = {"width": 32, "layers": 1, "batch": 4, "log_every": 2, "save_every": 2}


@pytest.fixture(scope="module")
def train_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("learned") / "train"
    build_world(out, preset="train", dialogues=12, seed=11)
    return out


@pytest.fixture(scope="module")
def read(train_set: Path) -> tuple[Dataset, list, dict, dict]:  # type: ignore[type-arg]
    ds = Dataset(train_set)
    dialogues = list(ds)
    parsed = parse_all(ds, dialogues, 1, lambda done, total: None)
    vocabulary = {w: k for k, w in enumerate(vocabulary_of(dialogues))}
    return ds, dialogues, parsed, vocabulary


def test_a_request_is_read_as_words_and_parsed_objects_and_the_control_keeps_the_latest_picture(read) -> None:  # type: ignore[no-untyped-def]
    _, dialogues, parsed, vocabulary = read
    d = next(d for d in dialogues if len([i for i in items_of(d) if i.kind == "turn"]) >= 2)
    item = [i for i in items_of(d) if i.kind == "turn"][-1]
    request = build_request(d, item, Layout.YES_FIRST, lambda t, s, j, p: InputImage(b"", p.sha256, p.width, p.height))
    enc = encode(request, vocabulary, lambda im: parsed[im.sha256], generate=True)
    shown = request.images()
    assert int((enc.kind == PICTURE).sum()) == len(shown)
    assert int((enc.kind == OBJECT).sum()) == sum(len(parsed[im.sha256][1]) for im in shown)
    assert int((enc.kind == SLOT).sum()) == 6 and enc.kind[-1] == SLOT
    # the control: one user message, the latest picture and the current instruction only
    cut = single_turn(request)
    assert len(cut.messages) == 1 and cut.images() == [shown[-1]]
    assert cut.messages[0].parts[1:] == request.messages[-1].parts
    # a question's options are marked on the letters that open their lines
    q_item = next(i for i in items_of(d) if i.kind == "question")
    q_request = build_request(
        d, q_item, Layout.YES_FIRST, lambda t, s, j, p: InputImage(b"", p.sha256, p.width, p.height)
    )
    q_enc = encode(q_request, vocabulary, lambda im: parsed[im.sha256], generate=False)
    q = next(q for q in d.questions if q.id == q_item.question)
    assert len(q_enc.option_groups()) == len(q.choices) and all(q_enc.option_groups())


def test_the_target_keeps_the_objects_of_the_latest_picture_that_stay(read) -> None:  # type: ignore[no-untyped-def]
    _, dialogues, parsed, vocabulary = read
    examples = [e for d in dialogues for e in examples_of(d, vocabulary, parsed, "stateful") if e.target is not None]
    assert examples
    for e in examples:
        t = e.target
        assert t is not None
        assert len(t.rows) == int(t.keep.sum() + t.slot_used.sum())
    # most target objects were already shown (an edit keeps most of a scene)
    kept = sum(float(e.target.keep.sum()) for e in examples)  # type: ignore[union-attr]
    added = sum(float(e.target.slot_used.sum()) for e in examples)  # type: ignore[union-attr]
    assert kept > 3 * added


def test_a_few_steps_reduce_the_loss(read) -> None:  # type: ignore[no-untyped-def]
    _, dialogues, parsed, vocabulary = read
    examples = [e for d in dialogues for e in examples_of(d, vocabulary, parsed, "stateful")][:24]
    torch.manual_seed(0)
    net = Net(
        NetConfig(len(vocabulary), width=32, layers=1, feedforward=64, attribute_words=attribute_words(vocabulary))
    )
    batch = collate(examples)
    with torch.no_grad():
        before = float(losses(net, batch)[0])
    optimizer = torch.optim.AdamW(net.parameters(), lr=3e-3)
    for _ in range(30):
        loss, _ = losses(net, batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        after = float(losses(net, batch)[0])
    assert after < 0.7 * before, (before, after)


def test_the_same_seed_gives_the_same_checkpoint_and_it_round_trips(train_set: Path, tmp_path: Path, read) -> None:  # type: ignore[no-untyped-def]
    _, dialogues, parsed, vocabulary = read
    settings = TrainSettings(steps=4, seed=3, **SMALL)  # type: ignore[arg-type]
    config = train(train_set, tmp_path / "a", settings, parsed=parsed)
    train(train_set, tmp_path / "b", settings, parsed=parsed)
    assert (tmp_path / "a" / MODEL_FILE).read_bytes() == (tmp_path / "b" / MODEL_FILE).read_bytes()
    assert not (tmp_path / "a" / RESUME_FILE).exists()  # finished: nothing left to resume
    assert [p["step"] for p in config["curve"]] == [2, 4]
    other = train(train_set, tmp_path / "c", TrainSettings(steps=4, seed=4, **SMALL), parsed=parsed)  # type: ignore[arg-type]
    assert other["curve"] != config["curve"]
    # loaded back, the network predicts exactly what the trained one did
    net, loaded = load_net(tmp_path / "a")
    assert loaded["vocabulary"] == config["vocabulary"]
    batch = collate([e for d in dialogues[:2] for e in examples_of(d, vocabulary, parsed, "stateful")])
    again, _ = load_net(tmp_path / "a")
    with torch.no_grad():
        first, second = net(batch), again(batch)
    assert torch.equal(first["answer"], second["answer"]) and torch.equal(first["xy"], second["xy"])


def test_an_interrupted_training_resumes_to_the_same_bytes(train_set: Path, tmp_path: Path, read) -> None:  # type: ignore[no-untyped-def]
    parsed = read[2]
    settings = TrainSettings(steps=6, seed=5, **SMALL)  # type: ignore[arg-type]
    train(train_set, tmp_path / "whole", settings, parsed=parsed)

    def stop(stage: str, done: int, total: int) -> None:
        if stage == "training" and done == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(train_set, tmp_path / "cut", settings, parsed=parsed, on_stage=stop)
    assert (tmp_path / "cut" / RESUME_FILE).exists()
    assert json.loads((tmp_path / "cut" / "config.json").read_text())["step"] == 4
    train(train_set, tmp_path / "cut", settings, parsed=parsed)
    assert (tmp_path / "cut" / MODEL_FILE).read_bytes() == (tmp_path / "whole" / MODEL_FILE).read_bytes()


def test_a_checkpoint_is_evaluated_like_any_model(train_set: Path, tmp_path: Path, world_bench: Path, cli) -> None:  # type: ignore[no-untyped-def]
    ckpt = tmp_path / "ckpt"
    result = cli("train", train_set, "--out", ckpt, "--steps", "2", "--batch", "4")
    assert result.code == 0, result.err
    assert "2 steps" in result.out
    for history in ("gt", "self"):
        run = tmp_path / f"run-{history}"
        result = cli(
            "eval", world_bench, "--model", f"checkpoint:{ckpt}", "--out", run, "--history", history, "--limit", "4"
        )
        assert result.code == 0, result.err
        result = cli("score", run, "--json")
        assert result.code == 0, result.err
        scores = json.loads(result.out)
        assert f"checkpoint:{ckpt}" in json.dumps(scores)
    # the same checkpoint named in a config file (its path relative to the file)
    (tmp_path / "learned.yaml").write_text("kind: checkpoint\npath: ckpt\n")
    result = cli(
        "eval", world_bench, "--model", tmp_path / "learned.yaml", "--out", tmp_path / "run-config", "--limit", "4"
    )
    assert result.code == 0, result.err
    by_spec = json.loads(cli("score", tmp_path / "run-gt", "--json").out)["runs"][0]["scenarios"]
    by_file = json.loads(cli("score", tmp_path / "run-config", "--json").out)["runs"][0]["scenarios"]
    assert by_spec == by_file
    (tmp_path / "bad.yaml").write_text("kind: checkpoint\n")
    result = cli("eval", world_bench, "--model", tmp_path / "bad.yaml", "--out", tmp_path / "r")
    assert result.code != 0 and "path: required" in result.err
    # a path that is not a checkpoint, or a directory that holds none: one line, no traceback
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "config.json").write_bytes((ckpt / "config.json").read_bytes())
    (damaged / "model.safetensors").write_bytes(b"not weights")
    result = cli("eval", world_bench, "--model", f"checkpoint:{damaged}", "--out", tmp_path / "r")
    assert result.code == 2 and "cannot be read as this checkpoint's weights" in result.err
    assert "Traceback" not in result.err and not (tmp_path / "r").exists()
    for where in (tmp_path / "nothing", tmp_path):
        result = cli("eval", world_bench, "--model", f"checkpoint:{where}", "--out", tmp_path / "r")
        assert result.code != 0
        assert "checkpoint" in result.err and len(result.err.strip().splitlines()) == 1, result.err


def test_a_served_checkpoint_scores_over_http_as_it_does_in_process(
    train_set: Path,
    tmp_path: Path,
    world_bench: Path,
    cli,
    read,  # type: ignore[no-untyped-def]
) -> None:
    from yanami.learned._agent import CheckpointModel
    from yanami.models._serve import InferServer

    ckpt = tmp_path / "ckpt"
    train(train_set, ckpt, TrainSettings(steps=2, seed=1, **SMALL), parsed=read[2])  # type: ignore[arg-type]
    local = tmp_path / "local"
    assert cli("eval", world_bench, "--model", f"checkpoint:{ckpt}", "--out", local, "--limit", "4").code == 0
    with InferServer(CheckpointModel(ckpt)) as server:
        config = tmp_path / "served.yaml"
        config.write_text(f"kind: infer-http\nname: served\nbase_url: {server.url}\n")
        remote = tmp_path / "remote"
        result = cli("eval", world_bench, "--model", config, "--out", remote, "--limit", "4")
        assert result.code == 0, result.err
        # a body the server cannot read: a 400 naming the field, and the server goes on
        import urllib.error
        import urllib.request

        bad = urllib.request.Request(f"{server.url}/infer", data=b'{"history": [], "output_mode": "text_only"}')
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(bad, timeout=10)
        assert caught.value.code == 400 and b"history" in caught.value.read()
    figures = [json.loads(cli("score", run, "--json").out)["runs"][0]["scenarios"] for run in (local, remote)]
    assert figures[0] == figures[1]  # the same model, the same requests: the same figures, to the last digit


def test_the_experiment_writes_its_table_and_curves_and_resumes(tmp_path: Path, world_bench: Path, cli) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "exp"
    args = ("experiment", "train-vs-control", "--out", out, "--bench", world_bench, "--train-dialogues", "20",
            "--steps", "4", "--batch", "4")  # fmt: skip
    result = cli(*args)
    assert result.code == 0, result.err
    figures = json.loads((out / "experiment.json").read_text())
    labels = [r["label"] for r in figures["rows"]]
    assert labels[:5] == [
        "stateful",
        "single-turn control",
        "untrained",
        "stateful (Self-History)",
        "single-turn control (Self-History)",
    ]
    assert labels[5].startswith("text-only reader")
    assert [r["history"] for r in figures["rows"]] == ["gt"] * 3 + ["self"] * 2 + ["gt"]
    assert (out / "runs" / "stateful-self" / "manifest.json").is_file()
    for row in figures["rows"][:5]:
        assert (
            row["sc"] is not None
            and row["vq"] is not None
            and all(row[t] is not None for t in ("RR", "CR", "CT", "CU"))
        )
    assert figures["rows"][5]["sc"] is None  # the reader draws nothing
    assert [p["step"] for p in figures["curves"]["stateful"]] == [4]
    page = (out / "report.html").read_text()
    assert "Learning curves" in page and "single-turn control" in page and "<polyline" in page
    # the training set shares no picture with the bench
    bench_images = {p.name for p in (world_bench / "images").rglob("*") if p.is_file()}
    train_images = {p.name for p in (out / "train" / "images").rglob("*") if p.is_file()}
    assert bench_images and train_images and not bench_images & train_images
    # run again: everything is there, nothing is trained or evaluated anew, the same figures
    stamp = (out / "stateful" / "model.safetensors").stat().st_mtime_ns
    assert cli(*args).code == 0
    assert (out / "stateful" / "model.safetensors").stat().st_mtime_ns == stamp
    assert json.loads((out / "experiment.json").read_text())["rows"] == figures["rows"]
    # the same checkpoints on a further bench (tagged), never on one the training set shares pictures with
    from yanami.learned import Setting, run_experiment

    setting = Setting(train_dialogues=20, steps=4, batch=4)
    with pytest.raises(UserError, match=r"shares \d+ pictures with the training set"):
        run_experiment(out, setting, out / "train", tag="leaky", self_history=False)
    assert not (out / "runs-leaky").exists()
    result = cli(*args, "--tag", "again", "--no-self-history")
    assert result.code == 0 and "report-again.html" in result.out
    again = json.loads((out / "experiment-again.json").read_text())
    assert (out / "report-again.html").is_file() and len(again["rows"]) == 4
    assert (
        json.loads(json.dumps(again["rows"][0])) == figures["rows"][0]
    )  # the same checkpoints and bench: the same figures
    assert (out / "stateful" / "model.safetensors").stat().st_mtime_ns == stamp  # nothing trained anew
