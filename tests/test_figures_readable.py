"""Every figure of a report can be read (issue 17): no tick label cut short, and every axes that
draws more than one series has a legend attached to it.

The figures are those the report's section builders make (:class:`FigureBlock`), checked on
their drawn layout:

- a categorical tick label may wrap onto several lines, but unwrapped it is never a source
  name (benchmark, run, recipe, category, pillar, mutation) cut mid-word and never holds "…";
- an axes with more than one data series (bar groups, error-bar groups, plotted lines; not
  reference lines such as ``axvline``) carries a legend whose box touches the axes' box.

``GUARDDIAG_FIGURE_WORK=<work folder>`` also checks every figure of the report on that folder
(e.g. the demo's ``work/``), reading it without writing anything.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.container import Container
from matplotlib.figure import Figure
from synthetic_runs import frame, rows_for, run_meta, study_like

from guarddiag import files
from guarddiag.analyses.inputs import load_inputs
from guarddiag.analyses.options import ReportOptions
from guarddiag.analyses.scored import SCORES
from guarddiag.analyses.sorry import SORRY
from guarddiag.analyses.step import AnalysisResults, analyse
from guarddiag.analyses.tables import RECIPES
from guarddiag.data import load_benchmark
from guarddiag.labels import pillar_ids
from guarddiag.report.build import build_report
from guarddiag.report.context import ReportContext
from guarddiag.report.document import FigureBlock
from guarddiag.report.sections.order import default_sections
from guarddiag.sorry.mutate import _write_subset, mutate_frame
from guarddiag.sorry.taxonomy import sorry_taxonomy

# ─── the checks ────────────────────────────────────────────────────────────────────────────────


def _flatten(item: object) -> Iterable[object]:
    if isinstance(item, (Container, tuple, list)):
        for x in item:
            yield from _flatten(x)
    elif item is not None:
        yield item


def n_series(ax: Axes) -> int:
    """Data series on ``ax``: each container (bars, error bars) and each line drawn in data
    coordinates that belongs to no container. Reference lines (axvline/axhline, drawn in
    blended coordinates) and connector collections are not series."""
    owned = {id(a) for c in ax.containers for a in _flatten(c)}
    lines = [ln for ln in ax.lines if id(ln) not in owned and ln.get_transform() is ax.transData]
    return len(ax.containers) + len(lines)


def _touches(a, b, tol: float) -> bool:
    return not (a.x1 < b.x0 - tol or b.x1 < a.x0 - tol or a.y1 < b.y0 - tol
                or b.y1 < a.y0 - tol)


def _is_number(text: str) -> bool:
    try:
        float(text.replace("−", "-").replace("%", ""))
    except ValueError:
        return False
    return True


def _cut_from(label: str, source: str) -> bool:
    """``label`` is ``source`` cut mid-word ("xstest_saf" of "xstest_safe"; not "micro/E1"
    of "micro/E1/seed=42", which ends at a separator)."""
    return (len(source) > len(label) and source.startswith(label)
            and label[-1:].isalnum() and source[len(label)].isalnum())


def figure_problems(fig: Figure, sources: set[str], name: str) -> list[str]:
    """Every readability problem of ``fig``, one line each (empty when it reads)."""
    canvas = FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    renderer = canvas.get_renderer()
    out: list[str] = []
    for i, ax in enumerate(fig.axes):
        where = f"{name} axes {i} ({ax.get_title() or ax.get_label()})"
        for t in [*ax.get_xticklabels(), *ax.get_yticklabels()]:
            text = t.get_text()
            flat = " ".join(text.split())
            if not flat or _is_number(flat):
                continue
            if flat.endswith("…") or "…" in flat:
                out.append(f"{where}: tick label {text!r} is cut")
            elif flat not in sources and any(_cut_from(flat, s) for s in sources):
                out.append(f"{where}: tick label {text!r} is a cut source name")
        if n_series(ax) > 1:
            legend = ax.get_legend()
            if legend is None:
                out.append(f"{where}: {n_series(ax)} series and no legend")
                continue
            tol = 0.1 * fig.dpi
            if not _touches(legend.get_window_extent(renderer), ax.get_window_extent(renderer),
                            tol):
                out.append(f"{where}: the legend floats away from its axes")
    return out


def report_figures(results: AnalysisResults, tmp: Path) -> dict[str, Figure]:
    ctx = ReportContext(options=ReportOptions(**{**results.options.__dict__,
                                                 "out_dir": tmp / "unused"}), results=results)
    report = build_report(ctx, sections=default_sections())
    return {b.name: b.figure for s in report.sections for b in s.blocks
            if isinstance(b, FigureBlock)}


def source_names(results: AnalysisResults) -> set[str]:
    names = set(results.benchmarks) | set(pillar_ids())
    names |= set(results[SCORES].table["run_id"].to_list())
    names |= set(results[SCORES].table["branch"].to_list())
    for table in results[RECIPES].values():
        names |= set(table.table["entity"].to_list())
    names |= set(sorry_taxonomy().to_frame()["name"].cast(pl.String).to_list())
    sorry = results[SORRY]
    if sorry is not None and sorry.robustness is not None:
        names |= set(sorry.robustness.rows["mutation"].to_list())
    if sorry is not None and sorry.categories is not None:
        by_category = sorry.categories.breakdown.by_category
        names |= set(by_category["category"].cast(pl.String).to_list())
    return {n for n in names if n}


def assert_readable(results: AnalysisResults, tmp: Path, *, expect: Iterable[str]) -> None:
    figures = report_figures(results, tmp)
    assert set(expect) <= set(figures), sorted(figures)
    sources = source_names(results)
    problems = [p for name, fig in sorted(figures.items())
                for p in figure_problems(fig, sources, name)]
    assert problems == []


# ─── the checks catch what they should ────────────────────────────────────────────────────────

def test_the_checks_catch_a_cut_label_and_a_missing_or_floating_legend():
    fig = Figure()
    ax = fig.add_subplot()
    ax.bar([0, 1], [1, 2], label="a")
    ax.bar([0, 1], [2, 1], label="b")
    ax.set_xticks([0, 1], ["openai_moderation_flagg…", "xstest_saf"])
    problems = figure_problems(fig, {"openai_moderation_flagged", "xstest_safe"}, "f")
    assert len(problems) == 3  # the "…" label, the prefix label, no legend
    ax.set_xticks([0, 1], ["openai_moderation_\nflagged", "xstest_safe"])
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3))
    assert [p.split(": ")[1] for p in figure_problems(fig, {"xstest_safe"}, "f")] == [
        "the legend floats away from its axes"]
    ax.legend(loc="upper right")
    assert figure_problems(fig, {"openai_moderation_flagged", "xstest_safe"}, "f") == []


def test_a_reference_line_is_not_a_series():
    fig = Figure()
    ax = fig.add_subplot()
    ax.errorbar([1.0], [0.0], xerr=[[0.5], [0.5]], fmt="o")
    ax.axvline(0)
    assert n_series(ax) == 1
    ax.plot([0, 1], [0, 1])
    assert n_series(ax) == 2


# ─── every figure of a report ─────────────────────────────────────────────────────────────────

def _analyse(runs: Path, *, pool: Path | None = None, audit: Path | None = None,
             data_dir: Path | None = None, derived: Path | None = None) -> AnalysisResults:
    opts = ReportOptions(runs_dir=runs, pool_path=pool, audit_dir=audit, n_resamples=50,
                         data_dir=data_dir, derived_dir=derived)
    return analyse(load_inputs(opts), opts)


def test_every_figure_of_a_study_report_reads(tmp_path):
    preds, pool, summary = study_like(seed=3)
    work = tmp_path / "work"
    files.write_parquet(preds.filter(pl.col("guard_kind") != "outside"),
                        work / "runs" / "predictions.parquet")
    files.write_parquet(preds.filter(pl.col("guard_kind") == "outside"),
                        work / "runs" / "outside" / "toyguard.parquet")
    files.write_parquet(pool, work / "pool" / "pool.parquet")
    files.write_json(summary, work / "audit" / "summary.json")
    results = _analyse(work / "runs", pool=work / "pool" / "pool.parquet",
                       audit=work / "audit")
    assert_readable(results, tmp_path, expect=(
        "heatmap_decontaminated_loose", "span_floor_decontaminated_loose", "overlap",
        "rank_test", "mapping_effect_orbench_hard"))


@pytest.mark.realdata
def test_every_sorry_figure_reads_with_many_runs(real_data_dir, tmp_path, monkeypatch):
    """14 runs: more than the 12 the robustness figure used to name, and more than a colour
    cycle holds; SORRY-Bench's long category names must wrap, not be cut."""
    monkeypatch.chdir(tmp_path)
    derived = tmp_path / "work" / "derived"
    base = load_benchmark("sorrybench", data_dir=real_data_dir)
    caesar = mutate_frame(base, "caesar").frame
    _write_subset(caesar, subset_id="sorrybench__caesar", base="sorrybench", mutation="caesar",
                  kind="harmful", title="t", derived_dir=derived, notes="n")
    ids = base["prompt_id"].to_list()
    rng = np.random.default_rng(0)
    rows = []
    for k, branch in enumerate(["reference", *(f"E{i}" for i in range(1, 11))]):
        for seed in (42, 43) if k < 3 else (42,):
            meta = run_meta("micro", branch, seed)
            rows += rows_for(meta, "sorrybench", rng.random(450).round(2).tolist(), ids=ids)
            rows += rows_for(meta, "sorrybench__caesar", (rng.random(450) * 0.6).round(2)
                             .tolist(), ids=ids)
    files.write_parquet(frame(rows), tmp_path / "work" / "runs" / "predictions.parquet")
    results = _analyse(tmp_path / "work" / "runs", data_dir=real_data_dir, derived=derived)
    assert results[SORRY] is not None
    assert results[SORRY].robustness is not None
    assert results[SORRY].robustness.rows["run_id"].n_unique() == 14
    assert_readable(results, tmp_path,
                    expect=("sorry_categories", "sorry_robustness", "sorry_balance"))


def test_every_figure_of_a_saved_work_folder_reads(tmp_path):
    work = os.environ.get("GUARDDIAG_FIGURE_WORK")
    if not work:
        pytest.skip("set GUARDDIAG_FIGURE_WORK to a work folder (e.g. the demo's) to check it")
    work_dir = Path(work)
    results = _analyse(work_dir / "runs", pool=work_dir / "pool" / "pool.parquet",
                       audit=work_dir / "audit", derived=work_dir / "derived")
    assert_readable(results, tmp_path, expect=("heatmap_decontaminated_loose",))
