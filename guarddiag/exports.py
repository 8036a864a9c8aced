"""Exports for other tools: decontaminated benchmark subsets and the disclosure card.

* :func:`export_decontaminated` writes, per audited benchmark, the prompts that survive
  decontamination as ``<out>/<id>.jsonl`` (benchmark, prompt_id, text, label_kind, category),
  a Hugging Face ``datasets`` folder ``<out>/hf/`` (a DatasetDict with one split per benchmark,
  ``datasets.load_from_disk`` reads it) and ``<out>/manifest.json`` (rows and sha256 per file).
* :func:`export_card` turns a report's results.json into the disclosure card as model-card
  YAML: what a guard release should publish beside its scores (per benchmark: prompts,
  contamination, the report's call with the span test's statistics).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import polars as pl
import pyarrow as pa
import yaml

from guarddiag import data, files
from guarddiag.audit.outputs import load_decontaminated
from guarddiag.errors import GuarddiagError
from guarddiag.export_options import CardOptions, DecontaminatedOptions
from guarddiag.paths import AuditFolder
from guarddiag.typed import replaced

logger = logging.getLogger(__name__)

__all__ = ["CardResult", "ExportResult", "export_card", "export_decontaminated"]

_COLUMNS = ("benchmark", "prompt_id", "text", "label_kind", "category")


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_decontaminated` wrote."""

    out_dir: Path
    rows: dict[str, int]
    """Prompts kept per benchmark."""
    files: dict[str, str]
    """sha256 per written JSONL file (relative to ``out_dir``)."""
    hf_dir: Path | None

    def to_frame(self) -> pl.DataFrame:
        return pl.DataFrame({"benchmark": list(self.rows), "rows": list(self.rows.values())},
                            schema={"benchmark": pl.String, "rows": pl.Int64})

    def to_dict(self) -> dict[str, Any]:
        return {"out_dir": str(self.out_dir), "rows": dict(self.rows),
                "files": dict(self.files),
                "hf_dir": None if self.hf_dir is None else str(self.hf_dir)}


def _kept_frame(frame: pl.DataFrame, kept: frozenset[str], name: str) -> pl.DataFrame:
    cols = [c for c in _COLUMNS if c in frame.columns]
    out = frame.filter(pl.col("prompt_id").is_in(sorted(kept))).select(cols)
    if out.height != len(kept):
        raise GuarddiagError(f"{name}: the audit kept {len(kept)} prompt ids but the benchmark "
                             f"file has {out.height} of them; re-run `guarddiag audit`")
    return out


def export_decontaminated(audit_dir: str | Path,
                          options: DecontaminatedOptions | None = None, /, *,
                          data_dir: str | Path | None = None,
                          derived_dir: str | Path | None = None,
                          **fields: Any) -> ExportResult:
    """Write the decontaminated prompts of every audited benchmark (see the module doc), as
    ``options`` (:class:`~guarddiag.export_options.DecontaminatedOptions`, any field replaced
    by ``fields``: ``out="exports/x"``) say."""
    o = replaced(DecontaminatedOptions, options, fields, where="export options")
    audit_dir, out_dir, benchmarks, hf = Path(audit_dir), o.out, o.benchmarks, o.hf
    if not AuditFolder(audit_dir).summary.is_file():
        raise GuarddiagError(f"{audit_dir}: no {AuditFolder.SUMMARY}; run `guarddiag audit` first")
    kept = load_decontaminated(audit_dir)
    wanted = data.resolve_ids(benchmarks, data.load_manifests(derived_dir=derived_dir))
    names = [n for n in kept if n in set(wanted)]
    if not names:
        raise GuarddiagError(f"{audit_dir}: none of the selected benchmarks was audited "
                             f"(audited: {', '.join(kept) or 'none'})")
    frames = data.load_benchmarks(names, data_dir=data_dir, derived_dir=derived_dir).frames
    rows: dict[str, int] = {}
    digests: dict[str, str] = {}
    splits: dict[str, datasets.Dataset] = {}
    for name in names:
        if name not in frames:
            raise GuarddiagError(f"{name}: audited, but its files are not in the data directory")
        frame = _kept_frame(frames[name], kept[name], name)
        path = out_dir / f"{name}.jsonl"
        files.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n"
                                 for r in frame.iter_rows(named=True)), path)
        rows[name] = frame.height
        digests[path.name] = files.sha256_file(path)
        if hf:
            # An explicit fingerprint (the file's digest) keeps the folder byte-identical across
            # runs; datasets would otherwise draw a random one for an in-memory table.
            splits[name] = datasets.Dataset(pa.Table.from_pylist(frame.to_dicts()),
                                            fingerprint=digests[path.name][:16])
    hf_dir = None
    if hf:
        hf_dir = out_dir / "hf"
        datasets.disable_progress_bars()  # one line per export is said below instead
        datasets.DatasetDict(splits).save_to_disk(str(hf_dir))
    files.write_json({"audit_dir": str(audit_dir), "rows": rows, "sha256": digests},
                     out_dir / "manifest.json")
    logger.info(f"export: {sum(rows.values()):,} decontaminated prompts of {len(rows)} "
                f"benchmark(s) → {out_dir}")
    return ExportResult(out_dir=out_dir, rows=rows, files=digests, hf_dir=hf_dir)


@dataclass(frozen=True)
class CardResult:
    """The disclosure card :func:`export_card` wrote."""

    path: Path
    card: dict[str, Any]

    def to_frame(self) -> pl.DataFrame:
        return pl.DataFrame(self.card["guarddiag"]["benchmarks"])

    def to_dict(self) -> dict[str, Any]:
        return dict(self.card)


_CARD_FIELDS = ("benchmark", "n", "n_kept", "share_exact", "share_near", "call", "call_stable",
                "why", "span_beyond_floor", "delta", "floor_widest", "floor_median",
                "q_contrast", "n_groups")


def export_card(report_dir: str | Path, options: CardOptions | None = None, /,
                **fields: Any) -> CardResult:
    """The report's disclosure card as model-card YAML, written where ``options``
    (:class:`~guarddiag.export_options.CardOptions`, any field replaced by ``fields``) say
    (default ``<report_dir>/card.yaml``)."""
    out = replaced(CardOptions, options, fields, where="export card options").out
    report_dir = Path(report_dir)
    results_path = report_dir / "results.json"
    if not results_path.is_file():
        raise GuarddiagError(f"{report_dir}: no results.json; run `guarddiag report` first")
    doc = files.read_json(results_path)
    res = doc.get("results", {})
    disclosure = res.get("disclosure")
    if not disclosure:
        raise GuarddiagError(f"{results_path}: the report has no disclosure section (it needs "
                             "branch runs and an audit)")
    summary = res.get("summary") or {}
    card = {"guarddiag": {
        "title": doc.get("title"),
        "results_schema_version": doc.get("schema_version"),
        "mapping": summary.get("mapping"), "subset": summary.get("subset"),
        "threshold": summary.get("threshold"), "alpha": summary.get("alpha"),
        "calls_by_word": summary.get("calls", {}),
        "competence": summary.get("competence"),
        "benchmarks": [{k: b.get(k) for k in _CARD_FIELDS} for b in disclosure["benchmarks"]],
        **{k: v for k, v in disclosure.items() if k != "benchmarks"},
        "calls": (res.get("calls") or {}).get("counts"),
        "notes": "call: the report's first-screen call per benchmark, from its routes' "
                 "route-matched A-last vs B-last contrasts at thresholds matched on "
                 "policy-neutral rows ('A flags more' / 'A flags less' carry the sign; '(distill "
                 "only)' names the route that carries it; 'threshold shift' = beyond seed noise "
                 "at 0.5 only), with call_stable saying whether every analyst choice agrees and "
                 "why saying why a benchmark has none. span_beyond_floor: the study's rule "
                 "(span Δb above the widest seed floor), a comparison, not a call; q_contrast: "
                 "the span test's A-last vs B-last contrast at 0.5. Shares are of the "
                 "benchmark's prompts found in the training pool.",
    }}
    path = out if out is not None else report_dir / "card.yaml"
    files.write_text(yaml.safe_dump(card, sort_keys=False, allow_unicode=True), path)
    logger.info(f"export: disclosure card → {path}")
    return CardResult(path=path, card=card)
