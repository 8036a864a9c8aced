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

import pytest

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


@pytest.fixture(scope="session", autouse=True)
def status_lines_on_stderr():
    """Status lines (``logging`` records of guarddiag.*) on the captured stderr, as the command
    line shows them, whichever test runs first: tests of API calls read them there too."""
    from guarddiag.progress import log_to_stderr

    log_to_stderr()


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
