"""The near-dup scan's per-row probe, compiled: one pass over a batch's bytes.

The vectorised probe of :mod:`guarddiag.audit.neardup` builds a table row per word of every
pool row (split, distinct, joined to the vocabulary, sorted), then expands posting lists and
verifies candidates with sparse products: about 4 CPU-seconds per million rows of the synthetic
pool, most of it materialising those per-word rows. This kernel (1.2 CPU-seconds) does the same
steps row by row in machine code (numba), with the same global token order, prefix, size and
positional filters and exact verification:

* words are the runs between spaces and the ASCII bytes that are no letter or digit, read
  through the word form's byte table (:data:`~guarddiag.audit.normal.WORD_BYTES`, so an ASCII
  text is read as it is); a row holding another byte is left to the caller, which hands the
  kernel its word form instead (:func:`form_near_rows`);
* a word of up to 8 bytes is its own 64-bit key; a longer one is hashed (FNV-1a) and confirmed
  byte by byte, so no hash collision can merge two words, neither among a row's distinct words
  nor in the vocabulary's open-addressing table;
* each row keeps only its ``prefix`` rarest known ranks (unknown words count first, as in the
  vectorised probe) and stamps every known rank, so a candidate's intersection is a count of
  stamped ranks, with no sort of the row's words.

A row is kept when some benchmark set reaches the threshold: the rows the vectorised probe finds
(``tests/test_kernels.py`` compares both with a brute-force Jaccard).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
from numba import njit

from guarddiag.audit.kernels import FNV_OFFSET, FNV_PRIME, column_buffers, home_slot
from guarddiag.audit.normal import WORD_BYTES

if TYPE_CHECKING:
    from guarddiag.audit.neardup import PrefixIndex

__all__ = ["CompiledIndex", "ascii_near_rows", "compile_index", "form_near_rows", "form_pairs",
           "warm"]

_EPS = 1e-9
"""The slack of :data:`guarddiag.audit.neardup._EPS` (the filters must be at least as loose)."""
_SHORT_LIST = 32
"""Posting lists up to this long are scanned; longer ones use the run table."""
_LONG = np.uint64(1 << 63)


@njit(cache=True, nogil=True, inline="always")
def _key(data, start, stop):
    """A word's key: its bytes packed little-endian into 64 bits when there are at most 8 (the
    word itself: no byte is 0), else the FNV-1a hash of its bytes past the 8th, seeded with
    the first 8, with the top bit set (no packed ASCII word has it)."""
    key = np.uint64(0)
    for j in range(start, min(stop, start + 8)):
        key |= np.uint64(data[j]) << np.uint64(8 * (j - start))
    if stop - start <= 8:
        return key
    h = (FNV_OFFSET ^ key) * FNV_PRIME
    for j in range(start + 8, stop):
        h = (h ^ np.uint64(data[j])) * FNV_PRIME
    return h | _LONG


@njit(cache=True, nogil=True)
def _build_table(offsets, data):
    """Open-addressing table of the words ``data[offsets[i]:offsets[i + 1]]``: slot ``s`` holds
    a word's key at ``2s``, and its rank ``i`` and byte length (high 32 bits) at ``2s + 1``
    (key 0: empty)."""
    n = len(offsets) - 1
    bits = 4
    while (1 << bits) < 8 * n:     # an eighth full: a look-up rarely probes a second slot
        bits += 1
    size = 1 << bits
    shift = np.uint64(64 - bits)
    table = np.zeros(2 * size, dtype=np.uint64)
    for i in range(n):
        key = _key(data, offsets[i], offsets[i + 1])
        slot = home_slot(key, shift)
        while table[2 * slot] != 0:
            slot = (slot + 1) & (size - 1)
        table[2 * slot] = key
        table[2 * slot + 1] = np.uint64(i) | (np.uint64(offsets[i + 1] - offsets[i]) << 32)
    return table, shift


@njit(cache=True, nogil=True)
def _probe(offsets, data, lut, table, shift, vocab_offsets, vocab_data,
           set_sizes, set_ptr, set_ranks, run_table, run_meta, rank_start, posting_sizes,
           posting_keys, band, postings, posting_positions, threshold, keep, wide, any_byte,
           pair_sets, pair_rows, pair_similarity, pair_count):
    """``keep[row]``: the row's word set reaches ``threshold`` with some indexed set; ``wide``
    the rows left to the caller (a byte >= 0x80, unless ``any_byte``). With room in the
    ``pair_*`` arrays (not empty), every such (set, row, Jaccard) is written there too, and
    ``pair_count[0]`` counts them (past the room: the caller runs again with more)."""
    n = len(offsets) - 1
    all_pairs = len(pair_sets) > 0
    longest = 0
    for i in range(n):
        longest = max(longest, offsets[i + 1] - offsets[i])
    bits = 4
    while (1 << bits) < longest + 2:
        bits += 1
    seen_mask = (1 << bits) - 1     # at most half full: a word and its space take 2 bytes
    seen_shift = np.uint64(64 - bits)
    seen_stamp = np.zeros(seen_mask + 1, dtype=np.int32)
    seen_key = np.zeros(seen_mask + 1, dtype=np.uint64)
    seen_start = np.zeros(seen_mask + 1, dtype=np.int64)
    seen_len = np.zeros(seen_mask + 1, dtype=np.int64)
    ranks = np.zeros(longest // 2 + 2, dtype=np.int64)
    word_key = np.zeros(longest // 2 + 2, dtype=np.uint64)
    word_start = np.zeros(longest // 2 + 2, dtype=np.int64)
    word_len = np.zeros(longest // 2 + 2, dtype=np.int64)
    set_stamp = np.zeros(len(set_sizes), dtype=np.int32)
    rank_stamp = np.zeros(len(vocab_offsets) - 1, dtype=np.int32)
    table_mask = len(table) // 2 - 1
    use_runs = len(run_table) > 0
    for row in range(n):
        start, stop = offsets[row], offsets[row + 1]
        stamp = np.int32(row + 1)
        if not any_byte:
            ascii_only = True
            for c in range(start, stop):
                if data[c] >= 128:
                    ascii_only = False
                    break
            if not ascii_only:
                wide[row] = True
                continue
        distinct = 0
        j = start
        while j < stop:
            while j < stop and lut[data[j]] == 32:
                j += 1
            if j >= stop:
                break
            w0 = j
            key = np.uint64(0)
            shift_in = np.uint64(0)
            while j < stop and shift_in < 64:
                c = lut[data[j]]
                if c == 32:
                    break
                key |= np.uint64(c) << shift_in
                shift_in += np.uint64(8)
                j += 1
            long_word = False
            if j < stop and lut[data[j]] != 32:
                long_word = True
                h = (FNV_OFFSET ^ key) * FNV_PRIME
                while j < stop:
                    c = lut[data[j]]
                    if c == 32:
                        break
                    h = (h ^ np.uint64(c)) * FNV_PRIME
                    j += 1
                key = h | _LONG
            length = j - w0
            # Distinct within the row: a key of up to 8 bytes is the word itself; a longer
            # word's hash is confirmed byte by byte.
            slot = home_slot(key, seen_shift)
            repeat = False
            while seen_stamp[slot] == stamp:
                if seen_key[slot] == key and seen_len[slot] == length:
                    if not long_word:
                        repeat = True
                        break
                    other = seen_start[slot]
                    same = True
                    for q in range(length):
                        if lut[data[other + q]] != lut[data[w0 + q]]:
                            same = False
                            break
                    if same:
                        repeat = True
                        break
                slot = (slot + 1) & seen_mask
            if repeat:
                continue
            seen_stamp[slot] = stamp
            seen_key[slot] = key
            seen_start[slot] = w0
            seen_len[slot] = length
            word_key[distinct] = key
            word_start[distinct] = w0
            word_len[distinct] = length
            distinct += 1
        # Each distinct word's rank, if the index knows it: every known rank is stamped (for
        # the intersections), and the `prefix` smallest kept in order (the probe's prefix is
        # among them: unknown words come first). No full sort of the row's ranks is needed.
        k = distinct
        low = np.int64(np.ceil(threshold * np.float64(k) - _EPS))
        prefix = k - low + 1
        known = 0
        chosen = 0
        for i in range(distinct):
            key = word_key[i]
            length = word_len[i]
            vslot = home_slot(key, shift)
            while table[2 * vslot] != 0:
                entry = table[2 * vslot + 1]
                if table[2 * vslot] == key and np.int64(entry >> 32) == length:
                    w = np.int64(entry & 0xFFFFFFFF)
                    same = True
                    if length > 8:
                        base = vocab_offsets[w]
                        w0 = word_start[i]
                        for q in range(length):
                            if vocab_data[base + q] != lut[data[w0 + q]]:
                                same = False
                                break
                    if same:
                        known += 1
                        rank_stamp[w] = stamp
                        if chosen < prefix or w < ranks[chosen - 1]:
                            at = min(chosen, prefix - 1)
                            while at > 0 and ranks[at - 1] > w:
                                ranks[at] = ranks[at - 1]
                                at -= 1
                            ranks[at] = w
                            chosen = min(chosen + 1, prefix)
                        break
                vslot = (vslot + 1) & table_mask
        if known == 0:
            continue
        unknown = k - known
        high = np.int64(np.floor(np.float64(k) / threshold + _EPS))
        found = False
        for i in range(min(chosen, prefix - unknown)):
            position = i + unknown
            r = ranks[i]
            first, last = rank_start[r], rank_start[r + 1]
            if last - first <= _SHORT_LIST:
                # A short posting list (most: prefix tokens are a row's rarest) is scanned
                # for its size-compatible run, next to the rank's start in the cache.
                while first < last and posting_sizes[first] < low:
                    first += 1
                end = first
                while end < last and posting_sizes[end] <= high:
                    end += 1
                last = end
            elif use_runs:
                span = run_meta[4 * r + 2]
                if span == 1:
                    continue
                run_low = run_meta[4 * r + 1]
                a = min(max(low - run_low, 0), span - 1)
                b = min(max(high + 1 - run_low, 0), span - 1)
                first = run_table[run_meta[4 * r] + a]
                last = run_table[run_meta[4 * r] + b]
            else:
                key_base = r * band
                first = np.searchsorted(posting_keys, key_base + min(max(low, 0), band - 1))
                last = np.searchsorted(posting_keys, key_base + min(max(high, 0), band - 1),
                                       side="right")
            for e in range(first, last):
                s = postings[e]
                if set_stamp[s] == stamp:
                    continue
                m = set_sizes[s]
                bound = min(k - position, m - posting_positions[e])
                need = np.ceil(threshold * np.float64(k + m) / (1 + threshold) - _EPS)
                if bound < need:
                    continue
                set_stamp[s] = stamp
                inter = 0
                for q in range(set_ptr[s], set_ptr[s + 1]):
                    if rank_stamp[set_ranks[q]] == stamp:
                        inter += 1
                similarity = np.float64(inter) / np.float64(k + m - inter)
                if similarity >= threshold:
                    found = True
                    if not all_pairs:
                        break
                    at = pair_count[0]
                    if at < len(pair_sets):
                        pair_sets[at] = s
                        pair_rows[at] = row
                        pair_similarity[at] = similarity
                    pair_count[0] = at + 1
            if found and not all_pairs:
                break
        keep[row] = found


@dataclass(frozen=True)
class CompiledIndex:
    """A :class:`~guarddiag.audit.neardup.PrefixIndex` as the kernel reads it: the vocabulary
    as bytes and an open-addressing table of their keys, and the index's arrays in the widths
    the kernel wants (built once per process, with the index)."""

    table: np.ndarray
    """Slot ``s``: a word's key at ``2s``; its rank and byte length at ``2s + 1``."""
    shift: np.uint64
    vocab_offsets: np.ndarray
    vocab_data: np.ndarray
    set_sizes: np.ndarray
    set_ptr: np.ndarray
    set_ranks: np.ndarray
    """Each indexed set's ranks (CSR rows of the index's incidence matrix)."""
    run_table: np.ndarray
    run_meta: np.ndarray
    """Per rank: its run table offset, lowest size, span and a pad (one cache line read);
    both empty when the index has no run table."""
    rank_start: np.ndarray
    """Where each rank's postings start (``n_vocab + 1`` offsets)."""
    posting_sizes: np.ndarray
    """Each posting's set size (ascending within a rank)."""
    posting_keys: np.ndarray
    band: int
    postings: np.ndarray
    posting_positions: np.ndarray
    threshold: float


def compile_index(index: PrefixIndex) -> CompiledIndex:
    """The kernel's view of ``index`` (the vocabulary's ``rank`` is its row number)."""
    buffers = column_buffers(index.vocab.get_column("word"))
    assert buffers is not None, "a vocabulary holds no null word"
    offsets, data = buffers
    table, shift = _build_table(offsets, data)
    runs = index.runs
    run_table: np.ndarray = np.zeros(0, dtype=np.int32)
    run_meta: np.ndarray = np.zeros(0, dtype=np.int64)
    if runs is not None:
        run_table = runs.table.astype(np.int32)
        run_meta = np.stack([runs.offsets, runs.low, runs.span, np.zeros_like(runs.span)],
                            axis=1).astype(np.int64).ravel()
    return CompiledIndex(
        table=table, shift=shift, vocab_offsets=offsets, vocab_data=data,
        set_sizes=index.sizes, set_ptr=index.set_ptr,
        set_ranks=index.set_ranks.astype(np.int32), run_table=run_table, run_meta=run_meta,
        rank_start=np.searchsorted(index.posting_keys // index.band,
                                   np.arange(index.vocab.height + 1)).astype(np.int64),
        posting_sizes=(index.posting_keys % index.band).astype(np.int32),
        posting_keys=index.posting_keys, band=index.band, postings=index.postings,
        posting_positions=index.posting_positions, threshold=index.threshold)


def warm(tiny: PrefixIndex) -> None:
    """Load (or compile) the kernels now, on a tiny index: the first real call then starts at
    once (:func:`guarddiag.audit.neardup.warm_compiled_probe`)."""
    index = compile_index(tiny)
    ascii_near_rows(pl.Series(["a b"], dtype=pl.String), index)
    form_pairs(pl.Series(["a b"], dtype=pl.String), index)


def ascii_near_rows(texts: pl.Series, index: CompiledIndex
                    ) -> tuple[np.ndarray, np.ndarray] | None:
    """(keep, wide) per row of ``texts``: ``keep`` the rows holding only ASCII bytes whose
    word set reaches the index's threshold with some indexed set; ``wide`` the rows holding a
    non-ASCII byte, left to the caller. ``None`` when the column has nulls."""
    return _near(texts, index, any_byte=False)


def form_near_rows(forms: pl.Series, index: CompiledIndex) -> np.ndarray | None:
    """``keep`` per form whose words are its pieces between spaces and between the ASCII
    bytes that are no letter or digit (a word form, :func:`~guarddiag.audit.normal.word_forms`,
    after :func:`~guarddiag.audit.neardup.spaced_forms`), any characters; ``None`` when the
    column has nulls."""
    found = _near(forms, index, any_byte=True)
    return None if found is None else found[0]


def form_pairs(forms: pl.Series, index: CompiledIndex
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(indexed set, form, Jaccard) of every pair reaching the threshold, sorted by set, then
    form, for forms as :func:`form_near_rows` reads them: the pairs
    :func:`~guarddiag.audit.neardup.probe_forms` finds, with the same Jaccard floats
    (``inter / (k + m - inter)`` in float64). ``None`` when the column has nulls."""
    room = max(64, forms.len())
    while True:
        pairs = (np.zeros(room, dtype=np.int64), np.zeros(room, dtype=np.int64),
                 np.zeros(room, dtype=np.float64))
        count = np.zeros(1, dtype=np.int64)
        if _near(forms, index, any_byte=True, pairs=(*pairs, count)) is None:
            return None
        if count[0] <= room:
            break
        room = int(count[0])
    sets, rows, similarity = (a[:count[0]] for a in pairs)
    order = np.lexsort((rows, sets))
    return sets[order], rows[order], similarity[order]


_NO_PAIRS = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
             np.zeros(0, dtype=np.float64), np.zeros(1, dtype=np.int64))


def _near(texts: pl.Series, index: CompiledIndex, *, any_byte: bool,
          pairs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] = _NO_PAIRS
          ) -> tuple[np.ndarray, np.ndarray] | None:
    buffers = column_buffers(texts)
    if buffers is None:
        return None
    offsets, data = buffers
    keep = np.zeros(texts.len(), dtype=np.bool_)
    wide = np.zeros(texts.len(), dtype=np.bool_)
    _probe(offsets, data, WORD_BYTES, index.table, index.shift, index.vocab_offsets,
           index.vocab_data, index.set_sizes, index.set_ptr, index.set_ranks, index.run_table,
           index.run_meta, index.rank_start, index.posting_sizes, index.posting_keys,
           np.int64(index.band), index.postings, index.posting_positions,
           np.float64(index.threshold), keep, wide, any_byte, *pairs)
    return keep, wide
