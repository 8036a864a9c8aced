"""The "did you mean" hint of unknown-name errors: closest names first, stable on ties."""

from __future__ import annotations

from guarddiag.errors import did_you_mean, unknown_name

IDS = ("advbench", "harmbench_contextual", "harmbench_copyright", "harmbench_standard",
       "jbb_benign", "jbb_harmful", "orbench_hard", "orbench_toxic", "sorrybench",
       "xstest_safe", "xstest_unsafe")


def test_a_partial_name_offers_every_subset_it_starts():
    # WRatio scores a full-word prefix at 90 for each of the three; ties go in name order.
    assert did_you_mean("harmbench", IDS) == ("did you mean harmbench_contextual, "
                                              "harmbench_copyright, harmbench_standard?")
    assert did_you_mean("jbb", IDS) == "did you mean jbb_benign, jbb_harmful?"


def test_a_typo_ranks_the_intended_name_first():
    assert did_you_mean("advbnch", IDS).startswith("did you mean advbench")


def test_nothing_close_lists_the_choices():
    assert did_you_mean("qqqq", ("b", "a")) == "expected one of a, b"
    many = tuple(f"n{i:02d}" for i in range(20))
    assert did_you_mean("zzzz", many).endswith("n11, … (20 in all)")


def test_unknown_name_is_one_line():
    err = unknown_name("benchmark", "jbb", IDS, where="--benchmarks")
    assert str(err) == ("unknown benchmark 'jbb' in --benchmarks: did you mean jbb_benign, "
                        "jbb_harmful?")
