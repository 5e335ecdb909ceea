"""OpenING (``LanceZPF/OpenING``): open-ended interleaved image-text generation, graded as a
whole by a VLM on seven criteria (``GPT_score_A.py``) and summarized per model
(``summarize_GPT_scores.py``).

This family is written as an outside plug-in would be: it imports yanami's public modules only
(`yanami.contract`, `yanami.store`, `yanami.judges`, `yanami.scoring`, `yanami.models`), never a
private one nor another family (``tests/test_architecture.py`` holds it to that). Importing this
package loads its facts only.
"""

from yanami.contract import FamilyFacts

CRITERION = "criterion"
"""OpenING's check kind: one of its seven criteria, scored 0-10 on the whole interleaved answer."""
STEP = "step"
"""The check kind of a step's picture before the last: graded with the whole answer at the last step."""

CRITERIA = (
    "Correctness",
    "Image-Text Coherency",
    "Multi-step Consistency",
    "Content Quality",
    "Human Preference Alignment",
    "Completeness",
    "Content Richness",
)
"""OpenING's seven criteria, most important first, named as its judge names them."""

# LanceZPF/OpenING, OpenING-benchmark/test_data.jsonl: meta-task -> its subtasks (ids 1-23; id 2
# has two names), in the source's order
# fmt: off
FACTS = FamilyFacts(
    "opening",
    "OpenING",
    "opening-1",
    {
        "Storybook Creation": ("Story Writting", "Fiction Writing"),
        "Multimodal Report Generation": ("Travel Guide Generation", "Museum Guide Book Generation"),
        "Dynamic biography generation": ("Dynamic Biography Generation",),
        "Multimodal Content Completion": ("Storybook Completion", "Multimodal Report Completion"),
        "Multimodal Layout Generation": ("Document with Layout Generation", "Slide with Note Generation"),
        "GUI Navigation": ("Website GUI Navigation", "In-APP GUI Navigation", "Cross-APP GUI Navigation",
                           "OS GUI Navigation"),
        "Interactive Image Editing": ("Interactive Portrait Image Editing", "Interactive Landscape Image Editing"),
        "Interactive Visual Design": ("Interior Design", "Architectural Design", "Art and Exhibition Design",
                                      "Product Design", "Interactive Graphic Advertisement Editing"),
        "Multimodal Exam": ("Geometric Problem Test", "Circuit Problem Test"),
        "Graph Generation": ("Mind Map Generation", "Figure Relationship Diagram Generation"),
        "Event Reasoning and Deductive Simulation": (
            "Multi-view News Generation", "Dynamic Sports Event Analysis", "Interactive Historical Interpretation",
            "Unsolved Mysteries Exploration", "Dream Analysis and Scene Reconstruction",
        ),
        "2D Image Reasoning": ("Multimodal Biological Reasoning", "Multimodal Landscape Reasoning",
                               "Multimodal Analogy Reasoning", "Interactive Jigsaw Puzzle"),
        "Image-based 3D Reasoning": ("Interactive Novel View Synthesis",),
        "Multimodal Information Summary": ("Interactive Multi-concept Image Composition",),
        "Multimodal Information Recommendation": (
            "Interactive Film and Television Recommendation", "Interactive Goods Recommendation",
            "Interactive Food Recommendation",
        ),
        "Multimodal Brainstorming": ("Business Scenarios Brainstorming", "Academic Scenarios Brainstorming"),
        "Multimodal Time Series Forecasting": ("Multimodal Action Anticipation", "Visual Traffic Forcasting"),
        "Geographical Tasks": ("Interactive Remote Sensing Image Rendering", "Interactive Street View Image Rendering",
                               "Urban Planning and Development Simulation"),
        "Social Media Tasks": ("Plog and Social Media Content Generation", "Chat with Memes"),
        "Fashion Tasks": ("Interactive Virtual Try-on", "Multimodal Dressing Suggestion", "Fashion Trend Forecasting"),
        "Cooking Tasks": ("Multimodal Recipe Generation", "Multimodal Cooking Assistant"),
        "Educational Tasks": ("Interactive Tutorial Generation", "Interactive Science Popularization"),
        "Healthcare Tasks": ("Fitness and Health Consulting",),
        "Embodied-AI Tasks": ("Autonomous Driving and In-door Navigation",),
    },
    open_domains=True,
    gt_history="OpenING grades the interleaved answer a model writes on its own, step after step",
    default_history="self",
    check_kinds={CRITERION: 10, STEP: 1},
    importer="yanami.families.opening.importer:import_opening",
    judge="yanami.families.opening.judge:make_judge",
    scorer="yanami.families.opening.scores:SCORER",
)
# fmt: on
