"""The exact permutation rank test of a named group of branches on one benchmark.

Each branch's score on the benchmark at one model size is the mean over its seeds; the branches
ranked are the study's branches, read from the runs' roles (:func:`guarddiag.roles.
is_study_branch`: students that are neither the reference nor a sensitivity variant), plus any
other student branch the group names. The group, unless named, is the A-last group
(:func:`guarddiag.roles.is_a_last`: the students whose last policy signal is A).
:func:`guarddiag.stats.rank_test` does the counting (closed form 1/C(n, k), exact rank-sum
distribution over the observed mid-ranks); see its module docstring for ties and tails.
One test per model size.

Ties made visible. :func:`rank_test_at` lists the blocks of branches with equal scores (and
:func:`tie_note` says what they do to p, in words, for the report and results.json). The
closed form is the p-value only when the group holds the extreme ranks *outright*; the
tie-aware p (the declared tail's exact p over the observed mid-ranks) is the one to read. When
a block of tied branches sits right beside the group (six branches all at 0.0% below a group of
four), the test separates the group from that block — it cannot order branches inside it — and
when a block holds branches on both sides of the group's boundary the group cannot be told
apart from them and the tie-aware p is larger than the closed form (5/210, not 1/210).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Literal, cast

import polars as pl

from guarddiag import stats
from guarddiag.analyses.defaults import DEFAULT_GROUP
from guarddiag.analyses.load import student_runs
from guarddiag.analyses.payload import not_in_payload
from guarddiag.analyses.registry import AnalysisContext, AnalysisOmitted, register_analysis
from guarddiag.analyses.scored import SCORES
from guarddiag.analyses.scores import ScoresResult
from guarddiag.errors import GuarddiagError, unknown_name
from guarddiag.labels import branch_order
from guarddiag.protocol import protocol
from guarddiag.roles import is_a_last, is_study_branch, names_where

RankTail = Literal["top", "bottom", "either"]
"""Which extreme the group is declared to hold."""


@dataclass(frozen=True)
class TieBlock:
    """Two or more branches with exactly the same (seed-mean) score."""

    score: float
    branches: tuple[str, ...]
    """In the specs' branch order (reference, E1…E10, others)."""
    n_in_group: int


@dataclass(frozen=True)
class RankTestAtSize:
    """The exact rank test at one model size, and what the ties among the ranked branches do
    to it."""

    size: str
    group: tuple[str, ...]
    branches: tuple[str, ...]
    """High → low."""
    scores: tuple[float, ...]
    ranks: tuple[float, ...]
    """Mid-ranks."""
    n: int
    k: int
    rank_sum: float
    max_rank_sum: float
    group_holds_top: bool
    group_holds_bottom: bool
    ties: bool
    p_closed_form: Fraction
    """1/C(n, k): the chance that the group holds the top k ranks (exact without ties)."""
    p_either_closed_form: Fraction
    p_upper: Fraction
    p_lower: Fraction
    p_two_sided: Fraction
    tail: Literal["top", "bottom", "either"]
    p_value: Fraction
    """Of the declared tail."""
    p_tie_aware: Fraction
    """= ``p_value``, named beside the closed form (exact only when no tie crosses the group)."""
    n_tied: int
    """Branches that share their score with at least one other."""
    tie_blocks: tuple[TieBlock, ...]
    """Blocks of tied branches, highest score first."""
    tie_straddles_group: bool
    """A tie holds branches in and out of the group: the closed form understates p."""
    extreme_beside_tie: bool
    """The group holds the declared extreme ranks and the branches next to it (just below the
    top k, or just above the bottom k) form a tie block: the extreme position is a separation
    from that block, which the test cannot order."""
    tie_note: str
    """Which branches tie, and what that does to p, in words."""

    @property
    def p_closed_form_of_tail(self) -> Fraction:
        """1/C(n, k) (2/C(n, k) for ``either``): exact only when no tie crosses the boundary."""
        return self.p_either_closed_form if self.tail == "either" else self.p_closed_form

    def describe_ties(self) -> str:
        """``score×count`` per block, e.g. ``0.0%×6``; empty without ties."""
        return "; ".join(f"{_pct(b.score)}×{len(b.branches)}" for b in self.tie_blocks)


def rank_test_at(size: str, test: stats.RankTestResult) -> RankTestAtSize:
    """``test`` at model size ``size`` with its tie blocks and whether they cross or border
    the group (module doc)."""
    group = set(test.group)
    by_score: dict[float, list[str]] = {}
    for b, s in zip(test.branches, test.scores, strict=True):
        by_score.setdefault(s, []).append(b)
    blocks = tuple(
        TieBlock(score=s, branches=tuple(sorted(bs, key=lambda x: (branch_order(x), x))),
                 n_in_group=sum(b in group for b in bs))
        for s, bs in sorted(by_score.items(), key=lambda kv: -kv[0]) if len(bs) > 1)
    # test.branches runs from the highest score to the lowest.
    top = test.group_holds_top and test.tail in ("top", "either")
    bottom = test.group_holds_bottom and test.tail in ("bottom", "either")
    beside: list[str] = []
    if top and test.k < test.n:
        beside.append(test.branches[test.k])
    if bottom and test.k < test.n:
        beside.append(test.branches[test.n - test.k - 1])
    at = RankTestAtSize(
        size=size, group=test.group, branches=test.branches, scores=test.scores,
        ranks=test.ranks, n=test.n, k=test.k, rank_sum=test.rank_sum,
        max_rank_sum=test.max_rank_sum, group_holds_top=test.group_holds_top,
        group_holds_bottom=test.group_holds_bottom, ties=test.ties,
        p_closed_form=test.p_extreme_top, p_either_closed_form=test.p_extreme_either,
        p_upper=test.p_upper, p_lower=test.p_lower, p_two_sided=test.p_two_sided,
        tail=cast(RankTail, test.tail), p_value=test.p_value, p_tie_aware=test.p_value,
        n_tied=sum(len(b.branches) for b in blocks), tie_blocks=blocks,
        tie_straddles_group=any(0 < b.n_in_group < len(b.branches) for b in blocks),
        extreme_beside_tie=any(x not in group and any(x in b.branches for b in blocks)
                               for x in beside),
        tie_note="")
    return replace(at, tie_note=tie_note(at))


_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
          "eleven", "twelve")


def count_words(n: int) -> str:
    """0 → 'no', 6 → 'six', 13 → '13'."""
    return _WORDS[n] if 0 <= n < len(_WORDS) else str(n)


def p_words(p: Fraction) -> str:
    return f"{p.numerator}/{p.denominator} = {float(p):.3g}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def tie_note(t: RankTestAtSize) -> str:
    """One sentence group for one model size: which branches tie, and what that does to p."""
    if not t.tie_blocks:
        return (f"{t.size}: no two branches tie, so the tie-aware p is the exact rank-sum p, "
                f"{p_words(t.p_tie_aware)}.")
    parts = []
    for b in t.tie_blocks:
        inside = ("none of them in the group" if b.n_in_group == 0 else
                  f"{count_words(b.n_in_group)} of them in the group")
        parts.append(f"{count_words(len(b.branches))} of {count_words(t.n)} branches tie at "
                     f"{_pct(b.score)} ({', '.join(b.branches)}; {inside})")
    text = f"{t.size}: " + "; ".join(parts) + ". "
    if t.tie_straddles_group:
        text += ("The group shares a tie with branches outside it, so it cannot be told apart "
                 f"from them: the tie-aware p is {p_words(t.p_tie_aware)}, larger than the "
                 f"closed form {p_words(t.p_closed_form_of_tail)}, which assumes no ties.")
    elif t.extreme_beside_tie:
        text += (f"The group's {count_words(t.k)} extreme ranks come from that tie: the test "
                 "separates the group from a block of branches with identical scores and "
                 "cannot order branches inside the block. The tie-aware p is "
                 f"{p_words(t.p_tie_aware)}"
                 + (", equal to the closed form because no tie crosses the group's boundary."
                    if t.p_tie_aware == t.p_closed_form_of_tail else "."))
    else:
        text += (f"No tie touches the group's boundary; the tie-aware p is "
                 f"{p_words(t.p_tie_aware)}.")
    return text


@dataclass(frozen=True)
class BranchRankResult:
    """One exact rank test per model size."""

    benchmark: str
    metric: str
    subset: str
    mapping: str
    group: tuple[str, ...] = field(metadata=not_in_payload())
    """The named group (each test holds it too)."""
    tail: RankTail
    tests: tuple[RankTestAtSize, ...]
    """One per model size, sizes in name order."""

    def to_frame(self) -> pl.DataFrame:
        """One row per model size: the test's numbers, its p-values as floats, its ties."""
        rows = [{
            "size": t.size, "benchmark": self.benchmark, "subset": self.subset,
            "mapping": self.mapping, "group": ",".join(t.group), "n": t.n, "k": t.k,
            "rank_sum": t.rank_sum, "max_rank_sum": t.max_rank_sum,
            "group_holds_top": t.group_holds_top, "group_holds_bottom": t.group_holds_bottom,
            "ties": t.ties, "p_closed_form": float(t.p_closed_form),
            "p_upper": float(t.p_upper), "p_lower": float(t.p_lower),
            "p_two_sided": float(t.p_two_sided), "tail": t.tail, "p_value": float(t.p_value),
            "p_tie_aware": float(t.p_tie_aware), "n_tied": t.n_tied,
            "tie_blocks": t.describe_ties(), "tie_straddles_group": t.tie_straddles_group,
            "extreme_beside_tie": t.extreme_beside_tie,
        } for t in self.tests]
        return pl.DataFrame(rows, schema={
            "size": pl.String, "benchmark": pl.String, "subset": pl.String, "mapping": pl.String,
            "group": pl.String, "n": pl.Int64, "k": pl.Int64, "rank_sum": pl.Float64,
            "max_rank_sum": pl.Float64, "group_holds_top": pl.Boolean,
            "group_holds_bottom": pl.Boolean, "ties": pl.Boolean, "p_closed_form": pl.Float64,
            "p_upper": pl.Float64, "p_lower": pl.Float64, "p_two_sided": pl.Float64,
            "tail": pl.String, "p_value": pl.Float64, "p_tie_aware": pl.Float64,
            "n_tied": pl.Int64, "tie_blocks": pl.String, "tie_straddles_group": pl.Boolean,
            "extreme_beside_tie": pl.Boolean})

    def branch_frame(self) -> pl.DataFrame:
        """Per size and branch: mean score, mid-rank, whether it is in the group."""
        rows = [{"size": t.size, "branch": b, "score": s, "rank": r, "in_group": b in t.group}
                for t in self.tests
                for b, s, r in zip(t.branches, t.scores, t.ranks, strict=True)]
        return pl.DataFrame(rows, schema={"size": pl.String, "branch": pl.String,
                                          "score": pl.Float64, "rank": pl.Float64,
                                          "in_group": pl.Boolean})


def branch_rank_test(scores: ScoresResult, *, group: Sequence[str] = DEFAULT_GROUP,
                     benchmark: str | None = None, subset: str = "full",
                     mapping: str = "loose", tail: str = "top") -> BranchRankResult:
    """Test whether ``group`` holds the ``tail`` ranks of the branches on ``benchmark``
    (an empty ``group``: the A-last group, read from the runs' roles; ``benchmark`` None: the
    protocol's policy-content benchmark)."""
    benchmark = protocol().rank_benchmark if benchmark is None else benchmark
    rows = student_runs(scores.binary(subset=subset, mapping=mapping))
    group = tuple(group) or names_where(rows.filter(is_study_branch()), is_a_last())
    if not group:
        raise GuarddiagError("rank test: the group names no branch (and no scored study "
                             "branch has last_policy A)")
    known_benches = sorted(set(rows["benchmark"].to_list()))
    if benchmark not in known_benches:
        raise unknown_name("benchmark", benchmark, known_benches, "the rank test")
    rows = rows.filter((pl.col("benchmark") == benchmark) & pl.col("score").is_not_null())
    known = sorted(set(rows["branch"].to_list()))
    for g in group:
        if g not in known:
            raise unknown_name("branch", g, known, "the rank-test group")
    rows = rows.filter(is_study_branch() | pl.col("branch").is_in(list(group)))
    # Seed means rounded to 12 decimals, so that means equal in exact arithmetic tie (and get
    # mid-ranks) whatever order the floats were added in.
    per = rows.group_by(["size", "branch"]).agg(pl.col("score").mean().round(12)).sort(
        ["size", "branch"])
    tests = []
    for (size,), part in per.group_by(["size"], maintain_order=True):
        present = set(part["branch"].to_list())
        if not set(group) <= present or len(present) <= len(group):
            continue
        scores_of = dict(zip(part["branch"].to_list(), part["score"].to_list(), strict=True))
        tests.append(rank_test_at(size, stats.rank_test(scores_of, group, tail=tail)))
    if not tests:
        raise GuarddiagError(
            f"rank test: no model size has all of {', '.join(group)} and at least one other "
            f"branch scored on {benchmark!r}")
    metric = rows["metric"][0] if rows.height else ""
    return BranchRankResult(benchmark=benchmark, metric=metric, subset=subset, mapping=mapping,
                            group=group, tail=cast(RankTail, tail), tests=tuple(tests))


def _rank(ctx: AnalysisContext) -> BranchRankResult:
    o = ctx.options
    try:
        return branch_rank_test(ctx[SCORES], group=o.rank_group, benchmark=o.rank_benchmark,
                                subset=o.primary_subset, mapping=o.mapping, tail=o.rank_tail)
    except GuarddiagError as exc:
        if o.rank_explicit:
            raise
        raise AnalysisOmitted(str(exc)) from None


RANK = register_analysis("rank", _rank, result=BranchRankResult, needs=(SCORES,))
