"""The demo's options, declared once (:class:`DemoOptions`), apart from :mod:`guarddiag.demo` so
that ``guarddiag --help`` can show them without importing the whole study (audit, pool, guards,
scipy: about a second). ``guarddiag demo``'s flags are generated from it."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from guarddiag.cores import usable_cores
from guarddiag.typed import Model

MUTATED_BENCHMARK = "sorrybench"


class DemoOptions(Model):
    """What ``guarddiag demo`` (:func:`guarddiag.demo.run_demo`) runs, and where it writes."""

    data_dir: Path | None = None
    """Public data directory; None = ``$GUARDDIAG_DATA`` (else the user cache)."""
    work_dir: Path = Path("work/demo")
    """Pool, audit, runs and predictions of the demo."""
    out_dir: Path = Path("reports/demo")
    """Report folder."""
    size: str = "minilm"
    """Model size of the students (teachers one size up; see ``guarddiag train --list-sizes``):
    the pretrained CPU size minilm (frozen all-MiniLM-L6-v2 + a trained MLP body and heads);
    micro (random init) is the quick size the tests use."""
    seed: int = 42
    """Seed of every branch's first run."""
    floor_seeds: tuple[int, ...] = (43, 44)
    """Extra seeds of the floor recipes (with ``seed`` they form a triplet); empty skips the
    floor."""
    floor_branches: tuple[str, ...] = ("all",)
    """Recipes trained at the extra seeds to measure the seed floor (all: every branch and
    variant)."""
    mutations: tuple[str, ...] = ("deterministic",)
    """Mutations of sorrybench (names or groups, see ``guarddiag mutate --help``); empty skips
    them."""
    mirror: str | None = None
    """Served copy of a data directory (base URL), used by ``data pull`` when no data is
    present."""
    n_resamples: int = Field(default=2000, ge=1)
    """Prompt-bootstrap resamples per score in the report."""
    jobs: int = Field(default_factory=usable_cores, ge=1)
    """Runs trained and scored at a time (default: the usable cores), each in its own process
    with one torch thread; 1 = one after another in this process. The bytes are the same
    either way."""
