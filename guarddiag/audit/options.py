"""The audit verbs' options, declared once: ``guarddiag audit``, :func:`guarddiag.run_audit`,
:func:`~guarddiag.audit.run.audit_pool` and the scan engine all take one :class:`AuditOptions`,
so their defaults cannot drift apart; ``guarddiag audit apply`` and
:func:`~guarddiag.audit.apply.apply_audit` take one :class:`ApplyOptions`.

Build one with :meth:`AuditOptions.of` (``AuditOptions.of(near_dup=True)``, or an existing
options object with some fields replaced); an unknown field or a value of the wrong type is a
one-line error naming the field (:func:`guarddiag.typed.validate`). The rules that relate two
options (a drop option without its search, a short-prompt threshold looser than the near one)
are checked by :func:`guarddiag.audit.frames.check_options`, before any I/O.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import field_validator, model_validator

from guarddiag.audit.fields import parse_field
from guarddiag.audit.result import (
    DEFAULT_CONTAINMENT,
    DEFAULT_REVIEW_ROWS,
    DEFAULT_SHORT_THRESHOLD,
    DEFAULT_SHORT_WORDS,
    DEFAULT_THRESHOLD,
)
from guarddiag.audit.template import MIN_FIXED_WORDS
from guarddiag.typed import Model, VerbOptions

__all__ = ["GATE_KINDS", "ApplyOptions", "AuditOptions"]

GATE_KINDS = ("exact", "near", "template", "contained")
"""Overlap kinds, as ``--gate-exclude`` names them."""


class AuditOptions(VerbOptions):
    """Every option of one audit (what the CLI flags set); paths and ``force`` are arguments
    of the verb, not options."""

    WHERE = "audit options"

    benchmarks: str | tuple[str, ...] = "all"
    """``all``, ``study``, a comma-separated string or a list of subset ids."""
    text_column: str = "text"
    """The one top-level column holding the text; every row must have a non-empty one. Ignored
    when ``text_fields`` is given."""
    text_fields: tuple[str, ...] = ()
    """Field paths whose texts are audited (``messages[].content``,
    ``messages[role=user].content``, ``data.prompt``, ``response``); a row missing one, or
    holding null or empty text there, is skipped for that field and counted, unless the field
    is in ``require_fields``."""
    require_fields: tuple[str, ...] = ()
    """Of ``text_fields``, those every row must hold as non-empty text (else an error with the
    true counts, before the scan)."""
    id_column: str | None = "prompt_id"
    """Column of unique row ids; None numbers rows from 1."""
    near_dup: bool = False
    threshold: float = DEFAULT_THRESHOLD
    short_words: int = DEFAULT_SHORT_WORDS
    short_threshold: float = DEFAULT_SHORT_THRESHOLD
    drop_near: bool = False
    templates: bool = False
    drop_template: bool = False
    template_min_words: int = MIN_FIXED_WORDS
    """Unmasked words a template form needs besides its slots (a generic frame such as
    'What does … mean?' has three and never counts)."""
    containment: bool = False
    containment_threshold: float = DEFAULT_CONTAINMENT
    drop_contained: bool = False
    review_rows: int = DEFAULT_REVIEW_ROWS
    """A short prompt found inside the texts of at least this many rows is a common phrase: its
    contained matches are listed for review, not gated (0: never;
    :func:`~guarddiag.audit.containment.review_common`)."""
    fail_above: float | None = None
    """Gate: fail when more than this percent of any benchmark's prompts is hit by a gated
    kind (a share of the benchmark, not of the corpus)."""
    max_corpus_rows: int | None = None
    """Gate: fail when more than this many corpus rows are hit by a gated kind."""
    gate_exclude: tuple[Literal["exact", "near", "template", "contained"], ...] = ()
    """Overlap kinds the gates do not count (every audited kind counts otherwise)."""
    bad_rows: Literal["fail", "skip"] = "fail"
    """What bad rows do (:mod:`~guarddiag.audit.badrows`): ``fail``, an error after the whole
    scan with every one listed in bad_rows.jsonl; ``skip``, the audit goes on without the
    malformed and wrong-typed ones and with the others under their addresses."""
    allow_missing_field: bool = False
    """A gate passes though a text field is found in no row (else it cannot vouch: exit 2)."""
    allow_unavailable: bool = False
    """A gate passes though a selected benchmark is unavailable (else exit 2)."""
    allow_bad_rows: bool = False
    """A gate passes though ``bad_rows="skip"`` left rows unaudited (else exit 2)."""
    engine: str = "local"
    """``local`` (``workers`` cores of this machine) or ``ray`` (a Ray cluster)."""
    workers: int | None = None
    ray_address: str | None = None
    figure: bool = False
    """Draw overlap.png/.pdf, the per-benchmark bar chart. Off by default: matplotlib's import
    and two renders take most of a small audit's time
    (docs/decisions.md#2026-12-05-start-up-costs-behind-the-lazy-imports), and the report draws its
    own overlap figure from the audit's tables."""

    @field_validator("text_fields", "require_fields")
    @classmethod
    def _paths(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for path in value:
            parse_field(path)
        if len(set(value)) != len(value):
            raise ValueError("a field is named twice")
        return value

    @field_validator("engine")
    @classmethod
    def _engine(cls, value: str) -> str:
        if value not in ("local", "ray"):
            raise ValueError(f"unknown audit engine {value!r}: expected one of local, ray")
        return value

    @field_validator("workers")
    @classmethod
    def _workers(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError("workers must be at least 1")
        return value

    @field_validator("fail_above")
    @classmethod
    def _pct(cls, value: float | None) -> float | None:
        if value is not None and not 0 <= value <= 100:
            raise ValueError("a percentage from 0 to 100 is expected")
        return value

    @field_validator("max_corpus_rows", "template_min_words", "review_rows")
    @classmethod
    def _count(cls, value: int | None) -> int | None:
        if value is not None and value < 0:
            raise ValueError("a count of 0 or more is expected")
        return value

    @model_validator(mode="after")
    def _required_are_audited(self) -> AuditOptions:
        extra = [f for f in self.require_fields if f not in self.text_fields]
        if extra:
            raise ValueError(f"require_fields {', '.join(extra)} must also be text_fields")
        return self

    @property
    def fields(self) -> tuple[str, ...]:
        """The audited field paths: ``text_fields``, else ``text_column``."""
        return self.text_fields or (self.text_column,)

    @property
    def nested(self) -> bool:
        """Texts come from ``text_fields`` (skipped and counted when absent), not from the one
        strict ``text_column``."""
        return bool(self.text_fields)

    def gated_kinds(self) -> tuple[str, ...]:
        """The kinds the gates count: the audited ones less ``gate_exclude``."""
        on = {"exact": True, "near": self.near_dup, "template": self.templates,
              "contained": self.containment}
        return tuple(k for k in GATE_KINDS if on[k] and k not in self.gate_exclude)


class ApplyOptions(Model):
    """How ``guarddiag audit apply`` (:func:`~guarddiag.audit.apply.apply_audit`) writes the
    cleaned corpus; the audit's own options come from the finished audit."""

    out: Path
    """Folder for the cleaned shards (same names and formats), removed/ and the new audit/."""
    keep_review: bool = False
    """Keep the rows whose only matches are listed for review."""
