"""The benches and simulations behind ``guarddiag bench``, kept apart from the stages they measure.

Each module measures one stage on this machine or simulates one analysis, and imports the stage it
measures, never the other way round: :mod:`~guarddiag.bench.audit` (``bench audit``: rates, recall),
:mod:`~guarddiag.bench.audit_plan` (its per-core rates projected to 100M and 1B rows),
:mod:`~guarddiag.bench.audit_suite` (``bench audit --suite``: planted contamination, precision and
recall), :mod:`~guarddiag.bench.audit_peer` (``bench audit --peer``: datasketch's MinHash LSH beside
the audit), :mod:`~guarddiag.bench.predict` (``bench predict``), :mod:`~guarddiag.bench.recalibrate`
(``bench recalibrate``), :mod:`~guarddiag.bench.train` (``bench train``, ``bench gpu``),
:mod:`~guarddiag.bench.embed` (``bench embed``), :mod:`~guarddiag.bench.competence` (``bench
competence``) and :mod:`~guarddiag.bench.calls` (``bench calls``: the calls simulated through the
report's own code). Nothing here is imported by a stage, the report or the API.
"""
