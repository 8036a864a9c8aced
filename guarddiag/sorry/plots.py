"""Figures of the SORRY-Bench analyses; one function per figure, each returning a Figure.

Callers save them with :func:`save_sorry_figure` (PNG and PDF). matplotlib is imported inside
each function so importing this module stays cheap.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from guarddiag.figures import release_figure, save_figure
from guarddiag.sorry.jaccard import SORRY_BENCH_MEAN_MAX_JACCARD
from guarddiag.sorry.taxonomy import DOMAINS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from guarddiag.sorry.balance import BalanceResult, CategoryBreakdown
    from guarddiag.sorry.jaccard import JaccardProfile
    from guarddiag.sorry.robustness import RobustnessResult

_DOMAIN_COLOURS = {"hate": "#c44e52", "crimes": "#4c72b0", "inappropriate": "#dd8452",
                   "advice": "#55a868"}


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _horizontal() -> dict[str, object]:
    # matplotlib 3.10 replaced boxplot(vert=False) by orientation="horizontal".
    import matplotlib

    major, minor = (int(x) for x in matplotlib.__version__.split(".")[:2])
    return {"orientation": "horizontal"} if (major, minor) >= (3, 10) else {"vert": False}


def save_sorry_figure(fig: Figure, stem: str | Path) -> tuple[Path, Path]:
    """Write ``<stem>.png`` (150 dpi) and ``<stem>.pdf`` atomically; returns both paths.

    :func:`guarddiag.figures.save_figure` with the settings these figures were first written
    with (matplotlib's rc defaults, a tight box with the default padding, no settling draw,
    matplotlib's own PNG metadata, no PDF creation date), so their files keep their bytes.
    The figure is closed afterwards: these commands run inside long processes (tests, the
    demo), where pyplot would otherwise keep every figure alive.
    """
    try:
        return save_figure(fig, stem, style=None, bbox_inches="tight", settle=False,
                           png_metadata=None, pdf_metadata={"CreationDate": None})
    finally:
        release_figure(fig)


def plot_balance(result: BalanceResult) -> Figure:
    """Heat map of each benchmark's pillar shares (untested pillars marked ×) and its domain
    mix as stacked bars."""
    plt = _plt()
    names, pillars, mat = result.pillar_matrix()
    height = max(3.0, 0.32 * len(names) + 1.8)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(15, height),
                                 gridspec_kw={"width_ratios": [4.2, 1.0]})
    from matplotlib.colors import PowerNorm

    shown = np.ma.masked_invalid(mat)
    # A square-root scale: one single-pillar benchmark (copyright = 1.0) would otherwise flatten
    # every other row to the bottom of the colour range.
    im = ax.imshow(shown, aspect="auto", cmap="viridis", norm=PowerNorm(0.5, vmin=0, vmax=1))
    for i, b in enumerate(result.benchmarks):
        for j, p in enumerate(pillars):
            if not b.assessable:
                continue
            if b.pillar_weight[p] <= 1e-12:
                ax.text(j, i, "×", ha="center", va="center", color="#bbbbbb", fontsize=7)
        if not b.assessable:
            why = b.category_note or ""
            # The long note names the file to edit; the figure keeps its first clause.
            ax.text(len(pillars) / 2, i, why.split(":")[0], ha="center", va="center",
                    fontsize=7, color="#777777")
    ax.set_xticks(range(len(pillars)), pillars, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(names)), [
        f"{b.benchmark} (r={b.imbalance_ratio:.0f})" if b.imbalance_ratio else b.benchmark
        for b in result.benchmarks], fontsize=7)
    ax.set_title("Share of mapped prompts per pillar (× = not tested; r = most/least tested)",
                 fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.025, pad=0.01)
    left = np.zeros(len(names))
    for d in DOMAINS:
        vals = np.array([b.domain_weight[d] / max(sum(b.domain_weight.values()), 1e-12)
                         for b in result.benchmarks])
        bx.barh(range(len(names)), vals, left=left, color=_DOMAIN_COLOURS[d], label=d)
        left += vals
    bx.set_ylim(len(names) - 0.5, -0.5)
    bx.set_yticks([])
    bx.set_xlim(0, 1)
    # On top of the bars' axes (the pillar ticks fill the space below): attached, not floating.
    bx.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2,
              frameon=False, title="SORRY-Bench domain mix", title_fontsize=9,
              borderaxespad=0.2)
    fig.tight_layout()
    return fig


def plot_jaccard(profile: JaccardProfile) -> Figure:
    """Box plots of each benchmark's max-Jaccard against the pool and the other benchmarks, with
    SORRY-Bench's reported mean (44.5%) for reference."""
    plt = _plt()
    df = profile.per_prompt
    names = list(dict.fromkeys(df["benchmark"].to_list()))
    panels = [("max_jaccard_other", "against other benchmarks")]
    if profile.pool_rows is not None:
        panels.insert(0, ("max_jaccard_pool", f"against the pool ({profile.pool_rows:,} rows)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels),
                                                      max(3.0, 0.3 * len(names) + 1.5)),
                             squeeze=False, sharey=True)
    for ax, (col, title) in zip(axes[0], panels, strict=True):
        data = [df.filter(df["benchmark"] == b)[col].drop_nulls().to_numpy() for b in names]
        ax.boxplot(data, widths=0.6, showmeans=True, flierprops={"markersize": 2},
                   **_horizontal())
        ax.axvline(SORRY_BENCH_MEAN_MAX_JACCARD, color="#c44e52", linestyle="--", linewidth=1,
                   label="SORRY-Bench mean 0.445")
        ax.set_xlim(0, 1.02)
        ax.set_title(f"Max word-set Jaccard {title}", fontsize=9)
        ax.set_yticks(range(1, len(names) + 1), names, fontsize=7)
        ax.legend(fontsize=7, loc="lower right", frameon=False)
    axes[0][0].invert_yaxis()
    fig.tight_layout()
    return fig


def plot_robustness(result: RobustnessResult) -> Figure:
    """Change in capture per mutation (points) with cluster-bootstrap intervals, one row per
    mutation, one marker per run."""
    plt = _plt()
    rows = result.rows
    muts = list(dict.fromkeys(rows["mutation"].to_list()))
    runs = list(dict.fromkeys(rows["run_id"].to_list()))
    fig, ax = plt.subplots(figsize=(9, max(3.5, 0.45 * len(muts) + 1.5)))
    offsets = np.linspace(-0.3, 0.3, len(runs)) if len(runs) > 1 else [0.0]
    for off, run, style in zip(offsets, runs, _run_styles(runs), strict=True):
        part = rows.filter(rows["run_id"] == run)
        y = [muts.index(m) + off for m in part["mutation"]]
        d = part["delta"].to_numpy() * 100
        err = np.vstack([d - part["delta_low"].to_numpy() * 100,
                         part["delta_high"].to_numpy() * 100 - d])
        ax.errorbar(d, y, xerr=err, markersize=3.5, capsize=2, linewidth=0.8, label=run,
                    **style)
    ax.axvline(0, color="#444444", linewidth=0.8)
    ax.set_yticks(range(len(muts)), muts, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"Δ capture vs base prompts (pp; {result.n_resamples:,} cluster-bootstrap "
                  f"resamples, {result.confidence:.0%})", fontsize=8)
    # Every run named beside the axes: a colour per recipe, a marker per seed, so that no two
    # runs share a style and an outlier can be traced to its run.
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False,
              ncol=1 if len(runs) <= 24 else 2, title="run", title_fontsize=7)
    fig.tight_layout()
    return fig


def _run_styles(runs: list[str]) -> list[dict[str, object]]:
    """A distinct (colour, marker) per run: the colour names the recipe (run id without its
    seed), the marker the seed's rank within the recipe."""
    import matplotlib

    recipes = list(dict.fromkeys(r.rsplit("/seed=", 1)[0] for r in runs))
    cmap = matplotlib.colormaps["tab20"]
    markers = ("o", "s", "^", "D", "v", "P", "X", "*")
    seen: dict[str, int] = {}
    out: list[dict[str, object]] = []
    for r in runs:
        recipe = r.rsplit("/seed=", 1)[0]
        k = seen.get(recipe, 0)
        seen[recipe] = k + 1
        i = recipes.index(recipe)
        out.append({"color": cmap(i % 20), "fmt": markers[(k + i // 20) % len(markers)]})
    return out


def plot_category_capture(breakdown: CategoryBreakdown, *, benchmark: str = "sorrybench"
                          ) -> Figure:
    """Heat map of capture per category (rows) and run (columns) for one benchmark."""
    plt = _plt()
    df = breakdown.by_category.filter(breakdown.by_category["benchmark"] == benchmark)
    cats = list(dict.fromkeys(df.sort("category")["category"].to_list()))
    if benchmark.split("__")[0] == "sorrybench":
        cats.sort(key=lambda c: int(str(c).split(".")[0]) if str(c)[:1].isdigit() else 10**6)
    runs = sorted(set(df["run_id"].to_list()))
    mat = np.full((len(cats), len(runs)), np.nan)
    for r in df.iter_rows(named=True):
        mat[cats.index(r["category"]), runs.index(r["run_id"])] = r["capture"]
    # Long category names wrap onto a second line instead of being cut.
    labels = [textwrap.fill(str(c), 40, break_long_words=False) for c in cats]
    row = 0.3 if any("\n" in x for x in labels) else 0.22
    fig, ax = plt.subplots(figsize=(max(4.0, 0.45 * len(runs) + 4), row * len(cats) + 1.5))
    im = ax.imshow(np.ma.masked_invalid(mat), aspect="auto", cmap="magma", vmin=0, vmax=1)
    ax.set_yticks(range(len(cats)), labels, fontsize=6)
    ax.set_xticks(range(len(runs)), runs, rotation=60, ha="right", fontsize=6)
    ax.set_title(f"Capture per category on {benchmark} ({breakdown.mapping} mapping)",
                 fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.03, pad=0.01)
    fig.tight_layout()
    return fig
