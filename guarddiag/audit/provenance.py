"""Which audit each decontamination flag came from: the one home of that record.

An audit folder keeps, per benchmark it covers, an :class:`AuditRecord` in ``provenance.json``:
the audit run that wrote the benchmark's list (``audit_id``), the pool's digest and row count,
the audit options (what was compared, the thresholds, what decontamination drops) and the
benchmark's digest. Audits of one folder always share the pool and the options (audits add up,
:mod:`guarddiag.audit.merge`), but each run that added benchmarks has its own ``audit_id``.

``guarddiag predict`` sets a benchmark's ``survives_decontam`` only from an audit that covers it
(:func:`flag_predictions`) and records, beside the predictions table, a :class:`FlagSource` per
benchmark (``predictions.decontam.json``: the record plus the audit folder). The report reads
those records (:func:`read_flag_sources`, :func:`merge_flag_sources`), refuses flags of one
benchmark from audits of different pools or options, and names the audit of every benchmark.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import polars as pl

from guarddiag import files
from guarddiag.audit.outputs import load_decontaminated
from guarddiag.errors import GuarddiagError
from guarddiag.paths import AuditFolder
from guarddiag.typed import Model, validate

__all__ = ["AuditRecord", "FlagResult", "FlagSource", "audit_id",
           "basis_difference", "check_flags_match_audit", "compared_of", "describe_source",
           "flag_predictions", "flags_path", "merge_flag_sources", "read_audit_records",
           "read_flag_sources", "write_audit_records", "write_flag_sources"]

FORMAT = 1


class AuditRecord(Model):
    """The audit that wrote one benchmark's decontaminated list."""

    audit_id: str
    """12 hex digits: digest of the pool, the options and the benchmarks that audit run
    covered; two runs that added benchmarks to one folder have two ids."""
    pool_sha256: str
    pool_rows: int
    options: dict[str, Any]
    """The audit options (columns read, what was compared, thresholds, what is dropped)."""
    drops: str
    """What decontamination drops: ``exact``, ``exact+near``, … (from the options)."""
    benchmark_sha256: str | None
    """The benchmark's digest when it was audited (its files' sha256)."""
    n: int
    n_kept: int


class FlagSource(AuditRecord):
    """Where one benchmark's ``survives_decontam`` flags in a predictions table came from."""

    audit_dir: str
    """The audit folder the list was read from."""
    via: str | None = None
    """For a derived (mutated) subset: the base subset whose list it inherits."""


class _AuditDoc(Model):
    format: Literal[1]
    benchmarks: dict[str, AuditRecord]


class _FlagsDoc(Model):
    format: Literal[1]
    predictions_sha256: str
    """The predictions file these records describe (a stale record is refused)."""
    benchmarks: dict[str, FlagSource]


def audit_id(pool_sha256: str, options: Mapping[str, Any],
             benchmark_sha256: Mapping[str, str | None]) -> str:
    doc = {"pool": pool_sha256, "options": dict(options), "benchmarks": dict(benchmark_sha256)}
    return hashlib.sha256(files.dumps_json(doc).encode()).hexdigest()[:12]


def compared_of(options: Mapping[str, Any]) -> str:
    """What the audit looked for: ``exact``, then ``+near``, ``+template``, ``+contained``."""
    return "+".join(k for k, on in (("exact", True), ("near", options.get("near_dup")),
                                    ("template", options.get("templates")),
                                    ("contained", options.get("containment"))) if on)


def drops_of(options: Mapping[str, Any]) -> str:
    return "+".join(k for k, on in (("exact", True), ("near", options.get("drop_near")),
                                    ("template", options.get("drop_template")),
                                    ("contained", options.get("drop_contained"))) if on)


# ─── the audit folder's records ────────────────────────────────────────────────────────────────

def write_audit_records(audit_dir: str | Path, records: Mapping[str, AuditRecord]) -> Path:
    doc = {"format": FORMAT,
           "benchmarks": {k: records[k].model_dump() for k in sorted(records)}}
    return files.write_json(doc, AuditFolder(Path(audit_dir)).provenance)


def read_audit_records(audit_dir: str | Path) -> dict[str, AuditRecord]:
    """Per covered benchmark, the audit that wrote its list. A folder written before these
    records existed is described from its ``meta.json`` and ``summary.json`` (one audit run)."""
    audit_dir = Path(audit_dir)
    folder = AuditFolder(audit_dir)
    path = folder.provenance
    if path.is_file():
        return dict(validate(_AuditDoc, files.read_json(path), where=path).benchmarks)
    summary_path, meta_path = folder.summary, folder.meta
    if not summary_path.is_file():
        raise GuarddiagError(f"{summary_path}: no finished audit here (run `guarddiag audit`)")
    summary = files.read_json(summary_path)
    meta = files.read_json(meta_path) if meta_path.is_file() else {}
    inputs = meta.get("inputs") or {}
    options = dict(meta.get("options") or {})
    pool_sha = str(inputs.get("pool") or "unrecorded")
    benches = summary.get("benchmarks") or {}
    shas = {k: (benches[k].get("sha256") or inputs.get(f"benchmark:{k}"))
            for k in summary.get("benchmark_order", [])}
    run = audit_id(pool_sha, options, shas)
    return {k: AuditRecord(audit_id=run, pool_sha256=pool_sha,
                           pool_rows=int(summary.get("pool_rows") or 0), options=options,
                           drops=str(summary.get("decontamination_drops") or drops_of(options)),
                           benchmark_sha256=shas[k], n=int(benches[k]["n"]),
                           n_kept=int(benches[k]["n_kept"]))
            for k in shas}


def basis_difference(a: AuditRecord, b: AuditRecord) -> str | None:
    """How two audits differ in what makes their lists comparable (the pool and the options),
    in words; None when they agree."""
    if a.pool_sha256 != b.pool_sha256:
        return f"pool sha256 {a.pool_sha256[:12]}… vs {b.pool_sha256[:12]}…"
    keys = sorted(set(a.options) | set(b.options))
    diff = [f"{k} {a.options.get(k, 'off')!r} vs {b.options.get(k, 'off')!r}" for k in keys
            if a.options.get(k) != b.options.get(k)]
    return "options " + ", ".join(diff) if diff else None


def describe_source(source: AuditRecord) -> str:
    """``<folder> audit <id> (pool <sha>…, <rows> rows, compared <what>, drops <what>)``."""
    where = f"{source.audit_dir} " if isinstance(source, FlagSource) else ""
    via = f", inherited from {source.via}" if isinstance(source, FlagSource) and source.via \
        else ""
    return (f"{where}audit {source.audit_id} (pool {source.pool_sha256[:12]}…, "
            f"{source.pool_rows:,} rows, compared {compared_of(source.options)}, drops "
            f"{source.drops}{via})")


# ─── the predictions table's records ───────────────────────────────────────────────────────────

def flags_path(predictions_file: str | Path) -> Path:
    """The record beside a predictions file: ``<stem>.decontam.json``."""
    path = Path(predictions_file)
    return path.with_name(f"{path.stem}.decontam.json")


def write_flag_sources(predictions_file: str | Path, sources: Mapping[str, FlagSource]) -> Path:
    """Write the record after the table it describes (it names the table's sha256)."""
    doc = {"format": FORMAT, "predictions_sha256": files.sha256_file(predictions_file),
           "benchmarks": {k: sources[k].model_dump() for k in sorted(sources)}}
    return files.write_json(doc, flags_path(predictions_file))


def read_flag_sources(predictions_file: str | Path, *, stale_ok: bool = False
                      ) -> dict[str, FlagSource] | None:
    """The flag sources recorded beside ``predictions_file``; None where there is no record
    (a table written before these records, or by a tool that keeps none). A record of an older
    version of the table is an error (``stale_ok``: None instead)."""
    path = flags_path(predictions_file)
    if not path.is_file():
        return None
    doc = validate(_FlagsDoc, files.read_json(path), where=path)
    if doc.predictions_sha256 != files.sha256_file(predictions_file):
        if stale_ok:
            return None
        raise GuarddiagError(f"{path}: describes another version of {predictions_file} "
                             "(a run was stopped while writing it); rerun `guarddiag predict`")
    return dict(doc.benchmarks)


def prune_flag_sources(predictions_file: str | Path, benchmarks: Sequence[str]) -> None:
    """After ``benchmarks``' rows were removed from ``predictions_file`` on purpose
    (``guarddiag runs prune``): drop their records and describe the table as it is now. A
    table without a record keeps none."""
    path = flags_path(predictions_file)
    if not path.is_file():
        return
    doc = validate(_FlagsDoc, files.read_json(path), where=path)
    kept = {k: v for k, v in doc.benchmarks.items() if k not in set(benchmarks)}
    write_flag_sources(predictions_file, kept)


def merge_flag_sources(per_file: Mapping[str, Mapping[str, FlagSource]]
                       ) -> dict[str, FlagSource]:
    """One source per benchmark over every predictions file's records; flags of one benchmark
    from audits of different pools or options are an error naming the command that fixes it."""
    out: dict[str, FlagSource] = {}
    first_file: dict[str, str] = {}
    for name in sorted(per_file):
        for bench, source in sorted(per_file[name].items()):
            seen = out.get(bench)
            if seen is None:
                out[bench], first_file[bench] = source, name
                continue
            diff = basis_difference(seen, source)
            if diff is not None:
                raise GuarddiagError(
                    f"{name}: survives_decontam of benchmark {bench!r} comes from "
                    f"{describe_source(source)}, but in {first_file[bench]} from "
                    f"{describe_source(seen)} ({diff}); re-flag every table from one audit: "
                    f"`guarddiag predict --benchmarks {bench} --audit-dir {seen.audit_dir}` "
                    "(and `guarddiag guards score` with the same --audit-dir)")
    return out


def check_flags_match_audit(sources: Mapping[str, FlagSource],
                            records: Mapping[str, AuditRecord], audit_dir: str | Path) -> None:
    """The report's audit folder must describe the same audit as the flags it sits beside: a
    benchmark it covers whose flags came from an audit of another pool, other options or
    another version of the benchmark is an error naming the command that re-flags it."""
    for bench, source in sorted(sources.items()):
        record = records.get(bench)
        if record is None or source.via is not None:
            continue
        diff = basis_difference(source, record)
        if diff is None and source.benchmark_sha256 != record.benchmark_sha256:
            diff = (f"benchmark sha256 {str(source.benchmark_sha256)[:12]}… vs "
                    f"{str(record.benchmark_sha256)[:12]}…")
        if diff is not None:
            raise GuarddiagError(
                f"{audit_dir}: its audit of {bench!r} is not the one the predictions' flags "
                f"came from ({describe_source(source)}; {diff}); re-flag them from it: "
                f"`guarddiag predict --benchmarks {bench} --audit-dir {audit_dir}`")


# ─── setting the flags ─────────────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class FlagResult:
    """A predictions table with its ``survives_decontam`` column, where each benchmark's flags
    came from, and one line that says so."""

    table: pl.DataFrame
    sources: dict[str, FlagSource]
    note: str


def _covered(audit_dir: Path | None, derived_from: Mapping[str, str]
             ) -> tuple[dict[str, frozenset[str]], dict[str, FlagSource]]:
    if audit_dir is None or not audit_dir.is_dir():
        return {}, {}
    lists = load_decontaminated(audit_dir, derived_from=derived_from)
    records = read_audit_records(audit_dir)
    sources = {}
    for bench in lists:
        own = records.get(bench)
        base = derived_from.get(bench)
        record = own if own is not None else records.get(base or "")
        if record is not None:
            sources[bench] = FlagSource(**record.model_dump(), audit_dir=str(audit_dir),
                                        via=None if own is not None else base)
    return lists, sources


def _previous(previous_file: Path | None) -> tuple[pl.DataFrame | None, dict[str, FlagSource]]:
    """The flags the table at ``previous_file`` holds (one per benchmark prompt) and their
    recorded sources."""
    if previous_file is None or not previous_file.is_file():
        return None, {}
    flags = files.read_table(previous_file).select(
        "benchmark", "prompt_id", "survives_decontam").unique()
    split = flags.group_by("benchmark", "prompt_id").len().filter(pl.col("len") > 1)
    if split.height:
        row = split.sort("benchmark", "prompt_id").row(0, named=True)
        raise GuarddiagError(
            f"{previous_file}: runs disagree on whether prompt {row['prompt_id']!r} of "
            f"benchmark {row['benchmark']!r} survives decontamination; re-flag it from its "
            f"audit: `guarddiag predict --benchmarks {row['benchmark']} --audit-dir DIR`")
    return flags, read_flag_sources(previous_file, stale_ok=True) or {}


def flag_predictions(table: pl.DataFrame, *, audit_dir: str | Path | None,
                     selected: Sequence[str], benchmark_sha256: Mapping[str, str],
                     derived_from: Mapping[str, str], previous_file: str | Path | None,
                     unaudited: Sequence[str] = (), user: Sequence[str] = ()) -> FlagResult:
    """Set ``survives_decontam`` on ``table`` (one row per run, benchmark, prompt).

    A benchmark the audit at ``audit_dir`` covers (itself, or a derived subset through its
    base) takes its flags from that audit; one it does not cover keeps the flags (and their
    recorded source) of the table at ``previous_file``; one never flagged survives (the audit
    does not call it contaminated: a never-audited benchmark, the ``unaudited`` subsets such
    as the pool's own val split), except the ``user`` benchmarks (added with ``data add``):
    nothing vouches for those until an audit covers them, so their flag is null (not audited).
    An ``audit_dir`` that covers none of the ``selected`` benchmarks is an error naming what
    it covers, as is a covered benchmark whose digest changed since its audit.
    """
    folder = Path(audit_dir) if audit_dir is not None else None
    lists, sources = _covered(folder, derived_from)
    wanted = [b for b in selected if b not in unaudited]
    if folder is not None and folder.is_dir() and wanted and not set(wanted) & set(lists):
        raise GuarddiagError(
            f"{folder}: this audit covers {', '.join(sorted(lists)) or 'no benchmark'}, none of "
            f"the selected {', '.join(wanted)}; audit them into it with `guarddiag audit "
            f"--benchmarks {','.join(wanted)} --out {folder}`, or pass the audit that covers them")
    for bench, source in sources.items():
        now = benchmark_sha256.get(bench)
        if source.via is None and now is not None and source.benchmark_sha256 not in (None, now):
            raise GuarddiagError(
                f"{folder}: benchmark {bench!r} changed since this audit (sha256 "
                f"{str(source.benchmark_sha256)[:12]}… then, {now[:12]}… now); re-audit it: "
                f"`guarddiag audit --benchmarks {bench} --out {folder}`")
    old, old_sources = _previous(Path(previous_file) if previous_file is not None else None)
    present = table["benchmark"].unique().to_list()
    audited = sorted(b for b in present if b in lists)
    # Kept: flags the table holds from a recorded audit, or any False flag (an audit from
    # before these records); a benchmark whose flags are all True is simply never audited.
    before = set() if old is None else set(old_sources) | set(
        old.filter(~pl.col("survives_decontam"))["benchmark"].to_list())
    kept = sorted(b for b in present if b not in lists and b not in unaudited and b in before)
    keys = ["benchmark", "prompt_id"]
    new = pl.DataFrame([(b, pid) for b in audited for pid in lists[b]],
                       schema={"benchmark": pl.String, "prompt_id": pl.String}, orient="row")
    parts = [new.with_columns(pl.lit(True).alias("_flag"))]
    if kept and old is not None:
        parts.append(old.filter(pl.col("benchmark").is_in(kept))
                     .rename({"survives_decontam": "_flag"}).select(*keys, "_flag"))
    flags = pl.concat(parts)
    out = table.drop("survives_decontam", strict=False).join(flags, on=keys, how="left")
    # A prompt the recorded audit never saw has no flag it could keep (one of a benchmark that
    # no recorded audit flagged survives, as every prompt of a never-audited benchmark does).
    missing = out.filter(pl.col("benchmark").is_in([b for b in kept if b in old_sources])
                         & pl.col("_flag").is_null())
    if missing.height:
        bench = missing["benchmark"][0]
        raise GuarddiagError(
            f"{previous_file}: prompt {missing['prompt_id'][0]!r} of benchmark {bench!r} has no "
            f"flag from the audit its other prompts came from (the benchmark changed since); "
            f"re-audit it: `guarddiag audit --benchmarks {bench} --out DIR`, then "
            f"`guarddiag predict --benchmarks {bench} --audit-dir DIR`")
    rest = sorted(set(present) - set(audited) - set(kept) - set(unaudited))
    null = [b for b in rest if b in user]
    out = out.with_columns(
        pl.when(pl.col("benchmark").is_in(audited)).then(pl.col("_flag").fill_null(False))
        .when(pl.col("benchmark").is_in(null)).then(pl.lit(None, dtype=pl.Boolean))
        .otherwise(pl.col("_flag").fill_null(True)).alias("survives_decontam")).drop("_flag")
    recorded = {b: sources[b] for b in audited if b in sources}
    recorded |= {b: old_sources[b] for b in kept if b in old_sources}
    rest = [b for b in rest if b not in null]
    return FlagResult(out, recorded, _note(folder, audited, kept, rest, set(old_sources), null))


def _note(folder: Path | None, audited: list[str], kept_all: list[str], rest: list[str],
          recorded: set[str], null: Sequence[str] = ()) -> str:
    kept = [b for b in kept_all if b in recorded]
    unrecorded = [b for b in kept_all if b not in recorded]
    if folder is None or not folder.is_dir():
        head = f"no audit folder at {folder}, so no flag set from an audit"
    else:
        head = f"survives_decontam of {len(audited)} benchmark(s) from {folder}"
    parts = [head]
    if kept:
        parts.append(f"{len(kept)} kept as the table held them ({_some(kept)}), each from its "
                     "own audit")
    if unrecorded:
        parts.append(f"{len(unrecorded)} kept as the table held them with no recorded audit "
                     f"({_some(unrecorded)})")
    if rest:
        parts.append(f"{len(rest)} never audited, True everywhere ({_some(rest)}; run "
                     "`guarddiag audit` for decontaminated scores)")
    if null:
        parts.append(f"{len(null)} of your own not audited, null until an audit covers them "
                     f"({_some(list(null))}; `guarddiag audit --benchmarks {','.join(null)}`)")
    return "; ".join(parts)


def _some(names: list[str], shown: int = 6) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")
