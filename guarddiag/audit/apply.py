"""``guarddiag audit apply``: the cleaned corpus an audit asks for, written and audited again.

An audit lists the rows to remove with their addresses (file, row, physical line, byte
offset; :data:`~guarddiag.audit.result.REMOVE_SCHEMA`) and the bad rows it skipped
(``bad_rows.jsonl``). :func:`apply_audit` writes every shard of the audited pool again, in its
own format and under its own name, without those rows, and the removed rows beside it
(``removed/<shard>``), then audits what it wrote with the audit's own options and returns both.

* JSON lines (plain, ``.gz``, ``.zst``) are copied line by line, byte for byte: every kept line
  keeps its bytes, its line end and the blank lines around it, so nothing the audit did not
  flag changes. A line is removed by its physical line number, and its byte offset is checked
  against the audit's (a pool changed since the audit is an error before anything is written).
* Parquet, Arrow IPC files and CSV/TSV (also ``.gz``/``.zst``) are read as tables and written
  again without the removed rows (by row number within the shard).

Rows listed only for ``review`` (likely chance) are removed too unless ``keep_review``: a
common phrase is judged on how many rows hold it, so keeping some of its rows may turn them
into gated matches of the re-audit. Rows with a repeated or missing id are kept (they were
audited, under their address).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from guarddiag import files
from guarddiag.audit import jsonlread
from guarddiag.audit.badrows import BAD_ROWS_FILE, SKIPPED_KINDS, read_bad_rows
from guarddiag.audit.gate import GateResult, check_gate
from guarddiag.audit.options import ApplyOptions, AuditOptions
from guarddiag.audit.result import AuditResult
from guarddiag.audit.run import audit_pool
from guarddiag.audit.stream import Shard, find_shards, pool_digest
from guarddiag.errors import GuarddiagError
from guarddiag.paths import AuditFolder
from guarddiag.typed import replaced

logger = logging.getLogger(__name__)

__all__ = ["ApplyResult", "ShardApplied", "apply_audit"]

REMOVED = "removed"
"""The output folder's subfolder holding the removed rows, one file per shard."""
REAUDIT = "audit"
"""The output folder's subfolder holding the audit of the cleaned corpus."""


@dataclass(frozen=True)
class ShardApplied:
    """One shard written again."""

    source: str
    cleaned: str
    kept: int
    """Rows (JSON lines: non-blank lines) written to the cleaned shard."""
    removed: int
    """Rows or lines removed (written to ``removed/``)."""


@dataclass(frozen=True)
class ApplyResult:
    """What :func:`apply_audit` wrote, and the audit of it."""

    shards: tuple[ShardApplied, ...]
    cleaned_pool: Path
    """The cleaned corpus as ``--pool`` takes it: the file, or the folder of shards."""
    out: Path
    """The output folder (``removed/`` and ``audit/`` inside it)."""
    reaudit: AuditResult
    gate: GateResult
    """The audit's own gates applied to the re-audit."""

    @property
    def removed(self) -> int:
        return sum(s.removed for s in self.shards)

    def render(self) -> str:
        lines = [f"apply: wrote {self.cleaned_pool} ({sum(s.kept for s in self.shards):,} rows "
                 f"kept, {self.removed:,} removed to {self.out / REMOVED})",
                 f"audit of the cleaned corpus ({self.out / REAUDIT}):", self.reaudit.render()]
        return "\n".join(lines)


def apply_audit(audit_dir: str | Path, options: ApplyOptions | None = None, /, *,
                data_dir: str | Path | None = None, derived_dir: str | Path | None = None,
                **fields: Any) -> ApplyResult:
    """Write the corpus the audit in ``audit_dir`` audited, without its rows to remove and its
    skipped bad rows, to ``options.out`` (module docstring); audit it again into
    ``out/audit`` with the same options and gates. ``options``
    (:class:`~guarddiag.audit.options.ApplyOptions`) with any field replaced by ``fields``.

    Example (CPU, seconds)::

        apply_audit("work/audit-chat", out="work/chat-clean")
    """
    o = replaced(ApplyOptions, options, fields, where="audit apply options")
    audit_dir, out, keep_review = Path(audit_dir), o.out, o.keep_review
    folder = AuditFolder(audit_dir)
    if not folder.is_finished():
        raise GuarddiagError(f"{audit_dir}: no finished audit here (run `guarddiag audit`)")
    meta = files.read_json(folder.meta)
    if "audit_options" not in meta:
        raise GuarddiagError(f"{folder.meta}: written before `audit apply` existed; "
                             "run the audit again")
    audited = AuditOptions.of(**meta["audit_options"])
    shards = find_shards(meta["pool_path"])
    if pool_digest(shards) != meta["inputs"]["pool"]:
        raise GuarddiagError(f"{meta['pool_path']}: the pool changed since the audit in "
                             f"{audit_dir}; audit it again before applying")
    if out.resolve() in {Path(s.path).resolve().parent for s in shards}:
        raise GuarddiagError(f"{out}: the pool's own folder; choose another --out")
    lines, rows = _to_remove(audit_dir, keep_review=keep_review)
    written = tuple(_apply_shard(s, out, lines.get(s.path, {}), rows.get(s.path, set()))
                    for s in shards)
    cleaned = out / Path(shards[0].path).name if len(shards) == 1 else out
    logger.info(f"audit apply: wrote {cleaned} ({sum(s.removed for s in written):,} rows "
                "removed); auditing it again")
    result = audit_pool(cleaned, audited, out_dir=out / REAUDIT, data_dir=data_dir,
                        derived_dir=derived_dir)
    return ApplyResult(shards=written, cleaned_pool=cleaned, out=out, reaudit=result,
                       gate=check_gate(result, audited))


def _to_remove(audit_dir: Path, *, keep_review: bool
               ) -> tuple[dict[str, dict[int, int | None]], dict[str, set[int]]]:
    """Per file, the physical lines to remove (line → byte offset, as the audit saw it) and the
    rows to remove (formats without lines)."""
    remove = pl.read_parquet(AuditFolder(audit_dir).rows_to_remove)
    if keep_review:
        remove = remove.filter(~pl.col("kinds").list.eval(pl.element() == "review").list.all())
    places: list[tuple[str, int | None, int | None, int | None]] = list(
        remove.select("file", "row", "line", "byte").iter_rows())
    if (audit_dir / BAD_ROWS_FILE).is_file():
        bad = read_bad_rows(audit_dir / BAD_ROWS_FILE)
        places += [(b.file, b.row, b.line, b.byte) for b in bad if b.kind in SKIPPED_KINDS]
    lines: dict[str, dict[int, int | None]] = {}
    rows: dict[str, set[int]] = {}
    for file, row, line, byte in places:
        if file is None:
            raise GuarddiagError(f"{AuditFolder(audit_dir).rows_to_remove}: a row without an "
                                 "address (an audit of an earlier version); audit it again")
        if line is not None:
            lines.setdefault(file, {})[line] = byte
        elif row is not None:
            rows.setdefault(file, set()).add(row)
    return lines, rows


def _apply_shard(shard: Shard, out: Path, lines: dict[int, int | None], rows: set[int]
                 ) -> ShardApplied:
    name = Path(shard.path).name
    cleaned, removed = out / name, out / REMOVED / name
    if shard.fmt == "jsonl":
        kept, dropped = _copy_lines(shard.path, cleaned, removed, lines)
    elif shard.fmt in ("parquet", "arrow", "csv", "tsv"):
        kept, dropped = _copy_rows(shard, cleaned, removed, rows)
    else:
        raise GuarddiagError(f"{shard.path}: audit apply writes JSON lines, parquet, Arrow and "
                             f"CSV/TSV shards, not {shard.fmt}")
    return ShardApplied(source=shard.path, cleaned=str(cleaned), kept=kept, removed=dropped)


def _copy_lines(source: str, cleaned: Path, removed: Path, lines: dict[int, int | None]
                ) -> tuple[int, int]:
    """Copy ``source`` line by line (bytes as they are) to ``cleaned``, the ``lines`` to
    ``removed``; (non-blank lines kept, lines removed)."""
    import pyarrow as pa

    kept = dropped = 0
    with (files.atomic_path(cleaned) as tmp_clean, files.atomic_path(removed) as tmp_removed,
          pa.output_stream(str(tmp_clean), compression=_compression(source)) as keep,
          pa.output_stream(str(tmp_removed), compression=_compression(source)) as drop):
        for number, offset, line in _lines(source):
            if number not in lines:
                keep.write(line)
                kept += bool(line.strip())
                continue
            expected = lines[number]
            if expected is not None and expected != offset:
                raise GuarddiagError(f"{source} line {number}: starts at byte {offset:,}, the "
                                     f"audit saw it at {expected:,}; audit the pool again")
            drop.write(line)
            dropped += 1
    if dropped != len(lines):
        raise GuarddiagError(f"{source}: {len(lines) - dropped:,} line(s) to remove lie past its "
                             "end; audit the pool again")
    return kept, dropped


def _compression(path: str) -> str | None:
    return {".gz": "gzip", ".zst": "zstd"}.get(Path(path).suffix.lower())


def _lines(path: str) -> Iterator[tuple[int, int, bytes]]:
    """(line number from 1, byte offset, the line's bytes with its line end) of a text file,
    decompressed; lines end at ``\\n`` (as the audit counts them)."""
    for number, offset, block in jsonlread.blocks(path):
        start = 0
        while start < len(block):
            end = block.find(b"\n", start)
            end = len(block) if end < 0 else end + 1
            yield number, offset + start, block[start:end]
            number, start = number + 1, end


def _copy_rows(shard: Shard, cleaned: Path, removed: Path, rows: set[int]) -> tuple[int, int]:
    """Read ``shard`` as one table, write the rows not in ``rows`` (1-based) to ``cleaned`` and
    the others to ``removed``, in its format."""
    table = _read_table(shard)
    if rows and max(rows) > table.height:
        raise GuarddiagError(f"{shard.path}: row {max(rows):,} to remove, but it holds "
                             f"{table.height:,} rows; audit the pool again")
    gone = pl.int_range(1, pl.len() + 1).is_in(sorted(rows))
    for frame, path in ((table.filter(~gone), cleaned), (table.filter(gone), removed)):
        with files.atomic_path(path) as tmp:
            _write_table(frame, shard, tmp)
    return table.height - len(rows), len(rows)


def _read_table(shard: Shard) -> pl.DataFrame:
    import pyarrow as pa

    if shard.fmt == "parquet":
        return pl.read_parquet(shard.path)
    if shard.fmt == "arrow":
        return pl.read_ipc(shard.path)
    with pa.input_stream(shard.path, compression="detect") as fh:
        raw = fh.read()
    return pl.read_csv(raw, separator="\t" if shard.fmt == "tsv" else ",",
                       infer_schema_length=0, quote_char='"')


def _write_table(frame: pl.DataFrame, shard: Shard, path: Path) -> None:
    import pyarrow as pa

    if shard.fmt == "parquet":
        frame.write_parquet(path)
    elif shard.fmt == "arrow":
        frame.write_ipc(path)
    else:
        data: Any = frame.write_csv(separator="\t" if shard.fmt == "tsv" else ",")
        with pa.output_stream(str(path), compression=_compression(shard.path)) as fh:
            fh.write(data.encode())
