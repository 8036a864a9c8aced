"""A TF-IDF + logistic-regression guard trained on the same labels as the teachers.

It sits in the predictions table (guard_kind ``baseline``, run ids ``baseline/tfidf_A/seed=42``
and ``baseline/tfidf_B/seed=42``) so a reader sees whether the small encoders learned more
than word statistics. It is refitted only when the pool or its settings change; its scores
are cached like a branch run's.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from guarddiag.errors import GuarddiagError
from guarddiag.files import write_meta
from guarddiag.labels import CLASS_INDEX, CLASSES
from guarddiag.pool.table import Pool, sample_split
from guarddiag.predict.score import ScoringInput, score_frame
from guarddiag.runs import RunMeta, ScoreCache, run_id
from guarddiag.train.branches import load_branches


@dataclass(frozen=True)
class BaselineSpec:
    """One TF-IDF guard."""

    name: str
    policy: str
    """``A`` or ``B``: whose labels it is trained on."""
    train_rows: int | None
    """Rows of the train split, in the same hash order as the branches' samples."""
    seed: int = 42
    ngram_max: int = 2
    min_df: int = 2
    max_features: int = 200_000
    c: float = 4.0
    """Inverse L2 strength of the logistic regression."""

    @property
    def run_id(self) -> str:
        return run_id("baseline", self.name, self.seed)


def default_baselines(train_rows: dict[str, int | None] | None = None) -> list[BaselineSpec]:
    """One baseline per policy, on the teachers' train sample (T_A / T_B ``train_rows``)."""
    rows = train_rows or {}
    return [BaselineSpec("tfidf_A", "A", rows.get("A")), BaselineSpec("tfidf_B", "B",
                                                                       rows.get("B"))]


class TfidfGuard:
    """TF-IDF word 1–2-grams → multinomial logistic regression over the 4 classes."""

    def __init__(self, spec: BaselineSpec):
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression

        self.spec = spec
        self.vectorizer = TfidfVectorizer(ngram_range=(1, spec.ngram_max), min_df=spec.min_df,
                                          max_features=spec.max_features, sublinear_tf=True,
                                          lowercase=True, dtype=np.float64)
        self.model = LogisticRegression(C=spec.c, max_iter=2000, random_state=spec.seed)

    def fit(self, texts: list[str], classes: np.ndarray) -> TfidfGuard:
        x = self.vectorizer.fit_transform(texts)
        self.model.fit(x, classes)
        return self

    def predict_proba(self, texts: list[str]) -> np.ndarray:
        """[n, 4] in labels.CLASSES order (a class absent from training gets probability 0)."""
        raw = self.model.predict_proba(self.vectorizer.transform(texts))
        out = np.zeros((len(texts), len(CLASSES)), dtype=np.float64)
        for j, cls in enumerate(self.model.classes_):
            out[:, int(cls)] = raw[:, j]
        # Rounded to float32: L-BFGS sums through NumPy's BLAS, whose kernels differ by CPU in the
        # last bits of a float64 (measured: other float64 bytes on an emulated Intel Haswell,
        # the same float32 ones), and the predictions table is the same bytes on every CPU.
        return out.astype(np.float32).astype(np.float64)


def fit_baseline(spec: BaselineSpec, pool: Pool) -> TfidfGuard:
    rows = sample_split(pool, "train", spec.train_rows)
    col = "label_a" if spec.policy == "A" else "label_b"
    y = np.array([CLASS_INDEX[c] for c in rows[col].to_list()], dtype=np.int64)
    return TfidfGuard(spec).fit(rows["text"].to_list(), y)


def _teacher_rows() -> dict[str, int | None]:
    """train_rows of the bundled teachers, so the baseline sees the teachers' sample."""
    try:
        branches = load_branches()
    except GuarddiagError:
        return {}
    out: dict[str, int | None] = {}
    for spec in branches.branches.values():
        if spec.routes == ("hard_labels",) and spec.policy_a_fraction in (0.0, 1.0):
            out.setdefault("A" if spec.policy_a_fraction == 1.0 else "B", spec.train_rows)
    return out


def teacher_rows_of_runs(metas: list[RunMeta]) -> dict[str, int | None]:
    """train_rows the trained teachers (role ``teacher``) actually used, per policy (their
    meta's resolved spec), so the baseline sees what they saw: at a frozen size (minilm) the
    whole train split, not the YAML's micro sample."""
    out: dict[str, int | None] = {}
    for meta in metas:
        if meta.roles is not None and meta.roles.role == "teacher":
            out.setdefault(meta.roles.last_policy, meta.spec.get("train_rows"))
    return out


def score_baselines(*, pool: Pool, inputs: list[ScoringInput], runs_dir: Path,
                    specs: list[BaselineSpec] | None = None
                    ) -> Iterator[tuple[str, dict[str, Any], pl.DataFrame, int, float]]:
    """Yield (run_id, run columns, scores, n_scored, seconds) per baseline; cached on disk."""
    for spec in specs or default_baselines(_teacher_rows()):
        t0 = time.monotonic()
        folder = runs_dir / spec.run_id
        folder.mkdir(parents=True, exist_ok=True)
        key = hashlib.sha256(json.dumps({"spec": asdict(spec), "pool": pool.sha256},
                                        sort_keys=True).encode()).hexdigest()
        cache = ScoreCache.open(folder, key)
        todo = cache.missing(inputs)
        if todo:
            guard = fit_baseline(spec, pool)
            for inp in todo:
                cache.put(inp, score_frame(inp, guard.predict_proba(inp.texts)))
            write_meta(folder, inputs={"pool.parquet": pool.sha256}, seed=spec.seed,
                       run_id=spec.run_id, kind="baseline", spec=asdict(spec),
                       n_features=len(guard.vectorizer.vocabulary_))
        scores = cache.save()
        info = {"branch": spec.name, "size": "tfidf", "seed": spec.seed,
                "label_policy": spec.policy}
        yield (spec.run_id, info, scores, sum(len(i.texts) for i in todo),
               round(time.monotonic() - t0, 2))
