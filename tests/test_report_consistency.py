"""One source per number (issue 29): every number the report's prose quotes equals the table
cell (or results.json value) it refers to. The report is rendered from constructed saved
tables; the prose is read back from report.md, the cells from the CSV tables and results.json
the same run wrote, and each quoted number is compared with its cell as the table formats it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from test_report import run_report, write_inputs

from guarddiag.report.render.cells import p_text

NAME = r"[\w/=.&;<>() -]+?"


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("consistency")
    out = root / "out"
    assert run_report(write_inputs(root), out) == 0
    return out


def _plain(md: str) -> str:
    """report.md as plain text: glossary links unwrapped, Markdown escapes removed."""
    md = re.sub(r"\[([^\]]*)\]\(#gl-[^)]*\)", r"\1", md)
    return re.sub(r"\\(.)", r"\1", md)


def _section(md: str, title: str) -> str:
    return md.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def quoted_numbers(md: str, out: Path) -> list[tuple[str, str, str]]:
    """(where, quoted, cell) for every number the checked prose quotes."""
    md = _plain(md)
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))["results"]
    pairs: list[tuple[str, str, str]] = []
    # 1. The first screen: the competence gate's lowest mean and floor; the call table's
    #    effects against the load table's contrast (the same cohort).
    first = _section(md, "What was run and what it says")
    comp = res["summary"]["competence"]
    hit = re.search(r"lowest mean CAP on clear harm is (\d+\.\d)% against the (\d+\.\d)% floor",
                    first)
    assert hit
    pairs += [("first screen: lowest mean", hit[1], _pct(comp["lowest_mean"])),
              ("first screen: floor", hit[2], _pct(comp["floor"]))]
    load = pl.read_csv(out / "tables" / "span_floor_decontaminated_loose.csv")
    shown = {r["benchmark"]: r for r in res["first_screen"]["calls"]}
    rows = re.findall(r"^\| (\w+) \| ([\w ()-]+?) \| [^|]+ \| [^|]+ \| (-?\d+\.\d|—)",
                      first, re.M)
    assert {b for b, _, _ in rows} == set(shown)
    for bench, call, effect in rows:
        cell = shown[bench]["effect"]
        pairs += [(f"call table: {bench} effect", effect, "—" if cell is None else _pct(cell)),
                  (f"call table: {bench} call", call, shown[bench]["call"])]
    # 2. "At a glance": the competence bullet and the contamination bullet.
    glance = _section(md, "At a glance")
    size = comp["sizes"][0]
    hit = re.search(r"mean CAP on the clear-harm study benchmarks is (\d+\.\d)% at (\w+) "
                    r"\((\d+) benchmarks, seeds (\d+\.\d)%–(\d+\.\d)%\)", glance)
    assert hit
    pairs += [("glance: mean CAP", hit[1], _pct(size["mean_cap"])),
              ("glance: size", hit[2], size["size"]),
              ("glance: benchmarks", hit[3], str(size["n_benchmarks"])),
              ("glance: seed low", hit[4], _pct(size["seed_low"])),
              ("glance: seed high", hit[5], _pct(size["seed_high"]))]
    overlap = {r["benchmark"]: r for r in
               pl.read_csv(out / "tables" / "overlap.csv").iter_rows(named=True)}
    bullet = next(line for line in glance.splitlines() if line.startswith("- Contamination"))
    found = re.findall(r"(\w+) (\d+\.\d)% \((\d+)/(\d+)\)", bullet)
    assert found
    for bench, share, k, n in found:
        r = overlap[bench]
        pairs += [(f"glance: {bench} exact %", share, _pct(r["share_exact"])),
                  (f"glance: {bench} exact", k, str(r["n_exact"])),
                  (f"glance: {bench} n", n, str(r["n"]))]
    # 3. The single-run note beside the outside guards: each benchmark's seed SD (pp) equals the
    #    load table's (decontaminated prompts, loose mapping).
    sd = dict(zip(load["benchmark"], load["seed_sd"], strict=True))
    note = next(line for line in _section(md, "Outside guards beside the branches "
                                              "(decontaminated prompts)").splitlines()
                if line.startswith("Single-run intervals"))
    found = re.findall(r"(\w+) (\d+\.\d)(?=[;.])", note.split("per benchmark:", 1)[1])
    assert len(found) == len(sd)
    pairs += [(f"single-run note: {b} seed SD", v, f"{100 * sd[b]:.1f}") for b, v in found]
    # 4. Every paired-test paragraph against its table of significant comparisons.
    line_re = re.compile(
        rf"({NAME}) vs ({NAME}) on (\w+): (\d+\.\d)% vs (\d+\.\d)% read unsafe "
        rf"\(([+-]\d+\.\d) pp, Holm p (?:= )?(< 1e-16|[\d.e+-]+)\)")
    for name in ("paired_recipes_decontaminated_loose", "paired_outside_loose",
                 "paired_outside_strict"):
        sig = pl.read_csv(out / "tables" / f"{name}_significant.csv")
        para = next(line for line in md.splitlines() if line.startswith("Paired tests")
                    and (("outside guard" in line) == ("outside" in name))
                    and (name.endswith("strict") == ("strict mapping" in line)))
        quoted = line_re.findall(para)
        assert len(quoted) == min(sig.height, 8), name
        for (first_, second, bench, a, b, d, p), r in zip(quoted, sig.iter_rows(named=True),
                                                          strict=False):
            assert (bench, second.endswith(r["second"])) == (r["benchmark"], True)
            pairs += [(f"{name}: {first_} first %", a, _pct(r["share_first"])),
                      (f"{name}: {first_} second %", b, _pct(r["share_second"])),
                      (f"{name}: {first_} delta", d, f"{100 * r['delta']:+.1f}"),
                      (f"{name}: {first_} Holm p", p, p_text(r["p_holm"], 2))]
    # 5. The disclosure card's call column is the first screen's call, benchmark by benchmark.
    first_calls = {r["benchmark"]: r["call"] for r in res["first_screen"]["calls"]}
    card = pl.read_csv(out / "tables" / "disclosure.csv")
    pairs += [(f"card: {b} call", c, first_calls[b])
              for b, c in zip(card["benchmark"], card["call"], strict=True)]
    return pairs


def test_every_quoted_number_equals_its_cell(report):
    md = (report / "report.md").read_text(encoding="utf-8")
    pairs = quoted_numbers(md, report)
    wrong = [(where, q, c) for where, q, c in pairs if q != c]
    assert wrong == []
    # How many prose numbers the check covers (the closing note asks for the count).
    print(f"prose numbers checked: {len(pairs)}")
    assert len(pairs) >= 40


def test_a_number_that_differs_from_its_cell_is_caught(report):
    md = (report / "report.md").read_text(encoding="utf-8")
    # The contamination bullet quotes 25.0% (10/40); change one quoted count.
    tampered = md.replace("harmbench\\_standard 25.0% (10/40)",
                          "harmbench\\_standard 25.0% (11/40)", 1)
    assert tampered != md
    wrong = [(w, q, c) for w, q, c in quoted_numbers(tampered, report) if q != c]
    assert wrong == [("glance: harmbench_standard exact", "11", "10")]
