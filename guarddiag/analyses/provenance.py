"""What was measured: the branches' sizes, parameter counts, checkpoints and training rows.

Read from each scored run's ``meta.json`` (:func:`guarddiag.analyses.inputs.read_run_meta`),
grouped per (kind, size). A size is a *demo size* when the size registry
(:data:`guarddiag.model.sizes.CPU_SIZES`: the CPU sizes, random init, built for the demo) lists
it and the runs start from no pretrained checkpoint; the report then opens with a banner that
these verdicts are not to be cited.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from guarddiag.analyses.payload import json_key
from guarddiag.analyses.registry import AnalysisContext, register_analysis
from guarddiag.labels import branch_order


def demo_sizes() -> frozenset[str]:
    """The sizes the registry marks as CPU/demo sizes (random init)."""
    # Imported here: guarddiag.model's package face loads torch, which the analyses avoid at
    # import time; the size table itself is plain data.
    from guarddiag.model.sizes import CPU_SIZES

    return frozenset(CPU_SIZES)


@dataclass(frozen=True)
class ProvenanceResult:
    """What the branches are, from each scored run's meta.json."""

    table: pl.DataFrame = field(repr=False, metadata=json_key("sizes"))
    """Per (guard_kind, size): n_runs, branches, n_params_min, n_params_max, checkpoint
    ("random init" or the checkpoint names), train_rows_min, train_rows_max, demo_size."""
    demo: bool
    """Some branch size is a demo size (a CPU size of the size registry, random init): the
    report opens with a do-not-cite banner."""
    sentence: str = field(init=False)
    """One plain sentence per branch size, e.g. 'micro: 17 branch runs, 0.61 M parameters
    each, random init, trained on 1,272–8,000 rows'."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "sentence", _sentence(self.table))

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()


def _sentence(table: pl.DataFrame) -> str:
    parts = []
    for r in table.iter_rows(named=True):
        what = "branch runs" if r["guard_kind"] == "branch" else f"{r['guard_kind']} runs"
        parts.append(f"{r['size']}: {r['n_runs']} {what} ({r['branches']}), "
                     f"{_params(r['n_params_min'], r['n_params_max'])}, "
                     f"{r['checkpoint']}, trained on "
                     f"{_span(r['train_rows_min'], r['train_rows_max'])} rows"
                     + (" — demo size" if r["demo_size"] else ""))
    return "; ".join(parts)


def _params(lo: int | None, hi: int | None) -> str:
    if lo is None or hi is None:
        return "parameters not recorded"
    text = f"{lo / 1e6:.2f} M" if lo == hi else f"{lo / 1e6:.2f}–{hi / 1e6:.2f} M"
    return f"{text} parameters"


def _span(lo: int | None, hi: int | None) -> str:
    if lo is None or hi is None:  # pragma: no mutate(or → and): min and max of one column skip nulls, so they are None together (an all-null group)  # noqa: E501
        return "an unrecorded number of"
    return f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}"


def _branch_key(branch: str) -> tuple[int, str]:
    return branch_order(branch), branch


def branch_provenance(run_meta: pl.DataFrame | None) -> ProvenanceResult | None:
    """Group the branch runs' metadata per size; None where no branch run has a meta.json."""
    if run_meta is None:
        return None
    branches = run_meta.filter(pl.col("guard_kind") == "branch")
    if not branches.height:
        return None
    demo = demo_sizes()
    table = branches.group_by("guard_kind", "size").agg(
        pl.len().cast(pl.Int64).alias("n_runs"),
        pl.col("branch").unique().alias("branches"),
        pl.col("n_params").min().alias("n_params_min"),
        pl.col("n_params").max().alias("n_params_max"),
        pl.col("checkpoint").fill_null("random init").unique().sort().str.join(", ")
        .alias("checkpoint"),
        pl.col("train_rows").min().alias("train_rows_min"),
        pl.col("train_rows").max().alias("train_rows_max"),
        pl.col("checkpoint").is_null().all().alias("_random"),
    ).with_columns(
        (pl.col("size").is_in(sorted(demo)) & pl.col("_random")).alias("demo_size"),
        # Branches in the specs' order (reference, E1 … E10), not string order.
        pl.col("branches").map_elements(lambda b: ", ".join(sorted(b, key=_branch_key)),
                                        return_dtype=pl.String),
    ).drop("_random").sort("size")
    return ProvenanceResult(table=table, demo=bool(table["demo_size"].any()))


def _provenance(ctx: AnalysisContext) -> ProvenanceResult | None:
    return branch_provenance(ctx.inputs.run_meta)


PROVENANCE = register_analysis("provenance", _provenance, result=ProvenanceResult)
