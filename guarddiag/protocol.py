"""The study protocol: the constants every analysis shares, read once from one YAML file.

``data_manifests/protocol.yaml`` declares the decision cut-off, α, the minimum prompts per
benchmark, the study's benchmarks and which of them are benign, the policy-content benchmark(s),
the harmful/benign pairs, the neutral rows and the competence floor; :func:`protocol` reads it
(once per process) and every module asks it instead of restating a number or a benchmark id.
``$GUARDDIAG_PROTOCOL`` names another protocol file (a ``$GUARDDIAG_MANIFESTS`` folder's own
``protocol.yaml`` is read where it has one). A bad file is one error, a line per problem
naming the file and the field.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from pydantic import Field, ValidationInfo, field_validator

from guarddiag import paths
from guarddiag.labels import CLASSES
from guarddiag.typed import Model, validate_file

__all__ = ["PROTOCOL_ENV", "Protocol", "load_protocol", "protocol", "protocol_path"]

PROTOCOL_ENV = "GUARDDIAG_PROTOCOL"
"""Environment variable naming a protocol file to read instead of the built-in one."""
PROTOCOL_FILE = "protocol.yaml"

Fraction = Field(gt=0.0, lt=1.0)


class Protocol(Model):
    """The study's shared constants (see ``data_manifests/protocol.yaml`` for each one's why)."""

    cutoff: float = Fraction
    """A prompt reads unsafe when P(unsafe) >= cutoff."""
    alpha: float = Fraction
    """Level of every test."""
    min_prompts: int = Field(ge=1)
    """Prompts a benchmark needs in a cohort for an A/B or load call."""
    equivalence_margin: float = Fraction
    """A capability call needs the route-matched contrast within ±this share."""
    competence_floor: float = Field(ge=0.0, le=1.0)
    """Mean reference CAP on clear harm below which the report cautions."""
    auroc_margin: float = Field(ge=0.0, lt=1.0)
    """How far the reference's AUROC must beat the TF-IDF baseline's on every ranking pair."""
    study_benchmarks: tuple[str, ...] = Field(min_length=1)
    """The study's subsets (SPEC §5), in the order the study reports them."""
    study_benign: tuple[str, ...]
    """The benign study subsets; the other study subsets are harmful."""
    policy_content: dict[str, str] = Field(min_length=1)
    """Benchmark → why its score measures policy, not detection (the first is the rank test's)."""
    metric_aliases: dict[str, str]
    """Benchmark → the short name its score goes by in the tables."""
    pairs: dict[str, tuple[str, str]] = Field(min_length=1)
    """Pair name → (harmful id, benign id) of one source."""
    competence_pairs: tuple[str, ...]
    """The pairs the competence gate ranks on."""
    threshold_free_pairs: tuple[str, ...]
    """The pairs of the threshold-free table."""
    neutral_split: str
    """The pool split whose policy-neutral rows match the operating points."""
    neutral_labels: tuple[str, ...] = Field(min_length=1)
    """Labels that make a row neutral when both policies give one the mapping reads safe."""
    benchmark_lang: str = Field(min_length=1)
    """The language of the study's benchmarks (a pool ``lang`` code): the competence bench
    also matches its false-flag rate on the neutral rows in this language alone."""

    @field_validator("study_benign", "policy_content")
    @classmethod
    def _in_study(cls, value: tuple[str, ...] | dict[str, str],
                  info: ValidationInfo) -> tuple[str, ...] | dict[str, str]:
        study = info.data.get("study_benchmarks", ())
        unknown = [b for b in value if b not in study]
        if unknown:
            raise ValueError(f"expected study benchmarks (study_benchmarks), "
                             f"not {', '.join(unknown)}")
        return value

    @field_validator("competence_pairs", "threshold_free_pairs")
    @classmethod
    def _named_pairs(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        unknown = [p for p in value if p not in info.data.get("pairs", {})]
        if unknown:
            raise ValueError(f"expected names of pairs, not {', '.join(unknown)}")
        return value

    @field_validator("neutral_labels")
    @classmethod
    def _classes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [c for c in value if c not in CLASSES]
        if unknown:
            raise ValueError(f"expected labels among {', '.join(CLASSES)}, "
                             f"not {', '.join(unknown)}")
        return value

    @property
    def cutoff_name(self) -> str:
        """The cut-off as the ``threshold`` column names it (``"0.5"``)."""
        return format(self.cutoff, "g")

    @property
    def rank_benchmark(self) -> str:
        """The policy-content benchmark of the rank test and of the COPY split."""
        return next(iter(self.policy_content))

    def pairs_of(self, names: tuple[str, ...]) -> tuple[tuple[str, str, str], ...]:
        """(pair name, harmful id, benign id) of the named pairs, in the order given."""
        return tuple((n, *self.pairs[n]) for n in names)

    def clear_harm(self, kinds: dict[str, str] | None = None) -> tuple[str, ...]:
        """The harmful study subsets minus the policy-content ones, in study order; ``kinds``
        (benchmark → harmful | benign, from the manifests) overrides :attr:`study_benign`."""
        kinds = kinds or {}
        return tuple(b for b in self.study_benchmarks
                     if kinds.get(b, "benign" if b in self.study_benign else "harmful")
                     == "harmful" and b not in self.policy_content)


def protocol_path() -> Path:
    """``$GUARDDIAG_PROTOCOL``, else ``protocol.yaml`` in the manifests folder
    (``$GUARDDIAG_MANIFESTS``) where it has one, else the built-in one."""
    override = os.environ.get(PROTOCOL_ENV)
    if override:
        return Path(override)
    mine = paths.manifests_dir() / PROTOCOL_FILE
    return mine if mine.is_file() else paths.builtin_manifests_dir() / PROTOCOL_FILE


def load_protocol(path: str | os.PathLike[str]) -> Protocol:
    """The protocol file at ``path``, validated whole (:func:`guarddiag.typed.validate`)."""
    return validate_file(Protocol, path)


@functools.cache
def _cached(path: Path) -> Protocol:
    return load_protocol(path)


def protocol() -> Protocol:
    """The protocol in force: :func:`protocol_path`'s file, read once per path."""
    return _cached(protocol_path())
