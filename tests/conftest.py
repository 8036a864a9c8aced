"""Shared fixtures.

Tests that need the public data directory use ``real_data_dir``: it skips locally when
$GUARDDIAG_DATA is unset, and fails under CI=true, where the data must be there.
"""

from __future__ import annotations

import os
from pathlib import Path

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


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models gain nothing from intra-op threads, and on a shared 2-core machine two
    spinning OpenMP threads per process slow training ~10x (see guarddiag.model.auto_threads)."""
    from guarddiag.model import torch_threads

    with torch_threads(1):
        yield
