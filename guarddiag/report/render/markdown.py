"""The Markdown rendering of the report (figures linked from figures/)."""

from __future__ import annotations

import html
from typing import Any

from guarddiag.report.document import (
    Bullets,
    Definitions,
    Examples,
    FigureBlock,
    Paragraph,
    Report,
    Table,
)
from guarddiag.report.glossary import anchor
from guarddiag.report.render.cells import linked_prose, table_cells, table_parts


def _md_esc(text: Any) -> str:
    # HTML-escape too: Markdown renderers pass raw HTML through.
    s = html.escape(str(text), quote=False)
    for ch in ("\\", "|", "*", "_", "`", "[", "]"):
        s = s.replace(ch, "\\" + ch)
    return " ".join(s.split())


def _md_table(table: Table, caption: str | None = None) -> str:
    headers, rows = table_cells(table)
    lines = [f"*{_md_esc(table.caption) if caption is None else caption}*", "",
             "| " + " | ".join(_md_esc(h) or " " for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    for cells in rows:
        lines.append("| " + " | ".join(f"**{_md_esc(t)}**" if b else _md_esc(t)
                                       for t, b in cells) + " |")
    return "\n".join(lines)


def _linked(report: Report) -> dict[tuple[int, int, int], str]:
    return linked_prose(report, _md_esc, lambda shown, a: f"[{shown}](#{a})")


def render_markdown(report: Report) -> str:
    linked = _linked(report)
    out = [f"# {_md_esc(report.title)}", ""]
    for n in report.notes:
        out.append(f"- {_md_esc(n)}")
    if report.notes:
        out.append("")
    for i, s in enumerate(report.sections):
        out += [f"## {_md_esc(s.title)}", ""]
        if s.omitted is not None:
            out += [f"*Omitted: {_md_esc(s.omitted)}.*", ""]
            continue
        for j, b in enumerate(s.blocks):
            if isinstance(b, Paragraph):
                text = linked[i, j, 0]
                out.append(f"> **{text}**" if b.banner else f"**{text}**" if b.cite else text)
            elif isinstance(b, Bullets):
                out += [f"- {linked[i, j, k]}" for k in range(len(b.items))]
            elif isinstance(b, Definitions):
                out += [f'- <a id="{anchor(t)}"></a>**{_md_esc(t)}**: {_md_esc(d)}'
                        for t, d in b.items]
            elif isinstance(b, Table):
                if b.folded or b.csv_only:
                    caption = linked.get((i, j, 0)) or _md_esc(b.caption)
                    out.append(f"*{caption}* — see [tables/{b.name}.csv]"
                               f"(tables/{b.name}.csv) ({b.frame.height} rows).")
                else:
                    shown = table_parts(b)
                    out.append(_md_table(b, linked[i, j, 0]) if len(shown) == 1 else
                               "\n\n".join(_md_table(t) for t in shown))
            elif isinstance(b, FigureBlock):
                out.append(f"![{_md_esc(b.caption)}](figures/{b.name}.png)")
            elif isinstance(b, Examples):
                out.append(f"*{_md_esc(b.caption)}*")
                for label, text in b.items:
                    out += ["", _md_esc(label), "", "```text",
                            str(text).replace("```", "ʼʼʼ"), "```"]
            out.append("")
    return "\n".join(out).rstrip() + "\n"
