"""Lexical features beside a frozen encoder's states: which word 1-2-grams a prompt holds.

A bag of words ranks some harmful/benign pairs better than the frozen MiniLM's states do (the
TF-IDF baseline beat the ``minilm`` reference on WildGuardTest and JailbreakBench, issue 49),
so a ``-lex`` size (:attr:`~guarddiag.model.sizes.ModelSize.lexical`) feeds its body both: the
cached states and, appended, the prompt's word 1-2-grams hashed into ``n_features`` buckets.

Nothing is fitted (no vocabulary, no idf, no labels): a prompt's features are a function of its
text alone, so every branch and policy sees the same input and the routes keep their meaning;
the body's first layer learns what each bucket weighs. Features are binary (an n-gram present
or not) and each row scaled to unit length, 1/sqrt(k) for k buckets hit: exact integer counts
and an IEEE square root, so the same bytes on any CPU. They are cheap to compute (a few
seconds for the whole pool), so they are computed when needed, not cached.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

LEXICAL_NGRAMS = (1, 2)


def lexical_features(texts: Sequence[str], n_features: int) -> np.ndarray:
    """[n, n_features] float32: each text's hashed word 1-2-grams, binary, unit length."""
    from sklearn.feature_extraction.text import HashingVectorizer

    vec = HashingVectorizer(n_features=n_features, ngram_range=LEXICAL_NGRAMS, binary=True,
                            norm=None, alternate_sign=False, lowercase=True,
                            dtype=np.float32)
    counts = vec.transform(list(texts))
    hits = np.diff(counts.indptr).astype(np.float32)
    out = counts.toarray()
    scale = np.zeros_like(hits)
    np.divide(1.0, np.sqrt(hits), out=scale, where=hits > 0)
    out *= scale[:, None]
    return out
