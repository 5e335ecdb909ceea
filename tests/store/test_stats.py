"""Dataset statistics (Tables 7 and 8) computed on known data."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from yanami.contract import Dialogue
from yanami.store import Dataset, dataset_stats, stats_tables
from yanami.synthetic import synthetic_dialogue


def by_hand(dialogues: list[Dialogue]) -> dict[str, Any]:
    images = [len({p.sha256 for p in d.images()}) for d in dialogues]
    turns = [len(d.turns) for d in dialogues]
    atomic = sum(1 for d in dialogues for c in d.checks() if str(c.kind) == "atomic")
    return {"images": images, "turns": turns, "atomic": atomic}


def test_stats_match_a_count_by_hand() -> None:
    dialogues = [synthetic_dialogue(i, seed=2)[0] for i in range(12)]
    s = dataset_stats(dialogues)
    h = by_hand(dialogues)
    assert s.dialogues == 12
    assert s.images == sum(h["images"])
    assert s.turns == s.user_messages == s.assistant_messages == sum(h["turns"])
    assert s.messages == 2 * s.turns
    assert s.max_turns == max(h["turns"])
    assert s.max_messages == 2 * max(h["turns"])
    assert abs(s.images_per_turn - sum(h["images"]) / sum(h["turns"])) < 1e-12
    dist = s.images_per_dialogue_distribution
    assert dist["<4"] == sum(k < 4 for k in h["images"])
    assert dist["=5"] == sum(k == 5 for k in h["images"])
    assert dist[">=6"] == sum(k >= 6 for k in h["images"])
    assert dist["<4"] + dist[">=4"] == 12
    assert s.scenario_dialogues == {"fusion": 3, "editing": 3, "world_modeling": 3, "reasoning": 3}
    assert s.questions == {"RR": 12, "CR": 12, "CT": 12, "CU": 12}
    assert s.atomic_checks == h["atomic"] == 12 * 20
    assert s.by_scenario["fusion"].atomic_checks_per_dialogue == 20
    assert s.dialogues_with_4_capabilities == 12
    assert s.capability_coverage == 1.0


def test_repeated_image_counts_once_per_dialogue() -> None:
    d, _ = synthetic_dialogue(0, seed=0)
    raw = json.loads(d.model_dump_json())
    first = next(p for p in raw["turns"][0]["user"]["parts"] if p["type"] == "image")
    raw["turns"][1]["user"]["parts"].append(first)
    again = Dialogue.model_validate(raw)
    assert dataset_stats([again]).images == dataset_stats([d]).images


def test_empty() -> None:
    s = dataset_stats([])
    assert s.dialogues == 0 and s.images_per_dialogue == 0.0


def test_cli_json_and_tables(cli: Callable[..., Any], built: Path) -> None:
    r = cli("stats", built, "--json")
    assert r.code == 0
    data = json.loads(r.out)
    assert data == json.loads(dataset_stats(Dataset(built)).model_dump_json())
    r = cli("stats", built)
    assert r.code == 0
    for label in ("Total dialogues", "Images / dialogue turn", ">=6", "world_modeling", "Capability coverage"):
        assert label in r.out


SCENARIO_COUNTS = ("dialogues", "images", "turns", "questions", "atomic_checks")


def test_every_table_fits_80_columns_without_losing_a_digit() -> None:
    # Counts of a large corpus: before, the by-scenario table cut numbers to "1,23…" at 80 columns.
    big = 1_234_567_890
    s = dataset_stats([synthetic_dialogue(i, seed=2)[0] for i in range(4)])
    s = s.model_copy(
        update={
            "dialogues": big,
            "images": big,
            "turns": big,
            "messages": 2 * big,
            "atomic_checks": big,
            "capability_checks": big,
            "questions": dict.fromkeys(s.questions, big),
            "capability_dialogues": dict.fromkeys(s.capability_dialogues, big),
            "images_per_dialogue_distribution": dict.fromkeys(s.images_per_dialogue_distribution, big),
            "by_scenario": {
                k: v.model_copy(update=dict.fromkeys(SCENARIO_COUNTS, big)) for k, v in s.by_scenario.items()
            },
        }
    )
    console = Console(width=80, record=True, file=io.StringIO())
    for table in stats_tables(s):
        console.print(table)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
    assert text.count("1,234,567,890") >= 6 * 4 + 4 + 4 + 6  # every count, whole
    assert "2,469,135,780" in text
    for name in ("fusion", "editing", "world_modeling", "reasoning", "spatial_physical_consistency", "CU"):
        assert name in text


def test_cli_stats_fits_80_columns(world_bench: Path) -> None:
    env = {**os.environ, "COLUMNS": "80"}
    proc = subprocess.run(
        [sys.executable, "-m", "yanami", "stats", str(world_bench)], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr
    path_line, *table_lines = proc.stdout.splitlines()
    assert path_line == f"{world_bench}:"  # the path alone on the first line: it may be longer than 80
    assert max(len(line) for line in table_lines) <= 80
    assert "…" not in proc.stdout
    assert "By scenario" in proc.stdout


def test_lexical_variety_counts_distinct_ngrams_per_thousand_words(built: Path) -> None:
    import itertools
    import re

    from yanami.contract import TextPart

    dialogues = list(Dataset(built))
    s = dataset_stats(dialogues)
    messages = [
        re.findall(r"[a-z0-9]+(?:'[a-z]+)?", " ".join(p.text for p in m.parts if isinstance(p, TextPart)).lower())
        for d in dialogues
        for t in d.turns
        for m in (t.user, t.assistant)
    ]
    words = sum(map(len, messages))
    unigrams = {w for m in messages for w in m}
    bigrams = {pair for m in messages for pair in itertools.pairwise(m)}
    assert s.lexical_words == words > 0
    assert s.lexical_variety["1"] == round(1000 * len(unigrams) / words, 1)
    assert s.lexical_variety["2"] == round(1000 * len(bigrams) / words, 1)  # n-grams never cross messages
    assert 0 < s.lexical_variety["1"] <= s.lexical_variety["2"]
