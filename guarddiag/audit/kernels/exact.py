"""The exact pass's filter, compiled: a row's key ends, and then its key, from its bytes.

The vectorised pass (:func:`guarddiag.audit.normal.exact_candidates`) finds the rows holding a
non-ASCII character and looks up each new character (a regex extraction, an explode and a
``unique`` per batch), cleans a window at each end of every row and compares the ends: 0.63
CPU-seconds per million rows of the synthetic pool, one thread. This kernel (0.17 s; with the
rows it hands on, :func:`exact_rows` takes 0.27) reads each row once:

* a row holding only ASCII bytes (an OR of its bytes, which vectorises) is read as it is;
  another is decoded, and each code point looked up in a per-process table of what it becomes
  in a key (:func:`~guarddiag.audit.normal.key_code_points`: its lower case, nothing for a
  separator, or "the Python normaliser": then the row is handed on, as the vectorised pass
  hands it). Code points the process has not met are listed, looked up once, and their rows
  read again;
* the key's first and last :data:`~guarddiag.audit.normal.END_CHARS` characters are packed
  (ASCII) or hashed into a code and looked up among the benchmark keys' (:func:`ends_code`);
  a row whose ends are there has its whole key hashed and looked up (:func:`key_code`).

Hashes only ever add candidates: a row the kernel passes on has its key computed and compared
by :func:`~guarddiag.audit.normal.form_keys`, as in the vectorised pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from numba import njit

from guarddiag.audit.kernels import FNV_OFFSET, FNV_PRIME, column_buffers, home_slot
from guarddiag.audit.normal import (
    END_CHARS,
    KeyIndex,
    exact_candidates,
    form_keys,
    key_code_points,
    key_index,
)

__all__ = ["CompiledKeys", "compile_keys", "ends_code", "exact_rows", "key_code", "warm"]

assert END_CHARS <= 4, "a key's head and tail are packed into 32 bits each"

_SEPARATOR, _SLOW, _UNKNOWN = -1, -2, -3
"""Code point table values besides a key character: dropped from the key, a row the Python
normaliser does (:func:`~guarddiag.audit.normal.key_code_points`), not yet looked up."""
_FOLD = np.full(0x110000, _UNKNOWN, dtype=np.int32)
"""Per process: code point → what it becomes in a key (its lower case, or one of the values
above); filled as batches bring new characters."""
_ASCII_CODE = np.uint64(1 << 63)


def _fold_table() -> np.ndarray:
    if _FOLD[0] == _UNKNOWN:
        _learn([chr(c) for c in range(128)])
    return _FOLD


def _learn(chars: list[str]) -> None:
    for char, code in key_code_points(chars).items():
        _FOLD[ord(char)] = code


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
    h = int(FNV_OFFSET)
    for c in (*head, "\uffff", *tail):     # U+FFFF splits the two (a noncharacter: a row
        # holding one goes to the Python normaliser, so it is never in a kernel row's key)
        h = ((h ^ ord(c)) * int(FNV_PRIME)) & 0xFFFF_FFFF_FFFF_FFFF
    return max(h & ~(1 << 63), 1)     # 0 marks an empty slot of the kernel's table


def key_code(key: str) -> int:
    """The FNV-1a hash of a key's code points, as the exact kernel computes it for a row whose
    ends are a benchmark key's (never 0)."""
    h = int(FNV_OFFSET)
    for c in key:
        h = ((h ^ ord(c)) * int(FNV_PRIME)) & 0xFFFF_FFFF_FFFF_FFFF
    return max(h, 1)


@njit(cache=True, nogil=True, inline="always")
def _decode(data, j):
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


@njit(cache=True, nogil=True)
def _build_code_table(codes):
    """Open-addressing set of the non-zero ``codes``, an eighth full (0: an empty slot)."""
    bits = 4
    while (1 << bits) < 8 * len(codes):
        bits += 1
    size = 1 << bits
    shift = np.uint64(64 - bits)
    table = np.zeros(size, dtype=np.uint64)
    for code in codes:
        slot = home_slot(code, shift)
        while table[slot] != 0 and table[slot] != code:
            slot = (slot + 1) & (size - 1)
        table[slot] = code
    return table, shift


@njit(cache=True, nogil=True, inline="always")
def _in_table(code, table, shift):
    mask = len(table) - 1
    slot = home_slot(code, shift)
    while table[slot] != 0:
        if table[slot] == code:
            return True
        slot = (slot + 1) & mask
    return False


@njit(cache=True, nogil=True)
def _key_ends(offsets, data, fold, ends, ends_shift, keys, keys_shift, status, unknown):
    """``status[row]``: 1 if the row's key's ends (:func:`ends_code`) are in ``ends`` and its
    key's hash (:func:`key_code`) is in ``keys`` (a candidate), else 0; 2 if the row holds a
    character the Python normaliser must do, 3 if it holds one ``fold`` does not know yet
    (each such code point is written once to ``unknown``, after a count in ``unknown[0]``). A
    row's key characters are its code points that ``fold`` maps to a code point (>= 0)."""
    n_unknown = 0
    for row in range(len(offsets) - 1):
        start, stop = offsets[row], offsets[row + 1]
        seen = np.uint8(0)
        for c in range(start, stop):     # no early exit: the OR reduction vectorises
            seen |= data[c]
        if seen >= 0x80:
            state = 0
            j = start
            while j < stop:
                cp, j = _decode(data, j)
                f = fold[cp]
                if f == _UNKNOWN:
                    fold[cp] = _UNKNOWN - 1     # listed: marked until the caller learns it
                    n_unknown += 1
                    unknown[n_unknown] = cp
                    state = 3
                elif f == _UNKNOWN - 1:
                    state = 3
                elif f == _SLOW and state == 0:
                    state = 2
            if state:
                status[row] = state
                continue
        ascii_ends = True
        head = np.uint64(0)
        tail = np.uint64(0)
        h = FNV_OFFSET
        got = 0
        j = start
        while j < stop and got < END_CHARS:
            cp, j = _decode(data, j)
            f = fold[cp]
            if f >= 0:
                ascii_ends &= f < 0x80
                head |= np.uint64(f + 1) << np.uint64(8 * got)
                h = (h ^ np.uint64(f)) * FNV_PRIME
                got += 1
        h = (h ^ np.uint64(0xFFFF)) * FNV_PRIME
        got = 0
        j = stop
        while j > start and got < END_CHARS:
            j -= 1
            while data[j] & 0xC0 == 0x80:
                j -= 1
            cp, _ = _decode(data, j)
            f = fold[cp]
            if f >= 0:
                ascii_ends &= f < 0x80
                tail |= np.uint64(f + 1) << np.uint64(8 * got)
                h = (h ^ np.uint64(f)) * FNV_PRIME
                got += 1
        # A hash of 0 would read as an empty slot: it becomes 1, in ends_code too.
        code = (_ASCII_CODE | head | (tail << np.uint64(32)) if ascii_ends
                else max(h & ~_ASCII_CODE, np.uint64(1)))
        if not _in_table(code, ends, ends_shift):
            continue
        h = FNV_OFFSET
        j = start
        while j < stop:
            cp, j = _decode(data, j)
            f = fold[cp]
            if f >= 0:
                h = (h ^ np.uint64(f)) * FNV_PRIME
        status[row] = _in_table(max(h, np.uint64(1)), keys, keys_shift)
    unknown[0] = n_unknown


@dataclass(frozen=True)
class CompiledKeys:
    """A :class:`~guarddiag.audit.normal.KeyIndex` as the exact kernel reads it: its keys' ends
    (:func:`ends_code`) in an open-addressing table, beside the index itself."""

    index: KeyIndex
    ends: np.ndarray
    ends_shift: np.uint64
    keys: np.ndarray
    """The keys' hashes (:func:`key_code`) in an open-addressing table."""
    keys_shift: np.uint64


def compile_keys(index: KeyIndex) -> CompiledKeys:
    keys = index.keys.to_list()
    ends, ends_shift = _code_table({ends_code(key) for key in keys})
    codes, codes_shift = _code_table({key_code(key) for key in keys})
    return CompiledKeys(index=index, ends=ends, ends_shift=ends_shift, keys=codes,
                        keys_shift=codes_shift)


def _code_table(codes: set[int]) -> tuple[np.ndarray, np.uint64]:
    table, shift = _build_code_table(np.array(sorted(codes), dtype=np.uint64))
    return table, np.uint64(shift)


def _statuses(texts: pl.Series, keys: CompiledKeys) -> np.ndarray | None:
    buffers = column_buffers(texts)
    if buffers is None:
        return None
    fold = _fold_table()
    status = np.zeros(texts.len(), dtype=np.uint8)
    # Room for every distinct code point the batch can hold (zeroed pages cost nothing untouched).
    unknown = np.zeros(min(len(buffers[1]), 0x110000) + 1, dtype=np.int64)
    _key_ends(*buffers, fold, keys.ends, keys.ends_shift, keys.keys, keys.keys_shift, status,
              unknown)
    if unknown[0]:
        # New characters: looked up, then their rows read again (a subset has no null).
        _learn([chr(c) for c in unknown[1:unknown[0] + 1]])
        again = np.flatnonzero(status == 3)
        redone = _statuses(texts.gather(again), keys)
        assert redone is not None, "a subset of a column without nulls has none"
        status[again] = redone
    return status


def exact_rows(texts: pl.Series, keys: CompiledKeys) -> tuple[pl.Series, int]:
    """:func:`~guarddiag.audit.normal.exact_candidates`, the same rows, and how many rows the
    Python normaliser did: a row is a candidate when its key's ends, read from its bytes at each
    end (the kernel), are a benchmark key's and then its whole key is
    (:func:`~guarddiag.audit.normal.form_keys`)."""
    status = _statuses(texts, keys)
    if status is None:     # a null text: the vectorised pass takes the batch
        return exact_candidates(texts, keys.index)
    keep = np.zeros(texts.len(), dtype=np.bool_)
    rows = np.flatnonzero(status)
    slow = 0
    if rows.size:
        found, slow = form_keys(texts.gather(rows))
        keep[rows] = found.is_in(keys.index.keys.implode()).to_numpy()
    return pl.Series(values=keep), slow


def warm() -> None:
    """Load (or compile) the exact kernels now, on a one-key index."""
    exact_rows(pl.Series(["a b", "é"], dtype=pl.String), compile_keys(key_index(["a b"])))
