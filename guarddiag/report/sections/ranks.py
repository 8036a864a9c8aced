"""Words for two effects sections: the rank test's ties, and the VAL–score correlations.

The numbers come from :mod:`guarddiag.analyses.rank` (its tie notes too, which results.json
carries: :func:`~guarddiag.analyses.rank.tie_note`) and :mod:`guarddiag.analyses.correlation`;
this module only formats them.
"""

from __future__ import annotations

import polars as pl

from guarddiag.analyses.correlation import CorrelationResult
from guarddiag.analyses.rank import BranchRankResult
from guarddiag.report.document import Block, Column, Paragraph, Table


def rank_tie_blocks(r: BranchRankResult) -> list[Block]:
    return [Paragraph("Ties. " + " ".join(t.tie_note for t in r.tests))]


def _rho_sentence(c: CorrelationResult) -> str:
    out, weak = [], 0
    for g in c.groups:
        label = f"{SET_NAMES[g.load]}, {g.kind}"
        if g.rho is None or g.p_value is None:
            why = ("no benchmark in this set" if not g.benchmarks else
                   f"n = {g.n} recipe(s) or a constant input")
            out.append(f"{label}: ρ undefined ({why}).")
            continue
        verdict = "significant" if g.significant else "not significant"
        weak += not g.significant
        out.append(f"{label}: ρ = {g.rho:+.2f} (p = {g.p_value:.3g}, n = {g.n} recipes), "
                   f"{verdict} at {c.alpha:g}.")
    if weak:
        out.append(f"A ρ that is not significant ({weak} of {len(c.groups)} here) cannot be "
                   "told from 0 with this few recipes; that is not evidence of no relation "
                   "either, and it cannot confirm or refute the study's ρ.")
    return " ".join(out)


def correlation_blocks(c: CorrelationResult, cohort: str) -> list[Block]:
    excluded = (f" Left out (not among the study's 15 subsets: extra or mutated sets): "
                f"{', '.join(c.excluded)}." if c.excluded else "")
    return [
        Paragraph("Spearman ρ between VAL (4-class accuracy under policy A on the English val "
                  "rows; the other parts of the val split are in the validation section) and "
                  "the mean share read unsafe on a set of benchmarks, one point per recipe "
                  "(size, branch; VAL and scores averaged over its seeds — seed replicates are "
                  "not independent guards), on the study's benchmarks only, with harmful (CAP) "
                  f"and benign (OVER-REF) benchmarks kept apart ({cohort}); the sets are the "
                  "benchmarks the first screen calls 'A flags more' or 'less' (set 'policy') "
                  "and 'capability' (set 'capability'). Study: +0.74 on its policy-load set vs "
                  f"+0.34 on its capability-load set.{excluded}"),
        Table("val_correlation", "Spearman ρ (scipy.stats.spearmanr) with its two-sided "
              "p-value; n = recipes; no interval.",
              (Column("load", "set (from the calls)"), Column("kind", "kind"),
               Column("n_benchmarks", "benchmarks", "int"),
               Column("n_recipes", "recipes", "int"), Column("rho", "ρ", "rho"),
               Column("p_value", "p", "p"), Column("significant", f"p < {c.alpha:g}")),
              c.summary_frame().with_columns(pl.col("load").replace(SET_NAMES))),
        Paragraph(_rho_sentence(c)),
        Table("val_correlation_recipes", "Per recipe: seed means of VAL and of the share read "
              "unsafe on each set (no interval).", (
                  Column("size", "size"), Column("branch", "branch"),
                  Column("n_seeds", "seeds", "int"), Column("val", "VAL", "pct"),
                  *(Column(g.column, f"{SET_NAMES[g.load]}, {g.kind}", "pct")
                    for g in c.groups)),
              c.table, collapsed=True),
    ]


SET_NAMES = {"policy": "called A flags more or less", "capability": "called capability"}
"""How the correlations' two sets read in a table: named by the first screen's calls."""
