"""The one chat client: the refusal rule, redaction, the stop after 401/403, and a cache that keeps
only what passed validation; the model registry and the light contract."""

from __future__ import annotations

import base64
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from yanami.contract import InputMessage, InputText, Refused, Request, UserError
from yanami.models import Fatal, Malformed, ModelConfig, ResponseCache, load_config, load_model, redact, refusal
from yanami.models._infer import InferHTTPModel
from yanami.models._openai import OpenAIModel
from yanami.models.fake import FakeServer, plain_png


def _request(text: str = "Make the cube red.") -> Request:
    return Request("d/t1", (InputMessage("user", (InputText(text),)),), seed=3, size=(64, 48))


def _openai(srv: FakeServer, cache: ResponseCache | None = None, **kw: object) -> OpenAIModel:
    settings = {"kind": "openai", "name": "m", "base_url": srv.url + "/v1", "chat_model": "chat-model",
                "image_model": "image-model", "backoff_s": 0.01, "timeout_s": 2.0, **kw}  # fmt: skip
    return OpenAIModel(ModelConfig.model_validate(settings), cache)


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ("I'm sorry, but I can't help with that.", True),
        ("I’m sorry, but I can’t help with that.".replace("’", "'"), True),
        ("Sorry, I cannot assist with this request.", True),
        ("I can't help with generating that image.", True),
        ("I am unable to comply with this request.", True),
        ("B", False),
        ("Sorry, the answer is B.", False),
        ("I can't tell for sure, but it is B.", False),
        ("The sphere is red; I cannot see anything else.", False),
        ("", False),
        ("I'm sorry, but I can't help with that. " + "x" * 500, False),
    ],
)
def test_one_refusal_rule(text: str, refused: bool) -> None:
    assert refusal(text) is refused


def test_a_plain_text_refusal_is_refused_and_never_cached(tmp_path: Path) -> None:
    replies = iter(["I'm sorry, but I can't help with that.", "B"])
    with FakeServer(brain=lambda path, body: next(replies)) as srv:
        model = _openai(srv, ResponseCache(tmp_path / "cache.sqlite"))
        with pytest.raises(Refused):
            model.answer(_request())
        assert model.answer(_request()) == "B"  # asked again: the refusal was not kept
        assert model.answer(_request()) == "B"  # now from the cache
        assert srv.count("/chat") == 2


@pytest.mark.parametrize("bad", [b"this is not an image", "huge"])
def test_an_invalid_image_is_never_cached(tmp_path: Path, bad: bytes | str) -> None:
    """A non-image (or an over-limit image) where an image was asked fails now and is asked again later."""
    from PIL import Image

    if bad == "huge":  # 13,000 x 13,000 of one colour: a small file over the 40-megapixel limit
        import io

        buf = io.BytesIO()
        Image.new("L", (13_000, 13_000), 0).save(buf, format="PNG")
        bad = buf.getvalue()
    replies = iter([bad, plain_png((64, 48))])
    with FakeServer(brain=lambda path, body: next(replies)) as srv:
        model = _openai(srv, ResponseCache(tmp_path / "cache.sqlite"))
        with pytest.raises(Malformed):
            model.generate(_request())
        good = model.generate(_request())
        assert model.generate(_request()) == good
        assert srv.count("/images") == 2


def test_the_infer_adapter_validates_before_caching_too(tmp_path: Path) -> None:
    import base64

    replies = iter([b"garbage", plain_png((64, 48))])

    def brain(path: str, body: dict) -> object:
        return next(replies)

    with FakeServer(brain=brain) as srv:
        config = ModelConfig(kind="infer-http", name="i", base_url=srv.url, backoff_s=0.01)
        model = InferHTTPModel(config, ResponseCache(tmp_path / "cache.sqlite"))
        with pytest.raises(Malformed):
            model.generate(_request())
        assert base64.b64encode(model.generate(_request()))
        assert srv.count("/infer") == 2


def test_secrets_are_redacted_and_401_stops_all_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-live-0123456789abcdefghij"
    monkeypatch.setenv("TEST_KEY", key)

    def brain(path: str, body: dict) -> object:
        return None

    with FakeServer(faults=[("/chat", "echo-key"), ("/chat", "401")], brain=brain) as srv:
        model = _openai(srv, api_key_env="TEST_KEY")
        with pytest.raises(RuntimeError) as info:
            model.answer(_request())
        assert key not in str(info.value) and "[redacted]" in str(info.value)
        with pytest.raises(Fatal) as fatal:
            model.answer(_request())
        assert key not in str(fatal.value) and "HTTP 401" in str(fatal.value) and "TEST_KEY" in str(fatal.value)
        with pytest.raises(Fatal):  # nothing more reaches the server
            model.answer(_request("another question"))
        assert srv.count("/chat") == 2


def test_a_refused_key_stops_its_model_not_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a 401 the refused model sends nothing more, but a model made afterwards on the same
    URL (the key corrected, in the same process: a notebook, say) is served."""
    monkeypatch.setenv("TEST_KEY", "sk-old-0123456789abcdefghij")
    with FakeServer(faults=[("/chat", "401")], brain=lambda path, body: "B") as srv:
        refused = _openai(srv, api_key_env="TEST_KEY")
        with pytest.raises(Fatal):
            refused.answer(_request())
        monkeypatch.setenv("TEST_KEY", "sk-new-0123456789abcdefghij")
        corrected = _openai(srv, api_key_env="TEST_KEY")
        assert corrected.answer(_request()) == "B"
        with pytest.raises(Fatal):  # the refused model stays stopped
            refused.answer(_request())
        assert srv.count("/chat") == 2


def test_redact_hides_key_shapes() -> None:
    text = 'bad key sk-abcdefghijklmnop; Authorization: Bearer abc.def-ghijklmn; {"api_key": "s3cr3t-value"}'
    out = redact(text, ["s3cr3t-value"])
    assert "sk-abc" not in out and "abc.def" not in out and "s3cr3t" not in out and out.count("[redacted]") == 3


def test_model_specs_and_their_errors(tmp_path: Path) -> None:
    assert load_model("reference:stateful").name == "reference:stateful"
    with pytest.raises(UserError, match=r"--model reference: name one, as reference:NAME"):
        load_model("reference")
    with pytest.raises(UserError, match="no such reference agent"):
        load_model("reference:nosuch")
    with pytest.raises(UserError, match="no such config file"):
        load_model("my-model")
    with pytest.raises(UserError, match=r"registered kinds: checkpoint, reference.*config file"):
        load_model("nosuch:thing")
    with pytest.raises(UserError, match="cannot read"):
        load_model(str(tmp_path / "missing.yaml"))


def test_a_config_that_neither_answers_nor_generates_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "idle.yaml"
    path.write_text("kind: openai\nbase_url: http://127.0.0.1:9/v1\n")
    with pytest.raises(UserError, match=r"idle.yaml:1: chat_model, image_model: give at least one"):
        load_config(path)
    path.write_bytes(b"\xff\xfe\x00kind")
    with pytest.raises(UserError, match="not a text file"):
        load_config(path)


def test_importing_the_contract_loads_nothing_heavy() -> None:
    code = (
        "import sys, json, yanami.models; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numpy', 'PIL', 'pydantic', 'yaml', 'openai') or m.startswith(('yanami.world', 'yanami.core._schema')))))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout)
    assert loaded == []


def test_the_chat_body_is_the_chat_messages_as_json() -> None:
    """The body spliced from cached image parts parses to exactly the readable message list."""
    from yanami.contract import InputImage
    from yanami.models import chat_body, chat_messages

    data = plain_png((8, 8))
    import hashlib

    image = InputImage(data, hashlib.sha256(data).hexdigest(), 8, 8)
    request = Request(
        "d/t1",
        (
            InputMessage("user", (InputText('Say "hi" — naïvely,\nthen stop.'), image, image)),
            InputMessage("assistant", (InputText("Done."), image)),
            InputMessage("assistant", ()),
            InputMessage("user", ()),
            InputMessage("user", (InputText("And now?"),)),
        ),
        seed=3,
        size=(64, 48),
    )
    params = {"model": "m", "temperature": 0.0, "seed": 3, "max_tokens": 512}
    assert json.loads(chat_body(request, params)) == {**params, "messages": chat_messages(request)}
    assert json.loads(chat_body(request, {})) == {"messages": chat_messages(request)}
    assert chat_messages(request)[1] == {"role": "assistant", "content": "Done."}  # its image follows as a user part
    assert chat_messages(request)[2]["content"][0] == {"type": "text", "text": "(the image you produced)"}


def test_structured_output_usage_and_prices() -> None:
    from yanami.contract import InputMessage, InputText, Request
    from yanami.models import ModelConfig
    from yanami.models._config import Prices
    from yanami.models._openai import OpenAIModel
    from yanami.models.fake import FakeServer

    schema = {"type": "object", "properties": {"keep": {"type": "boolean"}}}
    request = Request(
        "x/q1", (InputMessage("user", (InputText("Keep it?"),)),), seed=1, size=(64, 64), json_schema=schema
    )
    with FakeServer() as srv:
        for structured in (True, False):
            config = ModelConfig(kind="openai", base_url=f"{srv.url}/v1", chat_model="c", structured_output=structured)
            model = OpenAIModel(config)
            assert model.answer is not None and model.answer(request) == "A"
            usage = model.last_usage()
            assert usage is not None and not usage.cached and usage.images_out == 0
        sent = [body.get("response_format") for path, body in srv.requests]
    assert sent[0] == {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}} and sent[1] is None
    priced = ModelConfig(kind="openai", base_url="http://h/v1", chat_model="c",
                         prices=Prices(input_per_million=2.0, output_per_million=8.0, per_image=0.04))  # fmt: skip
    assert priced.cost(1_000_000, 500_000, 2) == 2.0 + 4.0 + 0.08


def test_only_a_reply_that_is_an_image_counts_as_an_image_made() -> None:
    """An images API that answers with something that is not a picture: the call fails as
    malformed, and its usage counts (and would charge) no image."""
    from yanami.models import Malformed

    with FakeServer(brain=lambda path, body: b"not a picture at all") as srv:
        model = _openai(srv, image_model="image-model", max_retries=0)
        with pytest.raises(Malformed):
            model.generate(_request())
        usage = model.last_usage()
    assert usage is not None and usage.images_out == 0
    with FakeServer() as srv:
        model = _openai(srv, image_model="image-model")
        model.generate(_request())
        usage = model.last_usage()
    assert usage is not None and usage.images_out == 1


def test_a_reply_cut_off_at_its_limit_still_counts_the_tokens_it_was_billed() -> None:
    """A reasoning model that spends its whole limit thinking: the reply is refused as cut off,
    and what the server says it used is still the call's usage (a real API bills it)."""
    from yanami.models import CutOff

    with FakeServer(reasoning="x" * 4000) as srv:
        model = _openai(srv, chat_model="chat-model", max_retries=0, max_tokens=100)
        request = dataclasses.replace(_request(), json_schema={"type": "object"})
        with pytest.raises(CutOff):
            model.answer(request)
        usage = model.last_usage()
    assert usage is not None and usage.tokens_out == 100 and usage.tokens_in > 0 and not usage.cached


def test_a_key_quoted_in_a_successful_reply_is_kept_nowhere(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, world_bench: Path, cli: Any
) -> None:
    """A server that echoes the key, in clear, URL-encoded and inside base64 (any alignment, either
    alphabet), in its answers: no file the eval and the report write holds any of those forms."""
    import urllib.parse

    key = "sk-live-0123456789+/abcdefghij"
    monkeypatch.setenv("TEST_KEY", key)
    said = [key, urllib.parse.quote(key, safe=""), urllib.parse.quote_plus(key)]  # what the server writes
    leaks = list(said)  # what must not be found: each form, or the part of a base64 text only the key decides
    for prefix in (b"", b"k", b"ke"):
        said += [base64.b64encode(prefix + key.encode()).decode()]
        said += [base64.urlsafe_b64encode(b"Bearer " + prefix + key.encode()).decode()]
        leaks += [said[-2][len(prefix) + 1 : -4], said[-1][12:-4]]

    def brain(path: str, body: dict) -> object:
        return None if "/images/" in path else "A. " + " ".join(said)

    with FakeServer(brain=brain) as srv:
        config = tmp_path / "model.yaml"
        config.write_text(f"kind: openai\nbase_url: {srv.url}/v1\nchat_model: c\nimage_model: i\n"
                          "api_key_env: TEST_KEY\nbackoff_s: 0.01\nrequests_per_minute: 60000\n")  # fmt: skip
        r = cli("eval", world_bench, "--model", config, "--out", tmp_path / "run", "--limit", "4")
        assert r.code == 0, r.err
    assert cli("report", tmp_path / "run", "--out", tmp_path / "report.html").code == 0
    written = [p for p in [*tmp_path.rglob("*")] if p.is_file() and p != config]
    assert any(p.name == "cache.sqlite" for p in written) and any(p.name == "results.sqlite" for p in written)
    found = [(p.name, leak) for p in written for leak in leaks if leak.encode() in p.read_bytes()]
    assert found == []
    assert b"[redacted]" in (tmp_path / "run" / "results.sqlite").read_bytes()


@pytest.mark.parametrize("codec", ["pybase64", "standard library"])
def test_base64_is_strict_and_round_trips_with_either_codec(monkeypatch: pytest.MonkeyPatch, codec: str) -> None:
    import os

    from yanami.models import _client

    if codec != "pybase64":
        monkeypatch.setattr(_client, "_pybase64", None)  # the base install, without the `api` extra
    data = os.urandom(3001)
    text = _client.to_base64(data)
    assert text == base64.b64encode(data).decode()
    assert _client.from_base64(text) == data and _client.from_base64(text.encode()) == data
    for bad in ["YQ=", "YQ==YQ==", "Y Q==", "=YQ=", "YQ==\n", "Y\u00e9Q=", "YQ==!"]:
        with pytest.raises(ValueError):
            _client.from_base64(bad)


def test_a_write_behind_cache_answers_at_once_and_keeps_every_response(tmp_path) -> None:
    from yanami.models import ResponseCache

    path = tmp_path / "cache.sqlite"
    cache = ResponseCache(path, write_behind=True)
    for k in range(200):
        cache.put(f"k{k}", "text", f"reply {k}".encode())
        assert cache.get(f"k{k}") == ("text", f"reply {k}".encode())  # from memory or from the file
    cache.close()  # what waits is written first
    again = ResponseCache(path)
    assert [again.get(f"k{k}") for k in (0, 199)] == [("text", b"reply 0"), ("text", b"reply 199")]
    assert again.get("missing") is None
    again.close()


def test_a_write_behind_cache_copies_its_log_back_as_it_goes(tmp_path, monkeypatch) -> None:
    import time

    from yanami.models import ResponseCache

    monkeypatch.setattr("yanami.models._http.GATHER_S", 0.0)  # a transaction per response, whatever the load
    path = tmp_path / "cache.sqlite"
    cache = ResponseCache(path, write_behind=True, alone=True)  # (a local run's)
    reply = bytes(range(256)) * 400  # 100 KB: two 64 KB pages each
    for k in range(120):  # 12 MB in all
        cache.put(f"k{k}", "image", reply)
        deadline = time.monotonic() + 30
        while cache._behind and time.monotonic() < deadline:  # written before the next one comes
            time.sleep(0.001)
    log = tmp_path / "cache.sqlite-wal"  # written, not closed: the log as a run leaves it
    assert not cache._behind and log.stat().st_size < 6_000_000  # a few MB (`LOG_PAGES`), not the 12 MB written
    cache.close()
    again = ResponseCache(path)
    assert again.get("k0") == again.get("k119") == ("image", reply)
    again.close()


def test_a_cache_alone_on_an_empty_file_misses_without_sqlite_and_finds_what_it_stored(tmp_path, monkeypatch) -> None:
    import sqlite3

    from yanami.models import ResponseCache

    path = tmp_path / "cache.sqlite"
    cache = ResponseCache(path, write_behind=True, alone=True)
    asked: list[str] = []
    real = sqlite3.connect

    def counting(*args: object, **kw: object) -> sqlite3.Connection:
        asked.append(str(args[0]))
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite3, "connect", counting)
    assert [cache.get(f"new{k}") for k in range(50)] == [None] * 50
    assert len(asked) == 1  # the file made once; no lookup opened a connection to read
    for k in range(100):
        cache.put(f"k{k}", "text", f"reply {k}".encode())
    cache.close()  # written, and gone from memory: what is found now is read from the file
    assert cache.get("k7") == ("text", b"reply 7") and cache.get("k99") == ("text", b"reply 99")
    assert cache.get("never") is None
    cache.close()
    shared = ResponseCache(path, write_behind=True, alone=True)  # a file that holds responses: always asked
    assert shared.get("k0") == ("text", b"reply 0")
    shared.close()


def test_a_cache_opened_beside_is_made_in_its_own_thread_and_ready_for_the_first_lookup(tmp_path, monkeypatch) -> None:
    import sqlite3
    import threading

    from yanami.models import ResponseCache

    path = tmp_path / "run" / "cache.sqlite"
    cache = ResponseCache(path, write_behind=True, alone=True)
    made_in: list[str] = []
    real = sqlite3.connect

    def recording(*args: object, **kw: object) -> sqlite3.Connection:
        made_in.append(threading.current_thread().name)
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite3, "connect", recording)
    cache.open_beside()
    assert not path.parent.exists()  # no client holds it: nothing is made
    cache.held = True  # (as a client does)
    cache.open_beside()
    assert cache.get("k") is None  # waits for the opening under way, if any, then needs no connection
    assert path.is_file() and made_in == ["yanami-cache-open"]  # made once, and not by the caller
    cache.open_beside()  # (open already: nothing more)
    cache.put("k", "text", b"reply")
    cache.close()
    assert ResponseCache(path).get("k") == ("text", b"reply")


def test_a_cache_that_cannot_be_made_beside_fails_at_its_first_use(tmp_path) -> None:
    from yanami.models import ResponseCache

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    cache = ResponseCache(blocker / "cache.sqlite")
    cache.held = True
    cache.open_beside()  # the failure is not lost in the thread: the first use meets it
    with pytest.raises(OSError):
        cache.get("k")
    cache.close()
    assert blocker.read_text() == "not a folder"
