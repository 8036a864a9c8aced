"""guarddiag: separate a guard classifier's detection capability from its labelling policy.

The public API is small and re-exported here; everything else is an implementation detail.
"""

from __future__ import annotations

from guarddiag.errors import GuarddiagError
from guarddiag.labels import CLASSES, LOOSE, MAPPINGS, STRICT, BinaryMapping

__version__ = "0.1.0"

__all__ = [
    "CLASSES",
    "LOOSE",
    "MAPPINGS",
    "STRICT",
    "BinaryMapping",
    "GuarddiagError",
    "__version__",
]
