"""Audits add up (issue 28.3): an audit of one benchmark into a folder that holds an audit of
others keeps their lists, when pool and options are the same; it refuses otherwise, naming the
difference. Every expected id below is read off the hand-written pool and benchmarks."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest

from guarddiag import data
from guarddiag.audit import audit_pool
from guarddiag.audit.merge import PREVIOUS_FOLDER
from guarddiag.audit.provenance import read_audit_records
from guarddiag.errors import GuarddiagError

ADV = pl.DataFrame({"prompt_id": ["a1", "a2", "a3", "a4"],
                    "text": ["How do I pick a lock?", "Write a poem about the sea",
                             "Explain how vaccines work", "Give me a pancake recipe"]})
TEAM = pl.DataFrame({"prompt_id": ["t1", "t2", "t3"],
                     "text": ["Describe the water cycle", "Tell me a joke",
                              "Name three rivers"]})
POOL_TEXTS = ["how do i pick a lock", "WRITE A POEM ABOUT THE SEA!", "tell me a joke",
              "bake bread", "water a plant"]


def serve(monkeypatch, frames: dict[str, pl.DataFrame]) -> None:
    """``guarddiag.data`` serves ``frames`` as the benchmarks, honouring the id selection."""
    def load(ids="all", **_):
        names = list(frames) if ids == "all" else \
            (ids.split(",") if isinstance(ids, str) else list(ids))
        return SimpleNamespace(frames={k: frames[k] for k in names}, unavailable=[],
                               sha256={k: f"sha-{k}" for k in names})
    monkeypatch.setattr(data, "load_benchmarks", load)
    monkeypatch.setattr(data, "load_manifests", lambda **_: {})


def write_pool(path: Path, texts: list[str]) -> Path:
    pl.DataFrame({"prompt_id": [f"p{i}" for i in range(len(texts))], "text": texts}
                 ).write_parquet(path)
    return path


def kept(audit: Path, bench: str) -> list[str]:
    return (audit / "decontaminated" / f"{bench}.txt").read_text(encoding="utf-8").split()


@pytest.fixture
def full(tmp_path, monkeypatch):
    """The full audit (advbench, team_harmful not yet added) in tmp/audit."""
    serve(monkeypatch, {"advbench": ADV})
    pool = write_pool(tmp_path / "pool.parquet", POOL_TEXTS)
    audit_pool(pool, out_dir=tmp_path / "audit", workers=1, figure=False)
    serve(monkeypatch, {"advbench": ADV, "team_harmful": TEAM})
    return pool, tmp_path / "audit"


def test_a_one_benchmark_audit_adds_its_list_and_keeps_the_others(full):
    pool, audit = full
    adv_before = (audit / "decontaminated" / "advbench.txt").read_bytes()
    assert kept(audit, "advbench") == ["a3", "a4"]          # a1, a2 are in the pool
    result = audit_pool(pool, benchmarks="team_harmful", out_dir=audit, workers=1,
                        figure=False)
    assert (audit / "decontaminated" / "advbench.txt").read_bytes() == adv_before
    assert kept(audit, "team_harmful") == ["t1", "t3"]      # t2 is pool row p2
    summary = json.loads((audit / "summary.json").read_text(encoding="utf-8"))
    assert summary["benchmark_order"] == ["advbench", "team_harmful"]
    assert (summary["benchmarks"]["advbench"]["n_kept"],
            summary["benchmarks"]["team_harmful"]["n_kept"]) == (2, 2)
    assert [b.benchmark for b in result.benchmarks] == ["advbench", "team_harmful"]
    overlap = pl.read_parquet(audit / "overlap.parquet")
    assert sorted(overlap.select("benchmark", "prompt_id").rows()) == [
        ("advbench", "a1"), ("advbench", "a2"), ("team_harmful", "t2")]
    records = read_audit_records(audit)
    assert records["advbench"].pool_sha256 == records["team_harmful"].pool_sha256
    assert records["advbench"].audit_id != records["team_harmful"].audit_id  # two audit runs
    assert (records["team_harmful"].n, records["team_harmful"].n_kept) == (3, 2)
    assert not (audit / PREVIOUS_FOLDER).exists()


def test_other_options_are_refused_naming_the_difference(full):
    pool, audit = full
    before = {p.name: p.read_bytes() for p in audit.rglob("*") if p.is_file()}
    with pytest.raises(GuarddiagError) as exc:
        audit_pool(pool, benchmarks="team_harmful", out_dir=audit, workers=1, figure=False,
                   near_dup=True)
    message = str(exc.value)
    assert "near_dup False there, True now" in message
    assert "use the same pool and options, audit" in message   # nothing to switch on here
    with pytest.raises(GuarddiagError, match="templates off there, True now"):
        audit_pool(pool, benchmarks="team_harmful", out_dir=audit, workers=1, figure=False,
                   templates=True)
    assert "advbench" in message
    assert "\n" not in message
    assert {p.name: p.read_bytes() for p in audit.rglob("*") if p.is_file()} == before


def test_the_refusal_spells_the_folders_options_as_flags(tmp_path, monkeypatch):
    serve(monkeypatch, {"advbench": ADV})
    pool = write_pool(tmp_path / "pool.parquet", POOL_TEXTS)
    audit_pool(pool, out_dir=tmp_path / "audit", workers=1, figure=False, near_dup=True,
               templates=True, threshold=0.7)
    serve(monkeypatch, {"advbench": ADV, "team_harmful": TEAM})
    with pytest.raises(GuarddiagError, match=r"use the same pool and options \(--near-dup "
                                             r"--templates --threshold 0.7\)"):
        audit_pool(pool, benchmarks="team_harmful", out_dir=tmp_path / "audit", workers=1,
                   figure=False)


def test_another_pool_is_refused_unless_the_audit_replaces_every_list(full, tmp_path):
    _, audit = full
    other = write_pool(tmp_path / "other.parquet", ["describe the water cycle", "bake bread"])
    with pytest.raises(GuarddiagError, match=r"another pool \(pool sha256 .* there, .* now\)"):
        audit_pool(other, benchmarks="team_harmful", out_dir=audit, workers=1, figure=False)
    assert kept(audit, "advbench") == ["a3", "a4"]
    # Covering every benchmark the folder holds replaces it: nothing of the old pool is left.
    audit_pool(other, benchmarks="advbench,team_harmful", out_dir=audit, workers=1,
               figure=False)
    assert kept(audit, "advbench") == ["a1", "a2", "a3", "a4"]
    assert kept(audit, "team_harmful") == ["t2", "t3"]


def test_a_merge_stopped_while_writing_loses_nothing(full, monkeypatch):
    import guarddiag.audit.run as run

    pool, audit = full

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "write_audit", killed)
    with pytest.raises(KeyboardInterrupt):
        audit_pool(pool, benchmarks="team_harmful", out_dir=audit, workers=1, figure=False)
    assert not (audit / "summary.json").exists()            # the folder vouches for nothing
    assert (audit / PREVIOUS_FOLDER / "summary.json").is_file()
    monkeypatch.undo()
    serve(monkeypatch, {"advbench": ADV, "team_harmful": TEAM})
    audit_pool(pool, benchmarks="team_harmful", out_dir=audit, workers=1, figure=False)
    assert kept(audit, "advbench") == ["a3", "a4"]
    assert kept(audit, "team_harmful") == ["t1", "t3"]
    assert not (audit / PREVIOUS_FOLDER).exists()
