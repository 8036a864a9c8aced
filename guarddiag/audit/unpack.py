"""Big compressed JSON lines shards, decompressed first into a seekable file.

A gzip or zstd stream cannot be entered in the middle, so a compressed shard is one task: one
core, no status line until it ends, and a killed run starts it over. When the disk allows it
(:data:`SPACE_FACTOR` × the compressed size free), a JSON lines shard over :data:`MIN_BYTES`
is decompressed once into ``<out>/.unpacked/`` before the scan, which then splits it into byte
ranges like any plain shard (every core, a status line per finished range, resumable). The audit
says so up front. Every address still names the compressed shard (lines and byte offsets are
the decompressed file's, as they always were for a compressed shard); the folder goes with the
scan store once the audit is written.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from guarddiag import files
from guarddiag.audit.stream import TASK_BYTES, Shard

logger = logging.getLogger(__name__)

__all__ = ["MIN_BYTES", "SPACE_FACTOR", "UNPACK_FOLDER", "unpack_big"]

UNPACK_FOLDER = ".unpacked"
MIN_BYTES = TASK_BYTES // 4
"""Compressed shards from this size on are decompressed (smaller ones are one quick task)."""
SPACE_FACTOR = 10
"""Free disk needed per compressed byte: text compresses 3-5x with gzip, up to ~8x with
zstd; the margin keeps the audit from filling the disk."""


def unpack_big(shards: list[Shard], folder: Path) -> list[Shard]:
    """``shards`` with every big compressed JSON lines shard replaced by its decompressed copy
    in ``folder`` (its ``source`` the compressed file), made now or reused from a killed run."""
    out = []
    for shard in shards:
        size = Path(shard.path).stat().st_size
        if shard.fmt != "jsonl" or not shard.path.lower().endswith((".gz", ".zst")) \
                or size < MIN_BYTES:
            out.append(shard)
            continue
        stat = Path(shard.path).stat()
        target = folder / f"{Path(shard.path).name}-{stat.st_size}-{stat.st_mtime_ns}.jsonl"
        if not target.is_file() and not _room(folder, size, shard.path):
            out.append(shard)
            continue
        if target.is_file():
            logger.info(f"audit: {shard.path}: reusing its decompressed copy {target}")
        else:
            logger.info(f"audit: {shard.path}: decompressing it to {target} first, so that it "
                        "is scanned in parallel, resumable parts (removed when the audit is "
                        "written)")
            _decompress(shard.path, target)
        out.append(Shard(path=str(target), fmt="jsonl", source=shard.path))
    return out


def _room(folder: Path, size: int, path: str) -> bool:
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    free = shutil.disk_usage(existing).free
    if free >= SPACE_FACTOR * size:
        return True
    logger.info(f"audit: {path}: a compressed shard is scanned as one task, so a killed run "
                f"starts it over ({free / 2**30:.1f} GiB free, not the "
                f"{SPACE_FACTOR * size / 2**30:.1f} GiB its decompressed copy may need); to make "
                "the scan parallel and resumable, free space, or split it into shards, e.g. "
                "`zcat corpus.jsonl.gz | split -l 500000 -d --additional-suffix=.jsonl - "
                "corpus/part-`")
    return False


def _decompress(source: str, target: Path) -> None:
    import pyarrow as pa

    with (files.atomic_path(target) as tmp, pa.input_stream(source, compression="detect") as src,
          open(tmp, "wb") as dst):
        while chunk := src.read(1 << 24):
            dst.write(chunk)
