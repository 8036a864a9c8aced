"""The paired-test blocks shared by Table 1, Table 2 and the mapping effect: a sentence saying
which differences survive Holm's correction, the significant comparisons, and every comparison
as CSV.

Numbers come from :mod:`guarddiag.analyses.paired`; this module only formats them."""

from __future__ import annotations

from typing import Any

from guarddiag.analyses.paired import TEST, PairedComparisonResult
from guarddiag.report.document import Block, Column, Paragraph, Table
from guarddiag.report.jsonable import payload_of
from guarddiag.report.render.cells import p_text

_LISTED = 8

_COLUMNS = (Column("benchmark", "benchmark"), Column("metric_alias", "metric"),
            Column("first", "first"), Column("second", "second"), Column("n", "prompts", "int"),
            Column("n_first_only", "first only", "int"),
            Column("n_second_only", "second only", "int"),
            Column("share_first", "first % (majority)", "pct"),
            Column("share_second", "second % (majority)", "pct"),
            Column("delta", "Δ (pp)", "pp"), Column("p_value", "p", "p"),
            Column("p_holm", "Holm p", "p"), Column("significant", "significant"))


def _line(r: dict[str, Any]) -> str:
    who = (f"{r['first']}, {r['mapping']}," if r["first"] == r["second"]
           else f"{r['first']} vs {r['second']}")
    return (f"{who} on {r['benchmark']}: {100 * r['share_first']:.1f}% "
            f"vs {100 * r['share_second']:.1f}% read unsafe ({100 * r['delta']:+.1f} pp, "
            f"Holm p {_eq(p_text(r['p_holm'], 2))})")


def _eq(text: str) -> str:
    return text if text.startswith("<") else f"= {text}"


def paired_blocks(res: PairedComparisonResult | None, name: str) -> list[Block]:
    """The summary sentence, the table of significant comparisons, and the CSV of all."""
    if res is None or res.n_comparisons == 0:
        return []
    sig = res.significant()
    pct = round(res.alpha * 100)
    text = (f"Paired tests ({res.description}): {TEST} ({res.n_comparisons:,}). "
            f"{sig.height:,} of {res.n_comparisons:,} differences are significant at a "
            f"family-wise {pct}% level. Every other difference in the table cannot be told "
            "apart from chance on these prompts: a higher or bolder number there is not "
            "evidence that one guard reads more prompts unsafe than the other.")
    rows = list(sig.iter_rows(named=True))
    if rows:
        listed = "; ".join(_line(r) for r in rows[:_LISTED])
        more = f"; and {len(rows) - _LISTED:,} more" if len(rows) > _LISTED else ""
        shares = ("" if res.family == "mapping" else
                  " (a recipe's share is its seeds' majority decision per prompt, the share "
                  "tested and shown in the paired table; Table 1 shows seed means)")
        text += f" Significant{shares}: {listed}{more}."
    caption = ("Share read unsafe by the first and the second guard on the same prompts, "
               "prompts only the first / only the second reads unsafe, the exact McNemar p "
               "and its Holm-adjusted value")
    blocks: list[Block] = [Paragraph(text)]
    if sig.height:
        blocks.append(Table(f"{name}_significant", f"{caption}: the comparisons significant "
                            f"after Holm's correction ({res.description}).", _COLUMNS, sig,
                            collapsed=True))
    blocks.append(Table(name, f"{caption}: every comparison of the family "
                        f"({res.description}).", _COLUMNS, res.table, csv_only=True))
    return blocks


def paired_payload(res: PairedComparisonResult | None) -> dict[str, Any] | None:
    """The family's results.json record (derived from :class:`PairedComparisonResult`), or
    None."""
    if res is None:
        return None
    return payload_of(res)
