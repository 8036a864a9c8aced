"""``guarddiag data add`` (issue 15, item 3): a CSV the project has never seen becomes a benchmark
that ``data list``, ``audit`` and ``guards score`` all see, beside the built-in ones.

Expected ids, texts, categories, digests and counts are re-derived here from the file with the
standard library (csv, hashlib), never taken from guarddiag.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
from pathlib import Path

import polars as pl
import pytest
import yaml

from guarddiag import cli, data, paths
from guarddiag.errors import GuarddiagError
from guarddiag.spec import SpecError

CATEGORIES = ("fraud", "weapons", "privacy")


def red_team_rows(n: int = 30) -> list[dict[str, str]]:
    """n prompts, ids r001…, categories cycling through CATEGORIES."""
    return [{"uid": f"r{i:03d}", "prompt": f"Red-team prompt number {i}: explain scheme {i * 7}",
             "category": CATEGORIES[i % 3]} for i in range(1, n + 1)]


def write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


@pytest.fixture
def setup(tmp_path, monkeypatch):
    """An empty data directory and a never-seen CSV kept outside it."""
    monkeypatch.delenv(data.USER_MANIFESTS_ENV, raising=False)
    monkeypatch.delenv("GUARDDIAG_MANIFESTS", raising=False)
    monkeypatch.chdir(tmp_path)
    ddir = tmp_path / "data"
    ddir.mkdir()
    src = write_csv(tmp_path / "team" / "red_team.csv", red_team_rows())
    return ddir, src


def user_folder() -> Path:
    """The default user manifests folder: the user's own data folder (the test's XDG_DATA_HOME,
    set by conftest), never the data directory."""
    return Path(os.environ["XDG_DATA_HOME"]) / "guarddiag" / "user_manifests"


def add(ddir: Path, src: Path, *extra: str, subset_id: str = "my_set") -> int:
    return cli.main(["--data-dir", str(ddir), "data", "add", str(src), "--id", subset_id,
                     "--text-column", "prompt", "--kind", "harmful", "--category-column",
                     "category", "--id-column", "uid", *extra])


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("guarddiag: error: ")
    assert "\n" not in err
    return err


# ── the manifest and loading ──────────────────────────────────────────────────────────────────


def test_add_writes_a_manifest_the_loader_reads_like_a_built_in_one(setup, capsys):
    ddir, src = setup
    assert add(ddir, src, "--title", "Team red-teaming") == 0
    out = capsys.readouterr().out
    manifest = user_folder() / "my_set.yaml"
    assert f"manifest: {manifest}" in out
    doc = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    raw = src.read_bytes()
    assert doc["files"] == [{"path": str(src.resolve()), "format": "csv",
                             "sha256": hashlib.sha256(raw).hexdigest(), "rows": 30}]
    assert doc["expected_count"] == 30
    assert (doc["id"], doc["kind"], doc["study"], doc["title"]) == (
        "my_set", "harmful", False, "Team red-teaming")
    assert (doc["text_fields"], doc["id_field"], doc["category_field"]) == (
        ["prompt"], "uid", "category")

    with open(src, newline="", encoding="utf-8") as fh:
        expected = list(csv.DictReader(fh))
    frame = data.load_benchmark("my_set", data_dir=ddir)
    assert frame["prompt_id"].to_list() == [r["uid"] for r in expected]
    assert frame["text"].to_list() == [r["prompt"] for r in expected]
    assert frame["category"].to_list() == [r["category"] for r in expected]
    assert set(frame["label_kind"]) == {"harmful"}
    assert set(frame["benchmark"]) == {"my_set"}

    manifests = data.load_manifests(data_dir=ddir)
    assert manifests["my_set"].user
    assert manifests["my_set"].defined_in == "user"
    # Built-ins first (SPEC order, then extras), the user's subset after them.
    assert list(manifests)[-1] == "my_set"
    assert data.resolve_ids("user", manifests) == ["my_set"]
    assert "my_set" in data.resolve_ids("all", manifests)
    assert "my_set" not in data.resolve_ids("extra", manifests)


def test_without_an_id_column_the_ids_are_row_numbers(setup):
    ddir, src = setup
    assert cli.main(["--data-dir", str(ddir), "data", "add", str(src), "--id", "by_row",
                     "--text-column", "prompt", "--kind", "benign"]) == 0
    frame = data.load_benchmark("by_row", data_dir=ddir)
    assert frame["prompt_id"].to_list() == [str(i) for i in range(1, 31)]
    assert frame["category"].null_count() == 30
    assert set(frame["label_kind"]) == {"benign"}


def test_jsonl_and_text_files_are_read_by_suffix(setup):
    ddir, _ = setup
    jsonl = ddir.parent / "t.jsonl"
    jsonl.write_text('{"q": "first prompt", "c": "a"}\n{"q": "second prompt", "c": "b"}\n',
                     encoding="utf-8")
    txt = ddir.parent / "t.txt"
    txt.write_text("one\ntwo\nthree\n", encoding="utf-8")
    data.add_benchmark(jsonl, subset_id="from_jsonl", text_column="q", kind="harmful",
                       category_column="c", data_dir=ddir)
    data.add_benchmark(txt, subset_id="from_txt", text_column="text", kind="benign",
                       data_dir=ddir)
    loaded = data.load_benchmarks("user", data_dir=ddir)
    assert loaded.frames["from_jsonl"]["text"].to_list() == ["first prompt", "second prompt"]
    assert loaded.frames["from_jsonl"]["category"].to_list() == ["a", "b"]
    assert loaded.frames["from_txt"]["text"].to_list() == ["one", "two", "three"]


# ── data list, audit and guards score all see it ──────────────────────────────────────────────


def test_data_list_shows_where_each_subset_comes_from(setup, capsys):
    ddir, src = setup
    assert add(ddir, src) == 0
    capsys.readouterr()
    assert cli.main(["--data-dir", str(ddir), "data", "list"]) == 0
    out = capsys.readouterr().out
    assert f"user manifests: {user_folder()}" in out
    mine = [ln.split() for ln in out.splitlines() if ln.startswith("my_set ")]
    assert mine == [["my_set", "harmful", "user", "user", "available", "30", "30"]]
    builtin = [ln.split() for ln in out.splitlines() if ln.startswith("xstest_safe ")]
    assert builtin[0][2:5] == ["extra", "built-in", "unavailable"]
    assert "user: 1 of 1 subsets available, 30 of 30 prompts" in out
    assert cli.main(["--data-dir", str(ddir), "data", "list", "--ids", "user", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [(r["id"], r["defined_in"], r["manifest"], r["found"]) for r in records] == [
        ("my_set", "user", str(user_folder() / "my_set.yaml"), 30)]


def test_audit_counts_the_pool_rows_found_in_the_new_benchmark(setup, capsys, tmp_path):
    ddir, src = setup
    assert add(ddir, src) == 0
    rows = red_team_rows()
    pool = pl.DataFrame({
        "prompt_id": [f"p{i}" for i in range(1, 9)],
        # Rows 1-2 copy benchmark prompts 4 and 9; row 3 is prompt 17 with case and spacing
        # changed (equal after normalisation); rows 4-8 are not in it.
        "text": [rows[3]["prompt"], rows[8]["prompt"],
                 "  " + rows[16]["prompt"].upper() + " ",
                 "bake bread", "water a plant", "Red-team prompt number 99: explain scheme 1",
                 "how do tides work", "name three rivers"]})
    pool.write_parquet(tmp_path / "pool.parquet")
    assert cli.main(["audit", "--data-dir", str(ddir), "--pool", str(tmp_path / "pool.parquet"),
                     "--benchmarks", "my_set", "--out", str(tmp_path / "audit")]) == 0
    summary = json.loads((tmp_path / "audit" / "summary.json").read_text(encoding="utf-8"))
    per = summary["benchmarks"]["my_set"]
    assert (per["n"], per["n_exact"], per["n_kept"]) == (30, 3, 27)
    assert per["pct_exact"] == pytest.approx(100 * 3 / 30)
    assert sorted(e["prompt_id"] for e in per["examples"]) == ["r004", "r009", "r017"]
    assert per["sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    kept = (tmp_path / "audit" / "decontaminated" / "my_set.txt").read_text(encoding="utf-8")
    assert len(kept.splitlines()) == 27


def test_guards_score_reads_a_file_keyed_by_its_prompt_ids(setup, capsys, tmp_path):
    ddir, src = setup
    assert add(ddir, src) == 0
    # Unsafe for every third prompt (r003, r006, … r030: 10 of 30), safe otherwise; five more
    # rows name prompts of no selected benchmark.
    lines = ["prompt_id,label"] + [f"r{i:03d},{'unsafe' if i % 3 == 0 else 'safe'}"
                                   for i in range(1, 31)]
    lines += [f"x{i},unsafe" for i in range(5)]
    preds = tmp_path / "team_guard.csv"
    preds.write_text("\n".join(lines) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert cli.main(["guards", "score", "--data-dir", str(ddir), "--adapter", "file", "--file",
                     str(preds), "--benchmarks", "my_set", "--work-dir", str(tmp_path / "w")]) == 0
    captured = capsys.readouterr()
    assert ("5 row(s) match no prompt of the selected benchmarks (first at row 31: prompt id "
            "'x0' is in none of the selected benchmarks); skipped" in captured.err)
    row = [ln.split() for ln in captured.out.splitlines() if ln.startswith("my_set ")]
    assert row == [["my_set", "harmful", "30", "0", f"{100 * 10 / 30:.1f}"]]
    table = pl.read_parquet(tmp_path / "w" / "runs" / "outside" / "team_guard.parquet")
    assert table.height == 30
    assert set(table["benchmark"]) == {"my_set"}

    assert cli.main(["guards", "score", "--data-dir", str(ddir), "--adapter", "file", "--file",
                     str(preds), "--benchmarks", "my_set", "--work-dir", str(tmp_path / "w"),
                     "--strict"]) == 2
    err = one_line_error(capsys)
    assert err.endswith(f"{preds} row 31: prompt id 'x0' is in none of the selected benchmarks "
                        f"(my_set)")


def test_strict_is_only_for_the_file_adapter(setup, capsys, tmp_path):
    assert cli.main(["guards", "score", "--adapter", "callable", "--target", "m:f",
                     "--strict", "--work-dir", str(tmp_path / "w")]) == 2
    assert "--strict does not apply to the callable adapter" in one_line_error(capsys)


# ── re-adding, a changed file, the folders ────────────────────────────────────────────────────


def test_re_adding_the_same_file_is_a_no_op(setup, capsys):
    ddir, src = setup
    assert add(ddir, src) == 0
    manifest = user_folder() / "my_set.yaml"
    before = manifest.read_bytes()
    capsys.readouterr()
    assert add(ddir, src) == 0
    assert "already added, unchanged" in capsys.readouterr().out
    assert manifest.read_bytes() == before


def test_a_changed_file_is_a_checksum_error_until_replaced(setup, capsys):
    ddir, src = setup
    assert add(ddir, src) == 0
    rows = red_team_rows()
    rows[4]["prompt"] = "an edited prompt"
    write_csv(src, rows)
    # Loading the old manifest: the existing checksum error, naming the file.
    with pytest.raises(GuarddiagError) as info:
        data.load_benchmark("my_set", data_dir=ddir)
    assert str(info.value).startswith(f"{src.resolve()}: checksum mismatch for my_set data file")
    # Adding again under the same id: refused, naming the file.
    assert add(ddir, src) == 2
    err = one_line_error(capsys)
    assert f"{src.resolve()}: checksum changed since it was added as my_set" in err
    assert "--replace" in err
    assert add(ddir, src, "--replace") == 0
    assert "replaced my_set" in capsys.readouterr().out
    frame = data.load_benchmark("my_set", data_dir=ddir)
    assert frame.filter(pl.col("prompt_id") == "r005")["text"].item() == "an edited prompt"


def test_another_file_or_other_options_under_the_same_id_need_replace(setup, capsys):
    ddir, src = setup
    assert add(ddir, src) == 0
    other = write_csv(src.parent / "other.csv", red_team_rows(5))
    assert add(ddir, other) == 2
    assert f"my_set: already added from {src.resolve()}" in one_line_error(capsys)
    assert cli.main(["--data-dir", str(ddir), "data", "add", str(src), "--id", "my_set",
                     "--text-column", "prompt", "--kind", "benign"]) == 2
    assert "already added from" in one_line_error(capsys)


def test_a_built_in_id_is_refused(setup, capsys):
    ddir, src = setup
    assert add(ddir, src, subset_id="xstest_safe") == 2
    err = one_line_error(capsys)
    assert "--id 'xstest_safe' is already a built-in benchmark" in err
    assert not (user_folder()).exists()


def test_a_hand_placed_user_manifest_with_a_built_in_id_is_a_manifest_error(setup):
    ddir, src = setup
    data.add_benchmark(src, subset_id="mine", text_column="prompt", kind="harmful",
                       data_dir=ddir)
    folder = user_folder()
    doc = yaml.safe_load((folder / "mine.yaml").read_text(encoding="utf-8"))
    doc["id"] = "xstest_safe"
    (folder / "xstest_safe.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(SpecError, match="'xstest_safe' is a built-in benchmark id"):
        data.load_manifests(data_dir=ddir)


def test_manifests_dir_and_the_environment_variable(setup, monkeypatch, capsys):
    ddir, src = setup
    elsewhere = ddir.parent / "my_manifests"
    assert add(ddir, src, "--manifests-dir", str(elsewhere)) == 0
    assert "GUARDDIAG_USER_MANIFESTS=" in capsys.readouterr().err
    assert (elsewhere / "my_set.yaml").is_file()
    assert "my_set" not in data.load_manifests(data_dir=ddir)
    monkeypatch.setenv(data.USER_MANIFESTS_ENV, str(elsewhere))
    assert data.load_benchmarks("my_set", data_dir=ddir).frames["my_set"].height == 30


def test_the_user_folder_adds_to_a_replaced_built_in_folder(setup, monkeypatch):
    # GUARDDIAG_MANIFESTS replaces data_manifests/; the user folder is read on top of it.
    ddir, src = setup
    data.add_benchmark(src, subset_id="my_set", text_column="prompt", kind="harmful",
                       data_dir=ddir)
    copy = ddir.parent / "manifests_copy" / "benchmarks"
    copy.mkdir(parents=True)
    shutil.copy(paths.manifests_dir() / "benchmarks" / "strongreject.yaml", copy)
    monkeypatch.setenv("GUARDDIAG_MANIFESTS", str(copy.parent))
    assert list(data.load_manifests(data_dir=ddir)) == ["strongreject", "my_set"]


def test_pull_leaves_user_files_alone(setup):
    ddir, src = setup
    data.add_benchmark(src, subset_id="my_set", text_column="prompt", kind="harmful",
                       data_dir=ddir)
    assert data.pull(ids="user", data_dir=ddir).files == ()


def test_a_missing_user_file_says_how_to_restore_it(setup):
    ddir, src = setup
    data.add_benchmark(src, subset_id="my_set", text_column="prompt", kind="harmful",
                       data_dir=ddir)
    src.unlink()
    status = data.subset_status(data_dir=ddir, ids="my_set")[0]
    assert status.status == "unavailable"
    assert status.message is not None
    assert f"my_set: file not found: {src.resolve()}; put the file back" in status.message
    assert "data pull" not in status.message


# ── bad input: one line each, naming the file, row and field ──────────────────────────────────


def _bad(tmp: Path, name: str, content: bytes) -> Path:
    path = tmp / name
    path.write_bytes(content)
    return path


@pytest.mark.parametrize(("name", "content", "expected"), [
    ("nocol.csv", b"uid,text,category\nr1,hello,a\n",
     '{f}: no column "prompt" (--text-column); found: uid, text, category'),
    ("empty_text.csv", b"uid,prompt,category\nr1,one,a\nr2,two,a\nr3,three,b\nr4,,b\n",
     '{f} row 4 field "prompt": empty text'),
    ("blank_text.csv", b"uid,prompt,category\nr1,one,a\nr2,   ,a\n",
     '{f} row 2 field "prompt": empty text'),
    ("dup.csv", b"uid,prompt,category\nr1,one,a\nr2,two,a\nr3,three,b\nr4,four,b\nr2,five,c\n",
     "{f} row 5 field \"uid\": duplicate id 'r2' (first at {f} row 2)"),
    ("latin1.csv", b"uid,prompt,category\nr1,ok,a\nr2,caf\xe9,a\n",
     "{f} line 3: not UTF-8 text"),
    ("header_only.csv", b"uid,prompt,category\n", "{f}: no data rows"),
    ("broken.jsonl", b'{"uid": "r1", "prompt": "x", "category": "a"}\n{"uid": \n',
     "{f} line 2: malformed JSON"),
    ("notes.docx", b"PK\x03\x04", "{f}: cannot tell the format from the name"),
])
def test_bad_files_are_one_line_errors(setup, capsys, name, content, expected):
    ddir, _ = setup
    path = _bad(ddir.parent, name, content).resolve()
    assert add(ddir, path) == 2
    assert expected.format(f=path) in one_line_error(capsys)
    assert not (user_folder() / "my_set.yaml").exists()


def test_missing_and_unreadable_files_are_one_line_errors(setup, capsys):
    ddir, _ = setup
    missing = (ddir.parent / "nowhere.csv").resolve()
    assert add(ddir, missing) == 2
    assert f"{missing}: file not found" in one_line_error(capsys)
    garbage = _bad(ddir.parent, "garbage.parquet", b"not a parquet file").resolve()
    assert add(ddir, garbage) == 2
    assert f"{garbage}: cannot read as parquet" in one_line_error(capsys)


@pytest.mark.parametrize(("args", "expected"), [
    (["--id", "My Set"], "--id 'My Set': expected lower-case letters"),
    (["--id", "ok_id", "--category-column", "cat"],
     'no column "cat" (--category-column)'),
    (["--id", "ok_id", "--id-column", "key"], 'no column "key" (--id-column)'),
])
def test_bad_options_are_one_line_errors(setup, capsys, args, expected):
    ddir, src = setup
    assert cli.main(["--data-dir", str(ddir), "data", "add", str(src), "--text-column", "prompt",
                     "--kind", "harmful", *args]) == 2
    assert expected in one_line_error(capsys)


def test_a_response_column_feeds_guards_that_read_prompt_and_response(setup, tmp_path):
    """--response-column makes the new benchmark one a response-level guard can score: each
    prompt reaches the guard with the reply on its own row."""
    import guarddiag

    ddir, _ = setup
    rows = [{**r, "reply": ("Sure, here is how" if i % 4 == 0 else "I can't help with that")}
            for i, r in enumerate(red_team_rows(), start=1)]
    src = write_csv(tmp_path / "team" / "with_replies.csv", rows)
    assert add(ddir, src, "--response-column", "reply") == 0
    doc = yaml.safe_load((user_folder() / "my_set.yaml").read_text(encoding="utf-8"))
    assert doc["response_field"] == "reply"

    seen: dict[str, str] = {}

    def complied(prompts: list[str], responses: list[str]) -> list[float]:
        seen.update(zip(prompts, responses, strict=True))
        return [1.0 if r.startswith("Sure") else 0.0 for r in responses]

    result = guarddiag.score_guard(complied, benchmarks=["my_set"], input="prompt+response",
                                   data_dir=ddir, runs_dir=tmp_path / "runs", audit_dir=None)
    assert seen == {r["prompt"]: r["reply"] for r in rows}
    assert result.n_prompts == 30
    # rows 4, 8, …, 28 complied: 7 of 30 flagged
    table = pl.read_parquet(tmp_path / "runs" / "outside" / "complied.parquet")
    assert table.height == 30
    assert sorted(table.filter(pl.col("p_unsafe") == 1.0)["prompt_id"]) == \
        [f"r{i:03d}" for i in range(4, 31, 4)]
    # without the column, the same guard is refused with one line naming the benchmark
    assert add(ddir, src, "--replace") == 0
    with pytest.raises(GuarddiagError, match="my_set"):
        guarddiag.score_guard(complied, benchmarks=["my_set"], input="prompt+response",
                              data_dir=ddir, runs_dir=tmp_path / "runs2", audit_dir=None)


def test_a_missing_response_column_is_a_one_line_error(setup, capsys):
    ddir, src = setup
    assert add(ddir, src, "--response-column", "reply") == 2
    assert 'no column "reply" (--response-column)' in one_line_error(capsys)


# ── mixed files: --label-column, refusal, --whole-file (issue 31, item 5) ─────────────────────


def mixed_rows() -> list[dict[str, str]]:
    """20 rows, labels cycling harmful, benign, benign, unsafe: rows 1, 4, 5, 8, … harmful."""
    labels = ("harmful", "benign", "benign", "unsafe")
    return [{"uid": f"m{i:02d}", "prompt": f"Mixed prompt {i}", "label": labels[(i - 1) % 4]}
            for i in range(1, 21)]


def test_a_label_column_splits_the_file_into_harmful_and_benign(setup, capsys):
    ddir, _ = setup
    src = write_csv(ddir.parent / "team" / "mixed.csv", mixed_rows())
    assert cli.main(["--data-dir", str(ddir), "data", "add", str(src), "--id", "team",
                     "--text-column", "prompt", "--id-column", "uid", "--label-column", "label",
                     "--harmful-values", "harmful,unsafe", "--benign-values", "benign"]) == 0
    out = capsys.readouterr().out
    with open(src, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    harmful_ids = [r["uid"] for r in rows if r["label"] in ("harmful", "unsafe")]
    benign_ids = [r["uid"] for r in rows if r["label"] == "benign"]
    assert len(harmful_ids) == len(benign_ids) == 10
    assert "added team_harmful: 10 harmful prompts" in out
    assert "added team_benign: 10 benign prompts" in out
    loaded = data.load_benchmarks("team_harmful,team_benign", data_dir=ddir)
    assert loaded.frames["team_harmful"]["prompt_id"].to_list() == harmful_ids
    assert loaded.frames["team_benign"]["prompt_id"].to_list() == benign_ids
    assert set(loaded.frames["team_benign"]["label_kind"]) == {"benign"}
    doc = yaml.safe_load((user_folder() / "team_benign.yaml").read_text())
    assert (doc["filter_field"], doc["filter_values"]) == ("label", ["benign"])


def test_add_file_takes_the_options_object_whole(setup):
    """The Python API takes the command line's AddOptions: one object splits a mixed file, the
    keyword wrappers build the same object and refuse the other shape."""
    from guarddiag.data.options import AddOptions

    ddir, _ = setup
    src = write_csv(ddir.parent / "team" / "mixed.csv", mixed_rows())
    options = AddOptions(subset_id="team", text_column="prompt", id_column="uid",
                         label_column="label", harmful_values=("harmful", "unsafe"),
                         benign_values=("benign",))
    split = data.add_file(src, options, data_dir=ddir)
    assert isinstance(split, data.SplitAddResult)
    assert (split.harmful.rows, split.benign.rows) == (10, 10)  # mixed_rows: 5+5 and 10
    loaded = data.load_benchmarks("team_harmful,team_benign", data_dir=ddir)
    assert (loaded.frames["team_harmful"].height, loaded.frames["team_benign"].height) == (10, 10)
    with pytest.raises(GuarddiagError, match="label_column splits the file"):
        data.add_benchmark(src, subset_id="x", text_column="prompt", label_column="label",
                           harmful_values=["harmful"], data_dir=ddir)
    with pytest.raises(GuarddiagError, match="label_column is required"):
        data.add_labelled_benchmark(src, subset_id="x", text_column="prompt", data_dir=ddir)
    with pytest.raises(SpecError, match='field "kind"'):
        data.add_benchmark(src, subset_id="x", text_column="prompt", kind="harmfull",
                           data_dir=ddir)


def test_benign_values_make_any_other_value_an_error(setup, capsys):
    ddir, _ = setup
    rows = mixed_rows()
    rows[6]["label"] = "unsure"  # row 7
    src = write_csv(ddir.parent / "team" / "mixed.csv", rows)
    assert cli.main(["--data-dir", str(ddir), "data", "add", str(src), "--id", "team",
                     "--text-column", "prompt", "--label-column", "label",
                     "--harmful-values", "harmful,unsafe", "--benign-values", "benign"]) == 2
    err = one_line_error(capsys)
    assert (f'{src.resolve()} column "label": 1 row(s) have a value that is neither harmful '
            f"(harmful, unsafe) nor benign (benign): 'unsure' (1) (first at row 7); every "
            f"value: 'benign' (9), 'harmful' (5), 'unsafe' (5), 'unsure' (1)") in err
    assert cli.main(["--data-dir", str(ddir), "data", "add", str(src), "--id", "team",
                     "--text-column", "prompt", "--label-column", "label",
                     "--harmful-values", "toxic", "--benign-values", "benign"]) == 2
    assert "no row has the harmful value 'toxic'" in one_line_error(capsys)


def issue_rows() -> list[dict[str, str]]:
    """The issue's file: 15 harmful rows (two spelt 'Harmful', one 'harmfull'), 15 benign."""
    labels = ["harmful"] * 12 + ["Harmful", " Harmful "] + ["harmfull"] + ["benign"] * 15
    return [{"prompt": f"Team prompt {i}", "label": lab} for i, lab in enumerate(labels, 1)]


def test_label_values_match_whatever_their_case_and_an_unknown_one_is_an_error(setup, capsys):
    ddir, _ = setup
    src = write_csv(ddir.parent / "team" / "team.csv", issue_rows())
    base = ["--data-dir", str(ddir), "data", "add", str(src), "--id", "team", "--text-column",
            "prompt", "--label-column", "label", "--harmful-values", "harmful"]
    # The benign values are required: without them 'harmfull' would be filed as benign.
    assert cli.main(base) == 2
    assert ("holds values besides the harmful ones (harmful): 'benign' (15), 'harmfull' (1); "
            "name the benign ones with --benign-values too") in one_line_error(capsys)
    assert cli.main([*base, "--benign-values", "benign"]) == 2
    assert ("1 row(s) have a value that is neither harmful (harmful) nor benign (benign): "
            "'harmfull' (1) (first at row 15); every value: 'benign' (15), 'harmful' (12), "
            "' Harmful ' (1), 'Harmful' (1), 'harmfull' (1)") in one_line_error(capsys)
    assert not user_folder().exists()
    # Named as a harmful value too, the typo's row is harmful; case and spaces never matter.
    assert cli.main([*base[:-1], "HARMFUL,harmfull", "--benign-values", " Benign"]) == 0
    out = capsys.readouterr().out
    assert "added team_harmful: 15 harmful prompts" in out
    assert "added team_benign: 15 benign prompts" in out
    loaded = data.load_benchmarks("team_harmful,team_benign", data_dir=ddir)
    assert loaded.frames["team_harmful"]["prompt_id"].to_list() == [str(i) for i in range(1, 16)]
    assert loaded.frames["team_benign"]["prompt_id"].to_list() == [str(i)
                                                                  for i in range(16, 31)]
    doc = yaml.safe_load((user_folder() / "team_harmful.yaml").read_text())
    assert doc["filter_values"] == [" Harmful ", "Harmful", "harmful", "harmfull"]


@pytest.mark.parametrize("column", ["verdict", "is_harmful", "unsafe", "category"])
def test_common_label_columns_are_recognised(setup, capsys, column):
    ddir, _ = setup
    rows = [{"prompt": f"p{i}", column: ("unsafe" if i % 2 else "safe")} for i in range(1, 31)]
    src = write_csv(ddir.parent / "team" / "v.csv", rows)
    assert cli.main(["--data-dir", str(ddir), "data", "add", str(src), "--id", "v",
                     "--text-column", "prompt", "--kind", "harmful"]) == 2
    err = one_line_error(capsys)
    assert (f'column "{column}" looks like a per-row label (values: \'safe\' (15), '
            f"'unsafe' (15)); pass --label-column {column}") in err
    # A misnamed --label-column is told where the labels are.
    assert cli.main(["--data-dir", str(ddir), "data", "add", str(src), "--id", "v",
                     "--text-column", "prompt", "--label-column", "label",
                     "--harmful-values", "unsafe", "--benign-values", "safe"]) == 2
    assert f'no column "label" (--label-column); found: prompt, {column}; label-like: ' \
           f"{column}" in one_line_error(capsys)


def test_a_category_column_of_harm_types_is_not_a_label(setup, capsys):
    ddir, src = setup  # red_team.csv: category fraud / weapons / privacy
    assert cli.main(["--data-dir", str(ddir), "data", "add", str(src), "--id", "rt",
                     "--text-column", "prompt", "--kind", "harmful"]) == 0


def test_a_mixed_file_added_as_one_kind_is_refused_unless_whole_file(setup, capsys):
    ddir, _ = setup
    src = write_csv(ddir.parent / "team" / "mixed.csv", mixed_rows())
    base = ["--data-dir", str(ddir), "data", "add", str(src), "--id", "team",
            "--text-column", "prompt", "--kind", "harmful"]
    assert cli.main(base) == 2
    err = one_line_error(capsys)
    assert ('column "label" looks like a per-row label (values: \'benign\' (10), '
            "'harmful' (5), 'unsafe' (5))") in err
    assert "--label-column label --harmful-values V[,V…] --benign-values V[,V…]" in err
    assert "--whole-file" in err
    assert cli.main([*base, "--whole-file"]) == 0
    assert "added team: 20 harmful prompts" in capsys.readouterr().out


# ── smaller items (issue 31, item 7) ──────────────────────────────────────────────────────────


def test_a_small_benchmark_is_told_the_minimum(setup, capsys):
    ddir, _ = setup
    src = write_csv(ddir.parent / "team" / "small.csv", red_team_rows(12))
    assert add(ddir, src, subset_id="small") == 0
    err = capsys.readouterr().err
    assert ("small has 12 prompts: the report's policy-or-capability test needs 20, so it "
            "will call it undetermined") in err
    capsys.readouterr()
    assert add(ddir, write_csv(ddir.parent / "team" / "big.csv", red_team_rows(20)),
               subset_id="big") == 0
    assert "undetermined" not in capsys.readouterr().err


def test_an_edited_user_file_error_names_replace_on_load(setup):
    ddir, src = setup
    assert add(ddir, src) == 0
    rows = red_team_rows()
    rows[0]["prompt"] = "edited"
    write_csv(src, rows)
    with pytest.raises(GuarddiagError) as info:
        data.load_benchmarks("my_set", data_dir=ddir)
    message = str(info.value)
    assert message.startswith(f"{src.resolve()}: checksum mismatch for my_set data file")
    assert f"guarddiag data add {src.resolve()} --id my_set ... --replace" in message
    assert "\n" not in message


def test_an_unknown_benchmark_names_the_folders_searched(setup, capsys):
    ddir, src = setup
    elsewhere = ddir.parent / "my_manifests"
    assert add(ddir, src, "--manifests-dir", str(elsewhere)) == 0
    with pytest.raises(GuarddiagError) as info:
        data.load_benchmarks("my_set", data_dir=ddir)
    message = str(info.value)
    assert message.startswith("unknown benchmark 'my_set'")
    assert f"user {user_folder()} (another folder is read when " \
           f"$GUARDDIAG_USER_MANIFESTS names it)" in message
    assert f"built-in {paths.manifests_dir() / 'benchmarks'}" in message


def test_data_list_keeps_the_unavailable_note_on_its_own_line(setup, capsys):
    ddir, src = setup
    assert add(ddir, src) == 0
    capsys.readouterr()
    assert cli.main(["--data-dir", str(ddir), "data", "list"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert "unavailable subsets are skipped by every command; `guarddiag data pull` " \
           "fetches them" in lines
    assert lines[lines.index("user: 1 of 1 subsets available, 30 of 30 prompts") + 1] \
        .startswith(("derived", "unavailable subsets are skipped"))
    assert "unavailable" not in captured.err


# ── status lines go through logging: shown by the CLI on stderr, silenced by --quiet ─────────


def test_status_lines_are_log_records_on_stderr_and_quiet_silences_them(setup, capsys, caplog):
    ddir, _ = setup
    # 12 prompts, fewer than the policy-or-capability test needs (20): the CLI says so on
    # stderr, never on stdout (which other tools parse).
    src = write_csv(ddir.parent / "team" / "small.csv", red_team_rows(12))
    assert add(ddir, src, subset_id="loud") == 0
    captured = capsys.readouterr()
    assert "loud has" in captured.err
    assert "it will call it undetermined" in captured.err
    assert "undetermined" not in captured.out
    notes = [r for r in caplog.records if r.name == "guarddiag.cli.data"]
    assert notes
    assert all(r.levelname == "INFO" for r in notes)

    assert cli.main(["--quiet", "--data-dir", str(ddir), "data", "add", str(src), "--id", "hush",
                     "--text-column", "prompt", "--kind", "harmful"]) == 0
    captured = capsys.readouterr()
    assert "undetermined" not in captured.err
    assert "manifest:" in captured.out
