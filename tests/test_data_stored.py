"""The loaded-subset cache: a later process reads the frame a subset's files gave instead of
parsing them again, and never a frame other bytes, another manifest or other code gave.

Oracles: the toy subset's rows typed out by hand, and a load with the cache turned off.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl
import pytest
import yaml
from polars.testing import assert_frame_equal

from guarddiag import data, paths
from guarddiag.data import load as load_module
from guarddiag.errors import GuarddiagError

CSV = b"id,goal,cat\na1,Do the first thing,x\na2,Do the second thing,y\n"
ROWS = [("a1", "Do the first thing", "x"), ("a2", "Do the second thing", "y")]


def _manifest(mdir: Path, *, pinned: bool = True, **over: object) -> None:
    entry = {"path": "benchmarks/toy.csv", "format": "csv", "rows": 2,
             "sha256": hashlib.sha256(CSV).hexdigest() if pinned else None}
    doc = {"id": "toy", "title": "Toy", "kind": "harmful", "study": False,
           "source_kind": "upstream", "licence": "MIT", "files": [entry],
           "text_fields": ["goal"], "id_field": "id", "category_field": "cat",
           "expected_count": 2, **over}
    mdir.mkdir(parents=True, exist_ok=True)
    (mdir / "toy.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """A one-subset manifests folder, its data file and an empty cache folder; every load is
    a new process's first (the in-process copies are dropped)."""
    mdir, ddir, cache = tmp_path / "m", tmp_path / "d", tmp_path / "cache"
    _manifest(mdir)
    (ddir / "benchmarks").mkdir(parents=True)
    (ddir / "benchmarks/toy.csv").write_bytes(CSV)
    monkeypatch.setenv(paths.CACHE_ENV, str(cache))
    return mdir, ddir, cache


def _load(mdir: Path, ddir: Path, monkeypatch) -> pl.DataFrame:
    monkeypatch.setattr(load_module, "_CACHE", {})
    return data.load_benchmark("toy", data_dir=ddir, manifests_dir=mdir,
                               derived_dir=mdir.parent / "none")


def _rows(frame: pl.DataFrame) -> list[tuple]:
    return frame.select("prompt_id", "text", "category").rows()


def _never_read(monkeypatch) -> None:
    monkeypatch.setattr(load_module, "read_file_rows",
                        lambda *_: pytest.fail("the file was parsed again"))


def test_a_later_load_reads_the_stored_frame(toy, monkeypatch):
    mdir, ddir, cache = toy
    monkeypatch.setenv(paths.CACHE_ENV, "off")
    parsed = _load(mdir, ddir, monkeypatch)
    assert _rows(parsed) == ROWS
    monkeypatch.setenv(paths.CACHE_ENV, str(cache))
    assert_frame_equal(_load(mdir, ddir, monkeypatch), parsed)
    assert len(list((cache / "subsets").glob("toy-*.parquet"))) == 1
    _never_read(monkeypatch)
    stored = _load(mdir, ddir, monkeypatch)
    assert_frame_equal(stored, parsed)
    assert stored.schema == parsed.schema


def test_a_pinned_file_is_still_checked_when_a_frame_is_stored(toy, monkeypatch):
    mdir, ddir, _ = toy
    _load(mdir, ddir, monkeypatch)
    (ddir / "benchmarks/toy.csv").write_bytes(CSV.replace(b"first", b"FIRST"))
    with pytest.raises(GuarddiagError, match="checksum mismatch"):
        _load(mdir, ddir, monkeypatch)


def test_other_bytes_of_an_unpinned_file_are_parsed_again(toy, monkeypatch):
    mdir, ddir, cache = toy
    _manifest(mdir, pinned=False)
    assert _rows(_load(mdir, ddir, monkeypatch)) == ROWS
    (ddir / "benchmarks/toy.csv").write_bytes(CSV.replace(b"first", b"other"))
    assert _rows(_load(mdir, ddir, monkeypatch))[0] == ("a1", "Do the other thing", "x")
    assert len(list((cache / "subsets").glob("toy-*.parquet"))) == 2


def test_an_edited_manifest_is_another_entry(toy, monkeypatch):
    mdir, ddir, _ = toy
    _load(mdir, ddir, monkeypatch)
    _manifest(mdir, category_field=None, text_fields=["cat"])
    assert _rows(_load(mdir, ddir, monkeypatch)) == [("a1", "x", None), ("a2", "y", None)]


def test_a_damaged_or_short_stored_frame_is_a_miss(toy, monkeypatch):
    mdir, ddir, cache = toy
    _load(mdir, ddir, monkeypatch)
    stored = next((cache / "subsets").glob("toy-*.parquet"))
    stored.write_bytes(b"not parquet")
    assert _rows(_load(mdir, ddir, monkeypatch)) == ROWS
    pl.DataFrame({"prompt_id": ["a1"]}).write_parquet(stored)
    assert _rows(_load(mdir, ddir, monkeypatch)) == ROWS


def test_the_reading_code_is_part_of_the_key(toy, monkeypatch):
    mdir, ddir, cache = toy
    _load(mdir, ddir, monkeypatch)
    monkeypatch.setattr(load_module, "_reader_digest", lambda: "another version of read.py")
    _load(mdir, ddir, monkeypatch)
    assert len(list((cache / "subsets").glob("toy-*.parquet"))) == 2


def test_unreadable_reader_source_means_no_cache_not_an_error(toy, monkeypatch):
    mdir, ddir, cache = toy
    monkeypatch.setattr(load_module, "_reader_digest", lambda: None)
    assert _rows(_load(mdir, ddir, monkeypatch)) == ROWS
    assert not (cache / "subsets").exists()


def test_the_reader_digest_is_none_for_a_module_without_a_file(monkeypatch):
    from guarddiag.data import read as read_module

    monkeypatch.setattr(read_module, "__file__", None)
    assert load_module._reader_digest.__wrapped__() is None
    monkeypatch.undo()
    assert len(load_module._reader_digest.__wrapped__()) == 64


@pytest.mark.realdata
def test_every_real_subset_reads_back_as_parsed(real_data_dir, tmp_path, monkeypatch):
    # Every manifest shape of the public data (csv, jsonl.gz flags, json trees, filters...):
    # the stored frames equal the parsed ones, dtypes included, and the digests are the same.
    def load_all() -> data.BenchmarkSet:
        monkeypatch.setattr(load_module, "_CACHE", {})
        return data.load_benchmarks("all", data_dir=real_data_dir)

    monkeypatch.setenv(paths.CACHE_ENV, "off")
    parsed = load_all()
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path))
    load_all()
    _never_read(monkeypatch)
    stored = load_all()
    assert stored.sha256 == parsed.sha256
    assert list(stored.frames) == list(parsed.frames)
    for sid, frame in parsed.frames.items():
        assert_frame_equal(stored.frames[sid], frame)
        assert stored.frames[sid].schema == frame.schema, sid
    assert len(list((tmp_path / "subsets").glob("*.parquet"))) == len(parsed.frames) > 10
