"""Renderers: a built report (or one table) in, text out; they compute nothing.

Modules: :mod:`~.html` (the self-contained page), :mod:`~.markdown`, :mod:`~.tables` (LaTeX and
CSV of one table) and :mod:`~.cells` (cell formats shared by all three).
"""

from guarddiag.report.render.html import render_html
from guarddiag.report.render.markdown import render_markdown
from guarddiag.report.render.tables import render_csv, render_latex

__all__ = ["render_csv", "render_html", "render_latex", "render_markdown"]
