"""Sub-command parsers, one module per area (see :mod:`guarddiag.cli`)."""
