"""Operating points of every run: rates at the cut-off and at a matched threshold, AUROC against
policy-neutral rows (the inputs of :mod:`~guarddiag.analyses.calls`).

Neutral rows are the pool's val rows that both policies label safe under the mapping; a run's
matched threshold gives it the reference recipe's false-flag rate at the cut-off on them.
Decontamination levels: ``full`` (every prompt), ``exact`` (no exact overlap with the pool, from
the audit's overlap.parquet; the audit's decontaminated list where that table is absent) and
``all_kinds`` (exact-free and in the audit's decontaminated list, which drops every kind it was
run with).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl
import scipy.special

from guarddiag.analyses.callwords import PRIMARY_THRESHOLD, at_cutoff
from guarddiag.analyses.scores import VAL_BENCHMARK
from guarddiag.errors import GuarddiagError
from guarddiag.labels import BinaryMapping
from guarddiag.pool.table import seen_in_train
from guarddiag.predictions import with_unsafe_probability
from guarddiag.protocol import protocol

_GROUP = ["benchmark", "mapping", "decontam", "threshold"]
_RUN = ["run_id", "guard_kind", "branch", "size", "seed", "role", "route", "last_policy",
        "control_of", "variant_of"]
SCORE_SCHEMA = {"run_id": pl.String, "guard_kind": pl.String, "branch": pl.String,
                "size": pl.String, "seed": pl.Int64, "role": pl.String, "route": pl.String,
                "last_policy": pl.String, "control_of": pl.String, "variant_of": pl.String,
                "benchmark": pl.String, "mapping": pl.String, "decontam": pl.String,
                "threshold": pl.String, "t": pl.Float64, "n": pl.Int64, "rate": pl.Float64,
                "auroc": pl.Float64, "auprc": pl.Float64}
THRESHOLD_SCHEMA = {"run_id": pl.String, "branch": pl.String, "size": pl.String,
                    "mapping": pl.String, "n_neutral": pl.Int64, "ffr_05": pl.Float64,
                    "target": pl.Float64, "t_matched": pl.Float64, "ffr_matched": pl.Float64,
                    "n_neutral_lang": pl.Int64, "ffr_matched_lang": pl.Float64,
                    "ffr_matched_other": pl.Float64}
"""Per run and mapping (:func:`run_scores`); :func:`degenerate_runs` adds ``degenerate``. The
``_lang`` columns split the neutral rows by the protocol's ``benchmark_lang``: how many are in
it, and the share of them and of the rest the matched threshold flags (null for a pool without
a ``lang`` column)."""
DERIVED_MARK = "__"
"""A derived (mutated) subset's id is its base's, this, and the mutation (sorrybench__caesar)."""
_P_EPS = 1e-12
"""Scores are clipped to [ε, 1 − ε] before the logit (a saturated 0 or 1 stays finite)."""


def neutral_note() -> str:
    """What the policy-neutral rows are, in the report's words (at the protocol's cut-off)."""
    return ("pool val rows that both policies label safe under the mapping and that have no "
            "copy in the train split: the policies agree they should pass, so flags on them "
            "are false flags whatever policy a run learnt, on prompts it was not trained on; "
            "a run's matched threshold gives it the reference's false-flag rate at "
            f"{at_cutoff()} there")


def neutral_rows(pool: pl.DataFrame, mapping: BinaryMapping) -> pl.DataFrame:
    """Val rows of ``pool`` that both policies label safe under ``mapping`` (the protocol's
    ``neutral_split`` and ``neutral_labels``) and that have no copy in the train split
    (:func:`guarddiag.pool.table.seen_in_train`): ``prompt_id`` and, where the pool has one,
    ``lang``, sorted by ``prompt_id``. Read once, for every language (:func:`neutral_ids`).

    A row with a train copy is left out because a false flag is only measured on a prompt the
    model has not been trained on: a model that memorises text scores the copied rows
    (69.3 % of the multilingual val rows in the study's recipe) by their labels, which lowers
    its threshold and raises its CAP without any detection. In the demo's pool the TF-IDF
    baseline flagged 0.1-1.8 % of the copied rows at its 5 % threshold and 8-14 % of the
    other non-English neutral rows; frozen MiniLM states 7 % and 9 %."""
    proto = protocol()
    for col in ("prompt_id", "split", "label_a", "label_b"):
        if col not in pool.columns:
            raise GuarddiagError(f"pool: missing column {col!r} (the neutral val rows of the "
                                 f"operating-point matching need it)")
    safe = [c for c in proto.neutral_labels if not mapping.is_unsafe(c)]
    # A pool read from a file always has its texts; a frame without them (a simulation's ids
    # and labels) has no copy to tell.
    copied = seen_in_train(pool) if "text" in pool.columns else pl.lit(False)
    return pool.with_columns(copied.alias("_copied")).filter(
        (pl.col("split") == proto.neutral_split) & ~pl.col("_copied")
        & pl.col("label_a").is_in(safe) & pl.col("label_b").is_in(safe)
    ).select("prompt_id", *(("lang",) if "lang" in pool.columns else ())).sort("prompt_id")


def neutral_ids(rows: pl.DataFrame, *, lang: str | None = None) -> list[str]:
    """The ``prompt_id`` of ``rows`` (:func:`neutral_rows`, read once per pool and mapping),
    sorted; with ``lang``, only those whose ``lang`` is it."""
    if lang:
        if "lang" not in rows.columns:
            raise GuarddiagError("pool: missing column 'lang' (the neutral val rows of the "
                                 "operating-point matching need it)")
        rows = rows.filter(pl.col("lang") == lang)
    return rows["prompt_id"].to_list()


def matched_threshold(neutral: np.ndarray, target: float) -> float:
    """The threshold at which ``target`` of the ``neutral`` scores are flagged, by one rule for
    every run: on the logit scale, the centre of the interval of thresholds that flag exactly j
    rows for j = target · n, linearly between neighbouring centres where j is fractional.

    A constant logit shift of a run's scores moves this threshold by the same shift, so the
    rates it gives are unchanged wherever the cut-off falls between the run's scores. (The earlier
    rule, "the threshold nearest the cut-off flagging at most the target", kept the cut-off for
    some runs and took an interval's low end for others: a shifted run flagged the prompts
    inside that interval and an unshifted one did not, a bias the calls read as policy
    content.) The
    realised false-flag rate lies between floor(target · n) / n and ceil(target · n) / n (tied
    scores are flagged together, so ties can push it past). Own code: ``numpy.quantile``
    interpolates between order statistics on the probability scale, where a shift is not
    undone."""
    p = np.sort(np.asarray(neutral, dtype=float))[::-1]
    n = p.size
    if n == 0:
        raise GuarddiagError("matched_threshold: no neutral rows")
    z = scipy.special.logit(np.clip(p, _P_EPS, 1.0 - _P_EPS))
    top = float(z[0] - z[1]) if n > 1 and z[0] > z[1] else 1.0
    bottom = float(z[-2] - z[-1]) if n > 1 and z[-2] > z[-1] else 1.0
    bounds = np.r_[z[0] + top, z, z[-1] - bottom]
    centres = (bounds[:-1] + bounds[1:]) / 2      # centres[j] flags the j highest rows
    k = min(max(float(target), 0.0), 1.0) * n
    return float(scipy.special.expit(np.interp(k, np.arange(n + 1), centres)))


def auroc_against(neutral_sorted: np.ndarray, scores: np.ndarray) -> float | None:
    """P(score > neutral) + ½ P(tie): the Mann–Whitney AUROC of ``scores`` against the neutral
    rows (exact, no sampling)."""
    if neutral_sorted.size == 0 or scores.size == 0:
        return None
    less = np.searchsorted(neutral_sorted, scores, side="left")
    le = np.searchsorted(neutral_sorted, scores, side="right")
    return float(np.mean(less + 0.5 * (le - less)) / neutral_sorted.size)


def auprc_against(neutral_sorted: np.ndarray, scores: np.ndarray) -> float | None:
    """Average precision of ``scores`` (positives) against the neutral rows (negatives):
    Σ_k (R_k − R_{k−1}) · P_k over the distinct scores, highest first (sklearn's definition,
    which the tests check against). Own code, like :func:`auroc_against`, because sklearn's
    metrics re-sort the negatives on every call; here one sorted neutral array per run serves
    every (benchmark, level) group, which keeps ``guarddiag bench calls`` draws cheap."""
    if neutral_sorted.size == 0 or scores.size == 0:
        return None
    pos = np.sort(scores)
    t = np.unique(np.concatenate([pos, neutral_sorted]))[::-1]
    tp = pos.size - np.searchsorted(pos, t, side="left")
    fp = neutral_sorted.size - np.searchsorted(neutral_sorted, t, side="left")
    recall = tp / pos.size
    precision = tp / np.maximum(tp + fp, 1)
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def run_scores(predictions: pl.DataFrame, *, pool: pl.DataFrame,
               mappings: Sequence[BinaryMapping],
               exact_overlap: pl.DataFrame | None = None
               ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(scores, thresholds): every run's rate per benchmark, mapping, decontamination level and
    threshold kind, with AUROC against the neutral rows; and each run's matched threshold."""
    # sorted: every later sum over runs or prompts adds in one order whatever the file's order
    ok = predictions.filter(pl.col("status") == "ok").sort(["run_id", "benchmark", "prompt_id"])
    if exact_overlap is not None:
        # A derived subset (sorrybench__caesar) keeps its base's prompt ids and inherits the
        # base's overlaps, as the audit's decontaminated lists do (the same prompts everywhere).
        exact_ids = exact_overlap.select(pl.col("benchmark").alias("_base"), "prompt_id") \
            .unique().with_columns(pl.lit(True).alias("_exact"))
        ok = ok.with_columns(pl.col("benchmark").str.split(DERIVED_MARK).list.first()
                             .alias("_base")).join(exact_ids, on=["_base", "prompt_id"],
                                                   how="left", maintain_order="left")
        # A prompt no audit saw (null flag: the user's own benchmark) is not exact-free.
        exact_free = pl.col("_exact").is_null() & pl.col("survives_decontam").is_not_null()
    else:
        exact_free = pl.col("survives_decontam")
    levels = {"full": pl.lit(True), "exact": exact_free,
              "all_kinds": exact_free & pl.col("survives_decontam")}
    out_scores: list[dict[str, Any]] = []
    out_thr: list[dict[str, Any]] = []
    cutoff, at_cut = protocol().cutoff, at_cutoff()
    lang = protocol().benchmark_lang if "lang" in pool.columns else None
    for mapping in mappings:
        rows = neutral_rows(pool, mapping)  # read once: both sets below are its rows
        neutral = set(neutral_ids(rows))
        in_lang = set(neutral_ids(rows, lang=lang)) if lang else set()
        mapped = with_unsafe_probability(ok, mapping, column="p").with_columns(
            pl.col("prompt_id").is_in(list(in_lang)).alias("_in"))
        is_neutral = (pl.col("benchmark") == VAL_BENCHMARK) & pl.col("prompt_id").is_in(
            list(neutral))
        per_run = mapped.partition_by("run_id", as_dict=True, maintain_order=True)
        neutral_of_run = {k[0]: v.filter(is_neutral) for k, v in per_run.items()}
        neutral_p = {r: np.sort(v["p"].to_numpy()) for r, v in neutral_of_run.items()}
        ffr05 = {r: float(np.mean(x >= cutoff)) if x.size else None for r, x in neutral_p.items()}
        meta = {k[0]: v.row(0, named=True) for k, v in per_run.items()}
        ref_by_size: dict[str, list[float]] = {}
        for r, m in meta.items():
            if m["guard_kind"] == "branch" and m["role"] == "reference" and ffr05[r] is not None:
                ref_by_size.setdefault(m["size"], []).append(ffr05[r])  # type: ignore[arg-type]
        targets = {s: float(np.mean(v)) for s, v in ref_by_size.items()}
        overall = float(np.mean(list(targets.values()))) if targets else None
        for run, part in per_run.items():
            rid = str(run[0])
            m = meta[rid]
            target = targets.get(m["size"], overall)
            x = neutral_p[rid]
            t = matched_threshold(x, target) if x.size and target is not None else cutoff
            out_thr.append({"run_id": rid, "branch": m["branch"], "size": m["size"],
                            "mapping": mapping.name, "n_neutral": int(x.size),
                            "ffr_05": ffr05[rid], "target": target, "t_matched": t,
                            "ffr_matched": float(np.mean(x >= t)) if x.size else None,
                            **_by_language(neutral_of_run[rid] if lang else None, t)})
            bench = part.filter(pl.col("benchmark") != VAL_BENCHMARK)
            for level, keep in levels.items():
                sub = bench.filter(keep)
                for b, rows in sub.partition_by("benchmark", as_dict=True,
                                                maintain_order=True).items():
                    p = rows["p"].to_numpy()
                    auc, ap = auroc_against(x, p), auprc_against(x, p)
                    for kind, thr in ((at_cut, cutoff), (PRIMARY_THRESHOLD, t)):
                        out_scores.append({**{c: m[c] for c in _RUN}, "benchmark": b[0],
                                           "mapping": mapping.name, "decontam": level,
                                           "threshold": kind, "t": thr, "n": int(p.size),
                                           "rate": float(np.mean(p >= thr)), "auroc": auc,
                                           "auprc": ap})
    scores = pl.DataFrame(out_scores, schema=SCORE_SCHEMA)
    return scores.sort([*_GROUP, "run_id"]), pl.DataFrame(out_thr, schema=THRESHOLD_SCHEMA)


def flag_shares_by_language(p: np.ndarray, in_lang: np.ndarray, t: float
                            ) -> tuple[float | None, float | None]:
    """Shares of neutral rows with P(unsafe) ``p`` ≥ ``t``: among those in the benchmarks'
    language (``in_lang`` true) and among the rest; None for an empty part."""
    mine, rest = p[in_lang], p[~in_lang]
    return (float(np.mean(mine >= t)) if mine.size else None,
            float(np.mean(rest >= t)) if rest.size else None)


def _by_language(neutral: pl.DataFrame | None, t: float) -> dict[str, Any]:
    """The ``_lang`` columns of :data:`THRESHOLD_SCHEMA` for one run's neutral rows (``_in``:
    in the benchmarks' language) at its threshold ``t``."""
    if neutral is None:
        return {"n_neutral_lang": None, "ffr_matched_lang": None, "ffr_matched_other": None}
    in_lang = neutral["_in"].to_numpy()
    mine, rest = flag_shares_by_language(neutral["p"].to_numpy(), in_lang, t)
    return {"n_neutral_lang": int(in_lang.sum()), "ffr_matched_lang": mine,
            "ffr_matched_other": rest}


HALF = 0.5
"""Which edge a degenerate threshold sits at (written 1 − ε near 1): the middle of [0, 1]."""
DEGENERATE_EDGE = 1e-3
"""A matched threshold this close to 0 or 1 marks a degenerate operating point: the run's
scores saturate there, and float32 ties decide which prompts it flags."""


def degenerate_runs(scores: pl.DataFrame, thresholds: pl.DataFrame, *,
                    predictions: pl.DataFrame, clear_harm: Sequence[str],
                    level: str = "exact") -> pl.DataFrame:
    """``thresholds`` with a ``degenerate`` column: why each branch run's operating point is
    degenerate under that mapping ("" when it is not). Two signs: a matched threshold within
    :data:`DEGENERATE_EDGE` of 0 or 1; mean capture on the ``clear_harm`` benchmarks (the
    calls pass the study's, :func:`~guarddiag.analyses.competence.clear_harm_benchmarks`) at
    its matched threshold below the TF-IDF baseline's at the baseline's own, the baseline
    trained on the run's last policy (or every baseline's mean where none is), at
    decontamination ``level``."""
    policy = dict(predictions.select("run_id", "label_policy").unique("run_id").iter_rows()) \
        if "label_policy" in predictions.columns else {}
    cap = (scores.filter((pl.col("threshold") == "matched") & (pl.col("decontam") == level)
                         & pl.col("benchmark").is_in(list(clear_harm)))
           .group_by("mapping", "run_id")
           .agg(pl.col("rate").mean().alias("cap"), pl.col("guard_kind").first(),
                pl.col("last_policy").first()))
    reasons: dict[tuple[str, str], list[str]] = {}
    for r in thresholds.iter_rows(named=True):
        t = r["t_matched"]
        if r["n_neutral"] and (t < DEGENERATE_EDGE or t > 1 - DEGENERATE_EDGE):
            reasons.setdefault((r["mapping"], r["run_id"]), []).append(
                f"matched threshold {t:.3g}" if t < HALF else f"matched threshold 1 − {1 - t:.2g}")
    for mapping, part in cap.partition_by("mapping", as_dict=True).items():
        base = part.filter(pl.col("guard_kind") == "baseline")
        by_policy = {policy.get(str(rid)): float(c) for rid, c in base.select("run_id", "cap")
                     .iter_rows()}
        mean_base = float(base["cap"].mean()) if base.height else None  # type: ignore[arg-type]
        for r in part.filter(pl.col("guard_kind") == "branch").iter_rows(named=True):
            floor = by_policy.get(r["last_policy"], mean_base)
            if floor is not None and r["cap"] < floor:
                reasons.setdefault((str(mapping[0]), r["run_id"]), []).append(
                    f"clear-harm capture {100 * r['cap']:.1f} % below TF-IDF's "
                    f"{100 * floor:.1f} %")
    found = pl.DataFrame([{"mapping": m, "run_id": r, "degenerate": "; ".join(v)}
                          for (m, r), v in reasons.items()],
                         schema={"mapping": pl.String, "run_id": pl.String,
                                 "degenerate": pl.String})
    return (thresholds.join(found, on=["mapping", "run_id"], how="left", maintain_order="left")
            .with_columns(pl.col("degenerate").fill_null("")))
