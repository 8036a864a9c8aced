"""The Markdown rendering of the report (figures linked from figures/)."""

from __future__ import annotations

import html
from typing import Any

from guarddiag.report.document import (
    Bullets,
    Examples,
    FigureBlock,
    Paragraph,
    Report,
    Table,
)
from guarddiag.report.render.cells import table_cells, table_parts


def _md_esc(text: Any) -> str:
    # HTML-escape too: Markdown renderers pass raw HTML through.
    s = html.escape(str(text), quote=False)
    for ch in ("\\", "|", "*", "_", "`", "[", "]"):
        s = s.replace(ch, "\\" + ch)
    return " ".join(s.split())


def _md_table(table: Table) -> str:
    headers, rows = table_cells(table)
    lines = [f"*{_md_esc(table.caption)}*", "",
             "| " + " | ".join(_md_esc(h) or " " for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    for cells in rows:
        lines.append("| " + " | ".join(f"**{_md_esc(t)}**" if b else _md_esc(t)
                                       for t, b in cells) + " |")
    return "\n".join(lines)


def render_markdown(report: Report) -> str:
    out = [f"# {_md_esc(report.title)}", ""]
    for n in report.notes:
        out.append(f"- {_md_esc(n)}")
    if report.notes:
        out.append("")
    for s in report.sections:
        out += [f"## {_md_esc(s.title)}", ""]
        if s.omitted is not None:
            out += [f"*Omitted: {_md_esc(s.omitted)}.*", ""]
            continue
        for b in s.blocks:
            if isinstance(b, Paragraph):
                out.append(f"> **{_md_esc(b.text)}**" if b.banner else
                           f"**{_md_esc(b.text)}**" if b.cite else _md_esc(b.text))
            elif isinstance(b, Bullets):
                out += [f"- {_md_esc(x)}" for x in b.items]
            elif isinstance(b, Table):
                if b.collapsed or b.csv_only:
                    out.append(f"*{_md_esc(b.caption)}* — see [tables/{b.name}.csv]"
                               f"(tables/{b.name}.csv) ({b.frame.height} rows).")
                else:
                    out.append("\n\n".join(_md_table(t) for t in table_parts(b)))
            elif isinstance(b, FigureBlock):
                out.append(f"![{_md_esc(b.caption)}](figures/{b.name}.png)")
            elif isinstance(b, Examples):
                out.append(f"*{_md_esc(b.caption)}*")
                for label, text in b.items:
                    out += ["", _md_esc(label), "", "```text",
                            str(text).replace("```", "ʼʼʼ"), "```"]
            out.append("")
    return "\n".join(out).rstrip() + "\n"
