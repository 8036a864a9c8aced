"""The rows branches train on: the policy-refusal anchor set of E3/E5 (a fixed quarter of the
rows policy A blocks and B allows, not all of them) and head-only calibration rows drawn from
the cal split, sized as a share of the parent's train sample.

Expected sets come from an oracle in this file (sha256 of salt and id, written out again here);
expected sizes from hand arithmetic on the study's shares.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from guarddiag.errors import GuarddiagError
from guarddiag.pool.table import Pool, read_pool, sample_split
from guarddiag.train.branches import load_branches
from guarddiag.train.rows import (
    POLICY_ANCHOR_SHARE,
    calibration_frame,
    label_rows,
    policy_anchor_mask,
    training_frame,
)

UNSAFE = ("HARMFUL", "COMPOUND")


def _oracle_unit(pid: str, salt: str) -> float:
    digest = hashlib.sha256(f"{salt}\x1f{pid}".encode()).digest()
    return int.from_bytes(digest[:7], "big") / float(1 << 56)


def _frame(n: int) -> pl.DataFrame:
    # Every third row: A blocks, B allows (A-only); the rest agree.
    a = ["HARMFUL" if i % 3 == 0 else "GENERIC_SAFE" for i in range(n)]
    b = ["BOUNDARY_SAFE" if i % 3 == 0 else "GENERIC_SAFE" for i in range(n)]
    return pl.DataFrame({"prompt_id": [f"p{i}" for i in range(n)], "label_a": a, "label_b": b})


def test_anchor_set_is_the_hash_chosen_quarter_of_a_only_rows():
    frame = _frame(12_000)
    got = policy_anchor_mask(frame)
    want = np.array([i % 3 == 0 and _oracle_unit(f"p{i}", "policy-refusal-anchors") < 0.25
                     for i in range(12_000)])
    assert np.array_equal(got, want)
    # 4,000 A-only rows, binomial(4000, 0.25): 1,000 ± 5 sd (sd = sqrt(4000·0.25·0.75) ≈ 27)
    assert abs(int(got.sum()) - 1_000) < 5 * math.sqrt(4_000 * 0.25 * 0.75)
    assert POLICY_ANCHOR_SHARE == 0.25
    # An anchor is an anchor in every sample that holds it (a property of the row, not the mix).
    assert np.array_equal(policy_anchor_mask(frame.tail(5_000)), want[-5_000:])


def test_anchors_add_only_anchor_rows_to_the_mix():
    frame = _frame(3_000).with_columns(
        pl.lit("x").alias("text"), pl.lit(None, dtype=pl.List(pl.String)).alias("pillars_a"),
        pl.lit(None, dtype=pl.List(pl.String)).alias("pillars_b"),
        pl.lit(None, dtype=pl.Int64).alias("span_start"),
        pl.lit(None, dtype=pl.Int64).alias("span_end"))
    plain = label_rows(frame, fraction=0.25, anchors=False).policy
    anchored = label_rows(frame, fraction=0.25, anchors=True).policy
    added = anchored & ~plain
    a_only = np.arange(3_000) % 3 == 0
    assert not (plain & ~anchored).any()
    assert added.any()
    assert not added[~a_only].any()  # only A-only rows join
    # ... and far from all of them: most A-only rows outside the 25% mix stay on policy B.
    left_on_b = a_only & ~anchored
    assert left_on_b.sum() > 0.5 * a_only.sum()


def _label_frame(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(
        pl.lit("x").alias("text"), pl.lit(None, dtype=pl.List(pl.String)).alias("pillars_a"),
        pl.lit(None, dtype=pl.List(pl.String)).alias("pillars_b"),
        pl.lit(None, dtype=pl.Int64).alias("span_start"),
        pl.lit(None, dtype=pl.Int64).alias("span_end"))


def test_anchor_rows_outside_the_sample_are_added_to_the_mix():
    train = _label_frame(_frame(3_000)).with_columns(pl.lit("train").alias("split"))
    pool = Pool(train, Path("pool.parquet"), "0" * 64)
    spec = load_branches()["E3"]
    small = spec.model_copy(update={"train_rows": 600})
    got = training_frame(pool, small)
    # Oracle: the first 600 ids in hash order (salt "sample:train"), then every anchor
    # (A-only: i % 3 == 0, unit < 0.25) not among them, in the same hash order.
    order = sorted(range(3_000), key=lambda i: (_oracle_unit(f"p{i}", "sample:train"), f"p{i}"))
    sample = [f"p{i}" for i in order[:600]]
    extra = [f"p{i}" for i in order[600:]
             if i % 3 == 0 and _oracle_unit(f"p{i}", "policy-refusal-anchors") < 0.25]
    assert got["prompt_id"].to_list() == sample + extra
    assert len(extra) > 150  # about 3/4 of some 250 anchors lie outside a 20% sample
    rows = label_rows(got, fraction=small.policy_a_fraction, anchors=True)
    assert rows.policy[600:].all()  # added anchors carry their policy-A label
    # E2 (no anchors) and a full-split E3 add nothing.
    no_anchors = small.model_copy(update={"anchors": False})
    assert training_frame(pool, no_anchors)["prompt_id"].to_list() == sample
    assert training_frame(pool, spec.model_copy(update={"train_rows": None})).equals(
        sample_split(pool, "train", None))


# ---------------------------------------------------------------- head-only rows from cal


def _pool(n_train: int, n_cal: int, n_cal_disagree: int) -> Pool:
    rows = []
    for i in range(n_train):
        rows.append((f"t{i}", "train", "GENERIC_SAFE", "GENERIC_SAFE"))
    for i in range(n_cal):
        dis = i < n_cal_disagree
        rows.append((f"c{i}", "cal", "HARMFUL" if dis else "GENERIC_SAFE",
                     "BOUNDARY_SAFE" if dis else "GENERIC_SAFE"))
    pid, split, a, b = (list(x) for x in zip(*rows, strict=True))
    frame = pl.DataFrame({"prompt_id": pid, "split": split, "label_a": a, "label_b": b})
    return Pool(frame, Path("pool.parquet"), "0" * 64)


def test_head_only_branches_draw_from_cal_sized_by_the_train_sample():
    b = load_branches()
    for name in ("E1", "E7", "E10"):
        assert b[name].calibration_split == "cal", name
        assert b[name].train_rows == 8_000, name
    pool = _pool(n_train=10_000, n_cal=3_000, n_cal_disagree=1_000)
    # E1: 0.159 · 8,000 = 1,272 rows, all from cal, none resampled (cal holds 3,000).
    e1, counts = calibration_frame(pool, b["E1"], seed=0)
    assert e1.height == counts["n_calibration"] == 1_272
    assert counts["n_resampled"] == 0
    assert set(e1["prompt_id"].str.slice(0, 1)) == {"c"}
    assert e1["prompt_id"].n_unique() == 1_272
    # E7: 0.999 · 8,000 = 7,992 rows from a 3,000-row cal: each cal row once, 4,992 redrawn.
    e7, counts = calibration_frame(pool, b["E7"], seed=0)
    assert e7.height == 7_992
    assert counts["n_resampled"] == 7_992 - 3_000
    assert e7["prompt_id"].n_unique() == 3_000
    # E10: 1,272 rows, round(0.353 · 1,272) = 449 GENERIC_SAFE anchors, 823 disagreement rows.
    e10, counts = calibration_frame(pool, b["E10"], seed=0)
    assert (counts["n_generic_anchors"], counts["n_disagreement"]) == (449, 823)
    assert int((e10["label_a"] != e10["label_b"]).sum()) == 823


def test_calibration_rows_are_seeded():
    b = load_branches()
    pool = _pool(n_train=10_000, n_cal=3_000, n_cal_disagree=1_000)
    one, _ = calibration_frame(pool, b["E1"], seed=1)
    again, _ = calibration_frame(pool, b["E1"], seed=1)
    other, _ = calibration_frame(pool, b["E1"], seed=2)
    assert one["prompt_id"].to_list() == again["prompt_id"].to_list()
    assert one["prompt_id"].to_list() != other["prompt_id"].to_list()
    e7a, _ = calibration_frame(pool, b["E7"], seed=1)
    e7b, _ = calibration_frame(pool, b["E7"], seed=2)
    assert e7a["prompt_id"].to_list() != e7b["prompt_id"].to_list()


# ---------------------------------------------------------------- on the real pool


@pytest.fixture(scope="module")
def real_pool_file(real_data_dir, tmp_path_factory):
    from guarddiag.pool import build_pool

    out = tmp_path_factory.mktemp("pool_rows")
    return build_pool(data_dir=real_data_dir, out_dir=out).pool_path


def _binary(labels: list[str]) -> np.ndarray:
    return np.array([x in UNSAFE for x in labels])


@pytest.mark.realdata
def test_e3_and_e5_differ_from_e6_at_demo_size(real_pool_file):
    # The demo's 8,000-row sample holds too few A ≠ B rows for 1,000 differing labels on its
    # own rows (E5 keeps half of them on A); the anchor rows the sample left out are added,
    # and E6 trains on none of them, so E3/E5 hold ≥ 1,000 (prompt, label) pairs E6 lacks.
    b = load_branches()
    pool = read_pool(real_pool_file)
    e6 = training_frame(pool, b["E6"])
    a6 = e6["label_a"].to_list()
    for name in ("E3", "E5"):
        spec = b[name]
        mine = training_frame(pool, spec)
        assert mine.head(e6.height)["prompt_id"].equals(e6["prompt_id"])
        use_a = label_rows(mine, fraction=spec.policy_a_fraction, anchors=True).policy
        labels = [x if u else y for x, y, u in
                  zip(mine["label_a"], mine["label_b"], use_a, strict=True)]
        shared = sum(m != x for m, x in zip(labels[:e6.height], a6, strict=True))
        added = mine.height - e6.height
        assert shared + added >= 1_000, (name, shared, added)


@pytest.mark.realdata
def test_e3_and_e5_differ_from_e6(real_pool_file):
    b = load_branches()
    pool = read_pool(real_pool_file)
    train = sample_split(pool, "train", None)
    a, bl = train["label_a"].to_list(), train["label_b"].to_list()
    diffs = {}
    for name in ("E3", "E5"):
        spec = b[name]
        use_a = label_rows(train, fraction=spec.policy_a_fraction, anchors=spec.anchors).policy
        mine = [x if u else y for x, y, u in zip(a, bl, use_a, strict=True)]
        # E6 carries every policy-A label: a row differs exactly where it is on B and A ≠ B.
        diffs[name] = sum(m != x for m, x in zip(mine, a, strict=True))
        assert diffs[name] == sum(not u and x != y for x, y, u in zip(a, bl, use_a, strict=True))
        assert diffs[name] >= 1_000, (name, diffs[name])
        binary = int((_binary(mine) != _binary(a)).sum())
        assert binary >= 1_000, (name, binary)
    assert diffs["E3"] > diffs["E5"]


def test_head_only_run_from_cal_trains_on_a_resampled_train_sized_set(tmp_path):
    from model_fixtures import make_pool, write_tiny_branches

    from guarddiag.files import read_json
    from guarddiag.train import train_branches

    pool_path = make_pool(tmp_path / "pool.parquet", n=600)
    pool = read_pool(pool_path)
    n_train, n_cal = pool.split("train").height, pool.split("cal").height
    folder = write_tiny_branches(tmp_path / "branches")
    e1 = folder / "E1.yaml"
    e1.write_text(e1.read_text().replace("calibration_fraction: 0.5",
                                         "calibration_fraction: 1.0\ncalibration_split: cal"))
    result = train_branches(branches=load_branches(folder), names="E1", sizes=["micro"],
                            seeds=[42], runs_dir=tmp_path / "runs", pool_path=pool_path)
    assert [r.run_id for r in result.runs][-1] == "micro/E1/seed=42"
    meta = read_json(tmp_path / "runs" / "micro" / "E1" / "seed=42" / "meta.json")
    cal = meta["train"]["calibration"]
    # train_rows is null: the whole train split sets the size; cal is far smaller.
    assert n_cal < n_train
    assert cal["n_calibration"] == n_train
    assert cal["n_resampled"] == n_train - n_cal
    assert meta["train"]["n_rows"] == n_train


def _mixed_cal_pool() -> Pool:
    """cal: 300 HARMFUL/BOUNDARY and 60 COMPOUND/BOUNDARY rows (policy A blocks, B allows),
    200 HARMFUL/HARMFUL, 40 COMPOUND/COMPOUND and 1,000 GENERIC/GENERIC rows (they agree)."""
    rows = [(f"t{i}", "train", "GENERIC_SAFE", "GENERIC_SAFE") for i in range(10_000)]
    kinds = ([("HARMFUL", "BOUNDARY_SAFE")] * 300 + [("COMPOUND", "BOUNDARY_SAFE")] * 60
             + [("HARMFUL", "HARMFUL")] * 200 + [("COMPOUND", "COMPOUND")] * 40
             + [("GENERIC_SAFE", "GENERIC_SAFE")] * 1_000)
    rows += [(f"c{i}", "cal", a, b) for i, (a, b) in enumerate(kinds)]
    pid, split, a, b = (list(x) for x in zip(*rows, strict=True))
    return Pool(pl.DataFrame({"prompt_id": pid, "split": split, "label_a": a, "label_b": b}),
                Path("pool.parquet"), "0" * 64)


@pytest.mark.parametrize("name", ["E1", "E7", "E10"])
def test_a_control_trains_on_its_branchs_balance_with_agreement_rows(name):
    b = load_branches()
    pool = _mixed_cal_pool()
    a_rows, a_counts = calibration_frame(pool, b[name], seed=3)
    c_rows, c_counts = calibration_frame(pool, b[f"{name}-ctrl"], seed=3)
    assert b[f"{name}-ctrl"].control_of == name
    assert c_rows.height == a_rows.height
    # the same policy-A classes, row for row in count, and no row the policies disagree on
    count = lambda f: dict(f.group_by("label_a").len().iter_rows())  # noqa: E731
    assert count(c_rows) == count(a_rows)
    assert int((c_rows["label_a"] != c_rows["label_b"]).sum()) == 0
    n_dis = int((a_rows["label_a"] != a_rows["label_b"]).sum())
    assert n_dis > 0
    assert (c_counts["n_swapped"], c_counts["n_disagreement"]) == (n_dis, 0)
    assert a_counts["n_swapped"] == 0
    # the A branch's agreement rows (its anchors among them) are the control's too, each at
    # least as often (a stand-in drawn with replacement may repeat one of them)
    agree = Counter(a_rows.filter(pl.col("label_a") == pl.col("label_b"))["prompt_id"])
    mine = Counter(c_rows["prompt_id"])
    assert all(mine[pid] >= k for pid, k in agree.items())
    assert c_counts["n_generic_anchors"] == a_counts["n_generic_anchors"]


def test_a_control_needs_an_agreement_row_of_every_class():
    b = load_branches()
    frame = _mixed_cal_pool().frame.filter(pl.col("label_b") != "COMPOUND")
    pool = Pool(frame, Path("pool.parquet"), "0" * 64)
    with pytest.raises(GuarddiagError, match="no row both policies label COMPOUND"):
        calibration_frame(pool, b["E10-ctrl"], seed=0)
