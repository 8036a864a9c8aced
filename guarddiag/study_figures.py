"""The published study's figures that the report sets beside this run's, read once from data.

``data_manifests/study_figures.yaml`` holds what the study (SPEC §4-§6) reported: span and seed
floors, the rank test's p, the correlations, over-refusal under both mappings, the A-last
branches' COPY and OR-H, the clear-harm CAP range, the direction of each A/B difference and the
training pool's overlap with each benchmark. They are facts about one past study, keyed by the
benchmarks it measured them on; the analyses compare with them and never restate them
(:mod:`guarddiag.analyses.study`, :mod:`guarddiag.analyses.study_calls`). The study's settings
(cut-off, α, benchmarks, pairs) are the protocol's (:mod:`guarddiag.protocol`).
"""

from __future__ import annotations

import functools
import os
from typing import Literal

from pydantic import Field

from guarddiag import paths
from guarddiag.typed import Model, validate_file

__all__ = ["Direction", "Span", "StudyFigures", "load_study_figures", "study_figures"]

FIGURES_FILE = "study_figures.yaml"
Share = Field(ge=0.0, le=1.0)


class Span(Model):
    """Span Δb over the branches and the widest seed floor Φb on one benchmark (Table 4)."""

    title: str
    delta: float = Share
    floor_widest: float = Share
    floor_note: str | None = None
    """What the study's floor was measured on; this run's seed groups go beside it."""


class RankP(Model):
    """The exact rank test's p and how it is written."""

    value: float = Share
    exact: str


class Correlation(Model):
    """Spearman ρ(multilingual VAL, mean score on the benchmarks of one call)."""

    policy: float = Field(ge=-1.0, le=1.0)
    capability: float = Field(ge=-1.0, le=1.0)


class OverRefusal(Model):
    """Over-refusal under the loose and the strict mapping (Table 2)."""

    benchmark: str
    reference_loose: float = Share
    reference_strict: float = Share
    reference_note: str
    outside_note: str


class ALast(Model):
    """The A-last branches on the policy-content benchmark and on OR-H."""

    copy_lowest: float = Share
    copy_note: str
    over_refusal_highest: float = Share
    over_refusal_note: str


class CapRange(Model):
    """The branches' mean CAP on the study's clear-harm benchmarks: lowest and highest."""

    lowest: float = Share
    highest: float = Share
    note: str


class Direction(Model):
    """What the study reports for one benchmark's A-last − B-last difference."""

    a_last: str
    b_last: str
    difference: str
    sign: Literal[-1, 0, 1]
    """+1: A-last flags more; −1: less; 0: no A/B direction."""


class StudyFigures(Model):
    """The published study's figures (see ``data_manifests/study_figures.yaml``)."""

    spans: dict[str, Span]
    median_floor: float = Share
    rank_p: RankP
    correlation: Correlation
    over_refusal: OverRefusal
    a_last: ALast
    clear_harm_cap: CapRange
    directions: dict[str, Direction]
    pool_rows: int = Field(ge=1)
    overlap: dict[str, float]
    """Benchmark → exact overlap of the study's training pool with it, in SPEC §6's order."""
    over_refusal_sets: dict[str, str]
    """Benchmark → name: the public over-refusal sets the study's pool held most of."""


def load_study_figures(path: str | os.PathLike[str]) -> StudyFigures:
    """The figures file at ``path``, validated whole (:func:`guarddiag.typed.validate`)."""
    return validate_file(StudyFigures, path)


@functools.cache
def study_figures() -> StudyFigures:
    """The built-in published figures, read once per process."""
    return load_study_figures(paths.builtin_manifests_dir() / FIGURES_FILE)
