"""The contract in one place: what a plug-in (a model, a judge, a family) and a reader of runs
need, and nothing else.

- The data model (`yanami.schema`): a `Dialogue` of `Turn`s, their `Message`s of `TextPart`s and
  `ImagePart`s, `Question`s and `Check`s, and what a family records beside them.
- The model and judge protocol (`yanami/models/_protocol.py`, imports nothing heavy): a `Model`
  answers or generates for a `Request`; a `Judge` grades an `Output` against the dialogue and
  the model's `OwnHistory`, returning a `Verdict`.
- The run record (`yanami.run_format`, pydantic alone): a run's `RunManifest`, and per item a
  `Prediction` and its `Verdict` with `CheckResult`s; `History` and `Layout`.
- A family's facts (`yanami.families`): `FamilyFacts`, looked up with `family_of`.

``from yanami.contract import ...`` loads pydantic and these modules only, never numpy, Pillow
or the world.
"""

from yanami.families import FamilyFacts, family_of
from yanami.models import (
    GT_HISTORY,
    OUTPUT_LONG_EDGE,
    InputImage,
    InputMessage,
    InputText,
    Judge,
    JudgeError,
    Model,
    Output,
    OwnHistory,
    Refused,
    Request,
)
from yanami.run_format import (
    CheckResult,
    History,
    JudgeInfo,
    Layout,
    Prediction,
    RunManifest,
    Status,
    Verdict,
    read_manifest,
)
from yanami.schema import (
    Answer,
    Check,
    CheckKind,
    Dialogue,
    ImagePart,
    Message,
    Question,
    TextPart,
    Turn,
    TurnRef,
)

__all__ = [
    "GT_HISTORY",
    "OUTPUT_LONG_EDGE",
    "Answer",
    "Check",
    "CheckKind",
    "CheckResult",
    "Dialogue",
    "FamilyFacts",
    "History",
    "ImagePart",
    "InputImage",
    "InputMessage",
    "InputText",
    "Judge",
    "JudgeError",
    "JudgeInfo",
    "Layout",
    "Message",
    "Model",
    "Output",
    "OwnHistory",
    "Prediction",
    "Question",
    "Refused",
    "Request",
    "RunManifest",
    "Status",
    "TextPart",
    "Turn",
    "TurnRef",
    "Verdict",
    "family_of",
    "read_manifest",
]
