"""Which CPU kernels torch computes with: the same bytes on every x86-64 CPU, or this CPU's fastest.

torch picks its CPU code by the processor it finds: ATen's vectorised kernels and oneDNN at
AVX-512 or AMX where they exist, and in MKL a vendor branch (Intel's AVX2 or AVX-512 kernels,
another on AMD; its vector square root is not even correctly rounded there). Each sums in its own
order, so a frozen encoder's states differ in the 7th digit from one machine to the next, the
guards trained on them differ by more, and a call near its boundary can flip (issue 47: 6 of 26).

The **portable** path (the default) holds every library to code that computes alike on any
x86-64 CPU with AVX2, Intel or AMD, whatever else it has:

* ATen's kernels at AVX2 (``ATEN_CPU_CAPABILITY=avx2``);
* oneDNN at AVX2 (``ONEDNN_MAX_CPU_ISA=AVX2``): it computes every linear layer
  (:mod:`guarddiag.model.portable`), as fast as the default path here;
* MKL's vendor-neutral branch (``MKL_CBWR=COMPATIBLE,STRICT``) for what still goes through it
  (attention's batched products, the whitening's covariance and eigenvectors);
* no ``torch.sqrt`` (MKL's) in training: fused AdamW, and NumPy's IEEE square root elsewhere.

Measured (``tests/test_numerics_portable.py``): a MiniLM encoder's states and a trained head's
weights are byte-identical on this AMD EPYC (AVX-512, avx512_bf16), with 1 to 16 threads and any
batch composition, and under QEMU as an Intel Haswell, an Intel Icelake and an AMD Rome.

torch reads the three variables once, when it first runs a kernel, so they are set when guarddiag
is imported (:func:`request`, called from ``guarddiag/__init__.py``). A process that ran a torch
kernel before importing guarddiag keeps torch's own choice: :func:`active` says so, the cached
states and run records name the kernels they were computed with, and nothing is mixed.

**native** (``GUARDDIAG_NUMERICS=native`` or ``guarddiag --numerics native``) leaves torch its own
choice: this CPU's fastest kernels, bf16 for the encoder where a timed probe finds it faster
(:func:`guarddiag.model.states.probe_numeric_path`). Same inputs give the same bytes on one
machine; another CPU gives other bits (states within ``rtol`` 1e-5) and may move a call.

This module imports no torch: setting the variables must come first.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from guarddiag.errors import GuarddiagError

logger = logging.getLogger(__name__)

NUMERICS_ENV = "GUARDDIAG_NUMERICS"
MODES = ("portable", "native")
DEFAULT_MODE = "portable"
PORTABLE_PINS: dict[str, str] = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                                 "MKL_CBWR": "COMPATIBLE,STRICT"}
"""What the portable path sets before torch runs: AVX2 code in ATen and oneDNN, MKL's
vendor-neutral branch with results independent of the thread count."""

_MKL_CBWR_BRANCH = 1
_MKL_CBWR_COMPATIBLE_STRICT = 0x10003
"""mkl_cbwr_get(MKL_CBWR_ALL) of ``COMPATIBLE,STRICT`` (mkl_service.h: COMPATIBLE 3, STRICT
0x10000)."""


def requested() -> str:
    """The mode asked for by ``GUARDDIAG_NUMERICS`` (default portable)."""
    mode = os.environ.get(NUMERICS_ENV, "").strip().lower() or DEFAULT_MODE
    if mode not in MODES:
        raise GuarddiagError(f"{NUMERICS_ENV}={os.environ[NUMERICS_ENV]!r}: expected one of "
                             f"{', '.join(MODES)}")
    return mode


def request(mode: str | None = None) -> None:
    """Ask for ``mode`` (default: :func:`requested`): portable sets :data:`PORTABLE_PINS`;
    native removes the pins this module set (a variable the user set stays). Takes effect only
    where torch has not yet run a kernel in this process (:func:`active` tells)."""
    if mode is None:
        try:
            mode = requested()
        except GuarddiagError:  # at import: active() reports the bad value, in one line
            os.environ.update(PORTABLE_PINS)
            return
    if mode not in MODES:
        raise GuarddiagError(f"numerics {mode!r}: expected one of {', '.join(MODES)}")
    env = child_env(mode)
    for key in (NUMERICS_ENV, *PORTABLE_PINS):
        if key in env:
            os.environ[key] = env[key]
        else:
            os.environ.pop(key, None)


def child_env(mode: str) -> dict[str, str]:
    """The environment of a child process that should compute on ``mode``'s kernels (this
    process's own are fixed once torch has run: a bench that compares paths runs each in a
    child)."""
    env = dict(os.environ)
    env[NUMERICS_ENV] = mode
    user = _user_pins()
    for key, value in PORTABLE_PINS.items():
        if mode == "portable":
            env[key] = value
        elif key in user:
            env[key] = user[key]
        else:
            env.pop(key, None)
    return env


def cpu_flags(*, wanted: tuple[str, ...] = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
              ) -> str:
    """The CPU's model name and which of ``wanted`` it has (Linux ``/proc/cpuinfo``), as quoted
    beside every timing: ``AMD EPYC: avx2 avx512f avx512_bf16 -amx_bf16``."""
    model, flags = "", set[str]()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not model:
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        import platform

        return platform.processor() or "unknown CPU"
    marks = " ".join(f if f in flags else f"-{f}" for f in wanted)
    return f"{model or 'unknown CPU'}: {marks}"


_USER_PINS = "_GUARDDIAG_USER_PINS"


def _user_pins() -> dict[str, str]:
    """The values of :data:`PORTABLE_PINS`' variables the user exported before guarddiag set
    its own (native restores them); kept in the environment so child processes know them too."""
    if _USER_PINS not in os.environ:
        os.environ[_USER_PINS] = json.dumps({k: os.environ[k] for k in PORTABLE_PINS
                                             if k in os.environ})
    return dict(json.loads(os.environ[_USER_PINS]))


@dataclass(frozen=True)
class NumericsState:
    """The kernels torch computes with in this process."""

    mode: str
    """``portable`` when every pin holds, else ``native``."""
    requested: str
    capability: str
    """ATen's kernel level (AVX2, AVX512, DEFAULT…)."""
    mkl_branch: str
    """MKL's conditional-reproducibility setting, or ``unknown`` where it cannot be read."""
    onednn_isa: str
    reason: str
    """Why a portable request is not portable here ("" when it is, or native was asked)."""

    @property
    def tag(self) -> str:
        """Names the kernels in cache keys and run records: ``portable`` or
        ``native-<capability>``."""
        return "portable" if self.mode == "portable" else f"native-{self.capability.lower()}"

    def to_dict(self) -> dict[str, str]:
        return {"mode": self.mode, "requested": self.requested, "tag": self.tag,
                "capability": self.capability, "mkl_branch": self.mkl_branch,
                "onednn_isa": self.onednn_isa, "reason": self.reason}


_WARNED: set[str] = set()


def active() -> NumericsState:
    """What torch actually uses (imports torch; after this, the kernels are fixed)."""
    import torch

    want = requested()
    capability = str(torch.backends.cpu.get_cpu_capability())
    branch = _mkl_branch(torch.__file__)
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "") or "default"
    problems = []
    if capability != "AVX2":
        problems.append(f"ATen runs {capability} kernels (this CPU lacks AVX2, or torch ran a "
                        "kernel before guarddiag was imported)")
    if branch not in ("COMPATIBLE,STRICT", "unknown"):
        problems.append(f"MKL's branch is {branch}")
    if isa != "AVX2":
        problems.append(f"oneDNN is not held to AVX2 ({isa})")
    portable = want == "portable" and not problems
    reason = "; ".join(problems) if want == "portable" else ""
    state = NumericsState("portable" if portable else "native", want, capability, branch, isa,
                          reason)
    if reason and reason not in _WARNED:
        _WARNED.add(reason)
        logger.warning(f"numerics: the portable path was asked for but is not in force: "
                       f"{reason}. Results are this CPU's (import guarddiag before running any "
                       f"torch code, or set GUARDDIAG_NUMERICS=native to say so)")
    return state


def _mkl_branch(torch_file: str) -> str:
    """MKL's CNR setting read from torch's own (statically linked) MKL, where it exports it."""
    lib = Path(torch_file).parent / "lib" / "libtorch_cpu.so"
    try:
        get = ctypes.CDLL(str(lib)).mkl_serv_cbwr_get
    except (OSError, AttributeError):
        return "unknown"
    get.restype, get.argtypes = ctypes.c_int, [ctypes.c_int]
    value = get(-1)
    if value == _MKL_CBWR_COMPATIBLE_STRICT:
        return "COMPATIBLE,STRICT"
    return {0: "OFF", 1: "OFF", 2: "AUTO", 3: "COMPATIBLE"}.get(get(_MKL_CBWR_BRANCH),
                                                               f"branch {value:#x}")

