"""IMUG-Bench (``ccccEsion/IMUG-Bench``): its facts, its importer, its protocol (rules, grids,
judge, prompts) and its scores. Importing this package loads its facts only."""

from yanami.contract import FamilyFacts

EVALUATION_POINT = "evaluation_point"
"""IMUG-Bench's check kind: an evaluation point of an image turn, each scored 0-5."""

# ccccEsion/IMUG-Bench, config/domain_classes.json
# fmt: off
FACTS = FamilyFacts(
    "imug",
    "IMUG-Bench",
    "imug-2",
    {
        "Static Spatial": (
            "Color_Reasoning", "Apparel", "Interior_Design", "Geometric_Coloring", "Mechanisms",
            "Object_Inference", "Counterintuitive_Reasoning",
        ),
        "Temporal Causal": ("Botany", "Chemistry", "Physics", "Damage_Repair", "Weather"),
        "Hybrid": (
            "Stack_Simulation", "DIY", "Cooking", "Mirror_Reasoning", "Storage", "Paper_Crafting",
            "Everyday_Tasks",
        ),
    },
    open_domains=True,
    gt_history="IMUG-Bench has no reference images for its image turns",
    default_history="self",
    check_kinds={EVALUATION_POINT: 5},
    importer="yanami.families.imug.importer:import_imug",
    judge="yanami.families.imug.judge:make_judge",
    scorer="yanami.families.imug.scores:SCORER",
)
# fmt: on
