"""The exact permutation rank test of a named group of branches on one benchmark.

Each branch's score on the benchmark at one model size is the mean over its seeds; the branches
ranked are the E-numbered branches (``E1`` … ``E10``) plus any other student branch the group
names. :func:`guarddiag.stats.rank_test` does the counting (closed form 1/C(n, k), exact
rank-sum distribution over the observed mid-ranks); see its module docstring for ties and tails.
One test per model size.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from guarddiag import stats
from guarddiag.analyses.load import student_runs
from guarddiag.analyses.scores import ScoresResult
from guarddiag.errors import GuarddiagError, unknown_name

_E_BRANCH = re.compile(r"^E\d+$")
DEFAULT_GROUP = ("E1", "E7", "E8", "E10")
"""The study's group: branches whose last policy signal is A."""
DEFAULT_BENCHMARK = "harmbench_copyright"


@dataclass(frozen=True)
class BranchRankResult:
    """One exact rank test per model size."""

    benchmark: str
    metric: str
    subset: str
    mapping: str
    group: tuple[str, ...]
    tail: str
    tests: tuple[tuple[str, stats.RankTestResult], ...]
    """(size, test) pairs, sizes in name order."""

    def to_frame(self) -> pl.DataFrame:
        rows = []
        for size, t in self.tests:
            rows.append({
                "size": size, "benchmark": self.benchmark, "subset": self.subset,
                "mapping": self.mapping, "group": ",".join(t.group), "n": t.n, "k": t.k,
                "rank_sum": t.rank_sum, "max_rank_sum": t.max_rank_sum,
                "group_holds_top": t.group_holds_top,
                "group_holds_bottom": t.group_holds_bottom, "ties": t.ties,
                "p_closed_form": float(t.p_extreme_top), "p_upper": float(t.p_upper),
                "p_lower": float(t.p_lower), "p_two_sided": float(t.p_two_sided),
                "tail": t.tail, "p_value": float(t.p_value),
            })
        return pl.DataFrame(rows, schema={
            "size": pl.String, "benchmark": pl.String, "subset": pl.String, "mapping": pl.String,
            "group": pl.String, "n": pl.Int64, "k": pl.Int64, "rank_sum": pl.Float64,
            "max_rank_sum": pl.Float64, "group_holds_top": pl.Boolean,
            "group_holds_bottom": pl.Boolean, "ties": pl.Boolean, "p_closed_form": pl.Float64,
            "p_upper": pl.Float64, "p_lower": pl.Float64, "p_two_sided": pl.Float64,
            "tail": pl.String, "p_value": pl.Float64})

    def branch_frame(self) -> pl.DataFrame:
        """Per size and branch: mean score, mid-rank, whether it is in the group."""
        rows = [{"size": size, "branch": b, "score": s, "rank": r, "in_group": b in t.group}
                for size, t in self.tests
                for b, s, r in zip(t.branches, t.scores, t.ranks, strict=True)]
        return pl.DataFrame(rows, schema={"size": pl.String, "branch": pl.String,
                                          "score": pl.Float64, "rank": pl.Float64,
                                          "in_group": pl.Boolean})


def branch_rank_test(scores: ScoresResult, *, group: Sequence[str] = DEFAULT_GROUP,
                     benchmark: str = DEFAULT_BENCHMARK, subset: str = "full",
                     mapping: str = "loose", tail: str = "top") -> BranchRankResult:
    """Test whether ``group`` holds the ``tail`` ranks of the branches on ``benchmark``."""
    group = tuple(group)
    if not group:
        raise GuarddiagError("rank test: the group names no branch")
    rows = student_runs(scores.binary(subset=subset, mapping=mapping))
    known_benches = sorted(set(rows["benchmark"].to_list()))
    if benchmark not in known_benches:
        raise unknown_name("benchmark", benchmark, known_benches, "the rank test")
    rows = rows.filter((pl.col("benchmark") == benchmark) & pl.col("score").is_not_null())
    known = sorted(set(rows["branch"].to_list()))
    for g in group:
        if g not in known:
            raise unknown_name("branch", g, known, "the rank-test group")
    rows = rows.filter(pl.col("branch").str.contains(_E_BRANCH.pattern)
                       | pl.col("branch").is_in(list(group)))
    per = rows.group_by(["size", "branch"]).agg(pl.col("score").mean()).sort(["size", "branch"])
    tests = []
    for (size,), part in per.group_by(["size"], maintain_order=True):
        present = set(part["branch"].to_list())
        if not set(group) <= present or len(present) <= len(group):
            continue
        scores_of = dict(zip(part["branch"].to_list(), part["score"].to_list(), strict=True))
        tests.append((size, stats.rank_test(scores_of, group, tail=tail)))
    if not tests:
        raise GuarddiagError(
            f"rank test: no model size has all of {', '.join(group)} and at least one other "
            f"branch scored on {benchmark!r}")
    metric = rows["metric"][0] if rows.height else ""
    return BranchRankResult(benchmark=benchmark, metric=metric, subset=subset, mapping=mapping,
                            group=group, tail=tail, tests=tuple(tests))
