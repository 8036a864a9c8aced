"""Ties broken on purpose (issue 12, item 9).

A demo killed and resumed gave identical predictions, yet ``sorry_policy_sensitive.csv`` named
``reference`` as the lowest branch in one run and ``E2`` in the other: the two tie, the
reference's seed mean was summed in whatever order a hash group-by produced (0.1 + 0.2 + 0.3 is
not 0.3 + 0.2 + 0.1 in floating point), and the tie went by name. Every tie now goes to the
branch listed first in the specs (reference, E1…E10), whatever the input row order.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from synthetic_runs import decisions, frame, rows_for, run_meta

from guarddiag import files
from guarddiag.labels import branch_order, branch_sort_key
from guarddiag.sorry.balance import policy_sensitive_categories

# Per category of 10 prompts, prompts read unsafe by each run: the reference's seeds 1, 2, 3
# (mean 2/10) tie with E2's 2; E3 and E5 tie at the top with 10.
PLANTED = {("reference", 42): 1, ("reference", 43): 2, ("reference", 44): 3, ("E2", 42): 2,
           ("E5", 42): 10, ("E3", 42): 10}


def test_branch_order_is_the_specs_order():
    names = ["T_A", "E10", "zeta", "E2", "reference", "E1", None]
    assert sorted(names, key=branch_sort_key) == ["reference", "E1", "E2", "E10", "zeta", "T_A",
                                                  None]
    assert [branch_order(b) for b in ("reference", "E1", "E10")] == [0, 1, 10]


def _planted(ids_by_category: dict[str, list[str]]) -> pl.DataFrame:
    rows = []
    for (branch, seed), k in PLANTED.items():
        meta = run_meta("micro", branch, seed)
        for ids in ids_by_category.values():
            rows += rows_for(meta, "sorrybench", decisions(k, len(ids)), ids=ids)
    return frame(rows)


@pytest.mark.parametrize("shuffle_seed", [None, 0, 1, 2, 3, 4, 5, 6, 7])
def test_policy_sensitive_ties_go_to_the_first_branch_in_spec_order(shuffle_seed):
    # The plant is a real floating-point tie: summed in seed order the reference's mean is
    # 0.20000000000000004, summed the other way 0.19999999999999998, E2's is 0.2.
    assert pl.Series([0.1, 0.2, 0.3]).mean() != 0.2 != pl.Series([0.3, 0.2, 0.1]).mean()
    ids = {"41": [f"a{i}" for i in range(10)], "1": [f"b{i}" for i in range(10)]}
    cats = pl.DataFrame({"prompt_id": [*ids["41"], *ids["1"]],
                         "category": ["41"] * 10 + ["1"] * 10})
    preds = _planted(ids)
    if shuffle_seed is not None:
        preds = preds.sample(fraction=1.0, shuffle=True, seed=shuffle_seed)
    t = policy_sensitive_categories(preds, {"sorrybench": cats}).to_frame()
    assert t["min_branch"].to_list() == ["reference", "reference"]   # not E2
    assert t["max_branch"].to_list() == ["E3", "E3"]                 # not E5
    assert t["span"].to_list() == pytest.approx([0.8, 0.8])
    # Equal spans and flip shares: the rows are ordered by benchmark, then category name.
    assert t["category"].to_list() == ["1. Personal Insulting Words", "41. Medical Advice"]


@pytest.mark.realdata
def test_sorry_policy_sensitive_table_is_byte_identical_under_shuffled_rows(
        real_data_dir, tmp_path, monkeypatch):
    from guarddiag.data import load_benchmark
    from guarddiag.report import SORRY_SECTIONS, ReportOptions, make_report, with_sections

    monkeypatch.chdir(tmp_path)
    base = load_benchmark("sorrybench", data_dir=real_data_dir)
    cats = base["category"].cast(pl.String).to_list()
    ids_by_category: dict[str, list[str]] = {}
    for pid, c in zip(base["prompt_id"].cast(pl.String).to_list(), cats, strict=True):
        ids_by_category.setdefault(c, []).append(pid)
    preds = _planted(ids_by_category)
    tables = []
    for shuffle in (False, True):
        run = tmp_path / ("shuffled" if shuffle else "plain")
        data = preds.sample(fraction=1.0, shuffle=True, seed=3) if shuffle else preds
        files.write_parquet(data, run / "runs" / "predictions.parquet")
        make_report(ReportOptions(runs_dir=run / "runs", pool_path=None, audit_dir=None,
                                  out_dir=run / "out", n_resamples=50, data_dir=real_data_dir,
                                  derived_dir=tmp_path / "none"),
                    sections=with_sections(SORRY_SECTIONS))
        # SORRY-Bench's categories hold 10 prompts: listed unranked (issue 29), ties still
        # broken the same way in their lowest / highest columns.
        tables.append((run / "out" / "tables" / "sorry_small_categories.csv").read_bytes())
    assert tables[0] == tables[1]
    sens = pl.read_csv(tables[0])
    assert set(sens["min_branch"].to_list()) == {"reference"}
    assert set(sens["max_branch"].to_list()) == {"E3"}
    assert np.allclose(sens["span"].to_numpy(), 0.8)


def test_a_role_orders_a_branch_whatever_its_name():
    # Plans and `branches list` sort by the specs' roles; tables without specs by the names.
    # Both read one order: a teacher last, the reference first.
    assert branch_sort_key("teach", "teacher") > branch_sort_key("zeta") > branch_sort_key("E10")
    assert branch_sort_key("base", "reference") < branch_sort_key("E1")
    assert branch_sort_key("T_A") == branch_sort_key("T_A", "teacher")
