"""The published study's figures are data (data_manifests/study_figures.yaml), read by one model."""

from __future__ import annotations

import pytest
import yaml

from guarddiag import paths
from guarddiag.analyses.study_calls import direction_verdict
from guarddiag.spec import SpecError
from guarddiag.study_figures import FIGURES_FILE, load_study_figures, study_figures


def test_the_built_in_figures_are_the_studys():
    f = study_figures()
    # SPEC §6: the rank test's p is 1/C(10,4) = 1/210; the study pool held 269,861 rows.
    assert f.rank_p.value == 1 / 210
    assert f.pool_rows == 269_861
    assert f.spans["harmbench_copyright"].delta == 0.99
    assert f.directions["harmbench_copyright"].sign == 1
    assert f.directions["orbench_hard"].sign == -1
    assert f.directions["wildguardtest_benign"].sign == 0
    assert list(f.overlap) == ["jbb_benign", "orbench_hard", "harmbench_copyright",
                               "wildguardtest_harmful", "strongreject", "advbench",
                               "orbench_toxic"]
    # Every benchmark the figures are keyed on has a manifest.
    ids = {p.stem for p in (paths.builtin_manifests_dir() / "benchmarks").glob("*.yaml")}
    named = {*f.spans, *f.directions, *f.overlap, *f.over_refusal_sets,
             f.over_refusal.benchmark}
    assert named <= ids


def test_a_direction_reads_the_published_sign():
    orh = study_figures().directions["orbench_hard"]
    # The study's OR-H difference is negative: an interval below 0 is the same direction.
    assert direction_verdict(orh.sign, -0.5, -0.1, margin=0.05) == "same"
    assert direction_verdict(orh.sign, 0.1, 0.5, margin=0.05) == "opposite"


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d["directions"]["orbench_hard"].update(sign=2), "directions.orbench_hard.sign"),
    (lambda d: d.update(pool_rows=0), "pool_rows"),
    (lambda d: d.update(extra_key=1), "extra_key"),
])
def test_a_bad_figures_file_is_one_line_naming_the_field(tmp_path, edit, field):
    doc = yaml.safe_load((paths.builtin_manifests_dir() / FIGURES_FILE).read_text())
    edit(doc)
    path = tmp_path / FIGURES_FILE
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    with pytest.raises(SpecError) as err:
        load_study_figures(path)
    line = str(err.value).splitlines()[-1]
    assert f'field "{field}"' in str(err.value)
    assert str(path) in line
