"""The exact judge reads a candidate as a person would: a copy of an earlier picture earns no
change, and a picture drawn from another viewpoint earns no relation."""

from __future__ import annotations

from pathlib import Path

import pytest

from yanami.judges import ExactJudge
from yanami.store import Dataset
from yanami.world import build_world, parse_image, render_png
from yanami.world._frames import Shown, credited, in_frame, matched, read_candidate, same_picture
from yanami.world._ops import View
from yanami.world._predicates import evaluate
from yanami.world._scene import Scene, WorldObject, relation
from yanami.world._selfhistory import view_of


def _obj(oid: int, x: float, y: float, **kw: str) -> WorldObject:
    attrs = {"shape": "cube", "colour": "red", "size": "large", "material": "matte"} | kw
    return WorldObject(id=oid, x=x, y=y, **attrs)  # type: ignore[arg-type]


SCENE = Scene(
    objects=(
        _obj(0, -1.8, -1.2),
        _obj(1, 1.5, 0.9, shape="sphere", colour="blue", size="small"),
        _obj(2, 0.3, 2.0, shape="cylinder", colour="green"),
    )
)


def test_reading_a_picture_for_another_azimuth_turns_it_about_the_centre() -> None:
    png = render_png(SCENE, 45.0, "studio")
    at_45, at_135 = parse_image(png, 45.0).to_scene(), parse_image(png, 135.0).to_scene()
    assert same_picture(in_frame(at_45, 45.0, 135.0), at_135, tolerance=0.05)
    assert same_picture(in_frame(in_frame(SCENE, 45.0, 315.0), 315.0, 45.0), SCENE, tolerance=1e-9)
    assert not same_picture(in_frame(SCENE, 45.0, 135.0), SCENE)


def test_a_copy_of_an_earlier_picture_is_told_unless_the_turn_asks_for_it_back() -> None:
    first = View(SCENE, 45.0, "studio")
    moved = Scene(objects=(SCENE.objects[0].model_copy(update={"x": 2.2, "y": -2.0}), *SCENE.objects[1:]))
    latest = View(moved, 135.0, "studio")  # moved, then seen from a quarter around
    target = View(Scene(objects=moved.objects[:2]), 135.0, "studio")  # then the cylinder removed
    shown = [Shown(first.scene, first), Shown(latest.scene, latest)]
    copy_first = in_frame(first.scene, first.azimuth, target.azimuth)  # the first picture, read as the judge reads it
    assert read_candidate(copy_first, target, shown).copies == 0
    assert read_candidate(latest.scene, target, shown).copies == 1
    assert read_candidate(target.scene, target, shown).copies is None  # the right picture copies nothing
    back = View(first.scene, 45.0, "studio")  # "go back to picture 1": a copy of it is right
    assert read_candidate(first.scene, back, shown).copies is None


def test_a_copy_fails_every_check_that_needs_a_change_and_keeps_the_others() -> None:
    latest = View(SCENE, 45.0, "studio")
    predicates = {
        "gone": {"op": "absent", "where": {"shape": "cylinder"}},
        "kept": {"op": "exists", "where": {"shape": "sphere"}},
    }
    # A copy of the first picture from earlier, which happened to have no cylinder either.
    earlier = View(Scene(objects=SCENE.objects[:2]), 45.0, "studio")
    shown = [Shown(earlier.scene, earlier), Shown(latest.scene, latest)]
    target = View(Scene(objects=(*SCENE.objects[:2], _obj(3, -0.5, 0.8, colour="yellow"))), 45.0, "studio")
    passed = {cid: evaluate(p, earlier.scene, 45.0) for cid, p in predicates.items()}
    assert passed == {"gone": True, "kept": True}  # read alone, the old picture passes both
    reading = read_candidate(earlier.scene, target, shown)
    assert reading.copies == 0
    assert credited(dict(predicates), dict(passed), reading, latest) == {"gone": False, "kept": True}  # type: ignore[arg-type]


def test_a_picture_drawn_from_another_viewpoint_earns_no_relation() -> None:
    target = View(SCENE, 135.0, "studio")
    drawn_at_45 = in_frame(SCENE, 45.0, 135.0)  # the right scene, drawn from the old viewpoint, read at 135
    reading = read_candidate(drawn_at_45, target, [])
    assert reading.drawn_from == 45.0 and matched(in_frame(drawn_at_45, 135.0, 45.0), SCENE) == 3
    sphere, cylinder = (next(o for o in drawn_at_45.objects if o.shape == s) for s in ("sphere", "cylinder"))
    side = relation(sphere, cylinder, 135.0)[0]  # how the picture reads, in the asked view
    rel = {"op": "relation", "a": {"shape": "sphere"}, "b": {"shape": "cylinder"}, "rel": side}
    assert evaluate(rel, drawn_at_45, 135.0)  # read alone, it passes
    assert credited({"r": rel}, {"r": True}, reading, target) == {"r": False}
    assert read_candidate(SCENE, target, []).drawn_from is None  # drawn from where it was asked


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("frames") / "bench"
    build_world(out, per_scenario=2, seed=5)
    return out


def test_the_exact_judge_gives_a_copied_first_picture_no_change(bench: Path) -> None:
    """Through pictures: copying the first picture earns no check that the latest picture fails,
    where read alone it would earn some (a correction restores what it showed)."""
    ds = Dataset(bench)
    judge = ExactJudge()
    alone = credited_total = 0
    for d in ds:
        first = ds.image_path(d.images()[0]).read_bytes()
        for t in d.turns:
            if not t.checks:
                continue
            verdict = judge.judge_image(d, t, first)
            shown = [view_of(u) for u in d.turns[: t.index] if u.user.images() or u.assistant.images()]
            latest = shown[-1]
            assert latest is not None
            for c in t.checks:
                pred = c.hidden.predicate
                assert isinstance(pred, dict)
                if evaluate(pred, latest.scene, latest.azimuth):
                    continue  # a copy may keep what stays the same
                truth = view_of(t)
                assert truth is not None
                back = any(v is not None and v.scene == truth.scene and v.azimuth == truth.azimuth for v in shown)
                if not back:
                    credited_total += bool(verdict.checks[c.id])
                    parsed = parse_image(first, truth.azimuth).to_scene()
                    alone += evaluate(pred, parsed, truth.azimuth)
    assert credited_total == 0 < alone
