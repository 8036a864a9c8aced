"""``python -m guarddiag``: the command line, as ``guarddiag`` runs it."""

from guarddiag.cli import run

run()
