"""The openai and infer-http adapters against a real HTTP server on loopback, faults included."""

from __future__ import annotations

import base64
import io
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from PIL import Image

from yanami.contract import InputImage, InputMessage, InputText, Refused, Request, UserError
from yanami.models import Malformed, ModelConfig, ResponseCache, Transient, load_config
from yanami.models._config import IMAGES_API_SIZES, pick_size
from yanami.models._infer import InferHTTPModel
from yanami.models._openai import OpenAIModel
from yanami.models.fake import FakeServer, plain_png


def _png(colour: tuple[int, int, int]) -> InputImage:
    data = plain_png((64, 48), colour)
    import hashlib

    return InputImage(data, hashlib.sha256(data).hexdigest(), 64, 48)


def _request(images: int = 1) -> Request:
    parts: list[InputText | InputImage] = [InputText("Here is my picture.")]
    parts += [_png((10 * k, 20, 30)) for k in range(images)]
    return Request(
        item="d/t1",
        messages=(
            InputMessage("user", tuple(parts)),
            InputMessage("assistant", (InputText("Nice."),)),
            InputMessage("user", (InputText("Make the cube red."),)),
        ),
        seed=7,
        size=(512, 384),
    )


def _openai(server: FakeServer, **kw) -> OpenAIModel:
    settings = {"kind": "openai", "name": "m", "base_url": server.url + "/v1", "chat_model": "chat-model",
                "image_model": "image-model", "backoff_s": 0.01, "timeout_s": 2.0, **kw}  # fmt: skip
    return OpenAIModel(ModelConfig.model_validate(settings))


def _infer(server: FakeServer, **kw) -> InferHTTPModel:
    settings = {"kind": "infer-http", "name": "i", "base_url": server.url, "backoff_s": 0.01, "timeout_s": 2.0, **kw}
    return InferHTTPModel(ModelConfig.model_validate(settings))


def test_chat_answers_carry_interleaved_images_greedy_and_bounded() -> None:
    with FakeServer() as srv:
        assert _openai(srv).answer(_request(2)) == "A"
        path, body = srv.requests[-1]
    assert path == "/v1/chat/completions"
    assert body["temperature"] == 0 and body["max_tokens"] == 512 and body["seed"] == 7
    first = body["messages"][0]["content"]
    assert [p["type"] for p in first] == ["text", "image_url", "image_url"]
    assert first[1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_images_generate_without_inputs_and_edit_with_several() -> None:
    with FakeServer() as srv:
        model = _openai(srv)
        made = model.generate(_request(0))
        edited = model.generate(_request(3))
        paths = [p for p, _ in srv.requests]
        edit_body = srv.requests[-1][1]
    assert paths == ["/v1/images/generations", "/v1/images/edits"]
    assert Image.open(io.BytesIO(made)).size == (512, 384)
    # the images API's published size nearest the 512 x 384 frame's aspect (4:3 -> 3:2)
    assert len(edit_body["images"]) == 3 and edit_body["size"] == "1536x1024"
    assert edited == edit_body["images"][-1]  # the fake returns the last image it was given


def test_image_sizes_are_those_the_images_api_takes() -> None:
    """A server that takes only OpenAI's published sizes (and answers 400 to any other, with its
    error body): the default asks for the one nearest the frame's aspect and keeps the picture as
    it comes; ``sizes: [frame]`` asks for the frame, which such a server refuses in one line."""
    with FakeServer(image_sizes=IMAGES_API_SIZES) as srv:
        made = _openai(srv).generate(_request(1))
        assert srv.requests[-1][1]["size"] == "1536x1024"
        assert Image.open(io.BytesIO(made)).size == (1536, 1024)
        square = _openai(srv).generate(replace(_request(1), size=(512, 512), seed=9))
        assert srv.requests[-1][1]["size"] == "1024x1024" and Image.open(io.BytesIO(square)).size == (1024, 1024)
        with pytest.raises(Exception, match="Supported values are: '1024x1024', '1536x1024', '1024x1536'"):
            _openai(srv, sizes=["frame"], max_retries=0).generate(_request(1))
    assert pick_size((384, 512), IMAGES_API_SIZES) == "1024x1536" and pick_size((9, 9), ("auto",)) == "auto"


def test_images_inside_chat_replies() -> None:
    with FakeServer() as srv:
        out = _openai(srv, image_api="chat").generate(_request(1))
    assert out == _request(1).images()[-1].data


@pytest.mark.parametrize("fault", ["429", "500", "hang"])
def test_transient_faults_are_retried(fault: str) -> None:
    with FakeServer(faults=[("/chat", fault)], hang_s=1.0) as srv:
        model = _openai(srv, timeout_s=0.3)
        assert model.answer(_request()) == "A"
        assert srv.count("/chat") == 2


def test_retries_are_bounded() -> None:
    with FakeServer(faults=[("/chat", "500")] * 10) as srv:
        with pytest.raises(Transient):
            _openai(srv, max_retries=2).answer(_request())
        assert srv.count("/chat") == 3


def test_refusals_and_malformed_replies_are_not_retried() -> None:
    with FakeServer(faults=[("/chat", "refuse"), ("/chat", "malformed"), ("/images", "refuse")]) as srv:
        model = _openai(srv)
        with pytest.raises(Refused):
            model.answer(_request())
        with pytest.raises(Malformed):
            model.answer(_request())
        with pytest.raises(Refused):
            model.generate(_request(0))
        assert srv.count("/") == 3


def test_one_concurrency_limit_per_endpoint() -> None:
    with FakeServer(latency_s=0.05) as srv:
        model = _openai(srv, max_concurrency=2, requests_per_minute=60000)
        threads = [threading.Thread(target=model.answer, args=(_request(),)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert srv.count("/chat") == 8
        assert srv.max_in_flight == 2


def test_a_requests_per_minute_limit_spaces_request_starts() -> None:
    with FakeServer() as srv:
        model = _openai(srv, max_concurrency=8, requests_per_minute=1200)  # one start per 50 ms
        threads = [threading.Thread(target=model.answer, args=(_request(),)) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        starts = sorted(srv.arrivals)
    assert len(starts) == 6
    assert starts[-1] - starts[0] > 0.2  # five intervals of 50 ms, less scheduling jitter


def test_the_response_cache_never_pays_twice(tmp_path: Path) -> None:
    with FakeServer() as srv:
        settings = {"kind": "openai", "name": "m", "base_url": srv.url + "/v1", "chat_model": "c", "image_model": "i"}
        cache = ResponseCache(tmp_path / "cache.sqlite")
        model = OpenAIModel(ModelConfig.model_validate(settings), cache)
        assert model.answer(_request()) == model.answer(_request())
        assert model.generate(_request(1)) == model.generate(_request(1))
        again = OpenAIModel(ModelConfig.model_validate(settings), ResponseCache(tmp_path / "cache.sqlite"))
        again.answer(_request())
        assert srv.count("/chat") == 1 and srv.count("/images") == 1
        different = Request(item="d/t1", messages=_request().messages, seed=8, size=(512, 384))
        model.answer(different)  # another seed is another request
        assert srv.count("/chat") == 2


def test_infer_http_protocol() -> None:
    with FakeServer() as srv:
        model = _infer(srv)
        assert model.answer(_request()) == "A"
        text_body = srv.requests[-1][1]
        image = model.generate(_request(2))
        image_body = srv.requests[-1][1]
    assert srv.requests[0][0] == "/infer"
    assert text_body["output_mode"] == "text_only" and image_body["output_mode"] == "image_only"
    assert text_body["temperature"] == 0.0
    parts = text_body["history"][0]["content"]
    assert parts[0] == {"type": "text", "text": "Here is my picture."}
    assert base64.b64decode(parts[1]["image"]) == _request().images()[0].data
    assert image == _request(2).images()[-1].data


def test_infer_http_faults() -> None:
    faults = [("/infer", "429"), ("/infer", "none"), ("/infer", "refuse"), ("/infer", "error"), ("/infer", "malformed")]
    with FakeServer(faults=faults) as srv:
        model = _infer(srv)
        assert model.answer(_request()) == "A"  # after one 429
        with pytest.raises(Refused):
            model.answer(_request())
        with pytest.raises(RuntimeError, match="model crashed"):
            model.answer(_request())
        with pytest.raises(Malformed):
            model.answer(_request())


def test_config_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = tmp_path / "judge.yaml"
    good.write_text("kind: openai\nbase_url: http://127.0.0.1:9/v1\nchat_model: qwen\napi_key_env: MY_KEY\n")
    config = load_config(good)
    assert config.name == "judge" and config.temperature == 0.0
    # no max_tokens: each request's own limit (512 for an answer), never a silent cap below it
    assert config.max_tokens is None and config.tokens(512) == 512 and config.tokens(16_384) == 16_384
    monkeypatch.delenv("MY_KEY", raising=False)
    with pytest.raises(UserError, match="MY_KEY"):
        config.api_key()
    monkeypatch.setenv("MY_KEY", "sk-test")
    assert config.api_key() == "sk-test"
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: openai\nbase_url: http://x/v1\ntemperature: hot\n")
    with pytest.raises(UserError, match=r"bad.yaml:3: temperature: "):
        load_config(bad)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("kind: openai\nbase_url: http://x/v1\napi_key: sk-oops\n")
    with pytest.raises(UserError, match=r"unknown.yaml:3: api_key: Extra inputs"):
        load_config(unknown)
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: openai\n  base_url: [\n")
    with pytest.raises(UserError, match=r"broken.yaml:\d+: not valid YAML"):
        load_config(broken)


def test_a_model_and_a_judge_on_one_server_share_its_limits() -> None:
    with FakeServer(latency_s=0.05) as srv:
        model = _openai(srv, max_concurrency=1, requests_per_minute=60000)
        judge = _openai(srv, max_concurrency=1, requests_per_minute=60000)
        assert model.endpoint is judge.endpoint
        threads = [threading.Thread(target=m.answer, args=(_request(),)) for m in (model, judge) * 3]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert srv.max_in_flight == 1


def test_a_reasoning_models_thoughts_are_not_its_answer() -> None:
    """vLLM and SGLang with a reasoning parser return the thinking as ``reasoning_content`` and
    the answer as ``content``; the thinking counts against ``max_tokens``. The answer is read
    from ``content`` alone; a limit the thinking uses up is a cut-off reply, named as such."""
    thought = "Option B looks right {but} wait, the user corrected that. " * 10
    question = replace(_request(0), max_tokens=512)
    with FakeServer(reasoning=thought, brain=lambda path, body: "C") as srv:
        assert _openai(srv).answer(question) == "C"
        with pytest.raises(Exception, match="cut off at 64 tokens, raise max_tokens"):
            _openai(srv, max_tokens=64, max_retries=0).answer(question)


# A whole request within timeout_s, and a reply within its cap (issue 24, deliverable 2) ---------


@pytest.mark.parametrize("fault", ["trickle", "trickle-head", "endless"])
@pytest.mark.parametrize("adapter", ["openai", "infer"])
def test_a_server_that_never_finishes_is_cut_off_at_timeout_s(fault: str, adapter: str) -> None:
    """A byte every 0.1 s (in the headers or the body) or a body without end never trips a
    per-read timeout: the whole attempt still ends at ``timeout_s``, is retried as a timeout,
    and the item gets its answer from the next attempt."""
    import time

    path = "/chat" if adapter == "openai" else "/infer"
    with FakeServer(faults=[(path, fault)], hang_s=6.0) as srv:
        model = _openai(srv, timeout_s=0.6) if adapter == "openai" else _infer(srv, timeout_s=0.6)
        start = time.monotonic()
        assert model.answer(_request()) == "A"
        took = time.monotonic() - start
        assert srv.count(path) == 2
    assert took < 2.5, f"{fault}: {took:.1f} s for a 0.6 s deadline and one retry"


def test_the_deadline_is_the_last_error_when_retries_run_out() -> None:
    with (
        FakeServer(faults=[("/chat", "trickle")] * 3, hang_s=4.0) as srv,
        pytest.raises(Transient, match=r"no complete reply within 0.4 s \(timeout_s\)"),
    ):
        _openai(srv, timeout_s=0.4, max_retries=1).answer(_request())


@pytest.mark.parametrize("adapter", ["openai", "infer"])
def test_a_reply_over_its_cap_is_an_error_never_stored(tmp_path: Path, adapter: str) -> None:
    """A 4 MB chat reply to a request limited to 512 tokens (cap 64 KiB + 64 B a token) is
    `Malformed`, not retried, and the response cache keeps nothing."""
    from yanami.models._bounds import text_reply_cap

    path = "/chat" if adapter == "openai" else "/infer"
    cache = ResponseCache(tmp_path / "cache.sqlite")
    with FakeServer(faults=[(path, "oversized")]) as srv:
        model = _openai(srv) if adapter == "openai" else _infer(srv)
        model.cache = cache
        with pytest.raises(Malformed, match=f"over {text_reply_cap(512):,} bytes"):
            model.answer(_request())
        assert srv.count(path) == 1
        assert model.answer(_request()) == "A"  # the next reply is within the cap, and kept
    rows = cache._conn().execute("SELECT length(value) FROM responses").fetchall()
    cache.close()
    assert rows == [(1,)]


def test_an_image_reply_over_max_image_bytes_is_an_error() -> None:
    import numpy as np

    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (96, 128, 3), dtype=np.uint8)).save(buf, "PNG")
    noise = buf.getvalue()  # about 37 KB, 49 KB in base64

    with FakeServer(brain=lambda path, body: noise) as srv:
        assert _openai(srv, max_image_bytes=60_000).generate(_request(1)) == noise
        with pytest.raises(Malformed, match="over 40,000 bytes"):
            _openai(srv, max_image_bytes=40_000).generate(_request(1))
        with pytest.raises(Malformed, match="over 40,000 bytes"):
            _openai(srv, max_image_bytes=40_000, image_api="chat").generate(_request(1))
        assert srv.count("/") == 3


def test_the_sdk_transport_carries_the_bounds() -> None:
    """The bounds ride on the SDK's connection pool; a stack laid out otherwise would lose them."""
    from yanami.models._bounds import is_bounded

    with FakeServer() as srv:
        model = _openai(srv)
        assert is_bounded(model.client._client._transport)
