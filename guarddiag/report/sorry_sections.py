"""Report sections from SORRY-Bench, as builders for :mod:`guarddiag.report`.

Wire them in with ``guarddiag.report.with_sections(sorry_sections(...))``. Each builder reads the
predictions already loaded into the report context plus the benchmark frames (categories, base
prompt ids), runs the pure analyses of :mod:`guarddiag.sorry` and returns a
:class:`guarddiag.report.Section`; when its inputs are absent it returns ``Section.omit`` with a
note, like every other section.

* ``sorry_categories`` - capture per SORRY-Bench domain (recipes, mean over seeds) and per
  category (every run, CSV), the categories whose decisions move most between branches, and a
  heat map.
* ``sorry_robustness`` - SORRY-Bench Table 2: per mutated subset, the change in capture against
  the base prompts with a base-prompt cluster-bootstrap interval, and a figure.
* ``sorry_balance`` - which pillars and domains every scored benchmark tests.

All three use the full prompt sets (decontamination lists are per base benchmark; the mutated
subsets have none).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import polars as pl

from guarddiag.errors import GuarddiagError
from guarddiag.labels import get_mapping
from guarddiag.sorry.taxonomy import DOMAINS, SORRY_BENCHMARK, base_benchmark


def sorry_sections(*, data_dir: str | os.PathLike[str] | None = None,
                   derived_dir: str | os.PathLike[str] | None = None,
                   benchmark: str = SORRY_BENCHMARK) -> tuple[Callable, ...]:
    """The three SORRY-Bench section builders, reading benchmark frames from ``data_dir`` and
    mutated subsets from ``derived_dir`` (defaults: ``$GUARDDIAG_DATA``, ``work/derived``)."""
    from guarddiag.report import Column, FigureBlock, Section, Table

    def frames_for(ids: list[str]) -> tuple[dict[str, pl.DataFrame], list[str]]:
        from guarddiag.data import load_benchmarks, load_manifests

        known = load_manifests(derived_dir=derived_dir)
        wanted = [i for i in ids if i in known]
        if not wanted:
            return {}, []
        bset = load_benchmarks(wanted, data_dir=data_dir, derived_dir=derived_dir)
        return dict(bset.frames), [s.id for s in bset.unavailable]

    def scored(ctx) -> list[str]:
        return sorted(set(ctx.inputs.predictions["benchmark"].to_list()) - {"pool_val"})

    def categories(ctx) -> Section:
        from guarddiag.sorry.balance import capture_by_category, policy_sensitive_categories
        from guarddiag.sorry.plots import plot_category_capture

        sid, title = "sorry_categories", "SORRY-Bench: capture per domain and category"
        if benchmark not in scored(ctx):
            return Section.omit(sid, title, f"no predictions on {benchmark}")
        frames, missing = frames_for([benchmark])
        if benchmark not in frames:
            return Section.omit(sid, title, f"benchmark {benchmark} is not available "
                                            f"({', '.join(missing) or 'no manifest'})")
        o = ctx.options
        mapping = get_mapping(o.mapping)
        res = capture_by_category(ctx.inputs.predictions, frames, mapping=mapping,
                                  threshold=o.threshold)
        dom = _recipes(res.by_domain, "domain")
        wide = dom.pivot(on="domain", index=["entity", "n_runs"], values="capture",
                         aggregate_function="first")
        cols = [Column(d, d, "pct") for d in DOMAINS if d in wide.columns]
        blocks = [Table(
            "sorry_domains", f"Share of {benchmark} prompts read unsafe per SORRY-Bench domain "
            f"(hate speech / crimes or torts / inappropriate topics / unqualified advice), "
            f"mean over seeds; {mapping.name} mapping, threshold {o.threshold:g}, full prompt "
            "set. Policy A blocks the last two domains, policy B mostly allows them.",
            (Column("entity", "recipe / guard"), Column("n_runs", "runs", "int"), *cols),
            wide.select(["entity", "n_runs", *[c.key for c in cols]]))]
        try:
            sens = policy_sensitive_categories(ctx.inputs.predictions, frames, mapping=mapping,
                                               threshold=o.threshold).table.head(12)
            blocks.append(Table(
                "sorry_policy_sensitive", "Categories whose decisions move most between "
                "branches: span = max - min over branches of capture (mean over seeds, then "
                "over sizes); flips = share of prompts on which the branches' majority "
                "decisions disagree.",
                (Column("category", "category"), Column("domain", "domain"),
                 Column("span", "span", "pp", best="max"), Column("flip_share", "flips", "pct"),
                 Column("min_branch", "lowest"), Column("max_branch", "highest")), sens))
        except GuarddiagError as exc:
            blocks.append(_note(str(exc)))
        blocks.append(Table("sorry_categories_runs", "Capture per run and SORRY-Bench category "
                            "(CSV).", (Column("run_id", "run"), Column("category", "category"),
                                       Column("capture", "capture", "pct")),
                            res.by_category, csv_only=True))
        blocks.append(FigureBlock("sorry_categories", plot_category_capture(
            res, benchmark=benchmark), f"Capture per category and run on {benchmark}."))
        payload = {"domains": dom.to_dicts(), "mapping": mapping.name,
                   "threshold": o.threshold}
        return Section(sid, title, tuple(blocks), payload)

    def robustness(ctx) -> Section:
        from guarddiag.sorry.plots import plot_robustness
        from guarddiag.sorry.robustness import measure_robustness

        sid, title = "sorry_robustness", "Robustness to linguistic mutations (SORRY-Bench Table 2)"
        from guarddiag.data import load_manifests

        known = load_manifests(derived_dir=derived_dir)
        mutated = [b for b in scored(ctx) if b in known and known[b].derived
                   and known[b].derived_from in scored(ctx)]
        if not mutated:
            return Section.omit(sid, title, "no predictions on mutated subsets with their base "
                                            "(`guarddiag mutate`, then `guarddiag predict`)")
        frames, _ = frames_for(mutated)
        o = ctx.options
        res = measure_robustness(ctx.inputs.predictions, frames,
                                 bases={b: known[b].derived_from for b in frames},
                                 mapping=get_mapping(o.mapping), threshold=o.threshold,
                                 n_resamples=o.n_resamples, seed=o.seed,
                                 confidence=o.confidence)
        rows = res.to_frame()
        table = Table(
            "sorry_robustness", f"Change in capture on mutated prompts against their base "
            f"prompts (points), {int(o.confidence * 100)}% interval from {o.n_resamples:,} "
            "bootstrap resamples of base prompts (all variants of a base prompt move together);"
            " negative = the mutation slips past the guard.",
            (Column("run_id", "run"), Column("mutation", "mutation"),
             Column("capture_base", "base", "pct"),
             Column("capture_mutated", "mutated", "pct"),
             Column("delta", "Δ", "pp", low="delta_low", high="delta_high")), rows)
        fig = FigureBlock("sorry_robustness", plot_robustness(res),
                          "Δ capture per mutation and run, with cluster-bootstrap intervals.")
        return Section(sid, title, (table, fig), {"rows": rows.to_dicts(),
                                                  "n_resamples": o.n_resamples})

    def balance(ctx) -> Section:
        from guarddiag.sorry.balance import measure_balance
        from guarddiag.sorry.plots import plot_balance

        sid, title = "sorry_balance", "Which harms each benchmark tests"
        ids = sorted({base_benchmark(b) for b in scored(ctx)})
        frames, _ = frames_for(ids)
        if not frames:
            return Section.omit(sid, title, "no scored benchmark is available to read its "
                                            "categories")
        res = measure_balance(frames)
        summary = res.summary_frame()
        table = Table(
            "sorry_balance", "Pillars tested per benchmark (categories mapped onto the 24 "
            "pillars; data_manifests/taxonomy). Ratio = most / least represented tested "
            "pillar; untested pillars are listed, not in the ratio.",
            (Column("benchmark", "benchmark"), Column("n", "prompts", "int"),
             Column("n_mapped", "mapped", "int"), Column("pillars_tested", "pillars", "int"),
             Column("imbalance_ratio", "ratio", "num1"), Column("most", "most"),
             Column("least", "least"), Column("untested", "untested")), summary)
        fig = FigureBlock("sorry_balance", plot_balance(res),
                          "Share of each benchmark's prompts per pillar, and its domain mix.")
        return Section(sid, title, (table, fig), {"benchmarks": summary.to_dicts()})

    return (categories, robustness, balance)


def _recipes(frame: pl.DataFrame, key: str) -> pl.DataFrame:
    """Mean capture over the seeds of a recipe (size/branch); outside guards by name."""
    entity = pl.when(pl.col("guard_kind") == "outside").then(pl.col("branch")).otherwise(
        pl.concat_str([pl.col("size"), pl.lit("/"), pl.col("branch")]))
    return frame.with_columns(entity.alias("entity")).group_by(
        ["entity", key], maintain_order=True).agg(
        pl.col("capture").mean(), pl.col("run_id").n_unique().alias("n_runs")).sort(
        ["entity", key])


def _note(text: str):
    from guarddiag.report import Paragraph

    return Paragraph(text)
