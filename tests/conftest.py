"""Shared fixtures.

Tests that need the public data directory use ``real_data_dir``: it skips locally when
$GUARDDIAG_DATA is unset, and fails under CI=true, where the data must be there.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest

import guarddiag  # noqa: F401  (pins torch's CPU kernels, guarddiag.numerics, before any test runs one)

os.environ.setdefault("GUARDDIAG_PROGRESS", "0")
# A relative data directory (the README's GUARDDIAG_DATA=../shared/data) is relative to where
# pytest started; tests that chdir into a temporary folder must still find it.
if os.environ.get("GUARDDIAG_DATA"):
    os.environ["GUARDDIAG_DATA"] = str(Path(os.environ["GUARDDIAG_DATA"]).expanduser().resolve())


@pytest.fixture(scope="session")
def real_data_dir() -> Path:
    env = os.environ.get("GUARDDIAG_DATA")
    if env and (Path(env) / "benchmarks").is_dir():
        return Path(env)
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true but GUARDDIAG_DATA does not point at a data directory")
    pytest.skip("set GUARDDIAG_DATA to the public data directory to run this test")


@pytest.fixture
def serve_benchmarks(monkeypatch) -> Callable[..., None]:
    """Call it with {subset id: frame} (and optional unavailable subsets): for the rest of the
    test ``guarddiag.data`` serves those frames as the benchmarks (digest ``sha-<id>``), with
    no manifests, so an audit runs without the public data."""
    from guarddiag import data

    def serve(frames: Mapping[str, Any], *, unavailable: Sequence[Any] = ()) -> None:
        served = SimpleNamespace(frames=dict(frames), unavailable=list(unavailable),
                                 sha256={k: f"sha-{k}" for k in frames})
        monkeypatch.setattr(data, "load_benchmarks", lambda ids="all", **_: served)
        monkeypatch.setattr(data, "load_manifests", lambda **_: {})

    return serve


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models gain nothing from intra-op threads, and on a shared 2-core machine two
    spinning OpenMP threads per process slow training ~10x (see guarddiag.model.auto_threads)."""
    from guarddiag.model import torch_threads

    with torch_threads(1):
        yield


STATES_ENV = "GUARDDIAG_STATES"  # guarddiag.model.states.STATES_ENV (that module loads torch)


@pytest.fixture(scope="session", autouse=True)
def states_cache_in_tmp(tmp_path_factory):
    """Frozen-encoder states (guarddiag.model.states) go to a session temp folder, never to
    the user's ~/.cache: tests embed each text once per session and leave nothing behind."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(STATES_ENV, str(tmp_path_factory.mktemp("states")))
        yield


@pytest.fixture(autouse=True)
def user_data_in_tmp(tmp_path_factory, monkeypatch):
    """The user's own folder (``data add``'s manifests, guarddiag.paths.user_data_dir) is a
    fresh temp folder in every test, never ~/.local/share: tests neither see nor leave one."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg")))


@pytest.fixture(scope="session", autouse=True)
def status_lines_on_stderr():
    """Status lines (``logging`` records of guarddiag.*) on the captured stderr, as the command
    line shows them, whichever test runs first: tests of API calls read them there too."""
    from guarddiag.progress import log_to_stderr

    log_to_stderr()


GGUF_ENV = "GUARDDIAG_GGUF"  # guarddiag.gguf.GGUF_ENV


@pytest.fixture(scope="session", autouse=True)
def gguf_cache_in_tmp(tmp_path_factory):
    """De-quantised GGUF models (guarddiag.gguf) go to a session temp folder, never to
    the user's ~/.cache: the real-model tests convert the file once per session."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(GGUF_ENV, str(tmp_path_factory.mktemp("gguf")))
        yield


CACHE_ENV = "GUARDDIAG_CACHE"  # guarddiag.paths.CACHE_ENV


@pytest.fixture(scope="session", autouse=True)
def derived_cache_in_tmp(tmp_path_factory):
    """Derived caches (the audit's benchmark normal forms) go to a session temp folder, never
    to the user's ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CACHE_ENV, str(tmp_path_factory.mktemp("cache")))
        yield


# Folders of the repository that no test may write into (tests write under tmp_path only).
# Source folders are not watched: they change while one edits the code.
_WATCHED = ("reports", "work", "runs", "data_manifests", "branches")


def _snapshot(root: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in _WATCHED:
        base = root / name
        if base.is_dir():
            for p in base.rglob("*"):
                if p.is_file() and "__pycache__" not in p.parts:
                    out[p.relative_to(root).as_posix()] = p.stat().st_mtime_ns
    return out


@pytest.fixture(scope="session", autouse=True)
def repository_left_untouched():
    """Fail the run if a test created or rewrote a file under reports/, work/, runs/,
    data_manifests/ or branches/ of the repository (issue 18: `git status` clean after the
    tests)."""
    root = Path(__file__).resolve().parents[1]
    before = _snapshot(root)
    yield
    after = _snapshot(root)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert changed == [], f"tests wrote into the repository (use tmp_path): {changed[:20]}"


_AUDITED = ("overlap.parquet", "rows_to_remove.parquet", "rows_to_remove.jsonl", "summary.json")


@pytest.fixture
def audit_both_ways(tmp_path, serve_benchmarks, monkeypatch) -> Callable[..., Any]:
    """Call it with pool ``texts``, benchmark ``forms`` and ``near``: the pool is audited
    twice, first as a small pool (loading the compiled kernel, or starting its warm-up, fails the
    test), then with the size rule of :mod:`guarddiag.audit.kernelchoice` at 0. Returns both
    results, each run's output bytes, and the row count of every batch the compiled kernel read
    (a warm-up's too)."""
    from guarddiag.audit import audit_pool, kernelchoice, kernels, neardup
    from guarddiag.audit import run as audit_run

    def run(texts: Sequence[str], forms: Sequence[str], *, near: bool) -> SimpleNamespace:
        monkeypatch.delenv(kernelchoice.SCAN_KERNEL_ENV, raising=False)
        serve_benchmarks({"Q": pl.DataFrame({"prompt_id": [f"q{i}" for i in range(len(forms))],
                                             "text": list(forms)})})
        pool = tmp_path / "pool.parquet"
        pl.DataFrame({"prompt_id": [f"r{i}" for i in range(len(texts))], "text": list(texts)}
                     ).write_parquet(pool)
        index, warm, size, kernel = (
            ("compile_index", "warm_compiled_probe", "COMPILED_NEAR_BYTES", "text_near_rows")
            if near else ("compile_keys", "warm_exact_kernel", "COMPILED_EXACT_BYTES",
                          "exact_rows"))

        def refuse(*_: object) -> None:
            raise AssertionError("the compiled kernel was loaded for a small pool")

        with monkeypatch.context() as patch:
            patch.setattr(kernels, index, refuse)
            patch.setattr(audit_run, warm, refuse)
            vectorised = audit_pool(pool, out_dir=tmp_path / "v", near_dup=near, figure=False)
        monkeypatch.setattr(kernelchoice, size, 0)
        if near:
            monkeypatch.setattr(neardup, "_COMPILED_PAIRS_FROM", 0)
        calls: list[int] = []
        real = getattr(kernels, kernel)

        def counted(batch: pl.Series, compiled_index: object) -> object:
            calls.append(batch.len())
            return real(batch, compiled_index)

        monkeypatch.setattr(kernels, kernel, counted)
        compiled = audit_pool(pool, out_dir=tmp_path / "c", near_dup=near, figure=False)
        return SimpleNamespace(
            vectorised=vectorised, compiled=compiled, calls=calls,
            vectorised_bytes={n: (tmp_path / "v" / n).read_bytes() for n in _AUDITED},
            compiled_bytes={n: (tmp_path / "c" / n).read_bytes() for n in _AUDITED})

    return run
