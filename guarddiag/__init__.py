"""guarddiag: separate a guard classifier's detection capability from its labelling policy.

The public API is small and re-exported here (see README "Python API")::

    import guarddiag

    audit = guarddiag.run_audit("pool.parquet", benchmarks="study", out="work/audit")
    scored = guarddiag.score_guard(my_guard_fn, benchmarks=["xstest_safe"])
    report = guarddiag.run_report("work/runs", out="reports/mine", audit_dir="work/audit")

Each verb takes its options model whole (``AuditOptions``, ``GuardScoreOptions``,
``ReportOptions``: the objects the command line builds) or any of its fields by name, and
returns one result object with ``to_frame()`` and ``to_dict()``. Everything else is an
implementation detail. (``guarddiag.audit`` and ``guarddiag.report`` are the stage packages,
hence ``run_audit`` and ``run_report``.)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from guarddiag import numerics
from guarddiag.errors import GuarddiagError
from guarddiag.labels import CLASSES, LOOSE, MAPPINGS, STRICT, BinaryMapping

# Before anything runs a torch kernel: the portable CPU kernels unless GUARDDIAG_NUMERICS=native
# (guarddiag.numerics says why and what).
numerics.request()

if TYPE_CHECKING:
    from guarddiag.analyses.options import ReportOptions
    from guarddiag.api import run_audit, run_report, score_guard
    from guarddiag.audit.options import AuditOptions
    from guarddiag.audit.result import AuditResult
    from guarddiag.guards.base import GuardAdapter, GuardVerdict
    from guarddiag.guards.callable import CallableGuardAdapter, GuardFunction
    from guarddiag.guards.options import GuardScoreOptions
    from guarddiag.guards.scoring import GuardScoreResult

# The verbs and result types load on first use (PEP 562), so `import guarddiag` and the
# command line's start-up stay free of polars, scipy and matplotlib.
_LAZY = {"run_audit": "guarddiag.api", "run_report": "guarddiag.api",
         "score_guard": "guarddiag.api", "AuditResult": "guarddiag.audit.result",
         "GuardAdapter": "guarddiag.guards.base", "GuardVerdict": "guarddiag.guards.base",
         "CallableGuardAdapter": "guarddiag.guards.callable",
         "GuardFunction": "guarddiag.guards.callable",
         "GuardScoreResult": "guarddiag.guards.scoring",
         # each verb's options, the same objects the command line builds
         "AuditOptions": "guarddiag.audit.options", "ReportOptions": "guarddiag.analyses.options",
         "GuardScoreOptions": "guarddiag.guards.options"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'guarddiag' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__version__ = "0.1.0"

__all__ = [
    "CLASSES",
    "LOOSE",
    "MAPPINGS",
    "STRICT",
    "AuditOptions",
    "AuditResult",
    "BinaryMapping",
    "CallableGuardAdapter",
    "GuardAdapter",
    "GuardFunction",
    "GuardScoreOptions",
    "GuardScoreResult",
    "GuardVerdict",
    "GuarddiagError",
    "ReportOptions",
    "__version__",
    "run_audit",
    "run_report",
    "score_guard",
]
