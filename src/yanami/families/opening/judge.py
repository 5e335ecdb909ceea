"""OpenING's judge: one VLM call on a record's whole interleaved answer, scored on seven criteria.

The answer is graded when the model has given its last picture (the record's last turn); every
earlier item of the record gets a verdict that says so and carries no scores. The request is
laid out as OpenING's ``GPT_score_A.py`` lays it out (``main_evaluate_output_directory`` and
``get_gpt4answer``): a system message, then one user message: ``INPUT: `` and the record's input
steps (each text, its picture after it), ``\\nOUTPUT: `` and the model's steps, then a line asking
for the JSON. A picture's text ends with ``<IMG_k></IMG_k>``, numbered from 0 across input and
output.

Two modes (docs/benchmarks.md lists every difference):

- **yanami's own** (default): yanami's prompt (``prompts/opening-judge-v1.txt``), the pictures'
  own bytes, temperature 0, seed 0, a JSON Schema, one repair request for a reply that does not
  parse.
- **OpenING's code** (``--protocol-source DIR``, a checkout of ``LanceZPF/OpenING``): its system
  prompt (``prompts/detailed_score_system.txt``) and its function (``evaluate_multimodal_content``,
  read from ``GPT_score_A.py`` without running it) sent as ``functions`` with ``function_call``;
  no temperature, no token limit, no seed; every picture resized to 512 x 512 and re-encoded as
  JPEG (quality 75), a picture that cannot be (a mode JPEG cannot hold) left out as the code
  leaves it out; the reply read as the code reads it (the call's arguments, else the content, as
  JSON); then ``summarize_GPT_scores.py``'s rules: a reply that wraps its criteria in
  ``"scores"``, or has a criterion whose Score is null, is dropped (not scored by the
  benchmark's code); a Score that is not a number counts in no mean.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from PIL import Image
from pydantic import BaseModel, ConfigDict, Field

from yanami.contract import (
    NOT_SCORED,
    SOURCE_MARK,
    Dialogue,
    ImagePart,
    InputImage,
    InputMessage,
    InputText,
    JudgeError,
    Output,
    OwnHistory,
    Refused,
    UserError,
    Verdict,
    read_regular,
    sha256_hex,
)
from yanami.families.opening import CRITERIA
from yanami.families.opening.importer import CRITERION_TEXT
from yanami.judges import JudgeContext, VLMJudge, ask_json, input_image, own_judge, vlm_judge
from yanami.models import Malformed, Transient
from yanami.store import Dataset

PROMPT_VERSION = "v1"
"""yanami's own OpenING prompt (``prompts/opening-judge-v1.txt``): bumped when it changes."""
LATER = "graded with the whole answer"
"""The reason of an earlier item's verdict: the record is graded at its last picture."""

SYSTEM_FILE = "prompts/detailed_score_system.txt"
CODE_FILE = "GPT_score_A.py"
CODE_FUNCTION = "get_gpt4answer"
"""Where OpenING's code builds its judge request (and assigns ``functions``)."""
INPUT = "INPUT: "
OUTPUT = "\nOUTPUT: "
NO_OUTPUT = "\nOUTPUT: None"
ASK = "\nPlease only output the json result: "
"""The texts OpenING's code puts around the record and the answer."""
ASKS = 5
"""How many times a grading asks (the same request, past the cache) for a reply that reads as
JSON, where OpenING's code asks without end."""
SIDE = 512
"""It resizes every picture to SIDE x SIDE before sending it."""
MAX_SOURCE_BYTES = 1 << 20


def tags(k: int) -> str:
    """What ends the text of the k-th picture (from 0, input and output together)."""
    return f" <IMG_{k}></IMG_{k}>"


class _Criterion(BaseModel):
    model_config = ConfigDict(extra="ignore")
    Score: int = Field(ge=0, le=10)
    Justification: str = ""


class _Scores(BaseModel):
    """yanami's own reply schema: each criterion by its name."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    correctness: _Criterion = Field(alias="Correctness")
    coherency: _Criterion = Field(alias="Image-Text Coherency")
    consistency: _Criterion = Field(alias="Multi-step Consistency")
    quality: _Criterion = Field(alias="Content Quality")
    preference: _Criterion = Field(alias="Human Preference Alignment")
    completeness: _Criterion = Field(alias="Completeness")
    richness: _Criterion = Field(alias="Content Richness")


@dataclass(frozen=True)
class Source:
    """OpenING's judge as its repository holds it: the system prompt and the function."""

    system: str
    function: dict[str, Any]

    @property
    def digest(self) -> str:
        """SHA-256 of both, recorded in the judge's version."""
        return hashlib.sha256(f"{self.system}\0{json.dumps(self.function, sort_keys=True)}".encode()).hexdigest()


def _source_file(root: Path, rel: str) -> str:
    path = root / rel
    if not path.is_file():
        raise UserError(f"--protocol-source: {path}: not found (give the root of a checkout of LanceZPF/OpenING)")
    try:
        return read_regular(path, MAX_SOURCE_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--protocol-source: {path}: cannot be read ({exc})") from None


def load_source(root: Path) -> Source:
    """OpenING's system prompt, and the function its code sends, read without running the code."""
    if not root.is_dir():
        raise UserError(f"--protocol-source: {root}: not a directory")
    system = _source_file(root, SYSTEM_FILE)
    where = root / CODE_FILE
    try:
        tree = ast.parse(_source_file(root, CODE_FILE), filename=str(where))
    except (SyntaxError, ValueError, RecursionError) as exc:
        raise UserError(f"--protocol-source: {where}: not a Python file this reads ({exc})") from None
    found: object = None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == CODE_FUNCTION:
            for inner in ast.walk(node):
                if isinstance(inner, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "functions" for t in inner.targets
                ):
                    try:
                        found = ast.literal_eval(inner.value)
                    except (ValueError, SyntaxError, RecursionError):
                        found = None
    function = found[0] if isinstance(found, list) and len(found) == 1 else None
    criteria = function.get("parameters", {}).get("properties") if isinstance(function, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not isinstance(criteria, dict):
        raise UserError(f"--protocol-source: {where}: {CODE_FUNCTION} assigns no `functions` list of one function")
    if sorted(criteria) != sorted(CRITERIA):
        raise UserError(f"--protocol-source: {where}: its function's criteria {sorted(criteria)} are not OpenING's")
    return Source(system, function)


def code_picture(data: bytes) -> InputImage | None:
    """A picture as OpenING's ``encode_image`` sends it: resized to 512 x 512 and saved as JPEG at
    Pillow's default quality; None where that fails (its code then leaves the picture out)."""
    try:
        with Image.open(io.BytesIO(data)) as img:
            buf = io.BytesIO()
            img.resize((SIDE, SIDE)).save(buf, format="JPEG")
    except Exception:  # its code catches every failure here and leaves the picture out
        return None
    jpeg = buf.getvalue()
    return InputImage(jpeg, sha256_hex(jpeg), SIDE, SIDE, media_type="image/jpeg")


def code_scores(reply: object) -> dict[str, float] | str:
    """A reply's scores as ``summarize_GPT_scores.py`` counts them, or why it drops the reply."""
    if not isinstance(reply, dict):
        return f"the reply is JSON but no object ({type(reply).__name__}), which summarize_GPT_scores.py cannot read"
    if "scores" in reply:
        wrapped = reply["scores"]
        if not isinstance(wrapped, dict) or wrapped.get("Score") is None:
            return 'the reply wraps its criteria in "scores", which summarize_GPT_scores.py drops'
    marked = {k: v["Score"] for k, v in reply.items() if isinstance(v, dict) and "Score" in v}
    if any(s is None for s in marked.values()):
        return "a criterion's Score is null, which summarize_GPT_scores.py drops"
    scores = {k: float(s) for k, s in marked.items() if isinstance(s, int | float)}
    return scores if scores else "no criterion has a Score that is a number"


def _code_reads(text: str, schema: type[BaseModel]) -> Any:
    """The reply read as OpenING's code reads it: JSON, and not empty (else it asks again)."""
    reply = json.loads(text)
    if not reply:
        raise ValueError("an empty reply")
    return reply


class OpeningJudge:
    """OpenING's protocol over a VLM judge (see the module docstring)."""

    def __init__(self, vlm: VLMJudge, bench: Dataset, source: Source | None = None) -> None:
        self.vlm, self.bench, self.source = vlm, bench, source
        self.name = vlm.name
        prompts = f"opening-own-{PROMPT_VERSION}" if source is None else f"opening-{SOURCE_MARK}-{source.digest[:12]}"
        self.version = f"{vlm.version}+{prompts}"
        """``...+opening-own-v1``: yanami's prompt; ``...+opening-source-<digest>``: OpenING's."""
        self.settings = vlm.settings
        criteria = "\n".join(f"{i}. {c}: {CRITERION_TEXT[c]}" for i, c in enumerate(CRITERIA, 1))
        own = files("yanami.families.opening").joinpath("prompts", f"opening-judge-{PROMPT_VERSION}.txt")
        self.system = source.system if source is not None else own.read_text(encoding="utf-8").format(criteria=criteria)

    def grade(self, d: Dialogue, output: Output, history: OwnHistory) -> Verdict:
        """The record's grade at its last picture; an earlier item's verdict says it waits for it."""
        last = d.turns[-1].index
        if output.kind != "turn" or output.turn != last:
            return self._verdict(output, {}, f"{LATER} after turn {last}")
        content = self._content(d, output, history.earlier)
        scores = self._ask(output.item, content)
        if isinstance(scores, str):
            return self._verdict(output, {}, f"{NOT_SCORED}: {scores}")
        return self._verdict(output, scores, "")

    def _verdict(self, output: Output, scores: dict[str, float], reason: str) -> Verdict:
        return Verdict(item=output.item, judge=self.name, judge_version=self.version, status="ok", scores=scores,
                       reason=reason)  # fmt: skip

    def _picture(self, data: bytes) -> InputImage | None:
        return code_picture(data) if self.source is not None else input_image(data)

    def _content(
        self, d: Dialogue, output: Output, earlier: Callable[[int], tuple[bytes | None, str | None]]
    ) -> list[InputText | InputImage]:
        """The user message's parts, as ``GPT_score_A.py`` builds them from the record and the answer."""
        steps = d.meta.params.get("input")
        if not isinstance(steps, list) or not steps:
            raise JudgeError(f"{output.item}: the dialogue keeps no OpenING input (meta.params.input): not imported "
                             "by `yanami import opening`")  # fmt: skip
        shown = iter([p for p in d.turns[0].user.parts if isinstance(p, ImagePart)])
        count = -1
        texts: list[str] = []
        pictures: list[InputImage | None] = []
        for step in steps:
            raw = str(step.get("text", "")).strip()
            text = raw.replace("<BEGIN>", "").replace("<image>", "")
            picture = self._picture(self.bench.image_bytes(next(shown))) if step.get("image") else None
            if picture is not None:
                count += 1
                text += tags(count)
            texts.append(text)
            pictures.append(picture)
        out_texts: list[str] = []
        out_pictures: list[InputImage | None] = []
        for k in range(len(d.turns) // 2):
            said = earlier(2 * k)[1]
            drawn = output.image if 2 * k + 1 == output.turn else earlier(2 * k + 1)[0]
            text = (said or "").strip().replace("<image>", "")
            picture = self._picture(drawn) if drawn is not None else None
            if picture is not None:
                count += 1
                text += tags(count)
            out_texts.append(text)
            out_pictures.append(picture)
        content: list[InputText | InputImage] = []
        texts[0] = INPUT + texts[0]
        for text, picture in zip(texts, pictures, strict=True):
            content.append(InputText(text.replace("<BEGIN>", "")))
            if picture is not None:
                content.append(picture)
        if out_texts:
            out_texts[0] = OUTPUT + out_texts[0]
        else:
            out_texts.append(NO_OUTPUT)
        for i in range(max(len(out_texts), len(out_pictures))):
            if i < len(out_texts):
                content.append(InputText(out_texts[i]))
            if i < len(out_pictures) and (p := out_pictures[i]) is not None:
                content.append(p)
        content.append(InputText(ASK))
        return content

    def _ask(self, item: str, content: list[InputText | InputImage]) -> dict[str, float] | str:
        if self.source is None:
            before = (InputMessage("system", (InputText(self.system),)),)
            try:
                reply = ask_json(self.vlm.model.answer or _no_answer, item, content, _Scores, before=before,
                                 max_tokens=1400)  # fmt: skip
            except ValueError as exc:
                raise JudgeError(f"{self.name}: invalid judge output after a repair request ({exc})") from None
            except (Transient, Malformed, Refused, RuntimeError) as exc:
                raise JudgeError(f"{self.name}: {exc}") from None
            return {c: float(getattr(reply, f).Score) for c, f in zip(CRITERIA, _Scores.model_fields, strict=True)}
        problem = ""
        for attempt in range(ASKS):  # its code asks again, the same request, until a reply reads
            try:
                raw = self.vlm.ask_once(item, content, _Scores, self.system, max_tokens=None, parse=_code_reads,
                                        function=self.source.function, fresh=attempt > 0)  # fmt: skip
            except ValueError as exc:
                problem = str(exc)
                continue
            return code_scores(raw)
        raise JudgeError(f"{self.name}: no reply of {ASKS} read as JSON (the last: {problem}); OpenING's code asks "
                         "until one does, and the next run asks again")  # fmt: skip


def _no_answer(request: object) -> str:
    raise JudgeError("the judge model does not answer")


def make_judge(spec: str, context: JudgeContext) -> OpeningJudge:
    """OpenING's judge hook: its protocol over the VLM judge ``spec`` names (a model config file),
    asking OpenING's own prompt and function where ``context.protocol_source`` names its checkout."""
    dataset = context.dataset
    if dataset is None:
        raise UserError(f"--judge {spec}: OpenING's judge grades a bench, and none was given")
    if spec == "exact":
        raise UserError(f"{dataset.root}: an OpenING bench is graded by a VLM judge: --judge FILE (docs/benchmarks.md)")
    source = load_source(Path(context.protocol_source)) if context.protocol_source is not None else None
    # with OpenING's code the judge is asked at no temperature at all (the server's default)
    vlm = vlm_judge(spec, context, temperature=None) if source is not None else own_judge(spec, context)
    if not isinstance(vlm, VLMJudge):
        raise UserError(f"--judge {spec}: an OpenING bench needs a VLM judge (a model config file)")
    return OpeningJudge(vlm, dataset, source)
