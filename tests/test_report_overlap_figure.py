"""The report's overlap figure shows the template kind beside exact and near overlap."""

from __future__ import annotations

import pytest
from matplotlib.container import BarContainer

from guarddiag import plots
from guarddiag.analyses.contamination import contamination_table


def _summary(*, templates: bool) -> dict:
    # harmbench_copyright: 25 exact, 3 near, 74 template of 100; advbench: 2 / 0 / 10 of 50.
    counts = {"advbench": (50, 2, 0, 10), "harmbench_copyright": (100, 25, 3, 74)}
    benches = {}
    for name, (n, exact, near, template) in counts.items():
        benches[name] = {"n": n, "n_exact": exact, "n_near": near, "n_kept": n - exact}
        if templates:
            benches[name]["n_template"] = template
    return {"benchmarks": benches, "near_dup": True, "templates": templates, "pool_rows": 9}


def _bars(fig) -> dict[str, list[float]]:
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    widths = [[round(p.get_width(), 9) for p in c.patches] for c in ax.containers
              if isinstance(c, BarContainer)]
    return dict(zip(labels, widths, strict=True))


def test_template_bars_beside_exact_and_near():
    fig = plots.overlap_bars(contamination_table(_summary(templates=True)))
    bars = _bars(fig)
    # Rows sorted by exact share, ascending from the bottom: advbench (4%), then copyright (25%).
    assert bars == {"exact (normalised text)": [4.0, 25.0], "near duplicate only": [0.0, 3.0],
                    "template only (same sentence, other titles)": [20.0, 74.0]}
    heights = [p.get_height() for c in fig.axes[0].containers for p in c.patches]
    assert heights == pytest.approx([0.8 / 3] * 6)


def test_without_templates_only_exact_and_near():
    bars = _bars(plots.overlap_bars(contamination_table(_summary(templates=False))))
    assert bars == {"exact (normalised text)": [4.0, 25.0], "near duplicate only": [0.0, 3.0]}


def test_contained_bars_share_the_row_with_the_other_three():
    summary = _summary(templates=True)
    summary["containment"] = True
    # advbench: 5 of 50 contained (10 %); harmbench_copyright: 0 of 100.
    summary["benchmarks"]["advbench"]["n_contained"] = 5
    summary["benchmarks"]["harmbench_copyright"]["n_contained"] = 0
    table = contamination_table(summary)
    assert table.table["share_contained"].to_list() == [0.1, 0.0]
    fig = plots.overlap_bars(table)
    assert _bars(fig) == {
        "exact (normalised text)": [4.0, 25.0], "near duplicate only": [0.0, 3.0],
        "template only (same sentence, other titles)": [20.0, 74.0],
        "contained only (prompt inside a longer row)": [10.0, 0.0]}
    # four bars of 0.2 each, centred on the row: offsets +0.3, +0.1, -0.1, -0.3
    ys = [round(p.get_y() + p.get_height() / 2, 9) for c in fig.axes[0].containers
          for p in c.patches]
    assert ys == pytest.approx([0.3, 1.3, 0.1, 1.1, -0.1, 0.9, -0.3, 0.7])


def test_an_audit_without_containment_has_no_contained_columns():
    table = contamination_table(_summary(templates=True)).table
    assert "n_contained" not in table.columns
    assert "share_contained" not in table.columns
