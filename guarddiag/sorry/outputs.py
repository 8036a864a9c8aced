"""The SORRY-Bench commands' verbs: load inputs, run one analysis, write its files.

Each returns the analysis result plus the paths written, so the CLI only prints. Output folders
carry a ``meta.json`` (inputs' sha256, versions, git sha).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from guarddiag.data import load_benchmarks, load_manifests
from guarddiag.errors import GuarddiagError
from guarddiag.files import (
    read_table,
    sha256_file,
    write_json,
    write_meta,
    write_parquet,
    write_text,
)
from guarddiag.labels import get_mapping
from guarddiag.paths import work_paths
from guarddiag.sorry.balance import BalanceResult, measure_balance
from guarddiag.sorry.jaccard import JaccardProfile, family_of, jaccard_profile
from guarddiag.sorry.judge import JudgeEvalResult, evaluate_judge
from guarddiag.sorry.options import JudgeEvalOptions, TablesOptions
from guarddiag.sorry.plots import plot_balance, plot_jaccard, save_sorry_figure
from guarddiag.typed import replaced


def default_out(name: str) -> Path:
    return work_paths().sorry / name


@dataclass(frozen=True)
class BalanceRun:
    result: BalanceResult
    unavailable: tuple[str, ...]
    """Subsets skipped because their files are not there (id: reason)."""
    files: tuple[Path, ...]


def run_balance(options: TablesOptions | None = None, /, *,
                data_dir: str | os.PathLike[str] | None = None,
                derived_dir: str | os.PathLike[str] | None = None, **fields: Any) -> BalanceRun:
    """Balance of the subsets ``options`` (:class:`~guarddiag.sorry.options.TablesOptions`, any
    field replaced by ``fields``) select; writes balance_*.csv, balance.json, balance.png/.pdf."""
    o = replaced(TablesOptions, options, fields, where="balance options")
    ids, out_dir, figure = o.benchmarks, o.out_dir, o.figure
    bset = load_benchmarks(ids, data_dir=data_dir, derived_dir=derived_dir)
    if not bset.frames:
        raise GuarddiagError(f"balance: none of the selected subsets ({ids}) is available; "
                             f"see `guarddiag data list`")
    result = measure_balance(bset.frames)
    out = Path(out_dir) if out_dir is not None else default_out("balance")
    files = [
        _csv(result.summary_frame(), out / "balance_summary.csv"),
        _csv(result.to_frame(), out / "balance_pillars.csv"),
        _csv(result.domain_frame(), out / "balance_domains.csv"),
        write_json({"benchmarks": result.summary_frame().to_dicts(),
                    "unmapped_values": {b.benchmark: list(b.unmapped_values)
                                        for b in result.benchmarks if b.unmapped_values}},
                   out / "balance.json"),
    ]
    if figure:
        files += save_sorry_figure(plot_balance(result), out / "balance")
    files.append(write_meta(out, inputs=dict(bset.sha256), analysis="balance"))
    return BalanceRun(result, tuple(f"{s.id}: {s.status}" for s in bset.unavailable),
                      tuple(files))


@dataclass(frozen=True)
class JaccardRun:
    profile: JaccardProfile
    unavailable: tuple[str, ...]
    files: tuple[Path, ...]
    pool_path: Path | None


def run_jaccard(options: TablesOptions | None = None, /, *,
                pool: str | os.PathLike[str] | None = None, pool_required: bool = False,
                data_dir: str | os.PathLike[str] | None = None,
                derived_dir: str | os.PathLike[str] | None = None, **fields: Any) -> JaccardRun:
    """Max word-set Jaccard profile of the subsets ``options``
    (:class:`~guarddiag.sorry.options.TablesOptions`, any field replaced by ``fields``) select;
    writes jaccard_per_prompt.parquet, jaccard_summary.csv, jaccard.png/.pdf. A missing pool
    is an error only when ``pool_required``; otherwise the pool column is left empty (and said
    so)."""
    o = replaced(TablesOptions, options, fields, where="jaccard options")
    ids, out_dir, figure = o.benchmarks, o.out_dir, o.figure
    pool_path = Path(pool) if pool is not None else work_paths().pool
    pool_df = None
    if pool_path.is_file():
        pool_df = read_table(pool_path, columns=["prompt_id", "text"])
    elif pool_required:
        raise GuarddiagError(f"{pool_path}: pool file not found")
    else:
        pool_path = None  # type: ignore[assignment]
    bset = load_benchmarks(ids, data_dir=data_dir, derived_dir=derived_dir)
    if not bset.frames:
        raise GuarddiagError(f"jaccard: none of the selected subsets ({ids}) is available")
    manifests = load_manifests(derived_dir=derived_dir, data_dir=data_dir)
    families = {}
    for b in bset.frames:
        m = manifests[b]
        fam = family_of(m)
        # A mutation belongs to its base subset's family.
        families[b] = family_of(manifests[fam]) if m.derived and fam in manifests else fam
    profile = jaccard_profile(bset.frames, pool=pool_df, families=families)
    out = Path(out_dir) if out_dir is not None else default_out("jaccard")
    files = [write_parquet(profile.per_prompt, out / "jaccard_per_prompt.parquet"),
             _csv(profile.summary, out / "jaccard_summary.csv")]
    if figure:
        files += save_sorry_figure(plot_jaccard(profile), out / "jaccard")
    inputs = dict(bset.sha256)
    if pool_path is not None:
        inputs["pool"] = sha256_file(pool_path)
    files.append(write_meta(out, inputs=inputs, analysis="jaccard", families=families))
    return JaccardRun(profile, tuple(f"{s.id}: {s.status}" for s in bset.unavailable),
                      tuple(files), pool_path)


def run_judge_eval(options: JudgeEvalOptions | None = None, /,
                   **fields: Any) -> JudgeEvalResult:
    """Score a judge on a records file as ``options``
    (:class:`~guarddiag.sorry.options.JudgeEvalOptions`, any field replaced by ``fields``)
    say; with ``out``, write the summary JSON and, beside it, the per-record verdicts as CSV."""
    o = replaced(JudgeEvalOptions, options, fields, where="judge-eval options")
    records, out = o.records, o.out
    result = evaluate_judge(records, o.judge, mapping=get_mapping(o.mapping),
                            threshold=o.threshold, batch_size=o.batch_size,
                            guard_options=o.guard_options, device=o.device)
    if out is not None:
        write_json({**result.summary(), "records": str(records),
                    "records_sha256": sha256_file(Path(records))}, out)
        _csv(result.records, out.with_suffix(".records.csv"))
    return result


def _csv(df: pl.DataFrame, path: Path) -> Path:
    # CSV cannot hold list columns; callers pass flat frames.
    return write_text(df.write_csv(float_precision=6), path)
