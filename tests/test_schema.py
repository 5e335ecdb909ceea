"""The data model: what it accepts, the consistency rules, and what a model may see."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from yanami.contract import (
    Capability,
    Check,
    CheckKind,
    Dialogue,
    ImagePart,
    ImageSource,
    Message,
    Question,
    QuestionType,
    TextPart,
)
from yanami.store import dialogue_problems
from yanami.synthetic import synthetic_dialogue

SHA = "a" * 64


def small(**changes: Any) -> Dialogue:
    """A two-turn dialogue: a user image, then a generated image with two checks."""
    base: dict[str, Any] = {
        "id": "d1",
        "scenario": "editing",
        "capabilities": ["coreference", "constraint_adherence", "correction_updating", "history_retrieval"],
        "turns": [
            {
                "index": 0,
                "user": {
                    "role": "user",
                    "parts": [
                        {"type": "text", "text": "Here is my room."},
                        {"type": "image", "sha256": SHA, "width": 8, "height": 8, "source": "user"},
                    ],
                },
                "assistant": {"role": "assistant", "parts": [{"type": "text", "text": "Nice."}]},
                "capabilities": ["coreference"],
            },
            {
                "index": 1,
                "user": {"role": "user", "parts": [{"type": "text", "text": "Make the lamp red; no logos."}]},
                "assistant": {
                    "role": "assistant",
                    "parts": [{"type": "image", "sha256": "b" * 64, "width": 8, "height": 8, "source": "assistant"}],
                },
                "capabilities": ["constraint_adherence"],
                "checks": [
                    {"id": "c1", "kind": "atomic", "text": "The lamp is red.", "category": "attribute"},
                    {"id": "c2", "kind": "capability", "capability": "constraint_adherence", "text": "No logo."},
                ],
                "hidden": {"state": {"lamp": "red"}, "intent": {"op": "recolour"}},
            },
        ],
        "questions": [
            {
                "id": "q1",
                "type": "CT",
                "after_turn": 1,
                "text": "What must never appear?",
                "answer": "A logo.",
                "choices": ["A logo", "A lamp"],
                "answer_letters": ["A"],
                "aligned_checks": ["c2"],
            }
        ],
        "meta": {"generator": "test"},
    }
    base.update(changes)
    return Dialogue.model_validate(base)


def test_a_valid_dialogue_round_trips_through_json() -> None:
    d = small()
    assert dialogue_problems(d) == []
    again = Dialogue.model_validate_json(d.model_dump_json(), strict=True)
    assert again == d
    assert again.model_dump_json() == d.model_dump_json()


def test_parts_stay_interleaved_in_order() -> None:
    d = small()
    parts = d.turns[0].user.parts
    assert isinstance(parts[0], TextPart) and isinstance(parts[1], ImagePart)
    assert [p.sha256 for p in d.images()] == [SHA, "b" * 64]
    assert d.turns[1].is_target and not d.turns[0].is_target


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"sha256": "../../etc/passwd"}, "sha256"),
        ({"sha256": "A" * 64}, "sha256"),
        ({"width": 0}, "width"),
        ({"source": "robot"}, "source"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_image_part_rejects(bad: dict[str, Any], field: str) -> None:
    raw = {"type": "image", "sha256": SHA, "width": 8, "height": 8, "source": "user", **bad}
    with pytest.raises(ValidationError) as exc:
        ImagePart.model_validate(raw)
    assert field in {str(e["loc"][-1]) for e in exc.value.errors()}


def _mutate(d: Dialogue, fn: Any) -> Dialogue:
    raw = json.loads(d.model_dump_json())
    fn(raw)
    return Dialogue.model_validate(raw)


PROBLEMS = [
    ("index gap", lambda r: r["turns"][1].update(index=2), ("turns", 1, "index")),
    ("user role", lambda r: r["turns"][0]["user"].update(role="assistant"), ("turns", 0, "user", "role")),
    ("duplicate check", lambda r: r["turns"][1]["checks"][0].update(id="c2"), ("turns", 1, "checks", 1, "id")),
    (
        "capability check without capability",
        lambda r: r["turns"][1]["checks"][1].update(capability=None),
        ("turns", 1, "checks", 1, "capability"),
    ),
    ("unlisted capability", lambda r: r["capabilities"].remove("coreference"), ("capabilities",)),
    ("duplicate capability", lambda r: r["capabilities"].append("coreference"), ("capabilities",)),
    ("question after the end", lambda r: r["questions"][0].update(after_turn=2), ("questions", 0, "after_turn")),
    (
        "aligned check missing",
        lambda r: r["questions"][0].update(aligned_checks=["zz"]),
        ("questions", 0, "aligned_checks", 0),
    ),
    (
        "aligned check is atomic",
        lambda r: r["questions"][0].update(aligned_checks=["c1"]),
        ("questions", 0, "aligned_checks", 0),
    ),
    (
        "answer letter out of range",
        lambda r: r["questions"][0].update(answer_letters=["C"]),
        ("questions", 0, "answer_letters", 0),
    ),
    (
        "choices without letters",
        lambda r: r["questions"][0].update(answer_letters=[]),
        ("questions", 0, "answer_letters"),
    ),
    (
        "letters without choices",
        lambda r: r["questions"][0].update(choices=[]),
        ("questions", 0, "answer_letters"),
    ),
    (
        "checks without a generated image",
        lambda r: r["turns"][1]["assistant"]["parts"][0].update(source="user"),
        ("turns", 1, "checks"),
    ),
]


def _weave(r: dict[str, Any]) -> None:
    """The small dialogue as a WEAVE one: a domain instead of a scenario, key points."""
    r.update(family="weave", scenario=None, domain="edit")
    for c in r["turns"][1]["checks"]:
        c.update(kind="key_point", capability=None, category=None)
    r["questions"][0]["aligned_checks"] = []


def _then(*fns: Any) -> Any:
    return lambda r: [fn(r) for fn in fns]


def _ref(**ref: Any) -> Any:
    return lambda r: r["turns"][1]["checks"][0].update(references=[ref])


PROBLEMS += [
    ("YANAMI without a scenario", lambda r: r.update(scenario=None), ("scenario",)),
    ("YANAMI with a domain", lambda r: r.update(domain="edit"), ("domain",)),
    ("WEAVE with a scenario", _then(_weave, lambda r: r.update(scenario="editing")), ("scenario",)),
    ("WEAVE without a domain", _then(_weave, lambda r: r.update(domain=None)), ("domain",)),
    ("an IMUG domain in WEAVE", _then(_weave, lambda r: r.update(domain="Botany")), ("domain",)),
    ("an atomic check in WEAVE", _then(_weave, lambda r: r["turns"][1]["checks"][0].update(kind="atomic")),
     ("turns", 1, "checks", 0, "kind")),
    ("a key point in YANAMI", lambda r: r["turns"][1]["checks"][0].update(kind="key_point"),
     ("turns", 1, "checks", 0, "kind")),
    ("a reference to a later turn", lambda r: r["turns"][0].update(references=[{"turn": 1, "side": "user"}]),
     ("turns", 0, "references", 0, "turn")),
    ("a dependency on its own output", lambda r: r["turns"][1].update(references=[{"turn": 1, "side": "assistant"}]),
     ("turns", 1, "references", 0, "turn")),
    ("a model version of a user message", _ref(turn=0, side="user", of="model"),
     ("turns", 1, "checks", 0, "references", 0, "of")),
    ("an image that is not there", _ref(turn=0, side="user", image=1),
     ("turns", 1, "checks", 0, "references", 0, "image")),
    ("an answer and checks", lambda r: r["turns"][1].update(answer={"letters": ["A"]}), ("turns", 1, "answer")),
    ("an answer letter past G", lambda r: r["turns"][0].update(answer={"letters": ["H"]}),
     ("turns", 0, "answer", "letters", 0)),
    ("a dynamic answer with nothing to resolve it", lambda r: r["turns"][0].update(answer={"dynamic": True}),
     ("turns", 0, "answer", "dynamic")),
]  # fmt: skip


def test_references_a_family_may_make() -> None:
    ok = _then(_weave, _ref(turn=1, side="assistant", image=0))
    assert dialogue_problems(_mutate(small(), ok)) == []  # a judge may compare with the turn's own reference image
    imug = _then(_weave, lambda r: r.update(family="imug", domain="Botany"),
                 lambda r: [c.update(kind="evaluation_point") for c in r["turns"][1]["checks"]],
                 lambda r: r["turns"][1].update(references=[{"turn": 0, "side": "assistant", "of": "model"}]),
                 lambda r: r["turns"][1]["assistant"].update(parts=[]))  # fmt: skip
    d = _mutate(small(), imug)
    assert dialogue_problems(d) == [] and d.group == "Botany" and small().group == "editing"


@pytest.mark.parametrize(("fn", "loc"), [p[1:] for p in PROBLEMS], ids=[p[0] for p in PROBLEMS])
def test_dialogue_problems(fn: Any, loc: tuple[Any, ...]) -> None:
    problems = dialogue_problems(_mutate(small(), fn))
    assert [p[0] for p in problems] == [loc], problems


def test_hidden_annotations_are_apart_from_what_a_model_sees() -> None:
    d = small()
    visible = [m.model_dump() for t in d.turns for m in (t.user, t.assistant)]
    text = json.dumps(visible)
    for secret in ("recolour", 'lamp": "red', "No logo.", "A logo.", "c2"):
        assert secret not in text
    assert set(Message.model_fields) == {"role", "parts"}
    for model in (Check, Question):
        assert "hidden" in model.model_fields
    assert "hidden" in type(d.turns[0]).model_fields


def test_json_schema_names_every_enum_value() -> None:
    schema = json.dumps(Dialogue.model_json_schema())
    for value in [*Capability, *QuestionType, *CheckKind, *ImageSource, "key_point", "evaluation_point"]:
        assert f'"{value}"' in schema  # the check kinds: every installed family's


def test_synthetic_dialogues_are_consistent_and_deterministic() -> None:
    a, images_a = synthetic_dialogue(3, seed=1)
    b, images_b = synthetic_dialogue(3, seed=1)
    assert a == b and images_a == images_b
    assert dialogue_problems(a) == []
    assert len(set(a.capabilities)) >= 4
