"""A family is a plug-in: one registered from outside the package (an installed distribution's
entry point in the group ``yanami.families``) goes through import -> eval -> score -> report
with yanami's own commands, which never ask which family they hold."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from yanami.contract import Check
from yanami.core import _families as families
from yanami.models.fake import FakeServer, chat_text

TOY = '''
"""A toy benchmark family: arithmetic questions answered in text, graded by exact match."""
import json
from pathlib import Path

from yanami import __version__
from yanami.contract import Dialogue, FamilyFacts, Verdict, read_rows
from yanami.scoring import Scored, Table, render_page
from yanami.store import DatasetWriter, Generator

FACTS = FamilyFacts(
    "toy", "Toy", "toy-1", {"numbers": ("sums", "products")},
    check_kinds={"toy_point": 3},
    importer="toyfamily:import_toy", judge="toyfamily:make_judge", scorer="toyfamily:SCORER",
)


def import_toy(src, out, *, overwrite=False, link=True, on_record=None):
    records = json.loads(Path(src).read_text())
    generator = Generator(name="import", version=__version__, params={"family": "toy"})
    with DatasetWriter(out, split="bench", generator=generator, overwrite=overwrite) as w:
        for r in records:
            w.add_dialogue(Dialogue.model_validate({
                "id": f"toy-{r['id']}", "family": "toy", "domain": r["domain"],
                "turns": [{"index": 0, "user": {"role": "user", "parts": [{"type": "text", "text": r["question"]}]},
                           "assistant": {"role": "assistant", "parts": [{"type": "text", "text": r["answer"]}]},
                           "answer": {"text": r["answer"]}}],
                "meta": {"generator": "import-toy"},
            }))
        return w.commit()


class ExactMatch:
    name, version = "exact-match", "1"

    def grade(self, d, output, history):
        right = (output.text or "").strip() == d.turns[output.turn].answer.text
        return Verdict(item=output.item, judge=self.name, judge_version=self.version, status="ok",
                       score=float(right), scores={"acc": float(right)})


def make_judge(spec, context):
    return ExactMatch()


class ToyScorer:
    def score(self, runs, judge):
        rows, valid, expected = [], 0, 0
        for run in runs:
            got = read_rows(run, judge)
            scores = [v.score for v in got.verdicts.values() if v.status == "ok"]
            rows.append([run.name, 100 * sum(scores) / len(scores) if scores else None, len(scores)])
            valid, expected = valid + len(scores), expected + got.manifest.items
        main = Table("toy", "Toy: accuracy", ["Run", "Accuracy", "Items"], rows)
        data = {"family": "toy", "runs": [{"run": r[0], "accuracy": r[1], "items": r[2]} for r in rows]}
        return Scored(main, [main], [], data, (valid, expected), "toy summary: " + json.dumps(data))

    def report(self, runs, judge, samples, bench):
        scored = self.score(runs, judge)
        entries = [{"label": r.name, "details": "a toy run", "privileged": ""} for r in runs]
        return render_page("Toy report", runs=entries, warnings=[], table_list=scored.tables), []


SCORER = ToyScorer()
'''


@pytest.fixture
def toy_family(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The toy family installed as a distribution would be: its module, and a dist-info whose
    entry point registers it (``toy = "toyfamily:FACTS"``)."""
    site = tmp_path / "site"
    (site / "toyfamily-0.1.dist-info").mkdir(parents=True)
    (site / "toyfamily.py").write_text(textwrap.dedent(TOY))
    (site / "toyfamily-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: toyfamily\nVersion: 0.1\n")
    (site / "toyfamily-0.1.dist-info" / "entry_points.txt").write_text("[yanami.families]\ntoy = toyfamily:FACTS\n")
    monkeypatch.syspath_prepend(str(site))
    _forget_plugins()
    yield
    sys.modules.pop("toyfamily", None)
    _forget_plugins()


def _forget_plugins() -> None:
    for cached in (families.family_of, families._plugins, families.check_kinds):
        cached.cache_clear()


def test_a_family_owns_its_check_kinds_and_their_scales(toy_family: None) -> None:
    check = Check.model_validate({"id": "c1", "kind": "toy_point", "text": "The sum is shown."})
    assert check.kind == "toy_point" and check.scale == 3
    assert Check.model_validate({"id": "c2", "kind": "key_point", "text": "x"}).scale == 10  # WEAVE's, beside it
    assert families.check_kinds()["toy_point"] == 3


def test_a_check_kind_no_installed_family_declares_is_refused() -> None:
    _forget_plugins()
    with pytest.raises(ValueError, match="not a check kind any installed family declares"):
        Check.model_validate({"id": "c1", "kind": "toy_point", "text": "The sum is shown."})


def test_a_family_from_outside_the_package_runs_import_eval_score_report(
    toy_family: None, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    assert "toy" in families.known_families()
    source = tmp_path / "toy.json"
    source.write_text(json.dumps([
        {"id": 1, "domain": "sums", "question": "What is 2 + 2?", "answer": "4"},
        {"id": 2, "domain": "products", "question": "What is 3 x 3?", "answer": "9"},
    ]))  # fmt: skip
    r = cli("import", "toy", source, "--out", tmp_path / "bench")
    assert r.code == 0, r.err
    assert "2 dialogues, 0 images (toy, protocol toy-1)" in r.out
    assert cli("validate", tmp_path / "bench").code == 0

    def brain(path: str, body: dict[str, Any]) -> Any:
        return "4" if "2 + 2" in chat_text(body) else "10"  # right once, wrong once

    with FakeServer(brain=brain) as server:
        model = tmp_path / "model.yaml"
        model.write_text(f"kind: openai\nbase_url: {server.url}/v1\nchat_model: m\nbackoff_s: 0.01\nmax_retries: 0\n")
        r = cli("eval", tmp_path / "bench", "--model", model, "--judge", "anything", "--out", tmp_path / "run")
        assert r.code == 0, r.err
    assert "Toy: accuracy" in r.out and "50" in r.out  # the family's own main table, printed by eval

    data = json.loads(cli("score", tmp_path / "run", "--json").out)
    assert data == {"family": "toy", "runs": [{"run": "run", "accuracy": 50.0, "items": 2}]}
    assert cli("score", tmp_path / "run").out.startswith("toy summary: ")
    assert cli("report", tmp_path / "run", "--out", tmp_path / "toy.html").code == 0
    page = (tmp_path / "toy.html").read_text()
    assert "<h1>Toy report</h1>" in page and "Toy: accuracy" in page


def test_an_unknown_family_is_one_line(tmp_path: Path, cli: Callable[..., Any]) -> None:
    r = cli("import", "nosuch", tmp_path, "--out", tmp_path / "x")
    assert r.code == 2 and "'nosuch': not a kind of source (parquet, imug, opening, weave" in r.err
