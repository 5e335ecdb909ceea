"""World-backed stand-ins that play the pipeline's models offline, behind the scripted loopback server.

They answer the real protocols (chat completions, the images API) over a real socket, so a
preparation and a construction run end to end with no network and no model:
`StandIns.brain` is a `FakeServer` brain. What they decide is decidable from the pixels
and the world, so tests can say in advance what must happen:

- **filter** (prepare): an image whose pixels hardly vary (a blank canvas) is a
  ``generation_failure``; anything else is usable. **repair**: draws a pattern over the
  image (unless ``repair_fails`` names it). **route**: two or more images are ``fusion``;
  one image goes by its hash to editing, world_modeling or reasoning.
- **author** (construct): the pool notes name the world dialogue a group of world pictures
  came from (``world:N`` pools, `world_pool`); the world composes that dialogue again and
  writes it as a plan, each assistant image as a complete scene description
  (`scene_instruction`).
- **image model**: renders the scene an instruction describes (`parse_instruction`).
- **verifier**: the logic check compares every instruction with the plan's own state after
  that turn; the image check parses the image with the world's pixel parser and compares it
  with the instruction's scene.

``fault_rate`` injects known faults, each decided by a pure function of what the request
says (`author_fault`, `image_fault`), so a summary can count them afterwards: a malformed
JSON plan or a broken constraint on the author's first reply, a wrong colour or a missing
object on the image model's first attempt. A revision request gets a clean answer, so the
repair loop demonstrably catches and fixes each one.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from yanami.construct._pool import PoolEntry
from yanami.contract import derived
from yanami.models.fake import Reply, chat_images, chat_text, plain_png

if TYPE_CHECKING:
    from yanami.world import Scene, View, WorldObject

BLANK_STD = 4.0
"""Pixel standard deviation (0–255) below which the filter stand-in sees a blank canvas."""
AUTHOR_FAULTS = ("malformed-json", "broken-constraint")
IMAGE_FAULTS = ("wrong-colour", "missing-object")
WORLD_GROUP = re.compile(r"(?P<id>world-(?P<scenario>[a-z_]+)-\d+)@(?P<seed>\d+)")
_OBJECT = re.compile(
    r"#(?P<id>\d+): an? (?P<size>\w+) (?P<colour>\w+) (?P<material>\w+) (?P<shape>\w+)"
    r"(?: resting on #(?P<on>\d+))? at \((?P<x>-?\d+(?:\.\d+)?), (?P<y>-?\d+(?:\.\d+)?)\)"
)
_VIEW = re.compile(
    r"Draw the scene in the (?P<style>\w+) style, seen from azimuth (?P<azimuth>-?\d+(?:\.\d+)?) degrees"
)
REVISION_MARK = "An earlier attempt at this image was rejected"
PLAN_REVISION_MARK = "cannot be used yet"


def _between(text: str, tag: str) -> str | None:
    m = re.search(rf"<{tag}-([0-9a-f]+)>\n(.*?)\n</{tag}-\1>", text, re.S)
    return m.group(2) if m else None


def _share(*parts: object) -> float:
    """A number in [0, 1) from a draw's key, the same everywhere."""
    return derived(*parts) / 2**64


def pixel_std(data: bytes) -> float:
    """The standard deviation of an image's grey levels."""
    with Image.open(io.BytesIO(data)) as im:
        return float(np.asarray(im.convert("L"), dtype=np.float32).std())


# the world's pictures as a pool ------------------------------------------------------------


def world_pool(per_scenario: int, seed: int) -> Iterator[PoolEntry]:
    """A pool of world pictures: per scenario, the user's pictures of ``per_scenario`` world
    dialogues, one group per dialogue (named ``<dialogue id>@<seed>``), routed by the pool."""
    from yanami.contract import Scenario
    from yanami.world import compose_dialogue

    for k in range(per_scenario):
        for scenario in Scenario:
            did = f"world-{scenario.value}-{k:06d}"
            d, images = compose_dialogue(scenario, did, seed)
            for n, part in enumerate(p for t in d.turns for p in t.user.images()):
                yield PoolEntry(f"world:{did}/{n}.png", f"{did}@{seed}", images[part.sha256], None, scenario.value)


# scenes as instructions ----------------------------------------------------------------------


def scene_instruction(view: View) -> str:
    """A complete, readable description of a world view that `parse_instruction` reads back."""
    objects = "; ".join(
        f"#{o.id}: a {o.size} {o.colour} {o.material} {o.shape}"
        + (f" resting on #{o.on}" if o.on is not None else "")
        + f" at ({o.x:.2f}, {o.y:.2f})"
        for o in view.scene.objects
    )
    return (
        f"Draw the scene in the {view.style} style, seen from azimuth {view.azimuth:g} degrees, "
        f"with exactly these objects (positions on the ground plane): {objects}."
    )


def parse_instruction(text: str) -> View | None:
    """The world view an instruction describes (None if it describes none)."""
    from yanami.world import Scene, View, WorldObject

    head = _VIEW.search(text)
    if head is None:
        return None
    tail = text[head.end() :].split("\n", 1)[0]
    objects = []
    for m in _OBJECT.finditer(tail):
        try:
            fields: dict[str, Any] = {k: m[k] for k in ("shape", "colour", "size", "material")}
            on = int(m["on"]) if m["on"] is not None else None
            objects.append(WorldObject(id=int(m["id"]), x=float(m["x"]), y=float(m["y"]), on=on, **fields))
        except ValueError:
            return None
    return View(Scene(objects=tuple(objects)), float(head["azimuth"]), head["style"])


def _describe(o: WorldObject) -> tuple[str, str, str, str]:
    return (o.size, o.colour, o.material, o.shape)


def scene_differences(want: Scene, got: Scene) -> list[str]:
    """What differs between two scenes, by object description, in words (empty: the same)."""
    a = Counter(_describe(o) for o in want.objects)
    b = Counter(_describe(o) for o in got.objects)
    out = [f"the {' '.join(k)} is missing" for k in sorted((a - b).elements())]
    out += [f"there is an unexpected {' '.join(k)}" for k in sorted((b - a).elements())]
    return out


# the faults ------------------------------------------------------------------------------------


def author_fault(group: str, rate: float) -> str | None:
    """The fault the author stand-in injects in its first plan for a group (None: none)."""
    if rate <= 0 or _share("author", group) >= rate:
        return None
    return AUTHOR_FAULTS[int(_share("author-kind", group) * len(AUTHOR_FAULTS))]


def image_fault(instruction: str, rate: float) -> str | None:
    """The fault the image stand-in injects in its first attempt at an instruction (None: none).

    Decided by the scene the instruction describes (`scene_instruction` of `parse_instruction`),
    so the words around it in a request do not matter."""
    view = parse_instruction(instruction)
    if rate <= 0 or view is None:
        return None
    key = scene_instruction(view)
    if _share("image", key) >= rate:
        return None
    return IMAGE_FAULTS[int(_share("image-kind", key) * len(IMAGE_FAULTS))]


# the stand-ins ---------------------------------------------------------------------------------


@dataclass
class StandIns:
    """The stand-in models (see the module docstring)."""

    repair_fails: set[str] = field(default_factory=set)
    """SHA-256 prefixes of images whose repairs come back unchanged."""
    fault_rate: float = 0.0
    """The share of author plans and of image instructions that get a fault on the first try."""
    thinks_aloud: bool = False
    """The author answers as a reasoning model may: ``<think>`` (braces in it), then its plan in a
    fenced block between sentences with braces of their own."""

    def brain(self, path: str, body: dict[str, Any]) -> Reply:
        """A `FakeServer` brain: a reply for the request, or None for the server's default."""
        if "/images/" in path:
            prompt = body.get("prompt", "")
            if isinstance(prompt, str) and _VIEW.search(prompt):
                return self.draw(prompt, body.get("size", "512x384"))
            if not body.get("images"):  # a request with no scene and no picture (a history-free probe)
                width, _, height = str(body.get("size", "512x384")).partition("x")
                return plain_png((int(width or 512), int(height or 384)))
            return self.repair(body)
        if "/chat/completions" not in path:
            return None
        text = chat_text(body)
        if "<pool-notes-" in text:
            plan = self.author(body, text)
            if self.thinks_aloud:
                return f"<think>It needs {{braces}} and care.</think>\nThe plan:\n```json\n{plan}\n```\nSee {{this}}."
            return plan
        if "<plan-" in text and '"passed"' in text:
            return self.review(text)
        if "<request-" in text and '"verdicts"' in text:
            return self.check(text, chat_images(body)[-1])
        if '"keep"' in text:
            return self.screen(chat_images(body)[-1])
        if '"scenario"' in text and "<pool-notes-" not in text:
            return self.route(chat_images(body))
        return None

    # prepare ---------------------------------------------------------------------------------

    def screen(self, data: bytes) -> str:
        """The filter's JSON verdict on one image."""
        if pixel_std(data) < BLANK_STD:
            return json.dumps({"keep": False, "category": "generation_failure", "reason": "the canvas is blank"})
        return json.dumps({"keep": True, "category": "usable", "reason": "a clear picture"})

    def repair(self, body: dict[str, Any]) -> bytes:
        """A repaired image: the input with a pattern drawn over it (unless told to fail)."""
        images = body.get("images") or []
        src = images[-1] if images else b""
        with Image.open(io.BytesIO(src)) as im:
            pixels = np.asarray(im.convert("RGB"), dtype=np.uint8).copy()
        if not any(hashlib.sha256(src).hexdigest().startswith(p) for p in self.repair_fails):
            h, w = pixels.shape[:2]
            yy, xx = np.mgrid[0:h, 0:w]
            pixels[((yy // 16 + xx // 16) % 2).astype(bool)] = (200, 60, 40)
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, format="PNG")
        return buf.getvalue()

    def route(self, images: list[bytes]) -> str:
        """The scenario for a group of images."""
        from yanami.contract import FACTS

        if len(images) >= 2:
            several = next(s for s, f in FACTS.items() if f.min_pool_images >= 2)
            return json.dumps({"scenario": several.value, "reason": "several pictures to combine"})
        singles = [s.value for s, f in FACTS.items() if f.min_pool_images <= 1]
        pick = singles[hashlib.sha256(images[0]).digest()[0] % len(singles)]
        return json.dumps({"scenario": pick, "reason": "one picture"})

    # construct: the author -------------------------------------------------------------------

    def author(self, body: dict[str, Any], text: str) -> str:
        """A plan of the world dialogue the pool notes name (with a fault on the first reply, if drawn)."""
        notes = _between(text, "pool-notes") or ""
        m = WORLD_GROUP.search(notes)
        if m is None:
            return json.dumps({"error": "these pictures are not the world's"})
        plan = world_plan(m["scenario"], m["id"], int(m["seed"]), chat_images(body))
        revising = PLAN_REVISION_MARK in text
        fault = None if revising else author_fault(m.group(0), self.fault_rate)
        if fault == "malformed-json":
            return json.dumps(plan)[:200]
        if fault == "broken-constraint":
            plan = break_constraint(plan)
        return json.dumps(plan)

    # construct: the image model -----------------------------------------------------------------

    def draw(self, prompt: str, size: str) -> bytes:
        """The scene an instruction describes, rendered (with a fault on the first attempt, if drawn)."""
        from yanami.world import HEIGHT, WIDTH, Scene, View, render_png

        view = parse_instruction(prompt)
        assert view is not None
        fault = None if REVISION_MARK in prompt else image_fault(prompt, self.fault_rate)
        objects = list(view.scene.objects)
        if fault == "wrong-colour" and objects:
            first = objects[0]
            other = "purple" if first.colour != "purple" else "yellow"
            objects[0] = first.model_copy(update={"colour": other})
        elif fault == "missing-object" and objects:
            gone = objects[-1].id
            objects = [o for o in objects if o.id != gone and o.on != gone]
        w, _, h = size.partition("x")
        width, height = int(w or WIDTH), int(h or HEIGHT)
        drawn = View(Scene(objects=tuple(objects)), view.azimuth, view.style)
        # Asked for another aspect (an images API's published size), a model draws the same picture
        # in a wider or taller canvas: the world's 4:3 frame as large as fits, the floor carried
        # on to the edges. Brought back to the frame about its centre, it is the frame's picture.
        fw, fh = min(width, round(height * WIDTH / HEIGHT)), min(height, round(width * HEIGHT / WIDTH))
        png = render_png(drawn.scene, drawn.azimuth, drawn.style, fw, fh)
        if (fw, fh) == (width, height):
            return png
        with Image.open(io.BytesIO(png)) as im:
            pixels = np.asarray(im.convert("RGB"))
        left, top = (width - fw) // 2, (height - fh) // 2
        wide = np.pad(pixels, ((top, height - fh - top), (left, width - fw - left), (0, 0)), mode="edge")
        buf = io.BytesIO()
        Image.fromarray(wide).save(buf, format="PNG", compress_level=1)
        return buf.getvalue()

    # construct: the verifier --------------------------------------------------------------------

    def review(self, text: str) -> str:
        """The logic check: each image instruction against the plan's own state after that turn."""
        raw = _between(text, "plan") or ""
        try:
            plan = json.loads(raw)
        except ValueError:
            return json.dumps({"passed": False, "problems": [{"turn": None, "problem": "the plan is not JSON"}]})
        problems = []
        for i, turn in enumerate(plan.get("turns", [])):
            image, state = turn.get("image"), turn.get("state")
            if not image or not isinstance(state, dict) or "scene" not in state:
                continue
            view = parse_instruction(image.get("instruction", ""))
            if view is None:
                problems.append({"turn": i, "problem": "the image instruction describes no scene"})
                continue
            from yanami.world import Scene

            want = Scene.model_validate({"objects": state["scene"]})
            for diff in scene_differences(want, view.scene):
                problems.append({"turn": i, "problem": f"the instruction disagrees with the state: {diff}"})
        return json.dumps({"passed": not problems, "problems": problems})

    def check(self, text: str, image: bytes) -> str:
        """The image check: the parsed image against the instruction's scene, per statement."""
        from yanami.world import parse_image

        instruction = _between(text, "request") or ""
        ids = re.findall(r"^(\S+): ", text.split("</request-", 1)[-1], re.M)
        view = parse_instruction(instruction)
        if view is None:
            return json.dumps({"verdicts": dict.fromkeys(ids, True), "reason": "nothing to compare"})
        seen = parse_image(image, view.azimuth).to_scene()
        diffs = scene_differences(view.scene, seen)
        statements = dict(re.findall(r"^(\S+): (.*)$", text.split("</request-", 1)[-1], re.M))
        words = {w for d in diffs for w in d.split()[-4:]}
        verdicts = {
            cid: not diffs or (cid != ids[0] and not (set(statements[cid].lower().split()) & words)) for cid in ids
        }
        return json.dumps({"verdicts": verdicts, "reason": "; ".join(diffs)})


def world_plan(scenario: str, dialogue_id: str, seed: int, offered: list[bytes]) -> dict[str, Any]:
    """The plan of a world dialogue, its user pictures numbered as ``offered`` (JSON-ready)."""
    from yanami.contract import Scenario
    from yanami.world import compose_dialogue, view_of

    d, _ = compose_dialogue(Scenario(scenario), dialogue_id, seed)
    number = {hashlib.sha256(b).hexdigest(): k for k, b in enumerate(offered, 1)}
    constraints: list[dict[str, Any]] = []
    for i, t in enumerate(d.turns):
        state: Any = t.hidden.state if isinstance(t.hidden.state, dict) else {}
        for c in state.get("constraints", []):
            if all(x["id"] != c["id"] for x in constraints):
                forbid = [c["value"]] if c["kind"] == "forbid_colour" else []
                constraints.append({"id": c["id"], "text": json.dumps(c), "from_turn": i, "forbid": forbid})
    turns = []
    latest: str | None = None
    for i, t in enumerate(d.turns):
        shown = [number[p.sha256] for p in t.user.images() if p.sha256 in number]
        for k in shown:
            latest = f"pool:{k}"
        image = None
        if t.assistant.images():
            view = view_of(t)
            assert view is not None  # a world turn that shows a picture holds its scene
            inputs = ([latest] if latest else []) + [f"pool:{k}" for k in shown if f"pool:{k}" != latest]
            image = {"mode": "edit" if inputs else "generate", "inputs": inputs, "instruction": scene_instruction(view)}
            latest = f"turn:{i}"
        turns.append(
            {
                "user": t.user.text(),
                "pool_images": shown,
                "assistant": t.assistant.text(),
                "image": image,
                "capabilities": [c.value for c in t.capabilities],
                "checks": [
                    {
                        "id": c.id,
                        "kind": str(c.kind),
                        "text": c.text,
                        "capability": c.capability.value if c.capability else None,
                        "category": c.category.value if c.category else None,
                        "predicate": c.hidden.predicate,
                    }
                    for c in t.checks
                ],
                "state": t.hidden.state,
                "intent": t.hidden.intent,
            }
        )
    questions = [
        {
            "type": q.type.value,
            "after_turn": q.after_turn,
            "text": q.text,
            "choices": q.choices,
            "answer": q.answer_letters[0],
            "aligned_checks": q.aligned_checks,
            "intent": q.hidden.intent,
        }
        for q in d.questions
    ]
    return {
        "capabilities": [c.value for c in d.capabilities],
        "constraints": constraints,
        "turns": turns,
        "questions": questions,
    }


def break_constraint(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan with one later image instruction recoloured against a colour ban (the ban's words dropped,
    so only a reviewer who compares instructions with the state finds it)."""
    bans = [c for c in plan["constraints"] if c["forbid"]]
    if not bans:  # no colour ban to break: an object left out of an instruction instead
        bans = [{"forbid": ["gray"], "from_turn": 0}]
    ban = bans[0]
    colour = ban["forbid"][0]
    for c in plan["constraints"]:
        c["forbid"] = []
    for turn in plan["turns"][ban["from_turn"] + 1 :]:
        image = turn.get("image")
        if image:
            m = _OBJECT.search(image["instruction"])
            if m is not None:
                text = image["instruction"]
                old = f"#{m['id']}: a {m['size']} {m['colour']} "
                # a colour the instruction does not already give (a gray object against the stand-in ban)
                new_colour = next(c for c in (colour, "purple", "yellow") if c != m["colour"])
                image["instruction"] = text.replace(old, f"#{m['id']}: a {m['size']} {new_colour} ", 1)
                return plan
    return plan
