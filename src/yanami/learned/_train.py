"""Training: examples from a world training set, batches, losses, the loop, checkpoints.

Every target turn and every DSU question of the training set is one example, its request
built exactly as `yanami eval` builds it under GT-History (`yanami.runner.build_request`, the
default layout): the model is taught on what it will be asked. The control (``single-turn``)
cuts each request to what a single-turn reformulation keeps (`single_turn`), and is otherwise
trained the same: the same examples, order, steps and batch size.

A checkpoint is a directory: ``model.safetensors`` (the weights), ``config.json`` (the network's
size, the vocabulary, how it was trained, the learning curve) and, until training ends,
``resume.safetensors`` (the optimizer's state), so that an interrupted run goes on where it
stopped and ends with the same bytes as one that was not interrupted.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from yanami.contract import CHOICE_LETTERS, Dialogue, ImagePart, InputImage, Layout, TextPart, UserError, atomic_write
from yanami.learned._features import (
    COLOUR_NAMES,
    MATERIAL_NAMES,
    MAX_OPTIONS,
    SHAPE_NAMES,
    SIZE_NAMES,
    Encoded,
    Parsed,
    Shown,
    Target,
    build_vocabulary,
    encode,
    single_turn,
    target_of,
)
from yanami.learned._net import Batch, Net, NetConfig, Outputs
from yanami.learned._settings import CONTROLS, TrainSettings
from yanami.models import question_prompt
from yanami.runner import build_request, items_of, question_of
from yanami.store import Dataset, bench_sha256
from yanami.world import BASE_AZIMUTH, Parse, Scene, in_frame

FORMAT = "yanami-learned"
FORMAT_VERSION = 2
HELD_OUT = 10
"""Every this-many-th training dialogue (by its id's hash) is held out for the learning curve."""
CURVE_EXAMPLES = 320
"""The learning curve reads at most this many held-out examples (evenly spread over them), so
that measuring it costs a few steps' time whatever the training set's size."""


@dataclass
class Example:
    """One request and what the model is taught for it."""

    enc: Encoded
    dialogue: str
    qtype: str | None = None
    """A question's type (RR, CR, CT, CU); None for a target turn."""
    answer: int = -1
    """A question's correct option (0 = A)."""
    target: Target | None = None


# Reading a training set ---------------------------------------------------------------


def parsed_of(parse: Parse) -> Parsed:
    """A `yanami.world.Parse` as the model reads it."""
    return parse.style, [(o.shape, o.colour, o.size, o.material, o.x, o.y, o.on is not None) for o in parse.objects]


def parse_all(
    ds: Dataset, dialogues: Sequence[Dialogue], workers: int, progress: Callable[[int, int], None]
) -> dict[str, Parsed]:
    """Every picture of the dialogues, read by the world's parser in the default camera's frame."""
    from yanami.world import Parser

    parts = list({p.sha256: p for d in dialogues for p in d.images()}.values())
    out: dict[str, Parsed] = {}
    with Parser(workers) as parser, ThreadPoolExecutor(max(1, workers)) as pool:

        def one(p: ImagePart) -> tuple[str, Parsed]:
            return p.sha256, parsed_of(parser.cached(ds.image_bytes(p), BASE_AZIMUTH, p.sha256))

        for k, (sha, parsed) in enumerate(pool.map(one, parts), 1):
            out[sha] = parsed
            progress(k, len(parts))
    return out


def _texts(d: Dialogue) -> list[str]:
    texts = [p.text for t in d.turns for side in (t.user, t.assistant) for p in side.parts if isinstance(p, TextPart)]
    return texts + [question_prompt(q) for q in d.questions]


def vocabulary_of(dialogues: Sequence[Dialogue]) -> list[str]:
    """The training set's vocabulary (`build_vocabulary` over every text a request can hold)."""
    return build_vocabulary(t for d in dialogues for t in _texts(d))


def examples_of(d: Dialogue, vocabulary: dict[str, int], parsed: dict[str, Parsed], control: str) -> list[Example]:
    """The dialogue's examples: its target turns and its questions (see the module docstring)."""

    def image(turn: int, side: str, j: int, p: ImagePart) -> InputImage:
        return InputImage(b"", p.sha256, p.width, p.height)  # the model reads the parse, never the bytes

    def see(im: InputImage) -> Parsed:
        return parsed[im.sha256]

    out = []
    for item in items_of(d):
        if item.kind == "reply":
            continue
        request = build_request(d, item, Layout.YES_FIRST, image)
        if control == "single-turn":
            request = single_turn(request)
        if item.kind == "turn":
            enc = encode(request, vocabulary, see, generate=True)
            state = cast(dict[str, Any], d.turns[item.turn].hidden.state)  # the world writes an object
            scene = in_frame(Scene.model_validate({"objects": state["scene"]}), state["azimuth"], BASE_AZIMUTH)
            objs: list[Shown] = [
                (o.shape, o.colour, o.size, o.material, o.x, o.y, o.on is not None) for o in scene.objects
            ]
            out.append(Example(enc, d.id, target=target_of(enc, objs, state["style"])))
        else:
            q = question_of(d, item)
            if not q.choices or len(q.choices) > MAX_OPTIONS:
                continue
            enc = encode(request, vocabulary, see, generate=False)
            answer = CHOICE_LETTERS.index(q.answer_letters[0])
            out.append(Example(enc, d.id, qtype=q.type.value, answer=answer))
    return out


def attribute_words(vocabulary: dict[str, int]) -> tuple[tuple[int, ...], ...]:
    """The word id of every shape, colour, size and material name (`NetConfig.attribute_words`)."""
    return tuple(
        tuple(vocabulary[n] for n in group) for group in (SHAPE_NAMES, COLOUR_NAMES, SIZE_NAMES, MATERIAL_NAMES)
    )


def held_out(dialogue_id: str) -> bool:
    """Whether a training dialogue is kept for the learning curve (`HELD_OUT`)."""
    return int(hashlib.sha256(dialogue_id.encode()).hexdigest()[:8], 16) % HELD_OUT == 0


# Batches and losses --------------------------------------------------------------------


def collate(examples: Sequence[Example]) -> Batch:
    """Padded tensors for a batch, and the token indices each loss reads."""
    b, n = len(examples), max(len(e.enc) for e in examples)
    cols = {
        name: np.zeros((b, n), dtype=np.int64)
        for name in ("kind", "word", "role", "turn", "number", "picture", "option", "slot")
    }
    attrs = np.zeros((b, n, 5), dtype=np.int64)
    xy = np.zeros((b, n, 2), dtype=np.float32)
    lengths = np.zeros(b, dtype=np.int64)
    answers: list[tuple[int, list[list[int]], int]] = []
    keep: list[tuple[int, int, float]] = []
    rows: list[tuple[int, int, int, int, int, int, int, float, float]] = []
    backgrounds: list[tuple[int, list[list[int]], int]] = []
    for i, e in enumerate(examples):
        enc, m = e.enc, len(e.enc)
        lengths[i] = m
        for name in ("kind", "word", "role", "turn", "number", "picture", "option"):
            cols[name][i, :m] = getattr(enc, name)
        cols["slot"][i, enc.slots] = np.arange(len(enc.slots))
        attrs[i, :m] = enc.attrs
        xy[i, :m] = enc.xy
        if e.qtype is not None:
            answers.append((i, enc.option_groups(), e.answer))
        if e.target is not None:
            t = e.target
            keep += [(i, index, float(v)) for (index, _), v in zip(enc.objects, t.keep, strict=True)]
            keep += [(i, index, float(v)) for index, v in zip(enc.slots, t.slot_used, strict=True)]
            rows += [(i, *r) for r in t.rows]
            if t.background >= 0:
                backgrounds.append((i, [[index] for index, _ in enc.pictures], t.background))
    padded = {k: torch.from_numpy(v) for k, v in cols.items()}
    return {
        "kind": padded["kind"],
        "word": padded["word"],
        "role": padded["role"],
        "turn": padded["turn"],
        "number": padded["number"],
        "picture": padded["picture"],
        "option": padded["option"],
        "slot": padded["slot"],
        "attrs": torch.from_numpy(attrs),
        "xy": torch.from_numpy(xy),
        "length": torch.from_numpy(lengths),
        "answers": answers,
        "keep": keep,
        "rows": rows,
        "backgrounds": backgrounds,
    }


def choice_logits(scores: torch.Tensor, i: int, groups: list[list[int]]) -> torch.Tensor:
    """One logit per choice: the mean of its tokens' scores in row ``i``."""
    return torch.stack([scores[i, g].mean() for g in groups])


def _choice_loss(scores: torch.Tensor, groups: list[tuple[int, list[list[int]], int]]) -> tuple[torch.Tensor, int]:
    """Cross-entropy of picking the right choice in each row (summed), and how many were right."""
    total = scores.new_zeros(())
    right = 0
    for i, choices, label in groups:
        logits = choice_logits(scores, i, choices)
        total = total + torch.nn.functional.cross_entropy(logits[None], torch.tensor([label]))
        right += int(int(logits.argmax()) == label)
    return total, right


def losses(net: Net, batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
    """The batch's loss (answers, keeps, attributes, positions, backgrounds; each a mean over its
    terms) and figures for the learning curve."""
    return losses_of(net(batch), batch)


def losses_of(out: Outputs, batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
    """`losses` of the network's outputs for a batch."""
    parts: dict[str, torch.Tensor] = {}
    stats: dict[str, float] = {}
    if batch["answers"]:
        total, right = _choice_loss(out["answer"], batch["answers"])
        parts["answer"] = total / len(batch["answers"])
        stats["answer_right"], stats["answer_n"] = right, len(batch["answers"])
    if batch["keep"]:
        bi, ti, v = (torch.tensor(c) for c in zip(*batch["keep"], strict=True))
        logits = out["keep"][bi, ti]
        parts["keep"] = torch.nn.functional.binary_cross_entropy_with_logits(logits, v.float())
        stats["keep_right"], stats["keep_n"] = float(((logits > 0).float() == v).sum()), len(v)
    if batch["rows"]:
        cols = list(zip(*batch["rows"], strict=True))
        bi, ti = torch.tensor(cols[0]), torch.tensor(cols[1])
        attr_loss = out["xy"].new_zeros(())
        for k, logits in enumerate(out["attrs"]):
            attr_loss = attr_loss + torch.nn.functional.cross_entropy(logits[bi, ti], torch.tensor(cols[2 + k]))
        parts["attributes"] = attr_loss
        want = torch.tensor(list(zip(cols[7], cols[8], strict=True)), dtype=torch.float32)
        got = batch["xy"][bi, ti] + out["xy"][bi, ti]
        parts["position"] = torch.nn.functional.smooth_l1_loss(got, want, beta=0.05) * 4.0
    if batch["backgrounds"]:
        total, _ = _choice_loss(out["background"], batch["backgrounds"])
        parts["background"] = total / len(batch["backgrounds"])
    loss = sum(parts.values(), out["xy"].new_zeros(()))
    stats.update({k: float(v.detach()) for k, v in parts.items()})
    return loss, stats


BUCKET = 32
"""Batches whose examples are drawn from one window of shuffled examples, sorted there by length."""


def schedule(lengths: Sequence[int], settings: TrainSettings) -> list[list[int]]:
    """The examples of every step, from the seed alone: epochs of shuffled examples; within
    windows of `BUCKET` batches the examples are sorted by length, so that a batch pads little,
    and the batches are shuffled again."""
    rng = random.Random(settings.seed)
    n, size = len(lengths), min(settings.batch, len(lengths))
    steps: list[list[int]] = []
    while len(steps) < settings.steps:
        order = list(range(n))
        rng.shuffle(order)
        epoch: list[list[int]] = []
        window = size * BUCKET
        for k in range(0, n - size + 1, window):
            part = sorted(order[k : k + window], key=lambda i: lengths[i])
            epoch += [part[j : j + size] for j in range(0, len(part) - size + 1, size)]
        rng.shuffle(epoch)
        steps += epoch
    return steps[: settings.steps]


def _rate(step: int, settings: TrainSettings) -> float:
    """Linear warm-up, then cosine decay to a tenth."""
    if step < settings.warmup:
        return settings.learning_rate * (step + 1) / settings.warmup
    done = (step - settings.warmup) / max(1, settings.steps - settings.warmup)
    return settings.learning_rate * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(done, 1.0))))


# Checkpoints ---------------------------------------------------------------------------

MODEL_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
RESUME_FILE = "resume.safetensors"


def save_checkpoint(
    out: Path, net: Net, config: dict[str, Any], optimizer: torch.optim.Optimizer | None = None
) -> None:
    """Write the weights and the config (atomically, each); with ``optimizer``, its state too."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{MODEL_FILE}.tmp"
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(tmp), metadata={"format": FORMAT})
    tmp.replace(out / MODEL_FILE)
    if optimizer is not None:
        tensors: dict[str, torch.Tensor] = {}
        for k, state in optimizer.state_dict()["state"].items():
            for name, value in state.items():
                tensors[f"{k}.{name}"] = value if value.dim() else value.reshape(1)
        tmp = out / f".{RESUME_FILE}.tmp"
        save_file(tensors, str(tmp))
        tmp.replace(out / RESUME_FILE)
    else:
        (out / RESUME_FILE).unlink(missing_ok=True)
    atomic_write(out / CONFIG_FILE, (json.dumps(config, indent=1, sort_keys=True) + "\n").encode())


def read_config(ckpt: Path) -> dict[str, Any]:
    """A checkpoint's config, checked (one-line errors name the file)."""
    path = ckpt / CONFIG_FILE
    if not path.is_file():
        raise UserError(f"{ckpt}: not a checkpoint (no {CONFIG_FILE}; `yanami train` writes one)")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise UserError(f"{path}: not a yanami checkpoint (format {FORMAT!r} expected)")
    if config.get("version") != FORMAT_VERSION:
        raise UserError(f"{path}: checkpoint version {config.get('version')!r}; this yanami reads {FORMAT_VERSION}")
    return config


def load_net(ckpt: Path) -> tuple[Net, dict[str, Any]]:
    """The network of a checkpoint and its config."""
    config = read_config(ckpt)
    try:
        net = Net(NetConfig.from_dict(config["net"]))
        if not isinstance(config["vocabulary"], list) or config["control"] not in CONTROLS:
            raise ValueError("vocabulary or control")
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{ckpt / CONFIG_FILE}: not a complete checkpoint config ({exc})") from None
    path = ckpt / MODEL_FILE
    try:
        state = load_file(str(path))
        net.load_state_dict(state)
    except Exception as exc:  # a damaged or foreign weights file is the user's, never a traceback
        raise UserError(f"{path}: cannot be read as this checkpoint's weights ({str(exc).splitlines()[0]})") from None
    net.eval()
    return net, config


# The loop ------------------------------------------------------------------------------


def _evaluate(net: Net, examples: Sequence[Example], batch: int) -> dict[str, float]:
    """Held-out figures: answer accuracy per question type, keep accuracy, mean loss."""
    right: dict[str, list[int]] = {}
    keep = [0.0, 0.0]
    loss_sum, n = 0.0, 0
    with torch.no_grad():
        for k in range(0, len(examples), batch):
            chunk = examples[k : k + batch]
            b = collate(chunk)
            out = net(b)
            loss, stats = losses_of(out, b)
            loss_sum += float(loss) * len(chunk)
            n += len(chunk)
            for (i, positions, label), e in zip(b["answers"], [e for e in chunk if e.qtype is not None], strict=True):
                r = right.setdefault(e.qtype or "", [0, 0])
                r[0] += int(int(choice_logits(out["answer"], i, positions).argmax()) == label)
                r[1] += 1
            keep[0] += stats.get("keep_right", 0.0)
            keep[1] += stats.get("keep_n", 0.0)
    figures = {f"accuracy_{t}": 100.0 * r[0] / r[1] for t, r in sorted(right.items())}
    figures["keep_accuracy"] = 100.0 * keep[0] / keep[1] if keep[1] else 0.0
    figures["loss"] = loss_sum / max(n, 1)
    return figures


def train(
    train_dir: Path,
    out: Path,
    settings: TrainSettings,
    *,
    workers: int = 1,
    parsed: dict[str, Parsed] | None = None,
    on_stage: Callable[[str, int, int], None] = lambda stage, done, total: None,
) -> dict[str, Any]:
    """Train a model on a world training set and write its checkpoint at ``out`` (see the
    module docstring); an unfinished checkpoint there of the same settings is resumed.
    Returns the checkpoint's config."""
    if settings.control not in CONTROLS:
        raise UserError(f"--control: {settings.control!r} is not one of {', '.join(CONTROLS)}")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a directory; name a new directory")
    ds = Dataset(train_dir)
    dialogues = [d for d in ds if d.scenario is not None and d.meta.generator == "world"]
    if not dialogues:
        raise UserError(f"{train_dir}: no world dialogues to train on (`yanami build --preset train` makes them)")
    words_list = vocabulary_of(dialogues)
    vocabulary = {w: k for k, w in enumerate(words_list)}
    if parsed is None:
        parsed = parse_all(ds, dialogues, workers, lambda done, total: on_stage("reading pictures", done, total))
    train_ex: list[Example] = []
    held: list[Example] = []
    for k, d in enumerate(dialogues, 1):
        (held if held_out(d.id) else train_ex).extend(examples_of(d, vocabulary, parsed, settings.control))
        on_stage("encoding", k, len(dialogues))
    if not train_ex:
        raise UserError(f"{train_dir}: too few dialogues to train on")
    every = max(1, math.ceil(len(held) / CURVE_EXAMPLES))
    curve_set = sorted(held[::every], key=lambda e: len(e.enc))  # by length: batches pad little
    torch.manual_seed(settings.seed)
    net = Net(NetConfig(len(words_list), settings.width, settings.layers, feedforward=4 * settings.width,
                        attribute_words=attribute_words(vocabulary)))  # fmt: skip
    optimizer = torch.optim.AdamW(net.parameters(), lr=settings.learning_rate, weight_decay=0.01)
    config: dict[str, Any] = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "net": net.config.to_dict(),
        "vocabulary": words_list,
        "control": settings.control,
        "settings": settings.__dict__,
        "train": {
            "path": str(train_dir),
            "dataset_sha256": _dataset_sha(ds),
            "dialogues": len(dialogues),
            "examples": len(train_ex),
            "held_out_examples": len(held),
            "curve_examples": len(curve_set),
            "tokens_per_example": round(float(np.mean([len(e.enc) for e in train_ex])), 1),
        },
        "parameters": sum(p.numel() for p in net.parameters()),
        "step": 0,
        "curve": [],
    }
    start = _resume(out, net, optimizer, config)
    plan = schedule([len(e.enc) for e in train_ex], settings)
    net.train()
    running: list[float] = []
    for step in range(start, settings.steps):
        for group in optimizer.param_groups:
            group["lr"] = _rate(step, settings)
        batch = collate([train_ex[i] for i in plan[step]])
        loss, _ = losses(net, batch)
        optimizer.zero_grad()
        torch.autograd.backward(loss)  # loss.backward(), which torch leaves unannotated
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()
        running.append(float(loss.detach()))
        done = step + 1
        if done % settings.log_every == 0 or done == settings.steps:
            net.eval()
            point = {"step": done, "train_loss": float(np.mean(running)), **_evaluate(net, curve_set, settings.batch)}
            net.train()
            config["curve"].append({k: round(v, 4) if isinstance(v, float) else v for k, v in point.items()})
            running = []
        if done % settings.save_every == 0 or done == settings.steps:
            config["step"] = done
            net.eval()
            save_checkpoint(out, net, config, optimizer if done < settings.steps else None)
            net.train()
        on_stage("training", done, settings.steps)
    net.eval()
    if settings.steps == 0:  # the untrained model: its initial weights, from the seed alone
        save_checkpoint(out, net, config)
    return config


def _dataset_sha(ds: Dataset) -> str:
    return bench_sha256(ds)


def _resume(out: Path, net: Net, optimizer: torch.optim.Optimizer, config: dict[str, Any]) -> int:
    """The step an unfinished checkpoint at ``out`` reached (its weights and optimizer loaded), or 0."""
    if not (out / CONFIG_FILE).is_file():
        if out.exists() and any(out.iterdir()):
            raise UserError(f"--out {out}: exists and is not a checkpoint; name a new directory")
        return 0
    old = read_config(out)
    keys = ("net", "vocabulary", "control", "settings", "train")
    same = all(old.get(k) == json.loads(json.dumps(config[k])) for k in keys)  # as the file holds them
    if not same:
        raise UserError(f"--out {out}: holds a checkpoint of other settings or data; name a new directory")
    if not (out / RESUME_FILE).is_file():
        raise UserError(f"--out {out}: holds a finished checkpoint; name a new directory")
    net.load_state_dict(load_file(str(out / MODEL_FILE)))
    saved = load_file(str(out / RESUME_FILE))
    state = optimizer.state_dict()
    for k in range(len(list(net.parameters()))):
        step = saved[f"{k}.step"].reshape(())
        state["state"][k] = {"step": step, "exp_avg": saved[f"{k}.exp_avg"], "exp_avg_sq": saved[f"{k}.exp_avg_sq"]}
    optimizer.load_state_dict(state)
    config["curve"] = old["curve"]
    return int(old["step"])
