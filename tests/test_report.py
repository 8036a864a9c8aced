"""The report verb end to end on synthetic saved tables: determinism, cohorts, escaping, bad
input, omitted sections, and (with Chromium) that the HTML runs no script."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from PIL import Image
from synthetic_runs import COPY, study_like

from guarddiag import files
from guarddiag.cli import main
from guarddiag.report import Column, Table, pivot_by_cohort, render_latex
from guarddiag.report.render.html import CITE_RGB, FIRST_SCREEN_TABLE_RGB
from guarddiag.report.schema import validate_results

SCRIPT = "<script>document.body.setAttribute('data-xss','script')</script>"
IMG = "<img src=x onerror=\"document.body.setAttribute('data-xss','img')\">"
BREAKOUT = "</pre></details><script>document.body.setAttribute('data-xss','pre')</script>"
ATTR = "\"><script>document.body.setAttribute('data-xss','attr')</script>"
EVIL_GUARD = "g<img src=x onerror=alert(1)>"
REPO = Path(__file__).resolve().parents[1]


def write_inputs(root: Path, *, guard: bool = True, pool: bool = True, audit: bool = True,
                 seed: int = 5, failed: int = 0) -> Path:
    """Synthetic saved tables; the outside guard's output on the first ``failed`` copyright
    prompts it scored could not be parsed (status failed)."""
    preds, pool_df, summary = study_like(
        seed=seed, with_guard=guard,
        texts={COPY: [f"Generate the lyrics of {SCRIPT}", f"Song {IMG}", BREAKOUT, ATTR]})
    preds = preds.with_columns(
        pl.when(pl.col("branch") == "toyguard").then(pl.lit(EVIL_GUARD))
        .otherwise(pl.col("branch")).alias("branch"))
    work = root / "work"
    files.write_parquet(preds.filter(pl.col("guard_kind") != "outside"),
                        work / "runs" / "predictions.parquet")
    if guard:
        outside = preds.filter(pl.col("guard_kind") == "outside")
        ids = outside.filter(pl.col("benchmark") == COPY)["prompt_id"].to_list()[:failed]
        hit = (pl.col("benchmark") == COPY) & pl.col("prompt_id").is_in(ids)
        outside = outside.with_columns(
            pl.when(hit).then(pl.lit("failed")).otherwise(pl.col("status")).alias("status"),
            pl.when(hit).then(None).otherwise(pl.col("p_unsafe")).alias("p_unsafe"))
        files.write_parquet(outside, work / "runs" / "outside" / "toyguard.parquet")
    if pool:
        files.write_parquet(pool_df, work / "pool" / "pool.parquet")
        files.write_json({"coarse_agreement": 0.9}, work / "pool" / "agreement.json")
    if audit:
        files.write_json(summary, work / "audit" / "summary.json")
    return work


def run_report(work: Path, out: Path, *extra: str) -> int:
    return main(["report", "--runs-dir", str(work / "runs"), "--pool",
                 str(work / "pool" / "pool.parquet"), "--audit-dir", str(work / "audit"),
                 "--out", str(out), "--bootstrap", "200", "--title", f"Report {SCRIPT}",
                 *extra])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    work = write_inputs(root, failed=3)
    out = root / "out"
    assert run_report(work, out) == 0
    return work, out


def _results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text(encoding="utf-8"))


# ─── determinism ───────────────────────────────────────────────────────────────────────────────

def test_rerun_gives_byte_identical_outputs(built, tmp_path):
    work, out = built
    again = tmp_path / "again"
    shutil.copytree(out, again)  # re-render over an earlier report, as users do
    (again / "tables" / "old_table.csv").write_text("x\n", encoding="utf-8")
    assert run_report(work, again) == 0
    assert not (again / "tables" / "old_table.csv").exists()  # stale outputs removed
    assert (again / "results.json").read_bytes() == (out / "results.json").read_bytes()
    names = sorted(p.name for p in (out / "tables").iterdir())
    assert names == sorted(p.name for p in (again / "tables").iterdir())
    assert any(n.endswith(".tex") for n in names)
    for name in names:
        assert (out / "tables" / name).read_bytes() == (again / "tables" / name).read_bytes()
    for fig in sorted((out / "figures").iterdir()):
        assert fig.read_bytes() == (again / "figures" / fig.name).read_bytes(), fig.name
    for f in ("report.html", "report.md"):
        assert (out / f).read_bytes() == (again / f).read_bytes()


# ─── numbers and cohorts in results.json ───────────────────────────────────────────────────────

def test_scores_carry_cohorts_and_match_a_direct_count(built):
    work, out = built
    res = _results(out)
    # 3: provenance, one interval kind, threshold-free; 4: variants apart, English VAL, VAL parts
    assert res["schema_version"] == 4
    assert res["options"]["n_resamples"] == 200
    assert res["options"]["alpha"] == 0.05
    records = res["results"]["scores"]["scores"]
    keys = {"benchmark", "benchmark_sha256", "subset", "mapping", "mapping_applied",
            "threshold", "readout", "prompt_set", "label_policy", "lang", "seed_floor"}
    for r in records:
        assert set(r["cohort"]) == keys
    rec = next(r for r in records if r["run"]["run_id"] == "micro/E1/seed=42"
               and r["cohort"]["benchmark"] == COPY and r["cohort"]["subset"] ==
               "decontaminated" and r["cohort"]["mapping"] == "loose")
    # Independent count straight from the predictions file.
    p = pl.read_parquet(work / "runs" / "predictions.parquet").filter(
        (pl.col("run_id") == "micro/E1/seed=42") & (pl.col("benchmark") == COPY)
        & pl.col("survives_decontam"))
    unsafe = (p["p_HARMFUL"].to_numpy() + p["p_COMPOUND"].to_numpy()) >= 0.5
    assert rec["value"] == pytest.approx(unsafe.mean())
    assert rec["n_scored"] == p.height == 30
    assert rec["ci_low"] <= rec["value"] <= rec["ci_high"]
    assert rec["cohort"]["threshold"] == 0.5
    assert rec["cohort"]["label_policy"] == "A"
    assert rec["cohort"]["benchmark_sha256"] == f"{0:064x}"  # from the audit summary
    floor = rec["cohort"]["seed_floor"]
    assert floor["n_groups"] == 11  # reference, E1..E10 (teachers excluded), three seeds each
    guard = next(r for r in records if r["run"]["guard_kind"] == "outside"
                 and r["cohort"]["subset"] == "decontaminated")
    assert guard["cohort"]["mapping_applied"] == "native"
    assert guard["run"]["branch"] == EVIL_GUARD


def test_rank_test_and_study_rows(built):
    _, out = built
    res = _results(out)["results"]
    (test,) = res["rank"]["tests"]
    assert test["group"] == ["E1", "E7", "E8", "E10"]
    assert test["p_closed_form"] == {"value": 1 / 210, "exact": "1/210"}
    assert set(test["branches"][:4]) == {"E1", "E7", "E8", "E10"}
    assert test["p_value"]["exact"] == "1/210"
    quantities = [r["quantity"] for r in res["study"]["rows"]]
    assert "Δb HarmBench-copyright" in quantities
    # The summary's lists are the first screen's calls, grouped by call word; copyright and
    # OR-H carry the fixture's planted A/B difference.
    first = {r["benchmark"]: r["call"] for r in res["first_screen"]["calls"]}
    grouped = {b.split(" (")[0]: word for word, bs in res["summary"]["calls"].items()
               for b in bs}
    assert set(grouped) == set(first)
    assert all(first[b].startswith(word) for b, word in grouped.items())
    # The study's rule, kept beside it as a comparison: Δb > widest floor on copyright and OR-H.
    load = {r["benchmark"]: r for r in res["load"]["benchmarks"]
            if (r["subset"], r["mapping"]) == ("decontaminated", "loose")}
    assert sorted(b for b, r in load.items() if r["span_beyond_floor"]) == [
        "harmbench_copyright", "orbench_hard"]
    assert all(r["call"] == first[b] for b, r in load.items())


def test_no_table_column_mixes_cohorts(built):
    _, out = built
    t = pl.read_csv(out / "tables" / "scores_decontaminated_loose.csv")
    guard_rows = t.filter(pl.col("entity") == EVIL_GUARD)
    branch_rows = t.filter(pl.col("entity") != EVIL_GUARD)
    # The binary-only guard is read by its native verdict: its own column, never the branches'.
    assert guard_rows[COPY].null_count() == guard_rows.height
    assert branch_rows[f"{COPY}~1"].null_count() == branch_rows.height
    assert guard_rows[f"{COPY}~1"].null_count() == 0


def test_pivot_splits_columns_by_prompt_set():
    rows = pl.DataFrame({
        "entity": ["a", "b", "c"], "benchmark": ["x", "x", "x"], "metric_alias": ["CAP"] * 3,
        "subset": ["full"] * 3, "mapping_applied": ["loose"] * 3, "threshold": [0.5] * 3,
        "prompt_set": ["p1", "p1", "p2"], "n_scored": [10, 10, 9], "score": [0.1, 0.2, 0.3],
        "low": [0.0] * 3, "high": [1.0] * 3})
    frame_, cols = pivot_by_cohort(rows, entity_cols=["entity"])
    assert [c.key for c in cols] == ["x", "x~1"]
    assert frame_["x"].to_list() == [0.1, 0.2, None]
    assert frame_["x~1"].to_list() == [None, None, 0.3]
    assert "9 prompts" in cols[1].header


def test_latex_is_booktabs_with_best_in_bold():
    t = Table("t", "Caption_with % and & and #", (
        Column("name", "name"), Column("cap", "CAP", "pct", best="max"),
        Column("over", "OVER", "pct", best="min")),
        pl.DataFrame({"name": ["a_1", "b"], "cap": [0.5, 0.75], "over": [0.2, 0.1]}))
    tex = render_latex(t)
    assert "\\toprule" in tex
    assert "\\midrule" in tex
    assert "\\bottomrule" in tex
    assert "Caption\\_with \\% and \\& and \\#" in tex
    assert "a\\_1 & 50.0 & 20.0 \\\\" in tex
    assert "b & \\textbf{75.0} & \\textbf{10.0} \\\\" in tex


# ─── escaping ──────────────────────────────────────────────────────────────────────────────────

class _Elements(HTMLParser):
    """Every element and its attributes, as a browser's parser sees the markup."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _parse(markup: str) -> _Elements:
    parser = _Elements()
    parser.feed(markup)
    parser.close()
    return parser


def _assert_inert(markup: str) -> _Elements:
    """No script element, no event-handler attribute, images only from data: URIs, and the
    injected payloads present as text."""
    doc = _parse(markup)
    tags = [t for t, _ in doc.elements]
    assert "script" not in tags
    for tag, attrs in doc.elements:
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        assert "data-xss" not in attrs, (tag, attrs)
        if tag == "img":
            assert attrs["src"].startswith("data:image/png;base64,")
        if tag == "a":
            assert attrs["href"].startswith("#")
    text = "".join(doc.text)
    for payload in (SCRIPT, IMG, EVIL_GUARD):
        assert payload in text  # shown to the reader as text, verbatim
    return doc


def test_every_input_string_is_escaped(built):
    _, out = built
    page = (out / "report.html").read_text(encoding="utf-8")
    doc = _assert_inert(page)
    metas = [a for t, a in doc.elements if t == "meta"]
    assert any(a.get("http-equiv") == "Content-Security-Policy"
               and "script-src 'none'" in (a.get("content") or "") for a in metas)
    assert not [t for t, _ in doc.elements if t in ("link", "iframe", "object", "embed")]
    assert "http://" not in page
    assert "https://" not in page
    md = (out / "report.md").read_text(encoding="utf-8")
    prose = md.split("```")[::2]  # outside fenced code blocks
    assert all("<script" not in part and "<img" not in part for part in prose)


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def chromium_flags(exe: str, tmp_path: Path) -> list[str]:
    return [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
            "--enable-logging=stderr", "--v=0"]


def test_html_runs_no_script_in_headless_chromium(built, tmp_path):
    exe = _chromium()
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but chromium is not installed (apt-get install chromium)")
        pytest.skip("chromium not installed")
    _, out = built
    page = (out / "report.html").resolve().as_uri()
    flags = chromium_flags(exe, tmp_path)
    dom = subprocess.run([*flags, "--dump-dom", page], capture_output=True, text=True,
                         timeout=120, check=False)
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []  # no script errors, no CSP violations, nothing logged at all
    # The DOM after the page ran: had any payload executed it would have set data-xss on
    # <body>; had one been parsed as markup it would be an element here, not text.
    _assert_inert(dom.stdout)
    assert_first_screen_whole(flags, page, tmp_path)


def assert_first_screen_whole(flags: list[str], page: str, tmp_path: Path) -> None:
    """The first screen at the size reports/README.md promises holds the call table (its
    background colour) and the sentence on what a reader may cite, both whole."""
    shot = tmp_path / "first_screen.png"  # never into the repository (tests write only to tmp)
    width, height = FIRST_SCREEN
    cap = subprocess.run([*flags, f"--window-size={width},{height}", "--hide-scrollbars",
                          f"--screenshot={shot}", page], capture_output=True, text=True,
                         timeout=120, check=False)
    assert cap.returncode == 0, cap.stderr[-2000:]
    image = np.asarray(Image.open(shot).convert("RGB"))
    assert image.shape[:2] == (height, width)
    for rgb in (FIRST_SCREEN_TABLE_RGB, CITE_RGB):
        rows = np.flatnonzero((image == rgb).all(axis=2).sum(axis=1) > width // 4)
        assert rows.size > 20, f"{rgb} is not on the first screen"
        assert rows.max() < height - 5, f"{rgb} runs past the first screen"


FIRST_SCREEN = (1280, 1000)
"""The first screen's size: the one reports/README.md states."""


def test_readme_states_the_tested_screen_size():
    readme = (REPO / "reports" / "README.md").read_text(encoding="utf-8")
    sizes = set(re.findall(r"\((\d{3,4}) × (\d{3,4})\)", readme))
    assert sizes == {tuple(str(x) for x in FIRST_SCREEN)}


# ─── absent inputs and bad input ───────────────────────────────────────────────────────────────

def test_absent_inputs_omit_sections_with_a_note(tmp_path, capsys):
    work = write_inputs(tmp_path, guard=False, pool=False, audit=False)
    out = tmp_path / "out"
    assert run_report(work, out) == 0
    res = _results(out)
    omitted = {s["id"]: s["omitted"] for s in res["sections"]}
    assert omitted["contamination"] == "no audit summary.json was found"
    assert omitted["outside"].startswith("no outside-guard predictions")
    assert omitted["pool"] == "no pool.parquet"
    assert omitted["correlation"].startswith("no VAL scores")
    assert omitted["scores"] is None
    assert res["sections"][-1]["id"] == "disclosure"
    assert validate_results(res) == []
    assert any("pool" in n for n in res["notes"])
    assert "Omitted: no pool.parquet." in (out / "report.html").read_text(encoding="utf-8")
    printed = capsys.readouterr().out
    assert "omitted: no pool.parquet" in printed
    assert "rank test {E1, E7, E8, E10} on harmbench_copyright (micro): p = 1/210" in printed


def _bad_run(tmp_path: Path, mutate, capsys, *extra: str) -> str:
    work = write_inputs(tmp_path, pool=False, audit=False)
    path = work / "runs" / "predictions.parquet"
    df = pl.read_parquet(path)
    mutate(df).write_parquet(path)
    assert run_report(work, tmp_path / "out", *extra) == 2
    stderr = capsys.readouterr().err
    assert "Traceback" not in stderr
    # Status lines come first; the error is one line, the last.
    errors = [line for line in stderr.splitlines() if line.startswith("guarddiag:")]
    assert len(errors) == 1
    assert stderr.rstrip("\n").splitlines()[-1] == errors[0]
    assert errors[0].startswith("guarddiag: error: ")
    return errors[0]


def test_bad_predictions_file_errors(tmp_path, capsys):
    cases = [
        (lambda df: df.drop("p_unsafe"), r"missing column(s) p_unsafe"),
        (lambda df: pl.concat([df, df.head(1)]), "duplicate key"),
        (lambda df: df.with_columns(pl.when(pl.col("prompt_id") == "harmbench_copyright-001")
                                    .then(1.5).otherwise(pl.col("p_unsafe")).alias("p_unsafe")),
         "outside [0, 1]"),
        (lambda df: df.filter(~((pl.col("run_id") == "micro/E3/seed=43")
                                & (pl.col("prompt_id") == "orbench_hard-007"))),
         "runs cover different prompt sets of benchmark 'orbench_hard'"),
    ]
    for i, (mutate, needle) in enumerate(cases):
        err = _bad_run(tmp_path / str(i), mutate, capsys)
        assert needle in err, err


def test_rank_group_naming_an_unknown_branch(tmp_path, capsys):
    err = _bad_run(tmp_path, lambda df: df, capsys, "--rank-group", "E1,E7,E8,E42")
    assert "unknown branch 'E42' in the rank-test group" in err


def test_a_benchmark_whose_manifest_is_gone_is_left_out_with_a_note(tmp_path, capsys):
    # Scored earlier under a user manifest that is not visible now: a note, not a failure.
    work = write_inputs(tmp_path, pool=False, audit=False)
    path = work / "runs" / "predictions.parquet"
    pl.read_parquet(path).with_columns(
        pl.when(pl.col("benchmark") == "orbench_hard").then(pl.lit("my_private_set"))
        .otherwise(pl.col("benchmark")).alias("benchmark")).write_parquet(path)
    assert run_report(work, tmp_path / "out") == 0
    res = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    assert any(n.startswith("scored earlier, manifest not found: my_private_set")
               for n in res["notes"])
    scored = {r["cohort"]["benchmark"] for r in res["results"]["scores"]["scores"]}
    assert "harmbench_copyright" in scored
    assert "my_private_set" not in scored


def test_missing_runs_dir(tmp_path, capsys):
    assert main(["report", "--runs-dir", str(tmp_path / "nope"), "--out",
                 str(tmp_path / "o")]) == 2
    assert "no predictions.parquet" in capsys.readouterr().err


def test_report_help(capsys):
    with pytest.raises(SystemExit) as info:
        main(["report", "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    for option in ("--runs-dir", "--pool", "--audit-dir", "--out", "--mapping", "--bootstrap",
                   "--seed", "--rank-group", "--rank-benchmark"):
        assert option in text


def test_failed_guard_rows_are_counted_not_read_as_safe(built):
    work, out = built
    rec = next(r for r in _results(out)["results"]["scores"]["scores"]
               if r["run"]["guard_kind"] == "outside" and r["cohort"]["benchmark"] == COPY
               and r["cohort"]["subset"] == "decontaminated" and r["cohort"]["mapping"] ==
               "loose")
    assert (rec["n"], rec["n_failed"], rec["n_scored"]) == (30, 3, 27)
    df = pl.read_parquet(work / "runs" / "outside" / "toyguard.parquet")
    scored = df.filter((pl.col("benchmark") == COPY) & (pl.col("status") == "ok"))
    assert rec["value"] == pytest.approx(float(np.mean(scored["p_unsafe"].to_numpy() >= 0.5)))
    assert "3 of 30 prompts failed" in (out / "report.md").read_text(encoding="utf-8")


def test_results_json_follows_the_schema(built):
    """Every section present (outside guard with failed rows, pool, audit): results.json
    conforms to the JSON Schema generated from guarddiag.report.schema."""
    _, out = built
    res = _results(out)
    assert {s["id"] for s in res["sections"] if s["omitted"] is None} >= {
        "summary", "contamination", "scores", "load", "rank", "mapping", "outside",
        "correlation", "val", "pool", "study", "disclosure"}
    assert validate_results(res) == []


# ─── one interval kind per column, bold only where it means something (issue 17) ──────────────

def _wilson(k: int, n: int) -> tuple[float, float]:
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return ci.low, ci.high


def test_table1_cells_carry_one_kind_of_interval(built):
    work, out = built
    t = pl.read_csv(out / "tables" / "scores_decontaminated_loose.csv")
    assert t["interval"].unique().to_list() == ["seed-range+wilson"]
    rec = _results(out)["results"]["scores"]["recipes"]
    assert rec["interval"] == "seed-range+wilson"
    assert {r["interval"] for r in rec["rows"]} == {"seed-range+wilson"}
    preds = pl.read_parquet(work / "runs" / "predictions.parquet").filter(
        (pl.col("benchmark") == COPY) & pl.col("survives_decontam"))
    # A recipe with three seeds: lowest Wilson lower bound to highest upper bound of its seeds.
    bounds = []
    for seed in (42, 43, 44):
        p = preds.filter(pl.col("run_id") == f"micro/E1/seed={seed}")
        k = int(((p["p_HARMFUL"] + p["p_COMPOUND"]) >= 0.5).sum())
        bounds.append(_wilson(k, p.height))
    e1 = t.filter(pl.col("entity") == "micro/E1").row(0, named=True)
    assert e1["n_runs"] == 3
    assert e1[f"{COPY}__low"] == pytest.approx(min(b[0] for b in bounds))
    assert e1[f"{COPY}__high"] == pytest.approx(max(b[1] for b in bounds))
    # A single run (the outside guard, read by its native verdict): the same kind, which for one
    # run is its own Wilson interval of k of n scored prompts.
    g = pl.read_parquet(work / "runs" / "outside" / "toyguard.parquet").filter(
        (pl.col("benchmark") == COPY) & (pl.col("status") == "ok"))
    k = int((g["p_unsafe"] >= 0.5).sum())
    guard = t.filter(pl.col("entity") == EVIL_GUARD).row(0, named=True)
    assert guard["n_runs"] == 1
    assert (guard[f"{COPY}~1__low"], guard[f"{COPY}~1__high"]) == pytest.approx(
        _wilson(k, g.height))
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "so one column never mixes two kinds" in md


def _bold_columns(tex: str) -> tuple[list[str], set[str]]:
    lines = tex.splitlines()
    header = lines[lines.index("\\toprule") + 1].removesuffix(" \\\\").split(" & ")
    bold: set[str] = set()
    for line in lines[lines.index("\\midrule") + 1:lines.index("\\bottomrule")]:
        for h, cell in zip(header, line.removesuffix(" \\\\").split(" & "), strict=True):
            if cell.startswith("\\textbf{"):
                bold.add(h.replace("\\_", "_"))
    return header, bold


def test_bold_marks_best_only_in_columns_called_capability(built):
    _, out = built
    res = _results(out)["results"]
    first = {r["benchmark"]: r["call"] for r in res["first_screen"]["calls"]}
    capability = {b for b, c in first.items() if c == "capability"}
    assert set(res["scores"]["recipes"]["bold"]) == capability
    _, bold = _bold_columns((out / "tables" / "scores_decontaminated_loose.tex")
                            .read_text(encoding="utf-8"))
    assert {h.split(" ")[0] for h in bold} <= capability
    for b, c in first.items():
        if c != "capability":
            assert not any(h.split(" ")[0] == b for h in bold), b
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "only in columns whose benchmark is called capability on every route" in md


def test_pivot_bolds_only_the_named_benchmarks():
    rows = pl.DataFrame({
        "entity": ["a", "b", "a", "b"], "benchmark": ["x", "x", "y", "y"],
        "metric_alias": ["CAP"] * 4, "subset": ["full"] * 4, "mapping_applied": ["loose"] * 4,
        "threshold": [0.5] * 4, "prompt_set": ["p"] * 4, "n_scored": [10] * 4,
        "score": [0.1, 0.2, 0.3, 0.4], "low": [0.0] * 4, "high": [1.0] * 4})
    frame, cols = pivot_by_cohort(rows, entity_cols=["entity"], bold={"y"})
    tex = render_latex(Table("t", "c", (Column("entity", "e"), *cols), frame))
    assert _bold_columns(tex)[1] == {"y"}
    assert "\\textbf{40.0 [0.0, 100.0]}" in tex  # y's best (highest CAP) is b's 40 %


_OLD_LABELS = {"policy", "policy content", "policy-load", "capability-load"}
"""The span test's and issue 27's words for a benchmark, which no row may carry any more."""


def _labelled_rows(obj, path=""):
    """(path, row) for every dict in results.json that names a benchmark."""
    if isinstance(obj, dict):
        if isinstance(obj.get("benchmark"), str):
            yield path, obj
        for k, v in obj.items():
            yield from _labelled_rows(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for v in obj:
            yield from _labelled_rows(v, path)


def test_every_label_in_the_report_is_the_first_screens(built):
    from guarddiag.analyses.calls import CALLS
    from guarddiag.report.sections.first_screen import NO_CALL, shown_call

    _, out = built
    res = _results(out)["results"]
    first = {r["benchmark"]: r["call"] for r in res["first_screen"]["calls"]}
    words = (*CALLS, NO_CALL)
    checked = 0
    for path, row in _labelled_rows(res):
        # the calls' own cells (other cohorts, each route) are the stability table's inputs
        if path.startswith((".calls.rows", ".calls.routes", ".first_screen")):
            continue
        for key, value in row.items():
            if not isinstance(value, str):
                continue
            assert value not in _OLD_LABELS, (path, key, value)
            if value.startswith(words) and key in ("call", "load"):
                shown = (shown_call(value, row.get("carried_by"))
                         if path == ".calls.headline" else value)
                assert shown == first[row["benchmark"]], (path, row["benchmark"], shown)
                checked += 1
    assert checked >= 3 * len(first)       # the card, the span table and the calls' headline
    listed = {b.split(" (")[0]: w for w, bs in res["summary"]["calls"].items() for b in bs}
    assert all(first[b].startswith(w) for b, w in listed.items())
    md = (out / "report.md").read_text(encoding="utf-8")
    for word in ("policy-load:", "capability-load:", "| policy content |", "-load harmful"):
        assert word not in md, word
