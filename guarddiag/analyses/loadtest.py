"""The calibrated load test: is a span Δb more than seed noise, and does it follow policy?

The study's rule (policy-load where Δb > the widest seed floor, column ``load_study``) compares a
range over 11 branch means with the widest range of a few seed triplets; under pure seed noise
it calls "policy" about 2 times in 3 with the demo's layout. This module replaces it with two
tests against the seed noise, per (benchmark, subset, mapping) cohort:

Seed noise. Each seed group (one recipe (size, branch) with ≥ ``min_seeds`` seeds) gives a
within-recipe variance; pooled, s² = Σ_g Σ_i (x_gi − x̄_g)² / Σ_g (n_g − 1) on
df = Σ_g (n_g − 1) degrees of freedom. ``seed_sd`` is s (one run's seed SD, in share units).
Model: a run's score is its recipe's mean plus N(0, σ²) seed noise; a binary rate's variance
depends on its level, so s is a pooled approximation (exact for equal-variance noise).

Span test (``p_span``). The statistic is T = Δb / s. Branch a's score at size m is the mean of
its n_am seeds, so its noise is N(0, σ²/n_am) — unequal across branches (the demo's reference,
E1 and E10 have three seeds, the others one) — and Δb averages ranges over sizes. The
studentized range distribution is exact only for one size with equal n, so the null of T is
Monte Carlo (:func:`guarddiag.stats.studentized_span_null`): :data:`NULL_DRAWS` draws of the
same statistic from branch means N(0, 1/n_am) at the cohort's own layout, divided by
sqrt(χ²_df / df); p = (1 + #{T* ≥ T}) / (1 + B). T is pivotal, so one null per layout serves
every cohort with that layout; its generator is keyed by the report seed and the layout.

Policy contrast (``p_contrast``). The A-last branches (by default read from the runs' roles,
:func:`guarddiag.roles.is_a_last`: the students whose last policy signal is A — in the study
three recalibrated their heads on policy-A labels last and one is distilled from the policy-A
teacher) against every other student branch (the B-last ones). D = mean over sizes of
(mean of A-last − mean of B-last);
Var(D) = σ² · (1/|M|²) Σ_m [Σ_{a∈A_m} 1/(n_am |A_m|²) + Σ_{b∈B_m} 1/(n_bm |B_m|²)], and
t = D / (s · sqrt(c)) has an exact t distribution on df degrees of freedom; p is two-sided.

q-values. Benjamini–Hochberg across the tested benchmarks of one (subset, mapping), separately
for p_span and p_contrast.

Call (``load``), with α = ``alpha`` (default the protocol's α):

- **uninformative** — every student run scores the same (e.g. all 0): nothing to test.
- **undetermined** — fewer than two seed groups, fewer than the protocol's ``min_prompts``, or no
  size with two branches.
- **policy** — q_contrast < α: the A-last and B-last branches differ by more than seed noise.
  A significant contrast is itself a level-α test of "branches differ only by seed noise", so it
  also establishes that the span is not noise (closed testing). Requiring the range test as well
  would leave the call nearly powerless at the demo's 6 degrees of freedom: with 11 branches the
  range test finds a 3-SD A-last shift about one time in three, the contrast about 99 in 100.
- **route-sensitive** — q_span < α but the contrast is not significant: the branches differ
  beyond seed noise, but not along the A/B line (e.g. both ends of the span are A-last).
- **capability** — neither: no difference beyond seed noise was detected. This is absence of
  evidence at the stated power, not proof that policy does not matter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.stats

from guarddiag import stats
from guarddiag.protocol import protocol

NO_PROMPTS = ("no prompt in this cohort: no audit covers the benchmark, so none of its prompts "
              "is known to survive decontamination")
"""Why a decontaminated cohort of a never-audited benchmark (a user's own) is undetermined."""
NULL_DRAWS = 20_000
"""Monte-Carlo draws of the span's null distribution (p-values resolve to 1/20,001)."""
CALLS = ("policy", "route-sensitive", "capability", "uninformative", "undetermined")


@dataclass(frozen=True)
class BranchMean:
    """s_b(a, m): one branch's seed-mean score at one size."""

    size: str
    branch: str
    score: float
    n_seeds: int


@dataclass(frozen=True)
class CohortInput:
    """What the test needs from one cohort (built by :func:`~.load.benchmark_load`)."""

    delta: float | None
    means: tuple[BranchMean, ...]
    group_ss: tuple[tuple[float, int], ...]
    """(Σ (x − x̄)², n) per seed group."""
    n_prompts: int
    all_same: bool


def pooled_seed_sd(group_ss: Sequence[tuple[float, int]]) -> tuple[float | None, int]:
    """(s, df): pooled within-recipe SD and its degrees of freedom Σ (n_g − 1)."""
    df = sum(n - 1 for _, n in group_ss)
    if df < 1:
        return None, df
    return math.sqrt(max(0.0, sum(ss for ss, _ in group_ss)) / df), df


def _by_size(means: Sequence[BranchMean]) -> dict[str, list[BranchMean]]:
    out: dict[str, list[BranchMean]] = {}
    for m in sorted(means, key=lambda m: (m.size, m.branch)):
        out.setdefault(m.size, []).append(m)
    return {k: v for k, v in out.items() if len(v) >= 2}


def policy_contrast(means: Sequence[BranchMean], a_last: Sequence[str]
                    ) -> tuple[float, float] | None:
    """(D, c): mean A-last − B-last difference over sizes and Var(D)/σ²; None where no size has
    both groups."""
    diffs, var = [], 0.0
    for part in _by_size(means).values():
        a = [m for m in part if m.branch in a_last]
        b = [m for m in part if m.branch not in a_last]
        if not a or not b:
            continue
        diffs.append(sum(m.score for m in a) / len(a) - sum(m.score for m in b) / len(b))
        var += (sum(1 / m.n_seeds for m in a) / len(a) ** 2
                + sum(1 / m.n_seeds for m in b) / len(b) ** 2)
    if not diffs:
        return None
    return sum(diffs) / len(diffs), var / len(diffs) ** 2


class SpanNulls:
    """One sorted Monte-Carlo null per (layout, df), drawn once per :func:`run_load_tests` call."""

    def __init__(self, seed: int, n_draws: int) -> None:
        self.seed, self.n_draws = seed, n_draws
        self._cache: dict[tuple[tuple[tuple[int, ...], ...], int], np.ndarray] = {}

    def get(self, layout: tuple[tuple[int, ...], ...], df: int) -> np.ndarray:
        key = (layout, df)
        if key not in self._cache:
            rng = stats.derive_rng(self.seed, "load-span-null", repr(key))
            self._cache[key] = stats.studentized_span_null(layout, df, n_draws=self.n_draws,
                                                           rng=rng)
        return self._cache[key]


def _test_one(c: CohortInput, a_last: Sequence[str], nulls: SpanNulls, min_groups: int
              ) -> dict[str, object]:
    sd, df = pooled_seed_sd(c.group_ss)
    out: dict[str, object] = {"seed_sd": sd, "df": df, "n_prompts": c.n_prompts,
                              "t_span": None, "p_span": None, "contrast": None,
                              "contrast_se": None, "p_contrast": None, "reason": None}
    if c.n_prompts == 0:
        out["reason"] = NO_PROMPTS
        return out
    if c.all_same:
        out["reason"] = "every run scores the same"
        return out
    if len(c.group_ss) < min_groups or sd is None:
        out["reason"] = f"{len(c.group_ss)} seed group(s); the test needs {min_groups}"
        return out
    # fewer prompts than the protocol's floor: scores move in 1/n steps
    if c.n_prompts < (need := protocol().min_prompts):
        out["reason"] = f"{c.n_prompts} prompts; the test needs {need}"
        return out
    sizes = _by_size(c.means)
    if c.delta is None or not sizes:
        out["reason"] = "no size with two branches"
        return out
    layout = tuple(tuple(sorted(m.n_seeds for m in part)) for _, part in sorted(sizes.items()))
    if sd > 0:
        t = c.delta / sd
        out["t_span"] = t
        out["p_span"] = stats.monte_carlo_p(nulls.get(layout, df), t)
    else:  # seeds agree exactly: any span beats the noise
        out["p_span"] = 1.0 / (1 + nulls.n_draws) if c.delta > 0 else 1.0
    contrast = policy_contrast(c.means, a_last)
    if contrast is not None:
        d, var = contrast
        se = sd * math.sqrt(var)
        out["contrast"], out["contrast_se"] = d, se
        if se > 0:
            out["p_contrast"] = float(2 * scipy.stats.t.sf(abs(d) / se, df))
        else:
            out["p_contrast"] = 0.0 if d != 0 else 1.0
    return out


def _q_values(rows: list[dict[str, object]], families: Sequence[tuple[str, str]],
              column: str) -> list[float | None]:
    q: list[float | None] = [None] * len(rows)
    for family in sorted(set(families)):
        idx = [i for i, f in enumerate(families) if f == family and rows[i][column] is not None]
        adjusted = stats.benjamini_hochberg([float(rows[i][column]) for i in idx])  # type: ignore[arg-type]
        for i, v in zip(idx, adjusted, strict=True):
            q[i] = v
    return q


def call_load(row: Mapping[str, object], alpha: float) -> str:
    """The call of one tested cohort row (with ``q_span``/``q_contrast`` and ``reason``)."""
    if row["reason"] == "every run scores the same":
        return "uninformative"
    if row["reason"] is not None:
        return "undetermined"
    q_c, q_s = row["q_contrast"], row["q_span"]
    if isinstance(q_c, float) and q_c < alpha:
        return "policy"
    if isinstance(q_s, float) and q_s < alpha:
        return "route-sensitive"
    return "capability"


def run_load_tests(cohorts: Sequence[CohortInput], families: Sequence[tuple[str, str]], *,
                 a_last: Sequence[str], alpha: float | None = None,
                 seed: int = 0, n_draws: int = NULL_DRAWS, min_groups: int = 2
                 ) -> list[dict[str, object]]:
    """Test every cohort; ``families[i]`` = (subset, mapping) of cohort i (the BH family).

    Returns one dict per cohort: seed_sd, df, n_prompts, t_span, p_span, q_span, contrast,
    contrast_se, p_contrast, q_contrast, reason (why untested, else None) and load (the call).
    ``alpha`` None: the protocol's.
    """
    alpha = protocol().alpha if alpha is None else alpha
    nulls = SpanNulls(seed, n_draws)
    rows = [_test_one(c, a_last, nulls, min_groups) for c in cohorts]
    q_span = _q_values(rows, families, "p_span")
    q_contrast = _q_values(rows, families, "p_contrast")
    for row, qs, qc in zip(rows, q_span, q_contrast, strict=True):
        row["q_span"], row["q_contrast"] = qs, qc
        row["load"] = call_load(row, alpha)
    return rows
