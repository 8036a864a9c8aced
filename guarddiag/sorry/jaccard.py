"""Word-set Jaccard profile: how close is each benchmark prompt to its nearest neighbour?

For every prompt of every benchmark, the *maximum* word-set Jaccard similarity
(``guarddiag.text.word_set`` / ``jaccard``) against (a) the training pool and (b) the prompts of
the *other* benchmarks (subsets of the same dataset - HarmBench's three, XSTest's safe/unsafe
pair, a mutation and its base - count as one family and are not compared with each other).
SORRY-Bench reports a mean max-Jaccard of 44.5% of its prompts against prior datasets; the
table gives the same statistic per benchmark.

The maximum is exact. :func:`max_jaccard` indexes the targets by token (an inverted index) and
orders each query's ``L`` indexed tokens from rarest to most common. Stage 1 verifies (exact
intersection) the targets on the rarest tokens' short posting lists, giving a lower bound ``b``.
A target sharing none of the first ``i`` tokens shares at most ``L - i`` tokens with the query,
so its Jaccard is at most ``(L - i) / |query|``: every target that can reach ``b`` lies on the
posting lists of the first ``p`` tokens, ``p`` being the first position where that bound drops
below ``b`` (the prefix-filtering argument of ``guarddiag.audit.neardup``, used for a maximum
instead of a threshold) - typically every token but the handful of most common words. Stage 2
counts, for those targets, the tokens they share among the first ``p`` (``shared``); the ``L - p``
skipped tokens can add at most ``L - p``, which bounds each target's Jaccard from below and
above. Targets whose upper bound is below the best lower bound are dropped; the rest are
verified exactly. Ties go to the lowest target index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from guarddiag.errors import GuarddiagError
from guarddiag.text import word_set

SORRY_BENCH_MEAN_MAX_JACCARD = 0.445
"""SORRY-Bench's reported mean max-Jaccard of its prompts against prior datasets."""


@dataclass(frozen=True)
class _Index:
    indptr: np.ndarray
    """CSR over targets: token ids of target d are indices[indptr[d]:indptr[d+1]]."""
    indices: np.ndarray
    sizes: np.ndarray
    post_ptr: np.ndarray
    """Postings: targets containing token t are postings[post_ptr[t]:post_ptr[t+1]], sorted."""
    postings: np.ndarray
    vocab: dict[str, int]


def _build_index(targets: Sequence[frozenset[str]]) -> _Index:
    vocab: dict[str, int] = {}
    rows: list[np.ndarray] = []
    for s in targets:
        rows.append(np.fromiter((vocab.setdefault(w, len(vocab)) for w in s), dtype=np.int64,
                                count=len(s)))
    sizes = np.array([len(r) for r in rows], dtype=np.int64)
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    indices = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    doc_of = np.repeat(np.arange(len(rows), dtype=np.int64), sizes)
    order = np.lexsort((doc_of, indices))  # by token, then by target
    postings = doc_of[order]
    counts = np.bincount(indices, minlength=len(vocab)) if len(vocab) else np.zeros(0, np.int64)
    post_ptr = np.zeros(len(vocab) + 1, dtype=np.int64)
    np.cumsum(counts, out=post_ptr[1:])
    return _Index(indptr, indices, sizes, post_ptr, postings, vocab)


def _intersections(index: _Index, docs: np.ndarray, qmask: np.ndarray) -> np.ndarray:
    """|query ∩ target| for each target in ``docs`` (every target has at least one token)."""
    starts = index.indptr[docs]
    lengths = index.sizes[docs]
    total = int(lengths.sum())
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    tokens = index.indices[offsets + np.arange(total)]
    hits = qmask[tokens].astype(np.int64)
    return np.add.reduceat(hits, np.concatenate(([0], np.cumsum(lengths)[:-1])))


def max_jaccard(queries: Sequence[frozenset[str]], targets: Sequence[frozenset[str]], *,
                query_groups: Sequence[int] | None = None,
                target_groups: Sequence[int] | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """Exact maximum Jaccard of each query against the targets, and a target reaching it.

    Returns ``(best, nearest)``: ``best[q]`` the maximum (0.0 when no target shares a word or
    the query is empty) and ``nearest[q]`` the lowest target index reaching it (-1 when best is
    0). With groups, targets in the query's own group are skipped.
    """
    if (query_groups is None) != (target_groups is None):
        raise GuarddiagError("max_jaccard: give both query_groups and target_groups, or neither")
    index = _build_index(targets)
    n_targets = len(targets)
    tgroups = np.asarray(target_groups, dtype=np.int64) if target_groups is not None else None
    best = np.zeros(len(queries), dtype=np.float64)
    nearest = np.full(len(queries), -1, dtype=np.int64)
    qmask = np.zeros(len(index.vocab) + 1, dtype=bool)
    df = np.diff(index.post_ptr)
    for q, query in enumerate(queries):
        k = len(query)
        if k == 0 or n_targets == 0:
            continue
        known = np.array([index.vocab[w] for w in query if w in index.vocab], dtype=np.int64)
        if known.size == 0:
            continue
        known = known[np.lexsort((known, df[known]))]  # rarest first, ties by id
        group = None if query_groups is None else int(query_groups[q])
        qmask[known] = True
        n_known = known.size
        # Stage 1: a lower bound b from the rarest tokens' short posting lists.
        cum = np.cumsum(df[known])
        first = max(1, int(np.searchsorted(cum, _PROBE_BUDGET, side="right")))
        docs, _ = _shared_counts(index, known[:first], n_targets, tgroups, group)
        b, arg = _verify(index, docs, k, qmask)
        # Stage 2: a target that beats or ties b shares one of the first p tokens, p being the
        # first position whose bound (L - i) / |query| falls below b.
        p = int(np.count_nonzero((n_known - np.arange(n_known)) / k >= b))
        if p > first:
            docs, shared = _shared_counts(index, known[:p], n_targets, tgroups, group)
            # shared = tokens in common among the first p; the L - p others can add at most
            # L - p more. Jaccard grows with the intersection at fixed sizes, so
            # J(shared) <= J <= J(shared + extra): prune on the bounds, then verify.
            size = index.sizes[docs]
            extra = np.minimum(n_known - p, size - shared)
            low = shared / (k + size - shared)
            high = (shared + extra) / (k + size - shared - extra)
            floor = max(b, float(low.max())) if low.size else b
            keep = high >= floor
            docs, inter = docs[keep], shared[keep]
            # Exact intersections of the survivors: add the skipped common tokens they hold
            # (a binary search in each skipped token's sorted posting list).
            for tok in known[p:]:
                post = index.postings[index.post_ptr[tok]:index.post_ptr[tok + 1]]
                at = np.searchsorted(post, docs)
                inter = inter + (post[np.minimum(at, post.size - 1)] == docs)
            if docs.size:
                sims = inter / (k + index.sizes[docs] - inter)
                j = int(np.argmax(sims))
                b, arg = float(sims[j]), int(docs[j])
        qmask[known] = False
        best[q], nearest[q] = b, (arg if b > 0 else -1)
    return best, nearest


_PROBE_BUDGET = 256
"""Stage 1 reads the rarest tokens' posting lists up to about this many entries in all."""


def _shared_counts(index: _Index, tokens: np.ndarray, n_targets: int,
                   tgroups: np.ndarray | None, group: int | None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Targets on the posting lists of ``tokens`` (sorted, other groups only) and how many of
    ``tokens`` each holds."""
    parts = [index.postings[index.post_ptr[t]:index.post_ptr[t + 1]] for t in tokens]
    hits = np.concatenate(parts) if len(parts) > 1 else parts[0]
    if hits.size * 16 < n_targets:  # few hits: sorting them beats a pass over every target
        docs, counts = np.unique(hits, return_counts=True)
    else:
        all_counts = np.bincount(hits, minlength=n_targets)
        docs = np.flatnonzero(all_counts)
        counts = all_counts[docs]
    if tgroups is not None and docs.size:
        keep = tgroups[docs] != group
        docs, counts = docs[keep], counts[keep]
    return docs, counts


def _verify(index: _Index, docs: np.ndarray, k: int, qmask: np.ndarray) -> tuple[float, int]:
    """Best exact Jaccard among ``docs`` (sorted), lowest index on ties; (0.0, -1) if none."""
    if docs.size == 0:
        return 0.0, -1
    inter = _intersections(index, docs, qmask)
    sims = inter / (k + index.sizes[docs] - inter)
    j = int(np.argmax(sims))
    return float(sims[j]), int(docs[j])


# ── the profile ───────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class JaccardProfile:
    per_prompt: pl.DataFrame
    """benchmark, prompt_id, max_jaccard_pool, nearest_pool_id, max_jaccard_other,
    nearest_benchmark, nearest_prompt_id (pool columns null without a pool)."""
    summary: pl.DataFrame
    """Per benchmark: n, mean/median/p90 of both maxima, share >= 0.5, share == 1."""
    pool_rows: int | None

    def to_frame(self) -> pl.DataFrame:
        return self.summary


def jaccard_profile(frames: Mapping[str, pl.DataFrame], *, pool: pl.DataFrame | None = None,
                    families: Mapping[str, str] | None = None) -> JaccardProfile:
    """Max word-set Jaccard of every benchmark prompt against the pool and the other benchmarks.

    ``pool``: a table with ``prompt_id`` and ``text`` (the training pool), or None to skip that
    column. ``families`` maps a benchmark id to its dataset family; benchmarks of one family are
    not compared with each other (default: each benchmark is its own family).
    """
    if not frames:
        raise GuarddiagError("jaccard: no benchmarks to profile")
    names = list(frames)
    fam = {b: (families or {}).get(b, b) for b in names}
    fam_id = {f: i for i, f in enumerate(sorted(set(fam.values())))}
    bench_col, pid_col, sets, groups = [], [], [], []
    for b in names:
        frame = frames[b]
        for col in ("prompt_id", "text"):
            if col not in frame.columns:
                raise GuarddiagError(f"benchmark {b}: missing column {col}")
        bench_col += [b] * frame.height
        pid_col += [str(p) for p in frame["prompt_id"]]
        sets += [word_set(str(t)) for t in frame["text"]]
        groups += [fam_id[fam[b]]] * frame.height
    other, other_idx = max_jaccard(sets, sets, query_groups=groups, target_groups=groups)
    table = {
        "benchmark": bench_col, "prompt_id": pid_col,
        "max_jaccard_other": other,
        "nearest_benchmark": [bench_col[i] if i >= 0 else None for i in other_idx],
        "nearest_prompt_id": [pid_col[i] if i >= 0 else None for i in other_idx],
    }
    pool_rows = None
    if pool is not None:
        for col in ("prompt_id", "text"):
            if col not in pool.columns:
                raise GuarddiagError(f"pool: missing column {col}")
        pool_sets = [word_set(str(t)) for t in pool["text"]]
        pool_ids = [str(p) for p in pool["prompt_id"]]
        vs_pool, pool_idx = max_jaccard(sets, pool_sets)
        table["max_jaccard_pool"] = vs_pool
        table["nearest_pool_id"] = [pool_ids[i] if i >= 0 else None for i in pool_idx]
        pool_rows = pool.height
    else:
        table["max_jaccard_pool"] = [None] * len(sets)
        table["nearest_pool_id"] = [None] * len(sets)
    per_prompt = pl.DataFrame(table, schema={
        "benchmark": pl.String, "prompt_id": pl.String, "max_jaccard_other": pl.Float64,
        "nearest_benchmark": pl.String, "nearest_prompt_id": pl.String,
        "max_jaccard_pool": pl.Float64, "nearest_pool_id": pl.String,
    }).select("benchmark", "prompt_id", "max_jaccard_pool", "nearest_pool_id",
              "max_jaccard_other", "nearest_benchmark", "nearest_prompt_id")
    stats = []
    for col, tag in (("max_jaccard_pool", "pool"), ("max_jaccard_other", "other")):
        stats += [pl.col(col).mean().alias(f"mean_{tag}"),
                  pl.col(col).median().alias(f"median_{tag}"),
                  pl.col(col).quantile(0.9, interpolation="linear").alias(f"p90_{tag}"),
                  (pl.col(col) >= 0.5).mean().alias(f"share_ge_0.5_{tag}"),
                  (pl.col(col) == 1.0).mean().alias(f"share_eq_1_{tag}")]
    summary = per_prompt.group_by("benchmark", maintain_order=True).agg(pl.len().alias("n"),
                                                                         *stats)
    return JaccardProfile(per_prompt=per_prompt, summary=summary, pool_rows=pool_rows)


def family_of(manifest: object) -> str:
    """A subset's dataset family: the data folder of its first file (``benchmarks/harmbench``),
    or for a derived subset, its base subset's id (resolved by the caller)."""
    files = getattr(manifest, "files", ())
    if getattr(manifest, "derived_from", None):
        return str(manifest.derived_from)  # type: ignore[attr-defined]
    if files:
        parts = str(files[0].path).split("/")
        return "/".join(parts[:2]) if len(parts) > 2 else parts[0]
    return str(getattr(manifest, "id", ""))
