"""Label-supervision span Δb, seed floor Φb, and which benchmarks measure policy.

SPEC §6, exactly:

- **Δb** = (1/|M|) Σ_{m∈M} [max_a s_b(a, m) − min_a s_b(a, m)], a over the branches, m over the
  model sizes. s_b(a, m) is branch a's score on benchmark b at size m; when a branch has several
  seeds at a size, s_b(a, m) is their mean (so seed noise does not inflate the span). Sizes with
  fewer than two branches do not enter the mean.
- **Φb** (seed floor): for every *seed group* — one recipe (size, branch) trained with at least
  ``min_seeds`` seeds (default 3: the study's triplets 42/43/44) — the range max − min of s_b over
  its seeds. Over all groups: the **median** and the **widest** range.
- A benchmark is **policy-load** where Δb exceeds its widest floor, **capability-load** where it
  does not, and **undetermined** where no seed group (or no span) exists.

The branches a ranges over are the student branches: every ``guard_kind = "branch"`` run except
the teachers (branch names starting ``T_``), i.e. the reference recipe and E1…E10 — the study's
copyright span of 0.99 runs from the reference (policy B) to the A-last branches. Seed groups
come from the same runs. Everything is computed per (benchmark, subset, mapping) cohort.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import polars as pl

from guarddiag.analyses.scores import ScoresResult
from guarddiag.errors import GuarddiagError, unknown_name

LOADS = ("policy", "capability", "undetermined")
DEFAULT_MIN_SEEDS = 3
_COHORT = ["benchmark", "metric", "metric_alias", "subset", "mapping"]


def student_runs(table: pl.DataFrame, *, branches: Sequence[str] | None = None) -> pl.DataFrame:
    """Score rows of student branch runs (teachers ``T_*``, baselines and guards left out);
    ``branches`` restricts them to the named branches (unknown names are an error)."""
    rows = table.filter((pl.col("guard_kind") == "branch")
                        & ~pl.col("branch").str.starts_with("T_"))
    if branches is not None:
        known = sorted(set(rows["branch"].to_list()))
        for b in branches:
            if b not in known:
                raise unknown_name("branch", b, known, "the scored student branches")
        rows = rows.filter(pl.col("branch").is_in(list(branches)))
    return rows


@dataclass(frozen=True)
class BenchmarkLoadResult:
    """Δb beside Φb per benchmark cohort, and the resulting policy/capability call."""

    table: pl.DataFrame = field(repr=False)
    """One row per (benchmark, subset, mapping): delta, floor_median, floor_widest,
    widest_group, n_groups, n_sizes, n_branches, load."""
    by_size: pl.DataFrame = field(repr=False)
    """Span per size: the max and min branch and their scores."""
    groups: pl.DataFrame = field(repr=False)
    """One row per seed group and cohort: size, branch, seeds, n_seeds, low, high, range."""
    min_seeds: int

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()

    def loads(self, *, subset: str, mapping: str) -> dict[str, str]:
        """Benchmark → ``policy`` | ``capability`` | ``undetermined`` for one cohort."""
        part = self.table.filter((pl.col("subset") == subset) & (pl.col("mapping") == mapping))
        return dict(zip(part["benchmark"].to_list(), part["load"].to_list(), strict=True))


def benchmark_load(scores: ScoresResult, *, min_seeds: int = DEFAULT_MIN_SEEDS,
                   branches: Sequence[str] | None = None) -> BenchmarkLoadResult:
    """Δb, Φb and the load call for every (benchmark, subset, mapping) cohort of ``scores``."""
    if isinstance(min_seeds, bool) or not isinstance(min_seeds, int) or min_seeds < 2:
        raise GuarddiagError(f"min_seeds: expected an integer >= 2, got {min_seeds!r}")
    rows = student_runs(scores.binary(), branches=branches).filter(pl.col("score").is_not_null())

    # s_b(a, m): mean over seeds of each branch at each size.
    per_branch = rows.group_by([*_COHORT, "size", "branch"]).agg(
        pl.col("score").mean().alias("s"), pl.len().alias("n_seeds"))
    by_size = []
    for key, part in per_branch.group_by([*_COHORT, "size"]):
        if part.height < 2:
            continue
        part = part.sort(["s", "branch"])
        lo, hi = part.row(0, named=True), part.row(-1, named=True)
        by_size.append({**dict(zip([*_COHORT, "size"], key, strict=True)),
                        "n_branches": part.height, "max_branch": hi["branch"],
                        "max_score": hi["s"], "min_branch": lo["branch"], "min_score": lo["s"],
                        "range": hi["s"] - lo["s"]})
    size_schema = {**{c: pl.String() for c in [*_COHORT, "size"]}, "n_branches": pl.Int64(),
                   "max_branch": pl.String(), "max_score": pl.Float64(),
                   "min_branch": pl.String(), "min_score": pl.Float64(), "range": pl.Float64()}
    by_size_df = pl.DataFrame(by_size, schema=size_schema).sort([*_COHORT, "size"])

    # Seed groups: one recipe (size, branch) with >= min_seeds seeds.
    groups = []
    for key, part in rows.group_by([*_COHORT, "size", "branch"]):
        seeds = sorted(s for s in part["seed"].to_list() if s is not None)
        if len(seeds) < min_seeds:
            continue
        low = float(cast(float, part["score"].min()))
        high = float(cast(float, part["score"].max()))
        groups.append({**dict(zip([*_COHORT, "size", "branch"], key, strict=True)),
                       "seeds": ",".join(str(s) for s in seeds), "n_seeds": len(seeds),
                       "low": low, "high": high, "range": high - low})
    group_schema = {**{c: pl.String() for c in [*_COHORT, "size", "branch", "seeds"]},
                    "n_seeds": pl.Int64(), "low": pl.Float64(), "high": pl.Float64(),
                    "range": pl.Float64()}
    groups_df = pl.DataFrame(groups, schema=group_schema).sort([*_COHORT, "size", "branch"])

    out = []
    cohorts = rows.select(_COHORT).unique().sort(_COHORT)
    for cohort in cohorts.iter_rows(named=True):
        match = pl.all_horizontal([pl.col(c) == v for c, v in cohort.items()])
        spans = by_size_df.filter(match)
        floors = groups_df.filter(match).sort(["range", "size", "branch"])
        delta = float(cast(float, spans["range"].mean())) if spans.height else None
        ranges = floors["range"].to_list()
        widest = max(ranges) if ranges else None
        widest_row = floors.row(-1, named=True) if floors.height else None
        if delta is None or widest is None:
            load = "undetermined"
        else:
            load = "policy" if delta > widest else "capability"
        out.append({**cohort, "delta": delta, "n_sizes": spans.height,
                    "n_branches": int(cast(int, spans["n_branches"].max())) if spans.height else 0,
                    "floor_median": statistics.median(ranges) if ranges else None,
                    "floor_widest": widest,
                    "widest_group": (f"{widest_row['size']}/{widest_row['branch']}"
                                     if widest_row else None),
                    "n_groups": len(ranges), "load": load})
    schema = {**{c: pl.String() for c in _COHORT}, "delta": pl.Float64(), "n_sizes": pl.Int64(),
              "n_branches": pl.Int64(), "floor_median": pl.Float64(),
              "floor_widest": pl.Float64(), "widest_group": pl.String(), "n_groups": pl.Int64(),
              "load": pl.String()}
    return BenchmarkLoadResult(table=pl.DataFrame(out, schema=schema), by_size=by_size_df,
                               groups=groups_df, min_seeds=min_seeds)
