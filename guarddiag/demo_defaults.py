"""The demo's default choices, apart from :mod:`guarddiag.demo` so that ``guarddiag --help``
can show them without importing the whole study (audit, pool, guards, scipy: about a second)."""

from __future__ import annotations

DEMO_SIZE = "minilm"
"""The pretrained CPU size (frozen all-MiniLM-L6-v2 + a trained MLP body and heads); ``micro``
(random init) is the quick size the tests use."""
DEMO_SEED = 42
FLOOR_SEEDS: tuple[int, ...] = (43, 44)
FLOOR_BRANCHES: tuple[str, ...] = ("all",)
"""Every branch and variant at every seed: the seed floor is measured per recipe."""
MUTATED_BENCHMARK = "sorrybench"
MUTATIONS: tuple[str, ...] = ("deterministic",)
