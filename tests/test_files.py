import gzip
import hashlib
import json

import polars as pl
import pytest

from guarddiag.errors import GuarddiagError
from guarddiag.files import (
    dumps_json,
    read_table,
    sha256_file,
    verify_file,
    write_json,
    write_jsonl,
)


def test_sha256_matches_hashlib(tmp_path):
    path = tmp_path / "x.bin"
    data = bytes(range(256)) * 5000
    path.write_bytes(data)
    assert sha256_file(path, chunk=1000) == hashlib.sha256(data).hexdigest()


def test_verify_file_reports_checksum_mismatch(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("a\n1\n")
    good = hashlib.sha256(b"a\n1\n").hexdigest()
    assert verify_file(path, sha256=good) == path
    with pytest.raises(GuarddiagError, match=r"x\.csv: checksum mismatch.*expected sha256 0000"):
        verify_file(path, sha256="0" * 64)
    with pytest.raises(GuarddiagError, match="not found"):
        verify_file(tmp_path / "y.csv", sha256=None)


def test_read_table_formats_and_errors(tmp_path):
    (tmp_path / "t.csv").write_text("id,text\n1,hello\n")
    (tmp_path / "t.jsonl").write_text('{"id": "1", "text": "hello"}\n')
    with gzip.open(tmp_path / "t.jsonl.gz", "wt") as fh:
        fh.write('{"id": "1", "text": "hello"}\n')
    pl.DataFrame({"id": ["1"], "text": ["hello"]}).write_parquet(tmp_path / "t.parquet")
    for name in ("t.csv", "t.jsonl", "t.jsonl.gz", "t.parquet"):
        df = read_table(tmp_path / name, columns=["text"])
        assert df["text"].to_list() == ["hello"]
    with pytest.raises(GuarddiagError, match=r"missing column\(s\) prompt; found id, text"):
        read_table(tmp_path / "t.csv", columns=["prompt"])
    (tmp_path / "bad.csv").write_bytes(b"id,text\n1,ok\n2,caf\xe9\n")
    with pytest.raises(GuarddiagError, match=r"bad\.csv line 3: not UTF-8"):
        read_table(tmp_path / "bad.csv")
    (tmp_path / "bad.jsonl").write_text('{"a": 1}\n{oops\n')
    with pytest.raises(GuarddiagError, match=r"bad\.jsonl line 2: malformed JSON"):
        read_table(tmp_path / "bad.jsonl")
    (tmp_path / "x.xlsx").write_bytes(b"PK")
    with pytest.raises(GuarddiagError, match=r"x\.xlsx: unsupported table format"):
        read_table(tmp_path / "x.xlsx")


def test_json_is_canonical(tmp_path):
    obj = {"b": 1, "a": [1.5, "é"]}
    assert dumps_json(obj) == '{\n  "a": [\n    1.5,\n    "é"\n  ],\n  "b": 1\n}\n'
    write_json(obj, tmp_path / "o.json")
    assert json.loads((tmp_path / "o.json").read_text()) == obj
    with pytest.raises(ValueError, match="Out of range float"):
        dumps_json({"x": float("nan")})


def test_atomic_writes_get_ordinary_permissions(tmp_path):
    import os
    import stat

    umask = os.umask(0o022)
    try:
        path = write_json({"a": 1}, tmp_path / "perm.json")
    finally:
        os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_jsonl_has_the_rows_with_keys_sorted_at_every_level(tmp_path):
    # The oracle: the standard library's json.dumps(sort_keys=True) of each row as polars
    # hands it over (to_dicts), compared as parsed values and as key order.
    frame = pl.DataFrame({
        "zeta": ["naïve “café”\t\n\\", "plain"],
        "alpha": [[{"y": 1.5, "b": "x", "m": None}], []],
        "mid": [{"k": "v", "a": [1, 2]}, None],
    })
    path = write_jsonl(frame, tmp_path / "rows.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == frame.to_dicts()
    expected = [json.dumps(row, sort_keys=True, ensure_ascii=False) for row in frame.to_dicts()]
    # Parsed as lists of (key, value) pairs, the order of the keys counts too.
    assert ([json.loads(line, object_pairs_hook=list) for line in lines]
            == [json.loads(line, object_pairs_hook=list) for line in expected])
    assert [k for k, _ in json.loads(lines[0], object_pairs_hook=list)[1][1]] == ["a", "k"]
    empty = write_jsonl(frame.head(0), tmp_path / "none.jsonl")
    assert empty.read_bytes() == b""
