"""The fast validation path never accepts what the pydantic reference rejects."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from yanami.contract import Dialogue
from yanami.store import dialogue_problems
from yanami.store._fast import PATTERNED_FIELDS, fast_walk
from yanami.synthetic import synthetic_dialogue


def _models(model: type[BaseModel], seen: set[type[BaseModel]]) -> Iterator[type[BaseModel]]:
    if model in seen:
        return
    seen.add(model)
    yield model
    for info in model.model_fields.values():
        for tp in _types(info.annotation):
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                yield from _models(tp, seen)


def _types(tp: Any) -> Iterator[Any]:
    yield tp
    for arg in get_args(tp):
        yield from _types(arg)


def _has_pattern(info: Any) -> bool:
    text = repr(info.metadata) + repr(info.annotation)
    return "pattern=" in text


def test_patterned_fields_are_the_ones_the_fast_path_checks() -> None:
    found = {
        (model.__name__, name)
        for model in _models(Dialogue, set())
        for name, info in model.model_fields.items()
        if _has_pattern(info)
    }
    assert found == PATTERNED_FIELDS


def reference_ok(line: bytes) -> bool:
    try:
        d = Dialogue.model_validate_json(line, strict=True)
    except ValidationError:
        return False
    return not dialogue_problems(d)


ODD_VALUES: list[Any] = [None, 0, -1, 1.5, True, "", "x", "../x", "a" * 64 + "\n", [], {}, ["x"], "A" * 64]


def mutations(obj: Any, rng: random.Random, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str, Any]]:
    """(path, action, value) for every node: drop or add a key, or swap in an odd value."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield (*path, key), "drop", None
            yield from mutations(value, rng, (*path, key))
        yield (*path, "zz"), "set", 1
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from mutations(value, rng, (*path, i))
    for value in rng.sample(ODD_VALUES, 3):
        if path:
            yield path, "set", value


def apply(obj: Any, path: tuple[Any, ...], action: str, value: Any) -> Any:
    out = copy.deepcopy(obj)
    node = out
    for key in path[:-1]:
        node = node[key]
    if action == "drop":
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


def test_fast_path_agrees_with_pydantic_on_mutated_dialogues() -> None:
    rng = random.Random(0)
    d, _ = synthetic_dialogue(0, seed=0, image_for={})
    line = d.model_dump_json().encode()
    assert fast_walk(line) is not None  # the fast path is really taken for valid lines
    base = json.loads(line)
    checked = accepted = 0
    for path, action, value in mutations(base, rng):
        variant = json.dumps(apply(base, path, action, value)).encode()
        fast = fast_walk(variant) is not None
        if fast:
            accepted += 1
            assert reference_ok(variant), (path, action, value)
        checked += 1
    assert checked > 500
    assert accepted > 10  # some mutations are harmless (e.g. changing free text)


def test_fast_path_rejects_what_only_patterns_catch() -> None:
    d, _ = synthetic_dialogue(1, seed=0, image_for={})
    for bad_id in ["a/b", "../x", "", "x" * 200, "a\n"]:
        raw = json.loads(d.model_dump_json())
        target = next(t for t in raw["turns"] if t["checks"])
        target["checks"][0]["id"] = bad_id
        assert fast_walk(json.dumps(raw).encode()) is None, bad_id


def test_json_object_reads_a_free_form_field_on_both_paths() -> None:
    from yanami.store import json_object
    from yanami.store._fast import dialogue_decoder

    d = synthetic_dialogue(0, seed=3)[0]
    checks = [c for t in d.turns for c in t.checks]
    assert checks
    values: list[Any] = [{"all": []}, {}, [1], "x", 0, None]
    for value in values:
        raw = json.loads(d.model_dump_json())
        for t in raw["turns"]:
            for c in t["checks"]:
                c["hidden"]["predicate"] = value
        fast = dialogue_decoder().decode(json.dumps(raw).encode())
        made = Dialogue.model_validate(raw)
        on_fast = [json_object(c.hidden.predicate) for t in fast.turns for c in t.checks]
        on_made = [json_object(c.hidden.predicate) for c in made.checks()]
        assert on_fast == on_made == [isinstance(value, dict)] * len(checks), value
