"""Contamination audit: which benchmark prompts also sit in a training pool.

For every benchmark subset the audit counts

* **exact** overlaps: a pool row whose normal form (:func:`guarddiag.text.normalise`: Unicode
  NFKC, casefold, punctuation and symbols to spaces, whitespace collapsed) equals the benchmark
  prompt's normal form;
* **near** duplicates (``near_dup=True``), a separate column: a pool row whose word set
  (:func:`guarddiag.text.word_set`) has Jaccard similarity ≥ ``threshold`` (default 0.8) with the
  prompt's, and that is not an exact overlap. Found by prefix filtering
  (:mod:`guarddiag.audit.neardup`), which reports exactly the pairs a brute-force scan would.
  A benchmark prompt counts as near only when it has no exact overlap, so exact + near never
  double-count;
* **template** overlaps (``templates=True``), a third column: a pool row whose template form
  (quoted spans and capitalised names after "by"/"from"/"of" masked to slot words, then
  normalised; :mod:`guarddiag.audit.template`) equals the prompt's, for a prompt with no exact
  overlap — the benchmark's sentence asked about other titles. A prompt may be near and
  template at once.

It then writes, to ``out_dir`` (default ``work/audit/``)::

    overlap.parquet            one row per matched (benchmark prompt, pool row) pair:
                               benchmark, prompt_id, pool_id, kind ("exact" | "near" |
                               "template"), similarity (1.0 for exact, the word-set
                               Jaccard for near and template)
    decontaminated/<id>.txt    the benchmark's prompt ids that survive, one per line, in order
    summary.json               per benchmark: n, n_exact, pct_exact, n_near, pct_near, n_kept,
                               pct_removed, sha256, examples (+ n_template, pct_template and
                               the top-level template_definition with templates); unavailable
                               subsets with the reason
    overlap.png, overlap.pdf   bar chart: exact, near and template % per benchmark
    meta.json                  input digests, options, versions

Decontamination drops exact overlaps (as in the study); ``drop_near=True`` drops near duplicates
too, ``drop_template=True`` template overlaps. Without ``templates`` every output is what it was
before template overlaps existed. ``summary.json`` and ``meta.json`` are written last, and a
rerun with the same inputs and options finds them and returns the saved result instead of
recomputing.

Modules: :mod:`~guarddiag.audit.result` (result objects), :mod:`~guarddiag.audit.read` (the
pool table), :mod:`~guarddiag.audit.exact` (normal-form index, exact overlaps),
:mod:`~guarddiag.audit.neardup` (the prefix-filter Jaccard join), :mod:`~guarddiag.audit.frames`
(``audit_frames``), :mod:`~guarddiag.audit.template` (template forms and matches),
:mod:`~guarddiag.audit.outputs` (the audit folder and its chart),
:mod:`~guarddiag.audit.run` (``audit_pool``), :mod:`~guarddiag.audit.bench` (``bench audit``).
"""

from guarddiag.audit.frames import audit_frames
from guarddiag.audit.outputs import load_audit, load_decontaminated, plot_overlap, write_audit
from guarddiag.audit.read import read_pool
from guarddiag.audit.result import (
    DEFAULT_THRESHOLD,
    AuditResult,
    BenchmarkOverlap,
    UnavailableBenchmark,
)
from guarddiag.audit.run import audit_pool

__all__ = [
    "DEFAULT_THRESHOLD",
    "AuditResult",
    "BenchmarkOverlap",
    "UnavailableBenchmark",
    "audit_frames",
    "audit_pool",
    "load_audit",
    "load_decontaminated",
    "plot_overlap",
    "read_pool",
    "write_audit",
]
