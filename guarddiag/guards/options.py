"""The options of ``guarddiag guards score`` and ``guarddiag label``, declared once:
:class:`GuardScoreOptions`, :class:`LabelOptions`.

The command line (its flags are generated from it), :func:`guarddiag.score_guard` and the
engine :func:`~guarddiag.guards.scoring.score_guard` take this one object, so their defaults
cannot drift (the batch size once differed: 8 on the command line, 64 in the API). The options
of one adapter (a model, an endpoint, a file) are that adapter's keyword arguments, declared by
the adapter itself (``guarddiag guards list``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from guarddiag import paths
from guarddiag.guards.canary import CANARY_TOLERANCE
from guarddiag.typed import Model, VerbOptions


class GuardScoreOptions(VerbOptions):
    """What one guard is scored on, under which name, and where its answers go."""

    WHERE = "score_guard"

    benchmarks: str | tuple[str, ...] = "all,derived"
    """Benchmark ids or selectors (all, study, extra, user, derived, a,b,…); the default is
    every benchmark and every mutated subset, like the demo's outside guard."""
    name: str | None = None
    """Guard name (run id guard/<name>); None: from the model, file or function."""
    mapping: Literal["loose", "strict"] = "loose"
    """Binary read-out of the printed summary (both are stored)."""
    batch_size: int | None = Field(default=None, ge=1)
    """Prompts per call of a local model or function, per request of an http service; None:
    the adapter's own (a function 64, a classifier 32, a generative guard 8, http 1)."""
    definition: str | None = None
    """What "unsafe" means for this guard, in one sentence (shown in the report beside its
    scores); None: what the adapter states."""
    input: Literal["prompt", "prompt+response"] | None = None
    """What a function or any-guardrail guard reads (None: prompt); prompt+response needs
    benchmarks with responses (WildGuardTest) and, for a function, fn(prompts, responses)."""
    version: str | None = None
    """The guard's version: its own run, guard/<name>@V, kept beside the other versions'
    (answers of one are never another's); give a new one when the model behind the guard
    changes."""
    rescore: bool = False
    """Ask every selected prompt again, reusing no saved answer and bypassing every cache (an
    endpoint's response cache too)."""
    training_data: Path | None = None
    """The guard's own training prompts (CSV/JSONL/parquet): audited against the benchmarks,
    so the report also shows the guard on its own decontaminated prompts (column
    survives_own_decontam)."""
    training_text_column: str = "text"
    """Column of training_data holding the prompt text."""
    retries: int | None = Field(default=None, ge=0)
    """Retries (exponential backoff) before a prompt fails; None: the adapter's own (an
    endpoint or http service 4, a function 0: a raising function stops the run at once)."""
    allow_inverted: bool = False
    """Score a guard that rates the harmful sanity prompts lower than the benign ones (by
    default it stops: is it P(safe)?)."""
    canary_tolerance: float = Field(default=CANARY_TOLERANCE, ge=0.0)
    """How far a canary's class probabilities may move before the saved answers count as
    another model's."""
    runs_dir: Path = Field(default_factory=lambda: paths.work_paths().runs)
    """Runs folder; the guard is written to <runs_dir>/outside/."""
    audit_dir: Path | None = Field(default_factory=lambda: paths.work_paths().audit)
    """Contamination audit (for survives_decontam); None or absent: none."""
    data_dir: Path | None = None
    """Public data directory; None = ``$GUARDDIAG_DATA``."""
    derived_dir: Path | None = None
    """Folder of derived (mutated) subsets; None = none."""
    pool: Path | None = None
    """A labelled pool: its val split is scored too, so the report reads the guard at the
    branches' matched false-flag rate on the policy-neutral rows."""



LABEL_DIR = paths.DEFAULT_WORK_DIR / "label"
"""Where ``guarddiag label`` and :func:`~guarddiag.guards.committee.label_pool` write."""


class LabelOptions(Model):
    """What ``guarddiag label`` (:func:`~guarddiag.guards.committee.label_pool`) relabels, with
    which committee, and where the votes go."""

    policy: Path
    """The written policy (UTF-8 text / markdown)."""
    committee: Path
    """Committee YAML: models (name, generator; optional per member: system, temperature,
    seed), samples, temperature, seed, max_new_tokens, stop, optional questions."""
    pool: Path
    """Table with prompt_id and text columns (e.g. work/pool/pool.parquet)."""
    out_dir: Path = LABEL_DIR
    """Output folder (votes.jsonl, labels.parquet, summary.json, meta.json)."""
