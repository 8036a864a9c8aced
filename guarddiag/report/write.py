"""Writing a built report: every output file, and the result the CLI prints."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from guarddiag import files
from guarddiag.analyses.calls import CALLS
from guarddiag.errors import GuarddiagError
from guarddiag.figures import release_figure, save_figure
from guarddiag.report.document import FigureBlock, Report, Table
from guarddiag.report.render.html import render_html
from guarddiag.report.render.markdown import render_markdown
from guarddiag.report.render.tables import render_csv, render_latex


@dataclass(frozen=True)
class ReportResult:
    out_dir: Path
    files: tuple[Path, ...]
    sections: tuple[tuple[str, str | None], ...]
    """(section id, omitted note or None)."""
    results: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """The content of results.json."""

    def headline(self) -> list[str]:
        """A few lines for the terminal: the first screen's calls (stable ones marked) and the
        rank test."""
        res = self.results.get("results", {})
        lines = []
        first = res.get("first_screen") or {}
        by_call: dict[str, list[str]] = {}
        for r in first.get("calls", []):
            mark = " (stable)" if r["stable"] == "yes" else ""
            by_call.setdefault(r["call"], []).append(r["benchmark"] + mark)
        order = {c: i for i, c in enumerate(CALLS)}
        for call in sorted(by_call, key=lambda c: (min((i for w, i in order.items()
                                                        if c.startswith(w)), default=99), c)):
            lines.append(f"{call}: {', '.join(by_call[call])}")
        if first.get("source") == "none":
            lines.append("no A/B call: the report has no policy-neutral rows (give it the pool)")
        for t in (res.get("rank") or {}).get("tests", []):
            lines.append(f"rank test {{{', '.join(t['group'])}}} on "
                         f"{res['rank']['benchmark']} ({t['size']}): p = "
                         f"{t['p_value']['exact']} ({t['p_value']['value']:.4g}, {t['tail']})")
        return lines

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: where the report went, its files, its sections and results.json."""
        return {"out_dir": str(self.out_dir), "files": [str(p) for p in self.files],
                "sections": [{"section": s, "omitted": n} for s, n in self.sections],
                "results": dict(self.results)}

    def to_frame(self) -> pl.DataFrame:
        """One row per section: its id and, when omitted, why."""
        return pl.DataFrame({"section": [s for s, _ in self.sections],
                             "omitted": [n for _, n in self.sections]},
                            schema={"section": pl.String, "omitted": pl.String})


def write_report(report: Report, out_dir: str | Path, *,
                 inputs: Mapping[str, str] | None = None) -> ReportResult:
    """Write every output file (see the module docstring); stale tables/figures of an earlier
    report in the same folder are removed so the folder always matches results.json."""
    out_dir = Path(out_dir)
    written: list[Path] = []
    pngs: dict[str, bytes] = {}
    names: set[tuple[str, str]] = set()
    for s in report.sections:
        for b in s.blocks:
            if isinstance(b, (Table, FigureBlock)):
                kind = "table" if isinstance(b, Table) else "figure"
                if (kind, b.name) in names:
                    raise GuarddiagError(f"report: two {kind}s are named {b.name!r}")
                names.add((kind, b.name))
            if isinstance(b, Table):
                written.append(files.write_text(render_csv(b), out_dir / "tables" /
                                                f"{b.name}.csv"))
                if not b.csv_only:
                    written.append(files.write_text(render_latex(b), out_dir / "tables" /
                                                    f"{b.name}.tex"))
            elif isinstance(b, FigureBlock):
                png, pdf = save_figure(b.figure, out_dir / "figures" / b.name)
                release_figure(b.figure)
                pngs[b.name] = png.read_bytes()
                written += [png, pdf]
    for sub, suffixes in (("tables", (".csv", ".tex")), ("figures", (".png", ".pdf"))):
        folder = out_dir / sub
        if folder.is_dir():
            for f in sorted(folder.iterdir()):
                if f.suffix in suffixes and f not in written:
                    f.unlink()
    written.append(files.write_json(report.results, out_dir / "results.json"))
    written.append(files.write_text(render_markdown(report), out_dir / "report.md"))
    written.append(files.write_text(render_html(report, pngs), out_dir / "report.html"))
    written.append(files.write_meta(out_dir, inputs=dict(inputs or {}),
                                    seed=report.results["options"]["seed"], stage="report"))
    return ReportResult(out_dir=out_dir, files=tuple(written),
                        sections=tuple((s.id, s.omitted) for s in report.sections),
                        results=report.results)
