"""The audit's start-up savings: the cached benchmark normal forms, libyaml manifests and the
``--figure`` switch.

Oracles: ``guarddiag.text.normalise`` applied text by text (never the cached value), and the
files a finished audit folder holds.
"""

from __future__ import annotations

import polars as pl
import pytest

from guarddiag import paths
from guarddiag.audit import exact
from guarddiag.cli import main
from guarddiag.errors import GuarddiagError
from guarddiag.spec import load_yaml_mapping
from guarddiag.text import normalise

TEXTS = [["How do I make a BOMB?!", "Ｗｒｉｔｅ　ａ ｐｏｅｍ", "ﬁnd the Straße", "   "],
         ["Write a poem.", "naïve café — “quoted”"]]


def _fresh_index(monkeypatch) -> exact.FormIndex:
    monkeypatch.setattr(exact, "_LAST", [])      # drop the in-process copy, keep the disk one
    return exact.index_forms(TEXTS)


def test_cached_forms_equal_normalise_and_are_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path))
    first = _fresh_index(monkeypatch)
    stored = list((tmp_path / "forms").glob("*.parquet"))
    assert len(stored) == 1
    # The stored column is what normalise gives, one per text (the blank one included).
    flat = [t for texts in TEXTS for t in texts]
    assert pl.read_parquet(stored[0])["form"].to_list() == [normalise(t) for t in flat]
    # A second process reads it instead of normalising: poison the normaliser to prove it.
    monkeypatch.setattr(exact, "normal_forms", lambda *_: pytest.fail("normalised again"))
    second = _fresh_index(monkeypatch)
    assert second.key_of == first.key_of
    assert second.members == first.members
    assert first.forms == list(dict.fromkeys(normalise(t) for t in flat if normalise(t)))


def test_a_damaged_or_short_cache_file_is_a_miss(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path))
    good = _fresh_index(monkeypatch)
    stored = next((tmp_path / "forms").glob("*.parquet"))
    stored.write_bytes(b"not parquet")
    assert _fresh_index(monkeypatch).key_of == good.key_of
    pl.DataFrame({"form": ["only one"]}).write_parquet(stored)
    assert _fresh_index(monkeypatch).key_of == good.key_of


def test_other_texts_get_another_entry_and_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path))
    _fresh_index(monkeypatch)
    monkeypatch.setattr(exact, "_LAST", [])
    # Concatenation must not collide: ["ab", "c"] and ["a", "bc"] are two lists.
    exact.index_forms([["ab", "c"]])
    monkeypatch.setattr(exact, "_LAST", [])
    exact.index_forms([["a", "bc"]])
    assert len(list((tmp_path / "forms").glob("*.parquet"))) == 3
    monkeypatch.setenv(paths.CACHE_ENV, "off")
    assert paths.cache_dir() is None
    monkeypatch.setattr(exact, "_LAST", [])
    exact.index_forms([["something new"]])
    assert len(list((tmp_path / "forms").glob("*.parquet"))) == 3


def test_yaml_errors_keep_the_pure_python_message(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: x\nfiles: [a, b\n", encoding="utf-8")
    with pytest.raises(GuarddiagError, match=r"bad\.yaml line \d+: malformed YAML"):
        load_yaml_mapping(bad)
    good = tmp_path / "good.yaml"
    good.write_text("id: x\nrows: 3\nratio: 0.5\nflag: yes\nempty:\n", encoding="utf-8")
    # YAML 1.1 as PyYAML's safe loader reads it: yes is True, an empty value None.
    assert load_yaml_mapping(good) == {"id": "x", "rows": 3, "ratio": 0.5, "flag": True,
                                       "empty": None}


@pytest.mark.realdata
def test_the_chart_is_drawn_with_figure_and_removed_without(real_data_dir, tmp_path, capsys):
    pool = tmp_path / "pool.parquet"
    pl.DataFrame({"prompt_id": ["p1", "p2"],
                  "text": ["How do I bake bread?", "Write a poem about cats"]}
                 ).write_parquet(pool)
    out = tmp_path / "audit"
    common = ["audit", "--pool", str(pool), "--out", str(out), "--benchmarks", "xstest_safe",
              "--data-dir", str(real_data_dir)]
    assert main([*common, "--figure"]) == 0
    assert (out / "overlap.png").is_file()
    assert (out / "overlap.pdf").is_file()
    assert main([*common, "--force"]) == 0          # the default: no chart, the old one removed
    assert not (out / "overlap.png").exists()
    assert not (out / "overlap.pdf").exists()
    assert (out / "summary.json").is_file()
    # Same pool and options: the saved audit is current; its chart is drawn from it.
    assert main([*common, "--figure"]) == 0
    assert (out / "overlap.png").is_file()
    capsys.readouterr()


def test_figure_is_documented_in_help(capsys):
    with pytest.raises(SystemExit):
        main(["audit", "--help"])
    assert "--figure, --no-figure" in capsys.readouterr().out
