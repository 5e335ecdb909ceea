"""The fast path for validating dialogue lines, derived from the pydantic data model.

Pydantic builds a full model object for every part, check and turn, which caps parsing
at about 10,000 dialogues a second on one core. ``msgspec`` checks the same types,
bounds, enums and unknown fields several times faster. Its decoder here is *derived*
from the pydantic models field by field, so the two cannot drift apart; the regex
patterns are checked in one batch afterwards (`patterns_ok`), and the consistency rules
by the same `DialogueWalk` that pydantic-validated dialogues go through.

The fast path only ever says "valid"; for anything else the caller asks pydantic
(strict mode), which is the reference and explains the problem.
"""

from __future__ import annotations

import re
import types
from collections.abc import Sequence
from enum import Enum
from functools import cache
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types as at
import msgspec
from pydantic import BaseModel, JsonValue
from pydantic.fields import FieldInfo

from yanami.contract import ID_PATTERN, KIND_CHECK, SHA256_PATTERN, Dialogue
from yanami.store._walk import DialogueWalk

PATTERNED_FIELDS = {
    ("Dialogue", "id"),
    ("ImagePart", "sha256"),
    ("Check", "id"),
    ("Question", "id"),
    ("Question", "aligned_checks"),
}
"""The fields with a regex pattern, all of which `DialogueWalk` collects for `patterns_ok`."""

_ID = ID_PATTERN.strip("^$")
_SHA = SHA256_PATTERN.strip("^$")
_IDS = re.compile(f"{_ID}(?:/{_ID})*")
_SHAS = re.compile(f"{_SHA}(?:/{_SHA})*")


@cache
def dialogue_decoder() -> msgspec.json.Decoder[msgspec.Struct]:
    """A decoder for one JSONL line: the types, bounds, enums and fields of ``Dialogue``."""
    return msgspec.json.Decoder(_struct(Dialogue, None))


def fast_walk(line: bytes | memoryview) -> DialogueWalk | None:
    """Decode and check one JSONL line on the fast path.

    Returns the walk of a line that is valid in every respect (types, patterns,
    consistency), or None where anything is off.
    """
    try:
        d = dialogue_decoder().decode(line)
    except msgspec.DecodeError:  # also the base class of msgspec.ValidationError
        return None
    walk = DialogueWalk(d)
    if walk.problems or not patterns_ok(walk):
        return None
    return walk


def json_object(value: object) -> bool:
    """Whether a free-form JSON field (``JsonValue``) holds an object: a dict in a ``Dialogue``,
    raw JSON that opens with ``{`` in the fast decoder's object (which leaves such fields undecoded)."""
    if isinstance(value, msgspec.Raw):
        return memoryview(value)[:1].tobytes() == b"{"  # (a value: no white space before it)
    return isinstance(value, dict)


def patterns_ok(walk: DialogueWalk) -> bool:
    """Whether every id and image hash a walk collected matches its pattern."""
    # One regex call over all values joined by "/" (which no valid value contains)
    # instead of one call per value; counting the separators proves none was smuggled in.
    joined = "/".join(walk.ids)
    if _IDS.fullmatch(joined) is None or joined.count("/") != len(walk.ids) - 1:
        return False
    if not walk.shas:
        return True
    joined = "/".join(walk.shas)
    return _SHAS.fullmatch(joined) is not None and joined.count("/") == len(walk.shas) - 1


_structs: dict[tuple[type[BaseModel], str | None], type[msgspec.Struct]] = {}


def _struct(model: type[BaseModel], tag: str | None) -> type[msgspec.Struct]:
    key = (model, tag)
    if key in _structs:
        return _structs[key]
    fields: list[tuple[str, object] | tuple[str, object, object]] = []
    for name, info in model.model_fields.items():
        if tag is not None and name == "type":
            continue  # carried by the tagged union instead
        tp = _constrained(_translate(info.annotation), info.metadata)
        if info.is_required():
            fields.append((name, tp))
        else:
            fields.append((name, tp, _plain_default(info.get_default(call_default_factory=True))))
    struct = msgspec.defstruct(
        model.__name__,
        fields,
        kw_only=True,  # required and optional fields in the model's own order
        forbid_unknown_fields=True,
        gc=False,  # trees without cycles: no need for the garbage collector to track them
        tag_field="type" if tag is not None else None,
        tag=tag,
        namespace={"type": tag} if tag is not None else None,  # readable like the pydantic field
    )
    _structs[key] = struct
    return struct


def _plain_default(value: object) -> object:
    if isinstance(value, BaseModel):
        # A nested model left out takes its defaults, as in pydantic.
        struct, fields = _struct(type(value), None), value.model_dump()
        return msgspec.field(default_factory=lambda: struct(**fields))
    if isinstance(value, list | dict) and value:
        raise TypeError("msgspec copies only empty mutable defaults")
    return value


def _translate(tp: object) -> object:
    if tp is JsonValue:
        return msgspec.Raw  # free-form annotations: any well-formed JSON, not decoded
    origin = get_origin(tp)
    if origin is Annotated:
        base, *meta = get_args(tp)
        extra: list[object] = []
        for m in meta:
            if isinstance(m, FieldInfo):
                if m.discriminator is not None:
                    return _tagged_union(base)
                extra.extend(m.metadata)
        return _constrained(_translate(base), extra)
    if origin in (Union, types.UnionType):
        return Union[tuple(_translate(a) for a in get_args(tp))]  # noqa: UP007
    if origin is list:
        (item,) = get_args(tp)
        return types.GenericAlias(list, (_translate(item),))  # list[...] of a type made at runtime
    if origin is dict:
        if get_args(tp) != (str, Any):
            raise TypeError(f"no fast form for {tp!r}")
        return dict[str, msgspec.Raw]  # free-form annotations: an object, its values not decoded
    if origin is Literal or tp is Any or tp in (str, int, bool, float, type(None)):
        return tp
    if isinstance(tp, type) and issubclass(tp, Enum):
        return Literal[tuple(m.value for m in tp)]  # a StrEnum member equals its value
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return _struct(tp, None)
    raise TypeError(f"no fast form for {tp!r}")


def _tagged_union(union: object) -> object:
    members = []
    for model in get_args(union):
        (tag,) = get_args(model.model_fields["type"].annotation)
        members.append(_struct(model, tag))
    return Union[tuple(members)]  # noqa: UP007


def _constrained(tp: object, metadata: Sequence[object]) -> object:
    kw: dict[str, Any] = {}  # msgspec.Meta's keywords (its overloads take no typed mapping)
    for m in metadata:
        if isinstance(m, at.Gt):
            kw["gt"] = m.gt
        elif isinstance(m, at.Ge):
            kw["ge"] = m.ge
        elif isinstance(m, at.MinLen):
            kw["min_length"] = m.min_length
        elif isinstance(m, at.MaxLen):
            kw["max_length"] = m.max_length
        elif m is KIND_CHECK:
            pass  # a check's kind: `DialogueWalk` checks it against the kinds of the dialogue's family
        elif getattr(m, "pattern", None) is None:
            raise TypeError(f"no fast form for constraint {m!r}")
        # patterns: checked in one batch by `patterns_ok`, much faster than per field
    return Annotated[tp, msgspec.Meta(**kw)] if kw else tp
