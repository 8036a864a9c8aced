"""What was measured, in words: the demo-size banner and the branches' provenance that open
"At a glance" and the disclosure card.

Numbers come from
:mod:`guarddiag.analyses.provenance`; this module only formats them."""

from __future__ import annotations

from typing import Any

from guarddiag.analyses.provenance import PROVENANCE
from guarddiag.report.context import ReportContext
from guarddiag.report.document import Block, Paragraph
from guarddiag.report.jsonable import payload_of

DEMO_BANNER = ("Demo-size models: do not cite these verdicts. The branches are small encoders "
               "trained from random initialisation on a CPU ({sizes}), not guards anyone "
               "deploys; the numbers show what the diagnostics report, not what a real guard "
               "does.")


def demo_banner(ctx: ReportContext) -> tuple[Block, ...]:
    """The demo-size banner, where any branch size is a demo size; else nothing."""
    prov = ctx.get(PROVENANCE)
    if prov is None or not prov.demo:
        return ()
    demo = [r["size"] for r in prov.table.iter_rows(named=True) if r["demo_size"]]
    return (Paragraph(DEMO_BANNER.format(sizes=", ".join(demo)), banner=True),)


def provenance_blocks(ctx: ReportContext, *, caution: str | None = None,
                      banner: bool = True) -> tuple[Block, ...]:
    """The cautions first — the banner (demo sizes only; ``banner=False`` leaves it to the
    first screen), then ``caution`` (the competence gate's, when the branches detect too little
    harm) — then one paragraph on what the branches are."""
    prov = ctx.get(PROVENANCE)
    blocks: list[Block] = list(demo_banner(ctx)) if banner else []
    if caution:
        blocks.append(Paragraph(caution))
    if prov is None:
        return (*blocks, Paragraph("What was measured: no run meta.json was found beside the "
                                   "predictions, so the branches' sizes, parameter counts and "
                                   "checkpoints are not known to this report."))
    blocks.append(Paragraph(f"What was measured: {prov.sentence}. Sizes, parameter counts, "
                            "checkpoints and training rows are read from each run's "
                            "meta.json; a demo size is one the size registry lists as a CPU "
                            "size (guarddiag/model/sizes.py) with no pretrained checkpoint."))
    return tuple(blocks)


def provenance_payload(ctx: ReportContext) -> dict[str, Any] | None:
    prov = ctx.get(PROVENANCE)
    if prov is None:
        return None
    return payload_of(prov)
