"""Small text and label helpers at their edges (guarddiag.text, guarddiag.labels): the branch
sort key breaks ties by name, and Jaccard similarity of empty word sets.

Expected orders and values by hand.
"""

from __future__ import annotations

from guarddiag.labels import branch_order, branch_sort_key
from guarddiag.text import jaccard


def test_branches_of_one_rank_sort_by_name():
    # "zeta", "alpha", "mid" are all "other" branches (one rank): the name decides, whatever
    # the input order.
    names = ["zeta", "T_B", "E10", "alpha", None, "E2", "reference", "mid", "T_A"]
    assert sorted(names, key=branch_sort_key) == [
        "reference", "E2", "E10", "alpha", "mid", "zeta", "T_A", "T_B", None]
    assert branch_sort_key("zeta") == (branch_order("zeta"), "zeta")
    assert branch_sort_key(None) == (branch_order(None), "")


def test_jaccard_with_empty_sets():
    assert jaccard(frozenset(), frozenset()) == 0.0
    assert jaccard(frozenset({"a"}), frozenset()) == 0.0
    assert jaccard(frozenset(), frozenset({"a", "b"})) == 0.0
    assert jaccard(frozenset({"a", "b"}), frozenset({"b", "c"})) == 1 / 3
