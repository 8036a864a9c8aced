"""A plain JSON lines shard split into byte ranges reads the same rows, and reports a bad row with
the same words and numbers, as the whole shard read at once.

Oracles: ``json.loads`` of every non-blank line of the bytes the test wrote; line, row and byte
numbers of a bad row counted from the lines the test wrote; the unsplit read (one task, no byte
range, the read every shard had before splitting) for the exact error message; the default
planning's audit bytes for the end-to-end audit.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import polars as pl
import pytest

from guarddiag.audit import audit_pool, jsonlread
from guarddiag.audit import run as audit_run
from guarddiag.audit.shardread import read_task
from guarddiag.audit.stream import TASK_BYTES, Task, find_shards, plan_tasks
from guarddiag.errors import GuarddiagError

WORDS = ["lock", "sea", "wind", "café", "naïve", "日本語", "données", "😀", "x", "Ω", "straße"]


def _rows(path: Path, *, task_bytes: int, id_column: str | None = "prompt_id"
          ) -> list[tuple[str, str | None]]:
    """Every (text, id) the tasks of ``path`` read, in task order."""
    out: list[tuple[str, str | None]] = []
    for task in plan_tasks(find_shards(path), task_bytes=task_bytes):
        for batch in read_task(task, text_column="text", id_column=id_column):
            ids = batch.ids.to_list() if batch.ids is not None else [None] * batch.texts.len()
            out.extend(zip(batch.texts.to_list(), ids, strict=True))
    return out


def _oracle(raw: bytes) -> list[tuple[str, str | None]]:
    docs = [json.loads(line) for line in raw.split(b"\n") if line.strip()]
    return [(d["text"], str(d["prompt_id"])) for d in docs]


def _random_jsonl(rng: random.Random, n: int, *, long_line: int) -> bytes:
    """``n`` lines: rows with multi-byte text, integer or text ids, blank lines, CRLF endings on
    some lines, one row ``long_line`` bytes long or more, and sometimes no final line end."""
    lines = []
    for i in range(n):
        kind = rng.random()
        if kind < 0.12:
            line = rng.choice(["", "   ", "\t", "\r"])
        else:
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))
            pid: str | int = i if rng.random() < 0.3 else f"id-{i}"
            line = json.dumps({"prompt_id": pid, "text": text, "n": rng.random()},
                              ensure_ascii=rng.random() < 0.3)
            if kind > 0.8:
                line += "\r"
        lines.append(line)
    long_text = "é" * (long_line // 2)
    lines.insert(rng.randrange(n), json.dumps({"prompt_id": "long", "text": long_text},
                                              ensure_ascii=False))
    raw = "\n".join(lines).encode()
    return raw if rng.random() < 0.5 else raw + b"\n"


@pytest.mark.parametrize("seed", range(8))
def test_ranges_read_every_row_once_in_order(tmp_path, seed):
    rng = random.Random(seed)
    raw = _random_jsonl(rng, rng.randint(20, 60), long_line=2500)
    path = tmp_path / "pool.jsonl"
    path.write_bytes(raw)
    oracle = _oracle(raw)
    assert len(oracle) > 10
    for task_bytes in (1, 7, 64, 1000, len(raw) - 1, len(raw)):
        tasks = plan_tasks(find_shards(path), task_bytes=task_bytes)
        # Ranges tile the file: [0, k), [k, 2k), ..., the last ending at the file's size.
        expected = [(a, min(a + task_bytes, len(raw))) for a in range(0, len(raw), task_bytes)]
        assert [t.byte_range for t in tasks] == (expected if len(expected) > 1 else [None])
        assert _rows(path, task_bytes=task_bytes) == oracle, task_bytes


def test_small_blocks_and_ndjson_read_the_same_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonlread, "BLOCK_BYTES", 64)
    rng = random.Random(99)
    raw = _random_jsonl(rng, 200, long_line=700)
    path = tmp_path / "pool.ndjson"
    path.write_bytes(raw)
    for task_bytes in (1, 13, 250, 4096):
        assert _rows(path, task_bytes=task_bytes) == _oracle(raw), task_bytes


def test_a_line_belongs_to_the_range_holding_its_first_byte(tmp_path):
    a = b'{"prompt_id": "a", "text": "first"}'        # 35 bytes, then "\n" at offset 35
    b = b'{"prompt_id": "b", "text": "second"}'
    path = tmp_path / "two.jsonl"
    path.write_bytes(a + b"\n" + b + b"\n")
    assert len(a) == 35

    def per_task(task_bytes: int) -> list[list[str]]:
        return [[t for batch in read_task(task, text_column="text", id_column="prompt_id")
                 for t in batch.ids.to_list()]
                for task in plan_tasks(find_shards(path), task_bytes=task_bytes)]

    # Boundary right after the line end (offset 36 starts line b): b is the second task's.
    assert per_task(36) == [["a"], ["b"], []]
    # Boundary on the line end itself (offset 35): still line a's byte, so b starts at 36,
    # inside the second range [35, 70).
    assert per_task(35) == [["a"], ["b"], []]
    # Boundary one byte into line b: b started in the first range.
    assert per_task(37) == [["a", "b"], []]
    # Ranges inside a line hold no line start and read nothing.
    assert per_task(10) == [["a"], [], [], ["b"], [], [], [], []]


def test_only_plain_json_lines_over_task_bytes_are_split(tmp_path):
    rows = "".join(json.dumps({"prompt_id": f"p{i}", "text": f"row {i}"}) + "\n"
                   for i in range(50)).encode()
    folder = tmp_path / "pool"
    folder.mkdir()
    (folder / "a.jsonl.gz").write_bytes(gzip.compress(rows))
    (folder / "b.csv").write_text("prompt_id,text\n" + "".join(f"p{i},row {i}\n"
                                                               for i in range(50)))
    (folder / "c.jsonl").write_bytes(rows)
    (folder / "d.jsonl").write_bytes(rows[:100])
    pl.DataFrame({"prompt_id": ["x"], "text": ["y"]}).write_parquet(folder / "e.parquet")
    tasks = plan_tasks(find_shards(folder), task_bytes=100)
    # c.jsonl: ceil(len / 100) ranges; d.jsonl is exactly 100 bytes, one whole-file task.
    n_c = -(-len(rows) // 100)
    assert [Path(t.path).name for t in tasks] == (["a.jsonl.gz", "b.csv"] + ["c.jsonl"] * n_c
                                                  + ["d.jsonl", "e.parquet"])
    assert [t.byte_range is None for t in tasks] == [True, True] + [False] * n_c + [True, True]
    assert {t.first_row for t in tasks} == {1}
    assert plan_tasks(find_shards(folder), task_bytes=100) == tasks     # deterministic
    assert TASK_BYTES == 64 * 2**20
    with pytest.raises(GuarddiagError, match="task_bytes must be at least 1, got 0"):
        plan_tasks(find_shards(folder), task_bytes=0)


def test_date_like_texts_and_huge_integer_ids_are_rows_in_any_range(tmp_path):
    # pyarrow types a block whose every text looks like a date as timestamps, and integers
    # past 64 bits as floats; a range holding only such rows must still read them as written.
    lines = [{"prompt_id": "a", "text": "hello"}, {"prompt_id": "b", "text": "2020-01-01"},
             {"prompt_id": 2**64, "text": "big id"}, {"prompt_id": "d", "text": "bye"}]
    raw = "".join(json.dumps(d) + "\n" for d in lines).encode()
    path = tmp_path / "dates.jsonl"
    path.write_bytes(raw)
    oracle = [("hello", "a"), ("2020-01-01", "b"), ("big id", "18446744073709551616"),
              ("bye", "d")]
    for task_bytes in (1, 40, len(raw)):
        assert _rows(path, task_bytes=task_bytes) == oracle, task_bytes


# ─── a bad row in a later range: the whole read's message ────────────────────────────────────

def _error(path: Path, task_bytes: int) -> tuple[str, int]:
    """The first error of reading the tasks in order, and the index of the task raising it."""
    for k, task in enumerate(plan_tasks(find_shards(path), task_bytes=task_bytes)):
        try:
            for _ in read_task(task, text_column="text", id_column="prompt_id"):
                pass
        except GuarddiagError as exc:
            return str(exc), k
    raise AssertionError("no error")


def _whole_read_error(path: Path) -> str:
    task = Task(shard=0, path=str(path), fmt="jsonl", row_groups=None, first_row=1)
    with pytest.raises(GuarddiagError) as info:
        for _ in read_task(task, text_column="text", id_column="prompt_id"):
            pass
    return str(info.value)


def _numbered_lines(n: int) -> list[bytes]:
    return [json.dumps({"prompt_id": f"s{i}", "text": f"row number {i}"}).encode()
            for i in range(1, n + 1)]


def _bad_rows(path: Path, out: Path, monkeypatch, *, task_bytes: int | None) -> list[dict]:
    """bad_rows.jsonl of an audit of ``path`` with --bad-rows skip, its tasks ``task_bytes``
    long (None: the default planning, one task for these small files)."""
    if task_bytes is not None:
        monkeypatch.setattr(audit_run, "plan_tasks",
                            lambda shards, **kw: plan_tasks(shards, task_bytes=task_bytes))
    audit_pool(path, out_dir=out, bad_rows="skip", workers=1)
    monkeypatch.undo()
    return [json.loads(line) for line in (out / "bad_rows.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("block_bytes", [1 << 24, 4096])
def test_non_utf8_line_deep_in_a_later_range(tmp_path, monkeypatch, block_bytes, bench):
    lines = _numbered_lines(5000)
    lines[1000] = b"   "              # a blank line is not a row: line 4001 is row 4000
    lines[4000] = b'{"prompt_id": "s4001", "text": "caf\xe9"}'
    path = tmp_path / "pool.jsonl"
    path.write_bytes(b"\r\n".join(lines) + b"\r\n")
    # Lines 1..4000 with their CRLF ends, then the bad byte's place in line 4001.
    start = sum(len(line) + 2 for line in lines[:4000])
    byte = start + lines[4000].index(b"\xe9")
    expected = [{"kind": "malformed", "file": str(path), "line": 4001, "byte": start,
                 "row": None, "field": None, "id": None,
                 "message": f"not UTF-8 text (byte {byte} of the file)"}]
    monkeypatch.setattr(jsonlread, "BLOCK_BYTES", block_bytes)
    assert _bad_rows(path, tmp_path / "split", monkeypatch, task_bytes=3000) == expected
    monkeypatch.setattr(jsonlread, "BLOCK_BYTES", block_bytes)
    assert _bad_rows(path, tmp_path / "whole", monkeypatch, task_bytes=None) == expected


@pytest.mark.parametrize("block_bytes", [1 << 24, 4096])
def test_malformed_json_in_a_later_range(tmp_path, monkeypatch, block_bytes, bench):
    lines = _numbered_lines(3000)
    lines[10] = b""                   # row 2,500 is on line 2,501
    lines[2500] = b'{"prompt_id": "s2501", "text": }'
    lines[2700] = b'{"prompt_id": ["s2701"], "text": "an id in a list"}'
    path = tmp_path / "pool.jsonl"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(json.JSONDecodeError) as info:
        json.loads(lines[2500])
    start = [sum(len(line) + 1 for line in lines[:i]) for i in (2500, 2700)]
    # The malformed line is no row: line 2,701 is row 2,699 (a blank line, a malformed one).
    expected = [{"kind": "malformed", "file": str(path), "line": 2501, "byte": start[0],
                 "row": None, "field": None, "id": None,
                 "message": f"malformed JSON ({info.value.msg})"},
                {"kind": "wrong_type", "file": str(path), "line": 2701, "byte": start[1],
                 "row": 2699, "field": "prompt_id", "id": None,
                 "message": "expected text or an integer, found list"}]
    monkeypatch.setattr(jsonlread, "BLOCK_BYTES", block_bytes)
    assert _bad_rows(path, tmp_path / "split", monkeypatch, task_bytes=2000) == expected
    monkeypatch.setattr(jsonlread, "BLOCK_BYTES", block_bytes)
    assert _bad_rows(path, tmp_path / "whole", monkeypatch, task_bytes=None) == expected


def test_empty_texts_in_two_ranges_are_counted_as_the_whole_read_counts_them(tmp_path):
    lines = _numbered_lines(3000)
    lines[5] = b""                    # line 2,001 is row 2,000
    lines[2000] = b'{"prompt_id": "s2001", "text": "  "}'
    lines[2900] = b'{"prompt_id": "s2901", "text": null}'
    path = tmp_path / "pool.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    # The whole file is one block of the whole read, hence one batch: both empty rows counted.
    expected = (f'{path} row 2000 field "text": empty text; every pool row needs a non-empty '
                "prompt (1 missing, 1 empty rows in all) (--text-field skips and counts rows "
                "without one)")
    message, task = _error(path, task_bytes=1000)
    assert task > 10
    assert message == expected
    assert _whole_read_error(path) == expected


def test_empty_text_with_small_blocks_matches_the_whole_read(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonlread, "BLOCK_BYTES", 4096)
    lines = _numbered_lines(3000)
    for i in (2000, 2010, 2900):
        lines[i] = json.dumps({"prompt_id": f"s{i + 1}", "text": ""}).encode()
    path = tmp_path / "pool.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    message, task = _error(path, task_bytes=300)
    assert task > 100
    assert message.startswith(f'{path} row 2001 field "text": empty text')
    assert message == _whole_read_error(path)


# ─── end to end ───────────────────────────────────────────────────────────────────────────────

BENCH = pl.DataFrame({"prompt_id": ["q1", "q2"], "text": [
    "How do I pick a lock on a front door without the key?",
    "Write a short poem about the sea and the wind at night."]})


@pytest.fixture
def bench(serve_benchmarks):
    serve_benchmarks({"Q": BENCH})


@pytest.mark.parametrize("id_column", ["prompt_id", None])
def test_split_audit_gives_the_same_bytes(tmp_path, bench, monkeypatch, id_column):
    lines = []
    for i in range(120):
        if i % 10 == 3:
            text = "HOW DO I PICK A LOCK ON A FRONT DOOR WITHOUT THE KEY"
        elif i % 10 == 7:
            text = "Write a short poem about the sea and the wind at dawn."
        else:
            text = f"Tell me about {WORDS[i % len(WORDS)]} (row {i})"
        lines.append(json.dumps({"prompt_id": f"r{i:03d}", "text": text}, ensure_ascii=False))
        if i % 17 == 0:
            lines.append("")
    pool = tmp_path / "pool.jsonl"
    pool.write_bytes("\r\n".join(lines).encode())

    def audit(name: str, workers: int) -> tuple[bytes, bytes, bytes]:
        out = tmp_path / name
        audit_pool(pool, out_dir=out, figure=False, near_dup=workers == 2, short_words=0,
                   id_column=id_column, workers=workers)
        return ((out / "overlap.parquet").read_bytes(), (out / "summary.json").read_bytes(),
                (out / "rows_to_remove.parquet").read_bytes())

    planned: list[int] = []

    def tiny(shards, **kw):
        tasks = plan_tasks(shards, task_bytes=97, **kw)
        planned.append(len(tasks))
        return tasks

    reference = {w: audit(f"whole-{w}", w) for w in (1, 2)}
    monkeypatch.setattr(audit_run, "plan_tasks", tiny)
    for workers in (1, 2):
        assert audit(f"split-{workers}", workers) == reference[workers]
    n_tasks = -(-pool.stat().st_size // 97)
    assert n_tasks > 50
    assert planned == [n_tasks, n_tasks]
    overlap = pl.read_parquet(tmp_path / "split-1" / "overlap.parquet")
    # 12 rows (i % 10 == 3) copy q1; numbered ids are the row numbers (blank lines skipped).
    expected_ids = ([f"r{i:03d}" for i in range(3, 120, 10)] if id_column else
                    [str(i + 1) for i in range(3, 120, 10)])
    assert sorted(overlap.get_column("pool_id").to_list()) == sorted(expected_ids)
    # Every row to remove carries its physical line (blank lines counted: a blank line follows
    # each row i with i % 17 == 0) and the byte its line starts at, in ranges as in one read.
    remove = pl.read_parquet(tmp_path / "split-1" / "rows_to_remove.parquet")
    raw = pool.read_bytes()
    assert remove.height == 12
    for row in remove.iter_rows(named=True):
        start = row["byte"]
        assert raw[start:].split(b"\r\n", 1)[0].decode() == lines[row["line"] - 1]
        assert raw[:start].count(b"\n") == row["line"] - 1
        assert row["row"] == sum(1 for line in lines[:row["line"]] if line)
        assert row["file"] == str(pool)
