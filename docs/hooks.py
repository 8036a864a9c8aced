"""MkDocs hook: the glossary page is generated from the report's own glossary
(guarddiag.report.glossary.GLOSSARY), so the site and the report define each term once."""

from __future__ import annotations

from typing import Any

MARKER = "<!-- glossary table -->"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if MARKER not in markdown:
        return markdown
    from guarddiag.report.glossary import GLOSSARY

    rows = [f"| {term} | {text.replace('|', '&#124;')} |" for term, text in GLOSSARY]
    return markdown.replace(MARKER, "\n".join(["| term | meaning |", "|---|---|", *rows]))
