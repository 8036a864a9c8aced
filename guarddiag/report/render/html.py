"""The self-contained HTML page: figures as data: URIs, inline CSS, no scripts, no external
resources, a Content-Security-Policy that forbids both, every string from the inputs escaped."""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping
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

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:1100px;
margin:2em auto;padding:0 1em;color:#1a1a1a;line-height:1.45}
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ccc;padding-bottom:.2em;
margin-top:2em}
table{border-collapse:collapse;font-size:.82em;margin:.6em 0 1.2em;display:block;
overflow-x:auto}
caption{caption-side:top;text-align:left;font-style:italic;padding:.3em 0}
th,td{padding:.25em .6em;text-align:right;white-space:nowrap}
th.t,td.t{text-align:left}caption{white-space:normal;max-width:60em}
thead th{border-top:2px solid #333;border-bottom:1px solid #333}
tbody tr:last-child td{border-bottom:2px solid #333}
figure{margin:1em 0}figure img{max-width:100%;height:auto}
figcaption{font-size:.85em;font-style:italic}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;padding:.5em;
font-size:.8em;border-left:3px solid #bbb}
.omitted{color:#666;font-style:italic}.notes{color:#555;font-size:.9em}
details summary{cursor:pointer;color:#0645ad}p.ex{font-size:.85em;margin:.4em 0 0}
dt{font-weight:bold}dd{margin:0 0 .3em 1.5em}
p.banner{border:2px solid #b00;background:#fff3f3;padding:.6em .8em;font-weight:bold}
#first_screen table{background:#e8f1fb;font-size:.78em}
#first_screen td,#first_screen th{padding:0 .6em;line-height:1.25}
p.cite{border:2px solid #2a7a2a;background:#eefbea;padding:.5em .8em;font-weight:bold}
"""
FIRST_SCREEN_TABLE_RGB = (0xE8, 0xF1, 0xFB)
"""The first screen's call table background: the headless-browser test finds it on screen."""
CITE_RGB = (0xEE, 0xFB, 0xEA)
"""The background of the sentence saying what a reader may cite."""

# No scripts, no remote anything: images only as data: URIs, styles only inline.
_CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'none'; "
        "object-src 'none'; base-uri 'none'; form-action 'none'")


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _html_table(table: Table, caption: str | None = None) -> str:
    """``caption``: the caption as markup (with glossary links); default: the escaped one."""
    headers, rows = table_cells(table)
    caption = _esc(table.caption) if caption is None else caption
    # Text columns read left-aligned, numbers right-aligned.
    cls = ['' if c.fmt != "text" else ' class="t"' for c in table.columns]
    out = [f'<table id="{_esc(table.name)}"><caption>{caption}</caption><thead>'
           "<tr>" + "".join(f"<th{k}>{_esc(h)}</th>" for h, k in zip(headers, cls, strict=True))
           + "</tr></thead><tbody>"]
    for cells in rows:
        out.append("<tr>" + "".join(
            f"<td{k}><strong>{_esc(t)}</strong></td>" if b else f"<td{k}>{_esc(t)}</td>"
            for (t, b), k in zip(cells, cls, strict=True)) + "</tr>")
    out.append("</tbody></table>")
    body = "".join(out)
    if table.folded:
        return (f"<details><summary>{caption} ({len(rows)} rows)</summary>"
                f"{body}</details>")
    return body


def _linked(report: Report) -> dict[tuple[int, int, int], str]:
    return linked_prose(report, _esc, lambda shown, a: f'<a href="#{a}">{shown}</a>')


def render_html(report: Report, figures_png: Mapping[str, bytes]) -> str:
    linked = _linked(report)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{_esc(report.title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{_esc(report.title)}</h1>"]
    front = ['<ul class="notes">' + "".join(f"<li>{_esc(n)}</li>" for n in report.notes)
             + "</ul>"] if report.notes else []
    front.append("<nav><ol>" + "".join(f'<li><a href="#{_esc(s.id)}">{_esc(s.title)}</a></li>'
                                       for s in report.sections) + "</ol></nav>")
    # The first screen answers the question; the notes and the contents come after it.
    if not report.sections or report.sections[0].id != "first_screen":
        parts += front
        front = []
    for i, s in enumerate(report.sections):
        if front and s is not report.sections[0]:
            parts += front
            front = []
        parts.append(f'<section id="{_esc(s.id)}"><h2>{_esc(s.title)}</h2>')
        if s.omitted is not None:
            parts.append(f'<p class="omitted">Omitted: {_esc(s.omitted)}.</p></section>')
            continue
        for j, b in enumerate(s.blocks):
            if isinstance(b, Paragraph):
                cls = ' class="banner"' if b.banner else ' class="cite"' if b.cite else ""
                parts.append(f"<p{cls}>{linked[i, j, 0]}</p>")
            elif isinstance(b, Bullets):
                parts.append("<ul>" + "".join(f"<li>{linked[i, j, k]}</li>"
                                              for k in range(len(b.items))) + "</ul>")
            elif isinstance(b, Definitions):
                parts.append("<dl>" + "".join(f'<dt id="{anchor(t)}">{_esc(t)}</dt>'
                                              f"<dd>{_esc(d)}</dd>" for t, d in b.items)
                             + "</dl>")
            elif isinstance(b, Table) and b.csv_only:
                caption = linked.get((i, j, 0)) or _esc(b.caption)
                parts.append(f"<p><em>{caption}</em> See tables/{_esc(b.name)}.csv "
                             f"({b.frame.height:,} rows).</p>")
            elif isinstance(b, Table):
                shown = table_parts(b)
                parts += ([_html_table(b, linked[i, j, 0])] if len(shown) == 1
                          else [_html_table(t) for t in shown])
            elif isinstance(b, FigureBlock):
                data = base64.b64encode(figures_png[b.name]).decode("ascii")
                parts.append(f'<figure><img alt="{_esc(b.caption)}" '
                             f'src="data:image/png;base64,{data}"><figcaption>'
                             f"{_esc(b.caption)}</figcaption></figure>")
            elif isinstance(b, Examples):
                # Folded: real audits hold many long examples; a reader opens the ones wanted.
                parts.append(f"<details><summary>{_esc(b.caption)}</summary>" + "".join(
                    f'<p class="ex">{_esc(label)}</p><pre>{_esc(text)}</pre>'
                    for label, text in b.items) + "</details>")
        parts.append("</section>")
    parts += front
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
