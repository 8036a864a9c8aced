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
  template at once;
* **contained** overlaps (``containment=True``), a fourth column: the prompt inside a pool text
  whatever its length — in a jailbreak wrapper or a quoting post: a prompt of five words or
  fewer as a whole phrase, a longer one with at most one word substituted in place
  (:mod:`guarddiag.audit.phrase`), one of ``short_words`` distinct words or more also when the
  text holds ``containment_threshold`` (default 0.8) of its word 3-grams
  (:mod:`guarddiag.audit.containment`), for a prompt with no exact overlap. A short prompt
  found in the texts of ``review_rows`` rows or more is a common phrase: its contained matches
  are kind ``review``, listed but never gated nor dropped.

It then writes, to ``out_dir`` (default ``work/audit/``)::

    rows_to_remove.parquet     one row per pool row with a match, in pool order: pool_id,
    rows_to_remove.jsonl       file, row, line, byte (its address), fields, texts, kinds,
                               matches (benchmark, prompt_id, kind, similarity, field); the
                               same as JSON lines
    bad_rows.jsonl             every bad row (malformed, wrong-typed, without a unique id)
                               with its address (:mod:`~guarddiag.audit.badrows`); absent
                               when there is none
    overlap.parquet            one row per matched (benchmark prompt, pool row) pair:
                               benchmark, prompt_id, pool_id, kind ("exact" | "near" |
                               "template" | "contained"), similarity (1.0 for exact,
                               the word-set Jaccard for near and template, the share of
                               the prompt's 3-grams for contained); + field (the text's
                               path) with nested text fields
    decontaminated/<id>.txt    the benchmark's prompt ids that survive, one per line, in order
    summary.json               per benchmark: n, n_exact, pct_exact, n_near, pct_near, n_kept,
                               pct_removed, sha256, examples (+ n_template, pct_template and
                               the top-level template_definition with templates; likewise
                               n_contained, pct_contained, containment_definition and
                               containment_threshold with containment); unavailable
                               subsets with the reason
    overlap.png, overlap.pdf   bar chart: exact, near, template and contained % per benchmark
                               (only with ``figure=True``, the command's ``--figure``)
    meta.json                  input digests, options, versions
    provenance.json            per benchmark, the audit run that wrote its list: audit id,
                               pool digest and rows, options, benchmark digest
                               (:mod:`~guarddiag.audit.provenance`)

Decontamination drops exact overlaps (as in the study); ``drop_near=True`` drops near duplicates
too, ``drop_template=True`` template overlaps, ``drop_contained=True`` contained overlaps.
Without ``templates`` and ``containment`` every output is what it was before those overlaps
existed. ``summary.json`` and ``meta.json`` are written last, and a
rerun with the same inputs and options finds them and returns the saved result instead of
recomputing. Audits add up (:mod:`~guarddiag.audit.merge`): an audit of some benchmarks into
a folder holding an audit of others, of the same pool and options, keeps the others' lists.

The pool may be a table file, a glob over shards, a folder of shards or a ``datasets`` folder;
it is read in batches (:mod:`~guarddiag.audit.stream`), each batch normalised in polars where
that provably equals :func:`guarddiag.text.normalise` (:mod:`~guarddiag.audit.normal`), and only
the rows that can match are kept (:mod:`~guarddiag.audit.engine`: every core, or Ray tasks with
``engine="ray"``), so memory is bounded by the candidates, not the pool.

Options are one typed model, :class:`~guarddiag.audit.options.AuditOptions`; texts may come
from nested field paths (:mod:`~guarddiag.audit.fields`: ``messages[].content``, strings or
lists of content parts), :func:`~guarddiag.audit.gate.check_gate` applies the release gates
(failing closed on what was not checked), and :func:`~guarddiag.audit.apply.apply_audit`
writes the cleaned corpus and audits it again.

Modules: :mod:`~guarddiag.audit.result` (result objects), :mod:`~guarddiag.audit.read` (the pool
table), :mod:`~guarddiag.audit.stream`, :mod:`~guarddiag.audit.unpack`,
:mod:`~guarddiag.audit.shardread` and :mod:`~guarddiag.audit.jsonlread` (shards, formats,
batches, one-line errors naming shard and row), :mod:`~guarddiag.audit.badrows` (bad rows),
:mod:`~guarddiag.audit.normal` (the vectorised normal form), :mod:`~guarddiag.audit.engine` and
:mod:`~guarddiag.audit.ray_engine` (the parallel candidate scan), :mod:`~guarddiag.audit.exact`
(normal-form index, exact overlaps), :mod:`~guarddiag.audit.neardup` (the prefix-filter Jaccard
join), :mod:`~guarddiag.audit.frames` (``audit_frames``), :mod:`~guarddiag.audit.template`
(template forms and matches), :mod:`~guarddiag.audit.containment` and
:mod:`~guarddiag.audit.phrase` (prompts inside longer rows), :mod:`~guarddiag.audit.outputs`
(the audit folder and its chart), :mod:`~guarddiag.audit.run` (``audit_pool``),
:mod:`~guarddiag.audit.gate` (the gates), :mod:`~guarddiag.audit.apply` (``audit apply``).
``bench audit`` (throughput and the 100M/1B-row plan, ``--suite``: planted cases, ``--peer``:
MinHash LSH) is in :mod:`guarddiag.bench`.
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
