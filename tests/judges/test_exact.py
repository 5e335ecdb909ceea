"""The exact judge: predicates on the parsed candidate, and world Visual Quality."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageFilter

from yanami.judges import ExactJudge
from yanami.schema import ImagePart
from yanami.store import Dataset
from yanami.world import render_png
from yanami.world._scene import Scene


def _targets(bench: Dataset, dialogues: list) -> list:
    out = []
    for d in dialogues:
        for t in d.turns:
            if t.checks:
                part = next(p for p in t.assistant.parts if isinstance(p, ImagePart))
                out.append((d, t, bench.image_bytes(part)))
    return out


def test_ground_truth_passes_every_check_with_full_quality(world_bench, world_dialogues) -> None:
    judge = ExactJudge()
    targets = _targets(Dataset(world_bench), world_dialogues)
    assert len(targets) >= 16
    for d, t, data in targets:
        v = judge.judge_image(d, t, data)
        assert all(v.checks.values()), (d.id, t.index, v.reason)
        assert v.vq == 10
        assert set(v.checks) == {c.id for c in t.checks}


@pytest.mark.parametrize("corruption", ["missing", "recoloured"])
def test_a_corrupted_candidate_fails_the_check_it_breaks(world_bench, world_dialogues, corruption) -> None:
    judge = ExactJudge()
    tried = 0
    for d, t, _ in _targets(Dataset(world_bench), world_dialogues):
        check = next((c for c in t.checks if c.hidden.predicate["op"] == "exists"), None)
        if check is None or "colour" not in check.hidden.predicate["where"]:
            continue
        where = check.hidden.predicate["where"]
        state = t.hidden.state
        objs = []
        for o in state["scene"]:
            hit = all(o[k] == v for k, v in where.items())
            if hit and corruption == "missing":
                continue
            if hit:
                o = {**o, "colour": "red" if o["colour"] != "red" else "blue"}
            objs.append({**o, "on": None} if o["on"] is not None and not any(p["id"] == o["on"] for p in objs) else o)
        objs = [o if o["on"] is None or any(p["id"] == o["on"] for p in objs) else {**o, "on": None} for o in objs]
        scene = Scene.model_validate({"objects": objs})
        v = judge.judge_image(d, t, render_png(scene, state["azimuth"], state["style"]))
        assert v.checks[check.id] is False, (d.id, t.index, check.text, v.reason)
        tried += 1
    assert tried >= 8


def test_visual_quality_falls_with_noise_and_blur(world_bench, world_dialogues) -> None:
    judge = ExactJudge()
    d, t, data = _targets(Dataset(world_bench), world_dialogues)[0]
    img = Image.open(io.BytesIO(data)).convert("RGB")
    arr = np.asarray(img).astype(float)
    noisy = np.clip(arr + np.random.default_rng(0).normal(0, 25, arr.shape), 0, 255).astype(np.uint8)

    def png(im: Image.Image) -> bytes:
        buf = io.BytesIO()
        im.save(buf, format="PNG")
        return buf.getvalue()

    clean = judge.judge_image(d, t, data).vq
    blurred = judge.judge_image(d, t, png(img.filter(ImageFilter.GaussianBlur(4)))).vq
    noise = judge.judge_image(d, t, png(Image.fromarray(noisy))).vq
    assert clean == 10
    assert noise <= 3
    assert blurred < clean
