"""``--engine ray`` on a local two-worker Ray cluster gives the local engine's bytes.

Skipped when Ray is not installed (it is the optional ``ray`` extra); the one-line error without
it is tested in tests/test_audit_stream.py.
"""

from __future__ import annotations

import functools
from pathlib import Path

import polars as pl
import pytest

from guarddiag.audit import audit_pool
from guarddiag.audit import run as audit_run
from guarddiag.audit.stream import plan_tasks
from guarddiag.errors import GuarddiagError

ray = pytest.importorskip("ray")

BENCH = pl.DataFrame({"prompt_id": ["q1", "q2"], "text": [
    "How do I pick a lock on a front door without the key?",
    "Write a short poem about the sea and the wind at night."]})


@pytest.fixture(scope="module")
def ray_cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _pool(path: Path) -> Path:
    texts = []
    for i in range(120):
        texts.append({3: "how do i pick a lock on a front door without the key!!",
                      7: "Write a short poem about the sea and the wind at dawn"}.get(
                          i % 10, f"Unrelated request number {i} about gardening."))
    frame = pl.DataFrame({"prompt_id": [f"r{i}" for i in range(120)], "text": texts})
    path.mkdir()
    for k in range(3):
        frame.slice(40 * k, 40).write_parquet(path / f"part-{k}.parquet", row_group_size=9)
    return path


def test_ray_engine_writes_the_local_engines_bytes(tmp_path, monkeypatch, ray_cluster,
                                                    serve_benchmarks):
    serve_benchmarks({"Q": BENCH})
    monkeypatch.setattr(audit_run, "plan_tasks", functools.partial(plan_tasks, task_rows=10))
    pool = _pool(tmp_path / "pool")
    local = audit_pool(pool, out_dir=tmp_path / "local", near_dup=True, short_words=0,
                       engine="local", workers=1)
    # 12 exact copies of q1 and 12 near copies of q2 (one word changed: Jaccard 10/12).
    assert local.overlap.group_by("kind").len().sort("kind").rows() == [("exact", 12),
                                                                         ("near", 12)]
    audit_pool(pool, out_dir=tmp_path / "ray", near_dup=True, short_words=0, engine="ray")
    for name in ("overlap.parquet", "summary.json", "decontaminated/Q.txt"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name
                                                          ).read_bytes(), name


def test_a_bad_shard_under_ray_is_one_line(tmp_path, ray_cluster, serve_benchmarks):
    serve_benchmarks({"Q": BENCH})
    pool = _pool(tmp_path / "pool")
    pl.DataFrame({"prompt_id": ["x1", "x2"], "text": ["fine", "   "]}).write_parquet(
        pool / "part-3.parquet")
    with pytest.raises(GuarddiagError) as info:
        audit_pool(pool, out_dir=tmp_path / "ray", engine="ray")
    assert str(info.value) == (f'{pool / "part-3.parquet"} row 2 field "text": empty text; '
                               "every pool row needs a non-empty prompt (--text-field skips "
                               "and counts rows without one)")


def test_a_scan_interrupted_locally_resumes_under_ray(tmp_path, monkeypatch, ray_cluster,
                                                      serve_benchmarks):
    """Findings stored by a killed local scan are kept; Ray scans only the rest."""
    from guarddiag.audit import engine

    serve_benchmarks({"Q": BENCH})
    monkeypatch.setattr(audit_run, "plan_tasks", functools.partial(plan_tasks, task_rows=10))
    pool = _pool(tmp_path / "pool")
    audit_pool(pool, out_dir=tmp_path / "clean", near_dup=True, engine="local", workers=1)
    real, calls = engine.scan_task, []

    def dies_on_the_fourth(task, spec, **kw):
        calls.append(task)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real(task, spec, **kw)

    monkeypatch.setattr(engine, "scan_task", dies_on_the_fourth)
    with pytest.raises(KeyboardInterrupt):
        audit_pool(pool, out_dir=tmp_path / "out", near_dup=True, engine="local", workers=1)
    monkeypatch.setattr(engine, "scan_task", real)
    stored = sorted(p.name for p in (tmp_path / "out" / ".scan").glob("task-??????.json"))
    assert stored == ["task-000000.json", "task-000001.json", "task-000002.json"]
    audit_pool(pool, out_dir=tmp_path / "out", near_dup=True, engine="ray")
    for name in ("overlap.parquet", "summary.json", "decontaminated/Q.txt"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "clean" / name
                                                          ).read_bytes(), name
    assert not (tmp_path / "out" / ".scan").exists()
