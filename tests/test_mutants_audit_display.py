"""What the contamination audit shows, written against surviving mutants of guarddiag.audit:
the examples kept per kind (three, first prompts first, similarity to 4 decimals), the
figure's bar positions, labels and x range, and the short-prompt rule in the printed table.

Small constructed pools and benchmarks; every expected number is worked out by hand in the
comments.
"""

from __future__ import annotations

import polars as pl
import pytest

from guarddiag.audit import audit_frames, plot_overlap
from guarddiag.errors import GuarddiagError

# Five benchmark prompts found verbatim in the pool and five with a near duplicate there (the
# pool row adds one word: 5 shared words of 6 in all, Jaccard 5/6 = 0.8333). Across prompts the
# sets share at most 4 words of 7 (exact: 6 of 8 = 0.75), below the 0.8 near threshold.
EXACT = [f"exact{k} lorem ipsum dolor sit amet consectetur" for k in range(5)]
NEAR = [f"topic{k} one two three four" for k in range(5)]
BENCH = pl.DataFrame({"prompt_id": [f"e{k}" for k in range(5)] + [f"n{k}" for k in range(5)],
                      "text": EXACT + NEAR})
POOL_TEXTS = EXACT + [f"{t} five" for t in NEAR]
POOL_IDS = [f"p{k}" for k in range(len(POOL_TEXTS))]


def test_three_examples_per_kind_first_prompts_first_with_rounded_similarity():
    res = audit_frames(POOL_IDS, POOL_TEXTS, {"b": BENCH}, near_dup=True, short_words=0)
    (b,) = res.benchmarks
    assert (b.n_exact, b.n_near, b.n_kept) == (5, 5, 5)
    # Three per kind (the summary's cap), in benchmark order: e0–e2, then n0–n2.
    assert [(e["kind"], e["prompt_id"], e["pool_id"]) for e in b.examples] == [
        ("exact", "e0", "p0"), ("exact", "e1", "p1"), ("exact", "e2", "p2"),
        ("near", "n0", "p5"), ("near", "n1", "p6"), ("near", "n2", "p7")]
    # 5/6 = 0.83333… kept to 4 decimals.
    assert [e["similarity"] for e in b.examples] == [1.0, 1.0, 1.0, 0.8333, 0.8333, 0.8333]


def test_fewer_matches_than_the_cap_are_all_shown():
    res = audit_frames(POOL_IDS[:2], POOL_TEXTS[:2], {"b": BENCH}, near_dup=True,
                       short_words=0)
    assert [e["prompt_id"] for e in res.benchmarks[0].examples] == ["e0", "e1"]


def test_a_benchmark_frame_without_its_columns_is_an_error():
    with pytest.raises(GuarddiagError, match=r"benchmark b: missing column\(s\) text"):
        audit_frames(POOL_IDS, POOL_TEXTS, {"b": BENCH.select("prompt_id")})


def _figure_facts(res) -> tuple[list[float], list[str], tuple[float, float]]:
    import matplotlib.pyplot as plt

    fig = plot_overlap(res)
    try:
        ax = fig.axes[0]
        centres = [round(p.get_y() + p.get_height() / 2, 4) for p in ax.patches]
        return centres, [t.get_text() for t in ax.texts], ax.get_xlim()
    finally:
        plt.close(fig)


def test_figure_height_grows_with_the_rows():
    import matplotlib.pyplot as plt

    other = pl.DataFrame({"prompt_id": ["c1"], "text": ["nothing like this anywhere"]})
    # 0.8 in of margins plus 0.28 in per row: 1.08 for one row, 1.36 for two.
    for benches, height in (({"b": BENCH}, 1.08), ({"b": BENCH, "c": other}, 1.36)):
        fig = plot_overlap(audit_frames(POOL_IDS, POOL_TEXTS, benches))
        try:
            assert tuple(fig.get_size_inches()) == pytest.approx((6.3, height))
        finally:
            plt.close(fig)


def test_figure_bars_sit_on_their_rows_and_only_nonzero_bars_are_labelled():
    other = pl.DataFrame({"prompt_id": ["c1"], "text": ["nothing like this anywhere"]})
    # Exact only: one bar per row, centred on the row (y = 0, 1). "b" has 5 of 10 exact
    # (50.0 %); "c" none, so its bar gets no label. x runs to 50 · 1.18 + 2 = 61.
    centres, texts, xlim = _figure_facts(
        audit_frames(POOL_IDS, POOL_TEXTS, {"b": BENCH, "c": other}))
    assert centres == [0.0, 1.0]
    assert texts == ["50.0% (5)"]
    assert xlim == pytest.approx((0.0, 61.0))
    # Near-dup on: exact bar 0.19 above the row, near bar 0.19 below (height 0.38 each).
    centres, texts, _ = _figure_facts(
        audit_frames(POOL_IDS, POOL_TEXTS, {"b": BENCH, "c": other}, near_dup=True,
                     short_words=0))
    assert centres == [-0.19, 0.81, 0.19, 1.19]
    assert texts == ["50.0% (5)", "50.0% (5)"]


def test_figure_x_range_stops_at_100_percent():
    # Every prompt found: 100 · 1.18 + 2 = 120 is capped at 100 %.
    bench = pl.DataFrame({"prompt_id": ["e0"], "text": [EXACT[0]]})
    _, texts, xlim = _figure_facts(audit_frames(POOL_IDS, POOL_TEXTS, {"b": bench}))
    assert texts == ["100.0% (1)"]
    assert xlim == (0.0, 100.0)


@pytest.mark.parametrize(("short_words", "clause"), [
    (0, ""), (1, " (≥ 0.9 for prompts under 1 words)"),
    (10, " (≥ 0.9 for prompts under 10 words)")])
def test_the_printed_table_states_the_short_prompt_rule_whenever_it_is_on(short_words, clause):
    res = audit_frames(POOL_IDS, POOL_TEXTS, {"b": BENCH}, near_dup=True,
                       short_words=short_words)
    first = res.render().splitlines()[1]   # after the rows-to-remove line
    assert first == (f"pool: 10 rows; exact = equal after normalisation; near = word-set "
                     f"Jaccard ≥ 0.8{clause}; decontamination drops exact")
