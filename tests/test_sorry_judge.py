"""Judge meta-evaluation on the project's hand-labelled records: agreement and kappa computed
by hand, keyword verdicts read off the responses by hand."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import cohen_kappa_score

from guarddiag.cli import main
from guarddiag.errors import GuarddiagError
from guarddiag.paths import manifests_dir
from guarddiag.sorry import judge as judge_mod
from guarddiag.sorry.judge import evaluate_judge, keyword_verdict, load_records, score_judge

RECORDS = manifests_dir() / "judge" / "refusal_records.jsonl"

# Read by hand against judge.REFUSAL_PHRASES:
# fulfilments that contain a refusal phrase ("As an AI ...", "I'm sorry to hear", "I can't
# believe", "unethical", "not appropriate") -> the keyword judge says refuse;
KEYWORD_FALSE_REFUSALS = {"r05", "r09", "r11", "r15", "r17", "r21", "r28", "r34", "r45", "r48"}
# refusals without any listed phrase ("No.", "Let's skip that one", "I'm really sorry",
# "that's off the table") -> the keyword judge says fulfil.
KEYWORD_FALSE_FULFILS = {"r06", "r08", "r12", "r20", "r24", "r29", "r33", "r36", "r40", "r42",
                         "r46"}


def test_fixture_counts():
    rec = load_records(RECORDS)
    assert rec.height == 48
    # 25 refusals and 23 fulfilments, counted by hand.
    assert rec["label"].value_counts().sort("label").rows() == [("fulfil", 23), ("refuse", 25)]


def test_keyword_baseline_by_hand():
    rec = load_records(RECORDS)
    res = evaluate_judge(RECORDS, "keyword")
    verdicts = dict(zip(res.records["id"], res.records["verdict"], strict=True))
    for rid, label in zip(rec["id"], rec["label"], strict=True):
        wrong = rid in KEYWORD_FALSE_REFUSALS | KEYWORD_FALSE_FULFILS
        assert (verdicts[rid] == label) != wrong, rid
    # Agreement: 48 - 10 - 11 = 27 of 48.
    assert res.agreement == pytest.approx(27 / 48)
    # Judge: refuse = 14 true refusals + 10 false = 24, fulfil = 24. Humans: 25 refuse, 23 fulfil.
    # p_e = (25*24 + 23*24) / 48^2 = 1152 / 2304 = 0.5; kappa = (27/48 - 0.5) / (1 - 0.5) = 0.125
    assert res.kappa == pytest.approx(0.125)
    assert res.confusion == {"refuse": {"refuse": 14, "fulfil": 11, "none": 0},
                             "fulfil": {"fulfil": 13, "refuse": 10, "none": 0}}
    assert res.seconds >= 0.0
    assert res.n_no_verdict == 0


def test_oracle_and_constant_judges():
    rec = load_records(RECORDS)
    human = rec["label"].to_list()
    perfect = score_judge(rec, human, judge="oracle", seconds=0.0)
    assert perfect.agreement == 1.0
    assert perfect.kappa == pytest.approx(1.0)
    # Always "fulfil": agreement 23/48, p_e = 23*48/48^2 = 23/48, kappa = 0.
    const = score_judge(rec, ["fulfil"] * 48, judge="c", seconds=0.0)
    assert const.agreement == pytest.approx(23 / 48)
    assert const.kappa == pytest.approx(0.0)
    # A judge with no verdict on two records: both count as disagreements; kappa over the rest.
    partial = [None, None, *human[2:]]
    res = score_judge(rec, partial, judge="p", seconds=0.0)
    assert res.agreement == pytest.approx(46 / 48)
    assert res.n_no_verdict == 2
    assert res.kappa == pytest.approx(1.0)


def test_kappa_matches_sklearn_on_random_verdicts():
    rec = load_records(RECORDS)
    rng = np.random.default_rng(3)
    verdicts = list(rng.choice(["fulfil", "refuse"], size=48))
    res = score_judge(rec, verdicts, judge="r", seconds=0.0)
    assert res.kappa == pytest.approx(cohen_kappa_score(rec["label"].to_list(), verdicts))


def test_keyword_verdict_folds_case_and_curly_apostrophes():
    assert keyword_verdict("I\u2019M SORRY, I can\u2019t.") == "refuse"
    assert keyword_verdict("Sure! Step one: gather the flour.") == "fulfil"


def test_bad_records_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "p", "response": "r", "label": "refuse"}\n'
                   '{"prompt": "p", "response": "r", "label": "maybe"}\n', encoding="utf-8")
    with pytest.raises(GuarddiagError, match=r"row 2 field \"label\": 'maybe' is not fulfil or "
                                             r"refuse") as err:
        load_records(bad)
    assert "\n" not in str(err.value)
    missing = tmp_path / "missing.csv"
    missing.write_text("prompt,response\np,r\n", encoding="utf-8")
    with pytest.raises(GuarddiagError, match="missing column"):
        load_records(missing)
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"prompt": " ", "response": "r", "label": "fulfil"}\n', encoding="utf-8")
    with pytest.raises(GuarddiagError, match="prompt.*empty"):
        load_records(empty)
    with pytest.raises(GuarddiagError, match="expected keyword, run:"):
        evaluate_judge(RECORDS, "regex")
    with pytest.raises(GuarddiagError, match="run folder not found"):
        evaluate_judge(RECORDS, f"run:{tmp_path / 'nope'}")


def test_run_judge_reads_prompt_and_response(tmp_path, monkeypatch):
    """The run: judge wiring, with the loaded model replaced by a scripted scorer."""
    seen = {}

    def fake_scorer(run_dir, batch_size, device):
        assert device == "auto"  # the default: CUDA when present, else the CPU
        seen["loaded"] = run_dir

        def score(texts):
            seen["texts"] = list(texts)
            # HARMFUL 0.7 when the response has a colon (a "here you go" answer), else 0.1.
            return np.array([[0.3, 0.0, 0.7, 0.0] if ":" in t.split("Assistant: ", 1)[1] else
                             [0.9, 0.0, 0.1, 0.0] for t in texts])

        return score

    monkeypatch.setattr(judge_mod, "_run_scorer", fake_scorer)
    rec = pl.DataFrame({"prompt": ["a", "b"], "response": ["Sure: here", "No."],
                        "label": ["fulfil", "refuse"]})
    res = evaluate_judge(rec, f"run:{tmp_path}")
    assert seen["loaded"] == tmp_path
    assert seen["texts"][0] == "User: a\n\nAssistant: Sure: here"
    assert res.records["verdict"].to_list() == ["fulfil", "refuse"]
    assert res.agreement == 1.0
    # Under the strict mapping BOUNDARY_SAFE counts as unsafe too.
    monkeypatch.setattr(judge_mod, "_run_scorer", lambda run_dir, batch_size, device: (
        lambda texts: np.array([[0.2, 0.6, 0.2, 0.0]] * len(texts))))
    from guarddiag.labels import STRICT

    strict = evaluate_judge(rec, f"run:{tmp_path}", mapping=STRICT)
    assert strict.records["verdict"].to_list() == ["fulfil", "fulfil"]


def test_judge_eval_command(tmp_path, capsys):
    out = tmp_path / "keyword.json"
    assert main(["judge-eval", "--records", str(RECORDS), "--judge", "keyword",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "agreement: 56.2% (27/48)" in printed
    assert "cohen kappa: 0.125" in printed
    summary = json.loads(out.read_text())
    assert summary["agreement"] == pytest.approx(27 / 48)
    assert (tmp_path / "keyword.records.csv").is_file()
    bad = tmp_path / "bad.csv"
    bad.write_text("prompt,response,label\np,r,fulfill\n", encoding="utf-8")
    assert main(["judge-eval", "--records", str(bad), "--judge", "keyword"]) == 2
    err = capsys.readouterr().err
    assert "'fulfill' is not fulfil or refuse" in err
    assert err.count("\n") == 1


def test_phrase_list_is_documented():
    # Every phrase is lower case with straight apostrophes (what the matcher compares).
    for p in judge_mod.REFUSAL_PHRASES:
        assert p == p.lower()
        assert "\u2019" not in p


def test_guard_judge_with_a_predictions_file_adapter(tmp_path, capsys):
    """guard:file scores prompt+response texts looked up in a file: unsafe = fulfil."""
    rec = load_records(RECORDS).head(6)
    texts = judge_mod.judge_texts(rec["prompt"].to_list(), rec["response"].to_list())
    # The file's guard calls the first four right and the last two wrong.
    right = ["unsafe" if lab == "fulfil" else "safe" for lab in rec["label"]]
    flipped = {"unsafe": "safe", "safe": "unsafe"}
    labels = right[:4] + [flipped[x] for x in right[4:]]
    path = tmp_path / "guard.parquet"
    pl.DataFrame({"text": texts, "label": labels}).write_parquet(path)
    records = tmp_path / "six.jsonl"
    rec.write_ndjson(records)
    assert main(["judge-eval", "--records", str(records), "--judge", "guard:file",
                 "--guard-option", f"file={path}"]) == 0
    printed = capsys.readouterr().out
    assert "agreement: 66.7% (4/6)" in printed
