"""The SORRY-Bench taxonomy manifest and the category map of every benchmark."""

from __future__ import annotations

import pytest

from guarddiag.errors import GuarddiagError
from guarddiag.labels import pillar_ids
from guarddiag.sorry import taxonomy
from guarddiag.sorry.taxonomy import DOMAINS, category_maps, prompt_weights, sorry_taxonomy


def test_sorrybench_taxonomy_shape():
    tax = sorry_taxonomy()
    assert tax.release == "2024-06"
    assert [c.number for c in tax.categories] == list(range(1, 46))
    by_domain = {d: [c.number for c in tax.categories if c.domain == d] for d in DOMAINS}
    # 2024-06 release: 1-5 hate, 6-25 crimes, 26-40 inappropriate, 41-45 advice.
    assert by_domain == {"hate": list(range(1, 6)), "crimes": list(range(6, 26)),
                         "inappropriate": list(range(26, 41)), "advice": list(range(41, 46))}
    # The one category the 44-category version drops.
    dropped = [c for c in tax.categories if not c.in_44_category_version]
    assert [(c.number, c.name) for c in dropped] == [(12, "Impersonation")]
    assert tax.category("12").name == "Impersonation"
    assert tax.category("personal insulting WORDS").number == 1
    assert tax.category(45).name == "Dangerous Machinery Operation Advice"
    for c in tax.categories:
        assert set(c.pillars) <= set(pillar_ids())
    with pytest.raises(GuarddiagError, match="SORRY-Bench category"):
        tax.category("46")


def test_weights_spread_one_unit():
    # StrongREJECT "Violence" -> violent_crime, terrorism: 1/2 each.
    w = prompt_weights("strongreject", ["Violence"])[0]
    assert w.status == "mapped"
    assert w.pillars == {"violent_crime": 0.5, "terrorism": 0.5}
    assert w.domains == {"crimes": 1.0}
    # Case and punctuation do not matter.
    assert prompt_weights("strongreject", ["violence!"])[0].pillars == w.pillars
    # OpenAI moderation codes "H,V": each code half, each spread over its pillars.
    w = prompt_weights("openai_moderation_flagged", ["H2,V"])[0]
    assert w.pillars == {"hate": 0.25, "harassment": 0.25, "violent_crime": 0.5}
    assert w.domains == {"hate": 0.5, "crimes": 0.5}
    assert prompt_weights("wildguardtest_benign", ["benign"])[0].status == "out_of_taxonomy"
    assert prompt_weights("strongreject", ["no such"])[0].status == "unmapped"
    assert prompt_weights("strongreject", [None])[0].status == "unmapped"
    assert prompt_weights("advbench", [None])[0].status == "no_map"
    # A mutated subset uses its base's map.
    assert prompt_weights("sorrybench__caesar", ["17"])[0].pillars == {"copyright": 1.0}


def test_category_map_validation_reports_every_problem(tmp_path, monkeypatch):
    (tmp_path / "taxonomy").mkdir()
    src = taxonomy._taxonomy_dir()
    (tmp_path / "taxonomy" / "sorrybench.yaml").write_text(
        (src / "sorrybench.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "taxonomy" / "category_map.yaml").write_text(
        "benchmarks:\n"
        "  x:\n    field: c\n    categories:\n"
        "      a: {pillars: [not_a_pillar], domain: crimes}\n"
        "      b: {pillars: [fraud], domain: nowhere}\n"
        "      c: {pillars: [], domain: crimes}\n", encoding="utf-8")
    (tmp_path / "policies").mkdir()
    from guarddiag.paths import manifests_dir

    (tmp_path / "policies" / "pillars.yaml").write_text(
        (manifests_dir() / "policies" / "pillars.yaml").read_text(encoding="utf-8"),
        encoding="utf-8")
    monkeypatch.setenv("GUARDDIAG_MANIFESTS", str(tmp_path))
    category_maps.cache_clear()
    try:
        with pytest.raises(GuarddiagError) as err:
            category_maps()
        msg = str(err.value)
        assert "3 problems" in msg
        assert "unknown pillar 'not_a_pillar'" in msg
        assert "domain 'nowhere'" in msg
        assert "domain must be null" in msg
    finally:
        category_maps.cache_clear()


@pytest.mark.realdata
def test_every_category_of_the_mirrored_data_is_mapped(real_data_dir):
    from guarddiag.data import load_benchmarks

    frames = load_benchmarks("all", data_dir=real_data_dir).frames
    maps = category_maps()
    checked = 0
    for bench, frame in frames.items():
        if bench not in maps:
            assert frame["category"].null_count() == frame.height or bench in (
                "harmfulqa",), f"{bench} has categories but no map"
            continue
        values = frame["category"].drop_nulls().unique().to_list()
        missing = [v for v in values if maps[bench].lookup(v) is None]
        assert not missing, f"{bench}: unmapped categories {missing}"
        checked += 1
    assert checked >= 14


@pytest.mark.realdata
def test_sorrybench_numbers_match_the_prompts(real_data_dir):
    from guarddiag.data import load_benchmark

    df = load_benchmark("sorrybench", data_dir=real_data_dir)
    assert df.height == 450
    counts = df.group_by("category").len()
    assert sorted(int(c) for c in counts["category"]) == list(range(1, 46))
    assert set(counts["len"].to_list()) == {10}

    def texts(n: int) -> str:
        return " ".join(df.filter(df["category"] == str(n))["text"].to_list()).lower()

    assert "harry potter" in texts(17)            # Intellectual Property Infringement
    assert "lease" in texts(43)                   # Legal Consulting Advice
    assert "blood pressure" in texts(41)          # Medical Advice
    assert "tinder" in texts(12)                  # Impersonation
    assert "engine belt" in texts(45)             # Dangerous Machinery Operation Advice
