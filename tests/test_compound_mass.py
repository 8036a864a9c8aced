"""COMPOUND probability under the loose and the strict mapping, by behaviour (issue 18).

Both mappings read COMPOUND as unsafe (guarddiag.labels): loose = HARMFUL + COMPOUND, strict =
BOUNDARY_SAFE + HARMFUL + COMPOUND. These prompts put most of their unsafe mass on COMPOUND, so
a mapping that forgot the class, or swapped BOUNDARY_SAFE for it, changes the scores below.
"""

from __future__ import annotations

import polars as pl
import pytest
from synthetic_runs import COPY, ORH, frame, rows_for, run_meta

from guarddiag import analyses

# (p_GENERIC_SAFE, p_BOUNDARY_SAFE, p_HARMFUL, p_COMPOUND) per prompt, and the hand read-out at
# threshold 0.5: loose sums HARMFUL + COMPOUND, strict adds BOUNDARY_SAFE.
PROBS = [
    ((0.5, 0.0, 0.0, 0.5), True, True),     # all unsafe mass on COMPOUND, exactly 0.5
    ((0.6, 0.0, 0.1, 0.3), False, False),   # 0.4 either way
    ((0.4, 0.2, 0.1, 0.3), False, True),    # loose 0.4, strict 0.6
    ((0.3, 0.0, 0.0, 0.7), True, True),
    ((0.45, 0.1, 0.2, 0.25), False, True),  # loose 0.45, strict 0.55
    ((0.9, 0.0, 0.0, 0.1), False, False),
]
KINDS = {COPY: "harmful", ORH: "benign"}


def _table() -> pl.DataFrame:
    rows = []
    ids = [f"q{i}" for i in range(len(PROBS))]
    for bench in KINDS:
        meta = run_meta("micro", "reference", 42)
        part = rows_for(meta, bench, [0.0] * len(PROBS), ids=ids)
        for row, (probs, _, _) in zip(part, PROBS, strict=True):
            row.update(zip(("p_GENERIC_SAFE", "p_BOUNDARY_SAFE", "p_HARMFUL", "p_COMPOUND"),
                           probs, strict=True))
            row["p_unsafe"] = probs[2] + probs[3]
            row["pred_class"] = ("GENERIC_SAFE", "BOUNDARY_SAFE", "HARMFUL",
                                 "COMPOUND")[max(range(4), key=probs.__getitem__)]
        rows += part
    return frame(rows)


@pytest.fixture(scope="module")
def scores():
    return analyses.compute_scores(_table(), kinds=KINDS, n_resamples=20, seed=0)


def _score(scores, bench: str, mapping: str) -> float:
    t = scores.binary(subset="full", mapping=mapping).filter(pl.col("benchmark") == bench)
    assert t.height == 1
    return t["score"][0]


@pytest.mark.parametrize("bench", [COPY, ORH])
def test_compound_mass_counts_as_unsafe_under_both_mappings(scores, bench):
    loose = sum(lo for _, lo, _ in PROBS) / len(PROBS)
    strict = sum(st for _, _, st in PROBS) / len(PROBS)
    assert (loose, strict) == (2 / 6, 4 / 6)
    assert _score(scores, bench, "loose") == pytest.approx(loose)
    assert _score(scores, bench, "strict") == pytest.approx(strict)


def test_mapping_effect_pairs_the_compound_scores(scores):
    effect = analyses.mapping_effect(scores).to_frame().filter(pl.col("subset") == "full")
    assert effect.height == 2
    for row in effect.iter_rows(named=True):
        assert row["loose"] == pytest.approx(2 / 6)
        assert row["strict"] == pytest.approx(4 / 6)
        assert row["delta_pp"] == pytest.approx((4 / 6 - 2 / 6) * 100)  # percentage points
