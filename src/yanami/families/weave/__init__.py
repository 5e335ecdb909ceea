"""WEAVE (``weichow23/weave``): its facts, its importer, its protocol (rules, judge, prompts) and
its scores. Importing this package loads its facts only."""

from yanami.contract import FamilyFacts

KEY_POINT = "key_point"
"""WEAVE's check kind: a key point of the turn's checklist, the checklist scored together 0-10."""

WEAVE_MODES = ("t2i", "edit", "fusion", "vqa")
"""WEAVE's turn modes: by the number of images the user's turn mentions (none, one, more), or
vqa for a text reply (``infer/loader.py``, ``detect_mode``)."""

# weichow23/weave, eval/config.py (WEAVE_DOMAIN)
FACTS = FamilyFacts(
    "weave",
    "WEAVE",
    "weave-2",
    {
        "science": ("optics", "geography", "astronomy", "chemistry", "physics", "biology"),
        "creation": ("edit", "recall", "fusion", "story"),
        "logic": ("spatial", "mathematics"),
        "game": ("chess_game", "visual_jigsaw", "minecraft", "maze"),
    },
    check_kinds={KEY_POINT: 10},
    importer="yanami.families.weave.importer:import_weave",
    judge="yanami.families.weave.judge:make_judge",
    scorer="yanami.families.weave.scores:SCORER",
)
