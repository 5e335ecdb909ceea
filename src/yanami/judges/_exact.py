"""The exact judge for world data: answers by option or value matching, images by parsing.

State consistency and the capability-specific checks are decided by evaluating each
check's predicate on the scene the pixel parser reads from the candidate image, seen from
the target turn's camera. Visual Quality measures how cleanly the image parses as a
world scene (see `world_quality`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from yanami.contract import (
    AnswerVerdict,
    Dialogue,
    ImageVerdict,
    JudgeError,
    Output,
    OwnHistory,
    Question,
    Turn,
    UserError,
    Verdict,
)
from yanami.judges._choice import choice_score, option_score, value_score
from yanami.judges._context import JudgeContext
from yanami.judges._verdicts import answer_verdict, image_verdict, question_for
from yanami.store import json_object
from yanami.world import (
    IN_PROCESS_PARSER,
    Parse,
    Parser,
    Scene,
    Scenes,
    View,
    credited,
    evaluate,
    read_candidate,
    rebase_checks,
    shown_before,
    turn_state,
    view_of,
)

VERSION = "6"
"""2: a stack hidden inside its support's outline is told from a lone object by colour.
3: under Self-History, a check on a value an earlier free choice set is judged against the
model's own earlier image (`yanami.world.rebase_checks`).
4: the parser reads a picture whose pixels are not the renderer's own (another tone, white
balance or gamma, JPEG, another size, a border or letterbox, a slight crop) as it reads the
render, and Visual Quality counts the faults a person sees (broken silhouettes, specks,
floor damage) once those are undone: such pictures scored far lower under 3. A candidate is
read as a person reads it (`yanami.world._frames`): a copy of an earlier picture earns no
check that needs a change, a picture drawn from another viewpoint no relation; a check the
model's own earlier choices made ill-posed (Self-History) is undecidable (None), not failed;
a DSU reply is read for the one option it names (`yanami.judges.read_options`).
5: the parser reads through what real pipelines add (issue 33): lines of any colour and 1-4 px
along the edges and frames outside the picture (resized back or not) are stripped; what is
drawn over the margin (a watermark, a logo, the corners a slight turn leaves filled) and reads
as no object of the world is discounted: not an object, and neither specks nor floor damage to
Visual Quality; a blurred render is read as a changed picture; a changed picture's colours are
read inside the silhouette that explains them; the pieces of one object that came apart are
one object; a blur costs Visual Quality by how far it spreads the objects' edges
(`Parse.spread`; a blurred render was read as a clean one before, with no such cost). Under 4,
a 1-px grey line along the edges scored SC 23 and VQ 0, a corner watermark was read as an
extra object (SC 79, VQ 0), a turn of 1 degree scored SC 77-80.
6: a changed picture's tone map is fitted in three forms (a free gain and offset per channel,
a gain alone, an offset alone) and the objects choose among them as they choose the style and
curvature, a constrained form only when it explains them clearly better (`MAP_FORMS`,
`TONE_FORM_COST` in `yanami.world._parse`). Under 5, JPEG at quality 30 bent the free
form's blue gain to 0.65 and read red objects as brown: SC 96.6 on the default bench's targets."""


def world_quality(parse: Parse) -> int:
    """Visual Quality (0..10): the faults a person sees in a picture of the world.

    The parser has already undone what leaves a picture's content untouched (its tone,
    white balance, gamma and hue, JPEG, a slight blur, its size, borders, frames, letterbox
    bars and lines along its edges, a slight crop), reads through a slight turn, and leaves out
    what is drawn over the margin (a watermark, a logo, a turn's filled corners), so none of
    that costs anything: a clean render and such copies of it score 10. What does:

    - nothing that reads as an object of the world (blank, noise, garbage): 0;
    - damage to the floor: 1 point per grey level by which the floor, tone undone, strays
      from the known floor on average beyond 1 (noise, smudges, a painted-over part);
    - specks: 1 point per 1 % of the picture in foreground specks too small to be objects;
    - broken objects: for each object or stack, 2.5 points per pixel by which its outline
      strays on average from the silhouette of the hypothesis that explains it beyond 2
      (half erased, smeared, doubled, melted into another, blurred), at most 10 each;
    - a blur: 3 points per pixel by which the objects' edges are spread beyond 4 (`Parse.spread`:
      a JPEG, a resize or a blur of sigma up to 1.5 spreads them less; sigma 3 or 4 more).
    """
    if not parse.objects:
        return 0
    floor = max(0.0, parse.residual - 1.0)
    specks = 100 * parse.speckle
    shapes = sum(min(10.0, 2.5 * max(0.0, misfit - 2.0)) for misfit in parse.misfits)
    blur = 3.0 * max(0.0, parse.spread - 4.0)
    return max(0, min(10, round(10 - floor - specks - shapes - blur)))


def unreadable_check(dialogues: Iterable[Any]) -> str | None:
    """The first check (``dialogue/check``) with no predicate the exact judge can evaluate, or None
    where it can grade every target turn (a world dataset; a constructed one carries checks a
    person reads, graded by a VLM judge). ``dialogues``: `Dialogue`s, or their fields
    (`Dataset.fields`)."""
    for d in dialogues:
        for t in d.turns:
            for c in t.checks:
                if not json_object(c.hidden.predicate):
                    return f"{d.id}/{c.id}"
    return None


class ExactJudge:
    """Grades world data exactly (see the module docstring)."""

    name = "exact"
    version = VERSION

    def __init__(self, parser: Parser = IN_PROCESS_PARSER) -> None:
        self.parser = parser
        """Reads the candidates (the runner's has ``--workers`` processes; results never depend on it)."""

    def grade(self, d: Dialogue, output: Output, history: OwnHistory) -> Verdict:
        """A reply by `judge_answer`; a candidate image by `judge_image`, or under Self-History by
        `judge_image_in_history` against the model's own earlier images."""
        if output.kind == "question":
            q = question_for(d, output)
            return answer_verdict(self.name, self.version, output, q, self.judge_answer(d, q, output.text or ""))
        if output.kind != "turn" or output.image is None:
            raise JudgeError(f"{output.item}: the exact judge grades a DSU reply or a target turn's image")
        turn = d.turns[output.turn]
        unreadable = next((c.id for c in turn.checks if not isinstance(c.hidden.predicate, dict)), None)
        if unreadable is not None:
            raise JudgeError(
                f"{output.item}: check {unreadable} has no predicate the exact judge can evaluate (a dataset the "
                "world did not build, such as a constructed one, is graded by a VLM judge: --judge FILE)"
            )
        if history.images is not None:
            iv = self.judge_image_in_history(d, turn, output.image, history.images)
        else:
            iv = self.judge_image(d, turn, output.image)
        return image_verdict(self.name, self.version, d, output, iv)

    def judge_answer(self, d: Dialogue, q: Question, reply: str) -> AnswerVerdict:
        """YANAMI's option reading for one right option, option matching for several, else value matching."""
        if q.choices and len(q.answer_letters) == 1:
            # full credit or none (docs/evaluation.md), not IMUG-Bench's format-weighted letters
            score, reason = option_score(reply, q.answer_letters[0], q.choices)
        elif q.choices:
            score, reason = choice_score(reply, list(q.answer_letters), list(q.choices))
        else:
            score, reason = value_score(reply, q.answer)
        return AnswerVerdict(score, reason)

    def judge_image(self, d: Dialogue, turn: Turn, image: bytes) -> ImageVerdict:
        """Every check of the turn evaluated on the parsed candidate, and the world Visual Quality."""
        # a JSON object each (`unreadable_check` refuses a bench with any other), or None
        predicates = {c.id: p if isinstance(p := c.hidden.predicate, dict) else None for c in turn.checks}
        return self._grade(d, turn, image, predicates, {})

    def judge_image_in_history(self, d: Dialogue, turn: Turn, image: bytes, own: Mapping[int, bytes]) -> ImageVerdict:
        """As `judge_image`, with each check on a value an earlier free choice set rebased on the
        model's own earlier image of that turn (read by the same parser)."""
        seen = Scenes(own, lambda t: self.parser.cached(own[t], turn_state(d.turns[t]).azimuth).to_scene())
        return self._grade(d, turn, image, rebase_checks(d, turn, seen), seen)

    def _grade(
        self,
        d: Dialogue,
        turn: Turn,
        image: bytes,
        predicates: Mapping[str, dict[str, Any] | None],
        own: Mapping[int, Scene],
    ) -> ImageVerdict:
        azimuth = turn_state(turn).azimuth
        parse = self.parser.cached(image, azimuth)  # identical candidates (across runs too) are parsed once
        scene = parse.to_scene()
        # None: ill-posed by the model's own earlier choices (Self-History), undecidable for it
        checks = {cid: None if p is None else evaluate(p, scene, azimuth) for cid, p in predicates.items()}
        target = view_of(turn)
        shown = shown_before(d, turn.index, own)
        note = ""
        if target is not None and shown:
            # a copy of an earlier picture earns no change; a picture from another viewpoint, no relation
            reading = read_candidate(scene, target, shown)
            latest = View(shown[-1].seen, shown[-1].truth.azimuth, shown[-1].truth.style)
            checks = credited(dict(predicates), checks, reading, latest)
            note = reading.reason()
        objects = "; ".join(f"{o.size} {o.colour} {o.material} {o.shape}" for o in parse.objects)
        reason = f"parsed {len(parse.objects)} objects: {objects}" + (f"; {note}" if note else "")
        return ImageVerdict(checks, float(world_quality(parse)), reason)


def exact_judge(spec: str, context: JudgeContext | None = None) -> ExactJudge:
    """The factory of the judge kind ``exact`` (``--judge exact``): it reads images with the
    context's parser (in this process without one) and refuses a bench whose checks carry no
    predicate it can evaluate."""
    if spec:
        raise UserError(f"--judge exact:{spec}: the exact judge takes no argument (use --judge exact)")
    if context is not None and context.dataset is not None:
        where = unreadable_check(context.dataset.fields())
        if where is not None:
            raise UserError(
                f"{context.dataset.root}: check {where} carries no predicate the exact judge can evaluate (a dataset "
                "the world did not build, such as a constructed one): grade it with a VLM judge, --judge FILE"
            )
    return ExactJudge() if context is None or context.parser is None else ExactJudge(context.parser)
