"""Exact overlaps: benchmark prompts and pool rows with equal normal forms
(:func:`guarddiag.text.normalise`)."""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from guarddiag import files, paths
from guarddiag.audit.normal import normal_forms

NORMAL_FORM_VERSION = 1
"""The version of :func:`guarddiag.text.normalise`'s definition: raise it whenever the normal form
changes, so cached benchmark forms (:func:`index_forms`) are computed afresh."""

Match = tuple[int, int, str, float]
"""(normal-form key, pool row, kind ``exact``/``near``, similarity)."""


@dataclass(frozen=True)
class FormIndex:
    """The distinct normal forms of every benchmark prompt; prompts with the same form share
    every match."""

    key_of: dict[str, int]
    """Normal form → key (first-seen order)."""
    members: list[list[tuple[int, int]]]
    """Per key, the (benchmark index, row) pairs with that form."""

    @property
    def forms(self) -> list[str]:
        return list(self.key_of)


_LAST: list[tuple[tuple[tuple[str, ...], ...], FormIndex]] = []
"""The last index built and its texts: a streamed audit indexes the same benchmarks twice (for
the scan, then in ``audit_frames``)."""


def index_forms(bench_texts: Sequence[Sequence[str]]) -> FormIndex:
    """Key every non-empty normal form of the benchmarks' prompts."""
    texts_key = tuple(tuple(texts) for texts in bench_texts)
    if _LAST and _LAST[0][0] == texts_key:
        return _LAST[0][1]
    index = _index_forms(bench_texts)
    _LAST[:] = [(texts_key, index)]
    return index


def _index_forms(bench_texts: Sequence[Sequence[str]]) -> FormIndex:
    key_of: dict[str, int] = {}
    keyed: list[tuple[int, int, int]] = []   # (key, benchmark index, row)
    flat = [text for texts in bench_texts for text in texts]
    all_forms = iter(_benchmark_forms(flat))
    for b, texts in enumerate(bench_texts):
        for row in range(len(texts)):
            form = next(all_forms)
            if form:
                keyed.append((key_of.setdefault(form, len(key_of)), b, row))
    members: list[list[tuple[int, int]]] = [[] for _ in key_of]
    for key, b, row in keyed:
        members[key].append((b, row))
    return FormIndex(key_of=key_of, members=members)


def _benchmark_forms(flat: list[str]) -> list[str]:
    """The normal forms of ``flat``, from the cache when this exact list was normalised before
    (every audit normalises the same benchmarks: a share of its start-up,
    docs/decisions.md#2026-12-04-the-audits-first-scan)."""
    if not flat:
        return []
    path = _forms_cache_path(flat)
    cached = files.read_cached_parquet(path, rows=len(flat), columns=["form"])
    if cached is not None:
        return cached.get_column("form").to_list()
    # The vectorised normaliser gives normalise()'s forms (tests/test_normalise_vectorised.py).
    forms = normal_forms(pl.Series(flat, dtype=pl.String))[0]
    files.write_cached_parquet(forms.to_frame("form"), path)
    return forms.to_list()


def _forms_cache_path(flat: list[str]) -> Path | None:
    """``<cache>/forms/<digest>.parquet``: the digest covers every text (length-prefixed, so
    no two lists collide by concatenation), the normal form's version and Python's Unicode
    version (NFKC and case folding follow it)."""
    root = paths.cache_dir()
    if root is None:
        return None
    digest = hashlib.sha256(f"forms v{NORMAL_FORM_VERSION} unicode "
                            f"{unicodedata.unidata_version}\n".encode())
    encoded = [text.encode("utf-8", "surrogatepass") for text in flat]
    # One update of the joined bytes: far faster than two small updates per text.
    digest.update(b"".join(b for data in encoded
                           for b in (len(data).to_bytes(8, "little"), data)))
    return root / "forms" / f"{digest.hexdigest()}.parquet"


def exact_matches(index: FormIndex, pool_forms: Sequence[str]) -> list[Match]:
    """Every pool row whose normal form is a benchmark prompt's (pool order)."""
    matches: list[Match] = []
    for p, form in enumerate(pool_forms):
        key = index.key_of.get(form)
        if key is not None:
            matches.append((key, p, "exact", 1.0))
    return matches
