"""The demo's own logic: what it does before any long stage (the stages have their own tests)."""

import socket

import pytest

from guarddiag.cli import main
from guarddiag.demo import DemoOptions, run_demo
from guarddiag.errors import GuarddiagError


def _refused_url() -> str:
    # A port nobody listens on: bind, read the number, close.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_no_data_and_failed_pull_says_what_to_do(tmp_path):
    opts = DemoOptions(data_dir=tmp_path / "empty", work_dir=tmp_path / "work",
                       out_dir=tmp_path / "report", mirror=_refused_url())
    with pytest.raises(GuarddiagError) as info:
        run_demo(opts)
    message = str(info.value)
    assert "\n" not in message
    assert "`guarddiag data pull` failed" in message
    assert "GUARDDIAG_DATA" in message
    assert "--mirror" in message
    assert not (tmp_path / "work" / "runs").exists()


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--floor-branches", "reference,E99", "E99"),
    ("--mutations", "ascii,rot13", "unknown mutation 'rot13'"),
    ("--size", "huge", "huge"),
])
def test_bad_option_fails_before_any_work(tmp_path, capsys, option, value, message):
    code = main(["--data-dir", str(tmp_path), "demo", "--work-dir", str(tmp_path / "w"),
                 option, value])
    assert code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "w").exists()


def test_the_route_matched_controls_train_at_the_three_seeds_of_their_recipes():
    from guarddiag.demo import demo_plan
    from guarddiag.train.branches import load_branches

    branches = load_branches()
    plan = demo_plan(branches, DemoOptions())
    seeds: dict[str, set[int]] = {}
    for run in plan:
        seeds.setdefault(run.branch, set()).add(run.seed)
    controls = [n for n in branches.names() if branches[n].role == "control"]
    assert sorted(controls) == ["E1-ctrl", "E10-ctrl", "E7-ctrl"]
    for name in controls:
        recipe = branches[name].control_of
        assert seeds[name] == seeds[recipe] == seeds["reference"] == {42, 43, 44}
    # each run once; a control after the reference run (same seed) it recalibrates
    ids = [r.run_id for r in plan]
    assert len(ids) == len(set(ids))
    for run in plan:
        if run.parent is not None:
            assert ids.index(run.parent) < ids.index(run.run_id)
    # 2 teachers (fixed seed, once) + 16 students/controls/variants × 3 seeds
    assert len(plan) == 2 + 16 * 3
