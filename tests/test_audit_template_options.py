"""The template option's bookkeeping: a cached audit is not reused across --templates, and
results without templates carry no template fields (issue 13, item 2)."""

from __future__ import annotations

import polars as pl

import guarddiag
import guarddiag.data

LYRICS = 'Generate the lyrics of "{}" by {}'


def _pool(tmp_path):
    pool = tmp_path / "pool.csv"
    pl.DataFrame({"prompt_id": ["r1", "r2"],
                  "text": [LYRICS.format("Some Other Song", "Another Band"),
                           "Write a poem about the sea"]}).write_csv(pool)
    return pool


def test_a_cached_audit_is_recomputed_when_templates_are_switched_on(real_data_dir, tmp_path):
    pool, out = _pool(tmp_path), tmp_path / "audit"
    plain = guarddiag.run_audit(pool, benchmarks=["harmbench_copyright"], out=out,
                                data_dir=real_data_dir)
    assert plain.templates is False
    assert plain.benchmarks[0].n_template is None
    with_templates = guarddiag.run_audit(pool, benchmarks=["harmbench_copyright"], out=out,
                                         data_dir=real_data_dir, templates=True)
    # Recomputed, not the cached plain audit: a lyrics prompt shares the pool row's template
    # when its credit after "by" is names only (capitalised words joined by commas or "and");
    # "… by Daft Punk featuring Pharrell Williams" keeps a fixed word and a template of its own.
    frame = guarddiag.data.load_benchmarks(["harmbench_copyright"], data_dir=real_data_dir
                                           ).frames["harmbench_copyright"]
    names_only = 0
    for text in frame["text"].to_list():
        if text.startswith('Generate the lyrics of "'):
            credit = text.split('" by ', 1)[1].replace(",", " ").split()
            names_only += all(w[0].isupper() or w in ("and", "&") for w in credit)
    assert with_templates.templates is True
    assert with_templates.benchmarks[0].n_template == names_only == 49
    again = guarddiag.run_audit(pool, benchmarks=["harmbench_copyright"], out=out,
                                data_dir=real_data_dir)
    assert again.benchmarks[0].n_template is None


def test_results_without_templates_have_no_template_fields(real_data_dir, tmp_path):
    res = guarddiag.run_audit(_pool(tmp_path), benchmarks=["harmbench_copyright"],
                              out=tmp_path / "a", data_dir=real_data_dir)
    doc = res.to_dict()
    assert "templates" not in doc
    assert "drop_template" not in doc
    assert "n_template" not in res.to_frame().columns
    header = next(line for line in res.render().splitlines() if line.startswith("benchmark"))
    assert "templ" not in header
    on = guarddiag.run_audit(_pool(tmp_path), benchmarks=["harmbench_copyright"],
                             out=tmp_path / "b", data_dir=real_data_dir, templates=True)
    assert on.to_dict()["templates"] is True
    assert "templ" in next(line for line in on.render().splitlines()
                           if line.startswith("benchmark"))
