"""Saving figures: the one writer of PNG + PDF files, and the paper style they are drawn in.

:func:`save_figure` writes ``<stem>.png`` and ``<stem>.pdf`` atomically without dates or other
run-dependent metadata, so the same figure gives the same bytes. Its defaults are the report's
paper settings (:data:`PAPER_STYLE` in force while saving, tight bounding box, 150 dpi, all
metadata dropped). The few keyword arguments exist only because some figures were first written
with other settings (the SORRY-Bench command's figures, the audit's overlap chart); passing those
settings keeps their files byte-identical to what earlier versions wrote.

matplotlib is imported inside the functions, so that importing this leaf (which the light SORRY
and audit modules do) does not load it.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from guarddiag.files import atomic_path

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["PAPER_STYLE", "PDF_METADATA", "PNG_DPI", "PNG_METADATA", "figure_bytes",
           "paper_style", "release_figure", "save_figure"]

PAPER_STYLE: Mapping[str, object] = {
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.linewidth": 0.6,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "lines.linewidth": 1.0,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.05,
    "svg.hashsalt": "guarddiag",
    "pdf.fonttype": 42,
}
"""matplotlib rc settings of the report's figures, in force while they are drawn and saved
(ticks are made at draw time, so saving outside the style would change them)."""

PNG_DPI = 150
# No creation dates or library versions: same figure, same bytes.
PNG_METADATA: Mapping[str, str | None] = {"Software": None}
PDF_METADATA: Mapping[str, str | None] = {"Creator": None, "Producer": None,
                                          "CreationDate": None, "ModDate": None}


@contextmanager
def paper_style(style: Mapping[str, object] | None = PAPER_STYLE) -> Iterator[None]:
    """Put ``style`` in force (matplotlib rc settings) for the block; ``None`` changes nothing."""
    if style is None:
        yield
        return
    from matplotlib import rc_context

    # rc_context's stub wants literal rc keys; the style is checked by matplotlib at run time.
    with rc_context(cast(Any, dict(style))):
        yield


def figure_bytes(fig: Figure, fmt: str, *, dpi: int | None = PNG_DPI,
                 style: Mapping[str, object] | None = PAPER_STYLE,
                 bbox_inches: str | None = None, settle: bool = True,
                 metadata: Mapping[str, str | None] | None = None) -> bytes:
    """One rendering of ``fig`` as ``fmt`` (``"png"`` or ``"pdf"``); the arguments are those of
    :func:`save_figure` for one format (``dpi=None`` leaves matplotlib's default)."""
    with paper_style(style):
        if settle:
            # Constrained layout (and colorbars) move a little between the first and second
            # draw; one draw before saving makes every save give the same bytes, PNG or PDF first.
            fig.draw_without_rendering()
        buf = io.BytesIO()
        extra: dict[str, Any] = {} if dpi is None else {"dpi": dpi}
        if bbox_inches is not None:
            extra["bbox_inches"] = bbox_inches
        fig.savefig(buf, format=fmt,
                    metadata=None if metadata is None else dict(metadata), **extra)
    return buf.getvalue()


def save_figure(fig: Figure, stem: str | Path, *, dpi: int = PNG_DPI,
                style: Mapping[str, object] | None = PAPER_STYLE,
                bbox_inches: str | None = None, settle: bool = True,
                png_metadata: Mapping[str, str | None] | None = PNG_METADATA,
                pdf_metadata: Mapping[str, str | None] | None = PDF_METADATA
                ) -> tuple[Path, Path]:
    """Write ``<stem>.png`` and ``<stem>.pdf`` atomically (the suffix is appended to the stem's
    name); returns both paths. The PNG is rendered first, then the PDF.

    Args:
        fig: the figure; it is not closed.
        stem: the path without suffix.
        dpi: resolution of the PNG (the PDF keeps matplotlib's default).
        style: rc settings in force while saving; ``None`` saves under the current settings
            (matplotlib's defaults unless a caller changed them).
        bbox_inches: ``"tight"`` to crop; ``None`` leaves it to the rc setting ``savefig.bbox``
            (tight in :data:`PAPER_STYLE`, none in matplotlib's defaults).
        settle: draw once before each save (see :func:`figure_bytes`); needed for constrained
            layout, off for figures first written without it.
        png_metadata, pdf_metadata: the files' metadata; ``None`` writes matplotlib's own (which
            names its version, so the bytes change with it).
    """
    stem = Path(stem)
    png = figure_bytes(fig, "png", dpi=dpi, style=style, bbox_inches=bbox_inches, settle=settle,
                       metadata=png_metadata)
    pdf = figure_bytes(fig, "pdf", dpi=None, style=style, bbox_inches=bbox_inches,
                       settle=settle, metadata=pdf_metadata)
    out: list[Path] = []
    for suffix, data in ((".png", png), (".pdf", pdf)):
        path = stem.with_name(stem.name + suffix)
        with atomic_path(path) as tmp:
            tmp.write_bytes(data)
        out.append(path)
    return out[0], out[1]


def release_figure(fig: Figure) -> None:
    """Drop ``fig`` from pyplot's registry once it is saved (the object stays usable), so a long
    process (the test run, the demo) does not keep every figure it ever drew."""
    import matplotlib.pyplot as plt

    plt.close(fig)
