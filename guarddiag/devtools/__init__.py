"""Developer tools that are not part of the study pipeline.

Modules:

- :mod:`guarddiag.devtools.mutation`: mutation testing of the pure layers
  (``python -m guarddiag.devtools.mutation``), a small AST-based tool with a fixed set of
  operators; see the README's development section.
"""

from __future__ import annotations

__all__: list[str] = []
