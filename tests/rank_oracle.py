"""The brute-force oracle of the rank tests: walk all n! orderings (test code, not in the wheel)."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence

from guarddiag.stats import RankSumDistribution


def enumerate_rank_sums(ranks: Sequence[float], k: int) -> RankSumDistribution:
    """Assign the ranks to n branches in every one of the n! orders and count the sum of the
    ranks the first k branches get. Exponential; small n only. Mid-ranks are halves, so the
    float sums are exact."""
    tally = Counter(sum(order[:k]) for order in itertools.permutations(float(r) for r in ranks))
    sums = sorted(tally)
    return RankSumDistribution(n=len(ranks), k=k, sums=tuple(sums),
                               counts=tuple(tally[s] for s in sums), total=sum(tally.values()))
