"""``guarddiag bench audit --peer``: the table's numbers, the oracle and the missing-datasketch
message.

Oracles: word-set Jaccard values worked out by hand on a tiny pool, and datasketch's own
candidate pairs recounted here against that hand-made set.
"""

from __future__ import annotations

import importlib.util

import polars as pl
import pytest

from guarddiag.bench import audit_peer as peer
from guarddiag.bench.audit import brute_force_pairs
from guarddiag.bench.audit_peer import PeerResult, PeerRow, minhash_pairs, pair_rows
from guarddiag.cli import main


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Two benchmark prompts of 5 and 10 distinct words.
BENCH = [_words("a b c d e"), _words("p q r s t u v w x y")]
POOL = [
    _words("a b c d e"),              # J(0) = 5/5 = 1
    _words("a b c d e f"),            # J(0) = 5/6 ≈ 0.833
    _words("a b c d"),                # J(0) = 4/5 = 0.8, exactly the threshold
    _words("a b c"),                  # J(0) = 3/5 = 0.6
    _words("p q r s t u v w x"),      # J(1) = 9/10 = 0.9
    _words("p q r s t u v w z1 z2"),  # J(1) = 8/12 ≈ 0.667
    frozenset(),                      # empty: matches nothing
]
HAND_ORACLE = {(0, 0), (0, 1), (0, 2), (1, 4)}


def test_oracle_is_the_hand_count():
    assert brute_force_pairs(BENCH, POOL, 0.8) == HAND_ORACLE
    # Lower the bar to 0.6: (0, 3) at exactly 3/5 and (1, 5) at 8/12 come in; raise it to
    # 0.85: only 1 and 0.9 stay.
    assert brute_force_pairs(BENCH, POOL, 0.6) == HAND_ORACLE | {(0, 3), (1, 5)}
    assert brute_force_pairs(BENCH, POOL, 0.85) == {(0, 0), (1, 4)}


def test_table_recall_precision_and_speedup_from_the_rows():
    rows = (PeerRow("bare polars join", "read, lower, join", 0.8, peak_mib=100.0),
            PeerRow("guarddiag exact audit", "whole command", 1.2, peak_mib=250.0),
            PeerRow("guarddiag exact + chart", "whole command", 2.0, peak_mib=300.0),
            PeerRow("guarddiag near-dup audit", "whole command", 2.4, peak_mib=480.0),
            PeerRow("guarddiag near-dup + chart", "whole command", 3.0, peak_mib=500.0),
            PeerRow("guarddiag prefix join", "word sets -> pairs", 0.5, pairs=4, true_pairs=4),
            PeerRow("datasketch MinHashLSH", "word sets -> pairs", 10.0, pairs=5,
                    true_pairs=3),
            PeerRow("guarddiag full audit", "whole command", 4.0, peak_mib=600.0))
    result = PeerResult(rows=rows, pool_rows=7, prompts=2, threshold=0.8, num_perm=128,
                        oracle_pairs=4, oracle_s=0.1, seed=0)
    assert result.recall(rows[5]) == 1.0
    assert result.recall(rows[6]) == 3 / 4
    assert result.precision(rows[6]) == 3 / 5
    assert result.recall(rows[1]) is None
    text = result.render()
    header = text.splitlines()[1].split()
    assert header[:2] == ["method", "time"]
    for column in ("wall", "rows/s", "pairs", "true", "recall", "precision", "peak",
                   "datasketch"):
        assert column in header
    by_method = {line[:28].strip(): line[28:].split() for line in text.splitlines()[3:11]}
    # wall s, rows/s (7 pool rows / wall s, rounded), pairs, true, recall, precision, peak MiB,
    # x datasketch (= 10.0 / the row's wall).
    assert by_method["datasketch MinHashLSH"] == ["word", "sets", "->", "pairs", "10.00", "1",
                                                  "5", "3", "0.7500", "0.6000", "—", "1.0"]
    assert by_method["guarddiag prefix join"][4:] == ["0.50", "14", "4", "4", "1.0000",
                                                      "1.0000", "—", "20.0"]
    assert by_method["guarddiag near-dup + chart"][2:] == ["3.00", "2", "—", "—", "—", "—",
                                                           "500", "3.3"]
    assert by_method["bare polars join"][3:] == ["0.80", "9", "—", "—", "—", "—", "100", "12.5"]
    assert by_method["guarddiag exact audit"][2:] == ["1.20", "6", "—", "—", "—", "—", "250",
                                                      "8.3"]
    # 1.2 / 0.8 (2.0 / 0.8 with the chart), 4.0 / 0.8, 2.4 / 1.2 (3.0 / 2.0) and 10.0 / 0.5.
    assert ("exact audit / bare join: 1.50x (2.50x with the chart); full audit (near-dup, "
            "templates, containment) / bare join: 5.00x; near-dup audit / exact audit: 2.00x "
            "(1.50x with the chart); datasketch / prefix join: 20.00x") in text
    assert result.to_dict()["rows"][6]["recall"] == 0.75


@pytest.mark.skipif(importlib.util.find_spec("datasketch") is None,
                    reason="needs the peer extra (datasketch)")
def test_pair_rows_count_against_the_oracle():
    rows = pair_rows(BENCH, POOL, HAND_ORACLE, threshold=0.8, num_perm=128)
    ours, theirs = rows
    assert (ours.pairs, ours.true_pairs) == (4, 4)
    found = minhash_pairs(BENCH, POOL, threshold=0.8, num_perm=128)
    assert all(j != 6 for _, j in found)          # the empty set is never queried
    assert theirs.pairs == len(found)
    assert theirs.true_pairs == len(found & HAND_ORACLE)


def test_missing_datasketch_is_one_line_and_status_2(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(peer.importlib.util, "find_spec",
                        lambda name, *a: None if name == "datasketch" else real(name, *a))
    assert main(["bench", "audit", "--peer", "--near-rows", "10"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0] == f"guarddiag: error: {peer.PEER_INSTALL}"
    assert 'pip install "guarddiag[peer]"' in err[0]


def test_peer_is_in_the_help(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "audit", "--help"])
    out = capsys.readouterr().out
    assert "--peer" in out
    assert "--num-perm" in out


def test_bare_join_keeps_the_rows_whose_lowercased_text_is_a_benchmark_text(tmp_path):
    from guarddiag.bench.audit import _bare_join_measured

    pl.DataFrame({"prompt_id": ["p0", "p1", "p2", "p3"],
                  "text": ["How to Make a Bomb", "how to make a bomb!", "hello", "HELLO"]}
                 ).write_parquet(tmp_path / "pool.parquet")
    pl.DataFrame({"text": ["how to make a BOMB", "Hello"]}).write_parquet(tmp_path / "b.parquet")
    wall, peak = _bare_join_measured(tmp_path / "pool.parquet", tmp_path / "b.parquet",
                                     tmp_path / "out.parquet")
    # Lower-casing only: "p1" keeps its "!" and is no match.
    assert sorted(pl.read_parquet(tmp_path / "out.parquet")["prompt_id"]) == ["p0", "p2", "p3"]
    assert wall > 0
    assert peak > 0
