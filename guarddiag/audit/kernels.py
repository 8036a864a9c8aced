"""The audit scan's per-row passes, compiled (numba): one pass over a batch's bytes each.

* the near-dup probe (:func:`text_near_rows`, :func:`form_near_rows`, :func:`form_pairs`): the
  rows whose word set reaches the Jaccard threshold with a benchmark prompt's;
* the exact pass's filter (:func:`exact_rows`): the rows whose key, the normal form without
  spaces, is a benchmark prompt's.

Each keeps exactly the rows of its vectorised counterpart (:mod:`guarddiag.audit.neardup`,
:func:`guarddiag.audit.normal.exact_candidates`); ``tests/test_kernels.py`` and
``tests/test_exact_kernel.py`` check both. numba compiles the kernels on the first large audit of
an installation and caches the machine code beside this file (``cache=True``). The CLI's start-up
and the audit of a small pool never import it
(:func:`guarddiag.audit.kernelchoice.compiled_scan_pays`).

They live in one file on purpose: numba keys a function's cache to its own file, so a kernel
calling a helper from another file keeps its stale machine code when only the helper changes (a
mutated ``encode_utf8`` in a separate helper module went unnoticed until the cache was cleared).

**The near-dup probe.** The vectorised probe of :mod:`guarddiag.audit.neardup` builds a table
row per word of every pool row (split, distinct, joined to the vocabulary, sorted), then expands
posting lists and verifies candidates with sparse products, most of its time materialising
those per-word rows. This kernel does the same steps row by row in machine code (the CPU time of
both: docs/decisions.md, 2026-12-05), with the same global token order, prefix, size and
positional filters and exact verification:

* words are the runs between spaces and the ASCII bytes that are no letter or digit, read
  through the word form's byte table (:data:`~guarddiag.audit.normal.WORD_BYTES`, so an ASCII
  text is read as it is); a row holding another byte is first rewritten as its word form, code
  point by code point (:func:`_fold_words`: a word character's lower case, else a space, from
  :func:`~guarddiag.audit.normal.word_code_points`), and a row holding a character that is not
  provable, or that the process meets for the first time, is left to the caller, which hands
  the kernel its word form instead (:func:`form_near_rows`);
* a word of up to 8 bytes is its own 64-bit key; a longer one is hashed (FNV-1a) and confirmed
  byte by byte, so no hash collision can merge two words, neither among a row's distinct words
  nor in the vocabulary's open-addressing table;
* each row keeps only its ``prefix`` rarest known ranks (unknown words count first, as in the
  vectorised probe) and stamps every known rank, so a candidate's intersection is a count of
  stamped ranks, with no sort of the row's words.

A row is kept when some benchmark set reaches the threshold: the rows the vectorised probe finds
(``tests/test_kernels.py`` compares both with a brute-force Jaccard).

**The exact pass.** The vectorised pass (:func:`guarddiag.audit.normal.exact_candidates`) finds
the rows holding a non-ASCII character and looks up each new character (a regex extraction, an
explode and a ``unique`` per batch), cleans a window at each end of every row and compares the
ends. :func:`exact_rows` reads each row once (the CPU time of both: docs/decisions.md,
2026-12-05):

* a row holding only ASCII bytes (an OR of its bytes, which vectorises) is read as it is;
  another is decoded, and each code point looked up in a per-process table of what it becomes
  in a key (:func:`~guarddiag.audit.normal.key_code_points`: its lower case, nothing for a
  separator, or "the Python normaliser": then the row is handed on, as the vectorised pass
  hands it). Code points the process has not met are listed, looked up once, and their rows
  read again;
* the key's first and last :data:`~guarddiag.audit.normal.END_CHARS` characters are packed
  (ASCII) or hashed into a code and looked up among the benchmark keys' (:func:`ends_code`);
  a row whose ends are there has its whole key hashed and looked up (:func:`key_code`), and
  then compared, character by character, with the key of that hash;
* a row holding a character that is not provable has its ends read too when they lie in the
  provable stretches at each end (:func:`_key_ends`); only if they can be a key's is it handed
  to :func:`~guarddiag.text.normalise` (1,540 rows of 10M in the synthetic pool, not 16,150).

Hashes only ever add work, never a candidate: a row whose hash is a key's is compared with that
key, and one whose characters differ (a collision) is handed to the Python normaliser.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import polars as pl
from numba import njit

from guarddiag.audit.normal import (
    END_CHARS,
    WORD_BYTES,
    KeyIndex,
    exact_candidates,
    key_code_points,
    key_index,
    large_strings,
    word_code_points,
)
from guarddiag.text import normalise

__all__ = ["CompiledIndex", "CompiledKeys", "IndexArrays", "RunArrays", "compile_index",
           "compile_keys", "ends_code", "exact_rows", "form_near_rows", "form_pairs", "key_code",
           "key_codes", "text_near_rows", "warm_exact", "warm_near"]

assert END_CHARS <= 4, "a key's head and tail are packed into 32 bits each"


# ─── shared: hashing, tables, UTF-8 ───────────────────────────────────────────────────────────

FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
"""FNV-1a's 64-bit offset basis and prime (words past 8 bytes, keys' ends and keys)."""
_MIX = np.uint64(0x9E3779B97F4A7C15)

DROP, SLOW, UNKNOWN, LISTED = -1, -2, -3, -4
"""A code point table's values besides a character (a code point >= 0): dropped (a separator,
or a space in a word form), a row the Python normaliser does, not yet looked up, and listed for
look-up by a kernel (until the caller learns it)."""


def code_point_table() -> np.ndarray:
    """A per-process table, code point → what a kernel makes of it, all :data:`UNKNOWN`."""
    return np.full(0x110000, UNKNOWN, dtype=np.int32)


class _CodePoints:
    """A per-process :func:`code_point_table` filled by ``rule`` (characters → what each
    becomes, :func:`~guarddiag.audit.normal.key_code_points` or
    :func:`~guarddiag.audit.normal.word_code_points`) as batches bring new characters: the
    ASCII ones on first use, then those a kernel lists as unknown."""

    def __init__(self, rule: Callable[[list[str]], dict[str, int]]) -> None:
        self.table = code_point_table()
        self._rule = rule

    def ready(self) -> np.ndarray:
        """The table, with the ASCII characters looked up."""
        if self.table[0] == UNKNOWN:
            self.learn([chr(c) for c in range(128)])
        return self.table

    @staticmethod
    def room(size: int) -> np.ndarray:
        """Where a kernel reading ``size`` bytes lists the code points it does not know: a
        count, then room for every distinct one (zeroed pages cost nothing untouched)."""
        return np.zeros(min(size, 0x110000) + 1, dtype=np.int64)

    def learn_listed(self, unknown: np.ndarray) -> None:
        """Look up the code points a kernel listed (``unknown``: a count, then the points)."""
        self.learn([chr(c) for c in unknown[1:unknown[0] + 1]])

    def learn(self, chars: list[str]) -> None:
        for char, code in self._rule(chars).items():
            self.table[ord(char)] = code


@njit(cache=True, nogil=True, inline="always")
def decode_utf8(data, j):
    """(code point, next position) of the UTF-8 character at ``data[j]``."""
    b = np.int64(data[j])
    if b < 0x80:
        return b, j + 1
    if b < 0xE0:
        return ((b & 0x1F) << 6) | (np.int64(data[j + 1]) & 0x3F), j + 2
    if b < 0xF0:
        return (((b & 0x0F) << 12) | ((np.int64(data[j + 1]) & 0x3F) << 6)
                | (np.int64(data[j + 2]) & 0x3F)), j + 3
    return (((b & 0x07) << 18) | ((np.int64(data[j + 1]) & 0x3F) << 12)
            | ((np.int64(data[j + 2]) & 0x3F) << 6) | (np.int64(data[j + 3]) & 0x3F)), j + 4


@njit(cache=True, nogil=True, inline="always")
def encode_utf8(cp, out, n):
    """Write code point ``cp`` as UTF-8 at ``out[n]``; return the position after it."""
    if cp < 0x80:
        out[n] = cp
        return n + 1
    if cp < 0x800:
        out[n] = 0xC0 | (cp >> 6)
        out[n + 1] = 0x80 | (cp & 0x3F)
        return n + 2
    if cp < 0x10000:
        out[n] = 0xE0 | (cp >> 12)
        out[n + 1] = 0x80 | ((cp >> 6) & 0x3F)
        out[n + 2] = 0x80 | (cp & 0x3F)
        return n + 3
    out[n] = 0xF0 | (cp >> 18)
    out[n + 1] = 0x80 | ((cp >> 12) & 0x3F)
    out[n + 2] = 0x80 | ((cp >> 6) & 0x3F)
    out[n + 3] = 0x80 | (cp & 0x3F)
    return n + 4


@njit(cache=True, nogil=True, inline="always")
def home_slot(key, shift):
    """A key's home slot in a table of ``2 ** (64 - shift)`` slots (the high bits of a
    multiply-xorshift mix: a packed word's entropy sits in its low bytes)."""
    key = (key ^ (key >> np.uint64(29))) * _MIX
    return np.int64((key ^ (key >> np.uint64(32))) >> shift)


@njit(cache=True, nogil=True, inline="always")
def fnv1a(h, value):
    """One step of 64-bit FNV-1a: ``h`` (from :data:`FNV_OFFSET`) taking ``value`` (a byte or a
    code point). Every hash the kernels and their indexes must agree on is made of these."""
    return (h ^ np.uint64(value)) * FNV_PRIME


@njit(cache=True, nogil=True, inline="always")
def high_byte(data, words, start, stop):
    """Whether ``data[start:stop]`` holds a byte >= 0x80, read 8 bytes at a time from
    ``words`` (``data``'s whole 8-byte words as uint64): twice as fast as byte by byte."""
    first = (start + 7) >> 3
    last = stop >> 3
    seen = np.uint64(0)
    if first >= last:
        for c in range(start, stop):
            seen |= np.uint64(data[c])
    else:
        for c in range(start, first << 3):
            seen |= np.uint64(data[c])
        for w in range(first, last):
            seen |= words[w]
        for c in range(last << 3, stop):
            seen |= np.uint64(data[c])
    return (seen & np.uint64(0x8080808080808080)) != 0


def column_buffers(texts: pl.Series) -> tuple[np.ndarray, np.ndarray] | None:
    """(offsets, bytes) of a string column without nulls, or ``None`` if it has nulls."""
    arrow = large_strings(texts)
    if arrow is None:
        return None
    _, offsets, data = arrow.buffers()
    offsets_np = np.frombuffer(offsets, dtype=np.int64)[arrow.offset:arrow.offset + len(arrow) + 1]
    data_np = (np.frombuffer(data, dtype=np.uint8) if data is not None
               else np.zeros(0, dtype=np.uint8))
    return offsets_np, data_np


# ─── the near-dup probe ────────────────────────────────────────────────────────────────────────

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
    h = fnv1a(FNV_OFFSET, key)
    for j in range(start + 8, stop):
        h = fnv1a(h, data[j])
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


# One loop nest per row on purpose: split into inlined helpers it ran slower
# (docs/decisions.md#2026-12-05-the-near-probe-is-one-loop-nest).
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
    words = data[:len(data) - len(data) % 8].view(np.uint64)
    for row in range(n):
        start, stop = offsets[row], offsets[row + 1]
        stamp = np.int32(row + 1)
        if not any_byte and high_byte(data, words, start, stop):
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
                h = fnv1a(FNV_OFFSET, key)
                while j < stop:
                    c = lut[data[j]]
                    if c == 32:
                        break
                    h = fnv1a(h, c)
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
    """A prefix index (:class:`IndexArrays`) as the kernel reads it: the vocabulary
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


class RunArrays(Protocol):
    """The run table of a prefix index, as :func:`compile_index` reads it."""

    @property
    def table(self) -> np.ndarray: ...
    @property
    def offsets(self) -> np.ndarray: ...
    @property
    def low(self) -> np.ndarray: ...
    @property
    def span(self) -> np.ndarray: ...


class IndexArrays(Protocol):
    """What :func:`compile_index` reads of a prefix-filter index.

    :class:`guarddiag.audit.neardup.PrefixIndex` is one; the kernels sit below the module that
    builds the index (it loads them lazily), so they name only the fields they read.
    """

    @property
    def threshold(self) -> float: ...
    @property
    def sizes(self) -> np.ndarray: ...
    @property
    def vocab(self) -> pl.DataFrame: ...
    @property
    def posting_keys(self) -> np.ndarray: ...
    @property
    def postings(self) -> np.ndarray: ...
    @property
    def posting_positions(self) -> np.ndarray: ...
    @property
    def band(self) -> int: ...
    @property
    def runs(self) -> RunArrays | None: ...
    @property
    def set_ptr(self) -> np.ndarray: ...
    @property
    def set_ranks(self) -> np.ndarray: ...


def compile_index(index: IndexArrays) -> CompiledIndex:
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


def warm_near(tiny: IndexArrays) -> None:
    """Load (or compile) the kernels now, on a tiny index: the first real call then starts at
    once (:func:`guarddiag.audit.neardup.warm_compiled_probe`)."""
    index = compile_index(tiny)
    text_near_rows(pl.Series(["a b", "é b", "ﬁ"], dtype=pl.String), index)
    form_pairs(pl.Series(["a b"], dtype=pl.String), index)


def text_near_rows(texts: pl.Series, index: CompiledIndex
                   ) -> tuple[np.ndarray, np.ndarray] | None:
    """(keep, left) per row of ``texts``: ``keep`` the rows whose word set reaches the index's
    threshold with some indexed set; ``left`` the rows left to the caller, which hold a
    character that is not provable (their words need :func:`guarddiag.text.normalise`) or that
    the process meets for the first time (looked up now, for the next batches). A row holding
    only ASCII bytes is read as it is; another is first rewritten as its word form with its
    word-ending characters made spaces, code point by code point (:func:`_fold_words`).
    ``None`` when the column has nulls."""
    buffers = column_buffers(texts)
    if buffers is None:
        return None
    offsets, data = buffers
    keep, wide = _near_buffers(offsets, data, index, any_byte=False)
    rows = np.flatnonzero(wide)
    if not rows.size:
        return keep, wide
    size = int((offsets[rows + 1] - offsets[rows]).sum())
    # A lower case takes at most 3 bytes where its character took 2: twice the room is ample.
    folded_offsets = np.zeros(rows.size + 1, dtype=np.int64)
    folded = np.empty(2 * size + 8, dtype=np.uint8)
    left = np.zeros(rows.size, dtype=np.bool_)
    unknown = _WORD_POINTS.room(size)
    _fold_words(offsets, data, rows, _WORD_POINTS.ready(), folded_offsets, folded, left,
                unknown)
    if unknown[0]:
        _WORD_POINTS.learn_listed(unknown)
    keep[rows] = _near_buffers(folded_offsets, folded[:folded_offsets[-1]], index,
                               any_byte=True)[0] & ~left
    wide[:] = False
    wide[rows[left]] = True
    return keep, wide


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
    return _near_buffers(*buffers, index, any_byte=any_byte, pairs=pairs)


def _near_buffers(offsets: np.ndarray, data: np.ndarray, index: CompiledIndex, *, any_byte: bool,
                  pairs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] = _NO_PAIRS
                  ) -> tuple[np.ndarray, np.ndarray]:
    keep = np.zeros(len(offsets) - 1, dtype=np.bool_)
    wide = np.zeros(len(offsets) - 1, dtype=np.bool_)
    _probe(offsets, data, WORD_BYTES, index.table, index.shift, index.vocab_offsets,
           index.vocab_data, index.set_sizes, index.set_ptr, index.set_ranks, index.run_table,
           index.run_meta, index.rank_start, index.posting_sizes, index.posting_keys,
           np.int64(index.band), index.postings, index.posting_positions,
           np.float64(index.threshold), keep, wide, any_byte, *pairs)
    return keep, wide


# ─── rows holding a non-ASCII byte: their word forms, code point by code point ────────────────

_WORD_POINTS = _CodePoints(word_code_points)
"""Per process: code point → what it becomes in a word form (its lower case, a space or "the
Python normaliser")."""


@njit(cache=True, nogil=True)
def _fold_words(offsets, data, rows, fold, folded_offsets, folded, left, unknown):
    """Write each of ``rows``' word form, its word-ending characters made spaces, as the
    ``i``-th string of ``folded_offsets``/``folded``: each code point as ``fold`` says (a word
    character's lower case in UTF-8, else a space). A row holding a character that is not
    provable, or that ``fold`` does not know yet, is ``left[i]`` (an empty string here); each
    unknown code point is written once to ``unknown``, after a count in ``unknown[0]``."""
    n = 0
    n_unknown = 0
    for i in range(len(rows)):
        folded_offsets[i] = n
        begin = n
        j, stop = offsets[rows[i]], offsets[rows[i] + 1]
        while j < stop:
            cp, j = decode_utf8(data, j)
            f = fold[cp]
            if f >= 0:
                n = encode_utf8(f, folded, n)
            elif f == DROP:
                folded[n] = 32
                n += 1
            else:
                left[i] = True
                if f == UNKNOWN:
                    fold[cp] = LISTED     # marked until the caller learns it
                    n_unknown += 1
                    unknown[n_unknown] = cp
        if left[i]:
            n = begin
    folded_offsets[len(rows)] = n
    unknown[0] = n_unknown


# ─── the exact pass: a row's key ends, then its key ───────────────────────────────────────────

_KEY_POINTS = _CodePoints(key_code_points)
"""Per process: code point → what it becomes in a key (its lower case, or
:data:`~guarddiag.audit.kernels.DROP` or :data:`~guarddiag.audit.kernels.SLOW`)."""
_ASCII_CODE = np.uint64(1 << 63)


def ends_code(key: str) -> int:
    """A key's first and last :data:`~guarddiag.audit.normal.END_CHARS` characters as the exact
    kernel condenses them: packed, each ASCII code plus one, the head from bit 0 and the tail
    (from its last character) from bit 32, with the top bit set, if all are ASCII; else the
    FNV-1a hash of their code points, top bit clear. Equal ends give equal codes; unequal ones
    the same code only by a hash collision, which costs a candidate, never a miss."""
    head, tail = key[:END_CHARS], key[::-1][:END_CHARS]
    if (head + tail).isascii():
        return ((1 << 63) | sum((ord(c) + 1) << (8 * i) for i, c in enumerate(head))
                | sum((ord(c) + 1) << (32 + 8 * i) for i, c in enumerate(tail)))
    # U+FFFF splits the two (a noncharacter, so unprovable: never among the key characters
    # the kernel reads); 0 marks an empty slot of the kernel's table.
    return max(key_code(f"{head}\uffff{tail}") & ~(1 << 63), 1)


def key_code(key: str) -> int:
    """The FNV-1a hash of a key's code points, as the exact kernel computes it for a row whose
    ends are a benchmark key's (never 0)."""
    return int(key_codes(pl.Series([key], dtype=pl.String))[0])


def key_codes(keys: pl.Series) -> np.ndarray:
    """:func:`key_code` of each of ``keys`` (no nulls), compiled, a small fraction of the Python
    loop's time (docs/decisions.md#2026-12-05-the-compiled-audit-kernels)."""
    buffers = column_buffers(keys)
    assert buffers is not None, "a key index holds no null"
    codes = np.zeros(keys.len(), dtype=np.uint64)
    _key_hashes(*buffers, codes)
    return codes


@njit(cache=True, nogil=True)
def _key_hashes(offsets, data, codes):
    """``codes[i]``: the 64-bit FNV-1a hash of the ``i``-th string's code points (1 for 0, an
    empty table slot), as :func:`_key_ends` hashes a row's key characters."""
    for row in range(len(offsets) - 1):
        h = FNV_OFFSET
        j = offsets[row]
        while j < offsets[row + 1]:
            cp, j = decode_utf8(data, j)
            h = fnv1a(h, cp)
        codes[row] = max(h, np.uint64(1))


@njit(cache=True, nogil=True)
def _build_code_table(codes):
    """Open-addressing set of the non-zero ``codes``, an eighth full (0: an empty slot), and
    per slot the position in ``codes`` of the first code it holds (-1: empty)."""
    bits = 4
    while (1 << bits) < 8 * len(codes):
        bits += 1
    size = 1 << bits
    shift = np.uint64(64 - bits)
    table = np.zeros(size, dtype=np.uint64)
    first = np.full(size, -1, dtype=np.int64)
    for i in range(len(codes)):
        code = codes[i]
        slot = home_slot(code, shift)
        while table[slot] != 0 and table[slot] != code:
            slot = (slot + 1) & (size - 1)
        if table[slot] == 0:
            table[slot] = code
            first[slot] = i
    return table, first, shift


@njit(cache=True, nogil=True, inline="always")
def _slot_of(code, table, shift):
    """The slot holding ``code``, or -1."""
    mask = len(table) - 1
    slot = home_slot(code, shift)
    while table[slot] != 0:
        if table[slot] == code:
            return slot
        slot = (slot + 1) & mask
    return -1


@njit(cache=True, nogil=True, inline="always")
def _is_key(data, start, stop, fold, key_offsets, key_data, key):
    """Whether the row's key characters (its code points ``fold`` maps to one) are the
    ``key``-th key's code points."""
    k, end = key_offsets[key], key_offsets[key + 1]
    j = start
    while j < stop:
        cp, j = decode_utf8(data, j)
        f = fold[cp]
        if f >= 0:
            if k >= end:
                return False
            want, k = decode_utf8(key_data, k)
            if want != f:
                return False
    return k == end


@njit(cache=True, nogil=True, inline="always")
def _end_char(f, got, packed, h, ascii_ends):
    """A key's ``got``-th character ``f`` at one of its ends (:func:`ends_code`), taken into
    that end's packed codes (plus one, at byte ``got``), the ends' FNV-1a hash and whether
    every end character so far is ASCII: the head and the tail take theirs alike."""
    return (packed | (np.uint64(f + 1) << np.uint64(8 * got)), fnv1a(h, f),
            ascii_ends & (f < 0x80))


@njit(cache=True, nogil=True, inline="always")
def _ends_code(data, start, stop, fold, end_chars, slow):
    """(:func:`ends_code` of the row's key as ``fold`` reads it, whether that is its key's:
    always unless the row holds an unprovable character, ``slow``, too near an end; see
    :func:`_key_ends`)."""
    ascii_ends = True
    exact = True
    head = np.uint64(0)
    tail = np.uint64(0)
    h = FNV_OFFSET
    got = 0
    j = start
    while j < stop and got < end_chars:
        cp, j = decode_utf8(data, j)
        f = fold[cp]
        if f >= 0:
            head, h, ascii_ends = _end_char(f, got, head, h, ascii_ends)
            got += 1
        elif f == SLOW:
            exact = False
            break
    if slow and exact and j < stop:
        cp, _ = decode_utf8(data, j)
        exact = fold[cp] != SLOW
    h = fnv1a(h, 0xFFFF)
    got = 0
    j = stop
    while exact and j > start and got < end_chars:
        j -= 1
        while data[j] & 0xC0 == 0x80:
            j -= 1
        cp, _ = decode_utf8(data, j)
        f = fold[cp]
        if f >= 0:
            tail, h, ascii_ends = _end_char(f, got, tail, h, ascii_ends)
            got += 1
        elif f == SLOW:
            exact = False
    # A hash of 0 would read as an empty slot: it becomes 1, in ends_code too.
    code = (_ASCII_CODE | head | (tail << np.uint64(32)) if ascii_ends
            else max(h & ~_ASCII_CODE, np.uint64(1)))
    return code, exact


@njit(cache=True, nogil=True)
def _key_ends(offsets, data, fold, end_chars, ends, ends_shift, keys, keys_shift, key_at,
              key_offsets, key_data, status, unknown):
    """``status[row]``: 1 if the row's key is a benchmark key (its ends, :func:`ends_code`, are
    in ``ends``, its hash, :func:`key_code`, is in ``keys`` and its characters are those of the
    key ``key_at`` names for that slot among ``key_offsets``/``key_data``), else 0; 2 if the
    row holds a character the Python normaliser must do, unless its key's ends are provably not
    in ``ends`` (then 0), or if its hash is a key's but its characters are not (a collision:
    the normaliser decides); 3 if it holds one ``fold`` does not know yet (each such code point
    is written once to ``unknown``, after a count in ``unknown[0]``). A row's key characters are
    its code points that ``fold`` maps to a code point (>= 0); its ends are its first and last
    ``end_chars`` of them.

    A row holding an unprovable character still has exact ends when it has ``end_chars`` key
    characters before the first one and after the last one, the head's followed by a provable
    character or nothing: a provable or separator-like character starts a piece that
    normalises on its own (it composes with nothing before it and blocks every mark after it:
    :mod:`~guarddiag.audit.normal`), so the key of the row is the key of the text before it
    followed by the key of the rest, and those ends lie in the pieces that ``fold`` reads."""
    n_unknown = 0
    words = data[:len(data) - len(data) % 8].view(np.uint64)
    for row in range(len(offsets) - 1):
        start, stop = offsets[row], offsets[row + 1]
        slow = False
        if high_byte(data, words, start, stop):
            state = 0
            j = start
            while j < stop:
                cp, j = decode_utf8(data, j)
                f = fold[cp]
                if f == UNKNOWN:
                    fold[cp] = LISTED     # marked until the caller learns it
                    n_unknown += 1
                    unknown[n_unknown] = cp
                    state = 3
                elif f == LISTED:
                    state = 3
                elif f == SLOW and state == 0:
                    state = 2
            if state == 3:
                status[row] = 3
                continue
            slow = state == 2
        code, exact = _ends_code(data, start, stop, fold, end_chars, slow)
        if not exact:
            status[row] = 2
            continue
        if _slot_of(code, ends, ends_shift) < 0:
            continue
        if slow:
            status[row] = 2
            continue
        h = FNV_OFFSET
        j = start
        while j < stop:
            cp, j = decode_utf8(data, j)
            f = fold[cp]
            if f >= 0:
                h = fnv1a(h, f)
        slot = _slot_of(max(h, np.uint64(1)), keys, keys_shift)
        if slot >= 0:
            same = _is_key(data, start, stop, fold, key_offsets, key_data, key_at[slot])
            status[row] = 1 if same else 2
    unknown[0] = n_unknown


@dataclass(frozen=True)
class CompiledKeys:
    """A :class:`~guarddiag.audit.normal.KeyIndex` as the exact kernel reads it: its keys' ends
    (:func:`ends_code`) and hashes (:func:`key_code`) in open-addressing tables, and the keys'
    characters, beside the index itself."""

    index: KeyIndex
    ends: np.ndarray
    ends_shift: np.uint64
    keys: np.ndarray
    """The distinct keys' hashes in an open-addressing table."""
    keys_shift: np.uint64
    key_at: np.ndarray
    """Per slot of ``keys``, the position of its key among ``key_offsets``/``key_data``."""
    key_offsets: np.ndarray
    key_data: np.ndarray
    """The distinct keys, sorted, as UTF-8 bytes and their offsets."""
    key_set: frozenset[str]
    """The keys, for the rows the Python normaliser does."""


def compile_keys(index: KeyIndex) -> CompiledKeys:
    # Distinct and sorted: the tables' layout does not depend on the keys' order.
    distinct = index.keys.unique().sort()
    ends, _, ends_shift = _build_code_table(np.unique(np.array(
        [ends_code(key) for key in distinct.to_list()], dtype=np.uint64)))
    keys, key_at, keys_shift = _build_code_table(key_codes(distinct))
    buffers = column_buffers(distinct)
    assert buffers is not None, "a key index holds no null"
    return CompiledKeys(index=index, ends=ends, ends_shift=np.uint64(ends_shift), keys=keys,
                        keys_shift=np.uint64(keys_shift), key_at=key_at,
                        key_offsets=buffers[0], key_data=buffers[1],
                        key_set=frozenset(distinct.to_list()))


def _statuses(texts: pl.Series, keys: CompiledKeys) -> np.ndarray | None:
    buffers = column_buffers(texts)
    if buffers is None:
        return None
    fold = _KEY_POINTS.ready()
    status = np.zeros(texts.len(), dtype=np.uint8)
    unknown = _KEY_POINTS.room(len(buffers[1]))
    # END_CHARS is passed, not read as a global: numba would freeze a global from another
    # file into its cached machine code.
    _key_ends(*buffers, fold, END_CHARS, keys.ends, keys.ends_shift, keys.keys, keys.keys_shift,
              keys.key_at, keys.key_offsets, keys.key_data, status, unknown)
    if unknown[0]:
        # New characters: looked up, then their rows read again (a subset has no null).
        _KEY_POINTS.learn_listed(unknown)
        again = np.flatnonzero(status == 3)
        redone = _statuses(texts.gather(again), keys)
        assert redone is not None, "a subset of a column without nulls has none"
        status[again] = redone
    return status


def exact_rows(texts: pl.Series, keys: CompiledKeys) -> tuple[pl.Series, int]:
    """:func:`~guarddiag.audit.normal.exact_candidates`, the same rows, and how many rows the
    Python normaliser did: a row is a candidate when its key, read from its bytes (the kernel:
    its ends first, then its hash, then its characters), is a benchmark key, or, for a row the
    kernel hands on, when its normal form without spaces (:func:`~guarddiag.text.normalise`)
    is one."""
    status = _statuses(texts, keys)
    if status is None:     # a null text: the vectorised pass takes the batch
        return exact_candidates(texts, keys.index)
    keep = status == 1
    rows = np.flatnonzero(status == 2)
    if rows.size:
        # A few rows a batch (about 40 of 250,000 in the synthetic pool): one call each costs
        # less than the vectorised pass's set-up.
        keep[rows] = [normalise(t).replace(" ", "") in keys.key_set
                      for t in texts.gather(rows).to_list()]
    return pl.Series(values=keep), int(rows.size)


def warm_exact() -> None:
    """Load (or compile) the exact kernels now, on a one-key index."""
    exact_rows(pl.Series(["a b", "é"], dtype=pl.String), compile_keys(key_index(["a b"])))
