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


def test_a_long_branch_name_leaves_the_rank_plot_its_axes():
    import warnings

    from guarddiag import stats
    from guarddiag.analyses.rank import BranchRankResult, rank_test_at
    from guarddiag.plots import rank_plot

    # A user's branch named with 57 characters: whole, the rotated label took more than the
    # figure's 2.6 inches and matplotlib collapsed the axes (no bars drawn).
    long = "E5-" + "recalibrated-with-anchors-" * 2 + "v2"
    scores = {"E1": 1.0, "E7": 0.9, "E8": 0.8, "E10": 0.7, "E2": 0.0, "E3": 0.1, "E4": 0.2,
              long: 0.3, "E6": 0.4, "E9": 0.5}
    group = ("E1", "E7", "E8", "E10")
    test = rank_test_at("micro", stats.rank_test(scores, group))
    fig = rank_plot(BranchRankResult(benchmark="harmbench_copyright", metric="CAP",
                                     subset="full", mapping="loose", group=group, tail="top",
                                     tests=(test,)))
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    # 20 characters: the first 13, an ellipsis, the last 6; short names whole
    assert labels[test.branches.index(long)] == "E5-recalibrat…ors-v2"
    assert len(long) == 57
    assert labels[:4] == ["E1", "E7", "E8", "E10"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figure_bytes(fig, "png")
