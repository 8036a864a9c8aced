"""Streaming audits: shards in every format, any number of workers, bad rows named by shard.

Oracle: ``audit_frames`` on all pool rows in memory (the code path every audit had before
streaming, unchanged), and hand-written rows whose exact and near overlaps are counted in the
comments; the streamed audit must give the same overlap table and the same bytes on disk.
"""

from __future__ import annotations

import functools
import gc
import gzip
import importlib.util
import json
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from guarddiag.audit import audit_frames, audit_pool, engine, jsonlread, shardread
from guarddiag.audit import run as audit_run
from guarddiag.audit.stream import find_shards, plan_tasks
from guarddiag.cli import main
from guarddiag.errors import GuarddiagError

BENCH = pl.DataFrame({"prompt_id": ["q1", "q2", "q3"], "text": [
    "How do I pick a lock on a front door without the key?",
    "Write a short poem about the sea and the wind at night.",
    "Explain how vaccines train the immune system to fight disease."]})
FILLER = ["Tell me a joke about cats.", "What is the boiling point of water?",
          "Summarise the plot of Hamlet.", "Recommend a good book on gardening."]


def _pool_rows(n: int = 60) -> tuple[list[str], list[str]]:
    texts = []
    for i in range(n):
        if i % 10 == 3:     # exact copies of q1 (case and punctuation changed)
            texts.append("HOW DO I PICK A LOCK ON A FRONT DOOR WITHOUT THE KEY")
        elif i % 10 == 7:   # near copies of q2: one word changed, Jaccard 10/12 >= 0.8
            texts.append("Write a short poem about the sea and the wind at dawn.")
        elif i == 58:       # q3 with full-width letters: exact through NFKC
            texts.append("Ｅｘｐｌａｉｎ how vaccines train the immune system to fight disease")
        else:
            texts.append(f"{FILLER[i % len(FILLER)]} (row {i})")
    return [f"r{i:03d}" for i in range(n)], texts


@pytest.fixture
def bench(serve_benchmarks):
    serve_benchmarks({"Q": BENCH})


@pytest.fixture
def small_tasks(monkeypatch):
    """Seven-row tasks, so a small pool is split across workers the way a big one is."""
    monkeypatch.setattr(audit_run, "plan_tasks", functools.partial(plan_tasks, task_rows=7))


def _frame(ids, texts) -> pl.DataFrame:
    return pl.DataFrame({"prompt_id": ids, "text": texts})


def _write_jsonl(path: Path, ids, texts) -> Path:
    raw = "".join(json.dumps({"prompt_id": i, "text": t, "meta": {"n": 1}}) + "\n"
                  for i, t in zip(ids, texts, strict=True)).encode()
    if path.name.endswith(".gz"):
        raw = gzip.compress(raw)
    elif path.name.endswith(".zst"):
        with pa.output_stream(str(path), compression="zstd") as out:
            out.write(raw)
        return path
    path.write_bytes(raw)
    return path


def _audit(pool, out: Path, **kw):
    return audit_pool(pool, out_dir=out, figure=False, near_dup=True, short_words=0, **kw)


def _bytes(out: Path) -> tuple[bytes, bytes]:
    return (out / "overlap.parquet").read_bytes(), (out / "summary.json").read_bytes()


def test_shards_in_every_format_give_the_in_memory_audit(tmp_path, bench, small_tasks):
    ids, texts = _pool_rows()
    oracle = audit_frames(ids, texts, {"Q": BENCH}, near_dup=True, short_words=0)
    # 6 exact copies of q1, the full-width q3, 6 near copies of q2.
    assert oracle.overlap.group_by("kind").len().sort("kind").rows() == [("exact", 7),
                                                                          ("near", 6)]
    single = tmp_path / "pool.parquet"
    _frame(ids, texts).write_parquet(single, row_group_size=5)
    reference = _audit(single, tmp_path / "ref", workers=1)
    assert reference.overlap.equals(oracle.overlap)
    assert reference.pool_rows == 60
    assert reference.decontaminated == oracle.decontaminated

    parts = [(0, 20), (20, 35), (35, 60)]
    shards = tmp_path / "jsonl"
    shards.mkdir()
    for k, (suffix, (a, b)) in enumerate(zip([".jsonl", ".jsonl.gz", ".jsonl.zst"], parts,
                                             strict=True)):
        _write_jsonl(shards / f"part-{k}{suffix}", ids[a:b], texts[a:b])
    csvs = tmp_path / "csv"
    csvs.mkdir()
    _frame(ids[:30], texts[:30]).write_csv(csvs / "a.csv")
    (csvs / "b.csv.gz").write_bytes(gzip.compress(_frame(ids[30:], texts[30:]).write_csv()
                                                  .encode()))
    tsv = tmp_path / "pool.tsv"
    _frame(ids, texts).write_csv(tsv, separator="\t")
    pools = {"glob": str(shards / "part-*"), "folder": shards, "csv": csvs, "tsv": tsv}
    if importlib.util.find_spec("datasets") is not None:
        import datasets

        hf = tmp_path / "hf"
        datasets.Dataset.from_dict({"prompt_id": ids, "text": texts, "n": list(range(60))}
                                   ).save_to_disk(str(hf), max_shard_size="2KB")
        assert len(find_shards(hf)) > 1
        pools["datasets"] = hf
    for name, pool in pools.items():
        res = _audit(pool, tmp_path / name, workers=1)
        assert res.pool_rows == 60, name
        assert _bytes(tmp_path / name) == _bytes(tmp_path / "ref"), name


def test_worker_count_and_order_of_finishing_do_not_change_the_bytes(tmp_path, bench,
                                                                       small_tasks):
    ids, texts = _pool_rows(90)
    pool = tmp_path / "pool.parquet"
    _frame(ids, texts).write_parquet(pool, row_group_size=4)
    assert len(plan_tasks(find_shards(pool), task_rows=7)) == 12
    outs = []
    for workers in (1, 2, 3):
        for near in (False, True):
            out = tmp_path / f"w{workers}-{near}"
            audit_pool(pool, out_dir=out, figure=False, near_dup=near, short_words=0,
                       templates=True, workers=workers)
            outs.append((near, _bytes(out)))
    for near in (False, True):
        assert len({b for n, b in outs if n == near}) == 1


def test_numbered_rows_continue_across_shards(tmp_path, bench):
    ids, texts = _pool_rows()
    folder = tmp_path / "shards"
    folder.mkdir()
    _frame(ids[:25], texts[:25]).write_parquet(folder / "a.parquet")
    _frame(ids[25:], texts[25:]).write_parquet(folder / "b.parquet")
    res = audit_pool(folder, out_dir=tmp_path / "a", figure=False, id_column=None)
    # Row i of the pool (0-based) is numbered i + 1: rows 3, 13, ..., 53 and 58 are exact.
    assert res.overlap.get_column("pool_id").to_list() == [str(i + 1) for i in
                                                          (3, 13, 23, 33, 43, 53, 58)]


# ─── bad input: one line naming the shard and the row, nothing left looking complete ──────────

def _one_line(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert "Traceback" not in err
    return err


def _finished_before(tmp_path: Path, capsys) -> Path:
    """An audit folder a previous, successful run left."""
    ids, texts = _pool_rows()
    good = tmp_path / "good.parquet"
    _frame(ids, texts).write_parquet(good)
    out = tmp_path / "audit"
    audit_pool(good, out_dir=out, figure=False)
    assert (out / "summary.json").is_file()
    assert (out / "meta.json").is_file()
    capsys.readouterr()
    return out


def test_non_utf8_row_deep_in_a_jsonl_shard(tmp_path, bench, capsys, monkeypatch):
    # Small blocks, so the bad line sits many blocks into the file (as row 3,000,001 would).
    monkeypatch.setattr(jsonlread, "BLOCK_BYTES", 4096)
    out = _finished_before(tmp_path, capsys)
    ids, texts = _pool_rows()
    shards = tmp_path / "corpus"
    shards.mkdir()
    _write_jsonl(shards / "part-0.jsonl", ids, texts)
    lines = [json.dumps({"prompt_id": f"s{i}", "text": f"row number {i}"}).encode()
             for i in range(1, 5001)]
    lines[3000] = b'{"prompt_id": "s3001", "text": "caf\xe9"}'
    lines[1000] = b"   "              # a blank line is not a row: line 3001 is row 3000
    (shards / "part-1.jsonl.gz").write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    assert main(["audit", "--pool", str(shards / "part-*"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    # Listed after the whole scan, with its line (blank lines counted) and the byte of the
    # decompressed file its line starts at.
    start = sum(len(line) + 1 for line in lines[:3000])
    byte = start + lines[3000].index(b"\xe9")
    assert (f"1 bad rows in the pool (1 malformed), all listed in {out / 'bad_rows.jsonl'}; "
            f"first: {shards / 'part-1.jsonl.gz'} line 3001: not UTF-8 text (byte {byte} of "
            "the decompressed file).") in err
    listed = json.loads((out / "bad_rows.jsonl").read_text())
    assert (listed["line"], listed["byte"], listed["kind"]) == (3001, start, "malformed")
    assert not (out / "summary.json").exists()
    assert not (out / "meta.json").exists()


def test_non_utf8_row_in_a_csv_shard(tmp_path, bench, capsys):
    pool = tmp_path / "pool.csv.gz"
    pool.write_bytes(gzip.compress(b"prompt_id,text\np1,hello\np2,\"two\nlines\"\n"
                                   b"p3,caf\xe9 au lait\n"))
    err = _one_line(capsys, ["audit", "--pool", str(pool), "--out", str(tmp_path / "a")])
    assert "pool.csv.gz line 5: not UTF-8 text" in err
    assert not (tmp_path / "a").exists()


def _parquet_with_bytes(path: Path, ids: list[str], raw: list[bytes], *, groups: int) -> Path:
    """A parquet file whose ``text`` column is declared UTF-8 but holds ``raw`` as it is (pyarrow
    writes what it is given; polars refuses such a file)."""
    import pyarrow.parquet as pq

    binary = pa.array(raw, type=pa.binary())
    text = pa.Array.from_buffers(pa.string(), len(binary), binary.buffers())
    pq.write_table(pa.table({"prompt_id": ids, "text": text}), path, row_group_size=groups)
    return path


def test_non_utf8_row_in_a_parquet_shard(tmp_path, bench, capsys, monkeypatch):
    # Tasks of two 4-row groups read in 3-row batches: the bad row is in the third task's
    # second batch, so its number comes from the task's and the batch's first rows.
    monkeypatch.setattr(audit_run, "plan_tasks", functools.partial(plan_tasks, task_rows=8))
    monkeypatch.setattr(engine, "read_task", functools.partial(shardread.read_task, batch_rows=3))
    out = _finished_before(tmp_path, capsys)
    raw = [f"row number {i}".encode() for i in range(1, 31)]
    raw[20] = b"caf\xe9 au lait"
    pool = _parquet_with_bytes(tmp_path / "pool.parquet", [f"p{i}" for i in range(1, 31)], raw,
                               groups=4)
    err = _one_line(capsys, ["audit", "--pool", str(pool), "--out", str(out)])
    assert err.endswith('pool.parquet row 21 field "text": not UTF-8 text (byte 3)')
    assert not (out / "summary.json").exists()


def test_parquet_batches_tile_each_task_with_their_first_rows(tmp_path):
    ids, texts = _pool_rows(23)
    pool = tmp_path / "pool.parquet"
    _frame(ids, texts).write_parquet(pool, row_group_size=4)
    tasks = plan_tasks(find_shards(pool), task_rows=7)
    assert [t.row_groups for t in tasks] == [(0, 1), (2, 3), (4, 5)]
    for batch_rows in (1, 3, 8, 100):
        got, counted = [], 0
        for task in tasks:
            for batch in shardread.read_task(task, text_column="text", id_column="prompt_id",
                                             batch_rows=batch_rows):
                assert batch.first_row == len(got) + 1
                assert batch.texts.len() <= batch_rows
                got.extend(zip(batch.ids.to_list(), batch.texts.to_list(), strict=True))
            # A pass that reads no column still counts every row.
            counted += sum(b.n_rows for b in shardread.read_task(
                task, text_column="text", id_column=None, ids_only=True, batch_rows=batch_rows))
        assert got == list(zip(ids, texts, strict=True)), batch_rows
        assert counted == 23


def test_missing_text_column_in_one_shard(tmp_path, bench, capsys):
    out = _finished_before(tmp_path, capsys)
    ids, texts = _pool_rows()
    folder = tmp_path / "shards"
    folder.mkdir()
    _frame(ids[:30], texts[:30]).write_parquet(folder / "part-0.parquet")
    pl.DataFrame({"prompt_id": ids[30:], "body": texts[30:]}).write_parquet(
        folder / "part-1.parquet")
    err = _one_line(capsys, ["audit", "--pool", str(folder), "--out", str(out)])
    assert "part-1.parquet: missing column(s) text; found prompt_id, body" in err
    assert not (out / "summary.json").exists()
    _write_jsonl(folder / "part-2.jsonl", ["x"], ["y"])
    (folder / "part-1.parquet").unlink()
    (folder / "part-3.jsonl").write_text('{"prompt_id": "z1", "body": "no text"}\n')
    err = _one_line(capsys, ["audit", "--pool", str(folder), "--out", str(out)])
    assert 'part-3.jsonl row 1: missing column(s) text (line 1); found prompt_id, body' in err


def test_empty_text_and_duplicate_ids_name_shard_and_row(tmp_path, bench, capsys):
    folder = tmp_path / "shards"
    folder.mkdir()
    _frame(["a1", "a2", "a3"], ["x", "y", "z"]).write_parquet(folder / "part-0.parquet")
    _frame(["b1", "a2"], ["u", "v"]).write_parquet(folder / "part-1.parquet")
    assert main(["audit", "--pool", str(folder), "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert (f"2 bad rows in the pool (2 with a repeated id), all listed in "
            f"{tmp_path / 'a' / 'bad_rows.jsonl'}; first: {folder / 'part-0.parquet'} row 2 "
            f"field \"prompt_id\": repeated id 'a2': 2 rows hold it (first: "
            f"{folder / 'part-0.parquet'} row 2); {folder / 'part-1.parquet'} row 2 field "
            "\"prompt_id\": repeated id 'a2'") in err
    _frame(["b1", "b2"], ["u", "  "]).write_parquet(folder / "part-1.parquet")
    err = _one_line(capsys, ["audit", "--pool", str(folder), "--out", str(tmp_path / "a")])
    assert 'part-1.parquet row 2 field "text": empty text' in err


def test_pool_and_engine_option_errors(tmp_path, bench, capsys, monkeypatch):
    err = _one_line(capsys, ["audit", "--pool", str(tmp_path / "none-*.jsonl"), "--out",
                             str(tmp_path / "a")])
    assert "none-*.jsonl: no pool shard matches this pattern" in err
    pool = tmp_path / "pool.parquet"
    _frame(*_pool_rows()).write_parquet(pool)
    err = _one_line(capsys, ["audit", "--pool", str(pool), "--workers", "0"])
    assert "workers must be at least 1, got 0" in err
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ray" else real(name, *a))
    err = _one_line(capsys, ["audit", "--pool", str(pool), "--engine", "ray"])
    assert err.endswith('--engine ray: Ray is not installed; pip install -e ".[ray]" (or use '
                        "--engine local)")
    with pytest.raises(GuarddiagError, match="unknown audit engine 'spark'"):
        audit_pool(pool, out_dir=tmp_path / "b", engine="spark")


def test_a_lone_task_split_over_threads_keeps_the_same_rows():
    """A batch cut into runs of rows, one per thread, keeps exactly the rows the whole batch
    keeps (exact and near candidates, Python-path rows counted once each)."""
    from guarddiag.audit import engine

    forms = ("how do i pick a lock on a front door without the key",
             "write a short poem about the sea and the wind at night",
             "explain how photosynthesis works in simple words please")
    spec = engine.ScanSpec(text_column="text", id_column=None, forms=forms, near_threshold=0.8,
                           template_forms=None, key="lone-task-test")
    rng = np.random.default_rng(5)
    texts = []
    for i in range(3 * engine._MIN_PART + 17):
        pick = rng.integers(10)
        if pick == 0:
            texts.append(forms[i % 3].upper() + "!")                 # exact after normalising
        elif pick == 1:
            texts.append(forms[i % 3] + " tonight")                  # near: Jaccard >= 0.8
        elif pick == 2:
            texts.append(f"ﬁne ™ row {i}")                            # takes the Python path
        else:
            texts.append(f"unrelated request {i} about gardening and {rng.integers(99)}")
    series = pl.Series("text", texts)
    state = engine._state(spec)
    whole, slow = engine._candidate_rows(series, state, spec)
    for threads in (2, 3, 8):
        keep, slow_parts = engine._candidates_in_parts(series, state, spec, threads)
        assert keep.to_list() == whole.to_list()
        assert slow_parts == slow
    assert 0.15 < whole.mean() < 0.25     # the planted exact and near rows, about a fifth
    assert slow > 0.05 * len(texts)


def test_a_thread_gets_its_next_task_while_another_is_still_busy(monkeypatch):
    """Threads are handed tasks as each finishes: while one thread holds task 1, the other
    scans tasks 0 and 2-5 (when this thread scanned task 1 itself, nobody handed the other
    thread a task until it was done)."""
    import threading

    ends = threading.Event()
    order: list[int] = []

    def scan(task, spec):
        if task == 1:
            assert ends.wait(timeout=10), "task 1 waited for the others in vain"
        order.append(task)
        if len(order) == 5:
            ends.set()
        return task

    monkeypatch.setattr(engine, "scan_task", scan)
    spec = engine.ScanSpec(text_column="text", id_column=None, forms=("a",), near_threshold=None,
                           template_forms=None)
    found = list(engine._local_map([(i, i) for i in range(6)], spec, workers=2))
    assert order == [0, 2, 3, 4, 5, 1]
    assert sorted(found) == [(i, i) for i in range(6)]


def test_the_near_probe_alone_keeps_the_exact_rows_unless_a_form_has_no_word():
    """With near-dups on, the scan skips the exact pass when every benchmark form has a word
    (equal forms have equal word sets, Jaccard 1): the rows kept are then exactly those a
    brute-force Jaccard finds. A form without a word (a control character) brings the exact
    pass back, or its copies would be lost."""
    from guarddiag.audit import engine
    from guarddiag.text import jaccard, normalise, words_of_normal_form

    forms = ("how do i pick a lock on a front door without the key",
             "write a short poem about the sea and the wind at night")
    rng = np.random.default_rng(11)
    texts = ["\x01", "\x01\x02", "How do I pick a lock on a FRONT door without the key?",
             "write a short poem about the sea and the wind at dawn", "ﬁne ™ row",
             "how do i pick a\x7flock on a front door without the key"]
    for i in range(400):      # a form's words, some dropped, some added, shuffled
        words = list(rng.permutation(forms[i % 2].split()))[int(rng.integers(0, 4)):]
        texts.append(" ".join(words + [f"extra{k}" for k in range(int(rng.integers(0, 3)))]))
    series = pl.Series("text", texts)

    def kept(spec_forms: tuple[str, ...], key: str) -> tuple[list[bool], bool]:
        spec = engine.ScanSpec(text_column="text", id_column=None, forms=spec_forms,
                               near_threshold=0.8, template_forms=None, key=key)
        state = engine._state(spec)
        return engine._candidate_rows(series, state, spec)[0].to_list(), state.near_finds_exact

    sets = [frozenset(words_of_normal_form(f)) for f in forms]
    expected = [any(s and w and jaccard(s, w) >= 0.8 for s in sets) for w in
                (frozenset(words_of_normal_form(normalise(t))) for t in texts)]
    got, near_only = kept(forms, "near-only")
    assert near_only
    assert got == expected
    assert 10 < sum(expected) < 390
    assert expected[2:4] == [True, True]
    assert expected[5]                  # a control character ends a word
    got, near_only = kept((*forms, "\x01"), "with-a-wordless-form")
    assert not near_only
    assert got[0]                       # the exact copy of the word-less form is kept
    assert not got[1]
    assert all(g for g, e in zip(got, expected, strict=True) if e)


def test_the_pool_is_hashed_while_the_benchmarks_load_and_never_waited_for_in_vain(
        tmp_path, bench, monkeypatch):
    """The pool's sha256 runs beside the benchmark loading; its result is the audit's, its
    error the audit's error, and a run that fails meanwhile returns without waiting for it."""
    import threading

    ids, texts = _pool_rows(20)
    pool = tmp_path / "pool.parquet"
    _frame(ids, texts).write_parquet(pool)
    real_digest, real_load = audit_run.pool_digest, audit_run.data.load_benchmarks
    both = threading.Barrier(2, timeout=20)   # passes only if the two run at the same time

    def digest(shards):
        both.wait()
        return real_digest(shards)

    def load(*args, **kwargs):
        both.wait()
        return real_load(*args, **kwargs)

    monkeypatch.setattr(audit_run, "pool_digest", digest)
    monkeypatch.setattr(audit_run.data, "load_benchmarks", load)
    res = _audit(pool, tmp_path / "a", workers=1)
    meta = json.loads((tmp_path / "a" / "meta.json").read_text())
    assert meta["inputs"]["pool"] == real_digest(find_shards(pool))
    assert res.pool_rows == 20

    def unreadable(shards):
        raise GuarddiagError(f"{shards[0].path}: cannot read")

    monkeypatch.setattr(audit_run, "pool_digest", unreadable)
    monkeypatch.setattr(audit_run.data, "load_benchmarks", real_load)
    with pytest.raises(GuarddiagError, match="cannot read"):
        _audit(pool, tmp_path / "b", workers=1)

    release, finished = threading.Event(), threading.Event()

    def slow(shards):
        release.wait(20)
        finished.set()
        return "0" * 64

    def broken(*args, **kwargs):
        raise GuarddiagError("benchmarks: broken")

    monkeypatch.setattr(audit_run, "pool_digest", slow)
    monkeypatch.setattr(audit_run.data, "load_benchmarks", broken)
    with pytest.raises(GuarddiagError, match="broken"):
        _audit(pool, tmp_path / "c", workers=1)
    assert not finished.is_set()      # the error came without waiting for the hash
    release.set()


def test_the_collector_leaves_the_objects_an_audit_starts_with_until_it_ends(
        tmp_path, bench, monkeypatch):
    frozen_during_scan: list[int] = []
    scan = audit_run.scan_pool

    def spying(*args, **kwargs):
        frozen_during_scan.append(gc.get_freeze_count())
        return scan(*args, **kwargs)

    monkeypatch.setattr(audit_run, "scan_pool", spying)
    ids, texts = _pool_rows()
    pool = tmp_path / "pool.parquet"
    _frame(ids, texts).write_parquet(pool)
    assert gc.get_freeze_count() == 0
    _audit(pool, tmp_path / "a")
    # Every imported module's objects, at least; all handed back at the end.
    assert frozen_during_scan[0] > 10_000
    assert gc.get_freeze_count() == 0
    # A process that froze objects itself is left as it is.
    gc.freeze()
    try:
        ours = gc.get_freeze_count()
        _audit(pool, tmp_path / "b")
        # (Frozen objects can still be freed, so the count may only fall.)
        assert 0.9 * ours < frozen_during_scan[1] <= ours
        assert 0.9 * ours < gc.get_freeze_count() <= ours
    finally:
        gc.unfreeze()
    assert _bytes(tmp_path / "a") == _bytes(tmp_path / "b")


def test_the_readers_allocate_from_jemalloc_and_the_default_pool_comes_back(
        tmp_path, bench, small_tasks, monkeypatch):
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        pytest.skip("this pyarrow has no jemalloc")
    ids, texts = _pool_rows()
    pool = tmp_path / "pool.arrow"
    _frame(ids, texts).write_ipc(pool)
    before = pa.default_memory_pool().backend_name
    assert before != "jemalloc"      # pyarrow's own default (mimalloc on Linux)
    reading: set[str] = set()
    arrow = shardread._arrow

    def recording(*args, **kwargs):
        reading.add(pa.default_memory_pool().backend_name)
        yield from arrow(*args, **kwargs)

    monkeypatch.setattr(shardread, "_arrow", recording)
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    _audit(pool, tmp_path / "a", workers=2)
    assert reading == {"jemalloc"}
    assert pa.default_memory_pool().backend_name == before
    # The same bytes as with pyarrow's default pool.
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", before)
    reading.clear()
    _audit(pool, tmp_path / "b", workers=2)
    assert reading == {before}
    assert _bytes(tmp_path / "a") == _bytes(tmp_path / "b")
    # A failed read gives the default back too.
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL")
    bad = tmp_path / "bad.parquet"
    _frame(ids[:3], ["ok", "", "ok"]).write_parquet(bad)
    with pytest.raises(GuarddiagError):
        _audit(bad, tmp_path / "c", workers=1)
    assert pa.default_memory_pool().backend_name == before


def test_a_lone_csv_task_says_how_far_it_has_read(tmp_path, bench, monkeypatch, caplog):
    # A CSV file is one task however big; its progress is counted in rows as batches arrive.
    from guarddiag.audit.stream import TaskProgress

    monkeypatch.setattr(TaskProgress, "EVERY", 0.0)
    monkeypatch.setattr(jsonlread, "BLOCK_BYTES", 4096)  # many small batches from one file
    n = 3000
    pool = tmp_path / "pool.csv"
    pool.write_text("prompt_id,text\n" + "".join(f"p{i},row number {i} of the corpus\n"
                                                 for i in range(n)), encoding="utf-8")
    with caplog.at_level("INFO", logger="guarddiag.audit.stream"):
        res = _audit(pool, tmp_path / "a", workers=1)
    assert res.pool_rows == n
    counts = [int(m.split(": ")[2].split(" rows")[0].replace(",", ""))
              for m in caplog.messages if m.startswith("audit: scan of pool.csv: ")]
    assert len(counts) >= 5  # 3,000 rows of ~30 bytes in 4 KiB blocks: about 20 batches
    assert counts == sorted(set(counts))
    assert counts[-1] == n
