"""The Python API: three verbs, each returning one result object.

    import guarddiag

    audit = guarddiag.run_audit("my_pool.parquet", benchmarks="study", out="work/audit")
    scored = guarddiag.score_guard(my_guard_fn, benchmarks=["xstest_safe"], runs_dir="work/runs")
    report = guarddiag.run_report("work/runs", out="reports/mine", audit_dir="work/audit")

``my_guard_fn`` is any ``list[str] -> list[float | dict | str]`` function (see
:mod:`guarddiag.guards.callable`) or a :class:`~guarddiag.guards.base.GuardAdapter`. Every result
has ``to_frame()`` (a polars table) and ``to_dict()`` (JSON-ready). The command line calls the
same functions (``guarddiag audit``, ``guarddiag guards score``, ``guarddiag report``). The
verbs are ``run_audit`` and ``run_report`` because ``guarddiag.audit`` and ``guarddiag.report``
name the stage packages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from guarddiag.analyses.options import ReportOptions
from guarddiag.audit.options import AuditOptions
from guarddiag.audit.result import AuditResult
from guarddiag.audit.run import audit_pool
from guarddiag.errors import GuarddiagError
from guarddiag.guards.base import GuardAdapter
from guarddiag.guards.callable import CallableGuardAdapter, GuardFunction, PairGuardFunction
from guarddiag.guards.options import GuardScoreOptions
from guarddiag.guards.scoring import GuardScoreResult
from guarddiag.guards.scoring import score_guard as score_adapter
from guarddiag.paths import work_paths
from guarddiag.report.make import make_report
from guarddiag.report.write import ReportResult
from guarddiag.typed import validate

__all__ = ["run_audit", "run_report", "score_guard"]


def run_audit(pool: str | Path, options: AuditOptions | None = None, *,
              out: str | Path | None = None, data_dir: str | Path | None = None,
              force: bool = False, **fields: Any) -> AuditResult:
    """Which benchmark prompts sit in the training ``pool``, and which pool rows hold them.

    ``options`` (:class:`~guarddiag.audit.options.AuditOptions`, the same object and defaults
    as ``guarddiag audit``), with any field replaced by ``fields`` (``near_dup=True``,
    ``text_fields=("messages[].content", "prompt", "response")``), says what is audited.
    ``pool`` is a table file (parquet, Arrow, CSV/TSV, JSON lines; .gz/.zst), a glob over
    shards, a folder of shards or a ``datasets`` folder, read in batches.
    Writes the audit folder ``out`` (default ``work/audit``; rows_to_remove.parquet,
    overlap.parquet, decontaminated/, summary.json) and returns the
    :class:`~guarddiag.audit.result.AuditResult`; a rerun with the same inputs reuses it.
    :func:`guarddiag.audit.gate.check_gate` applies the options' gates to the result.
    """
    out_dir = out if out is not None else work_paths().audit
    return audit_pool(pool, options, out_dir=out_dir, data_dir=data_dir, force=force, **fields)


def score_guard(guard: GuardAdapter | GuardFunction | PairGuardFunction,
                options: GuardScoreOptions | None = None, **fields: Any) -> GuardScoreResult:
    """Score an outside guard on the benchmarks; writes ``<runs_dir>/outside/<name>.parquet``.

    ``options`` (:class:`~guarddiag.guards.options.GuardScoreOptions`, the same object and
    defaults as ``guarddiag guards score``), with any field replaced by ``fields``
    (``benchmarks=["xstest_safe"]``, ``runs_dir="work/runs"``), says what is scored and how.

    ``guard`` is a guard adapter or a plain function from prompt texts to one answer each
    (P(unsafe), a label, or class probabilities); ``name`` defaults to the function's name.
    ``benchmarks`` defaults to every benchmark and every derived (mutated) subset; a prompt is
    called unsafe at P(unsafe) ≥ 0.5.
    ``definition`` says in one sentence what "unsafe" means for the guard (shown beside
    Table 2). Answers already saved for the same guard are reused, so an interrupted run
    resumes: the same guard means the same identity (the function's source and the plain values
    it reads, or the adapter's model file hash and options), and the same answers to a sample
    of saved prompts asked again first (the canaries, within ``canary_tolerance``): a model
    retrained behind the same function is noticed, with a warning, and asked again. A
    ``version`` is a run of its own (``<name>@<version>``), kept beside the other versions;
    ``rescore=True`` asks every selected prompt again. Benchmarks outside ``benchmarks`` keep
    the rows they were scored with. ``retries`` asks a batch whose function call raised again
    (exponential backoff), for a function that calls a service. A guard that rates a few
    unmistakably harmful prompts lower than unmistakably benign ones stops the run ("is this
    P(safe)?") unless ``allow_inverted``. ``training_data`` (a table of the guard's own training
    prompts, text in ``training_text_column``) is audited against the benchmarks, so the report
    shows the guard on its own decontaminated prompts beside the pool-decontaminated ones.
    ``pool`` (a pool.parquet) scores its val split too, so the report reads the guard at the
    branches' matched false-flag rate on the policy-neutral rows and can place it on their axis.
    ``input="prompt+response"`` scores a function
    ``fn(prompts, responses)`` on benchmarks that carry a model's responses (WildGuardTest); an
    adapter says what it reads itself.
    """
    o = GuardScoreOptions.of(options, **fields)
    if isinstance(guard, GuardAdapter):
        if o.input is not None and o.input != guard.input:
            raise GuarddiagError(f"guard {guard.name!r} reads {guard.input}, not {o.input}: "
                                 f"set input when building the adapter")
        if o.retries:
            raise GuarddiagError(f"guard {guard.name!r} is an adapter: give it its retries "
                                 f"when building it (retries= applies to a function)")
        adapter = guard
    else:
        # None: the function adapter's own batch size and retries (declared there, once)
        own: dict[str, Any] = {k: v for k, v in (("batch_size", o.batch_size),
                                                 ("retries", o.retries)) if v is not None}
        adapter = CallableGuardAdapter(function=guard, name=o.name, definition=o.definition,
                                       input=o.input or "prompt", **own)
    try:
        return score_adapter(adapter, o)
    finally:
        if adapter is not guard:
            adapter.close()


def run_report(runs_dir: str | Path, *, out: str | Path | None = None,
               pool: str | Path | None = None, audit_dir: str | Path | None = None,
               options: ReportOptions | None = None, **fields: Any) -> ReportResult:
    """Render the diagnostic report from the saved predictions in ``runs_dir`` into ``out``.

    ``pool`` (pool.parquet) and ``audit_dir`` are optional: without them (and without
    ``options`` naming them) the pool and contamination sections are omitted with a note.
    ``out`` defaults to ``options.out_dir`` (reports/report). Any other
    :class:`~guarddiag.analyses.options.ReportOptions` field (``mapping``, ``n_resamples``,
    ``seed``, ``alpha``, ``title``, …) is given by name, or as a whole ``options`` object; the
    defaults are the ones ``guarddiag report`` uses. Returns the
    :class:`~guarddiag.report.write.ReportResult` (``results`` is the content of results.json).
    """
    # Without ``options``, an absent pool or audit means none (not the work/ defaults).
    base = ({"pool_path": None, "audit_dir": None} if options is None
            else options.model_dump())
    given = {"pool_path": pool, "audit_dir": audit_dir, "out_dir": out}
    chosen = validate(ReportOptions, {
        **base, **{k: Path(v) for k, v in given.items() if v is not None},
        "runs_dir": Path(runs_dir), **fields}, where="run_report")
    return make_report(chosen)
