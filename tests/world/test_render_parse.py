"""The renderer is deterministic; the parser reads its images back."""

from __future__ import annotations

import io
import random

import numpy as np
import pytest
from PIL import Image

from yanami.world import STYLES, VIEWS, parse_image, random_scene, render_array, render_png
from yanami.world._scene import relation


def test_rendering_is_deterministic_and_sized() -> None:
    scene = random_scene(random.Random(3), n=5)
    a = render_png(scene, VIEWS[0], "sand")
    from yanami.world._render import _sprite

    _sprite.cache_clear()  # the sprite cache must not change a single pixel
    b = render_png(scene, VIEWS[0], "sand")
    assert a == b
    img = Image.open(io.BytesIO(a))
    assert img.size == (512, 384) and img.format == "PNG"


def test_styles_and_views_change_the_image() -> None:
    scene = random_scene(random.Random(4), n=4)
    base = render_array(scene, VIEWS[0], "studio")
    assert not np.array_equal(base, render_array(scene, VIEWS[0], "sky"))
    assert not np.array_equal(base, render_array(scene, VIEWS[1], "studio"))


def _match(scene, parsed):  # type: ignore[no-untyped-def]
    out = []
    for o in scene.objects:
        q = min(
            parsed.objects,
            key=lambda q: (q.x - o.x) ** 2 + (q.y - o.y) ** 2 + (0 if (q.on is None) == (o.on is None) else 100),
        )
        out.append((o, q))
    return out


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("degrade", [False, True])
def test_parser_recovers_the_scene(seed: int, degrade: bool) -> None:
    rng = random.Random(seed)
    scene = random_scene(rng, n=rng.randint(3, 6), stack_chance=0.4)
    az = rng.choice(VIEWS)
    style = rng.choice(list(STYLES))
    img = Image.fromarray(render_array(scene, az, style))
    if degrade:  # JPEG at quality 75 after a resize of up to 10 %
        f = rng.uniform(0.9, 1.1)
        img = img.resize((round(512 * f), round(384 * f)), Image.Resampling.BILINEAR)
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=75)
        img = Image.open(io.BytesIO(buf.getvalue()))
    parsed = parse_image(img, az)
    assert parsed.style == style
    assert len(parsed.objects) == len(scene.objects)
    pscene = parsed.to_scene()
    pairs = _match(scene, parsed)
    for o, q in pairs:
        assert (q.shape, q.colour, q.size, q.material) == (o.shape, o.colour, o.size, o.material)
        assert abs(q.x - o.x) < 0.3 and abs(q.y - o.y) < 0.3
        assert (q.on is None) == (o.on is None)
    index = {id(q): k for k, q in enumerate(parsed.objects)}
    for o1, q1 in pairs:
        for o2, q2 in pairs:
            if o1.id < o2.id and o1.on is None and o2.on is None:
                got = relation(pscene.objects[index[id(q1)]], pscene.objects[index[id(q2)]], az)
                assert got == relation(o1, o2, az)


@pytest.mark.parametrize("top", [None, "sphere", "cube", "cylinder"])
def test_a_stack_hidden_in_its_supports_outline_is_told_by_colour(top: str | None) -> None:
    """Near the camera a small object on a large cube stays inside the cube's outline."""
    from yanami.world._scene import Scene, WorldObject

    support = WorldObject(id=0, shape="cube", colour="purple", size="large", material="matte", x=-2.75, y=-2.44)
    objects = [support]
    if top is not None:
        objects.append(support.model_copy(update={"id": 1, "shape": top, "colour": "red", "size": "small", "on": 0}))
    parsed = parse_image(render_array(Scene(objects=tuple(objects)), VIEWS[0], "studio"), VIEWS[0])
    got = [(q.shape, q.colour, q.size, q.on) for q in parsed.objects]
    want = [("cube", "purple", "large", None)] + ([(top, "red", "small", 0)] if top else [])
    assert got == want


def test_the_shipped_parser_calibration_matches_the_renderer() -> None:
    """`python -m yanami.world._parse` rewrites it after any change to the renderer."""
    import numpy as np

    from yanami.world._parse import _shipped, calibrate

    shipped = _shipped()
    assert set(shipped) == set(STYLES)
    fresh = calibrate("mint")
    assert shipped["mint"].keys() == fresh.keys()
    for key, (feats, labels) in fresh.items():
        assert np.array_equal(shipped["mint"][key][0], feats), key
        assert shipped["mint"][key][1] == labels
