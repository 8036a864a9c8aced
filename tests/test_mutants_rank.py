"""The rank test's edges (guarddiag.analyses.rank): which branches count as the group in the
per-branch table, when a tie sits *beside* the group for the declared tail only, sizes kept in
name order, and sizes skipped because the group is missing or is all there is.

Oracles: ranks and neighbours worked out by hand in the comments.
"""

from __future__ import annotations

from synthetic_runs import COPY, KINDS, decisions, frame, rows_for, run_meta

from guarddiag import analyses, stats
from guarddiag.analyses.rank import rank_test_at

GROUP = ("E1", "E7", "E8", "E10")
OTHERS = ("E2", "E3", "E4", "E5", "E6", "E9")


def _scores(values: dict[str, float]) -> dict[str, float]:
    assert set(values) == set(GROUP) | set(OTHERS)
    return values


def test_a_tie_beside_the_top_group_counts_only_right_below_it():
    # Group at the top (0.9 .. 0.6). Just below it E2 = 0.5 stands alone; E3 and E4 tie at 0.4
    # further down (positions 6 and 7 of 10, i.e. right above the bottom four). With tail "top"
    # only the branch just below the top four matters: no extreme-beside-tie.
    scores = _scores({"E1": 0.9, "E7": 0.8, "E8": 0.7, "E10": 0.6, "E2": 0.5, "E3": 0.4,
                      "E4": 0.4, "E5": 0.3, "E6": 0.2, "E9": 0.1})
    ties = rank_test_at("full", stats.rank_test(scores, GROUP, tail="top"))
    assert [b.branches for b in ties.tie_blocks] == [("E3", "E4")]
    assert not ties.extreme_beside_tie
    # the same with tail "either": the group holds the top, not the bottom: still no
    either = rank_test_at("full", stats.rank_test(scores, GROUP, tail="either"))
    assert not either.extreme_beside_tie
    # but a tie right below the group is one
    scores["E2"] = 0.4
    assert rank_test_at("full", stats.rank_test(scores, GROUP, tail="top")).extreme_beside_tie


def test_a_group_at_the_bottom_borders_a_tie_only_for_a_bottom_tail():
    # Group at the bottom (0.1 .. 0.4); E2 and E3 tie at 0.5 right above it.
    scores = _scores({"E1": 0.1, "E7": 0.2, "E8": 0.3, "E10": 0.4, "E2": 0.5, "E3": 0.5,
                      "E4": 0.6, "E5": 0.7, "E6": 0.8, "E9": 0.9})
    bottom = stats.rank_test(scores, GROUP, tail="bottom")
    assert bottom.group_holds_bottom
    assert rank_test_at("full", bottom).extreme_beside_tie
    assert rank_test_at("full", stats.rank_test(scores, GROUP, tail="either")).extreme_beside_tie
    # tail "top" declares the top: the group's bottom position is not the extreme tested
    top = stats.rank_test(scores, GROUP, tail="top")
    assert top.group_holds_bottom
    assert not rank_test_at("full", top).extreme_beside_tie


def _study(per_size: dict[str, dict[str, int]], n: int = 10) -> analyses.ScoresResult:
    rows = []
    ids = [f"c{i}" for i in range(n)]
    for size, counts in per_size.items():
        for branch, k in counts.items():
            rows += rows_for(run_meta(size, branch, 42), COPY, decisions(k, n), ids=ids)
    return analyses.compute_scores(frame(rows), kinds=KINDS, n_resamples=10, seed=0)


def _full(shift: int = 0) -> dict[str, int]:
    # group flags 10, 9, 8, 7 prompts of 10; the others 0..5 (+ shift, capped at 6)
    out = {"E1": 10, "E7": 9, "E8": 8, "E10": 7}
    out.update({b: min(6, i + shift) for i, b in enumerate(OTHERS)})
    return out


def test_branch_frame_marks_exactly_the_group():
    res = analyses.branch_rank_test(_study({"micro": _full()}), group=GROUP, benchmark=COPY)
    frame_ = res.branch_frame()
    flagged = set(frame_.filter(frame_["in_group"])["branch"].to_list())
    assert flagged == set(GROUP)
    assert frame_.height == 10
    # E1 (10/10) is the top branch with rank 10; E2 (0/10) the lowest with rank 1
    by_branch = {r["branch"]: r for r in frame_.iter_rows(named=True)}
    assert (by_branch["E1"]["score"], by_branch["E1"]["rank"]) == (1.0, 10.0)
    assert (by_branch["E2"]["score"], by_branch["E2"]["rank"]) == (0.0, 1.0)


def test_sizes_come_in_name_order():
    sizes = ["a1", "b2", "c3", "d4", "e5", "f6", "g7", "h8"]
    per_size = {s: _full(i % 2) for i, s in enumerate(reversed(sizes))}
    res = analyses.branch_rank_test(_study(per_size), group=GROUP, benchmark=COPY)
    assert [t.size for t in res.tests] == sizes
    assert res.to_frame()["size"].to_list() == sizes


def test_sizes_without_the_whole_group_or_without_another_branch_are_skipped():
    per_size = {
        "full": _full(),
        "missing_e10": {b: k for b, k in _full().items() if b != "E10"},
        "only_group": {b: k for b, k in _full().items() if b in GROUP},
    }
    res = analyses.branch_rank_test(_study(per_size), group=GROUP, benchmark=COPY)
    assert [t.size for t in res.tests] == ["full"]
    test, = res.tests
    assert (test.n, test.k) == (10, 4)
