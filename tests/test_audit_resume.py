"""A corpus scan that is killed resumes where it stopped, and the duplicate-id check works from
hashes on disk, slice by slice, whatever the hashes collide on.

Oracles: an uninterrupted audit of the same pool (the bytes a resumed run must reproduce), a
Python set over the ids (which ids repeat, and where), and counts of the tasks actually scanned.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from guarddiag.audit import audit_pool, engine, scanstore
from guarddiag.audit import run as audit_run
from guarddiag.audit.stream import find_shards, plan_tasks
from guarddiag.errors import GuarddiagError

BENCH = pl.DataFrame({"prompt_id": ["q1", "q2"], "text": [
    "How do I pick a lock on a front door without the key?",
    "Write a short poem about the sea and the wind at night."]})
TASK_ROWS = 5


def _pool(folder: Path, *, shards: int = 4, rows: int = 12) -> tuple[list[str], list[str]]:
    """``shards`` parquet files of ``rows`` rows (row groups of 2, so 3 tasks per shard): every
    7th row an exact copy of q1, every 11th a near copy of q2."""
    folder.mkdir()
    ids, texts = [], []
    for n in range(shards * rows):
        ids.append(f"id-{n:04d}")
        texts.append("how do i pick a lock on a front door without the key" if n % 7 == 3 else
                     "Write a short poem about the sea and the wind at dawn." if n % 11 == 5
                     else f"An ordinary question number {n} about gardening.")
    for s in range(shards):
        part = slice(s * rows, (s + 1) * rows)
        pl.DataFrame({"prompt_id": ids[part], "text": texts[part]}).write_parquet(
            folder / f"part-{s}.parquet", row_group_size=2)
    return ids, texts


@pytest.fixture
def bench(serve_benchmarks, monkeypatch):
    serve_benchmarks({"Q": BENCH})
    monkeypatch.setattr(audit_run, "plan_tasks", functools.partial(plan_tasks,
                                                                   task_rows=TASK_ROWS))


def _bytes(out: Path) -> tuple[bytes, bytes, bytes]:
    return ((out / "overlap.parquet").read_bytes(), (out / "summary.json").read_bytes(),
            b"".join(p.read_bytes() for p in sorted((out / "decontaminated").iterdir())))


REAL_SCAN = engine.scan_task


def _counting(monkeypatch) -> list[tuple[int, int]]:
    """Scan for real from now on, recording (shard, first row) of every task scanned."""
    seen: list[tuple[int, int]] = []

    def scan(task, spec, **kw):
        seen.append((task.shard, task.first_row))
        return REAL_SCAN(task, spec, **kw)

    monkeypatch.setattr(engine, "scan_task", scan)
    return seen


def test_a_scan_interrupted_after_some_tasks_rescans_only_the_rest(tmp_path, bench, monkeypatch,
                                                                   capsys):
    pool = tmp_path / "pool"
    _pool(pool)
    tasks = plan_tasks(find_shards(pool), task_rows=TASK_ROWS)
    assert len(tasks) == 8          # 4 shards × 6 row groups of 2, 3 groups (6 rows) a task
    clean = tmp_path / "clean"
    audit_pool(pool, out_dir=clean, figure=False, near_dup=True, workers=1)

    out = tmp_path / "out"
    real, calls = REAL_SCAN, []

    def dies_on_the_fifth(task, spec, **kw):
        calls.append(task)
        if len(calls) == 5:
            raise KeyboardInterrupt     # what Ctrl-C does in the middle of a task
        return real(task, spec, **kw)

    monkeypatch.setattr(engine, "scan_task", dies_on_the_fifth)
    with pytest.raises(KeyboardInterrupt):
        audit_pool(pool, out_dir=out, figure=False, near_dup=True, workers=1)
    assert not (out / "summary.json").exists()
    assert not (out / "meta.json").exists()
    assert len(list((out / ".scan").glob("task-??????.json"))) == 4
    capsys.readouterr()

    seen = _counting(monkeypatch)
    audit_pool(pool, out_dir=out, figure=False, near_dup=True, workers=1)
    assert "resuming the scan" in capsys.readouterr().err
    assert seen == [(t.shard, t.first_row) for t in tasks[4:]]
    assert _bytes(out) == _bytes(clean)
    assert not (out / ".scan").exists()


def test_a_task_killed_while_its_findings_were_written_is_scanned_again(tmp_path, bench,
                                                                        monkeypatch):
    pool = tmp_path / "pool"
    _pool(pool, shards=2)
    clean = tmp_path / "clean"
    audit_pool(pool, out_dir=clean, figure=False, workers=1)
    real_save, saved = scanstore.ScanStore.save, []

    def save_then_die(self, index, findings):
        if len(saved) == 2:
            # The candidates are on disk, the marker is not: the task is not finished.
            scanstore.files.write_parquet(pl.DataFrame({"row": [0]}),
                                          self._path(index, ".parquet"))
            raise KeyboardInterrupt
        saved.append(index)
        real_save(self, index, findings)

    monkeypatch.setattr(scanstore.ScanStore, "save", save_then_die)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        audit_pool(pool, out_dir=out, figure=False, workers=1)
    monkeypatch.setattr(scanstore.ScanStore, "save", real_save)
    seen = _counting(monkeypatch)
    audit_pool(pool, out_dir=out, figure=False, workers=1)
    assert len(seen) == 4 - 2
    assert _bytes(out) == _bytes(clean)


def test_a_really_killed_process_resumes(tmp_path):
    """SIGKILL in the middle of the third task (no clean-up runs), then a rerun from the CLI."""
    pool = tmp_path / "pool"
    _pool(pool)
    script = textwrap.dedent(f"""
        import functools, os, signal, sys
        from types import SimpleNamespace
        import polars as pl
        from guarddiag import data
        from guarddiag.audit import engine, run
        from guarddiag.audit.stream import plan_tasks
        from guarddiag.cli import main

        bench = pl.DataFrame({{"prompt_id": {BENCH['prompt_id'].to_list()!r},
                               "text": {BENCH['text'].to_list()!r}}})
        data.load_benchmarks = lambda ids="all", **_: SimpleNamespace(
            frames={{"Q": bench}}, unavailable=[], sha256={{"Q": "sha-q"}})
        data.load_manifests = lambda **_: {{}}
        run.plan_tasks = functools.partial(plan_tasks, task_rows={TASK_ROWS})
        if sys.argv[1] == "kill":
            real, calls = engine.scan_task, []
            def scan(task, spec, **kw):
                calls.append(task)
                if len(calls) == 3:
                    os.kill(os.getpid(), signal.SIGKILL)
                return real(task, spec, **kw)
            engine.scan_task = scan
        sys.exit(main(["audit", "--pool", sys.argv[2], "--out", sys.argv[3], "--near-dup",
                       "--workers", "1"]))
    """)
    env = {**os.environ, "GUARDDIAG_PROGRESS": "0"}

    def run(mode: str, out: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", script, mode, str(pool), str(out)],
                              capture_output=True, text=True, env=env, timeout=300)

    killed = run("kill", tmp_path / "out")
    assert killed.returncode == -9
    assert sorted(p.name for p in (tmp_path / "out" / ".scan").glob("task-??????.json")) == [
        "task-000000.json", "task-000001.json"]
    resumed = run("resume", tmp_path / "out")
    assert resumed.returncode == 0, resumed.stderr
    assert "2 of 8 task(s) already scanned" in resumed.stderr
    clean = run("clean", tmp_path / "clean")
    assert clean.returncode == 0, clean.stderr
    assert "resuming" not in clean.stderr
    assert _bytes(tmp_path / "out") == _bytes(tmp_path / "clean")


def test_findings_for_other_options_a_changed_pool_or_force_are_not_reused(tmp_path, bench,
                                                                           monkeypatch):
    pool = tmp_path / "pool"
    _pool(pool, shards=2)
    out = tmp_path / "out"
    real, calls = REAL_SCAN, []

    def dies_on_the_third(task, spec, **kw):
        calls.append(task)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(task, spec, **kw)

    def interrupted(**options) -> None:
        calls.clear()
        monkeypatch.setattr(engine, "scan_task", dies_on_the_third)
        with pytest.raises(KeyboardInterrupt):
            audit_pool(pool, out_dir=out, figure=False, workers=1, **options)
        monkeypatch.setattr(engine, "scan_task", real)

    # Other options: a near-dup scan's findings are not an exact-only scan's.
    interrupted(near_dup=True)
    seen = _counting(monkeypatch)
    audit_pool(pool, out_dir=out, figure=False, workers=1)
    assert len(seen) == 4
    # A changed shard: its rows are scanned again, and the new text is what is audited.
    interrupted(near_dup=True, force=True)
    frame = pl.read_parquet(pool / "part-0.parquet")
    frame.with_columns(pl.when(pl.col("prompt_id") == "id-0000").then(pl.lit(BENCH["text"][1]))
                       .otherwise(pl.col("text")).alias("text")).write_parquet(
        pool / "part-0.parquet", row_group_size=2)
    seen = _counting(monkeypatch)
    res = audit_pool(pool, out_dir=out, figure=False, workers=1, near_dup=True)
    assert len(seen) == 4
    assert "id-0000" in res.overlap.filter(pl.col("kind") == "exact")["pool_id"].to_list()
    # force: start over even where the findings would fit.
    interrupted(near_dup=True, force=True)
    seen = _counting(monkeypatch)
    audit_pool(pool, out_dir=out, figure=False, workers=1, near_dup=True, force=True)
    assert len(seen) == 4


def test_the_scan_starts_while_the_pools_digest_is_computed_when_nothing_can_be_reused(
        tmp_path, bench, monkeypatch):
    """A first audit into a fresh folder (or --force) needs the pool's sha256 only to name its
    results: its id pass starts before the digest returns. A folder holding a saved audit
    waits for the digest, which decides whether that audit is current."""
    pool = tmp_path / "pool"
    _pool(pool, shards=2)
    started = threading.Event()
    seen: list[bool] = []
    wait = [5.0]
    real_ids, real_digest = engine.ids_task, audit_run.pool_digest

    def ids_task(task, spec):
        started.set()
        return real_ids(task, spec)

    def slow_digest(shards):
        seen.append(started.wait(timeout=wait[0]))
        return real_digest(shards)

    monkeypatch.setattr(engine, "ids_task", ids_task)
    monkeypatch.setattr(audit_run, "pool_digest", slow_digest)
    out = tmp_path / "out"
    first = audit_pool(pool, out_dir=out, figure=False, workers=1)
    again = audit_pool(pool, out_dir=out, figure=False, workers=1, force=True)
    assert seen == [True, True]
    started.clear()
    wait[0] = 0.5
    cached = audit_pool(pool, out_dir=out, figure=False, workers=1)   # the saved audit
    assert seen == [True, True, False]
    assert first.benchmarks == again.benchmarks == cached.benchmarks
    assert first.overlap.height == 3
    assert first.overlap.equals(cached.overlap)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["inputs"]["pool"] == real_digest(find_shards(pool))


def test_a_store_names_itself_once_its_key_is_known_and_before_it_keeps_a_task(tmp_path):
    """Opened before the key is known, the store keeps the id pass's files at once and is
    named when the key comes; a task's findings wait for it. A store never named is emptied
    when opened again."""
    tasks = plan_tasks(find_shards(_pool_file(tmp_path)), task_rows=2)
    ids = scanstore.TaskIds(rows=2, id_hashes=np.array([1, 2], dtype=np.uint64))
    key: Future[str] = Future()
    store = scanstore.ScanStore(tmp_path / "store", key=key, tasks=tasks)
    store.save_ids(0, ids)
    assert not (tmp_path / "store" / "store.json").exists()
    assert store.checked() == {0}
    key.set_result("the-key")
    store.save_ids(1, ids)
    assert json.loads((tmp_path / "store" / "store.json").read_text())["key"] == "the-key"
    assert scanstore.ScanStore(tmp_path / "store", key="the-key", tasks=tasks).checked() == {0, 1}

    unnamed: Future[str] = Future()
    store = scanstore.ScanStore(tmp_path / "other", key=unnamed, tasks=tasks)
    store.save_ids(0, ids)
    assert scanstore.ScanStore(tmp_path / "other", key="the-key", tasks=tasks).checked() == set()

    later: Future[str] = Future()
    store = scanstore.ScanStore(tmp_path / "third", key=later, tasks=tasks)
    threading.Timer(0.2, later.set_result, ("the-key",)).start()
    store.save(0, scanstore.TaskFindings(rows=2, candidates=()))
    assert json.loads((tmp_path / "third" / "store.json").read_text())["key"] == "the-key"
    assert scanstore.ScanStore(tmp_path / "third", key="the-key", tasks=tasks).finished() == {0}


def _pool_file(folder: Path) -> Path:
    path = folder / "pool.parquet"
    pl.DataFrame({"prompt_id": ["a", "b", "c", "d"], "text": ["w", "x", "y", "z"]}
                 ).write_parquet(path, row_group_size=2)
    return path


# ─── duplicate ids from hashes on disk ────────────────────────────────────────────────────────

def _with_ids(folder: Path, ids: list[str], *, shards: int) -> None:
    folder.mkdir()
    per = -(-len(ids) // shards)
    for s in range(shards):
        part = ids[s * per:(s + 1) * per]
        pl.DataFrame({"prompt_id": part, "text": [f"text of {i}" for i in part]}).write_parquet(
            folder / f"part-{s}.parquet", row_group_size=3)


def _oracle_holders(folder: Path, ids: list[str], per: int) -> list[tuple[str, int, str]]:
    """(shard, row within it, id) of every row whose id another row holds too, in pool
    order."""
    counts: dict[str, int] = {}
    for i in ids:
        counts[i] = counts.get(i, 0) + 1
    return [(f"{folder}/part-{n // per}.parquet", n % per + 1, i) for n, i in enumerate(ids)
            if counts[i] > 1]


def _listed(out: Path) -> list[tuple[str, int, str]]:
    rows = [json.loads(line) for line in (out / "bad_rows.jsonl").read_text().splitlines()]
    assert {r["kind"] for r in rows} == {"repeated_id"}
    return [(r["file"], r["row"], r["id"]) for r in rows]


@pytest.mark.parametrize("collide", [False, True], ids=["real-hash", "every-hash-collides"])
def test_duplicate_ids_are_found_slice_by_slice_and_confirmed_on_the_ids(tmp_path, bench,
                                                                         monkeypatch, collide):
    monkeypatch.setattr(scanstore, "SLICE_HASHES", 7)     # many slices of the 64-bit range
    if collide:
        # A hash of 4 values: 200 distinct ids collide all over, and only ids may tell.
        def coarse(ids: pl.Series) -> np.ndarray:
            return (ids.str.len_bytes().cast(pl.UInt64) % 4).to_numpy()

        monkeypatch.setattr(scanstore, "id_hashes", coarse)
        monkeypatch.setattr(engine, "id_hashes", coarse)
    rng = np.random.default_rng(7)
    unique = [f"u{n}" + "x" * int(rng.integers(0, 9)) for n in range(200)]
    _with_ids(tmp_path / "unique", unique, shards=4)
    res = audit_pool(tmp_path / "unique", out_dir=tmp_path / "a", figure=False, workers=2)
    assert res.pool_rows == 200

    for trial in range(3):
        ids = list(unique)
        a, b = sorted(rng.choice(200, size=2, replace=False).tolist())
        ids[b] = ids[a]                     # one id used twice, anywhere in the pool
        c, d = sorted(rng.choice(200, size=2, replace=False).tolist())
        ids[d] = ids[c]                     # and maybe a second one
        folder = tmp_path / f"dup{trial}"
        _with_ids(folder, ids, shards=4)
        holders = _oracle_holders(folder, ids, per=50)
        with pytest.raises(GuarddiagError) as err:
            audit_pool(folder, out_dir=tmp_path / f"o{trial}", figure=False, workers=2)
        assert str(err.value).startswith(f"{len(holders)} bad rows in the pool ({len(holders)} "
                                         "with a repeated id)")
        assert _listed(tmp_path / f"o{trial}") == holders
        # Skipped: every holder is audited under its address, and the audit finishes.
        res = audit_pool(folder, out_dir=tmp_path / f"o{trial}", figure=False, workers=2,
                         bad_rows="skip")
        assert res.pool_rows == 200
        assert res.bad_rows["repeated_id"] == len(holders)
        assert _listed(tmp_path / f"o{trial}") == holders


def test_hash_slices_cover_the_whole_64_bit_range(tmp_path, monkeypatch):
    """Hashes at the range's ends and on slice bounds land in exactly one slice."""
    edges = np.array([0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 2, (1 << 64) - 1],
                     dtype=np.uint64)
    rng = np.random.default_rng(3)
    values = np.concatenate([edges, rng.integers(0, 1 << 63, 500, dtype=np.uint64) * 2,
                             edges])
    paths = []
    for k, part in enumerate(np.array_split(values, 5)):
        path = tmp_path / f"h{k}.npy"
        np.save(path, np.sort(part))
        paths.append(path)
    for size in (1, 3, 64, 10_000):
        monkeypatch.setattr(scanstore, "SLICE_HASHES", size)
        got = scanstore.repeated_hashes(paths)
        counts = {}
        for v in values.tolist():
            counts[v] = counts.get(v, 0) + 1
        assert got.tolist() == sorted(v for v, c in counts.items() if c > 1), size


@pytest.mark.parametrize(("workers", "near"), [(1, False), (2, False), (3, True)],
                         ids=["one-worker", "threads", "processes"])
def test_the_first_bad_shard_in_pool_order_is_reported_whoever_finishes_first(
        tmp_path, bench, workers, near):
    """Shards 1 and 3 of 5 are bad; shard 1 is small and slow to fail (its bad row is last)
    while shard 3 fails on its first row: the error is shard 1's, as an in-order scan says."""
    folder = tmp_path / "pool"
    folder.mkdir()
    for s in range(5):
        lines = [f'{{"prompt_id": "p{s}-{n}", "text": "row {n} of shard {s}"}}'
                 for n in range(40_000 if s == 1 else 400)]
        if s == 1:
            lines[-1] = f'{{"prompt_id": "p1-x", "text": "{"word " * 20}"'     # malformed
        if s == 3:
            lines[0] = '{"prompt_id": {"p3": "x"}, "text": "an id in an object"}'
        (folder / f"part-{s}.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(GuarddiagError) as err:
        audit_pool(folder, out_dir=tmp_path / "out", figure=False, workers=workers,
                   near_dup=near)
    # Every bad row of the pool, after the whole scan, in pool order whoever finished first.
    assert str(err.value).startswith(
        f"2 bad rows in the pool (1 malformed, 1 wrong-typed), all listed in "
        f"{tmp_path / 'out' / 'bad_rows.jsonl'}; first: {folder}/part-1.jsonl line 40000: "
        f"malformed JSON (Expecting ',' delimiter); {folder}/part-3.jsonl line 1 (row "
        '1) field "prompt_id": expected text or an integer, found dict.')
    # Nothing looks complete, and the scanned tasks are kept: the rerun that skips them scans
    # nothing again.
    assert not (tmp_path / "out" / "summary.json").exists()
    assert (tmp_path / "out" / ".scan").is_dir()
    res = audit_pool(folder, out_dir=tmp_path / "out", figure=False, workers=workers,
                     near_dup=near, bad_rows="skip")
    assert res.pool_rows == 4 * 400 + 39_999
    assert res.bad_rows["malformed"] == 1


def test_an_id_used_three_times_is_named_at_its_second_row(tmp_path, bench):
    ids = [f"u{n}" for n in range(60)]
    ids[20] = ids[41] = ids[55] = ids[5]       # rows 6, 21, 42 and 56 share one id
    _with_ids(tmp_path / "pool", ids, shards=3)
    with pytest.raises(GuarddiagError) as err:
        audit_pool(tmp_path / "pool", out_dir=tmp_path / "out", figure=False, workers=1)
    folder = tmp_path / "pool"
    # Every holder, the first too, at its own row (20 rows a shard).
    assert _listed(tmp_path / "out") == [(f"{folder}/part-{s}.parquet", row, "u5")
                                         for s, row in ((0, 6), (1, 1), (2, 2), (2, 16))]
    assert str(err.value).startswith(
        f"4 bad rows in the pool (4 with a repeated id), all listed in {tmp_path}/out/"
        f"bad_rows.jsonl; first: {folder}/part-0.parquet row 6 field \"prompt_id\": repeated "
        f"id 'u5': 4 rows hold it (first: {folder}/part-0.parquet row 6);")
