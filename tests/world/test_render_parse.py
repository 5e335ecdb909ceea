"""The renderer is deterministic; the parser reads its images back."""

from __future__ import annotations

import io
import random
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from yanami.world import STYLES, VIEWS, parse_image, random_scene, render_array, render_png
from yanami.world._scene import Scene, relation
from yanami.world._transforms import TARGETLESS, TRANSFORMS, TURNED


def test_rendering_is_deterministic_and_sized() -> None:
    scene = random_scene(random.Random(3), n=5)
    a = render_png(scene, VIEWS[0], "sand")
    from yanami.world._render import _sprite

    _sprite.cache_clear()  # the sprite cache must not change a single pixel
    b = render_png(scene, VIEWS[0], "sand")
    assert a == b
    img = Image.open(io.BytesIO(a))
    assert img.size == (512, 384) and img.format == "PNG"


def test_png_files_hold_exactly_the_rendered_pixels() -> None:
    # The builder writes its own PNG (no row filter, zlib): a standard decoder must read back
    # every pixel, each chunk's CRC must hold, and a second picture must not see the first's
    # pixels through the reused scanline buffer.
    for k, style in enumerate(STYLES):
        scene = random_scene(random.Random(20 + k), n=2 + k)
        data = render_png(scene, VIEWS[k % len(VIEWS)], style)
        Image.open(io.BytesIO(data)).verify()  # chunk CRCs and structure
        img = Image.open(io.BytesIO(data))
        assert (img.format, img.mode, img.size) == ("PNG", "RGB", (512, 384))
        assert np.array_equal(np.asarray(img), render_array(scene, VIEWS[k % len(VIEWS)], style))
    small = render_png(random_scene(random.Random(5), n=1), VIEWS[0], "mint", 64, 48)
    assert np.array_equal(
        np.asarray(Image.open(io.BytesIO(small))),
        render_array(random_scene(random.Random(5), n=1), VIEWS[0], "mint", 64, 48),
    )
    pos, names = 8, []
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        assert struct.unpack(">I", data[pos + 8 + n : pos + 12 + n])[0] == zlib.crc32(kind + body)
        names.append(kind)
        pos += 12 + n
    assert names == [b"IHDR", b"IDAT", b"IEND"]


def test_the_renderers_own_png_is_read_without_a_decoder_and_any_other_file_is_left_to_one() -> None:
    """`png_pixels` reads what `png_bytes` writes to the pixels Pillow reads; a file it cannot read
    exactly (filtered rows, another colour type, a wrong checksum, a cut or padded file, a header
    whose size the data does not fill, another chunk) is None, so the parser falls back to Pillow."""
    from yanami.world._render import png_pixels

    scene = random_scene(random.Random(7), n=4)
    data = render_png(scene, VIEWS[1], "sand")
    pixels = png_pixels(data)
    assert pixels is not None and pixels.shape == (384, 512, 3) and pixels.dtype == np.uint8
    assert np.array_equal(pixels, np.asarray(Image.open(io.BytesIO(data)).convert("RGB")))

    def saved(image: Image.Image, **options: object) -> bytes:
        buf = io.BytesIO()
        image.save(buf, format="PNG", **options)
        return buf.getvalue()

    img = Image.open(io.BytesIO(data))
    header_end = 8 + 12 + 13
    lying = data[:16] + struct.pack(">I", 600) + data[20:]  # a taller picture than the data holds
    lying = lying[:29] + struct.pack(">I", zlib.crc32(lying[12:29])) + lying[33:]
    text_chunk = b"\0\0\0\x01tEXtx" + struct.pack(">I", zlib.crc32(b"tEXtx"))
    others = {
        "filtered rows": saved(img, optimize=True),
        "RGBA": saved(img.convert("RGBA")),
        "palette": saved(img.convert("P")),
        "a wrong checksum": data[:-5] + bytes([data[-5] ^ 1]) + data[-4:],
        "cut": data[:-20],
        "padded": data + b"\0",
        "a header the data does not fill": lying,
        "a text chunk": data[:header_end] + text_chunk + data[header_end:],
        "JPEG": (lambda b: (img.save(b, format="JPEG"), b.getvalue())[1])(io.BytesIO()),
        "empty": b"",
    }
    for name, other in others.items():
        assert png_pixels(other) is None, name
    for name in ("filtered rows", "RGBA"):  # the same pixels in other PNG files: read through Pillow, alike
        assert parse_image(others[name]) == parse_image(data), name


def test_the_edges_window_maximum_is_a_sliding_windows() -> None:
    from numpy.lib.stride_tricks import sliding_window_view

    from yanami.world._parse import _window_max

    rng = np.random.default_rng(3)
    for shape in ((9, 1), (9, 7), (23, 40), (64, 9)):
        a = rng.random(shape).astype(np.float32)
        assert np.array_equal(_window_max(a, 0), sliding_window_view(a, 9, axis=0).max(axis=-1))
        b = np.ascontiguousarray(a.T)
        assert np.array_equal(_window_max(b, 1), sliding_window_view(b, 9, axis=1).max(axis=-1))


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


# Pictures whose pixels are not the renderer's own --------------------------------------


TESTED = [name for name in TRANSFORMS if name != "none" and name not in TARGETLESS]
"""Changes a person would not notice (benchmarks/bench_eval.py measures the same set on a whole bench)."""


@pytest.mark.parametrize("name", TESTED)
def test_a_changed_picture_reads_as_the_render(name: str) -> None:
    """Same objects, attributes, supports, positions within the parser's tolerance, relations."""
    for seed in (21, 22):
        rng = random.Random(seed)
        scene = random_scene(rng, n=rng.randint(4, 6), stack_chance=0.5)
        az, style = rng.choice(VIEWS), rng.choice(list(STYLES))
        clean = parse_image(render_array(scene, az, style), az)
        parsed = parse_image(TRANSFORMS[name](Image.fromarray(render_array(scene, az, style))), az)
        assert len(parsed.objects) == len(scene.objects), (seed, parsed)
        pairs = _match(scene, parsed)
        near = 0.25 if name in TURNED else 0.15  # a turn is not undone: a position moves with it
        for o, q in pairs:
            assert (q.shape, q.colour, q.size, q.material) == (o.shape, o.colour, o.size, o.material), (seed, o, q)
            assert (q.on is None) == (o.on is None)
            assert abs(q.x - o.x) < near and abs(q.y - o.y) < near, (seed, o, q)
        assert [(o.shape, o.colour, o.on) for o in parsed.objects] == [(o.shape, o.colour, o.on) for o in clean.objects]
        ps = parsed.to_scene()
        index = {id(q): k for k, q in enumerate(parsed.objects)}
        for o1, q1 in pairs:
            for o2, q2 in pairs:
                if o1.id < o2.id and o1.on is None and o2.on is None:
                    assert relation(ps.objects[index[id(q1)]], ps.objects[index[id(q2)]], az) == relation(o1, o2, az)


@pytest.mark.parametrize(("seed", "quality"), [(0, "JPEG q30"), (12, "JPEG q30"), (18, "JPEG q30"), (10, "JPEG q50")])
def test_strong_jpeg_bends_no_colour(seed: int, quality: str) -> None:
    """JPEG's coarse chroma shifts the floor's colour by a few levels, unevenly along its shading;
    a map whose per-channel gain follows that shift, carried to dark objects, read red as brown
    and grey as green in these scenes (the objects now choose the map's form)."""
    rng = random.Random(seed)
    scene = random_scene(rng, n=rng.randint(4, 6), stack_chance=0.3)
    az, style = rng.choice(VIEWS), rng.choice(list(STYLES))
    parsed = parse_image(TRANSFORMS[quality](Image.fromarray(render_array(scene, az, style))), az)
    read = sorted((q.shape, q.colour, q.material) for q in parsed.objects)
    assert read == sorted((o.shape, o.colour, o.material) for o in scene.objects)


def test_a_clean_render_is_read_in_its_own_frame_and_tone() -> None:
    scene = random_scene(random.Random(5), n=5, stack_chance=0.4)
    parsed = parse_image(render_png(scene, VIEWS[2], "rose"), VIEWS[2])
    assert (parsed.content, parsed.zoom, parsed.gamma) == ((0, 0, 512, 384), 1.0, 1.0)
    assert (parsed.gain, parsed.offset, parsed.residual, parsed.speckle) == ((1, 1, 1), (0, 0, 0), 0.0, 0.0)


def test_borders_bars_and_crops_are_found() -> None:
    scene = random_scene(random.Random(6), n=4)
    img = Image.fromarray(render_array(scene, VIEWS[0], "sand"))
    assert parse_image(TRANSFORMS["letterbox black"](img)).content == (0, 64, 512, 448)
    assert parse_image(TRANSFORMS["border white"](img)).content == (16, 16, 496, 368)
    # Lines and frames of any colour and width, the floor's own colour too, are found by their step.
    assert parse_image(TRANSFORMS["line 1 px grey, all edges"](img)).content == (1, 1, 511, 383)
    assert parse_image(TRANSFORMS["line 4 px floor, top and left"](img)).content == (4, 4, 512, 384)
    assert parse_image(TRANSFORMS["frame 8 px black"](img)).content == (8, 8, 520, 392)
    assert parse_image(TRANSFORMS["frame 16 px green"](img)).content == (16, 16, 528, 400)
    assert parse_image(TRANSFORMS["crop 4 %, resized"](img)).zoom == pytest.approx(1 / 0.92, abs=0.01)
    assert parse_image(TRANSFORMS["JPEG q70"](img)).zoom == 1.0  # a blur does not look like a crop


def test_parse_views_reads_each_frame_once_normalised() -> None:
    from yanami.world import parse_cached, parse_views

    scene = random_scene(random.Random(8), n=5, stack_chance=0.5)
    data = TRANSFORMS["JPEG q70"](Image.fromarray(render_array(scene, VIEWS[1], "mint")))
    views = parse_views(data, VIEWS)
    assert list(views) == list(VIEWS)
    for az in VIEWS:
        assert views[az] == parse_image(data, az)
        assert parse_cached(data, az) is views[az]  # one cache: the frames parsed together are remembered
    # The views are the same picture: each frame's positions are the others' turned by 90 degrees.
    a, b = views[VIEWS[0]].objects[0], views[VIEWS[1]].objects[0]
    assert np.hypot(a.x, a.y) == pytest.approx(np.hypot(b.x, b.y), abs=1e-3)


def test_each_component_is_solved_as_if_alone() -> None:
    """A component's ground positions are the same bits whatever else the picture holds: what lets
    the parser keep a component's explanation for the next picture that shows it (`_explained`)."""
    from yanami.world._parse import _camera, _solve_positions

    rng = np.random.default_rng(3)
    targets = np.column_stack([rng.uniform(40, 470, 24), rng.uniform(80, 370, 24)])
    cam = _camera(float(VIEWS[1]))
    together = _solve_positions(cam, targets)
    for k in range(len(targets)):
        alone = _solve_positions(cam, targets[k : k + 1])
        assert np.array_equal(alone[0][0], together[0][k]) and np.array_equal(alone[1][0], together[1][k])


def test_a_component_seen_before_is_not_explained_again_and_reads_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """A clean render's components are kept by their pixels and place: a picture that shows an object
    as an earlier picture did reads it without explaining it again, exactly as a parser that had
    seen nothing would (stacks, and their place in the list, included); a picture that is not the
    renderer's own is explained afresh."""
    from yanami.world import _parse

    rng = random.Random(12)

    def loose(s: Scene) -> list[int]:  # objects on the floor with nothing on them
        return [k for k, o in enumerate(s.objects) if o.on is None and all(q.on != o.id for q in s.objects)]

    scene = random_scene(rng, n=5, stack_chance=0.6)
    while not any(o.on is not None for o in scene.objects) or not loose(scene):
        scene = random_scene(rng, n=5, stack_chance=0.6)
    k = loose(scene)[0]
    objects = list(scene.objects)
    objects[k] = objects[k].model_copy(update={"x": round(objects[k].x * 0.8, 3), "y": round(objects[k].y * 0.8, 3)})
    later = Scene(objects=tuple(objects))
    first, second = (render_png(s, VIEWS[0], "studio") for s in (scene, later))
    explained = []
    real = _parse._explain

    def counting(*args: object, **kwargs: object) -> object:
        explained.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    _parse._EXPLAINED.clear()
    fresh = parse_image(second)
    alone = len(_parse._EXPLAINED)
    _parse._EXPLAINED.clear()
    monkeypatch.setattr(_parse, "_explain", counting)
    parse_image(first)
    n_first = len(explained)
    assert n_first > 0
    assert parse_image(second) == fresh  # the same parse, not merely an equal scene
    assert 0 < len(explained) - n_first < alone  # the moved object read again, the others kept
    assert any(o.on is not None for o in fresh.objects)
    before = len(explained)
    jpeg = TRANSFORMS["JPEG q70"](Image.open(io.BytesIO(second)))
    parse_image(jpeg)
    assert len(explained) - before >= len(fresh.objects) - sum(o.on is not None for o in fresh.objects)
