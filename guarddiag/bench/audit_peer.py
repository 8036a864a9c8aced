"""``guarddiag bench audit --peer``: the near-duplicate audit beside a peer, datasketch's MinHash
LSH, on one pool, with the recall of each against an exact oracle.

Every method gets the same input: the word sets of the distinct benchmark normal forms and of
the pool rows' normal forms (:func:`guarddiag.text.words_of_normal_form`). The oracle is every
(benchmark form, pool row) pair with word-set Jaccard ≥ the threshold, from exact intersection
counts of all pairs (:func:`guarddiag.bench.audit.brute_force_pairs`, a sparse product, which
shares no code with the prefix filter). Recall is the share of the oracle's pairs a method
reports; precision the share of its pairs that are in the oracle (MinHash LSH reports candidates,
unverified). The whole-command rows time ``audit_pool`` end to end (reading, matching,
writing the folder) in a fresh process, with its peak memory, once as the command runs by
default and once with the chart (:func:`audit_method` names both), and the bare-join row
the floor an exact audit is held to: the same pool file read, lower-cased and hash-joined to the
benchmark texts, in a fresh process too. The pair rows time the matching alone, word sets in
and pairs out, which is all the datasketch row does.

datasketch is an optional extra (``pip install "guarddiag[peer]"``): without it ``--peer`` stops
with that line before any work.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Sequence
from dataclasses import dataclass

from guarddiag.audit.neardup import similar_pairs
from guarddiag.errors import GuarddiagError

__all__ = ["PEER_INSTALL", "PeerResult", "PeerRow", "audit_method", "minhash_pairs",
           "pair_rows", "require_datasketch"]

PEER_INSTALL = ('bench audit --peer compares with datasketch, which is not installed: '
                'pip install "guarddiag[peer]" (or pip install datasketch)')

WordSets = Sequence[frozenset[str]]


def audit_method(name: str, *, chart: bool = False) -> str:
    """The method of a whole-command row of audit ``name`` (``exact``, ``near-dup``): ``guarddiag
    exact audit`` as the command runs by default, ``guarddiag exact + chart`` timed with
    overlap.png/.pdf (``figure=True``, the command's ``--figure``; the chart is matplotlib's
    import and two renders, most of a small audit's time)."""
    return f"guarddiag {name}{' + chart' if chart else ' audit'}"


def require_datasketch() -> None:
    """Stop with the one line saying how to install the peer, before any work."""
    if importlib.util.find_spec("datasketch") is None:
        raise GuarddiagError(PEER_INSTALL)


@dataclass(frozen=True)
class PeerRow:
    """One timed method of the comparison."""

    method: str
    scope: str
    """What the time covers: the whole command, or word sets to pairs."""
    wall_s: float
    pairs: int | None = None
    """Pairs the method reports (None: it does not report pairs, e.g. the exact audit)."""
    true_pairs: int | None = None
    """Of those, the pairs in the oracle."""
    peak_mib: float | None = None
    """Peak summed RSS of the process tree (whole-command rows)."""


@dataclass(frozen=True)
class PeerResult:
    """The side-by-side table of ``bench audit --peer``."""

    rows: tuple[PeerRow, ...]
    pool_rows: int
    prompts: int
    """Distinct benchmark normal forms (the indexed side)."""
    threshold: float
    num_perm: int
    oracle_pairs: int
    oracle_s: float
    seed: int

    def recall(self, row: PeerRow) -> float | None:
        if row.true_pairs is None:
            return None
        return row.true_pairs / self.oracle_pairs if self.oracle_pairs else 1.0

    def precision(self, row: PeerRow) -> float | None:
        if row.true_pairs is None or row.pairs is None:
            return None
        return row.true_pairs / row.pairs if row.pairs else 1.0

    def _row(self, method: str) -> PeerRow | None:
        return next((r for r in self.rows if r.method == method), None)

    def render(self) -> str:
        def num(value: float | None, fmt: str) -> str:
            return "—" if value is None else format(value, fmt)

        peer = self._row("datasketch MinHashLSH")
        head = (f"{'method':<28} {'time covers':<22} {'wall s':>8} {'rows/s':>9} {'pairs':>9} "
                f"{'true':>9} {'recall':>7} {'precision':>9} {'peak MiB':>9} "
                f"{'x datasketch':>12}")
        lines = [f"peer comparison: {self.pool_rows:,} synthetic pool rows (seed {self.seed}) × "
                 f"{self.prompts:,} distinct benchmark prompts, word-set Jaccard ≥ "
                 f"{self.threshold:g}; exact oracle (sparse product of all pairs): "
                 f"{self.oracle_pairs:,} pairs in {self.oracle_s:.1f} s", head,
                 "-" * len(head)]
        for r in self.rows:
            speed = (peer.wall_s / r.wall_s if peer is not None and r.wall_s > 0 else None)
            rate = self.pool_rows / r.wall_s if r.wall_s > 0 else None
            lines.append(f"{r.method:<28} {r.scope:<22} {r.wall_s:>8.2f} {num(rate, ',.0f'):>9} "
                         f"{num(r.pairs, ',d'):>9} {num(r.true_pairs, ',d'):>9} "
                         f"{num(self.recall(r), '.4f'):>7} {num(self.precision(r), '.4f'):>9} "
                         f"{num(r.peak_mib, ',.0f'):>9} {num(speed, '.1f'):>12}")

        def ratio(top: str, bottom: str) -> str | None:
            a, b = self._row(top), self._row(bottom)
            return (f"{a.wall_s / b.wall_s:.2f}x" if a is not None and b is not None
                    and b.wall_s > 0 else None)

        bare, exact, near = "bare polars join", "exact", "near-dup"
        ratios = []
        # (name, the rows as the commands run by default, the same rows with the chart)
        for name, plain, charted in (
                ("exact audit / bare join", (audit_method(exact), bare),
                 (audit_method(exact, chart=True), bare)),
                ("full audit (near-dup, templates, containment) / bare join",
                 (audit_method("full"), bare), None),
                ("near-dup audit / exact audit", (audit_method(near), audit_method(exact)),
                 (audit_method(near, chart=True), audit_method(exact, chart=True))),
                ("datasketch / prefix join", ("datasketch MinHashLSH", "guarddiag prefix join"),
                 None)):
            first = ratio(*plain)
            if first is None:
                continue
            second = ratio(*charted) if charted is not None else None
            ratios.append(f"{name}: {first}" + (f" ({second} with the chart)" if second else ""))
        if ratios:
            lines.append("; ".join(ratios))
        lines.append(f"x datasketch = datasketch's wall time / the row's (MinHashLSH "
                     f"num_perm={self.num_perm}, hashing and LSH only, no I/O); whole-command "
                     f"rows run in a fresh process, imports not counted")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        return {"pool_rows": self.pool_rows, "prompts": self.prompts,
                "threshold": self.threshold, "num_perm": self.num_perm, "seed": self.seed,
                "oracle_pairs": self.oracle_pairs, "oracle_s": self.oracle_s,
                "rows": [{"method": r.method, "scope": r.scope, "wall_s": r.wall_s,
                          "pairs": r.pairs, "true_pairs": r.true_pairs,
                          "recall": self.recall(r), "precision": self.precision(r),
                          "peak_mib": r.peak_mib} for r in self.rows]}


def minhash_pairs(bench_sets: WordSets, pool_sets: WordSets, *, threshold: float,
                  num_perm: int = 128, chunk: int = 20_000) -> set[tuple[int, int]]:
    """datasketch's candidate pairs ``(benchmark set, pool set)``: MinHash (``num_perm``
    permutations, its bulk hashing) of every set, the benchmark sets in a MinHashLSH at
    ``threshold``, each pool set queried. Empty sets are skipped, as the audit skips them. The
    pool is hashed ``chunk`` sets at a time, so memory holds one chunk of signatures."""
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    signatures = MinHash.bulk([[w.encode() for w in s] for s in bench_sets], num_perm=num_perm)
    for i, (words, signature) in enumerate(zip(bench_sets, signatures, strict=True)):
        if words:
            lsh.insert(i, signature)
    found: set[tuple[int, int]] = set()
    for start in range(0, len(pool_sets), chunk):
        part = pool_sets[start:start + chunk]
        hashed = MinHash.bulk([[w.encode() for w in s] for s in part], num_perm=num_perm)
        for j, (words, signature) in enumerate(zip(part, hashed, strict=True)):
            if words:
                found.update((i, start + j) for i in lsh.query(signature))
    return found


def pair_rows(bench_sets: WordSets, pool_sets: WordSets, oracle: set[tuple[int, int]], *,
              threshold: float, num_perm: int) -> list[PeerRow]:
    """The two pair-finding rows, timed on the same word sets: the prefix-filter join the
    near-dup audit runs, and datasketch's MinHash LSH."""
    t0 = time.perf_counter()
    ours = {(i, j) for i, j, _ in similar_pairs(bench_sets, pool_sets, threshold=threshold)}
    ours_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs = minhash_pairs(bench_sets, pool_sets, threshold=threshold, num_perm=num_perm)
    theirs_s = time.perf_counter() - t0
    return [PeerRow(method="guarddiag prefix join", scope="word sets -> pairs", wall_s=ours_s,
                    pairs=len(ours), true_pairs=len(ours & oracle)),
            PeerRow(method="datasketch MinHashLSH", scope="word sets -> pairs",
                    wall_s=theirs_s, pairs=len(theirs), true_pairs=len(theirs & oracle))]
