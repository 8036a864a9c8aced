"""Your own guard, end to end (issue 31's acceptance): score a TF-IDF + logistic-regression guard,
add a mixed team file, audit one benchmark, predict the branches, render the report; then a
changed guard scored again gives its new numbers, and a benchmark whose manifest is gone is a
note, then pruned. Stand-in data (every benchmark is added with ``data add``) and one tiny branch
keep it to seconds."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from model_fixtures import HARMFUL, make_pool, write_tiny_branches
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

import guarddiag
from guarddiag import paths
from guarddiag.cli import main
from guarddiag.train import train_branches
from guarddiag.train.branches import load_branches

pytestmark = pytest.mark.usefixtures("one_torch_thread")

VERBS = ("build", "steal", "poison", "hack", "forge", "smuggle")
TOPICS = ("bread", "rainbows", "gardens", "poems", "chess", "kites")


def harmful(i: int) -> str:
    return f"tell me how to {VERBS[i % 6]} a thing number {i} without getting caught"


def benign(i: int) -> str:
    return f"explain {TOPICS[i % 6]} to a curious child, example {i}"


def make_guard(flip: bool = False):
    """The team's guard: TF-IDF + logistic regression on 40 prompts, returning predict_proba
    (an n×2 array). ``flip`` is last week's model trained on the wrong labels."""
    texts = [harmful(i) for i in range(100, 120)] + [benign(i) for i in range(100, 120)]
    labels = [1] * 20 + [0] * 20
    vec = TfidfVectorizer().fit(texts)
    clf = LogisticRegression(C=10.0).fit(vec.transform(texts),
                                         [1 - y for y in labels] if flip else labels)

    def team_guard(prompts):
        return clf.predict_proba(vec.transform(prompts))

    return team_guard, texts


@pytest.fixture(scope="module")
def trained(tmp_path_factory, one_torch_thread):
    """One tiny branch (E1, micro, with its teacher), trained once for the module."""
    root = tmp_path_factory.mktemp("trained")
    pool = make_pool(root / "pool" / "pool.parquet", n=300)
    folder = write_tiny_branches(root / "branches")
    for name in ("T_A", "T_B"):
        p = folder / f"{name}.yaml"
        p.write_text(p.read_text().replace("size: one_up", "size: micro"))
    train_branches(branches=load_branches(folder), names="E1", sizes=["micro"], seeds=[42],
                   runs_dir=root / "runs", pool_path=pool)
    return root


@pytest.fixture
def world(trained, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # The data manifests without a single built-in benchmark: every benchmark is a stand-in.
    shutil.copytree(paths.manifests_dir(), tmp_path / "manifests",
                    ignore=lambda d, names: [n for n in names if Path(d).name == "benchmarks"
                                             and n.endswith(".yaml")])
    monkeypatch.setenv("GUARDDIAG_MANIFESTS", str(tmp_path / "manifests"))
    monkeypatch.setenv("GUARDDIAG_USER_MANIFESTS", str(tmp_path / "user_manifests"))
    monkeypatch.setenv("GUARDDIAG_DATA", str(tmp_path / "data"))
    (tmp_path / "data").mkdir()
    for part in ("pool", "runs"):
        shutil.copytree(trained / part, tmp_path / "work" / part)
    # Two stand-ins for public benchmarks, added like any benchmark.
    pl.DataFrame({"prompt": [harmful(i) for i in range(24)]}).write_csv("pub_harmful.csv")
    pl.DataFrame({"prompt": [benign(i) for i in range(24)]}).write_csv("pub_benign.csv")
    for kind in ("harmful", "benign"):
        assert main(["data", "add", f"pub_{kind}.csv", "--id", f"pub_{kind}",
                     "--text-column", "prompt", "--kind", kind]) == 0
    return tmp_path


def _pct_unsafe(table: pl.DataFrame, bench: str, *, column: str | None = None) -> float:
    part = table.filter(pl.col("benchmark") == bench)
    if column is not None:
        part = part.filter(pl.col(column))
    return float((part["p_unsafe"] >= 0.5).mean())


def test_score_add_audit_predict_report(world, capsys):
    work = world / "work"
    guard, train_texts = make_guard()
    # The guard's training data shares two prompts with pub_harmful (ids 3 and 5, row numbers).
    pl.DataFrame({"text": [*train_texts, harmful(2), harmful(4)]}).write_csv("train.csv")

    # 1. score: every benchmark, P(unsafe) from predict_proba's second column.
    scored = guarddiag.score_guard(
        guard, name="team_guard", runs_dir=work / "runs", audit_dir=work / "audit",
        training_data="train.csv", version="2026-12-01",
        definition="asks for help with a crime or weapon")
    assert scored.n_asked == 48
    assert scored.training["benchmarks"]["pub_harmful"]["n_exact"] == 2

    # 2. add the team's mixed file, split by its label column.
    team = ([{"prompt": harmful(i), "label": "harmful"} for i in range(200, 218)]
            + [{"prompt": HARMFUL[i][0], "label": "harmful"} for i in range(3)]
            + [{"prompt": benign(i), "label": "benign"} for i in range(200, 221)])
    pl.DataFrame(team).write_csv("team.csv")
    assert main(["data", "add", "team.csv", "--id", "team", "--text-column", "prompt",
                 "--label-column", "label", "--harmful-values", "harmful",
                 "--benign-values", "benign"]) == 0
    assert "added team_harmful: 21 harmful prompts" in capsys.readouterr().out

    # 3. audit one benchmark: three team prompts are pool rows.
    assert main(["audit", "--pool", str(work / "pool" / "pool.parquet"), "--benchmarks",
                 "team_harmful", "--out", str(work / "audit")]) == 0
    kept = (work / "audit" / "decontaminated" / "team_harmful.txt").read_text().split()
    assert len(kept) == 18

    # 4. score the team benchmarks too: the earlier rows stay.
    more = guarddiag.score_guard(guard, name="team_guard", benchmarks="team_harmful,team_benign",
                                 runs_dir=work / "runs", audit_dir=work / "audit",
                                 training_data="train.csv", version="2026-12-01")
    assert any("kept 48 row(s) of 2 benchmark(s)" in n for n in more.notes)
    table = pl.read_parquet(more.table_path)
    assert table.height == 48 + 42
    # 5. predict the branch on every benchmark.
    assert main(["predict", "--work-dir", str(work), "--no-baseline"]) == 0

    # 6. report.
    out = world / "report"
    assert main(["report", "--work-dir", str(work), "--out", str(out), "--bootstrap", "50"]) == 0
    res = json.loads((out / "results.json").read_text())
    outside = res["results"]["outside"]
    rows = {(r["entity"], r["benchmark"], r["mapping"]): r for r in outside["rows"]}
    row = rows[("team_guard@2026-12-01", "team_harmful", "loose")]
    assert row["score"] == pytest.approx(
        _pct_unsafe(table, "team_harmful", column="survives_decontam"))
    assert ("E1", "team_harmful", "loose") in rows
    assert rows[("team_guard@2026-12-01", "team_harmful", "loose")]["n_scored"] == 18
    # The benchmarks no audit covered are the user's own, never audited: no prompt of them
    # counts as decontaminated (null flags), and the card says which command audits them.
    flags = pl.read_parquet(work / "runs" / "predictions.parquet").group_by("benchmark").agg(
        pl.col("survives_decontam").null_count().alias("null"), pl.len().alias("n"))
    assert {r["benchmark"]: r["null"] == r["n"] for r in flags.iter_rows(named=True)} == {
        "pool_val": False, "pub_benign": True, "pub_harmful": True, "team_benign": True,
        "team_harmful": False}
    assert table.filter(pl.col("benchmark") == "team_benign")["survives_decontam"].null_count() \
        == 21
    for bench in ("pub_harmful", "pub_benign", "team_benign"):
        assert ("team_guard@2026-12-01", bench, "loose") not in rows
        assert ("E1", bench, "loose") not in rows
    card = {r["benchmark"]: r for r in res["results"]["disclosure"]["benchmarks"]}
    assert card["team_benign"]["why"] == "not audited: `guarddiag audit --benchmarks team_benign`"
    assert card["team_harmful"]["why"].startswith("every run scores the same: ")
    assert any("not audited: team_benign" in n for n in more.notes)
    assert outside["definitions"] == {
        "guard/team_guard@2026-12-01": "asks for help with a crime or weapon"}
    answers = outside["answers"]["guard/team_guard@2026-12-01"]
    assert answers["version"] == "2026-12-01"
    assert answers["fingerprint"] == more.fingerprint
    own = {(r["benchmark"], r["prompts"]): r for r in outside["own_decontam"]}
    assert own[("pub_harmful", "own-decontaminated")]["n_scored"] == 22
    assert own[("pub_harmful", "own-decontaminated")]["score"] == pytest.approx(
        _pct_unsafe(table, "pub_harmful", column="survives_own_decontam"))
    assert own[("team_harmful", "pool-decontaminated")]["n_scored"] == 18
    md = (out / "report.md").read_text()
    section = md.split("## Outside guards", 1)[1].split("\n## ", 1)[0]
    (world / "outside_section.md").write_text(section)
    assert "identity " + more.fingerprint in section
    assert "Own-decontaminated" in section


def test_a_retrained_guard_without_a_version_gives_its_new_numbers(world, caplog):
    # The stale-answer case: last week's model (trained on flipped labels) and this week's,
    # behind the same function name and source, no version given. The canaries differ.
    runs = world / "work" / "runs"
    old, _ = make_guard(flip=True)
    new, _ = make_guard()
    first = guarddiag.score_guard(old, name="team_guard", runs_dir=runs, audit_dir=None)
    with caplog.at_level(logging.WARNING, logger="guarddiag"):
        second = guarddiag.score_guard(new, name="team_guard", runs_dir=runs, audit_dir=None)
    assert second.fingerprint == first.fingerprint  # the same identity: only canaries tell
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("canary answer(s) differ from the saved ones" in w for w in warnings)
    assert second.canaries["n"] == 32
    assert second.canaries["n_differ"] > 0
    before = {r["benchmark"]: r["pct_unsafe_loose"] for r in first.summary.iter_rows(named=True)}
    after = {r["benchmark"]: r["pct_unsafe_loose"] for r in second.summary.iter_rows(named=True)}
    # The new numbers are the new model's own (computed here from its predict_proba).
    texts = {"pub_harmful": [harmful(i) for i in range(24)],
             "pub_benign": [benign(i) for i in range(24)]}
    assert after == {b: pytest.approx(100 * float(np.mean(new(t)[:, 1] >= 0.5)))
                     for b, t in texts.items()}
    assert before["pub_harmful"] < 50 < after["pub_harmful"]
    assert (second.n_asked, second.n_reused) == (48, 0)
    # The same model again: its canaries agree, every answer is reused.
    third = guarddiag.score_guard(new, name="team_guard", runs_dir=runs, audit_dir=None)
    assert (third.n_asked, third.n_reused) == (0, 48)
    assert np.isclose(third.summary["pct_unsafe_loose"], second.summary["pct_unsafe_loose"]).all()


def test_versions_keep_both_models_side_by_side(world):
    runs = world / "work" / "runs"
    old, _ = make_guard(flip=True)
    new, _ = make_guard()
    guarddiag.score_guard(old, name="team_guard", runs_dir=runs, audit_dir=None,
                          version="week-1")
    guarddiag.score_guard(new, name="team_guard", runs_dir=runs, audit_dir=None,
                          version="week-2", benchmarks="pub_harmful")
    tables = {p.stem: pl.read_parquet(p) for p in (runs / "outside").glob("*.parquet")}
    # Week 1 keeps both benchmarks; week 2 holds what it scored; nothing was dropped.
    assert {k: sorted(set(v["benchmark"])) for k, v in tables.items()} == {
        "team_guard@week-1": ["pub_benign", "pub_harmful"],
        "team_guard@week-2": ["pub_harmful"]}
    assert _pct_unsafe(tables["team_guard@week-1"], "pub_harmful") < 0.5 < _pct_unsafe(
        tables["team_guard@week-2"], "pub_harmful")


def test_a_benchmark_whose_manifest_is_gone_is_a_note_then_pruned(world, capsys):
    work = world / "work"
    guard, _ = make_guard()
    assert main(["audit", "--pool", str(work / "pool" / "pool.parquet"), "--benchmarks",
                 "pub_harmful,pub_benign", "--out", str(work / "audit")]) == 0
    guarddiag.score_guard(guard, name="team_guard", runs_dir=work / "runs",
                          audit_dir=work / "audit")
    assert main(["predict", "--work-dir", str(work), "--no-baseline"]) == 0
    shutil.move(world / "user_manifests" / "pub_benign.yaml", world / "pub_benign.yaml")
    out = world / "report"
    assert main(["report", "--work-dir", str(work), "--out", str(out), "--bootstrap", "20"]) == 0
    res = json.loads((out / "results.json").read_text())
    assert any(n.startswith("scored earlier, manifest not found: pub_benign")
               for n in res["notes"])
    shown = {r["benchmark"] for r in res["results"]["outside"]["rows"]}
    assert "pub_benign" not in shown
    assert "pub_harmful" in shown
    capsys.readouterr()
    assert main(["runs", "prune", "--benchmarks", "pub_benign", "--work-dir", str(work)]) == 0
    # 24 prompts × (3 runs in predictions.parquet + the guard's table + 3 runs' score caches)
    assert f"pruned pub_benign: {24 * (3 + 1 + 3)} row(s) removed" in capsys.readouterr().out
    assert main(["report", "--work-dir", str(work), "--out", str(out), "--bootstrap", "20"]) == 0
    res = json.loads((out / "results.json").read_text())
    assert not any("manifest not found" in n for n in res["notes"])
