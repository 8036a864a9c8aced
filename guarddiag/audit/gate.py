"""The release gate of ``guarddiag audit``: does the audited corpus pass?

Two gates, either or both: ``fail_above`` (a percentage of each benchmark: more than that share
of one benchmark's prompts is hit) and ``max_corpus_rows`` (more than that many corpus rows are
hit). Both count every audited kind (exact, near, template, contained) but those named in
``gate_exclude`` — not only what the decontaminated lists drop — so a corpus whose rows
contain benchmark prompts cannot pass by leaving ``--drop-contained`` off.

A gate **fails closed**: it cannot pass what it could not check. A text field that held text in
no row (a misspelled path), a selected benchmark that is unavailable, or bad rows the audit
skipped make it *unchecked* (exit status 2, distinct from 1, a failed gate), unless the user
accepts that case by name (``allow_missing_field``, ``allow_unavailable``, ``allow_bad_rows``).
A gate that failed on what it did check says so first (status 1).
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
    unchecked: tuple[str, ...] = ()
    """One line per thing the gate could not check and the user did not accept (empty: it
    checked everything, or no gate is set)."""

    @property
    def passed(self) -> bool:
        return not self.failures and not self.unchecked

    @property
    def status(self) -> int:
        """The command's exit status: 1 a gate failed, 2 it could not check, 0 passed."""
        return 1 if self.failures else 2 if self.unchecked else 0


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
    unchecked = (_unchecked(result, options)
                 if options.fail_above is not None or options.max_corpus_rows is not None
                 else ())
    return GateResult(kinds=kinds, corpus_rows=corpus_rows, pct_by_benchmark=pct,
                      failures=tuple(failures), unchecked=unchecked)


def _unchecked(result: AuditResult, options: AuditOptions) -> tuple[str, ...]:
    """What the gate cannot vouch for and ``options`` do not accept (module docstring)."""
    out = []
    missing = result.fields_without_text
    if missing and not options.allow_missing_field:
        out.append(f"text field(s) {', '.join(missing)} held text in no row, so nothing was "
                   "searched there (a misspelled path?); fix the path, or accept it with "
                   "--allow-missing-field")
    if result.unavailable and not options.allow_unavailable:
        listed = ", ".join(u.benchmark for u in result.unavailable)
        out.append(f"{len(result.unavailable)} selected benchmark(s) unavailable, not searched: "
                   f"{listed}; fetch them (`guarddiag data pull`), leave them out "
                   "(--benchmarks), or accept it with --allow-unavailable")
    if result.skipped_rows and not options.allow_bad_rows:
        out.append(f"{result.skipped_rows:,} bad rows were skipped, not searched (listed in "
                   "bad_rows.jsonl); fix them, or accept it with --allow-bad-rows")
    return tuple(out)
