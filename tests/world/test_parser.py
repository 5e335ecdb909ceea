"""The parser is an object passed down: its worker processes belong to whoever made it."""

from __future__ import annotations

import random

import pytest

from yanami.models import _registry, load_model
from yanami.world import IN_PROCESS_PARSER, Parser, parse_image, random_scene, render_png


def test_a_parser_with_workers_reads_as_the_process_does_and_ends_them() -> None:
    data = render_png(random_scene(random.Random(11)), 45.0)  # a picture no other test parses
    with Parser(2) as parser:
        got = parser.cached(data, 45.0)
        assert parser._pool is not None  # parsed in its worker processes
        assert got == parse_image(data, 45.0)
        assert IN_PROCESS_PARSER.cached(data, 45.0) is got  # one cache for every parser
    assert parser._pool is None
    assert parser.cached(data, 45.0) is got  # a closed parser still reads, in the caller


def test_the_run_parser_reaches_only_factories_that_name_it(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = Parser(1)
    assert load_model("reference:stateful", parser=parser).parser is parser  # type: ignore[attr-defined]
    assert load_model("reference:visible", parser=parser).parser is parser  # type: ignore[attr-defined]
    assert load_model("reference:stateful").parser is IN_PROCESS_PARSER  # type: ignore[attr-defined]

    seen: list[tuple[str, ...]] = []
    copier = load_model("reference:copy-input")

    def plain(rest: str) -> object:  # a plug-in that reads no pictures
        seen.append((rest,))
        return copier

    class EntryPoint:
        value = "toy:plain"

        def load(self) -> object:
            return plain

    monkeypatch.setattr(_registry, "_kinds", lambda group: {"toy": EntryPoint()})
    load_model("toy:x", parser=parser)
    assert seen == [("x",)]
