"""guarddiag.figures.save_figure: the one figure writer gives the same bytes every time, and its
keyword arguments reproduce the settings other figures were first written with byte for byte."""

from __future__ import annotations

import io

from matplotlib.figure import Figure

from guarddiag.figures import figure_bytes, save_figure
from guarddiag.sorry.plots import save_sorry_figure


def _figure(layout: str | None = None) -> Figure:
    fig = Figure(figsize=(3, 2), layout=layout)
    ax = fig.add_subplot()
    ax.barh([0, 1, 2], [3.0, 1.0, 2.0], label="share")
    ax.set_title("Share read unsafe ≥ 0.5")
    ax.legend()
    return fig


def _savefig(fig: Figure, fmt: str, **kwargs: object) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, **kwargs)
    return buf.getvalue()


def test_same_figure_same_bytes_and_no_dates(tmp_path):
    png, pdf = save_figure(_figure("constrained"), tmp_path / "a")
    again = save_figure(_figure("constrained"), tmp_path / "b")
    assert (png.name, pdf.name) == ("a.png", "a.pdf")
    assert png.read_bytes() == again[0].read_bytes()
    assert pdf.read_bytes() == again[1].read_bytes()
    assert b"CreationDate" not in pdf.read_bytes()
    assert b"matplotlib" not in png.read_bytes().lower()


def test_the_suffix_is_appended_to_the_stem(tmp_path):
    png, pdf = save_figure(_figure(), tmp_path / "robustness_v1.2")
    assert (png.name, pdf.name) == ("robustness_v1.2.png", "robustness_v1.2.pdf")


def test_sorry_settings_match_their_first_savefig_calls(tmp_path):
    png, pdf = save_sorry_figure(_figure(), tmp_path / "balance")
    assert png.read_bytes() == _savefig(_figure(), "png", bbox_inches="tight", dpi=150,
                                        metadata=None)
    assert pdf.read_bytes() == _savefig(_figure(), "pdf", bbox_inches="tight",
                                        metadata={"CreationDate": None})


def test_audit_settings_match_their_first_savefig_calls(tmp_path):
    png, pdf = save_figure(_figure("constrained"), tmp_path / "overlap", dpi=200, style=None,
                           settle=False)
    assert png.read_bytes() == _savefig(_figure("constrained"), "png", dpi=200,
                                        metadata={"Software": None})
    assert pdf.read_bytes() == _savefig(_figure("constrained"), "pdf", metadata={
        "CreationDate": None, "Creator": None, "Producer": None})


def test_figure_bytes_is_what_save_figure_writes(tmp_path):
    png, _ = save_figure(_figure("constrained"), tmp_path / "x")
    assert figure_bytes(_figure("constrained"), "png",
                        metadata={"Software": None}) == png.read_bytes()
