"""The rows a branch trains on: the policy-A/B label mix, pillar targets and calibration sets.

A row carries policy A's labels (class and pillars) when a hash of its prompt id falls below
the branch's ``policy_a_fraction``, so a smaller mix is a subset of a larger one. Branches with
``anchors`` (E3, E5) add the *policy-refusal anchors* to their mix, on policy A: a fixed, named
set of train rows that policy A blocks and policy B allows (see :func:`policy_anchor_mask`). An
anchor inside the branch's train sample carries its A label; the anchors the sample left out
are added as rows (:func:`training_frame`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from guarddiag.errors import GuarddiagError
from guarddiag.labels import CLASS_INDEX, CLASSES, LOOSE, pillar_ids
from guarddiag.model.sizes import N_PILLARS
from guarddiag.pool.table import Pool, hash_order, hash_unit, sample_split
from guarddiag.train.branches import BranchSpec


@dataclass(frozen=True)
class LabelledRows:
    """Rows with the labels one branch trains on."""

    prompt_ids: list[str]
    texts: list[str]
    classes: np.ndarray
    """[n] class index (labels.CLASSES order)."""
    pillars: np.ndarray
    """[n, 24] multi-hot pillar targets."""
    spans: list[tuple[int, int] | None]
    """Character span of the harmful request, where known."""
    policy: np.ndarray
    """[n] bool: the row carries its policy-A labels."""

    def __len__(self) -> int:
        return len(self.texts)


def _pillar_matrix(lists: list[list[str] | None], where: str) -> np.ndarray:
    index = {p: i for i, p in enumerate(pillar_ids())}
    if len(index) != N_PILLARS:
        raise GuarddiagError(f"pillar taxonomy has {len(index)} pillars; the model's pillar "
                             f"heads have {N_PILLARS}")
    out = np.zeros((len(lists), N_PILLARS), dtype=np.float32)
    for r, tags in enumerate(lists):
        for tag in tags or ():
            if tag not in index:
                raise GuarddiagError(f"{where} row {r + 1}: unknown pillar {tag!r}")
            out[r, index[tag]] = 1.0
    return out


POLICY_ANCHOR_SALT = "policy-refusal-anchors"
"""Salt of the hash that picks the anchor set; independent of the ``policy-mix`` hash."""
POLICY_ANCHOR_SHARE = 0.25
"""Share of the rows policy A blocks and policy B allows that are policy-refusal anchors."""


def policy_anchor_mask(frame: pl.DataFrame) -> np.ndarray:
    """The policy-refusal anchors of ``frame``: rows policy A blocks and policy B allows whose
    prompt-id hash (salt :data:`POLICY_ANCHOR_SALT`) falls below :data:`POLICY_ANCHOR_SHARE`.

    The set is a property of the pool, not of a branch or a sample: a row is an anchor in every
    sample that holds it, so E3 and E5 add the same anchors to their different mixes. Only a
    quarter of the A-only rows are anchors, so E3 and E5 keep policy-B labels on the other
    A-only rows their hash mix leaves on B, and stay distinct from E6 (all policy A).
    """
    pairs = zip(frame["label_a"].to_list(), frame["label_b"].to_list(), strict=True)
    a_only = np.array([LOOSE.is_unsafe(a) and not LOOSE.is_unsafe(b) for a, b in pairs],
                      dtype=bool)
    return a_only & (hash_unit(frame["prompt_id"].to_list(), POLICY_ANCHOR_SALT)
                     < POLICY_ANCHOR_SHARE)


def training_frame(pool: Pool, spec: BranchSpec) -> pl.DataFrame:
    """The train rows of a full-route branch: the first ``train_rows`` rows of the train split
    in hash order (every train row when it is null), and for a branch with ``anchors`` every
    policy-refusal anchor of the train split that the sample left out, appended in hash order.

    The anchors are rows added to the mix, as the study describes E3/E5 ("E2 plus explicit
    policy-refusal anchor rows"), not only a relabelling of the rows the sample happens to hold:
    at the demo's 8,000-row sample, relabelling alone touches some 160 rows.
    """
    sample = sample_split(pool, "train", spec.train_rows)
    if not spec.anchors or spec.train_rows is None:
        return sample
    train = pool.split("train")
    anchors = train.filter(pl.Series(policy_anchor_mask(train)))
    extra = anchors.filter(~pl.col("prompt_id").is_in(sample["prompt_id"].to_list()))
    return pl.concat([sample, hash_order(extra, "sample:train")])


def policy_a_mask(frame: pl.DataFrame, *, fraction: float, anchors: bool) -> np.ndarray:
    """Which rows carry policy-A labels: a hash-chosen ``fraction``, plus (with anchors) the
    policy-refusal anchors of :func:`policy_anchor_mask`."""
    use_a = hash_unit(frame["prompt_id"].to_list(), "policy-mix") < fraction
    if anchors:
        use_a |= policy_anchor_mask(frame)
    return use_a


def label_rows(frame: pl.DataFrame, *, fraction: float, anchors: bool,
               where: str = "pool") -> LabelledRows:
    """The rows of ``frame`` with the labels of the mix :func:`policy_a_mask` chooses;
    ``where`` names the file in errors."""
    use_a = policy_a_mask(frame, fraction=fraction, anchors=anchors)
    label = [a if ua else b for a, b, ua in
             zip(frame["label_a"].to_list(), frame["label_b"].to_list(), use_a, strict=True)]
    pills = [a if ua else b for a, b, ua in
             zip(frame["pillars_a"].to_list(), frame["pillars_b"].to_list(), use_a, strict=True)]
    spans: list[tuple[int, int] | None] = []
    for s, e in zip(frame["span_start"].to_list(), frame["span_end"].to_list(), strict=True):
        spans.append((int(s), int(e)) if s is not None and e is not None and e > s else None)
    return LabelledRows(
        prompt_ids=[str(x) for x in frame["prompt_id"].to_list()],
        texts=frame["text"].to_list(),
        classes=np.array([CLASS_INDEX[c] for c in label], dtype=np.int64),
        pillars=_pillar_matrix(pills, where),
        spans=spans, policy=use_a)


def labelled(pool: Pool, spec: BranchSpec, *frames: pl.DataFrame,
             anchors: bool) -> list[LabelledRows]:
    """Each frame's rows with the labels of the spec's policy mix (errors name the pool file)."""
    return [label_rows(f, fraction=spec.policy_a_fraction, anchors=anchors, where=str(pool.path))
            for f in frames]


def calibration_size(pool: Pool, spec: BranchSpec) -> int:
    """How many calibration rows a head-only branch trains on: ``calibration_fraction`` of the
    train sample its parent saw (``train_rows``, or the whole train split), whatever split the
    rows come from. The study's shares: 8,489 / 53,441 (E1, E10) and 53,395 / 53,441 (E7)."""
    n_train = pool.split("train").height
    if spec.train_rows is not None:
        n_train = min(n_train, spec.train_rows)
    return max(1, round((spec.calibration_fraction or 0.0) * n_train))


def calibration_frame(pool: Pool, spec: BranchSpec, *, seed: int = 0
                      ) -> tuple[pl.DataFrame, dict[str, int]]:
    """The calibration rows of a head-only branch, and how many of each kind were drawn.

    :func:`calibration_size` rows: a ``generic_anchor_fraction`` share of GENERIC_SAFE rows
    both policies agree on, the rest from all rows or only disagreement rows. From ``train``
    they are the first rows of the parent's train sample; from ``cal`` (the disagreement-
    enriched split built for this route) or ``val`` they come in an order seeded by ``seed``.
    When the split holds fewer candidate rows than needed, every candidate is used once and
    the remainder is drawn with replacement (seeded), counted in ``n_resampled``.
    """
    n = calibration_size(pool, spec)
    if spec.calibration_split == "train":
        universe = hash_order(sample_split(pool, "train", spec.train_rows), "calibration")
    else:
        universe = hash_order(pool.split(spec.calibration_split), f"calibration:{seed}")
    if universe.height == 0:
        raise GuarddiagError(f'{spec.path} field "calibration_split": the pool has no '
                             f'{spec.calibration_split!r} rows')
    n_anchor = round(spec.generic_anchor_fraction * n)
    generic = (pl.col("label_a") == "GENERIC_SAFE") & (pl.col("label_b") == "GENERIC_SAFE")
    anchors = universe.filter(generic).head(n_anchor)
    rest = universe.filter(~pl.col("prompt_id").is_in(anchors["prompt_id"].to_list()))
    if spec.calibration_source == "disagreement":
        rest = rest.filter(pl.col("label_a") != pl.col("label_b"))
    n_rest = n - anchors.height
    n_resampled = 0
    if spec.calibration_split != "train" and 0 < rest.height < n_rest:
        n_resampled = n_rest - rest.height
        rng = np.random.default_rng([seed, n])
        extra = rest[rng.integers(rest.height, size=n_resampled).tolist()]
        rest = pl.concat([rest, extra])
    rest = rest.head(n_rest)
    n_swapped = 0
    if spec.calibration_swap == "agreement":
        rest, n_swapped, n_drawn = swap_for_agreement(rest, universe, used=anchors, seed=seed)
        n_resampled += n_drawn
    counts = {"n_calibration": anchors.height + rest.height, "n_generic_anchors": anchors.height,
              "n_requested": n, "n_resampled": n_resampled, "n_swapped": n_swapped,
              "n_disagreement": int((rest["label_a"] != rest["label_b"]).sum())}
    return pl.concat([rest, anchors]), counts


def swap_for_agreement(rows: pl.DataFrame, universe: pl.DataFrame, *, used: pl.DataFrame,
                       seed: int) -> tuple[pl.DataFrame, int, int]:
    """``rows`` with every disagreement row (label_a ≠ label_b) replaced by an agreement row of
    ``universe`` with the same policy-A class, taken in ``universe``'s (seeded) order among rows
    not in ``rows`` or ``used``, then with replacement where a class runs out. Returns the rows,
    how many were swapped and how many replacements were drawn with replacement. A class with
    no agreement row at all is an error: the control could not match its A branch."""
    agree = pl.col("label_a") == pl.col("label_b")
    keep, swap = rows.filter(agree), rows.filter(~agree)
    taken = set(rows["prompt_id"].to_list()) | set(used["prompt_id"].to_list())
    fresh = universe.filter(agree & ~pl.col("prompt_id").is_in(list(taken)))
    every = universe.filter(agree & ~pl.col("prompt_id").is_in(used["prompt_id"].to_list()))
    parts, n_drawn = [keep], 0
    rng = np.random.default_rng([seed, rows.height, 7])
    for cls, need in sorted(swap.group_by("label_a").len().iter_rows()):
        first = fresh.filter(pl.col("label_a") == cls).head(need)
        parts.append(first)
        short = need - first.height
        if short:
            pool = every.filter(pl.col("label_a") == cls)
            if pool.height == 0:
                raise GuarddiagError(f"calibration_swap agreement: the split has no row both "
                                     f"policies label {cls}, to stand in for {need} "
                                     f"disagreement row(s)")
            parts.append(pool[rng.integers(pool.height, size=short).tolist()])
            n_drawn += short
    return pl.concat(parts), swap.height, n_drawn


def policy_labels(frame: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Class indices under policy A and under policy B (for the val accuracies)."""
    return (np.array([CLASS_INDEX[c] for c in frame["label_a"].to_list()], dtype=np.int64),
            np.array([CLASS_INDEX[c] for c in frame["label_b"].to_list()], dtype=np.int64))


def label_counts(rows: LabelledRows) -> dict[str, Any]:
    """Class counts, policy-A rows and rows with a known span (for the run's meta)."""
    counts = np.bincount(rows.classes, minlength=len(CLASSES))
    return {"classes": {c: int(n) for c, n in zip(CLASSES, counts, strict=True)},
            "n_policy_a": int(rows.policy.sum()),
            "n_with_span": int(sum(s is not None for s in rows.spans))}

