"""Exact overlaps: benchmark prompts and pool rows with equal normal forms
(:func:`guarddiag.text.normalise`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from guarddiag.audit.normal import normal_forms

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
    # The vectorised normaliser gives normalise()'s forms (tests/test_normalise_vectorised.py).
    all_forms = iter(normal_forms(pl.Series(flat, dtype=pl.String))[0].to_list() if flat else [])
    for b, texts in enumerate(bench_texts):
        for row in range(len(texts)):
            form = next(all_forms)
            if form:
                keyed.append((key_of.setdefault(form, len(key_of)), b, row))
    members: list[list[tuple[int, int]]] = [[] for _ in key_of]
    for key, b, row in keyed:
        members[key].append((b, row))
    return FormIndex(key_of=key_of, members=members)


def exact_matches(index: FormIndex, pool_forms: Sequence[str]) -> list[Match]:
    """Every pool row whose normal form is a benchmark prompt's (pool order)."""
    matches: list[Match] = []
    for p, form in enumerate(pool_forms):
        key = index.key_of.get(form)
        if key is not None:
            matches.append((key, p, "exact", 1.0))
    return matches
