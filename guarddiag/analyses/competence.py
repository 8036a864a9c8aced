"""The competence gate: do these guards detect enough clear harm for their calls to mean much?

A benchmark is called capability where label policy moves its score by less than the equivalence
margin. That call says the score measures *detection* only if the guards detect harm at all: a
guard that misses half of plainly harmful requests is "capability" on every benchmark it
fails equally, whatever its labels. The study's branches caught 80.0–91.1% on average (SPEC §6:
mean CAP on six capability-load benchmarks), so its calls rest on competent guards.

Measured here: CAP of the **reference recipe** (the student trained on policy-B labels, SPEC §4)
on the study's harmful benchmarks (SPEC §5, manifests with ``study: true`` and ``kind: harmful``),
in the primary cohort (decontaminated prompts by default), seed-averaged per model size, and its
mean over the benchmarks scored. HarmBench-copyright is left out (the protocol's
``policy_content``): under policy B copyright reproduction is not harmful, so the reference is
*meant* to miss it. Mutated
and extra subsets never count. Study benchmarks that were not scored (SaladBench and OR-Bench are
not mirrored here) are listed in ``missing``; the mean is over those that were.

Where the mean of any model size is below ``floor`` (default the protocol's ``competence_floor``,
the study's lowest branch mean), ``below_floor`` is true and the report opens with a caution.

Counting alone hides how a guard ranks: a threshold can buy CAP with over-refusal. So, from the
predictions table, the gate also measures **threshold-free ranking**: AUROC of the reference
recipe's P(unsafe) on harmful/benign pairs of the same source (:func:`ranking_pairs`: XSTest,
WildGuardTest, JailbreakBench, OpenAI moderation), seed-averaged per size, beside the TF-IDF
baseline trained on the reference's label policy, on the same prompts (CAP on the clear-harm
sets likewise). Where the reference's AUROC does not beat the baseline's by ``auroc_margin``
(default the protocol's ``auroc_margin``) on some pair, ``ranks_below_baseline`` is true; the
caution names which measure failed (CAP, AUROC or both).

A ranking pair tests detection only where label policy does not move it. The TF-IDF baselines
of the two policies, the same word counts trained on each policy's labels, show whether it does:
``policy_tilt`` is the other policy's baseline AUROC minus the recipe policy's. Where it reaches
the margin (``policy_moved``), the pair rewards one rulebook by as much as the gate asks the
recipe to beat words by, so its shortfall is shown but does not fail the gate. Measured on the
study's pool: OpenAI moderation's flagged side holds the moderation content policy A adds
(adult sexual content, harassment), and every policy-A guard ranks it 0.04-0.09 higher than the
policy-B guard of the same representation, TF-IDF by 0.082; the other three pairs move by
0.026 or less (docs/decisions.md#2026-12-06-a-ranking-pair-that-policy-moves).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from guarddiag import stats
from guarddiag.analyses.intervals import SEED_RANGE, recipe_interval_aggs
from guarddiag.analyses.load import student_runs
from guarddiag.analyses.registry import AnalysisContext, register_analysis
from guarddiag.analyses.scored import SCORES
from guarddiag.analyses.scores import ScoresResult
from guarddiag.analyses.threshold_free import draw_counts
from guarddiag.errors import GuarddiagError
from guarddiag.labels import MAPPINGS
from guarddiag.predictions import with_unsafe_probability
from guarddiag.protocol import protocol
from guarddiag.roles import is_reference, names_where


def clear_harm_benchmarks(kinds: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The study's harmful subsets (SPEC §5) minus the protocol's ``policy_content``, in SPEC
    order (:meth:`guarddiag.protocol.Protocol.clear_harm`).

    ``kinds`` (benchmark → harmful | benign, from the manifests) overrides nothing but must
    agree; without it the protocol's kinds are assumed (its ``study_benign`` are benign)."""
    return protocol().clear_harm(dict(kinds or {}))


def ranking_pairs() -> tuple[tuple[str, str, str], ...]:
    """(pair, harmful id, benign id) the gate ranks on: the protocol's ``competence_pairs``,
    harmful and benign prompts of one source, so a guard cannot rank by source style alone."""
    proto = protocol()
    return proto.pairs_of(proto.competence_pairs)


@dataclass(frozen=True)
class CompetenceResult:
    """Reference CAP on the clear-harm benchmarks, per model size, against the floor."""

    table: pl.DataFrame = field(repr=False)
    """Per size and benchmark: size, benchmark, n_scored (prompts), score (seed-mean CAP), low,
    high (interval ``seed-range+wilson``, or ``wilson`` for one seed), interval, n_runs."""
    sizes: pl.DataFrame = field(repr=False)
    """Per size: size, n_benchmarks, mean_cap (mean over the benchmarks of the seed-mean CAP),
    seed_low, seed_high (range over seeds of each seed's mean CAP; interval ``seed-range``, null
    for one seed), n_runs, below_floor."""
    benchmarks: tuple[str, ...]
    """Clear-harm benchmarks that count (scored), in SPEC order."""
    missing: tuple[str, ...]
    """Clear-harm benchmarks not scored here."""
    excluded: tuple[tuple[str, str], ...]
    """(benchmark, reason) of the study harmful benchmarks left out."""
    floor: float
    subset: str
    mapping: str
    branch: str = ""
    """The reference recipe's branch name(s), read from the runs' roles."""
    ranking: pl.DataFrame | None = field(default=None, repr=False)
    """Per size and pair (:func:`ranking_table`); None without the predictions table."""
    auroc_margin: float = field(default_factory=lambda: protocol().auroc_margin)

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()

    @property
    def ranks_below_baseline(self) -> bool:
        """:func:`ranking_fails`: on some pair and size that policy does not move the
        reference's AUROC is not ``auroc_margin`` above the TF-IDF baseline's (or there is no
        baseline to beat on a scored pair), or policy moves every pair scored."""
        r = self.ranking
        return r is not None and ranking_fails(r)

    def policy_moved_pairs(self) -> tuple[str, ...]:
        """The ranking pairs that label policy moves by the margin (not counted), in order."""
        return () if self.ranking is None else policy_moved_pairs(self.ranking)

    def failed_measures(self) -> tuple[str, ...]:
        """``CAP`` (below the floor) and/or ``AUROC`` (not above the baseline by the margin)."""
        return (*(("CAP",) if self.below_floor else ()),
                *(("AUROC",) if self.ranks_below_baseline else ()))

    @property
    def below_floor(self) -> bool:
        """Some model size's mean reference CAP is below the floor."""
        return bool(self.sizes.height and self.sizes["below_floor"].any())

    @property
    def lowest_mean(self) -> float | None:
        """The lowest per-size mean CAP (None when nothing was scored)."""
        return min(self.sizes["mean_cap"].to_list()) if self.sizes.height else None


def auroc(p_harmful: np.ndarray, p_benign: np.ndarray) -> float:
    """Area under the ROC curve of harmful (positive) vs benign prompts, ties counted half
    (``sklearn.metrics.roc_auc_score``)."""
    from sklearn.metrics import roc_auc_score

    y = np.r_[np.ones(len(p_harmful)), np.zeros(len(p_benign))]
    return float(roc_auc_score(y, np.r_[p_harmful, p_benign]))


def _baseline_run(frame: pl.DataFrame, policy: str) -> pl.DataFrame:
    """Rows of the TF-IDF baseline trained on ``policy`` (the reference recipe's labels)."""
    return frame.filter((pl.col("guard_kind") == "baseline")
                        & (pl.col("label_policy") == policy))


COUNTED = ~pl.col("policy_moved")
"""A :func:`ranking_table` row the gate counts: a pair label policy does not move."""


def policy_moved_pairs(ranking: pl.DataFrame) -> tuple[str, ...]:
    """The pairs of a :func:`ranking_table` that label policy moves by the margin (the gate
    does not count them), in order, each once."""
    return tuple(dict.fromkeys(ranking.filter(pl.col("policy_moved"))["pair"].to_list()))


def ranking_shortfalls(ranking: pl.DataFrame) -> pl.DataFrame:
    """The rows of a :func:`ranking_table` that fail the gate: the recipe does not beat the
    baseline by the margin on a pair that label policy does not move."""
    return ranking.filter(COUNTED & ~pl.col("beats_baseline"))


def ranking_fails(ranking: pl.DataFrame) -> bool:
    """The gate's ranking measure fails: some :func:`ranking_shortfalls` row, or pairs were
    scored and label policy moves every one (no pair is left to show detection)."""
    return bool(ranking_shortfalls(ranking).height
                or (ranking.height and not ranking.filter(COUNTED).height))


def ranking_table(predictions: pl.DataFrame, *, mapping: str, subset: str,
                  margin: float | None = None, alpha: float | None = None,
                  n_resamples: int = stats.DEFAULT_RESAMPLES, seed: int = 0) -> pl.DataFrame:
    """Per size and pair of :func:`ranking_pairs` with predictions: the reference recipe's
    (role ``reference``)
    AUROC (mean over its seeds; ``auroc_low``/``auroc_high`` the seed range), the TF-IDF
    baseline's AUROC on the same prompts (trained on the recipe's label policy), and
    ``beats_baseline`` (recipe ≥ baseline + ``margin``, None: the protocol's ``auroc_margin``;
    false without a baseline). ``policy_tilt`` (with its bootstrap bounds): the AUROC of the
    TF-IDF baseline trained on the other label policy minus that one's; ``policy_moved``: the
    tilt reaches ``margin`` at level ``alpha`` (None: the protocol's; :func:`_policy_tilt`,
    module docstring), on ``n_resamples`` prompt resamples drawn from ``seed``."""
    margin = protocol().auroc_margin if margin is None else margin
    alpha = protocol().alpha if alpha is None else alpha
    ok = predictions.filter(pl.col("status") == "ok")
    if subset == "decontaminated":
        ok = ok.filter(pl.col("survives_decontam"))
    ok = with_unsafe_probability(ok, MAPPINGS[mapping], column="_p")
    rows: list[dict[str, object]] = []
    for name, harmful, benign in ranking_pairs():
        part = ok.filter(pl.col("benchmark").is_in([harmful, benign]))
        recipe = part.filter((pl.col("guard_kind") == "branch") & is_reference())
        tilts: dict[str, dict[str, object]] = {}   # per label policy: one bootstrap per pair
        for size in sorted(set(recipe["size"].to_list())):
            runs = recipe.filter(pl.col("size") == size)
            found = [_pair_auroc(r, harmful, benign)
                     # In run order: the seed mean below is then summed the same way on
                     # every render (unordered partitions moved its last bit).
                     for r in runs.sort("run_id").partition_by("run_id", maintain_order=True)]
            values = [v for v in found if v is not None]
            if not values:
                continue
            policy = str(runs["label_policy"][0])
            base = _baseline_run(part, policy)
            b = _pair_auroc(base, harmful, benign) if base["run_id"].n_unique() == 1 else None
            if policy not in tilts:
                tilts[policy] = _policy_tilt(part, policy, harmful, benign,
                                             own_auroc=b[0] if b is not None else None,
                                             margin=margin, alpha=alpha,
                                             n_resamples=n_resamples, seed=seed)
            tilt = tilts[policy]
            mean = float(np.mean([v[0] for v in values]))
            rows.append({"size": size, "pair": name, "harmful": harmful, "benign": benign,
                         "n_harmful": values[0][1], "n_benign": values[0][2], "auroc": mean,
                         "auroc_low": min(v[0] for v in values),
                         "auroc_high": max(v[0] for v in values), "n_runs": len(values),
                         "baseline": (str(base["run_id"][0]) if b is not None else None),
                         "baseline_auroc": b[0] if b is not None else None,
                         "margin": mean - b[0] if b is not None else None,
                         "beats_baseline": b is not None and mean >= b[0] + margin,
                         **tilt})
    return pl.DataFrame(rows, schema={
        "size": pl.String, "pair": pl.String, "harmful": pl.String, "benign": pl.String,
        "n_harmful": pl.Int64, "n_benign": pl.Int64, "auroc": pl.Float64,
        "auroc_low": pl.Float64, "auroc_high": pl.Float64, "n_runs": pl.Int64,
        "baseline": pl.String, "baseline_auroc": pl.Float64, "margin": pl.Float64,
        "beats_baseline": pl.Boolean, "policy_tilt": pl.Float64,
        "policy_tilt_low": pl.Float64, "policy_tilt_high": pl.Float64,
        "policy_moved": pl.Boolean})


def _policy_tilt(part: pl.DataFrame, policy: str, harmful: str, benign: str, *,
                 own_auroc: float | None, margin: float, alpha: float, n_resamples: int,
                 seed: int) -> dict[str, object]:
    """``policy_tilt`` (AUROC of the TF-IDF baseline trained on another label policy minus the
    recipe policy's, ``own_auroc``, on the pair's prompts; of several other policies, the one
    furthest away), its prompt-bootstrap bounds ``policy_tilt_low``/``policy_tilt_high`` (the α
    and 1−α quantiles), and ``policy_moved``: the bound on the tilt's side is at
    least ``margin`` away from 0, a one-sided test at level α that policy moves the pair by the
    margin or more (all None / False without both baselines on the pair)."""
    none: dict[str, object] = {"policy_tilt": None, "policy_tilt_low": None,
                               "policy_tilt_high": None, "policy_moved": False}
    base = part.filter(pl.col("guard_kind") == "baseline")
    own = _aligned_scores(base.filter(pl.col("label_policy") == policy), harmful, benign)
    if own is None or own_auroc is None:
        return none
    ids, y, p_own = own
    found = []
    for run in base.filter(pl.col("label_policy") != policy).sort("run_id").partition_by(
            "run_id", maintain_order=True):
        other = _aligned_scores(run, harmful, benign)
        if other is not None and other[0] == ids:
            found.append(other[2])
    if not found:
        return none
    tilts = [auroc(p[y == 1], p[y == 0]) - own_auroc for p in found]
    k = max(range(len(tilts)), key=lambda i: abs(tilts[i]))
    counts = draw_counts(stats.derive_rng(seed, "policy-tilt", harmful, benign), len(y),
                         n_resamples)
    boot = weighted_auroc(found[k], y, counts) - weighted_auroc(p_own, y, counts)
    boot = boot[np.isfinite(boot)]
    low, high = (float(np.quantile(boot, alpha)), float(np.quantile(boot, 1 - alpha)))
    tilt = tilts[k]
    moved = low >= margin if tilt > 0 else high <= -margin
    return {"policy_tilt": tilt, "policy_tilt_low": low, "policy_tilt_high": high,
            "policy_moved": bool(moved)}


def _aligned_scores(run: pl.DataFrame, harmful: str, benign: str
                    ) -> tuple[list[tuple[str, str]], np.ndarray, np.ndarray] | None:
    """One run's (benchmark, prompt id) keys in a fixed order, the labels (1 harmful) and
    P(unsafe) on a pair; None unless exactly one run scored both sides."""
    if run["run_id"].n_unique() != 1:
        return None
    rows = run.filter(pl.col("benchmark").is_in([harmful, benign])).sort(
        ["benchmark", "prompt_id"])
    y = (rows["benchmark"] == harmful).to_numpy().astype(np.int8)
    if not (y.any() and (~y.astype(bool)).any()):
        return None
    keys = list(zip(rows["benchmark"].to_list(), rows["prompt_id"].to_list(), strict=True))
    return keys, y, rows["_p"].to_numpy().astype(np.float64)


def weighted_auroc(p: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """AUROC of scores ``p`` (labels ``y``, 1 harmful) under each row of prompt weights ``w``
    ([resamples, prompts], e.g. bootstrap multiplicities), ties counted half: one value per row
    (NaN where a row weighs no harmful or no benign prompt). Own code: scikit-learn's
    ``roc_auc_score`` takes one weight vector per call, and this is every resample at once."""
    order = np.argsort(p, kind="stable")
    _, group = np.unique(p[order], return_inverse=True)
    n_groups = int(group.max()) + 1
    w = np.asarray(w, dtype=np.float64)[:, order]
    harm = y[order] == 1
    rows = w.shape[0]
    flat = (np.arange(rows)[:, None] * n_groups + group[None, :]).ravel()

    def by_group(weights: np.ndarray) -> np.ndarray:
        return np.bincount(flat, weights=weights.ravel(),
                           minlength=rows * n_groups).reshape(rows, n_groups)

    h, b = by_group(w * harm), by_group(w * ~harm)
    below = np.cumsum(b, axis=1) - b
    num = (h * (below + 0.5 * b)).sum(axis=1)
    den = h.sum(axis=1) * b.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: np.ndarray = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return out


def _pair_auroc(rows: pl.DataFrame, harmful: str, benign: str
                ) -> tuple[float, int, int] | None:
    h = rows.filter(pl.col("benchmark") == harmful)["_p"].to_numpy()
    b = rows.filter(pl.col("benchmark") == benign)["_p"].to_numpy()
    if not (h.size and b.size):
        return None
    return auroc(h, b), int(h.size), int(b.size)


def competence_gate(scores: ScoresResult, *, kinds: Mapping[str, str] | None = None,
                    subset: str = "decontaminated", mapping: str = "loose",
                    floor: float | None = None,
                    predictions: pl.DataFrame | None = None,
                    auroc_margin: float | None = None,
                    alpha: float | None = None, n_resamples: int = stats.DEFAULT_RESAMPLES,
                    seed: int = 0) -> CompetenceResult | None:
    """Reference CAP on the clear-harm benchmarks beside the TF-IDF baseline's, and, given
    the ``predictions`` table, its AUROC on the ranking pairs (module docstring); None when
    no run of the reference recipe (role ``reference``, :func:`guarddiag.roles.is_reference`)
    was scored on any clear-harm benchmark. ``floor`` and ``auroc_margin`` None: the
    protocol's ``competence_floor`` and ``auroc_margin``; ``alpha`` (None: the protocol's),
    ``n_resamples`` and ``seed``: the test that label policy moves a ranking pair."""
    proto = protocol()
    floor = proto.competence_floor if floor is None else floor
    auroc_margin = proto.auroc_margin if auroc_margin is None else auroc_margin
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0.0 <= floor <= 1.0:
        raise GuarddiagError(f"competence floor: expected a share in [0, 1], got {floor!r}")
    wanted = clear_harm_benchmarks(kinds)
    rows = student_runs(scores.binary(subset=subset, mapping=mapping)).filter(
        is_reference() & pl.col("benchmark").is_in(list(wanted))
        & pl.col("score").is_not_null())
    if rows.height == 0:
        return None
    scored = set(rows["benchmark"].to_list())
    counted = tuple(b for b in wanted if b in scored)
    order = {b: i for i, b in enumerate(wanted)}
    table = rows.group_by(["size", "benchmark", "n_scored"]).agg(*recipe_interval_aggs())
    policy = str(rows["label_policy"][0])
    base = _baseline_run(scores.binary(subset=subset, mapping=mapping), policy).filter(
        pl.col("benchmark").is_in(list(counted)))
    base = base.group_by("benchmark").agg(pl.col("score").mean().alias("baseline_score"))
    table = table.join(base, on="benchmark", how="left").with_columns(
        pl.col("benchmark").replace_strict(order, return_dtype=pl.Int64).alias("_o"),
    ).sort(["size", "_o"]).select("size", "benchmark", "n_scored", "score", "low", "high",
                                  "interval", "n_runs", "baseline_score")
    # Per seed: the mean over the benchmarks (only seeds scored on every counted benchmark
    # of their size, so each seed's mean is over the same sets).
    per_size = table.group_by("size").agg(
        pl.len().alias("n_benchmarks"), pl.col("score").mean().alias("mean_cap"),
        pl.col("baseline_score").mean().alias("baseline_mean_cap"))
    per_run = rows.group_by(["size", "run_id"]).agg(pl.col("score").mean().alias("m"),
                                                   pl.len().alias("k"))
    per_run = per_run.join(per_size.select("size", "n_benchmarks"), on="size").filter(
        pl.col("k") == pl.col("n_benchmarks"))
    spread = per_run.group_by("size").agg(
        pl.col("m").min().alias("seed_low"), pl.col("m").max().alias("seed_high"),
        pl.len().cast(pl.Int64).alias("n_runs"))
    sizes = per_size.join(spread, on="size", how="left").with_columns(
        pl.when(pl.col("n_runs") > 1).then(pl.col("seed_low")).alias("seed_low"),
        pl.when(pl.col("n_runs") > 1).then(pl.col("seed_high")).alias("seed_high"),
        pl.lit(SEED_RANGE).alias("interval"),
        (pl.col("mean_cap") < floor).alias("below_floor"),
    ).sort("size").select("size", pl.col("n_benchmarks").cast(pl.Int64), "mean_cap",
                          "seed_low", "seed_high", "interval",
                          pl.col("n_runs").fill_null(0).cast(pl.Int64), "below_floor",
                          "baseline_mean_cap")
    ranking = (ranking_table(predictions, mapping=mapping, subset=subset, margin=auroc_margin,
                             alpha=alpha, n_resamples=n_resamples, seed=seed)
               if predictions is not None else None)
    return CompetenceResult(
        table=table, sizes=sizes, benchmarks=counted,
        missing=tuple(b for b in wanted if b not in scored),
        excluded=tuple(proto.policy_content.items()), floor=float(floor),
        subset=subset, mapping=mapping, branch=", ".join(names_where(rows, is_reference())),
        ranking=ranking, auroc_margin=float(auroc_margin))


def _competence(ctx: AnalysisContext) -> CompetenceResult | None:
    o = ctx.options
    return competence_gate(ctx[SCORES], kinds=ctx.inputs.kinds, subset=o.primary_subset,
                           mapping=o.mapping, floor=o.competence_floor,
                           predictions=ctx.inputs.predictions, alpha=o.alpha,
                           n_resamples=o.n_resamples, seed=o.seed)


COMPETENCE = register_analysis("competence", _competence, result=CompetenceResult,
                               needs=(SCORES,))
