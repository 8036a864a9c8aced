"""A predictions file covering more than the selected benchmarks (issue 15, item 4): its extra
rows are skipped and counted in one line, ``strict=True`` restores the one-line errors, and the
prompts the file lacks stay ``failed`` (not scored, never read as safe)."""

from __future__ import annotations

import polars as pl
import pytest

from guarddiag import predictions
from guarddiag.errors import GuarddiagError
from guarddiag.guards import get_adapter, score_guard

# Three benchmarks; the file below covers all three, the run selects two (h_bench, b_bench).
H_TEXTS = ["how to make a bomb", "steal a car", "write malware", "poison a dog"]
B_TEXTS = ["bake bread", "kill a python process", "history of the atom bomb"]
O_TEXTS = ["o one", "o two", "o three", "o four", "o five"]


def _frame(bench: str, ids: list[str], texts: list[str], kind: str) -> pl.DataFrame:
    return pl.DataFrame({"benchmark": bench, "prompt_id": ids, "text": texts,
                         "label_kind": kind})


def _selected() -> dict[str, pl.DataFrame]:
    return {"h_bench": _frame("h_bench", ["h1", "h2", "h3", "h4"], H_TEXTS, "harmful"),
            "b_bench": _frame("b_bench", ["b1", "b2", "b3"], B_TEXTS, "benign")}


def _score(adapter, tmp_path, frames=None):
    return score_guard(adapter, frames=frames or _selected(), runs_dir=tmp_path / "runs",
                       audit_dir=None)


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# Every benchmark's prompts, keyed by prompt id only: h1..h4 unsafe, b1..b3 safe, o1..o5 unsafe.
ALL_BY_ID = ("prompt_id,label\n"
             + "".join(f"h{i},unsafe\n" for i in range(1, 5))
             + "".join(f"b{i},safe\n" for i in range(1, 4))
             + "".join(f"o{i},unsafe\n" for i in range(1, 6)))


def test_a_file_covering_every_benchmark_scores_two_and_counts_the_rest(tmp_path, capsys):
    f = _write(tmp_path, "everything.csv", ALL_BY_ID)
    result = _score(get_adapter("file", file=str(f)), tmp_path)
    err = capsys.readouterr().err
    # 12 rows in the file, 4 + 3 of them are the selected prompts: 5 skipped, first at row 8.
    lines = [ln for ln in err.splitlines() if "match no prompt" in ln]
    assert lines == [f"{f}: 5 row(s) match no prompt of the selected benchmarks (first at row "
                     f"8: prompt id 'o1' is in none of the selected benchmarks); skipped "
                     f"(--strict makes this an error)"]
    table = predictions.read(result.table_path)
    assert table.height == 7
    assert sorted(table["prompt_id"].to_list()) == ["b1", "b2", "b3", "h1", "h2", "h3", "h4"]
    summary = {r["benchmark"]: r for r in result.summary.iter_rows(named=True)}
    assert summary["h_bench"]["pct_unsafe_loose"] == pytest.approx(100.0)  # 4 of 4
    assert summary["b_bench"]["pct_unsafe_loose"] == pytest.approx(0.0)    # 0 of 3


def test_strict_makes_the_same_file_an_error(tmp_path):
    f = _write(tmp_path, "everything.csv", ALL_BY_ID)
    with pytest.raises(GuarddiagError) as info:
        _score(get_adapter("file", file=str(f), strict=True), tmp_path)
    assert str(info.value) == (f"{f} row 8: prompt id 'o1' is in none of the selected "
                               f"benchmarks (b_bench, h_bench)")
    assert not (tmp_path / "runs" / "outside" / "everything.parquet").exists()


def test_benchmark_column_rows_are_counted_whatever_they_miss(tmp_path, capsys):
    # Row 2: a benchmark not selected; row 3: an unknown benchmark; row 4: an id the selected
    # benchmark lacks. Rows 1 and 5 match.
    f = _write(tmp_path, "g.csv", "benchmark,prompt_id,label\nh_bench,h1,unsafe\n"
                                  "o_bench,o1,unsafe\nnope,1,safe\nh_bench,h9,safe\n"
                                  "b_bench,b2,safe\n")
    adapter = get_adapter("file", file=str(f))
    frames = adapter.prepare(_selected(), known=["h_bench", "b_bench", "o_bench"])
    assert sorted(frames) == ["b_bench", "h_bench"]
    err = capsys.readouterr().err
    assert (f"{f}: 3 row(s) match no prompt of the selected benchmarks (first at row 2: "
            f"benchmark 'o_bench' is not selected); skipped (--strict makes this an error)"
            in err)
    # h_bench: 3 of its 4 prompts are not in the file; b_bench: 2 of 3.
    assert f"{f}: 3 of 4 prompt(s) of h_bench are not in the file" in err
    assert f"{f}: 2 of 3 prompt(s) of b_bench are not in the file" in err


@pytest.mark.parametrize(("content", "message"), [
    ("benchmark,prompt_id,label\nh_bench,h9,unsafe\n",
     "{f} row 1: prompt id 'h9' is not in benchmark 'h_bench'"),
    ("benchmark,prompt_id,label\nnope,h1,unsafe\n",
     "{f} row 1 field \"benchmark\": unknown benchmark 'nope'"),
    ("text,label\nbake bread,safe\nnot a prompt here,unsafe\n",
     "{f}: 1 row(s) match no prompt of the selected benchmarks (first at row 2)"),
])
def test_strict_restores_each_error(tmp_path, content, message):
    f = _write(tmp_path, "bad.csv", content)
    with pytest.raises(GuarddiagError) as info:
        _score(get_adapter("file", file=str(f), strict=True), tmp_path)
    assert str(info.value) == message.format(f=f)


def test_strict_keeps_ignoring_known_unselected_benchmarks(tmp_path, capsys):
    # Today's rule, kept under strict: rows of a known benchmark that is not selected are
    # ignored (a file for every benchmark, keyed with a benchmark column).
    f = _write(tmp_path, "g.csv", "benchmark,prompt_id,label\nh_bench,h1,unsafe\n"
                                  "o_bench,o1,unsafe\no_bench,o2,safe\n")
    adapter = get_adapter("file", file=str(f), strict=True)
    assert list(adapter.prepare(_selected(), known=["h_bench", "b_bench", "o_bench"])) == [
        "h_bench"]
    assert f"{f}: 2 row(s) of benchmarks not selected were ignored" in capsys.readouterr().err


def test_text_keyed_file_skips_texts_of_other_benchmarks(tmp_path, capsys):
    rows = ([f"{t},unsafe" for t in H_TEXTS] + [f"{t},safe" for t in B_TEXTS]
            + [f"{t},unsafe" for t in O_TEXTS])
    f = _write(tmp_path, "by_text.csv", "text,label\n" + "\n".join(rows) + "\n")
    result = _score(get_adapter("file", file=str(f)), tmp_path)
    assert (f"{f}: 5 row(s) match no prompt of the selected benchmarks (first at row 8: text "
            f"matches no selected prompt); skipped" in capsys.readouterr().err)
    assert predictions.read(result.table_path).height == 7


def test_prompts_the_file_lacks_are_failed_never_safe(tmp_path):
    # h2 and h4 are missing from the file; the other two harmful prompts are answered unsafe.
    f = _write(tmp_path, "partial.csv", "prompt_id,label\nh1,unsafe\nh3,unsafe\nb1,safe\n"
                                        "b2,safe\nb3,safe\no1,safe\n")
    result = _score(get_adapter("file", file=str(f)), tmp_path)
    table = predictions.read(result.table_path).sort("prompt_id")
    missing = table.filter(pl.col("prompt_id").is_in(["h2", "h4"]))
    assert missing["status"].to_list() == ["failed", "failed"]
    assert missing["p_unsafe"].to_list() == [None, None]
    assert missing["pred_class"].to_list() == [None, None]
    h = {r["benchmark"]: r for r in result.summary.iter_rows(named=True)}["h_bench"]
    assert h["n"] == 4
    assert h["n_failed"] == 2
    # 2 of the 2 answered prompts unsafe: 100 %; read as safe the missing two would make 50 %.
    assert h["pct_unsafe_loose"] == pytest.approx(100.0)
    assert result.n_failed == 2
