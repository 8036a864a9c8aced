"""The work folder's owners (guarddiag.paths): every stage asks them where a file lives."""

from __future__ import annotations

from pathlib import Path

from guarddiag.cli import build_parser
from guarddiag.paths import AuditFolder, PoolFolder, RunsFolder, WorkPaths


def test_the_layout_under_one_work_folder():
    w = WorkPaths.under("w")
    assert w.pool == PoolFolder(Path("w/pool")).table == Path("w/pool/pool.parquet")
    assert PoolFolder(w.pool.parent).meta == Path("w/pool/meta.json")
    assert w.predictions == Path("w/runs/predictions.parquet")
    assert w.outside == Path("w/runs/outside")
    assert w.runs_folder.cache == Path("w/runs/_cache")
    assert w.audit_folder.summary == Path("w/audit/summary.json")
    assert w.audit_folder.kept_ids("advbench") == Path("w/audit/decontaminated/advbench.txt")
    # The CLI's help quotes each option's default place; it reads it off the same layout.
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["report"]
    helps = {a.option_strings[0]: a.help for a in sub._actions if a.option_strings}
    assert "(default <work-dir>/pool/pool.parquet)" in helps["--pool"]
    assert "(default <work-dir>/audit)" in helps["--audit-dir"]
    assert "(default <work-dir>/runs)" in helps["--runs-dir"]


def test_an_outside_guards_files_and_the_tables_listed(tmp_path):
    folder = RunsFolder(tmp_path)
    folder.outside.mkdir()
    for run in ("zeta", "alpha"):
        files = folder.outside_guard(run)
        for path in (files.table, files.raw, files.meta, files.canaries):
            path.write_text("x")
        assert RunsFolder.meta_of(files.table) == files.meta
    # Only the predictions tables, in name order: raw answers and metas are not tables.
    assert folder.outside_tables() == [folder.outside / "alpha.parquet",
                                       folder.outside / "zeta.parquet"]
    assert folder.outside_metas() == [folder.outside / "alpha.meta.json",
                                      folder.outside / "zeta.meta.json"]


def test_an_audit_is_finished_once_both_last_files_are_there(tmp_path):
    folder = AuditFolder(tmp_path)
    assert not folder.is_finished()
    folder.summary.write_text("{}")
    assert not folder.is_finished()
    folder.meta.write_text("{}")
    assert folder.is_finished()
