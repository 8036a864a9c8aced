"""Branch specs: the bundled set matches SPEC §4; bad specs give one-line errors naming file and
field, all at once; plans come out in dependency order."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from guarddiag.paths import branches_dir
from guarddiag.spec import SpecError
from guarddiag.train.branches import load_branches, plan_runs
from guarddiag.train.options import PlanOptions
from guarddiag.typed import name_list


def test_bundled_specs_are_the_study_branches():
    b = load_branches()
    # The report's reading order (labels.branch_sort_key): teachers last.
    assert b.names() == ["reference", *(f"E{i}" for i in range(1, 11)),
                         "E1-ctrl", "E10-ctrl", "E6-a05", "E7-ctrl", "E9-a05", "T_A", "T_B"]
    # The route-matched controls (issues 27, 48): their head-only branch drawn alike, with the
    # disagreement rows swapped for agreement rows of the same class; every other field equal,
    # so the contrast is the policy alone.
    for base in ("E1", "E7", "E10"):
        ctrl = b[f"{base}-ctrl"]
        assert (ctrl.role, ctrl.control_of, ctrl.last_policy, ctrl.policy_a_fraction,
                ctrl.calibration_swap) == ("control", base, "B", 0.0, "agreement")
        assert (b[base].last_policy, b[base].policy_a_fraction, b[base].calibration_swap) == (
            "A", 1.0, "none")
        same = {"name", "role", "control_of", "last_policy", "policy_a_fraction",
                "description", "calibration_swap"}
        assert ctrl.model_dump(exclude=same) == b[base].model_dump(exclude=same)
    # The two sensitivity variants: their base branch with α = 0.5, every other field equal.
    for base in ("E6", "E9"):
        variant = b[f"{base}-a05"]
        assert (variant.variant_of, variant.distill_weight, b[base].distill_weight) == (
            base, 0.5, 0.8)
        same = {"name", "variant_of", "distill_weight", "description"}
        assert variant.model_dump(exclude=same) == b[base].model_dump(exclude=same)
    # SPEC §4, row by row
    assert (b["T_A"].policy_a_fraction, b["T_B"].policy_a_fraction) == (1.0, 0.0)
    assert b["T_A"].size == b["T_B"].size == "one_up"
    ref = b["reference"]
    assert (ref.policy_a_fraction, ref.teacher, ref.temperature) == (0.0, "T_B", 4.0)
    assert ref.distill_weight > 0.5  # the teacher dominates by default
    mixes = {"E2": (0.25, False), "E3": (0.25, True), "E4": (0.5, False), "E5": (0.5, True),
             "E6": (1.0, False), "E8": (0.0, False), "E9": (0.75, False)}
    for name, (frac, anchors) in mixes.items():
        assert (b[name].policy_a_fraction, b[name].anchors) == (frac, anchors), name
        assert b[name].teacher == ("T_A" if name == "E8" else "T_B"), name
    for name in ("E1", "E7", "E10"):
        assert b[name].routes == ("head_only",)
        assert b[name].parent == "reference"
        assert b[name].policy_a_fraction == 1.0
    assert b["E1"].epochs == 2
    assert round(b["E1"].calibration_fraction * 53_441) == pytest.approx(8_489, abs=30)
    assert round(b["E7"].calibration_fraction * 53_441) == pytest.approx(53_395, abs=30)
    assert b["E10"].calibration_source == "disagreement"
    assert round(b["E10"].generic_anchor_fraction * 8_489) == pytest.approx(3_000, abs=10)


def test_plan_runs_dependencies_first_and_teachers_once():
    b = load_branches()
    plan = plan_runs(b, PlanOptions.of(branches="E1,E8", sizes=["micro"], seeds=[43, 44]))
    ids = [r.run_id for r in plan]
    assert ids[:2] == ["tiny/T_A/seed=42", "tiny/T_B/seed=42"]  # fixed-seed teachers, once
    assert ids.index("micro/reference/seed=43") < ids.index("micro/E1/seed=43")
    e1 = next(r for r in plan if r.run_id == "micro/E1/seed=44")
    assert e1.parent == "micro/reference/seed=44"
    e8 = next(r for r in plan if r.run_id == "micro/E8/seed=43")
    assert e8.teacher == "tiny/T_A/seed=42"
    assert len(ids) == len(set(ids)) == 2 + 2 * 3
    base = plan_runs(b, PlanOptions.of(branches="reference", sizes=["base"], seeds=[42]))
    assert [r.run_id for r in base] == ["large/T_B/seed=42", "base/reference/seed=42"]


GOOD = """name: {name}
routes: [hard_labels, distill]
role: student
last_policy: A
policy_a_fraction: 0.25
teacher: T
train_rows: 100
epochs: 1
lr: 0.001
batch_size: 8
max_length: 32
"""
TEACHER = """name: T
routes: [hard_labels]
role: teacher
last_policy: A
policy_a_fraction: 1.0
train_rows: 100
epochs: 1
lr: 0.001
batch_size: 8
max_length: 32
"""


def _folder(tmp_path: Path, **files: str) -> Path:
    folder = tmp_path / "branches"
    folder.mkdir()
    (folder / "T.yaml").write_text(TEACHER)
    for name, text in files.items():
        (folder / f"{name}.yaml").write_text(text)
    return folder


def test_variants_are_named_after_their_base_and_planned_with_all(tmp_path):
    ok = _folder(tmp_path, E6=GOOD.format(name="E6"),
                 **{"E6-a05": GOOD.format(name="E6-a05") + "variant_of: E6\n"})
    b = load_branches(ok)
    assert b["E6-a05"].variant_of == "E6"
    # Unset, the key stays out of the resolved spec (the run fingerprint of every branch that
    # is not a variant is what it was before variants existed).
    assert "variant_of" not in b["E6"].resolved()
    assert b["E6-a05"].resolved()["variant_of"] == "E6"
    ids = [r.run_id for r in plan_runs(b, PlanOptions.of(seeds=[42]))]
    assert ids == ["micro/T/seed=42", "micro/E6/seed=42", "micro/E6-a05/seed=42"]
    cases = [
        ({"E6": GOOD.format(name="E6"), "E6-x": GOOD.format(name="E6-x")},
         "a branch named 'E6-x' is a variant of 'E6': add variant_of: E6"),
        ({"E6": GOOD.format(name="E6"), "S": GOOD.format(name="S") + "variant_of: E6\n"},
         "a variant of 'E6' must be named E6-<tag>"),
        ({"E7-b": GOOD.format(name="E7-b") + "variant_of: E7\n"}, "unknown branch 'E7'"),
    ]
    for i, (files, message) in enumerate(cases):
        (tmp_path / str(i)).mkdir()
        folder = _folder(tmp_path / str(i), **files)
        with pytest.raises(SpecError, match=re.escape(message)):
            load_branches(folder)


@pytest.mark.parametrize(("text", "field", "message"), [
    (GOOD + "colour: blue\n", "colour", "unknown key"),
    (GOOD.replace("teacher: T", "teacher: T_X"), "teacher", "unknown branch 'T_X'"),
    (GOOD.replace("0.25", "1.5"), "policy_a_fraction", "less than or equal to 1, got 1.5"),
    (GOOD + "size: huge\n", "size", "unknown model size 'huge'"),
    (GOOD.replace("routes: [hard_labels, distill]", "routes: [hard_labels, distil]"),
     "routes", "unknown route 'distil'"),
    (GOOD.replace("epochs: 1", "epochs: two"), "epochs", "a valid integer, got 'two'"),
    (GOOD.replace("teacher: T\n", ""), "teacher", "required by route distill"),
    (GOOD + "parent: T\n", "parent", "applies only to route head_only"),
])
def test_each_bad_spec_gives_one_line_naming_file_and_field(tmp_path, text, field, message):
    folder = _folder(tmp_path, S=text.format(name="S"))
    with pytest.raises(SpecError) as exc:
        load_branches(folder)
    msg = str(exc.value)
    assert "\n" not in msg
    assert f'{folder / "S.yaml"} field "{field}"' in msg
    assert message in msg


def test_cycle_is_reported_with_its_path(tmp_path):
    head = """name: {name}
routes: [head_only]
role: student
last_policy: A
parent: {parent}
policy_a_fraction: 1.0
calibration_fraction: 0.5
epochs: 1
lr: 0.01
batch_size: 8
"""
    folder = _folder(tmp_path, H1=head.format(name="H1", parent="H2"),
                     H2=head.format(name="H2", parent="H1"))
    with pytest.raises(SpecError) as exc:
        load_branches(folder)
    msg = str(exc.value)
    assert "\n" not in msg
    assert 'H1.yaml field "parent": dependency cycle H1 → H2 → H1' in msg


def test_every_problem_is_reported_at_once(tmp_path):
    folder = _folder(tmp_path,
                     A=GOOD.format(name="A").replace("0.25", "1.5"),
                     B=GOOD.format(name="B") + "colour: red\nsize: huge\n",
                     C=GOOD.format(name="wrong"))
    with pytest.raises(SpecError) as exc:
        load_branches(folder)
    assert len(exc.value.problems) == 4
    assert str(exc.value).startswith("4 problems in branch specs")
    assert any('C.yaml field "name"' in p for p in exc.value.problems)


def test_cli_validate_prints_one_line_error_and_exit_2(tmp_path, capsys):
    from guarddiag.cli import main

    folder = _folder(tmp_path, S=GOOD.format(name="S").replace("0.25", "1.5"))
    assert main(["branches", "validate", "--branches-dir", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith("guarddiag: error: ")
    assert "policy_a_fraction" in err

    assert main(["branches", "validate"]) == 0
    assert "18 branch specs OK" in capsys.readouterr().out


def test_bundled_specs_copy_validates(tmp_path):
    # a user starting their own set from the bundled one
    copy = tmp_path / "mine"
    shutil.copytree(branches_dir(), copy)
    assert len(load_branches(copy).branches) == 18


def test_seed_and_size_options():
    # the command line's spelling and the API's lists read the same, in one place (PlanOptions)
    plan = PlanOptions.of(branches=" E1, E8 ", sizes="micro, tiny", seeds="42, 43,,44")
    assert (plan.branches, plan.sizes, plan.seeds) == (("E1", "E8"), ("micro", "tiny"),
                                                       (42, 43, 44))
    assert PlanOptions.of(sizes=["micro"], seeds=[7]).seeds == (7,)
    assert PlanOptions.of(branches=" all ").branches == " all "
    with pytest.raises(SpecError, match='plan options field "seeds\\[1\\]": .*integer'):
        PlanOptions.of(seeds="42,x")
    with pytest.raises(SpecError, match='field "seeds\\[0\\]": .*greater than or equal to 0'):
        PlanOptions.of(seeds="-1")
    with pytest.raises(SpecError, match='field "seeds": .*at least 1'):
        PlanOptions.of(seeds=" , ")
    with pytest.raises(SpecError, match="unknown model size 'mini': did you mean .*minilm"):
        PlanOptions.of(sizes="mini")


def test_name_list_is_the_one_reading_of_a_comma_list():
    assert name_list(" a, b ,,c ") == ("a", "b", "c")
    assert name_list("") == ()
    assert name_list(["x ", "", 3]) == ("x", "3")


def test_bundled_roles_are_the_studys():
    b = load_branches()
    roles = {n: (s.role, s.last_route, s.last_policy, s.teacher, s.control_of)
             for n, s in b.branches.items()}
    assert roles["T_A"] == ("teacher", "hard_labels", "A", None, None)
    assert roles["T_B"] == ("teacher", "hard_labels", "B", None, None)
    assert roles["reference"] == ("reference", "distill", "B", "T_B", None)
    # SPEC §4: E8's last signal is its T_A teacher; E1, E7, E10's the policy-A recalibration.
    assert roles["E8"] == ("student", "distill", "A", "T_A", None)
    for name in ("E1", "E7", "E10"):
        assert roles[name] == ("student", "head_only", "A", None, None), name
    for name in ("E2", "E3", "E4", "E5", "E6", "E9", "E6-a05", "E9-a05"):
        assert roles[name] == ("student", "distill", "B", "T_B", None), name
    a_last = sorted(n for n, s in b.branches.items() if s.role == "student"
                    and s.last_policy == "A" and s.variant_of is None)
    assert a_last == ["E1", "E10", "E7", "E8"]
    # Roles stay out of the fingerprinted recipe: runs trained before roles are not retrained.
    assert not {"role", "last_policy", "control_of"} & set(b["E8"].resolved())


CONTROL = """name: {name}
routes: [head_only]
role: control
last_policy: B
control_of: {of}
parent: T
policy_a_fraction: 0.0
calibration_fraction: 0.5
epochs: 1
lr: 0.01
batch_size: 8
"""


def test_a_route_matched_control_is_a_valid_spec(tmp_path):
    # The next issue's control: a head-only recalibration on policy-B labels, control of S.
    folder = _folder(tmp_path, S=GOOD.format(name="S"), C=CONTROL.format(name="C", of="S"),
                     **{"S-ctrl": CONTROL.format(name="S-ctrl", of="S")})
    b = load_branches(folder)
    assert b["C"].roles().model_dump() == {
        "role": "control", "route": "head_only", "last_policy": "B", "teacher": None,
        "control_of": "S", "variant_of": None}
    # A control may be named after the branch it controls without being its variant.
    assert (b["S-ctrl"].control_of, b["S-ctrl"].variant_of) == ("S", None)


@pytest.mark.parametrize(("files", "where", "message"), [
    ({"S": GOOD.replace("role: student", "role: pupil")}, 'S.yaml field "role"',
     "input should be 'teacher', 'reference', 'student' or 'control', got 'pupil'"),
    ({"S": GOOD.replace("last_policy: A", "last_policy: B")}, 'S.yaml field "last_policy"',
     "its teacher T's last policy is A, got 'B'"),
    ({"S": GOOD.replace("last_policy: A\n", "")}, 'S.yaml field "last_policy"',
     "missing required key"),
    ({"S": GOOD, "C": CONTROL.format(name="C", of="X")}, 'C.yaml field "control_of"',
     "unknown branch 'X'"),
    ({"C": CONTROL.format(name="C", of="C")}, 'C.yaml field "control_of"',
     "a branch cannot be a control for itself"),
    ({"S": GOOD + "control_of: T\n"}, 'S.yaml field "role"', "only a control does"),
    ({"C": CONTROL.format(name="C", of="T").replace("last_policy: B", "last_policy: A")},
     'C.yaml field "last_policy"', "all its calibration labels are policy B, got 'A'"),
    ({"S": GOOD.replace("teacher: T", "teacher: R"),
      "R": TEACHER.replace("name: T", "name: R").replace("role: teacher", "role: reference")},
     'S.yaml field "teacher"', "'R' has role 'reference'; a branch distils from a branch "
                               "with role teacher"),
    ({"R1": TEACHER.replace("name: T", "name: R1").replace("role: teacher", "role: reference"),
      "R2": TEACHER.replace("name: T", "name: R2").replace("role: teacher", "role: reference")},
     'R2.yaml field "role"', "a second reference ('R1' is the reference)"),
])
def test_bad_roles_give_one_line_naming_file_and_field(tmp_path, files, where, message):
    folder = _folder(tmp_path, **{n: t.format(name=n) if "{name}" in t else t
                                  for n, t in files.items()})
    with pytest.raises(SpecError) as exc:
        load_branches(folder)
    assert any(where in p and message in p and "\n" not in p for p in exc.value.problems), \
        exc.value.problems
