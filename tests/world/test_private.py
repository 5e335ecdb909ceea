"""Private benches (issue 33, 2): a secret seed, only its hash recorded, everything seed-dependent following it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from yanami.store import Dataset, Manifest, provenance


def _manifest(path: Path) -> Manifest:
    return Manifest.model_validate_json((path / "manifest.json").read_text())


def _letters(path: Path) -> list[list[str]]:
    return [[q.answer_letters[0] for q in d.questions if q.answer_letters] for d in Dataset(path)]


def test_a_private_build_keeps_no_trace_of_its_seed(cli, tmp_path) -> None:
    a, b, public = tmp_path / "a", tmp_path / "b", tmp_path / "public"
    for out in (a, b):
        r = cli("build", "--out", out, "--per-scenario", "1", "--private")
        assert r.code == 0, r.err
    assert cli("build", "--out", public, "--per-scenario", "1").code == 0
    ma, mb = _manifest(a), _manifest(b)
    for m in (ma, mb):
        p = m.generator.params
        assert p["private"] is True and p["seed"] is None and len(p["seed_sha256"]) == 64
        assert provenance(m.generator)[0] == "private"
    assert ma.generator.params["seed_sha256"] != mb.generator.params["seed_sha256"]
    assert provenance(_manifest(public).generator)[0] == "public"
    # no dialogue records the seed; the content, the options and the letters follow the secret seed
    for path in (a, b):
        assert all(d.meta.seed is None for d in Dataset(path))
    texts = {path: [t.user.text() for d in Dataset(path) for t in d.turns] for path in (a, b, public)}
    assert texts[a] != texts[b] and texts[a] != texts[public]
    choices = {path: [q.choices for d in Dataset(path) for q in d.questions] for path in (a, b, public)}
    assert choices[a] != choices[b] != choices[public]
    assert _letters(a) != _letters(b)
    # the secret is in no file of the bench: only a 128-bit draw's hash
    for f in a.rglob("*"):
        if f.is_file() and f.suffix in (".json", ".jsonl"):
            text = f.read_text()
            assert '"seed": 42' not in text
    assert cli("validate", a).code == 0


def test_private_and_seed_together_is_one_line(cli, tmp_path) -> None:
    r = cli("build", "--out", tmp_path / "x", "--preset", "tiny", "--private", "--seed", "3")
    assert r.code == 2 and "--private" in r.err and "Traceback" not in r.err
    assert not (tmp_path / "x").exists()


def test_the_same_seed_gives_the_same_public_bench(cli, tmp_path) -> None:
    """Without --private the seed (42 unless given) is recorded and the build is reproducible."""
    for name in ("p", "q"):
        assert cli("build", "--out", tmp_path / name, "--preset", "tiny").code == 0
    assert (tmp_path / "p" / "manifest.json").read_bytes() == (tmp_path / "q" / "manifest.json").read_bytes()
    m = json.loads((tmp_path / "p" / "manifest.json").read_text())
    assert m["generator"]["params"]["seed"] == 42 and "seed_sha256" not in m["generator"]["params"]
    assert hashlib.sha256(b"42").hexdigest() not in (tmp_path / "p" / "manifest.json").read_text()
