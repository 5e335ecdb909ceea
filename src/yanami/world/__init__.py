"""The embedded procedural world: scenes, a renderer, a pixel parser and dialogue builders.

Everything here runs offline and is exact by construction: every image is rendered from
a scene stored with the dialogue, and every check is a predicate over that scene.
"""

from yanami.contract import PRESETS
from yanami.world._agents import AGENTS, TRIVIAL, VISIBLE, ReferenceAgent, TrivialAgent
from yanami.world._audit import Audit, audit_dialogue
from yanami.world._audit_text import SHORTCUT_LIMIT, AuditResult, audit_bench, audit_text
from yanami.world._build import build_world, plan
from yanami.world._camera import HEIGHT, WIDTH, Camera
from yanami.world._floors import FLOOR_VQ, floor_shares
from yanami.world._frames import Shown, credited, in_frame, read_candidate, shown_before
from yanami.world._hidden import (
    ConstraintState,
    QuestionIntent,
    TurnIntent,
    TurnState,
    question_intent,
    turn_intent,
    turn_state,
)
from yanami.world._ops import View, apply_op
from yanami.world._parse import IN_PROCESS as IN_PROCESS_PARSER
from yanami.world._parse import Parse, ParsedObject, Parser, parse_cached, parse_image, parse_views
from yanami.world._place import VIEWS, random_scene, valid
from yanami.world._predicates import evaluate, select
from yanami.world._readers import TextReader, best_text_reader
from yanami.world._reference import reference_agent
from yanami.world._render import DEFAULT_STYLE, STYLES, render, render_array, render_png
from yanami.world._reparse import Disagreement, Reparsed, reparse_bench
from yanami.world._scenarios import compose_dialogue
from yanami.world._scene import BASE_AZIMUTH, COLOURS, EXTENT, MATERIALS, SHAPES, SIZES, Scene, WorldObject, relation
from yanami.world._selfhistory import Scenes, rebase_checks, view_of
from yanami.world._shortcuts import Battery, Shortcuts
from yanami.world._visible import VisibleAgent, visible_misses

__all__ = [
    "AGENTS",
    "BASE_AZIMUTH",
    "COLOURS",
    "DEFAULT_STYLE",
    "EXTENT",
    "FLOOR_VQ",
    "HEIGHT",
    "IN_PROCESS_PARSER",
    "MATERIALS",
    "PRESETS",
    "SHAPES",
    "SHORTCUT_LIMIT",
    "SIZES",
    "STYLES",
    "TRIVIAL",
    "VIEWS",
    "VISIBLE",
    "WIDTH",
    "Audit",
    "AuditResult",
    "Battery",
    "Camera",
    "ConstraintState",
    "Disagreement",
    "Parse",
    "ParsedObject",
    "Parser",
    "QuestionIntent",
    "ReferenceAgent",
    "Reparsed",
    "Scene",
    "Scenes",
    "Shortcuts",
    "Shown",
    "TextReader",
    "TrivialAgent",
    "TurnIntent",
    "TurnState",
    "View",
    "VisibleAgent",
    "WorldObject",
    "apply_op",
    "audit_bench",
    "audit_dialogue",
    "audit_text",
    "best_text_reader",
    "build_world",
    "compose_dialogue",
    "credited",
    "evaluate",
    "floor_shares",
    "in_frame",
    "parse_cached",
    "parse_image",
    "parse_views",
    "plan",
    "question_intent",
    "random_scene",
    "read_candidate",
    "rebase_checks",
    "reference_agent",
    "relation",
    "render",
    "render_array",
    "render_png",
    "reparse_bench",
    "select",
    "shown_before",
    "turn_intent",
    "turn_state",
    "valid",
    "view_of",
    "visible_misses",
]
