"""The options of ``report`` and ``predict`` are declared once (ReportOptions, PredictOptions)
and every default that changes a reported number is pinned here: changing one in the model
fails this file. The CLI and the API take the same model, so they cannot drift from it, and the
"(default …)" each --help states is the model's (tests/test_cli_options.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import guarddiag.api
from guarddiag.analyses import load, loadtest, overlap_origin, threshold_free
from guarddiag.analyses.options import ReportOptions
from guarddiag.cli import build_parser, main
from guarddiag.cli.predict import predict_options
from guarddiag.cli.report import report_options
from guarddiag.predict.options import PredictOptions
from guarddiag.protocol import protocol
from guarddiag.spec import SpecError

# The study's settings (SPEC.md): each one changes a number of the report.
REPORT_DEFAULTS = {
    "mapping": "loose",
    "threshold": 0.5,
    "n_resamples": 2000,
    "confidence": 0.95,
    "seed": 0,
    "primary_subset": "decontaminated",
    "min_seeds": 3,
    "alpha": 0.05,
    "equivalence_margin": 0.05,        # ±5 pp: a capability call needs TOST within it
    "competence_floor": 0.80,
    "rank_group": (),                  # empty: the A-last group, read from the runs' roles
    "rank_benchmark": "harmbench_copyright",
    "rank_tail": "top",
    "rank_explicit": False,
    "title": "guarddiag report",
    "out_dir": Path("reports/report"),
    "data_dir": None,
    "derived_dir": None,
}
PREDICT_DEFAULTS = {
    "benchmarks": "all",
    "batch_size": 64,
    "baseline": True,
    "threads": None,
    "device": "auto",
    "data_dir": None,
    "derived_dir": None,
    "out_path": None,
}
PATHS = ("runs_dir", "pool_path", "audit_dir")
FOLDERS = (*PATHS, "data_dir", "derived_dir")
"""Where things are (the shared work-folder and --data-dir flags state their own defaults)."""


def _fields(options: ReportOptions | PredictOptions, names) -> dict:
    return {k: getattr(options, k) for k in names}


def test_report_defaults_are_pinned():
    options = ReportOptions()
    assert _fields(options, REPORT_DEFAULTS) == REPORT_DEFAULTS
    assert set(ReportOptions.model_fields) == set(REPORT_DEFAULTS) | set(PATHS)
    assert (options.runs_dir, options.pool_path, options.audit_dir) == (
        Path("work/runs"), Path("work/pool/pool.parquet"), Path("work/audit"))


def test_the_analyses_fixed_settings_are_pinned():
    """Settings that change reported numbers without being options: the protocol's prompt
    floor, level (of the load, paired and correlation tests) and ranking margin, the load
    test's Monte-Carlo draws, the threshold-free capture, the overlap-origin share."""
    proto = protocol()
    assert (proto.min_prompts, loadtest.NULL_DRAWS, proto.alpha, proto.auroc_margin) == (
        20, 20_000, 0.05, 0.05)
    assert threshold_free.DEFAULT_CAPTURE == 0.95
    assert overlap_origin.RECIPE_SHARE == 0.5
    # The options' study constants are the protocol's (one declaration each).
    defaults = ReportOptions()
    assert (defaults.min_seeds, defaults.threshold, defaults.alpha, defaults.equivalence_margin,
            defaults.competence_floor, defaults.rank_benchmark) == (
        load.DEFAULT_MIN_SEEDS, proto.cutoff, proto.alpha, proto.equivalence_margin,
        proto.competence_floor, proto.rank_benchmark)


def test_predict_defaults_are_pinned():
    options = PredictOptions()
    assert _fields(options, PREDICT_DEFAULTS) == PREDICT_DEFAULTS
    assert set(PredictOptions.model_fields) == set(PREDICT_DEFAULTS) | set(PATHS)


def test_the_command_lines_defaults_are_the_models(tmp_path):
    args = build_parser().parse_args(["report", "--work-dir", str(tmp_path)])
    options = report_options(args)
    assert _fields(options, REPORT_DEFAULTS) == {
        **REPORT_DEFAULTS, "data_dir": options.data_dir, "derived_dir": tmp_path / "derived"}
    assert options.runs_dir == tmp_path / "runs"
    for command in (["predict"], ["sweep"]):
        args = build_parser().parse_args([*command, "--work-dir", str(tmp_path)])
        options = predict_options(args)
        assert _fields(options, PREDICT_DEFAULTS) == {
            **PREDICT_DEFAULTS, "data_dir": options.data_dir,
            "derived_dir": tmp_path / "derived"}
        assert options.pool_path == tmp_path / "pool" / "pool.parquet"


def test_a_flag_reaches_its_field_and_rank_names_become_explicit(tmp_path):
    args = build_parser().parse_args([
        "report", "--threshold", "0.7", "--bootstrap", "50", "--subset", "full",
        "--rank-group", "E2,E3", "--out", str(tmp_path / "o"), "--title", "T"])
    o = report_options(args)
    assert (o.threshold, o.n_resamples, o.primary_subset, o.rank_group, o.rank_explicit,
            o.out_dir, o.title) == (0.7, 50, "full", ("E2", "E3"), True, tmp_path / "o", "T")
    args = build_parser().parse_args(["predict", "--batch-size", "8", "--no-baseline",
                                      "--benchmarks", "study"])
    p = predict_options(args)
    assert (p.batch_size, p.baseline, p.benchmarks) == (8, False, "study")


def test_the_api_takes_the_same_model(monkeypatch, tmp_path):
    seen: list[ReportOptions] = []
    monkeypatch.setattr(guarddiag.api, "make_report", seen.append)
    guarddiag.api.run_report(tmp_path / "runs")
    guarddiag.api.run_report(tmp_path / "runs", out=tmp_path / "o", alpha=0.01,
                             options=ReportOptions(seed=7, pool_path=tmp_path / "p.parquet"))
    plain, chosen = seen
    assert _fields(plain, REPORT_DEFAULTS) == REPORT_DEFAULTS
    assert (plain.runs_dir, plain.pool_path, plain.audit_dir) == (tmp_path / "runs", None, None)
    assert (chosen.seed, chosen.alpha, chosen.out_dir, chosen.pool_path) == (
        7, 0.01, tmp_path / "o", tmp_path / "p.parquet")


def test_bad_options_are_one_line_naming_the_field(tmp_path, capsys):
    with pytest.raises(SpecError) as err:
        guarddiag.api.run_report(tmp_path, threshold="high")
    assert str(err.value).splitlines()[-1].startswith('run_report field "threshold": ')
    with pytest.raises(SpecError, match='run_report field "thresold": unknown key'):
        guarddiag.api.run_report(tmp_path, thresold=0.5)
    assert main(["report", "--runs-dir", str(tmp_path), "--alpha", "1.5"]) == 2
    err_text = capsys.readouterr().err
    assert "--alpha: input should be less than 1, got 1.5" in err_text
