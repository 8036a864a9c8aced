"""Derived (mutated) subsets inherit their base prompts' decontamination (issue 17, item 5)."""

from __future__ import annotations

import polars as pl

import guarddiag
from guarddiag.audit.outputs import inherit_decontamination
from guarddiag.data import load_benchmarks
from guarddiag.sorry.mutate import mutate_benchmark


def test_inherit_rule_by_hand():
    kept = {"base": frozenset({"a", "b"}), "enc2": frozenset({"a", "c"}),
            "other": frozenset({"z"})}
    out = inherit_decontamination(kept, {"enc1": "base", "enc2": "base", "enc3": "gone"})
    assert out["enc1"] == {"a", "b"}       # not audited itself: the base's list
    assert out["enc2"] == {"a"}            # audited too: survives both
    assert "enc3" not in out               # base not audited: nothing to inherit
    assert out["other"] == {"z"}
    assert out["base"] == {"a", "b"}


def test_a_mutated_subset_has_its_bases_decontaminated_n(real_data_dir, tmp_path):
    safe = load_benchmarks(["xstest_safe"], data_dir=real_data_dir).frames["xstest_safe"]
    leaked = safe["text"].to_list()[:3]
    pool = tmp_path / "pool.csv"
    pl.DataFrame({"prompt_id": ["r1", "r2", "r3", "r4"],
                  "text": [*leaked, "something else entirely"]}).write_csv(pool)
    # The audit runs before the mutation, as in the demo: the derived subset is not audited.
    guarddiag.run_audit(pool, benchmarks=["xstest_safe"], out=tmp_path / "audit",
                        data_dir=real_data_dir)
    mutate_benchmark("xstest_safe", mutations=["caesar"], data_dir=real_data_dir,
                     derived_dir=tmp_path / "derived")
    result = guarddiag.score_guard(lambda texts: [0.5] * len(texts), name="half",
                                   benchmarks=["xstest_safe", "xstest_safe__caesar"],
                                   runs_dir=tmp_path / "runs", audit_dir=tmp_path / "audit",
                                   data_dir=real_data_dir, derived_dir=tmp_path / "derived")
    table = pl.read_parquet(result.table_path)
    kept = {b: set(table.filter((pl.col("benchmark") == b) & pl.col("survives_decontam"))
                   ["prompt_id"].to_list()) for b in ("xstest_safe", "xstest_safe__caesar")}
    assert len(kept["xstest_safe"]) == 250 - 3
    assert kept["xstest_safe__caesar"] == kept["xstest_safe"]
    dropped = set(safe["prompt_id"].to_list()[:3])
    assert not dropped & kept["xstest_safe__caesar"]
