"""Blind requests: nothing a model receives outside the conversation varies with the item (issue 33)."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from yanami.models.fake import FakeServer
from yanami.runner import _blind as blind
from yanami.runner import blind_audit, picture_metadata
from yanami.store import Dataset


def _audit(bench: Path, **kw: object) -> blind.BlindAudit:
    ds = Dataset(bench)
    return blind_audit(ds, lambda turn, side, j, part: ds.image_bytes(part), **kw)  # type: ignore[arg-type]


def test_every_adapter_sends_nothing_that_varies_with_the_item(world_bench) -> None:
    audit = _audit(world_bench)
    assert not audit.failed, audit.summary()
    assert audit.items > 0 and audit.skipped is None and audit.pictures > 0 and not audit.metadata
    assert audit.request_fields["seed"] == ["None"]
    by = {(f.adapter, f.name): f for f in audit.wire}
    assert {a for a, _ in by} == {"openai chat", "openai images", "openai chat images", "infer text", "infer image"}
    # the images API's edit and generate endpoints were both reached, the conversation in each
    assert {"/v1/images/edits", "/v1/images/generations"} <= by["openai images", "path"].values
    assert by["openai images", "multipart image[] data"].kind == "conversation"
    assert by["openai images", "json prompt"].kind == "conversation"
    assert by["openai chat", "json messages"].kind == "conversation"
    assert by["infer image", "json history"].kind == "conversation"
    # no seed at all without one in the model config; the multipart boundary is random per send
    assert ("openai chat", "json seed") not in by
    assert by["openai images", "header content-type"].kind == "random per send"
    assert all(f.kind != "per item" for f in audit.wire)


def test_a_seed_derived_from_the_item_is_caught(world_bench, monkeypatch) -> None:
    """The audit fails where it should: the seed the runner once derived from the item id."""
    real = blind.Conversation.request

    def seeded(self, item):  # type: ignore[no-untyped-def]
        request, fell = real(self, item)
        return replace(request, seed=sum(map(ord, item.id))), fell

    monkeypatch.setattr(blind.Conversation, "request", seeded)
    audit = _audit(world_bench, wire=False)
    assert audit.failed
    assert any(p.startswith("request field seed varies over the items") for p in audit.request_problems)


def test_a_field_on_the_wire_that_follows_the_item_id_is_caught(world_bench, monkeypatch) -> None:
    """An adapter that puts the item id in its body (OpenAI's ``user`` field, say) fails the wire part."""
    from yanami.models import _openai

    real = _openai.chat_body

    def tagged(request, params):  # type: ignore[no-untyped-def]
        return real(request, {**params, "user": request.item})

    monkeypatch.setattr(_openai, "chat_body", tagged)
    audit = _audit(world_bench)
    assert audit.failed
    caught = {(f.adapter, f.name) for f in audit.wire if f.kind == "per item"}
    assert ("openai chat", "json user") in caught and ("openai chat images", "json user") in caught
    assert ("infer text", "json history") not in caught


def test_the_run_seed_is_the_same_on_every_request(cli, world_bench, tmp_path) -> None:
    """A model config's ``seed`` goes out with every request, the same for every item; none without it."""
    for seed in (None, 7):
        with FakeServer() as srv:
            config = tmp_path / f"m{seed}.yaml"
            config.write_text(
                f"kind: openai\nchat_model: c\nbase_url: {srv.url}/v1\nrequests_per_minute: 60000\n"
                + (f"seed: {seed}\n" if seed is not None else "")
            )
            run = tmp_path / f"run{seed}"
            r = cli("eval", world_bench, "--model", config, "--judge", "exact", "--out", run, "--limit", "4")
            assert r.code == 0, r.err
            bodies = [b for path, b in srv.requests if path.endswith("/chat/completions")]
            assert len(bodies) > 8
            assert {b.get("seed", "absent") for b in bodies} == {seed if seed is not None else "absent"}
            assert json.loads((run / "manifest.json").read_text())["seed"] == seed


def _png(info: PngInfo | None = None) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (1, 2, 3)).save(buf, format="PNG", pnginfo=info)
    return buf.getvalue()


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP"])
def test_picture_metadata_is_found_in_each_format(fmt: str) -> None:
    im = Image.new("RGB", (8, 8), (1, 2, 3))
    plain, tagged = io.BytesIO(), io.BytesIO()
    im.save(plain, format=fmt)
    exif = Image.Exif()
    exif[0x010E] = "world-fusion-000007/t3"  # ImageDescription
    im.save(tagged, format=fmt, exif=exif.tobytes())
    assert picture_metadata(plain.getvalue()) == []
    assert picture_metadata(tagged.getvalue())


def test_png_text_chunks_are_metadata() -> None:
    info = PngInfo()
    info.add_text("item", "world-fusion-000007/t3")
    assert picture_metadata(_png(info)) == ["tEXt"]
    assert picture_metadata(_png()) == []


def test_a_run_whose_requests_carried_per_item_seeds_is_read_but_not_resumed(cli, world_bench, tmp_path) -> None:
    run = tmp_path / "run"
    assert cli("eval", world_bench, "--model", "reference:copy-input", "--out", run, "--limit", "4").code == 0
    path = run / "manifest.json"
    m = json.loads(path.read_text())
    del m["seed"]
    path.write_text(json.dumps({**m, "version": 4, "global_seed": 42}))  # as yanami wrote it before format 5
    assert cli("score", run).code == 0
    again = cli("eval", world_bench, "--model", "reference:copy-input", "--out", run, "--limit", "4")
    assert again.code == 2 and "global_seed=42" in again.err and "Traceback" not in again.err


def test_a_composite_picture_carries_no_metadata(world_bench, world_dialogues) -> None:
    """The concatenate layout's composite is drawn by yanami: nothing in its bytes but pixels."""
    from yanami.runner import build_request, items_of

    ds = Dataset(world_bench)
    d = world_dialogues[0]
    item = next(i for i in items_of(d) if i.kind == "turn")
    r = build_request(d, item, "concatenate", lambda t, s, j, p: ds.image_bytes(p))
    assert len(r.images()) == 1 and picture_metadata(r.images()[0].data) == []
