"""A report a safety lead can read (issue 29): no table wider than twelve columns on screen,
overlap examples capped per benchmark and kind with every example in a CSV, and each table
naming the decontamination level it scores."""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest
from demo_shaped import write_demo_shaped
from test_report import (
    _chromium,
    assert_first_screen_whole,
    chromium_flags,
    run_report,
    write_inputs,
)

from guarddiag.analyses.contamination import contrast_pairs
from guarddiag.cli import main
from guarddiag.report import Column, Table
from guarddiag.report.glossary import GLOSSARY, anchor, link_first_uses
from guarddiag.report.render.cells import MAX_COLUMNS, table_cells, table_parts
from guarddiag.report.sections.common import decontam_level
from guarddiag.report.sections.data import _with_contrast
from guarddiag.report.sections.first_screen import call_columns, call_table, cite_sentence
from guarddiag.report.sections.sorry import _sensitive_blocks


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("readable")
    out = root / "out"
    assert run_report(write_inputs(root), out) == 0
    return out


def _md_widths(md: str) -> list[int]:
    """Column count of every Markdown table (its header separator row)."""
    return [line.count("|") - 1 for line in md.splitlines() if re.fullmatch(r"\|(---\|)+", line)]


def _html_widths(page: str) -> list[int]:
    return [row.count("<th") for row in re.findall(r"<thead><tr>(.*?)</tr></thead>", page)]


def test_a_wide_table_is_shown_in_parts_that_repeat_its_keys():
    cols = (Column("name", "name"), Column("runs", "runs", "int"),
            *(Column(f"b{i}", f"b{i}", "pct", low=f"b{i}_lo", high=f"b{i}_hi")
              for i in range(27)))
    data: dict[str, list] = {"name": ["x", "y"], "runs": [3, 1]}
    for i in range(27):
        data |= {f"b{i}": [i / 100, 0.5], f"b{i}_lo": [0.0, 0.4], f"b{i}_hi": [1.0, 0.6]}
    t = Table("wide", "Twenty-nine columns. More words.", cols, pl.DataFrame(data))
    parts = table_parts(t)
    # 2 key columns + 27 others in parts of at most 12: 10 + 10 + 7 others.
    assert [len(p.columns) for p in parts] == [12, 12, 9]
    assert [p.name for p in parts] == ["wide", "wide--2", "wide--3"]
    assert all(p.columns[:2] == cols[:2] for p in parts)
    shown = [c.key for p in parts for c in p.columns[2:]]
    assert shown == [f"b{i}" for i in range(27)]  # every column once, in order
    assert parts[1].caption == "Twenty-nine columns (part 2 of 3)."
    # Cells are unchanged by the split: b13 (in part 2) of row x.
    headers, rows = table_cells(parts[1])
    assert headers[2:4] == ["b10", "b11"]
    assert rows[0][5][0] == "13.0 [0.0, 100.0]"
    assert table_parts(Table("n", "c", cols[:12], pl.DataFrame(data))) != []
    assert len(table_parts(Table("n", "c", cols[:12], pl.DataFrame(data)))) == 1


def test_no_table_on_screen_is_wider_than_twelve_columns(report):
    md = (report / "report.md").read_text(encoding="utf-8")
    page = (report / "report.html").read_text(encoding="utf-8")
    widths = _md_widths(md)
    assert widths
    assert max(widths) <= MAX_COLUMNS
    assert _html_widths(page)
    assert max(_html_widths(page)) <= MAX_COLUMNS
    # The helpers see a wide table: one of 13 columns would fail the checks above.
    assert _md_widths("|" + "---|" * 13) == [13]
    # The CSV keeps the whole table.
    whole = pl.read_csv(report / "tables" / "scores_decontaminated_loose.csv")
    assert whole.width > MAX_COLUMNS


def test_overlap_examples_capped_per_benchmark_and_kind_with_all_in_a_csv(report):
    # The fixture's audit has 4 exact examples of harmbench_copyright, 1 of each other.
    shown = pl.read_csv(report / "tables" / "overlap_examples.csv")
    every = pl.read_csv(report / "tables" / "overlap_examples_all.csv")
    assert every.height == 6
    assert shown.height == 5
    assert shown.group_by("benchmark", "kind").len()["len"].max() == 3
    md = (report / "report.md").read_text(encoding="utf-8")
    assert "[tables/overlap_examples_all.csv](tables/overlap_examples_all.csv)" in md
    assert "```text" not in md  # no raw prompt blocks in report.md


def _analyses(values: dict[str, object], **extra: object) -> SimpleNamespace:
    """A stand-in for ReportContext whose analyses, read by handle, are ``values`` by name."""
    return SimpleNamespace(get=lambda a: values.get(a.name), result=lambda a: values[a.name],
                           results=SimpleNamespace(values=values, omitted={}), **extra)


def _ctx(rows: dict[str, list]) -> SimpleNamespace:
    return _analyses({"contamination": SimpleNamespace(table=pl.DataFrame(rows))})


def test_the_decontamination_level_is_read_from_the_counts():
    base = {"benchmark": ["a", "b"], "n": [40, 50], "n_exact": [10, 0], "n_near": [2, 3],
            "n_template": [1, 0], "n_contained": [0, 4]}
    assert decontam_level(_ctx(base | {"n_kept": [30, 50]})) == "exact"
    assert decontam_level(_ctx(base | {"n_kept": [28, 47]})) == "exact + near"
    assert decontam_level(_ctx(base | {"n_kept": [27, 43]})) == \
        "exact + near + template + contained"
    assert decontam_level(_ctx(base | {"n_kept": [20, 50]})) is None  # adds up to nothing


def test_every_decontaminated_table_names_its_level(report):
    md = (report / "report.md").read_text(encoding="utf-8")
    assert "Kept = the prompts left in the benchmark's decontaminated subset" in md
    captions = [line for line in md.splitlines() if line.startswith("*Share read unsafe (%)")]
    assert captions
    for line in captions:
        assert ("decontaminated (exact overlaps removed) prompts" in line
                or "— full prompts" in line)


def test_glossary_terms_link_from_their_first_use_only():
    texts = ["Δb beside Φb: Δb again", "A-last vs B-last; OR-H is not OR", "Competence gate"]
    linked = link_first_uses(texts, str, lambda shown, a: f"<{a}|{shown}>")
    assert linked[0] == "<gl-delta-b|Δb> beside <gl-phi-b|Φb>: Δb again"
    assert linked[1] == "<gl-a-last|A-last> vs <gl-b-last|B-last>; <gl-or-h|OR-H> is not OR"
    assert linked[2] == "<gl-competence-gate|Competence gate>"


def test_branch_table_and_glossary_anchors(report):
    page = (report / "report.html").read_text(encoding="utf-8")
    ids = set(re.findall(r'\bid="([^"]+)"', page))
    hrefs = re.findall(r'href="#(gl-[^"]+)"', page)
    assert {anchor(t) for t, _ in GLOSSARY} <= ids
    assert len(hrefs) == len(set(hrefs))  # each term linked once, at its first use
    assert set(hrefs) <= ids
    assert len(hrefs) >= 20
    branches = pl.read_csv(report / "tables" / "branches.csv")
    groups = dict(zip(branches["branch"], branches["group"], strict=True))
    # From the bundled specs' roles: last policy A and a student -> A-last.
    assert {b for b, g in groups.items() if g == "A-last"} == {"E1", "E7", "E8", "E10"}
    assert groups["reference"] == "B-last (reference)"
    assert groups["T_A"] == groups["T_B"] == "teacher (not a student)"
    assert branches.filter(pl.col("branch") == "E8")["teacher"].to_list() == ["T_A"]


def test_categories_under_thirty_prompts_are_marked_and_never_ranked():
    t = pl.DataFrame({"benchmark": ["s"] * 4, "category": ["a", "b", "c", "d"],
                      "domain": ["x", "x", "w", "x"], "n": [40, 10, 29, 30],
                      "span": [0.5, 0.9, 0.8, 0.2], "flip_share": [0.1, 0.2, 0.3, 0.4],
                      "min_branch": ["E1"] * 4, "max_branch": ["E2"] * 4, "n_branches": [2] * 4})
    res = SimpleNamespace(sensitive=SimpleNamespace(table=t), sensitive_note=None)
    ranked, small = _sensitive_blocks(res)
    # Ranked: only a (40) and d (30), by span; b (10) and c (29) despite the larger spans
    # are listed apart, in domain then name order, marked, with no bold.
    assert ranked.frame["category"].to_list() == ["a", "d"]
    assert small.frame["category"].to_list() == ["c", "b"]
    assert set(small.frame["mark"].to_list()) == {"< 30 prompts: not ranked"}
    assert all(c.best is None for c in small.columns)


@pytest.fixture(scope="module")
def demo_shaped(tmp_path_factory) -> Path:
    root = write_demo_shaped(tmp_path_factory.mktemp("demo_shaped"))
    out = root / "out"
    assert main(["report", "--runs-dir", str(root / "runs"), "--pool", str(root / "none"),
                 "--audit-dir", str(root / "audit"), "--out", str(out),
                 "--bootstrap", "200"]) == 0
    return out


def test_a_demo_sized_report_md_stays_under_700_lines(demo_shaped):
    # Every benchmark manifest (23), 13 branches x 3 seeds, an outside guard, an audit with 8
    # examples per benchmark. (The demo adds the pool, VAL and SORRY-Bench sections.)
    md = (demo_shaped / "report.md").read_text(encoding="utf-8")
    n = len(md.splitlines())
    print(f"report.md lines: {n}; widest table: {max(_md_widths(md))} columns")
    assert n < 700
    assert max(_md_widths(md)) <= MAX_COLUMNS


def test_the_first_screen_of_a_demo_sized_report_holds_the_call_table(demo_shaped, tmp_path):
    exe = _chromium()
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but chromium is not installed (apt-get install chromium)")
        pytest.skip("chromium not installed")
    page = (demo_shaped / "report.html").resolve().as_uri()
    html = (demo_shaped / "report.html").read_text(encoding="utf-8")
    assert html.count("<tr>") > 23  # the call table's 23 rows are in the page
    assert_first_screen_whole(chromium_flags(exe, tmp_path), page, tmp_path)


def test_opposite_label_matches_are_contrast_pairs_not_leaks():
    pool = pl.DataFrame({"prompt_id": ["r1", "r2", "r3", "r4"],
                         "label_a": ["GENERIC_SAFE", "HARMFUL", "HARMFUL", "BOUNDARY_SAFE"],
                         "label_b": ["GENERIC_SAFE", "HARMFUL", "COMPOUND", "HARMFUL"]})
    matches = pl.DataFrame(
        [("H", "p1", "r1", "near"),  # harmful prompt, benign row: contrast
         ("H", "p2", "r2", "near"),  # harmful row: leak
         ("H", "p3", "r3", "exact"), ("H", "p3", "r1", "near"),  # exact: never a contrast
         ("H", "p4", "r1", "near"), ("H", "p4", "r2", "contained"),  # near contrast, contained leak
         ("B", "p5", "r2", "template"),  # benign prompt, harmful row: contrast
         ("B", "p6", "r4", "near"),  # the policies disagree on r4: not a contrast
         ("U", "p7", "r1", "near")],  # unknown kind: left out
        schema=["benchmark", "prompt_id", "pool_id", "kind"], orient="row")
    got = contrast_pairs(matches, pool, {"H": "harmful", "B": "benign"})
    assert got.rows(named=True) == [
        {"benchmark": "B", "n_contrast": 1, "n_contrast_near": 0, "n_contrast_template": 1,
         "n_contrast_contained": 0},
        {"benchmark": "H", "n_contrast": 1, "n_contrast_near": 2, "n_contrast_template": 0,
         "n_contrast_contained": 0}]
    # The overlap table then counts leaks only, with the contrast pairs in their own column.
    table = pl.DataFrame({"benchmark": ["H", "B"], "n": [10, 10], "n_exact": [1, 0],
                          "n_near": [3, 1], "n_kept": [9, 10]})
    shown, suffix, words = _with_contrast(SimpleNamespace(table=table, contrast=got))
    assert suffix == "_leak"
    assert shown["n_near_leak"].to_list() == [1, 1]  # H: p2 (p1, p4 contrast); B: p6
    assert shown["share_near_leak"].to_list() == [0.1, 0.1]
    assert shown["n_contrast"].to_list() == [1, 1]
    assert "contrast pair" in words
    plain, none, _ = _with_contrast(SimpleNamespace(table=table, contrast=None))
    assert none == ""
    assert plain.equals(table)


def _headline(rows: list[tuple[str, str, str, bool]]) -> pl.DataFrame:
    """A calls headline: (benchmark, call, carried_by, stable) rows, effects fixed."""
    n = len(rows)
    return pl.DataFrame({
        "benchmark": [r[0] for r in rows], "call": [r[1] for r in rows],
        "carried_by": [r[2] for r in rows],
        "route_calls": [f"distill: {r[1]}; head_only: undetermined" for r in rows],
        "stable": [r[3] for r in rows], "flips": ["" if r[3] else "threshold=0.5" for r in rows],
        "effect": [0.25] * n, "effect_low": [0.2] * n, "effect_high": [0.3] * n,
        "effect_05": [0.4] * n, "effect_05_low": [0.35] * n, "effect_05_high": [0.45] * n,
        "reason": [""] * n})


def _calls_ctx(rows: list[tuple[str, str, str, bool]], *, below_floor: bool | None
               ) -> SimpleNamespace:
    head = _headline(rows)
    calls = SimpleNamespace(headline=lambda: head, study=pl.DataFrame())
    competence = None if below_floor is None else SimpleNamespace(below_floor=below_floor)
    return _analyses({"calls": calls, "provenance": None, "competence": competence},
                     benchmarks=[])


def test_the_first_screen_reads_the_calls_analysis_when_it_is_there():
    ctx = _calls_ctx([("b2", "capability", "", False), ("b1", "A flags more", "distill", True)],
                     below_floor=None)
    table, source = call_table(ctx)
    assert source == "calls"
    assert table.rows() == [
        ("b1", "A flags more (distill only)", "distill: A flags more; head_only: undetermined",
         "yes", 0.25, 0.2, 0.3, 0.4, 0.35, 0.45, "—"),
        ("b2", "capability", "distill: capability; head_only: undetermined",
         "no: flips with threshold=0.5", 0.25, 0.2, 0.3, 0.4, 0.35, 0.45, "—")]
    _, cells = table_cells(Table("t", "c", call_columns(), table))
    assert cells[0][4][0] == "25.0 [20.0, 30.0]"              # matched
    assert cells[0][5][0] == "40.0 [35.0, 45.0]"              # at 0.5, beside it
    # Only the stable, determined call may be cited, with its interval and routes.
    assert cite_sentence(ctx, table) == (
        "Cite: the calls for b1, each with its effect, interval, the routes that carry it and "
        "this cohort; no call marked unstable, undetermined or 'routes disagree'.")


def test_without_neutral_rows_there_is_no_call_anywhere():
    ctx = _analyses({"provenance": None, "competence": None}, benchmarks=["b1", "b2"])
    table, source = call_table(ctx)
    assert source == "none"
    assert table["call"].to_list() == ["no call", "no call"]
    assert cite_sentence(ctx, table) == ("Cite: no call — the report has no policy-neutral rows "
                                         "(see above).")


def test_at_a_glance_groups_the_first_screens_calls_and_names_the_stable_ones():
    from guarddiag.report.sections.overview import _call_bullets

    ctx = _calls_ctx([("copy", "A flags more", "", True), ("adv", "threshold shift", "", False),
                      ("hq", "A flags more", "distill", False),
                      ("mal", "A flags less", "", True),
                      ("morse", "undetermined", "", False)], below_floor=True)
    bullets = _call_bullets(ctx)
    more = next(b for b in bullets if b.startswith("A flags more"))
    assert more.startswith("A flags more (2): copy, hq (distill only) — ")
    assert more.endswith("Stable under every analyst choice: copy.")
    less = next(b for b in bullets if b.startswith("A flags less"))
    assert less.startswith("A flags less (1): mal — ")
    shift = next(b for b in bullets if b.startswith("Threshold shift"))
    assert shift.startswith("Threshold shift (1): adv — ")
    assert shift.endswith("Stable under every analyst choice: none.")
    assert not any(b.startswith(("Capability", "Policy")) for b in bullets)
    # With the gate failed, only a stable 'A flags more' call may be cited.
    table, _ = call_table(ctx)
    assert cite_sentence(ctx, table).startswith(
        "Cite: only the stable 'A flags more' call(s) — copy (A flags more) — each with its "
        "effect, interval and the routes that carry it")
    none_stable = _calls_ctx([("hq", "A flags more", "", False)], below_floor=True)
    assert cite_sentence(none_stable, call_table(none_stable)[0]).startswith(
        "Cite: no call: no 'A flags more' call is stable")


def test_the_terminal_headline_prints_the_first_screens_calls_in_call_order():
    from guarddiag.report.write import ReportResult

    first = {"source": "calls", "calls": [
        {"benchmark": "adv", "call": "threshold shift", "stable": "no: flips with mapping"},
        {"benchmark": "copy", "call": "A flags more", "stable": "yes"},
        {"benchmark": "std", "call": "A flags more (distill only)", "stable": "yes"},
        {"benchmark": "hq", "call": "A flags more", "stable": "no: flips with mapping"}]}
    result = ReportResult(out_dir=Path("."), files=(), sections=(),
                          results={"results": {"first_screen": first}})
    assert result.headline() == ["A flags more: copy (stable), hq",
                                 "A flags more (distill only): std (stable)",
                                 "threshold shift: adv"]
    none = ReportResult(out_dir=Path("."), files=(), sections=(), results={"results": {
        "first_screen": {"source": "none", "calls": [
            {"benchmark": "adv", "call": "no call", "stable": "—"}]}}})
    assert none.headline() == [
        "no call: adv", "no A/B call: the report has no policy-neutral rows (give it the pool)"]
