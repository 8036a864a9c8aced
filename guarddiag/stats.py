"""Exact and bootstrap statistics shared by the analyses.

Everything here is a pure function of its inputs and an explicit random generator or seed:

- :func:`bootstrap_means` — the prompt bootstrap: resample the prompts of a benchmark with
  replacement ``n_resamples`` times (default B = 2,000) and take percentile intervals of the
  mean. Several statistics over the *same* prompts (one column per run) share the resampled
  prompt indices, so differences between them are paired. Vectorised: each block of resamples
  is turned into a matrix of prompt counts and multiplied with the values.
- :func:`wilson_interval` — the Wilson score interval of one binomial rate (k of n prompts, scipy),
  the interval of every single run's score: unlike a percentile bootstrap it never collapses
  to a point at 0 or 1 (0 of 75 prompts gives [0, 4.9%], not [0, 0]).
- :func:`extreme_rank_probability` — the closed form 1/C(n, k) for a named group of k out of n
  exchangeable branches taking the k extreme ranks.
- :func:`rank_sum_distribution` — the exact null distribution of a group's rank sum, counted
  combinatorially (a subset-sum dynamic programme over the n observed mid-ranks), so groups that
  are not at the extremes get a p-value too (the tests check it against a brute-force walk
  over all n! orderings, n = 10: 3,628,800).
- :func:`rank_test` — ranks the branches' scores (mid-ranks for ties) and tests a named group.
- :func:`cohen_kappa` (scikit-learn), :func:`spearman` (scipy), :func:`fleiss_kappa`.
- :func:`benjamini_hochberg` — FDR q-values across the benchmarks of a cohort (scipy);
  :func:`studentized_span_null` and :func:`monte_carlo_p` — the seed-noise null of the
  label-supervision span (see :mod:`guarddiag.analyses.loadtest`).
- :func:`mcnemar_exact`, :func:`holm` — the paired test of two guards' decisions on the same
  prompts and the family-wise correction across the comparisons one table shows.

Ranks and ties
--------------
Scores are ranked in *ascending* order (rank 1 = lowest score, rank n = highest), ties get the
average of the ranks they span (mid-ranks, ``scipy.stats.rankdata(method="average")``).
Under the null hypothesis the branches are exchangeable: the group's k ranks are a uniformly
random k-subset of the n observed mid-ranks. With ties the null distribution is therefore taken
over the *observed tied rank multiset* (the permutation distribution conditional on the ties),
not over 1..n. The closed form 1/C(n, k) is exact only when no tie straddles the group's
boundary; the rank-sum p-value is exact in every case and equals 1/C(n, k) when the group holds
the top k ranks outright. Example: five branches tied at 100% copyright capture, the group
holding four of them: the group cannot be told apart from the fifth, and the exact one-sided
p-value is C(5, 4)/C(10, 4) = 5/210, not 1/210.

Tails: ``top`` asks whether the group's scores are *high* (P(S >= s)), ``bottom`` whether they
are low (P(S <= s)), ``either`` whether they are extreme in either direction, measured by the
distance of the rank sum from its null mean k(n+1)/2 (P(|S - mu| >= |s - mu|)). The report uses
the one-sided ``top`` tail by default: the study's hypothesis names the branches expected to
score *highest* (those whose last policy signal is A on HarmBench-copyright), and a direction
fixed before looking at the data keeps the one-sided test honest.
"""

from __future__ import annotations

import zlib
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import comb

import numpy as np
import scipy.stats

from guarddiag.errors import GuarddiagError, unknown_name

DEFAULT_RESAMPLES = 2000
"""B, the number of prompt-bootstrap resamples, unless the caller says otherwise."""

DEFAULT_CONFIDENCE = 0.95
TAILS = ("top", "bottom", "either")

# One block of resamples holds at most this many prompt draws (int64), so memory stays bounded
# (~32 MB) for the 21,318-prompt SaladBench base set and B = 2,000.
_BLOCK_DRAWS = 4_000_000


# --------------------------------------------------------------------------- random generators

def derive_rng(seed: int, *keys: str) -> np.random.Generator:
    """A generator determined by ``seed`` and the string ``keys`` (e.g. benchmark and subset).

    Keying the stream lets each benchmark get the same resamples whichever other benchmarks or
    runs are present, so adding a run never changes another run's interval.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise GuarddiagError(f"seed: expected a non-negative integer, got {seed!r}")
    entropy = [int(seed), *(zlib.crc32(k.encode("utf-8")) for k in keys)]
    return np.random.default_rng(np.random.SeedSequence(entropy))


def _resolve_rng(rng: np.random.Generator | None, seed: int | None) -> np.random.Generator:
    if (rng is None) == (seed is None):
        raise GuarddiagError("bootstrap: pass exactly one of rng (a numpy Generator) or seed")
    if rng is not None:
        if not isinstance(rng, np.random.Generator):
            raise GuarddiagError(
                f"bootstrap: rng must be a numpy.random.Generator, got {type(rng).__name__}")
        return rng
    return derive_rng(seed)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- bootstrap

@dataclass(frozen=True)
class BootstrapResult:
    """Percentile intervals of the mean of each column of a prompt × statistic matrix."""

    estimate: np.ndarray
    """Mean over all prompts, one per column."""
    low: np.ndarray
    """Lower percentile bound, one per column."""
    high: np.ndarray
    """Upper percentile bound, one per column."""
    n: int
    """Number of prompts resampled."""
    n_resamples: int
    """B, the number of bootstrap resamples."""
    confidence: float
    """Nominal coverage of the interval (0.95 → the 2.5th and 97.5th percentiles)."""
    method: str = "percentile"


def _as_matrix(values: np.ndarray | Sequence[float]) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise GuarddiagError(f"bootstrap: expected a 1-D or 2-D array of values, got {arr.ndim}-D")
    if arr.shape[0] == 0:
        raise GuarddiagError("bootstrap: cannot resample an empty set of prompts")
    if not np.isfinite(arr).all():
        raise GuarddiagError("bootstrap: values must be finite numbers (found NaN or inf)")
    return arr


def bootstrap_distribution(values: np.ndarray | Sequence[float], *,
                           n_resamples: int = DEFAULT_RESAMPLES,
                           rng: np.random.Generator | None = None,
                           seed: int | None = None) -> np.ndarray:
    """Resampled means, shape ``[n_resamples, m]`` for values of shape ``[n]`` or ``[n, m]``.

    Resample b draws n prompt indices uniformly with replacement — exactly the stream of
    ``rng.integers(0, n, size=n)`` called once per resample — and takes each column's mean
    over the drawn prompts. Rows of ``values`` are prompts; all columns share the draws.
    """
    arr = _as_matrix(values)
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) \
            or n_resamples < 1:
        raise GuarddiagError(f"n_resamples: expected a positive integer, got {n_resamples!r}")
    gen = _resolve_rng(rng, seed)
    n = arr.shape[0]
    block = max(1, min(int(n_resamples), _BLOCK_DRAWS // n))
    out = np.empty((int(n_resamples), arr.shape[1]), dtype=np.float64)
    done = 0
    while done < n_resamples:
        size = min(block, int(n_resamples) - done)
        idx = gen.integers(0, n, size=(size, n))
        # Counts of each prompt in each resample; counts @ values is the resample sum. For 0/1
        # values every partial sum is an integer below 2**53, so the result is exact whatever
        # order BLAS adds in — the same bytes on every machine.
        flat = idx + (np.arange(size, dtype=np.int64) * n)[:, None]
        counts = np.bincount(flat.ravel(), minlength=size * n).reshape(size, n)
        out[done:done + size] = (counts.astype(np.float64) @ arr) / n
        done += size
    return out


def bootstrap_means(values: np.ndarray | Sequence[float], *,
                    n_resamples: int = DEFAULT_RESAMPLES,
                    rng: np.random.Generator | None = None, seed: int | None = None,
                    confidence: float = DEFAULT_CONFIDENCE) -> BootstrapResult:
    """Mean and percentile bootstrap interval of each column of ``values`` (prompts × stats).

    >>> r = bootstrap_means([0, 1, 1, 1], n_resamples=2000, seed=0)
    >>> float(r.estimate[0])
    0.75
    """
    if not 0.0 < confidence < 1.0:
        raise GuarddiagError(f"confidence: expected a number in (0, 1), got {confidence!r}")
    arr = _as_matrix(values)
    dist = bootstrap_distribution(arr, n_resamples=n_resamples, rng=rng, seed=seed)
    alpha = 1.0 - confidence
    low, high = np.quantile(dist, [alpha / 2, 1.0 - alpha / 2], axis=0)
    return BootstrapResult(estimate=arr.mean(axis=0), low=low, high=high, n=arr.shape[0],
                           n_resamples=int(n_resamples), confidence=float(confidence))


# --------------------------------------------------------------------------- binomial rates

def wilson_interval(k: int, n: int, confidence: float = DEFAULT_CONFIDENCE
                    ) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion k/n (two-sided, nominal ``confidence``).

    ``scipy.stats.binomtest(k, n).proportion_ci(confidence, method="wilson")``: the set of rates
    a score test at level 1 − confidence would not reject. At k = 0 the lower bound is exactly
    0 and the upper z²/(n + z²); at k = n, symmetrically.

    >>> [round(x, 4) for x in wilson_interval(0, 75)]
    [0.0, 0.0487]
    """
    for name, v in (("k", k), ("n", n)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 0:
            raise GuarddiagError(f"wilson_interval: {name} must be a count >= 0, got {v!r}")
    if n == 0 or k > n:
        raise GuarddiagError(f"wilson_interval: need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    if not 0.0 < confidence < 1.0:
        raise GuarddiagError(f"confidence: expected a number in (0, 1), got {confidence!r}")
    ci = scipy.stats.binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence,
                                                            method="wilson")
    return float(ci.low), float(ci.high)


# --------------------------------------------------------------------------- exact rank tests

def extreme_rank_probability(n: int, k: int, *, tail: str = "top") -> Fraction:
    """P(a named group of k of n exchangeable branches holds the k extreme ranks), exactly.

    ``top`` or ``bottom``: 1/C(n, k). ``either``: 2/C(n, k) for k < n (the top-k and bottom-k
    events are disjoint), 1 for k = n.

    >>> extreme_rank_probability(10, 4)
    Fraction(1, 210)
    """
    _check_nk(n, k)
    _check_tail(tail)
    total = comb(n, k)
    if tail == "either":
        return Fraction(1) if k == n else Fraction(2, total)
    return Fraction(1, total)


def _check_nk(n: int, k: int) -> None:
    if not isinstance(n, int) or not isinstance(k, int) or n < 1 or not 1 <= k <= n:
        raise GuarddiagError(f"rank test: need 1 <= k <= n, got k={k!r}, n={n!r}")


def _check_tail(tail: str) -> None:
    if tail not in TAILS:
        raise GuarddiagError(f"rank test: tail {tail!r} is not one of {', '.join(TAILS)}")


@dataclass(frozen=True)
class RankSumDistribution:
    """Exact null distribution of the sum of k ranks drawn without replacement from n ranks."""

    n: int
    k: int
    sums: tuple[float, ...]
    """Possible rank sums, ascending (half-integers when mid-ranks are involved)."""
    counts: tuple[int, ...]
    """How many of the ``total`` equally likely outcomes give each sum."""
    total: int
    """C(n, k) for the counting programme; n! for an enumeration of all orderings."""

    def probability(self, s: float) -> Fraction:
        return Fraction(sum(c for v, c in zip(self.sums, self.counts, strict=True)
                            if _eq(v, s)), self.total)

    def p_at_least(self, s: float) -> Fraction:
        return Fraction(sum(c for v, c in zip(self.sums, self.counts, strict=True)
                            if v > s or _eq(v, s)), self.total)

    def p_at_most(self, s: float) -> Fraction:
        return Fraction(sum(c for v, c in zip(self.sums, self.counts, strict=True)
                            if v < s or _eq(v, s)), self.total)

    @property
    def mean(self) -> float:
        return sum(v * c for v, c in zip(self.sums, self.counts, strict=True)) / self.total

    def p_as_extreme(self, s: float) -> Fraction:
        """P(|S - mean| >= |s - mean|): two-sided by distance from the null mean."""
        mu = self.mean
        d = abs(s - mu)
        return Fraction(sum(c for v, c in zip(self.sums, self.counts, strict=True)
                            if abs(v - mu) > d or _eq(abs(v - mu), d)), self.total)

    def probabilities(self) -> dict[float, Fraction]:
        return {v: Fraction(c, self.total) for v, c in zip(self.sums, self.counts, strict=True)}


def _eq(a: float, b: float) -> bool:
    # Rank sums are multiples of 1/2 (mid-ranks) so a tolerance far below 1/2 is exact.
    return abs(a - b) < 1e-9  # pragma: no mutate(cmp): sums differ by 0 or >= 1/2


def _doubled(ranks: Sequence[float]) -> list[int]:
    out = []
    for r in ranks:
        d = 2.0 * float(r)
        if abs(d - round(d)) > 1e-9:  # pragma: no mutate(cmp): never exactly 1e-9 off
            raise GuarddiagError(f"rank test: rank {r!r} is not a multiple of 1/2 (mid-ranks are)")
        out.append(round(d))
    return out


def rank_sum_distribution(ranks: Sequence[float], k: int) -> RankSumDistribution:
    """Exact distribution of the sum of k of the given ranks, drawn without replacement.

    Each of the C(n, k) subsets of *positions* is equally likely (exchangeable branches), so
    tied ranks count once per branch. Counted by a subset-sum dynamic programme over doubled
    ranks (integers even with mid-ranks), in O(n * k * sum) integer operations — exact, and
    equivalent to enumerating all n! orderings.
    """
    n = len(ranks)
    _check_nk(n, k)
    doubled = _doubled(ranks)
    top = sum(sorted(doubled)[-k:])
    # ways[j][s]: number of j-subsets of the ranks seen so far with doubled sum s.
    ways = [[0] * (top + 1) for _ in range(k + 1)]
    ways[0][0] = 1
    for d in doubled:
        for j in range(min(k, n), 0, -1):
            prev, cur = ways[j - 1], ways[j]
            for s in range(top, d - 1, -1):
                if prev[s - d]:
                    cur[s] += prev[s - d]
    sums = [s for s in range(top + 1) if ways[k][s]]
    return RankSumDistribution(n=n, k=k, sums=tuple(s / 2 for s in sums),
                               counts=tuple(ways[k][s] for s in sums), total=comb(n, k))


@dataclass(frozen=True)
class RankTestResult:
    """Exact permutation test of a named group's ranks among n branches."""

    group: tuple[str, ...]
    """The named branches, in the order given."""
    branches: tuple[str, ...]
    """All n ranked branches, from highest to lowest score."""
    scores: tuple[float, ...]
    """Score of each entry of ``branches``."""
    ranks: tuple[float, ...]
    """Mid-rank of each entry of ``branches`` (n = highest score)."""
    n: int
    k: int
    rank_sum: float
    """Sum of the group's mid-ranks."""
    max_rank_sum: float
    """Largest rank sum any k branches can have given the ties."""
    min_rank_sum: float
    group_holds_top: bool
    """The group's rank sum is the largest possible: it holds the top k (ties allowed)."""
    group_holds_bottom: bool
    ties: bool
    """Some scores are tied (the null distribution is over the tied rank multiset)."""
    p_extreme_top: Fraction
    """Closed form 1/C(n, k): chance that a given group holds the top k ranks (no ties)."""
    p_extreme_either: Fraction
    p_upper: Fraction
    """Exact P(S >= rank_sum) under exchangeable branches."""
    p_lower: Fraction
    """Exact P(S <= rank_sum)."""
    p_two_sided: Fraction
    """Exact P(|S - mean| >= |rank_sum - mean|)."""
    tail: str
    """The tail the caller declared (``top``, ``bottom`` or ``either``)."""

    @property
    def p_value(self) -> Fraction:
        """The p-value of the declared tail."""
        return {"top": self.p_upper, "bottom": self.p_lower, "either": self.p_two_sided}[
            self.tail]


def rank_test(scores: Mapping[str, float], group: Sequence[str], *,
              tail: str = "top") -> RankTestResult:
    """Rank ``scores`` (branch → score) and test whether ``group`` sits at the declared tail.

    Raises a one-line error for a group naming an unknown branch, a repeated name, or a group
    that is empty or holds every branch.
    """
    _check_tail(tail)
    names = list(scores)
    group = tuple(group)
    for g in group:
        if g not in scores:
            raise unknown_name("branch", g, names, "the rank-test group")
    if len(set(group)) != len(group):
        raise GuarddiagError(f"rank test: the group {', '.join(group)} names a branch twice")
    n, k = len(names), len(group)
    if not 1 <= k < n:
        raise GuarddiagError(
            f"rank test: the group must name at least 1 and fewer than all {n} branches, "
            f"got {k}")
    values = np.array([float(scores[b]) for b in names])
    if not np.isfinite(values).all():
        raise GuarddiagError("rank test: every branch needs a finite score")
    ranks = scipy.stats.rankdata(values, method="average")
    rank_of = dict(zip(names, ranks.tolist(), strict=True))
    s = float(sum(rank_of[g] for g in group))
    dist = rank_sum_distribution(ranks.tolist(), k)
    ordered = sorted(names, key=lambda b: (-rank_of[b], b))
    max_s, min_s = dist.sums[-1], dist.sums[0]
    return RankTestResult(
        group=group, branches=tuple(ordered), scores=tuple(float(scores[b]) for b in ordered),
        ranks=tuple(rank_of[b] for b in ordered), n=n, k=k, rank_sum=s,
        max_rank_sum=max_s, min_rank_sum=min_s,
        group_holds_top=_eq(s, max_s), group_holds_bottom=_eq(s, min_s),
        ties=len(set(values.tolist())) < n,
        p_extreme_top=extreme_rank_probability(n, k, tail="top"),
        p_extreme_either=extreme_rank_probability(n, k, tail="either"),
        p_upper=dist.p_at_least(s), p_lower=dist.p_at_most(s), p_two_sided=dist.p_as_extreme(s),
        tail=tail)


# --------------------------------------------------------------------------- agreement, correlation

def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable],
                labels: Sequence[Hashable] | None = None) -> float:
    """Cohen's κ between two raters' labels (``sklearn.metrics.cohen_kappa_score``).

    κ = (p_o − p_e) / (1 − p_e): p_o the observed agreement, p_e the agreement expected from the
    raters' marginal label frequencies. ``labels``, when given, is the label set; a label outside
    it is an error. When p_e = 1 (both raters always give one and the same label) κ is undefined
    and NaN is returned.
    """
    if len(a) != len(b):
        raise GuarddiagError(f"cohen_kappa: label lists differ in length ({len(a)} vs {len(b)})")
    if not a:
        raise GuarddiagError("cohen_kappa: no labels")
    if labels is not None:
        unknown = sorted({str(x) for x in (*a, *b) if x not in set(labels)})
        if unknown:
            raise GuarddiagError(f"cohen_kappa: label(s) {', '.join(unknown)} not among "
                                 f"{', '.join(map(str, labels))}")
    if len({*a, *b}) == 1:
        # p_e = 1: sklearn returns NaN here too, but with two warnings per call.
        return float("nan")
    # scikit-learn is imported here: every analysis imports this module, most never need κ.
    import sklearn.metrics

    return float(sklearn.metrics.cohen_kappa_score(
        list(a), list(b), labels=None if labels is None else list(labels)))


def fleiss_kappa(yes_counts: Sequence[int], n_raters: int) -> float | None:
    """Fleiss' κ for a yes/no question, every subject rated by ``n_raters``: (P̄ − P_e) /
    (1 − P_e), P_i = (Σ_j n_ij² − n) / (n (n − 1)), P_e = Σ_j p_j². ``None`` when undefined
    (no subjects, fewer than two raters, or every vote one way so that P_e = 1)."""
    # Own code: statsmodels has it (inter_rater.fleiss_kappa); not worth statsmodels + patsy.
    if not yes_counts or n_raters < 2:
        return None
    p_bar, p_yes = _fleiss_means(np.asarray(yes_counts, dtype=np.float64), n_raters).mean(axis=0)
    return _kappa_from_means(float(p_bar), float(p_yes))


def _fleiss_means(yes: np.ndarray, n: int) -> np.ndarray:
    """Per subject: P_i (agreement among its n raters) and its share of yes votes."""
    return np.column_stack([(yes * yes + (n - yes) * (n - yes) - n) / (n * (n - 1)), yes / n])


def _kappa_from_means(p_bar: float, p_yes: float) -> float | None:
    p_e = p_yes ** 2 + (1 - p_yes) ** 2  # the chance agreement
    return None if p_e >= 1.0 else (p_bar - p_e) / (1 - p_e)


@dataclass(frozen=True)
class KappaInterval:
    """Fleiss' κ, its percentile interval from ``n_resamples`` resamples of the subjects, and
    ``n_undefined`` resamples (every vote one way) left out of the percentiles."""

    kappa: float | None
    low: float | None
    high: float | None
    n_subjects: int
    n_resamples: int
    n_undefined: int
    confidence: float


def fleiss_kappa_interval(yes_counts: Sequence[int], n_raters: int, *, seed: int,
                          n_resamples: int = DEFAULT_RESAMPLES,
                          confidence: float = DEFAULT_CONFIDENCE) -> KappaInterval:
    """:func:`fleiss_kappa` and its percentile interval over resamples of the subjects: κ is a
    function of two means over subjects (P̄, the yes share), resampled by
    :func:`bootstrap_distribution`."""
    kappa, n, yes = fleiss_kappa(yes_counts, n_raters), len(yes_counts), np.asarray(yes_counts)
    if kappa is None or n < 2:
        return KappaInterval(kappa, None, None, n, 0, 0, confidence)
    means = bootstrap_distribution(_fleiss_means(yes, n_raters), n_resamples=n_resamples, seed=seed)
    defined = np.array([k for a, b in means if (k := _kappa_from_means(float(a), float(b)))
                        is not None], dtype=np.float64)
    q = [float(x) for x in np.quantile(defined, [(1 - confidence) / 2, (1 + confidence) / 2])
         ] if defined.size else [None, None]
    return KappaInterval(kappa, q[0], q[1], n, int(n_resamples), int(n_resamples - defined.size),
                         confidence)


@dataclass(frozen=True)
class SpearmanResult:
    rho: float | None
    """Spearman's ρ; None when undefined (fewer than 3 points or a constant input)."""
    p_value: float | None
    """Two-sided p-value from scipy (t approximation)."""
    n: int


def spearman(x: Sequence[float], y: Sequence[float]) -> SpearmanResult:
    """Spearman's rank correlation via ``scipy.stats.spearmanr``."""
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if xa.shape != ya.shape or xa.ndim != 1:
        raise GuarddiagError(f"spearman: expected two equal-length 1-D inputs, got {xa.shape} "
                             f"and {ya.shape}")
    n = int(xa.size)
    if n < 3 or np.ptp(xa) == 0 or np.ptp(ya) == 0:
        return SpearmanResult(rho=None, p_value=None, n=n)
    res = scipy.stats.spearmanr(xa, ya)
    return SpearmanResult(rho=float(res.statistic), p_value=float(res.pvalue), n=n)


# --------------------------------------------------------------------------- paired tests

def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar test on the discordant pairs of a paired binary comparison.

    ``b`` = prompts the first guard reads unsafe and the second safe, ``c`` = the reverse. Under
    the null hypothesis (both guards read a prompt unsafe equally often) each of the n = b + c
    discordant prompts falls either way with probability 1/2, so the p-value is the two-sided
    exact binomial one, ``scipy.stats.binomtest(b, n, 0.5).pvalue`` = min(1, 2 · P(X ≤ min(b, c))),
    X ~ Bin(n, 1/2). With no discordant prompt, p = 1.
    """
    for name, v in (("b", b), ("c", c)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 0:
            raise GuarddiagError(f"mcnemar_exact: {name} must be a count >= 0, got {v!r}")
    n = int(b) + int(c)
    if n == 0:
        return 1.0
    return float(scipy.stats.binomtest(int(b), n, 0.5).pvalue)


def _ascending_p_values(p_values: Sequence[float], name: str) -> tuple[list[float], list[int]]:
    """The p-values as floats, checked to lie in [0, 1], and their positions in ascending order
    (ties by input position): the shared first step of every multiplicity adjustment."""
    p = [float(x) for x in p_values]
    for x in p:
        if not 0.0 <= x <= 1.0:
            raise GuarddiagError(f"{name}: p-values must lie in [0, 1], got {x!r}")
    return p, sorted(range(len(p)), key=lambda i: (p[i], i))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order.

    Sorted ascending, p_(i) (i = 1..m) becomes max_{j ≤ i} min(1, (m − j + 1) · p_(j)); a
    comparison is significant at family-wise level α where its adjusted p < α. Ties among the
    p-values are ordered by input position, which cannot change the adjusted values.
    """
    # Own code: scipy has no Holm adjustment (statsmodels' multipletests has; not a dependency).
    p, order = _ascending_p_values(p_values, "holm")
    m = len(p)
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


# --------------------------------------------------------------------------- load test (span)

def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg q-values (step-up false-discovery-rate adjustment), in input order.

    ``scipy.stats.false_discovery_control(p, method="bh")``: sorted ascending,
    q_(i) = min_{j ≥ i} min(1, m · p_(j) / j); a test is a discovery at FDR level α where its
    q < α.
    """
    p, _ = _ascending_p_values(p_values, "benjamini_hochberg")
    if not p:
        return []
    return [float(q) for q in scipy.stats.false_discovery_control(p, method="bh")]


def studentized_span_null(n_seeds_by_size: Sequence[Sequence[int]], df: int, *,
                          n_draws: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted Monte-Carlo draws of the studentized mean span under pure seed noise.

    Model: a run's score is μ_m + σ·ε (ε ~ N(0, 1), independent runs); branch a at size m is
    the mean of its n_am seeds, so its noise is N(0, σ²/n_am). The statistic is
    T = (1/|M|) Σ_m [max_a s(a, m) − min_a s(a, m)] / σ̂, with σ̂² the pooled within-recipe
    variance on ``df`` degrees of freedom (σ̂²/σ² ~ χ²_df / df, independent of the means). T is
    pivotal (free of μ_m and σ), so each draw uses σ = 1: ``n_draws`` draws of T, ascending.
    With one size and equal n_am this is the studentized range (scipy.stats.studentized_range).
    """
    if df < 1:
        raise GuarddiagError(f"studentized_span_null: df must be >= 1, got {df!r}")
    sizes = [list(n) for n in n_seeds_by_size if len(n) >= 2]
    if not sizes or any(k < 1 for n in sizes for k in n):
        raise GuarddiagError("studentized_span_null: every size needs >= 2 branches with >= 1 "
                             "seed each")
    total = np.zeros(n_draws)
    for n in sizes:
        z = rng.standard_normal((n_draws, len(n))) / np.sqrt(np.asarray(n, dtype=float))
        total += z.max(axis=1) - z.min(axis=1)
    sigma = np.sqrt(rng.chisquare(df, n_draws) / df)
    return np.sort(total / len(sizes) / sigma)


def monte_carlo_p(null_sorted: np.ndarray, observed: float) -> float:
    """Upper-tail Monte-Carlo p-value (1 + #{T* ≥ t}) / (1 + B): never 0, valid at any B."""
    b = len(null_sorted)
    above = b - int(np.searchsorted(null_sorted, observed, side="left"))
    return (1 + above) / (1 + b)

