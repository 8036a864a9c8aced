"""Branch roles as data: the analyses select runs by the role columns the predictions carry
(spec → run meta → predictions → analyses), never by branch name.

The oracles are written out here by name (the study's A-last group E1, E7, E8, E10) and computed
with numpy from the score table, independently of :mod:`guarddiag.roles`."""

from __future__ import annotations

from math import comb
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from synthetic_runs import COPY, ORH, roles_of, study_like

from guarddiag import files
from guarddiag.analyses import AnalysisResults, ReportOptions, analyse, load_inputs
from guarddiag.analyses.competence import COMPETENCE
from guarddiag.analyses.load import LOAD
from guarddiag.analyses.paired import PAIRED
from guarddiag.analyses.rank import RANK
from guarddiag.analyses.scored import SCORES
from guarddiag.analyses.study import STUDY
from guarddiag.errors import GuarddiagError
from guarddiag.roles import is_a_last, is_reference, is_route_cohort, is_teacher, names_where
from guarddiag.runs import read_run_meta
from guarddiag.spec import SpecError
from guarddiag.train.branches import load_branches


def roles_of_model(branch: str):
    return load_branches()[branch].roles()

COPY_NAME = "headonly_A_copy"
STUDY_A_LAST = ["E1", "E7", "E8", "E10"]
STUDY_B_LAST = ["reference", "E2", "E3", "E4", "E5", "E6", "E9"]


def _analyse(root: Path, preds: pl.DataFrame, pool: pl.DataFrame) -> AnalysisResults:
    files.write_parquet(preds, root / "runs" / "predictions.parquet")
    files.write_parquet(pool, root / "pool" / "pool.parquet")
    options = ReportOptions(runs_dir=root / "runs", pool_path=root / "pool" / "pool.parquet",
                            audit_dir=None, n_resamples=50)
    return analyse(load_inputs(options), options)


def _renamed_copy(preds: pl.DataFrame, source: str, name: str, **roles: str) -> pl.DataFrame:
    """Every run of branch ``source`` again as branch ``name`` (same scores), with the
    source's roles unless ``roles`` overrides some."""
    rows = preds.filter((pl.col("guard_kind") == "branch") & (pl.col("branch") == source))
    new_roles = {**roles_of(source), **roles}
    return pl.concat([preds, rows.with_columns(
        pl.col("run_id").str.replace(f"/{source}/", f"/{name}/", literal=True),
        pl.lit(name).alias("branch"),
        *(pl.lit(v, dtype=pl.String).alias(k) for k, v in new_roles.items()))])


def _seed_means(results: AnalysisResults, benchmark: str) -> dict[str, float]:
    """Seed-mean score per branch on ``benchmark`` (primary subset and mapping), by numpy."""
    t = results[SCORES].binary(subset="decontaminated", mapping="loose").filter(
        (pl.col("guard_kind") == "branch") & (pl.col("benchmark") == benchmark))
    out = {}
    for branch in set(t["branch"].to_list()):
        out[branch] = float(np.mean(t.filter(pl.col("branch") == branch)["score"].to_numpy()))
    return out


def test_a_renamed_copy_of_an_a_last_branch_is_treated_by_its_role(tmp_path):
    preds, pool, _ = study_like(seed=5, with_guard=False)
    results = _analyse(tmp_path, _renamed_copy(preds, "E10", COPY_NAME), pool)
    a_last = [*STUDY_A_LAST, COPY_NAME]

    # Group membership: the copy is A-last by its roles, whatever its name.
    assert names_where(results[SCORES].table, is_a_last()) == tuple(a_last)

    # Rank test: the default group is the A-last group, among 11 study branches (E1…E10 and
    # the copy; the reference is not ranked). The five A-last branches capture copyright at
    # 95 %, the others at 10 %: they hold the top five ranks, p = 1/C(11, 5).
    assert results[RANK] is not None
    assert results[RANK].group == tuple(a_last)
    (test,) = results[RANK].tests
    size = test.size
    assert (size, test.n, test.k, test.group_holds_top) == ("micro", 11, 5, True)
    assert float(test.p_value) == pytest.approx(1 / comb(11, 5))

    # Load test: the contrast is mean(A-last seed means) − mean(B-last seed means), by hand.
    means = _seed_means(results, COPY)
    hand = (np.mean([means[b] for b in a_last]) - np.mean([means[b] for b in STUDY_B_LAST]))
    assert results[LOAD].a_last == tuple(a_last)
    row = results[LOAD].table.filter((pl.col("benchmark") == COPY)
                                    & (pl.col("subset") == "decontaminated")
                                    & (pl.col("mapping") == "loose")).row(0, named=True)
    assert row["contrast"] == pytest.approx(hand, abs=1e-12)
    assert row["n_branches"] == 12  # the reference, E1…E10 and the copy

    # Study comparison: the A-last rows count the copy's three runs beside the study's twelve.
    study = {r["quantity"]: r for r in results[STUDY].table.iter_rows(named=True)}
    copy_row = study["COPY of the A-last branches, lowest run"]
    binary = results[SCORES].binary(subset="decontaminated", mapping="loose")
    a_runs = binary.filter(pl.col("branch").is_in(a_last) & (pl.col("benchmark") == COPY))
    assert copy_row["here_note"] == "15 run(s)"
    assert copy_row["here"] == pytest.approx(float(a_runs["score"].min()))
    orh = binary.filter(pl.col("branch").is_in(a_last) & (pl.col("benchmark") == ORH))
    assert study["OR-H of A-last branches, highest run"]["here"] == pytest.approx(
        float(orh["score"].max()))


def test_the_same_copy_with_a_b_last_role_leaves_the_a_last_group(tmp_path):
    # Same name, same scores; only its last_policy says B: it is B-last everywhere.
    preds, pool, _ = study_like(seed=5, with_guard=False)
    results = _analyse(tmp_path, _renamed_copy(preds, "E10", COPY_NAME, last_policy="B"), pool)
    assert results[RANK] is not None
    assert results[RANK].group == tuple(STUDY_A_LAST)
    (test,) = results[RANK].tests
    assert (test.n, test.k, test.group_holds_top) == (11, 4, False)  # the copy ranks among them
    means = _seed_means(results, COPY)
    b_last = [*STUDY_B_LAST, COPY_NAME]
    hand = np.mean([means[b] for b in STUDY_A_LAST]) - np.mean([means[b] for b in b_last])
    row = results[LOAD].table.filter((pl.col("benchmark") == COPY)
                                    & (pl.col("subset") == "decontaminated")
                                    & (pl.col("mapping") == "loose")).row(0, named=True)
    assert row["contrast"] == pytest.approx(hand, abs=1e-12)
    study = {r["quantity"]: r for r in results[STUDY].table.iter_rows(named=True)}
    assert study["COPY of the A-last branches, lowest run"]["here_note"] == \
        "12 run(s)"


RENAMES = {"reference": "base_recipe", "T_A": "teacher_one", "T_B": "teacher_two",
           **{f"E{i}": f"recipe_{chr(96 + i)}" for i in range(1, 11)}}


def _rename_every_branch(preds: pl.DataFrame) -> pl.DataFrame:
    out = preds
    for old, new in RENAMES.items():
        out = out.with_columns(pl.col("run_id").str.replace(f"/{old}/", f"/{new}/",
                                                            literal=True))
    return out.with_columns(pl.col("branch").replace(RENAMES),
                            pl.col("teacher").replace(RENAMES))


def _same_numbers(got: list[float | None], want: list[float | None]) -> None:
    """Equal lists up to float summation order; None (not measured) only where None."""
    assert [g is None for g in got] == [w is None for w in want]
    assert [g for g in got if g is not None] == pytest.approx(
        [w for w in want if w is not None], rel=1e-9, abs=1e-12)


def test_renaming_every_branch_changes_no_number(tmp_path):
    # Branch names carry no meaning: with every branch renamed (roles kept), each analysis
    # gives the same numbers.
    preds, pool, _ = study_like(seed=9)
    plain = _analyse(tmp_path / "a", preds, pool)
    renamed = _analyse(tmp_path / "b", _rename_every_branch(preds), pool)
    assert plain[RANK] is not None
    assert renamed[RANK] is not None
    assert renamed[RANK].group == tuple(RENAMES[b] for b in STUDY_A_LAST)
    for t1, t2 in zip(plain[RANK].tests, renamed[RANK].tests, strict=True):
        assert (t1.n, t1.k, t1.rank_sum, t1.p_value) == (t2.n, t2.k, t2.rank_sum, t2.p_value)
    # Equal up to the order floats are summed in (branches are summed in name order).
    assert renamed[LOAD].table["load"].to_list() == plain[LOAD].table["load"].to_list()
    for column in ("delta", "floor_widest", "contrast", "p_contrast", "p_span"):
        _same_numbers(renamed[LOAD].table[column].to_list(), plain[LOAD].table[column].to_list())
    _same_numbers(renamed[STUDY].table["here"].to_list(), plain[STUDY].table["here"].to_list())
    assert plain[COMPETENCE] is not None
    assert renamed[COMPETENCE] is not None
    assert renamed[COMPETENCE].sizes.equals(plain[COMPETENCE].sizes)
    assert (plain[COMPETENCE].branch, renamed[COMPETENCE].branch) == ("reference", "base_recipe")
    assert plain[PAIRED] is not None
    assert renamed[PAIRED] is not None
    pairs = [(plain[PAIRED].recipes, renamed[PAIRED].recipes, {"base_recipe"}),
             *((p1, p2, {"micro/base_recipe"}) for p1, p2 in
               zip(plain[PAIRED].outside, renamed[PAIRED].outside, strict=True))]
    assert len(pairs) == 1 + len(plain[PAIRED].outside) >= 2
    for p1, p2, second in pairs:
        assert p1 is not None
        assert p2 is not None
        assert p1.table.height == p2.table.height > 0
        assert sorted(p1.table["p_value"].to_list()) == sorted(p2.table["p_value"].to_list())
        assert set(p2.table["second"].to_list()) == second


def test_branch_runs_without_roles_are_a_one_line_error(tmp_path):
    preds, pool, _ = study_like(seed=1, with_guard=False)
    old = preds.drop("role", "route", "last_policy", "teacher", "control_of", "variant_of")
    with pytest.raises(GuarddiagError) as exc:
        _analyse(tmp_path, old, pool)
    message = str(exc.value)
    assert "\n" not in message
    assert "has no role, route or last_policy" in message
    assert "guarddiag predict" in message


def test_a_control_enters_no_study_analysis(tmp_path):
    # A route-matched control (role control, control_of E1) is analysed by the next issue's
    # control comparison, not counted as a twelfth student: every study number is unchanged.
    preds, pool, _ = study_like(seed=5, with_guard=False)
    plain = _analyse(tmp_path / "a", preds, pool)
    with_control = _analyse(tmp_path / "b", _renamed_copy(
        preds, "E1", "E1-ctrl_B", role="control", control_of="E1", last_policy="B"), pool)
    assert with_control[LOAD].table.equals(plain[LOAD].table)
    assert with_control[RANK] is not None
    assert plain[RANK] is not None
    assert with_control[RANK].to_frame().equals(plain[RANK].to_frame())
    assert with_control[STUDY].table.equals(plain[STUDY].table)
    assert plain[PAIRED] is not None
    assert with_control[PAIRED] is not None
    assert plain[PAIRED].recipes is not None
    assert with_control[PAIRED].recipes is not None
    assert with_control[PAIRED].recipes.table.equals(plain[PAIRED].recipes.table)


def test_run_meta_is_read_through_its_model(tmp_path):
    run_dir = tmp_path / "micro" / "E8" / "seed=42"
    meta = {"run_id": "micro/E8/seed=42", "branch": "E8", "size": "micro", "seed": 42,
            "status": "finished", "label_policy": "B",
            "roles": {"role": "student", "route": "distill", "last_policy": "A",
                      "teacher": "T_A", "control_of": None, "variant_of": None}}
    files.write_json(meta, run_dir / "meta.json")
    got = read_run_meta(run_dir)
    assert got.roles == roles_of_model("E8")
    files.write_json({**meta, "seed": "x", "roles": {**meta["roles"], "last_policy": "C"},
                      "colour": "red"}, run_dir / "meta.json")
    with pytest.raises(SpecError) as exc:
        read_run_meta(run_dir)
    where = run_dir / "meta.json"
    problems = exc.value.problems
    assert problems[:2] == [
        f'{where} field "seed": input should be a valid integer, unable to parse string as '
        f"an integer, got 'x'",
        f"{where} field \"roles.last_policy\": input should be 'A' or 'B', got 'C'"]
    assert problems[2].startswith(f'{where} field "colour": unknown key (expected one of')
    assert len(problems) == 3


def test_the_route_cohort_is_reference_students_and_controls_without_variants():
    t = pl.DataFrame({
        "branch": ["reference", "E1", "E1-ctrl", "E6-a05", "T_A", "tfidf", "gpt"],
        "guard_kind": ["branch"] * 5 + ["baseline", "outside"],
        "role": ["reference", "student", "control", "student", "teacher", None, None],
        "variant_of": [None, None, None, "E6", None, None, None]})
    assert names_where(t, is_route_cohort()) == ("reference", "E1", "E1-ctrl")


def test_teachers_and_the_reference_by_role_not_by_name():
    """A teacher renamed, or an outside guard that calls itself "reference", is read by its
    role and guard kind."""
    t = pl.DataFrame({
        "branch": ["reference", "my_teacher", "T_B", "E1", "reference"],
        "guard_kind": ["branch", "branch", "branch", "branch", "outside"],
        "role": ["reference", "teacher", "teacher", "student", "reference"]})
    assert names_where(t, is_teacher()) == ("my_teacher", "T_B")
    assert t.filter(is_reference()).height == 1
