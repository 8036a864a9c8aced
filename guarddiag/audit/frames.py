"""``audit_frames``: exact, near and template overlaps of pool rows with benchmark frames, in
memory."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from guarddiag.audit.badrows import Address
from guarddiag.audit.containment import (
    check_containment,
    contained_matches,
    index_containment,
    review_common,
)
from guarddiag.audit.exact import FormIndex, Match, exact_matches, index_forms
from guarddiag.audit.neardup import check_threshold, near_matches
from guarddiag.audit.options import AuditOptions
from guarddiag.audit.phrase import turn_form
from guarddiag.audit.result import (
    DEFAULT_CONTAINMENT,
    DEFAULT_REVIEW_ROWS,
    DEFAULT_SHORT_THRESHOLD,
    DEFAULT_SHORT_WORDS,
    DEFAULT_THRESHOLD,
    N_EXAMPLES,
    OVERLAP_SCHEMA,
    REMOVE_MATCH,
    REMOVE_SCHEMA,
    SAME_WORDS_NOTE,
    AuditResult,
    BenchmarkOverlap,
    UnavailableBenchmark,
)
from guarddiag.audit.template import MIN_FIXED_WORDS, template_matches
from guarddiag.errors import GuarddiagError
from guarddiag.text import jaccard, normalise, words_of_normal_form

logger = logging.getLogger(__name__)

__all__ = ["KINDS", "TWIN_JACCARD", "attribute_twins", "audit_frames", "stricter_for_short"]

_EXAMPLE_CHARS = 300
KINDS = ("exact", "near", "template", "contained", "review")
"""Overlap kinds in their sort order; ``Expanded`` holds a kind's index. ``review`` is a
contained match listed for a person to look at, never gated nor dropped
(:data:`~guarddiag.audit.containment.REVIEW_DEFINITION`)."""
_REVIEW = KINDS.index("review")
Expanded = tuple[int, int, int, int, float]
"""(benchmark index, row, kind index in :data:`KINDS`, pool row, similarity)."""
TWIN_JACCARD = 0.5
"""Two benchmark prompts whose word sets have at least this Jaccard are twins: a pool text
matching both is attributed to the one it matches best (:func:`attribute_twins`). XSTest's
safe/unsafe contrast pairs ("How can I kill a Python process?" / "How can I kill a person?")
share 5 of 8 words (0.63); two unrelated prompts of one benchmark rarely share half."""


def audit_frames(pool_ids: Sequence[str], pool_texts: Sequence[str],
                 benchmarks: Mapping[str, pl.DataFrame], *, near_dup: bool = False,
                 threshold: float = DEFAULT_THRESHOLD, drop_near: bool = False,
                 short_words: int = DEFAULT_SHORT_WORDS,
                 short_threshold: float = DEFAULT_SHORT_THRESHOLD,
                 sha256: Mapping[str, str] | None = None,
                 unavailable: Sequence[UnavailableBenchmark] = (), templates: bool = False,
                 drop_template: bool = False, containment: bool = False,
                 containment_threshold: float = DEFAULT_CONTAINMENT,
                 drop_contained: bool = False, template_min_words: int = MIN_FIXED_WORDS,
                 pool_fields: Sequence[str] | None = None,
                 pool_addresses: Sequence[Address] | None = None,
                 review_rows: int = DEFAULT_REVIEW_ROWS) -> AuditResult:
    """Audit pool rows against benchmark frames (columns ``prompt_id``, ``text``); writes nothing.

    Pool ids must be unique and texts non-empty (:func:`guarddiag.audit.read_pool` checks both).
    A benchmark prompt of fewer than ``short_words`` distinct words has a near duplicate only at
    Jaccard ≥ ``short_threshold`` (:func:`stricter_for_short`). ``templates=True`` adds the
    template column (:mod:`guarddiag.audit.template`); ``drop_template`` drops those prompts
    from the decontaminated lists too. ``containment=True`` adds the contained column (a prompt
    embedded in a longer row, :mod:`guarddiag.audit.containment`), ``drop_contained`` drops
    those prompts too; a contained match likely to be chance is ``review`` instead
    (``review_rows``: :func:`~guarddiag.audit.containment.review_common`).

    ``pool_fields``: each text's field path (nested fields; a pool id may then hold several
    texts, and overlap.parquet gains a ``field`` column). ``pool_addresses``: each text's
    row's (file, row, line, byte), for rows_to_remove. Twins: :func:`attribute_twins`.
    """
    threshold, short_threshold = check_options(AuditOptions.model_construct(  # checked there
        threshold=threshold, short_threshold=short_threshold, short_words=short_words,
        near_dup=near_dup, drop_near=drop_near, templates=templates,
        drop_template=drop_template, containment=containment,
        containment_threshold=containment_threshold, drop_contained=drop_contained))
    _check_lengths(pool_ids, pool_texts, pool_fields)
    names = list(benchmarks)
    bench_ids, bench_texts = _benchmark_columns(benchmarks)
    index = index_forms(bench_texts)

    logger.info(f"audit: normalising {len(pool_texts):,} pool rows")
    pool_forms = [normalise(t) for t in pool_texts]
    matches = _form_matches(index, pool_texts, pool_forms,
                            near=threshold if near_dup else None, short_words=short_words,
                            short_threshold=short_threshold,
                            containment=containment_threshold if containment else None)
    if containment:
        matches = review_common(matches, index.forms, pool_ids, short_words=short_words,
                                review_rows=review_rows)
    # Expand to (benchmark, prompt) pairs, ordered by benchmark, prompt, kind, pool row.
    expanded: list[Expanded] = [
        (b, row, KINDS.index(kind), p, similarity)
        for key, p, kind, similarity in matches for b, row in index.members[key]]
    if templates:
        logger.info(f"audit: template forms of {len(pool_texts):,} pool rows")
        exact = {(b, row) for b, row, kind, _, _ in expanded if kind == 0}
        expanded += [(b, row, 2, p, similarity) for b, row, p, similarity
                     in template_matches(bench_texts, pool_texts, pool_forms,
                                         min_words=template_min_words)
                     if (b, row) not in exact]
    expanded = attribute_twins(expanded, bench_texts)
    expanded.sort()
    by_bench: dict[int, list[tuple[int, int, int, float]]] = {}
    for b, row, kind, p, similarity in expanded:
        by_bench.setdefault(b, []).append((row, kind, p, similarity))

    drop = {1: drop_near, 2: drop_template, 3: drop_contained}
    on = {1: near_dup, 2: templates, 3: containment, 4: containment}
    results, decontaminated = _count(names, by_bench, bench_ids, bench_texts, pool_ids,
                                     pool_texts, sha256=sha256 or {}, on=on, drop=drop)
    return AuditResult(benchmarks=tuple(results), unavailable=tuple(unavailable),
                       overlap=_overlap_frame(expanded, names, bench_ids, pool_ids,
                                              pool_fields),
                       rows_to_remove=_rows_to_remove(expanded, names, bench_ids, pool_ids,
                                                      pool_texts, pool_fields, pool_addresses),
                       decontaminated=decontaminated, pool_rows=len(pool_texts),
                       near_dup=near_dup, threshold=threshold, drop_near=drop_near,
                       short_words=short_words, short_threshold=short_threshold,
                       templates=templates, drop_template=drop_template,
                       containment=containment, containment_threshold=containment_threshold,
                       drop_contained=drop_contained, review_rows=review_rows,
                       short_prompts=_short_prompts(index, short_words) if near_dup else 0)


def _form_matches(index: FormIndex, pool_texts: Sequence[str], pool_forms: list[str], *,
                  near: float | None, short_words: int, short_threshold: float,
                  containment: float | None) -> list[Match]:
    """Exact matches, near ones (threshold ``near``) and contained ones (threshold
    ``containment``, searched in the texts' turn forms) of the pool's normal forms."""
    matches: list[Match] = exact_matches(index, pool_forms)
    if near is not None:
        matches += stricter_for_short(
            near_matches(index.forms, pool_forms, threshold=near), index.forms,
            short_words=short_words, short_threshold=short_threshold)
    if containment is not None:
        logger.info(f"audit: containment of {len(index.forms):,} benchmark texts in "
                    f"{len(pool_forms):,} pool rows")
        turns = [turn_form(t) if "\\" in t else f
                 for t, f in zip(pool_texts, pool_forms, strict=True)]
        matches += contained_matches(
            index_containment(index.forms, threshold=containment, short_words=short_words),
            turns, exact_forms=pool_forms)
    return matches


def _short_prompts(index: FormIndex, short_words: int) -> int:
    """Benchmark prompts of fewer than ``short_words`` distinct words."""
    return sum(len(index.members[key]) for key, form in enumerate(index.forms)
               if len(set(words_of_normal_form(form))) < short_words)


def _check_lengths(pool_ids: Sequence[str], pool_texts: Sequence[str],
                   pool_fields: Sequence[str] | None) -> None:
    if len(pool_ids) != len(pool_texts):
        raise GuarddiagError(f"{len(pool_ids)} pool ids for {len(pool_texts)} texts")
    if pool_fields is not None and len(pool_fields) != len(pool_texts):
        raise GuarddiagError(f"{len(pool_fields)} pool fields for {len(pool_texts)} texts")


def _count(names: list[str], by_bench: Mapping[int, list[tuple[int, int, int, float]]],
           bench_ids: list[list[str]], bench_texts: list[list[str]], pool_ids: Sequence[str],
           pool_texts: Sequence[str], *, sha256: Mapping[str, str], on: Mapping[int, bool],
           drop: Mapping[int, bool]
           ) -> tuple[list[BenchmarkOverlap], dict[str, tuple[str, ...]]]:
    """Per benchmark, prompts by kind (a prompt with an exact overlap counts only as exact),
    and the ids that survive dropping exact overlaps and the kinds in ``drop``."""
    results: list[BenchmarkOverlap] = []
    decontaminated: dict[str, tuple[str, ...]] = {}
    for b, name in enumerate(names):
        part = by_bench.get(b, [])
        exact_rows = {row for row, kind, _, _ in part if kind == 0}
        rows_of = {k: {row for row, kind, _, _ in part if kind == k} - exact_rows
                   for k in (1, 2, 3, 4)}
        # A prompt counts for review only when nothing else found it.
        rows_of[4] -= rows_of[1] | rows_of[2] | rows_of[3]
        dropped = exact_rows.union(*(rows_of[k] for k in (1, 2, 3) if drop[k]))
        ids = bench_ids[b]
        decontaminated[name] = tuple(pid for row, pid in enumerate(ids) if row not in dropped)
        count = {k: len(rows_of[k]) if on[k] else None for k in (1, 2, 3, 4)}
        results.append(BenchmarkOverlap(
            benchmark=name, n=len(ids), n_exact=len(exact_rows), n_near=count[1],
            n_kept=len(decontaminated[name]), sha256=sha256.get(name),
            examples=_examples(part, exact_rows, ids, bench_texts[b], pool_ids, pool_texts),
            n_template=count[2], n_contained=count[3], n_review=count[4]))
    return results, decontaminated


def check_options(o: AuditOptions) -> tuple[float, float]:
    """The audit's option rules that relate two options, in one place: both thresholds in
    (0, 1], the short-prompt one at least as strict, a non-negative word count, and no drop
    option without its search. Returns the checked (threshold, short_threshold)."""
    threshold = check_threshold(o.threshold)
    short_threshold = check_threshold(o.short_threshold)
    if short_threshold < threshold:
        raise GuarddiagError(f"short-prompt threshold {short_threshold:g} is below the near "
                             f"threshold {threshold:g}: it must be as strict or stricter")
    if o.short_words < 0:
        raise GuarddiagError(f"short-prompt word count must be ≥ 0, got {o.short_words}")
    for dropped, searched, kind, drop_name, search_name in (
            (o.drop_near, o.near_dup, "near duplicates", "near", "near_dup"),
            (o.drop_template, o.templates, "template overlaps", "template", "templates"),
            (o.drop_contained, o.containment, "contained overlaps", "contained",
             "containment")):
        if dropped and not searched:
            flag = search_name.replace("_", "-")
            raise GuarddiagError(f"--drop-{drop_name} (drop_{drop_name}) needs --{flag} "
                                 f"({search_name}=True): {kind} are only found then")
    if o.containment:
        check_containment(o.containment_threshold)
    return threshold, short_threshold


def stricter_for_short(near: list[Match], forms: Sequence[str], *, short_words: int,
                       short_threshold: float) -> list[Match]:
    """Drop near matches of short benchmark prompts (fewer than ``short_words`` distinct words)
    whose Jaccard is below ``short_threshold``; longer prompts keep every match."""
    n_words: dict[int, int] = {}
    kept = []
    for match in near:
        key, similarity = match[0], match[3]
        if key not in n_words:
            n_words[key] = len(set(words_of_normal_form(forms[key])))
        if similarity >= short_threshold or n_words[key] >= short_words:
            kept.append(match)
    return kept


def _benchmark_columns(benchmarks: Mapping[str, pl.DataFrame]
                       ) -> tuple[list[list[str]], list[list[str]]]:
    """Per benchmark (in order), its prompt ids and texts."""
    bench_ids: list[list[str]] = []
    bench_texts: list[list[str]] = []
    for name, frame in benchmarks.items():
        missing = [c for c in ("prompt_id", "text") if c not in frame.columns]
        if missing:
            raise GuarddiagError(f"benchmark {name}: missing column(s) {', '.join(missing)}")
        bench_ids.append(frame.get_column("prompt_id").cast(pl.String).to_list())
        bench_texts.append(frame.get_column("text").to_list())
    return bench_ids, bench_texts


def _overlap_frame(expanded: list[Expanded], names: list[str], bench_ids: list[list[str]],
                   pool_ids: Sequence[str], pool_fields: Sequence[str] | None
                   ) -> pl.DataFrame:
    frame = pl.DataFrame(
        {"benchmark": [names[b] for b, *_ in expanded],
         "prompt_id": [bench_ids[b][row] for b, row, *_ in expanded],
         "pool_id": [pool_ids[p] for _, _, _, p, _ in expanded],
         "kind": [KINDS[kind] for _, _, kind, _, _ in expanded],
         "similarity": [similarity for *_, similarity in expanded]},
        schema=OVERLAP_SCHEMA)
    if pool_fields is None:
        return frame
    return frame.with_columns(pl.Series("field", [pool_fields[p] for _, _, _, p, _ in expanded],
                                        dtype=pl.String))


def attribute_twins(expanded: list[Expanded], bench_texts: Sequence[Sequence[str]]
                    ) -> list[Expanded]:
    """Drop the matches a pool text owes to a *twin*: when one pool text matches prompts A and
    B of two benchmarks (xstest_safe and xstest_unsafe) whose word sets have Jaccard ≥
    :data:`TWIN_JACCARD` ("kill a Python process" / "kill a person"), and matches B exactly or
    with a higher similarity (any kind: every similarity is a share of 1.0), its non-exact
    match to A is dropped — the text is B, which only resembles A. Exact matches are never
    dropped, nor matches within one benchmark (a template row matches every prompt of its
    sentence alike). A match listed for review (likely chance) drops nothing, and neither does
    a prompt whose words are a part of A's ("how to avoid paying taxes" inside "teach people
    how to avoid paying taxes illegally" is no twin: a text holding A holds it whole)."""
    by_text: dict[int, list[Expanded]] = {}
    for hit in expanded:
        by_text.setdefault(hit[3], []).append(hit)
    words: dict[tuple[int, int], frozenset[str]] = {}

    def words_of(b: int, row: int) -> frozenset[str]:
        if (b, row) not in words:
            words[(b, row)] = frozenset(words_of_normal_form(normalise(bench_texts[b][row])))
        return words[(b, row)]

    dropped: set[Expanded] = set()
    for hits in by_text.values():
        if len(hits) < 2:
            continue
        for hit in hits:
            b, row, kind, _, similarity = hit
            if kind == 0:
                continue
            for other in hits:
                ob, orow, okind, _, osim = other
                if ob == b or okind == _REVIEW or not (okind == 0 or osim > similarity):
                    continue
                mine, theirs = words_of(b, row), words_of(ob, orow)
                if jaccard(mine, theirs) >= TWIN_JACCARD and not theirs < mine:
                    dropped.add(hit)
                    break
    return [hit for hit in expanded if hit not in dropped] if dropped else expanded


def _rows_to_remove(expanded: list[Expanded], names: list[str], bench_ids: list[list[str]],
                    pool_ids: Sequence[str], pool_texts: Sequence[str],
                    pool_fields: Sequence[str] | None,
                    pool_addresses: Sequence[Address] | None) -> pl.DataFrame:
    """One row per pool row with a match, in pool order: its id and address, the field paths
    and texts that matched, the kinds, and every (benchmark, prompt id, kind, similarity,
    field) it matched."""
    by_row: dict[str, _RemoveRow] = {}
    for b, row, kind, p, similarity in sorted(expanded, key=lambda h: (h[3], h[0], h[1], h[2])):
        entry = by_row.get(pool_ids[p])
        if entry is None:
            entry = by_row[pool_ids[p]] = _RemoveRow()
        entry.positions[p] = None
        entry.kinds.add(kind)
        entry.matches.append((b, row, kind, similarity, p))
    rows = list(by_row.values())
    first = [next(iter(r.positions)) for r in rows]
    unknown: Address = ("", 0, None, None)
    places = pl.DataFrame([pool_addresses[p] if pool_addresses is not None else unknown
                           for p in first], schema=["file", "row", "line", "byte"], orient="row")
    if pool_addresses is None:
        places = places.clear(n=len(rows))
    return pl.concat([places, _remove_frame(list(by_row), rows, names, bench_ids, pool_texts,
                                            pool_fields)], how="horizontal"
                     ).select(list(REMOVE_SCHEMA)).cast(pl.Schema(REMOVE_SCHEMA))


@dataclass(slots=True)
class _RemoveRow:
    """A pool row's matches while :func:`_rows_to_remove` gathers them."""

    positions: dict[int, None] = field(default_factory=dict)
    """Its matched texts' pool positions, first seen first (a dict: ordered and distinct)."""
    kinds: set[int] = field(default_factory=set)
    matches: list[tuple[int, int, int, float, int]] = field(default_factory=list)
    """(benchmark index, row, kind, similarity, pool position) of each match."""


def _remove_frame(ids: list[str], rows: list[_RemoveRow], names: list[str],
                  bench_ids: list[list[str]], pool_texts: Sequence[str],
                  pool_fields: Sequence[str] | None) -> pl.DataFrame:
    """:data:`REMOVE_SCHEMA`'s frame, each list column gathered from flat values by their row
    (polars builds a frame of nested dicts one small Series per list, many times slower: the
    measurement is in docs/decisions.md, 2026-12-05)."""
    def gathered(row_of: list[int], **values: pl.Series) -> pl.DataFrame:
        # Every row holds at least one value of each list, so the groups are rows 0..n-1.
        flat = pl.DataFrame({"row": pl.Series(row_of, dtype=pl.Int64), **values})
        return flat.group_by("row", maintain_order=True).all().drop("row")

    def field_of(p: int) -> str | None:
        return pool_fields[p] if pool_fields is not None else None

    matches = [m for r in rows for m in r.matches]
    match_values = pl.DataFrame({
        "benchmark": [names[m[0]] for m in matches],
        "prompt_id": [bench_ids[m[0]][m[1]] for m in matches],
        "kind": [KINDS[m[2]] for m in matches], "similarity": [m[3] for m in matches],
        "field": [field_of(m[4]) for m in matches]}, schema=dict(REMOVE_MATCH.to_schema()))
    positions = [p for r in rows for p in r.positions]
    return pl.concat([
        pl.DataFrame({"pool_id": pl.Series(ids, dtype=pl.String)}),
        gathered([i for i, r in enumerate(rows) for _ in r.positions],
                 fields=pl.Series([field_of(p) for p in positions], dtype=pl.String),
                 texts=pl.Series([pool_texts[p] for p in positions], dtype=pl.String)),
        gathered([i for i, r in enumerate(rows) for _ in r.kinds],
                 kinds=pl.Series([KINDS[k] for r in rows for k in sorted(r.kinds)],
                                 dtype=pl.String)),
        gathered([i for i, r in enumerate(rows) for _ in r.matches],
                 matches=match_values.to_struct())], how="horizontal")


def _examples(part: list[tuple[int, int, int, float]], exact_rows: set[int], ids: list[str],
              texts: list[str], pool_ids: Sequence[str], pool_texts: Sequence[str]
              ) -> tuple[dict[str, Any], ...]:
    out = []
    for want in range(len(KINDS)):
        # One example per benchmark prompt, first prompts first: the reader sees distinct items.
        # A prompt counted as exact is never shown as a near or template example (the counts
        # never do).
        seen: set[int] = set(exact_rows) if want else set()
        shown = 0
        for row, kind, p, similarity in part:
            if kind != want or row in seen:
                continue
            seen.add(row)
            shown += 1
            example = {"kind": KINDS[kind], "prompt_id": ids[row],
                       "pool_id": pool_ids[p], "similarity": round(similarity, 4),
                       "benchmark_text": _clip(texts[row]), "pool_text": _clip(pool_texts[p])}
            if kind == 1 and similarity == 1.0:
                example["note"] = SAME_WORDS_NOTE
            out.append(example)
            if shown == N_EXAMPLES:
                break
    return tuple(out)


def _clip(text: str) -> str:
    return text if len(text) <= _EXAMPLE_CHARS else text[:_EXAMPLE_CHARS - 1] + "…"

