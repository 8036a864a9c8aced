"""The toy analysis's report section (tests/toy_analysis.py): it reads the result by its typed
handle and writes the payload derived from the result's declaration. Importing this module is
the one registration line."""

from __future__ import annotations

from toy_analysis import UNSAFE_SHARE, UnsafeShareResult

from guarddiag.report import Paragraph, ReportContext, Section, register_section
from guarddiag.report.jsonable import payload_of


def section_unsafe_share(ctx: ReportContext) -> Section:
    r = ctx.result(UNSAFE_SHARE)
    return Section("toy_unsafe_share", "Toy: predictions above the threshold",
                   (Paragraph(f"{r.n_above} of {r.n_predictions} predictions"),), payload_of(r))


register_section("toy_unsafe_share", section_unsafe_share, payload=UnsafeShareResult)
