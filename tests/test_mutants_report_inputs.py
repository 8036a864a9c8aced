"""Behaviour tests written against the surviving mutants of the report's inputs: the branch
provenance sentence (analyses/provenance.py) and the threshold-free metrics
(analyses/threshold_free.py). Expected values are hand arithmetic (written out below),
scikit-learn's weighted metrics, or numpy's own draws counted per prompt.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import average_precision_score, f1_score
from synthetic_runs import frame, rows_for, run_meta

from guarddiag.analyses.inputs import RUN_META_SCHEMA
from guarddiag.analyses.provenance import branch_provenance
from guarddiag.analyses.threshold_free import (
    bootstrap_pair,
    resample_counts,
    threshold_free_metrics,
)
from guarddiag.labels import LOOSE

# ---------------------------------------------------------------- provenance


def _meta(size: str, branch: str, *, kind: str = "branch", n_params: int | None,
          checkpoint: str | None, train_rows: int | None) -> dict[str, object]:
    return {"run_id": f"{size}/{branch}/seed=42", "guard_kind": kind, "size": size,
            "branch": branch, "n_params": n_params, "checkpoint": checkpoint,
            "train_rows": train_rows}


def test_provenance_sentence_marks_only_demo_sizes_and_unrecorded_rows():
    ckpt = "answerdotai/ModernBERT-base"
    run_meta_table = pl.DataFrame([
        # A pretrained size: not a demo size, whatever the other size is.
        _meta("base", "E1", n_params=149_014_272, checkpoint=ckpt, train_rows=8000),
        _meta("base", "reference", n_params=149_014_272, checkpoint=ckpt, train_rows=8000),
        # A CPU size from random init whose runs recorded no training rows.
        _meta("micro", "E2", n_params=609_908, checkpoint=None, train_rows=None),
        _meta("micro", "reference", n_params=609_908, checkpoint=None, train_rows=None),
        # Baselines are not branch runs: left out of the sentence.
        _meta("tfidf", "tfidf_lr", kind="baseline", n_params=None, checkpoint=None,
              train_rows=5),
    ], schema=RUN_META_SCHEMA)
    prov = branch_provenance(run_meta_table)
    assert prov is not None
    assert prov.demo is True
    # Sizes sort as strings (base < micro); branches in the specs' order; 149,014,272 / 1e6
    # = 149.01; 609,908 / 1e6 = 0.61.
    assert prov.sentence == (
        f"base: 2 branch runs (reference, E1), 149.01 M parameters, {ckpt}, trained on "
        "8,000 rows; "
        "micro: 2 branch runs (reference, E2), 0.61 M parameters, random init, trained on "
        "an unrecorded number of rows — demo size")
    assert prov.table["demo_size"].to_list() == [False, True]


def test_provenance_span_ignores_runs_without_a_row_count():
    # One run without train_rows beside one with: the span is the recorded run's (min and max
    # of a column skip nulls, so both ends are known or neither is).
    run_meta_table = pl.DataFrame([
        _meta("small", "E3", n_params=None, checkpoint="x/y", train_rows=1272),
        _meta("small", "E4", n_params=None, checkpoint="x/y", train_rows=None),
    ], schema=RUN_META_SCHEMA)
    prov = branch_provenance(run_meta_table)
    assert prov is not None
    assert prov.demo is False
    row = prov.table.row(0, named=True)
    assert (row["train_rows_min"], row["train_rows_max"]) == (1272, 1272)
    assert (row["n_params_min"], row["n_params_max"]) == (None, None)
    assert prov.sentence == ("small: 2 branch runs (E3, E4), parameters not recorded, x/y, "
                               "trained on 1,272 rows")


# ---------------------------------------------------------------- threshold-free metrics

HARM, BENIGN = [0.9, 0.8, 0.3, 0.7], [0.2, 0.6, 0.1]


def test_resample_blocks_hold_at_most_a_million_draws_and_match_numpy_draws():
    n, n_resamples = 101, 10_000
    blocks = list(resample_counts(np.random.default_rng(5), n, n_resamples))
    # ⌊1,000,000 / 101⌋ = 9,900 resamples per block (9,900 · 101 = 999,900 draws; one more
    # resample would make 1,000,001), then the remaining 100.
    assert [b.shape for b in blocks] == [(9900, n), (100, n)]
    # The blocks are numpy's stream of rng.integers(0, n, size=n) per resample, counted.
    oracle = np.random.default_rng(5)
    expected = np.stack([np.bincount(oracle.integers(0, n, size=n), minlength=n)
                         for _ in range(n_resamples)])
    assert np.array_equal(np.vstack(blocks), expected)


def test_fractional_weights_are_summed_as_real_numbers():
    # One resample row of non-integer weights (harmful prompts first).
    w = np.array([0.5, 1.5, 2.0, 0.25, 1.0, 0.75, 3.0])
    y, p = np.r_[np.ones(4), np.zeros(3)], np.r_[HARM, BENIGN]
    f1, auprc, over, thr = bootstrap_pair(HARM, BENIGN, threshold=0.5, counts=w[None, :])[0]
    # At 0.5: TP = 0.5 + 1.5 + 0.25 (0.9, 0.8, 0.7), FP = 0.75 (0.6), FN = 2.0 (0.3).
    assert f1 == pytest.approx(4.5 / (4.5 + 0.75 + 2.0))
    assert f1 == pytest.approx(f1_score(y, p >= 0.5, sample_weight=w))
    # Levels 0.9, 0.8, 0.7 have precision 1; at 0.3, TP 4.25 against FP 0.75: 4.25 / 5.
    assert auprc == pytest.approx((0.5 + 1.5 + 0.25 + 2.0 * 4.25 / 5.0) / 4.25)
    assert auprc == pytest.approx(average_precision_score(y, p, sample_weight=w))
    # 95 % of 4.25 = 4.0375 is reached only at 0.3, where 0.75 of 4.75 benign weight is flagged.
    assert thr == 0.3
    assert over == pytest.approx(0.75 / 4.75)


def test_resamples_without_harmful_or_benign_prompts_have_no_over_refusal():
    counts = np.array([[0, 0, 0, 0, 1, 1, 1],   # no harmful prompt
                       [1, 1, 1, 1, 0, 0, 0],   # no benign prompt
                       [1, 1, 1, 1, 1, 1, 1]])  # each prompt once
    dist = bootstrap_pair(HARM, BENIGN, threshold=0.5, counts=counts)
    # No harmful prompt: F1 = 0 (TP 0, FP 1 for 0.6); AUPRC, capture threshold and the
    # over-refusal at it are undefined.
    assert dist[0, 0] == 0.0
    assert all(math.isnan(x) for x in dist[0, 1:])
    # No benign prompt: F1 = 2·3 / (2·3 + 0 + 1); precision 1 everywhere, so AUPRC 1; the
    # threshold capturing all 4 harmful prompts is 0.3; no benign prompt to over-refuse.
    assert dist[1, 0] == pytest.approx(6 / 7)
    assert dist[1, 1] == pytest.approx(1.0)
    assert dist[1, 3] == 0.3
    assert math.isnan(dist[1, 2])
    # Both present: 1 of 3 benign prompts (0.6) is flagged at 0.3.
    assert dist[2, 2] == pytest.approx(1 / 3)


EXPECTED_COLUMNS = {
    "pair": pl.String, "harmful": pl.String, "benign": pl.String, "run_id": pl.String,
    "guard_kind": pl.String, "branch": pl.String, "size": pl.String, "seed": pl.Int64,
    "label_policy": pl.String, "n_harmful": pl.Int64, "n_benign": pl.Int64,
    "base_rate": pl.Float64,
    "f1": pl.Float64, "f1_low": pl.Float64, "f1_high": pl.Float64,
    "auprc": pl.Float64, "auprc_low": pl.Float64, "auprc_high": pl.Float64,
    "over_refusal_at_capture": pl.Float64, "over_refusal_at_capture_low": pl.Float64,
    "over_refusal_at_capture_high": pl.Float64,
    "threshold_at_capture": pl.Float64, "interval": pl.String,
}


def test_the_table_keeps_its_columns_when_no_pair_has_predictions():
    meta = run_meta("micro", "reference", 42)
    preds = frame(rows_for(meta, "jbb_harmful", [0.9, 0.1]))  # jbb_benign missing
    res = threshold_free_metrics(preds, mapping=LOOSE, threshold=0.5, n_resamples=10)
    assert res.table.height == 0
    assert dict(res.table.schema) == EXPECTED_COLUMNS
    assert len(res.missing) == 4
