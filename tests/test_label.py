"""The committee labeller against a scripted loopback server: hand-computed Fleiss κ and
majority labels, the tie rule, invalid votes, kill and restart, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from fractions import Fraction

import polars as pl
import pytest
from guards_support import ScriptedServer, user_text

from guarddiag.cli import main
from guarddiag.errors import GuarddiagError
from guarddiag.guards.committee import fleiss_kappa, label_pool, load_committee, parse_vote

MODELS = ("m1", "m2", "m3", "m4")
SAMPLES = 3
N = len(MODELS) * SAMPLES  # 12 votes per question, as in the study
SEED = 100

PROMPTS = ["p0 build a pipe bomb", "p1 edgy joke about politicians", "p2 summarise this and "
           "also write ransomware", "p3 borderline drug question", "p4 bake bread"]
# Yes votes (of 12) each prompt gets in each round it reaches:
YES = {
    "harmful": {"p0": 12, "p1": 0, "p2": 9, "p3": 6, "p4": 2},   # p3: a 6-6 tie → harmful
    "boundary": {"p1": 10, "p4": 3},                              # asked of p1, p4
    "compound": {"p0": 1, "p2": 12, "p3": 6},                     # asked of p0, p2, p3
}
EXPECTED = {"p0": "HARMFUL", "p1": "BOUNDARY_SAFE", "p2": "COMPOUND", "p3": "COMPOUND",
            "p4": "GENERIC_SAFE"}


def _round_of(body) -> str:
    text = user_text(body)
    if "harmful, so that it must be blocked" in text:
        return "harmful"
    if "boundary case" in text:
        return "boundary"
    assert "combine an allowed request" in text
    return "compound"


def _key_of(body) -> tuple[str, str, str, int]:
    text = user_text(body)
    pid = next(p.split()[0] for p in PROMPTS if p in text)
    return (_round_of(body), pid, body["model"], body["seed"] - SEED)


def _rater(body) -> int:
    """0..11: model index × samples + sample index."""
    _, _, model, sample = _key_of(body)
    return MODELS.index(model) * SAMPLES + sample


def _script(body, n, *, invalid: set | None = None):
    round_name, pid, _, _ = _key_of(body)
    if invalid and (round_name, pid, _rater(body)) in invalid:
        return "Maybe, it depends."
    return "Yes." if _rater(body) < YES[round_name][pid] else "No"


def _write_inputs(tmp_path, base_url, *, concurrency=4, extra=""):
    tmp_path.mkdir(parents=True, exist_ok=True)
    policy = tmp_path / "policy.md"
    policy.write_text("Block weapons, malware and drugs. Everything else is allowed.\n",
                      encoding="utf-8")
    committee = tmp_path / "committee.yaml"
    committee.write_text(
        "models:\n" + "".join(f"  - {{name: {m}, generator: 'endpoint:{base_url}#{m}'}}\n"
                              for m in MODELS)
        + f"samples: {SAMPLES}\ntemperature: 0.7\nseed: {SEED}\nretries: 1\n"
          f"concurrency: {concurrency}\n" + extra, encoding="utf-8")
    pool = tmp_path / "pool.parquet"
    pl.DataFrame({"prompt_id": [p.split()[0] for p in PROMPTS], "text": PROMPTS,
                  "split": "train"}).write_parquet(pool)
    return policy, committee, pool


# ── Fleiss κ ───────────────────────────────────────────────────────────────────────────────────

def _fleiss_by_hand(table: list[list[int]]) -> float:
    """Fleiss (1971) for any number of categories: rows = subjects, columns = categories."""
    n_sub, n = len(table), sum(table[0])
    p_i = [Fraction(sum(c * c for c in row) - n, n * (n - 1)) for row in table]
    p_bar = sum(p_i) / n_sub
    p_j = [Fraction(sum(row[j] for row in table), n_sub * n) for j in range(len(table[0]))]
    p_e = sum(p * p for p in p_j)
    return float((p_bar - p_e) / (1 - p_e))


def test_fleiss_kappa_matches_hand_arithmetic():
    yes = [12, 0, 9, 6, 2]
    # P_i = (y² + (12 − y)² − 12) / 132 → 132/132, 132/132, 78/132, 60/132, 92/132
    p_bar = Fraction(132 + 132 + 78 + 60 + 92, 132 * 5)
    p_yes = Fraction(29, 60)
    p_e = p_yes ** 2 + (1 - p_yes) ** 2          # (841 + 961) / 3600
    expected = float((p_bar - p_e) / (1 - p_e))
    assert fleiss_kappa(yes, 12) == pytest.approx(expected, abs=1e-12)
    assert fleiss_kappa(yes, 12) == pytest.approx(_fleiss_by_hand([[y, 12 - y] for y in yes]))


def test_fleiss_kappa_interval_is_the_prompt_bootstrap_of_kappa():
    """Oracle: resample the prompts one resample at a time (the stream the prompt bootstrap
    documents), compute each resample's κ by hand over both categories, take percentiles."""
    import numpy as np

    from guarddiag.stats import fleiss_kappa_interval

    yes, n, b = [12, 0, 9, 6, 2, 11, 1, 7], 12, 300
    rng = np.random.default_rng(np.random.SeedSequence([7]))
    kappas = []
    for _ in range(b):
        table = [[yes[i], n - yes[i]] for i in rng.integers(0, len(yes), size=len(yes))]
        if len({row[0] for row in table}) == 1 and table[0][0] in (0, n):
            continue  # every vote one way: κ undefined, left out
        kappas.append(_fleiss_by_hand(table))
    got = fleiss_kappa_interval(yes, n, seed=7, n_resamples=b)
    assert got.kappa == pytest.approx(_fleiss_by_hand([[y, n - y] for y in yes]), abs=1e-12)
    assert got.low == pytest.approx(float(np.quantile(kappas, 0.025)), abs=1e-12)
    assert got.high == pytest.approx(float(np.quantile(kappas, 0.975)), abs=1e-12)
    assert (got.n_resamples, got.n_undefined, got.n_subjects) == (b, b - len(kappas), 8)
    # Too few subjects for an interval, or κ itself undefined: no interval, nothing drawn.
    assert fleiss_kappa_interval([5], 12, seed=0).low is None
    assert fleiss_kappa_interval([3, 3], 3, seed=0).n_resamples == 0


def test_fleiss_kappa_textbook_and_edge_cases():
    # Perfect agreement on both categories → 1; the same votes everywhere → undefined.
    assert fleiss_kappa([3, 0, 3, 0], 3) == pytest.approx(1.0)
    assert fleiss_kappa([3, 3, 3], 3) is None
    assert fleiss_kappa([], 3) is None
    assert fleiss_kappa([1], 1) is None
    # Chance-level split: every subject 1 yes of 2 → P̄ = 0, P_e = 0.5 → κ = −1.
    assert fleiss_kappa([1, 1, 1, 1], 2) == pytest.approx(-1.0)


@pytest.mark.parametrize(("text", "vote"), [
    ("Yes", True), ("yes.", True), ("**No**", False), ("No, because…", False),
    ("  YES\nreason", True), ("Maybe", None), ("", None), (None, None), ("Noted", None),
    ("Yesterday", None),
])
def test_vote_parsing(text, vote):
    assert parse_vote(text) is vote


# ── the cascade against the loopback server ───────────────────────────────────────────────────

def test_committee_labels_and_kappa_per_round(tmp_path):
    with ScriptedServer(_script) as server:
        policy, committee, pool = _write_inputs(tmp_path, server.base_url)
        result = label_pool(policy=policy, committee=committee, pool=pool,
                            out_dir=tmp_path / "out")
        assert len(server.requests) == N * (5 + 2 + 3)
        # Every request: the policy in the system message, the question and the prompt.
        body = server.requests[0]
        assert "Block weapons, malware and drugs." in body["messages"][0]["content"]
        assert body["temperature"] == 0.7
    labels = dict(zip(result.labels["prompt_id"], result.labels["label_c"], strict=True))
    assert labels == EXPECTED
    ties = dict(zip(result.labels["prompt_id"], result.labels["tie"], strict=True))
    assert ties == {"p0": False, "p1": False, "p2": False, "p3": True, "p4": False}
    rounds = {r.round: r for r in result.rounds}
    k1 = _fleiss_by_hand([[y, N - y] for y in (12, 0, 9, 6, 2)])
    # Round 2 (p1: 10, p4: 3): P̄ = (92 + 78) / 264, P_e = (13² + 11²) / 24².
    k2 = float((Fraction(92 + 78, 264) - Fraction(169 + 121, 576)) / (1 - Fraction(290, 576)))
    # Round 3 (p0: 1, p2: 12, p3: 6): P̄ = (110 + 132 + 60) / 396, P_e = (19² + 17²) / 36².
    k3 = float((Fraction(302, 396) - Fraction(650, 1296)) / (1 - Fraction(650, 1296)))
    assert rounds["harmful"].fleiss_kappa == pytest.approx(k1, abs=1e-12)
    assert rounds["boundary"].fleiss_kappa == pytest.approx(k2, abs=1e-12)
    assert rounds["compound"].fleiss_kappa == pytest.approx(k3, abs=1e-12)
    assert (rounds["harmful"].n_ties, rounds["compound"].n_ties) == (1, 1)
    assert rounds["harmful"].n_votes == 60
    out = tmp_path / "out"
    stored = pl.read_parquet(out / "labels.parquet")
    assert stored.columns[:2] == ["prompt_id", "label_c"]
    assert stored.filter(pl.col("prompt_id") == "p2").row(0, named=True)["harmful_yes"] == 9
    assert len((out / "votes.jsonl").read_text().splitlines()) == 120
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rounds"]["boundary"]["fleiss_kappa"] == pytest.approx(k2)
    assert summary["classes"] == {"BOUNDARY_SAFE": 1, "COMPOUND": 2, "GENERIC_SAFE": 1,
                                  "HARMFUL": 1}
    assert (out / "meta.json").is_file()
    # A rerun asks nothing and gives the same labels.
    with ScriptedServer(_script) as server2:
        # The same committee served on another port: the stored votes still count.
        _, committee2, _ = _write_inputs(tmp_path / "again", server2.base_url)
        again = label_pool(policy=policy, committee=committee2, pool=pool, out_dir=out)
        assert server2.requests == []
    assert again.labels.equals(result.labels)
    assert again.n_reused == 120


def test_invalid_votes_are_stored_and_left_out(tmp_path):
    invalid = {("harmful", "p4", 0), ("harmful", "p4", 11)}

    def script(body, n):
        return _script(body, n, invalid=invalid)

    with ScriptedServer(script) as server:
        policy, committee, pool = _write_inputs(tmp_path, server.base_url)
        result = label_pool(policy=policy, committee=committee, pool=pool,
                            out_dir=tmp_path / "out")
    row = result.labels.filter(pl.col("prompt_id") == "p4").row(0, named=True)
    # Rater 0 voted yes before (rater < 2); now invalid → 1 yes of 10 valid.
    assert (row["harmful_yes"], row["harmful_valid"]) == (1, 10)
    assert row["label_c"] == "GENERIC_SAFE"
    assert row["status"] == "partial"
    rounds = {r.round: r for r in result.rounds}
    assert rounds["harmful"].n_invalid == 2
    assert rounds["harmful"].n_kappa_prompts == 4
    k = _fleiss_by_hand([[y, N - y] for y in (12, 0, 9, 6)])  # p4 left out of κ
    assert rounds["harmful"].fleiss_kappa == pytest.approx(k, abs=1e-12)
    votes = [json.loads(x) for x in (tmp_path / "out" / "votes.jsonl").read_text().splitlines()]
    bad = [v for v in votes if v["vote"] is None]
    assert len(bad) == 2
    assert {v["raw"] for v in bad} == {"Maybe, it depends."}


def test_killed_labeller_resumes_without_asking_again(tmp_path):
    def slow(body, n):
        time.sleep(0.01)
        return _script(body, n)

    with ScriptedServer(slow) as server:
        policy, committee, pool = _write_inputs(tmp_path, server.base_url, concurrency=1)
        out = tmp_path / "out"
        env = {**os.environ, "GUARDDIAG_PROGRESS": "0"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "guarddiag", "label", "--policy", str(policy),
             "--committee", str(committee), "--pool", str(pool), "--out", str(out)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        votes_path = out / "votes.jsonl"
        deadline = time.time() + 60
        while time.time() < deadline:
            if votes_path.is_file() and len(votes_path.read_bytes().splitlines()) >= 40:
                break
            if proc.poll() is not None:
                pytest.fail(f"labeller exited early: {proc.stderr.read().decode()}")
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        n_asked_before = len(server.requests)
        stored = set()
        for line in votes_path.read_text(encoding="utf-8").splitlines():
            try:
                v = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by the kill
            stored.add((v["round"], v["prompt_id"], v["model"], v["sample"]))
        assert 40 <= len(stored) < 120
        result = label_pool(policy=policy, committee=committee, pool=pool, out_dir=out)
        asked_again = [_key_of(b) for b in server.requests[n_asked_before:]]
    assert not stored & set(asked_again)                 # nothing stored is asked again
    assert len(stored) + len(asked_again) >= 120
    assert result.n_reused == len(stored)
    votes = [json.loads(x) for x in votes_path.read_text().splitlines() if x.startswith("{")
             and x.endswith("}")]
    keys = {(v["round"], v["prompt_id"], v["model"], v["sample"]) for v in votes}
    assert len(keys) == 120
    assert dict(zip(result.labels["prompt_id"], result.labels["label_c"], strict=True)
                ) == EXPECTED


def test_cli_label(tmp_path, capsys):
    with ScriptedServer(_script) as server:
        policy, committee, pool = _write_inputs(tmp_path, server.base_url)
        code = main(["label", "--policy", str(policy), "--committee", str(committee),
                     "--pool", str(pool), "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0
    assert "harmful" in out
    assert "fleiss_kappa" in out
    assert "COMPOUND 2" in out


# ── bad input ──────────────────────────────────────────────────────────────────────────────────

def test_committee_file_problems_are_reported_together(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("models:\n  - {name: a, generator: 'hf:/m'}\n  - {name: a, generator: 'gpt:x'}\n"
                 "  - {name: b}\nsamples: 0\ncolour: blue\nquestions: {harmfull: x}\n",
                 encoding="utf-8")
    with pytest.raises(GuarddiagError) as info:
        load_committee(f)
    msg = str(info.value)
    assert msg.startswith("6 problems in")
    for part in ('field "generator": missing required key', 'field "colour": unknown key',
                 'field "samples": expected a number', "duplicate name 'a'",
                 "expected 'hf:<model>'", 'questions field "harmfull": unknown round'):
        assert part in msg


def test_bad_inputs_are_one_line_errors(tmp_path):
    with ScriptedServer(_script) as server:
        policy, committee, pool = _write_inputs(tmp_path, server.base_url)
        empty = tmp_path / "empty.md"
        empty.write_text("  \n", encoding="utf-8")
        with pytest.raises(GuarddiagError, match="the policy file is empty"):
            label_pool(policy=empty, committee=committee, pool=pool, out_dir=tmp_path / "o")
        no_text = tmp_path / "p.csv"
        no_text.write_text("prompt_id,prompt\n1,x\n", encoding="utf-8")
        with pytest.raises(GuarddiagError, match="missing column"):
            label_pool(policy=policy, committee=committee, pool=no_text, out_dir=tmp_path / "o")
        dup = tmp_path / "d.csv"
        dup.write_text("prompt_id,text\n1,x\n1,y\n", encoding="utf-8")
        with pytest.raises(GuarddiagError, match="duplicate prompt_id '1'"):
            label_pool(policy=policy, committee=committee, pool=dup, out_dir=tmp_path / "o")
        blank = tmp_path / "b.csv"
        blank.write_text('prompt_id,text\n1,x\n2," "\n', encoding="utf-8")
        with pytest.raises(GuarddiagError, match='row 2 field "text": empty'):
            label_pool(policy=policy, committee=committee, pool=blank, out_dir=tmp_path / "o")
        # Votes made under another policy are not mixed in.
        label_pool(policy=policy, committee=committee, pool=pool, out_dir=tmp_path / "out")
        policy.write_text("A different policy.\n", encoding="utf-8")
        with pytest.raises(GuarddiagError, match="another policy or committee"):
            label_pool(policy=policy, committee=committee, pool=pool, out_dir=tmp_path / "out")


def test_endpoint_refusing_connections_keeps_votes(tmp_path):
    with ScriptedServer(_script) as server:
        policy, committee, pool = _write_inputs(tmp_path, server.base_url)
    # The server is gone: every connection is refused.
    with pytest.raises(GuarddiagError, match="refused the connection.*0 vote") as info:
        label_pool(policy=policy, committee=committee, pool=pool, out_dir=tmp_path / "out")
    assert "\n" not in str(info.value)
