"""The release gate of ``guarddiag audit``: does the audited corpus pass?

Two gates, either or both: ``fail_above`` (a percentage of each benchmark: more than that share
of one benchmark's prompts is hit) and ``max_corpus_rows`` (more than that many corpus rows are
hit). Both count every audited kind (exact, near, template, contained) but those named in
``gate_exclude`` — not only what the decontaminated lists drop — so a corpus whose rows
contain benchmark prompts cannot pass by leaving ``--drop-contained`` off.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from guarddiag.audit.options import AuditOptions
from guarddiag.audit.result import AuditResult

__all__ = ["GateResult", "check_gate"]


@dataclass(frozen=True)
class GateResult:
    kinds: tuple[str, ...]
    """The kinds the gates counted."""
    corpus_rows: int
    """Corpus rows hit by a counted kind."""
    pct_by_benchmark: dict[str, float]
    """Per benchmark, the percent of its prompts hit by a counted kind."""
    failures: tuple[str, ...]
    """One line per gate that failed (empty: passed, or no gate set)."""

    @property
    def passed(self) -> bool:
        return not self.failures


def check_gate(result: AuditResult, options: AuditOptions) -> GateResult:
    """Evaluate ``options``' gates on ``result`` (module docstring)."""
    kinds = options.gated_kinds()
    hits = result.overlap.filter(pl.col("kind").is_in(list(kinds)))
    corpus_rows = hits.get_column("pool_id").n_unique()
    prompts = dict(hits.group_by("benchmark").agg(pl.col("prompt_id").n_unique()).iter_rows())
    pct = {b.benchmark: 100.0 * prompts.get(b.benchmark, 0) / b.n if b.n else 0.0
           for b in result.benchmarks}
    failures = []
    counted = " + ".join(kinds)
    if options.fail_above is not None:
        over = [(name, p) for name, p in pct.items() if p > options.fail_above]
        if over:
            listed = ", ".join(f"{name} {p:.1f}% ({prompts[name]:,} prompts)"
                               for name, p in over)
            failures.append(f"{len(over)} benchmark(s) have more than {options.fail_above:g}% "
                            f"of their prompts in the corpus ({counted}): {listed}")
    if options.max_corpus_rows is not None and corpus_rows > options.max_corpus_rows:
        failures.append(f"{corpus_rows:,} corpus rows hold benchmark prompts ({counted}), more "
                        f"than --max-corpus-rows {options.max_corpus_rows:,}; the rows are in "
                        "rows_to_remove.parquet")
    return GateResult(kinds=kinds, corpus_rows=corpus_rows, pct_by_benchmark=pct,
                      failures=tuple(failures))
