"""The disclosure card: what every guard paper should publish beside its benchmark scores.

Per benchmark: prior data overlap with the training pool (exact and near, from the audit), the
seed-noise interval (median and widest seed-floor range), the span Δb and whether it passes the
widest floor (the study's rule, a comparison: the report's call comes from its first screen); plus
the operational definition of *unsafe*: which classes count as unsafe under each binary
mapping, and what the classes mean under each labelling policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from guarddiag.analyses.contamination import CONTAMINATION, ContaminationResult
from guarddiag.analyses.load import LOAD, BenchmarkLoadResult
from guarddiag.analyses.registry import AnalysisContext, register_analysis
from guarddiag.analyses.scored import SCORES
from guarddiag.labels import CLASSES, MAPPINGS

POLICY_DEFINITIONS = {
    "A": "a human moderator's rulebook: blocks real harm plus copyright reproduction, adult "
         "sexual content, personalised medical/legal/financial advice, political lobbying, "
         "abuse of the assistant, jailbreak/prompt-extraction attempts and product-policy "
         "refusals",
    "B": "genuinely harmful intent only: what policy A adds is labelled BOUNDARY_SAFE (or "
         "GENERIC_SAFE)",
}
"""SPEC §2, in words; the policies themselves are data (data_manifests/policies)."""


@dataclass(frozen=True)
class DisclosureResult:
    table: pl.DataFrame = field(repr=False)
    subset: str
    mapping: str
    threshold: float
    definitions: tuple[tuple[str, tuple[str, ...]], ...]
    """(mapping name, unsafe classes) for every known binary mapping."""
    policies: tuple[tuple[str, str], ...]

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()


def disclosure_card(*, load: BenchmarkLoadResult | None,
                    contamination: ContaminationResult | None, subset: str, mapping: str,
                    threshold: float, benchmarks: list[str]) -> DisclosureResult:
    rows = []
    cont = ({r["benchmark"]: r for r in contamination.table.iter_rows(named=True)}
            if contamination is not None else {})
    loads = ({r["benchmark"]: r for r in load.table.filter(
        (pl.col("subset") == subset) & (pl.col("mapping") == mapping)).iter_rows(named=True)}
        if load is not None else {})
    for b in benchmarks:
        c, ld = cont.get(b, {}), loads.get(b, {})
        rows.append({"benchmark": b, "n": c.get("n"), "share_exact": c.get("share_exact"),
                     "share_near": c.get("share_near"), "n_kept": c.get("n_kept"),
                     "floor_median": ld.get("floor_median"),
                     "floor_widest": ld.get("floor_widest"), "n_groups": ld.get("n_groups"),
                     "delta": ld.get("delta"), "q_contrast": ld.get("q_contrast"),
                     "span_beyond_floor": (None if ld.get("delta") is None
                                           or ld.get("floor_widest") is None
                                           else ld["delta"] > ld["floor_widest"])})
    table = pl.DataFrame(rows, schema={
        "benchmark": pl.String, "n": pl.Int64, "share_exact": pl.Float64,
        "share_near": pl.Float64, "n_kept": pl.Int64, "floor_median": pl.Float64,
        "floor_widest": pl.Float64, "n_groups": pl.Int64, "delta": pl.Float64,
        "q_contrast": pl.Float64, "span_beyond_floor": pl.Boolean})
    definitions = tuple((m.name, tuple(c for c in CLASSES if c in m.unsafe))
                        for m in MAPPINGS.values())
    return DisclosureResult(table=table, subset=subset, mapping=mapping, threshold=threshold,
                            definitions=definitions, policies=tuple(POLICY_DEFINITIONS.items()))


def _disclosure(ctx: AnalysisContext) -> DisclosureResult:
    o = ctx.options
    benches = sorted(set(ctx[SCORES].binary()["benchmark"].to_list()))
    return disclosure_card(load=ctx[LOAD], contamination=ctx.get(CONTAMINATION),
                           subset=o.primary_subset, mapping=o.mapping, threshold=o.threshold,
                           benchmarks=benches)


DISCLOSURE = register_analysis("disclosure", _disclosure, result=DisclosureResult,
                               needs=(SCORES, LOAD, CONTAMINATION))
