"""A guard's own decontamination: its training prompts audited against the benchmarks it is
scored on (``score_guard(..., training_data=FILE)``).

"Decontaminated" everywhere else means the prompts that survive the audit of the branches'
training pool (``survives_decontam``, the flag every run shares). A guard trained on its own
data gets the same audit against that data, stored as its own column
(:data:`guarddiag.predictions.OWN_DECONTAM`) beside the pool flag, never over it: the report
shows the guard on both prompt sets.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from guarddiag import files
from guarddiag.audit import audit_frames, read_pool
from guarddiag.audit.outputs import inherit_decontamination
from guarddiag.predictions import OWN_DECONTAM


@dataclass(frozen=True)
class OwnAudit:
    """The guard's training prompts audited against the scored benchmarks."""

    kept: dict[str, frozenset[str]]
    """Per benchmark, the prompt ids that survive (exact overlaps removed)."""
    doc: dict[str, Any]
    """What the guard's meta.json says about it (file, sha256, rows, per-benchmark counts)."""


@dataclass(frozen=True)
class Training:
    """The guard's training prompts, read before the guard is asked (a bad file fails fast)."""

    path: Path
    text_column: str
    ids: list[str]
    texts: list[str]


def read_training(training_data: str | Path | None, *, text_column: str) -> Training | None:
    """The training prompts in ``text_column`` (one-line errors name file, row and field)."""
    if training_data is None:
        return None
    path = Path(training_data)
    ids, texts = read_pool(path, text_column=text_column, id_column=None)
    return Training(path, text_column, ids, texts)


def own_audit(training: Training, ordered: dict[str, pl.DataFrame], *,
              bases: dict[str, str]) -> OwnAudit:
    """Audit the guard's own training prompts against the benchmarks, with the pool audit's
    default rules (exact and near duplicates found, exact ones removed); a derived subset
    inherits its base's list, as in the pool audit."""
    path, text_column, ids, texts = (training.path, training.text_column, training.ids,
                                     training.texts)
    result = audit_frames(ids, texts, {b: f.select("prompt_id", "text")
                                       for b, f in ordered.items()}, near_dup=True)
    direct = {b: frozenset(v) for b, v in result.decontaminated.items()}
    kept = {b: ids_ for b, ids_ in inherit_decontamination(
        direct, {d: b for d, b in bases.items() if d in ordered}).items() if b in ordered}
    counts = {o.benchmark: {"n": o.n, "n_exact": o.n_exact, "n_near": o.n_near,
                            "n_kept": len(kept.get(o.benchmark, ()))}
              for o in result.benchmarks}
    return OwnAudit(kept=kept, doc={"file": str(path.resolve()),
                                     "sha256": files.sha256_file(path),
                                     "text_column": text_column, "rows": len(texts),
                                     "benchmarks": counts})


def with_own_flags(table: pl.DataFrame, own: OwnAudit | None, earlier: pl.DataFrame
                    ) -> pl.DataFrame:
    """``table`` with the :data:`OWN_DECONTAM` column: this run's own audit for the scored
    benchmarks, the earlier rows' flags for the kept ones, null elsewhere."""
    parts = []
    if own is not None:
        parts.append(pl.DataFrame(
            [(b, pid, pid in own.kept.get(b, frozenset())) for b, pid in
             zip(table["benchmark"].to_list(), table["prompt_id"].to_list(), strict=True)
             if b in own.kept],
            schema={"benchmark": pl.String, "prompt_id": pl.String, OWN_DECONTAM: pl.Boolean},
            orient="row"))
    if OWN_DECONTAM in earlier.columns:
        parts.append(earlier.select("benchmark", "prompt_id", pl.col(OWN_DECONTAM)
                                    .cast(pl.Boolean)))
    if not parts:
        return table
    flags = pl.concat(parts).unique(["benchmark", "prompt_id"], keep="first",
                                    maintain_order=True)
    return table.join(flags, on=["benchmark", "prompt_id"], how="left", maintain_order="left")
