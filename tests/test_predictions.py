import polars as pl
import pytest

from guarddiag import predictions
from guarddiag.errors import GuarddiagError


def _rows(**overrides):
    base = {
        "run_id": ["micro/E1/seed=42"] * 2 + ["micro/E2/seed=42"] * 2,
        "guard_kind": ["branch"] * 4,
        "branch": ["E1", "E1", "E2", "E2"],
        "size": ["micro"] * 4,
        "seed": [42] * 4,
        "label_policy": ["A", "A", "A25+B75", "A25+B75"],
        "benchmark": ["jbb_harmful"] * 4,
        "prompt_id": ["1", "2", "1", "2"],
        "p_GENERIC_SAFE": [0.1, 0.7, 0.25, 0.25],
        "p_BOUNDARY_SAFE": [0.1, 0.1, 0.25, 0.25],
        "p_HARMFUL": [0.7, 0.1, 0.25, 0.25],
        "p_COMPOUND": [0.1, 0.1, 0.25, 0.25],
        "p_unsafe": [0.8, 0.2, 0.5, 0.5],
        "pred_class": ["HARMFUL", "GENERIC_SAFE", "HARMFUL", "HARMFUL"],
        "survives_decontam": [True, False, True, False],
        "status": ["ok"] * 4,
    }
    base.update(overrides)
    return pl.DataFrame(base)


def test_valid_table_is_conformed_to_schema():
    out = predictions.validate(_rows(), same_prompt_sets=True)
    assert out.columns == list(predictions.COLUMNS)
    assert out.schema["seed"] == pl.Int64


def test_missing_column():
    with pytest.raises(GuarddiagError, match=r"missing column\(s\) p_unsafe"):
        predictions.validate(_rows().drop("p_unsafe"))


def test_duplicate_keys():
    df = _rows(prompt_id=["1", "1", "1", "2"])
    with pytest.raises(GuarddiagError, match="1 duplicate key.*'micro/E1/seed=42'"):
        predictions.validate(df)


def test_probability_outside_unit_interval():
    with pytest.raises(GuarddiagError, match=r"column p_unsafe: 1 value\(s\) outside \[0, 1\]"):
        predictions.validate(_rows(p_unsafe=[0.8, 1.2, 0.5, 0.5]))


def test_class_probabilities_must_sum_to_one():
    with pytest.raises(GuarddiagError, match="do not sum to 1"):
        predictions.validate(_rows(p_COMPOUND=[0.1, 0.1, 0.25, 0.5]))


def test_unknown_class_and_status():
    with pytest.raises(GuarddiagError, match="pred_class: value 'UNSAFE' is not one of"):
        predictions.validate(_rows(pred_class=["UNSAFE", "HARMFUL", "HARMFUL", "HARMFUL"]))
    with pytest.raises(GuarddiagError, match="status: value 'error'"):
        predictions.validate(_rows(status=["ok", "ok", "ok", "error"]))


def test_runs_covering_different_prompt_sets():
    df = _rows(prompt_id=["1", "2", "1", "3"])
    predictions.validate(df)  # fine on its own
    with pytest.raises(GuarddiagError, match="different prompt sets of benchmark 'jbb_harmful'"):
        predictions.validate(df, same_prompt_sets=True)


def test_failed_rows_may_lack_probabilities_but_ok_rows_may_not():
    df = _rows(p_unsafe=[0.8, None, 0.5, 0.5], status=["ok", "failed", "ok", "ok"])
    predictions.validate(df)
    with pytest.raises(GuarddiagError, match="status ok but no p_unsafe"):
        predictions.validate(_rows(p_unsafe=[0.8, None, 0.5, 0.5]))


def test_load_runs_concatenates_branches_and_outside_guards(tmp_path):
    _rows().write_parquet(tmp_path / "predictions.parquet")
    (tmp_path / "outside").mkdir()
    guard = _rows(run_id=["guard/g"] * 2 + ["guard/g"] * 2, guard_kind=["outside"] * 4,
                  prompt_id=["1", "2", "3", "4"], seed=[None] * 4)
    guard.write_parquet(tmp_path / "outside" / "g.parquet")
    out = predictions.load_runs(tmp_path)
    assert out.height == 8
    assert sorted(out["run_id"].unique().to_list()) == [
        "guard/g", "micro/E1/seed=42", "micro/E2/seed=42"]
    with pytest.raises(GuarddiagError, match="no predictions.parquet"):
        predictions.load_runs(tmp_path / "empty")
