"""Paper-style figures, one function per figure, each returning a matplotlib ``Figure``.

Figures are built with the object-oriented API (``matplotlib.figure.Figure``), never pyplot, so
nothing touches global state or the user's backend, and a figure needs no closing. Numbers come
from the analyses' result objects; these functions only draw them, in the paper style of
:mod:`guarddiag.figures`, whose :func:`~guarddiag.figures.save_figure` writes them.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from guarddiag.analyses.contamination import ContaminationResult
from guarddiag.analyses.load import BenchmarkLoadResult
from guarddiag.analyses.rank import BranchRankResult
from guarddiag.analyses.tables import RecipeTableResult
from guarddiag.figures import paper_style

# Colour-blind-safe pair (Okabe–Ito) for the two series every figure compares.
_BLUE, _ORANGE, _GREY, _GREEN = "#0072B2", "#E69F00", "#999999", "#009E73"
_PURPLE = "#CC79A7"


def _new(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


TICK_CHARS = 20
"""The longest name a rotated tick label shows whole; a longer one keeps its head and tail."""


def _tick(name: str, width: int = TICK_CHARS) -> str:
    """``name``, or its first and last characters around an ellipsis when longer than
    ``width``: a long user-chosen name under a short figure would collapse its axes."""
    if len(name) <= width:
        return name
    tail = (width - 1) // 3
    return f"{name[:width - 1 - tail]}…{name[len(name) - tail:]}"


# Capture columns (harmful benchmarks) and over-refusal columns (benign) of the heatmap.
_HARM_ALIASES = ("CAP", "COPY")
_BENIGN_ALIASES = ("OVER-REF", "OR-H")


# ─── figures ───────────────────────────────────────────────────────────────────────────────────

def overlap_bars(contamination: ContaminationResult) -> Figure:
    """Study Fig. 2a: % of each benchmark's prompts found in the training pool, exact, near and
    (when the audit compared them) template and contained overlap as separate bars, benchmarks
    sorted by exact overlap."""
    t = contamination.table.sort(["share_exact", "benchmark"], descending=[False, True])
    names = t["benchmark"].to_list()

    def pct(col: str) -> np.ndarray:
        return np.array(t[col].fill_null(0).to_list()) * 100

    series = [(pct("share_exact"), _BLUE, "exact (normalised text)")]
    if contamination.near_dup:
        series.append((pct("share_near"), _ORANGE, "near duplicate only"))
    if contamination.templates and "share_template" in t.columns:
        series.append((pct("share_template"), _GREEN,
                       "template only (same sentence, other titles)"))
    if contamination.containment and "share_contained" in t.columns:
        series.append((pct("share_contained"), _PURPLE,
                       "contained only (prompt inside a longer row)"))
    # Two series keep their old places (exact above, near below); more share the row, top down.
    height = 0.4 if len(series) <= 2 else 0.8 / len(series)
    shift = ([0.2, -0.2][:len(series)] if len(series) <= 2 else
             [height * ((len(series) - 1) / 2 - i) for i in range(len(series))])
    with paper_style():
        fig = _new(5.0, 0.28 * len(names) * max(1.0, len(series) / 2) + 1.0)
        ax = fig.add_subplot()
        y = np.arange(len(names))
        for (values, color, label), dy in zip(series, shift, strict=True):
            ax.barh(y + dy, values, height=height, color=color, label=label)
        exact = series[0][0]
        for yi, v, n in zip(y, exact, t["n_exact"].to_list(), strict=True):
            ax.text(v + 1, yi + shift[0], f"{v:.1f}% ({n})", va="center", fontsize=6)
        ax.set_yticks(y, names)
        ax.set_xlim(0, 110)
        ax.set_xlabel("benchmark prompts also in the training pool (%)")
        pool = f" ({contamination.pool_rows:,} pool rows)" if contamination.pool_rows else ""
        ax.set_title(f"Training-pool overlap per benchmark{pool}")
        ax.legend(loc="lower right", frameon=False)
    return fig


def score_heatmap(recipes: RecipeTableResult) -> Figure:
    """Study Table 1 as a heatmap: recipe/guard × benchmark, cell = % read unsafe, in two
    panels — capture on the harmful benchmarks (higher = more harm caught) and over-refusal on
    the benign ones (higher = more safe prompts refused) — each with its own colour scale."""
    t = recipes.table
    entities = list(dict.fromkeys(t["entity"].to_list()))
    panels = [(title, cmap, label, sorted(set(t.filter(pl.col("metric_alias").is_in(aliases))
                                              ["benchmark"].to_list())))
              for title, cmap, label, aliases in (
                  ("Capture (harmful benchmarks): higher = more harm caught", "viridis",
                   "% captured", _HARM_ALIASES),
                  ("Over-refusal (benign benchmarks): higher = more safe prompts refused",
                   "magma", "% over-refused", _BENIGN_ALIASES))]
    panels = [p for p in panels if p[3]]
    widths = [max(len(p[3]), 2) for p in panels]
    with paper_style():
        fig = _new(0.55 * sum(widths) + 3.0 * len(panels), 0.22 * len(entities) + 2.2)
        axes = fig.subplots(1, len(panels), squeeze=False,
                            gridspec_kw={"width_ratios": widths})[0]
        for ax, (title, cmap, label, benches) in zip(axes, panels, strict=True):
            _heat_panel(fig, ax, t, entities, benches, cmap=cmap, label=label)
            ax.set_title(title, fontsize=8)
        fig.suptitle(f"Share read unsafe — {recipes.subset} prompts, {recipes.mapping} mapping",
                     fontsize=9)
    return fig


def _heat_panel(fig: Figure, ax: Axes, t: pl.DataFrame, entities: list[str],
                benches: list[str], *, cmap: str, label: str) -> None:
    grid = np.full((len(entities), len(benches)), np.nan)
    for r in t.filter(pl.col("benchmark").is_in(benches)).iter_rows(named=True):
        grid[entities.index(r["entity"]), benches.index(r["benchmark"])] = r["score"] * 100
    im = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=100, aspect="auto")
    for i in range(len(entities)):
        for j in range(len(benches)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", fontsize=5.5,
                        color="white" if grid[i, j] < 60 else "black")
    ax.set_xticks(range(len(benches)), benches, rotation=45, ha="right")
    ax.set_yticks(range(len(entities)), entities)
    ax.spines[:].set_visible(False)
    fig.colorbar(im, ax=ax, label=label, shrink=0.8)


def span_vs_floor(load: BenchmarkLoadResult, *, subset: str, mapping: str,
                  calls: Mapping[str, str]) -> Figure:
    """Study Table 4: Δb beside the seed floor (median dot, widest bar) per benchmark, each
    labelled with its call from ``calls`` (the report's first screen; the span test makes
    none)."""
    t = load.table.filter((pl.col("subset") == subset) & (pl.col("mapping") == mapping)).sort(
        ["delta", "benchmark"], nulls_last=True)
    names = t["benchmark"].to_list()
    delta = np.array(t["delta"].fill_null(np.nan).to_list(), dtype=float) * 100
    widest = np.array(t["floor_widest"].fill_null(np.nan).to_list(), dtype=float) * 100
    median = np.array(t["floor_median"].fill_null(np.nan).to_list(), dtype=float) * 100
    with paper_style():
        fig = _new(6.0, 0.3 * max(len(names), 1) + 1.2)
        ax = fig.add_subplot()
        y = np.arange(len(names))
        ax.barh(y + 0.18, np.nan_to_num(delta), height=0.36, color=_BLUE,
                label="label-supervision span Δb")
        ax.barh(y - 0.18, np.nan_to_num(widest), height=0.36, color=_GREY,
                label="widest seed floor Φb")
        ax.plot(median, y - 0.18, "k|", markersize=6, label="median seed floor")
        for yi, name in zip(y, names, strict=True):
            call = calls.get(name, "no call")
            ax.text(101, float(yi), call, va="center", fontsize=5.5,
                    color=_GREEN if call.startswith(("A flags more", "A flags less"))
                    else "black")
        ax.set_yticks(y, names)
        ax.set_xlim(0, 150)
        ax.set_xlabel("percentage points")
        ax.set_title(f"Δb vs seed floor — {subset} prompts, {mapping} mapping")
        # Inside the axes, over the short bars of the bottom rows (the call labels sit at the
        # right edge).
        ax.legend(loc="lower left", bbox_to_anchor=(0.2, 0.0), frameon=True, framealpha=0.9,
                  edgecolor="none")
    return fig


def mapping_effect_plot(by_recipe: pl.DataFrame, *, benchmark: str) -> Figure:
    """Study Table 2: each recipe's or guard's score under the loose and the strict mapping on
    one benchmark (arrows from loose to strict)."""
    t = by_recipe.filter(pl.col("benchmark") == benchmark)
    names = t["entity"].to_list()
    loose = np.array(t["loose"].to_list(), dtype=float) * 100
    strict = np.array(t["strict"].to_list(), dtype=float) * 100
    with paper_style():
        fig = _new(4.6, 0.24 * max(len(names), 1) + 1.2)
        ax = fig.add_subplot()
        y = np.arange(len(names))[::-1]
        ax.hlines(y, loose, strict, color=_GREY, linewidth=1.2)
        ax.plot(loose, y, "o", color=_BLUE, markersize=4, label="loose (BOUNDARY_SAFE → safe)")
        ax.plot(strict, y, "s", color=_ORANGE, markersize=4,
                label="strict (BOUNDARY_SAFE → unsafe)")
        ax.set_yticks(y, names)
        ax.set_xlim(-2, 102)
        ax.set_xlabel("% of prompts read unsafe")
        ax.set_title(f"Binary-mapping effect on {benchmark}")
        ax.legend(loc="best", frameon=True, framealpha=0.9, edgecolor="none")
    return fig


def rank_plot(rank: BranchRankResult) -> Figure:
    """Branches in rank order on the rank-test benchmark, the named group highlighted, with the
    exact p-value per model size (names over :data:`TICK_CHARS` shortened, whole in the
    table beside it)."""
    sizes = rank.tests
    with paper_style():
        fig = _new(2.6 * len(sizes) + 1.0, 2.6)
        axes = fig.subplots(1, len(sizes), squeeze=False)[0]
        for ax, test in zip(axes, sizes, strict=True):
            x = np.arange(test.n)
            colors = [_ORANGE if b in test.group else _BLUE for b in test.branches]
            ax.bar(x, np.array(test.scores) * 100, color=colors)
            ax.set_xticks(x, [_tick(b) for b in test.branches], rotation=60, ha="right")
            ax.set_ylim(0, 105)
            ax.set_ylabel(f"{rank.metric} on {rank.benchmark} (%)")
            p = test.p_value
            ax.set_title(f"{test.size}: p = {p.numerator}/{p.denominator} = {float(p):.2g} "
                         f"({test.tail} tail)", fontsize=8)
        axes[0].legend(handles=[Patch(color=_ORANGE, label="named group"),
                                Patch(color=_BLUE, label="other branches")],
                       loc="upper right", frameon=False)
    return fig
