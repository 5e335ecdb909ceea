"""The parser is an object passed down: its worker processes belong to whoever made it."""

from __future__ import annotations

import os
import random
import threading

import pytest

from yanami.models import _registry, load_model
from yanami.world import IN_PROCESS_PARSER, Parser, parse_image, random_scene, render_png
from yanami.world._parse import SLACK


def test_a_parser_with_workers_reads_as_the_process_does_and_ends_them() -> None:
    data = render_png(random_scene(random.Random(11)), 45.0)  # a picture no other test parses
    with Parser(2) as parser:
        got = parser.cached(data, 45.0)
        assert parser._pools  # parsed in its worker processes
        assert got == parse_image(data, 45.0)
        assert IN_PROCESS_PARSER.cached(data, 45.0) is got  # one cache for every parser
    assert not parser._pools
    assert parser.cached(data, 45.0) is got  # a closed parser still reads, in the caller


def test_each_thread_has_a_worker_of_its_own_until_it_has_a_queue() -> None:
    """A thread's calls go to one worker (a dialogue's pictures are read where the ones before them
    were, so the process's kept components serve them); threads are given workers in turn, and a
    call goes to the least busy worker when the thread's own has more than `SLACK` more in hand."""
    with Parser(2) as parser:
        pids = {threading.get_ident(): {parser.offload(os.getpid) for _ in range(6)}}

        def calls() -> None:
            pids[threading.get_ident()] = {parser.offload(os.getpid) for _ in range(6)}

        other = threading.Thread(target=calls)
        other.start()
        other.join()
        mine, theirs = pids.values()
        assert len(mine) == len(theirs) == 1 and mine != theirs and os.getpid() not in mine | theirs
        # calls in hand, not yet returned: this thread's worker takes them until it has SLACK + 1 more than the other
        held = [parser._worker() for _ in range(SLACK + 3)]
        home = held[0][0]  # type: ignore[index]
        assert [k for k, _ in held] == [home] * (SLACK + 1) + [1 - home, home]  # type: ignore[misc]
        assert parser._busy[home] == SLACK + 2 and parser._busy[1 - home] == 1


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
