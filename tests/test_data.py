"""Benchmark manifests, verified loading, bad-input errors, derived subsets and ``data pull``.

Expected counts are the published ones (SPEC §5, SOURCES.md); expected texts and ids are
re-derived here from the raw files with the standard library, never taken from guarddiag.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import http.server
import io
import json
import shutil
import socket
import threading
import zipfile
from pathlib import Path

import polars as pl
import pytest
import yaml

from guarddiag import cli, data, paths
from guarddiag.errors import GuarddiagError
from guarddiag.protocol import protocol
from guarddiag.spec import SpecError

REPO_MANIFESTS = paths.manifests_dir()

# SPEC §5 counts, typed from the table; extras from SOURCES.md.
STUDY_COUNTS = {
    "harmbench_standard": 200, "harmbench_contextual": 100, "harmbench_copyright": 100,
    "advbench": 520 + 574, "jbb_harmful": 100, "jbb_benign": 100, "strongreject": 313,
    "donotanswer": 939, "wildguardtest_harmful": 754, "wildguardtest_benign": 945,
    "saladbench_base": 21_318, "saladbench_attack": 5_000, "saladbench_defense": 200,
    "orbench_toxic": 655, "orbench_hard": 1_319,
}
EXTRA_COUNTS = {
    "xstest_safe": 250, "xstest_unsafe": 200, "sorrybench": 450, "harmfulqa": 1_960,
    "catqa_en": 550, "maliciousinstruct": 100, "openai_moderation_flagged": 522,
    "openai_moderation_unflagged": 1_680 - 522,
}
HARMFUL = {"harmbench_standard", "harmbench_contextual", "harmbench_copyright", "advbench",
           "jbb_harmful", "strongreject", "donotanswer", "wildguardtest_harmful",
           "saladbench_base", "saladbench_attack", "saladbench_defense", "orbench_toxic",
           "xstest_unsafe", "sorrybench", "harmfulqa", "catqa_en", "maliciousinstruct",
           "openai_moderation_flagged"}


def sha(data_bytes: bytes) -> str:
    return hashlib.sha256(data_bytes).hexdigest()


# ── the real manifests and the mirrored data ──────────────────────────────────────────────────


def test_repo_manifests_validate_and_cover_every_subset():
    manifests = data.load_manifests(derived_dir=Path("/nonexistent"))
    assert set(manifests) == set(STUDY_COUNTS) | set(EXTRA_COUNTS)
    assert [m for m in manifests if manifests[m].study] == list(protocol().study_benchmarks)
    for sid, m in manifests.items():
        assert m.expected_count == {**STUDY_COUNTS, **EXTRA_COUNTS}[sid]
        assert m.kind == ("harmful" if sid in HARMFUL else "benign")
        assert m.licence
        assert m.source_kind
        assert all(f.urls for f in m.files), sid
    assert sum(STUDY_COUNTS.values()) == 33_137  # SPEC §5 total
    assert data.resolve_ids("study", manifests) == list(protocol().study_benchmarks)
    assert data.resolve_ids("advbench, study", manifests) == list(protocol().study_benchmarks)
    assert data.resolve_ids(["xstest_safe", "advbench"], manifests) == ["advbench",
                                                                         "xstest_safe"]


@pytest.mark.realdata
def test_real_data_status_matches_spec(real_data_dir):
    statuses = {s.id: s for s in data.subset_status(data_dir=real_data_dir, ids="all",
                                                    derived_dir=Path("/nonexistent"))}
    for sid, n in {**STUDY_COUNTS, **EXTRA_COUNTS}.items():
        if sid in ("saladbench_base", "saladbench_attack"):
            assert statuses[sid].status == "unavailable"
            assert "OpenSafetyLab/Salad-Data" in statuses[sid].source
            assert statuses[sid].found is None
        else:
            assert statuses[sid].status == "available", statuses[sid].message
            assert statuses[sid].found == n
            assert statuses[sid].checksum_verified
    assert sum(s.status == "available" and s.study for s in statuses.values()) == 13


@pytest.mark.realdata
def test_real_data_records_match_raw_files(real_data_dir):
    bench = real_data_dir / "benchmarks"
    loaded = data.load_benchmarks("all", data_dir=real_data_dir, derived_dir=Path("/none"))
    assert [u.id for u in loaded.unavailable] == ["saladbench_base", "saladbench_attack"]
    for sid, frame in loaded.frames.items():
        assert frame.columns == list(data.FRAME_SCHEMA)
        assert frame["prompt_id"].n_unique() == frame.height
        assert frame["text"].str.strip_chars().str.len_chars().min() > 0
        assert set(frame["label_kind"]) == {"harmful" if sid in HARMFUL else "benign"}
    # HarmBench contextual = behaviour + blank line + context, keyed by BehaviorID.
    with open(bench / "harmbench/harmbench_behaviors_text_all.csv", encoding="utf-8",
              newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["FunctionalCategory"] == "contextual"]
    ctx = dict(zip(loaded.frames["harmbench_contextual"]["prompt_id"],
                   loaded.frames["harmbench_contextual"]["text"], strict=True))
    assert len(ctx) == len(rows) == 100
    for r in rows:
        assert ctx[r["BehaviorID"]] == r["Behavior"] + "\n\n" + r["ContextString"]
    # AdvBench: behaviours then strings, row-numbered per file.
    adv = loaded.frames["advbench"]
    with open(bench / "advbench/harmful_strings.csv", encoding="utf-8", newline="") as fh:
        strings = [r["target"] for r in csv.DictReader(fh)]
    assert adv.filter(pl.col("prompt_id") == "strings-574")["text"].item() == strings[-1]
    assert adv["prompt_id"][0] == "behaviors-1"
    # OpenAI moderation: flagged = any label 1 (missing keys are "not labelled").
    with gzip.open(bench / "openai_moderation/samples-1680.jsonl.gz", "rt",
                   encoding="utf-8") as fh:
        lines = [json.loads(x) for x in fh]
    flagged = [str(i) for i, r in enumerate(lines, 1)
               if any(r.get(k) == 1 for k in ("S", "H", "V", "HR", "SH", "S3", "H2", "V2"))]
    assert loaded.frames["openai_moderation_flagged"]["prompt_id"].to_list() == flagged
    # WildGuardTest keeps the parquet row number, so the 26 unlabelled rows leave gaps.
    wg = pl.read_parquet(bench / "wildguardtest/wildguardtest.parquet")
    harmful_rows = [str(i + 1) for i, lab in enumerate(wg["prompt_harm_label"])
                    if lab == "harmful"]
    assert loaded.frames["wildguardtest_harmful"]["prompt_id"].to_list() == harmful_rows
    # Subset digest: one file → its sha256; AdvBench → sha256 of the two digests.
    assert loaded.sha256["strongreject"] == (
        "4dd70357e4ff8b5d0ba5ebafecab5d6dd5633ce8046e3dd1c8bd93e64de44381")
    assert loaded.sha256["advbench"] == sha(
        b"6cd1a5c63c07610d7eb67307772ee5606017ee950b5770ab288a2c487489d3e1\n"
        b"2c4751403195634f88eb849d923670cb2d9a883bcc3d74456bf2f08141424a15")


@pytest.mark.realdata
def test_cli_data_list_real(real_data_dir, capsys):
    assert cli.main(["--data-dir", str(real_data_dir), "data", "list"]) == 0
    out = capsys.readouterr().out
    assert "study: 13 of 15 subsets available, 6,819 of 33,137 prompts" in out
    salad = [ln for ln in out.splitlines() if ln.startswith("saladbench_base ")]
    assert "unavailable" in salad[0]
    assert "OpenSafetyLab/Salad-Data" in salad[0]
    assert cli.main(["--data-dir", str(real_data_dir), "data", "list", "--ids", "study",
                     "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert {r["id"]: r["found"] for r in records}["advbench"] == 1094


# ── a toy data set written by the tests ───────────────────────────────────────────────────────

TOY_CSV = b"id,goal,cat\na1,Do the first thing,x\na2,Do the second thing,y\na3,Do a third,x\n"


def write_manifest(folder: Path, doc: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{doc['id']}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def toy_doc(**over) -> dict:
    doc = {
        "id": "toy", "title": "Toy", "kind": "harmful", "study": False,
        "source_kind": "upstream", "licence": "MIT",
        "files": [{"path": "benchmarks/toy/toy.csv", "format": "csv", "sha256": sha(TOY_CSV),
                   "rows": 3, "urls": ["http://127.0.0.1:9/toy.csv"]}],
        "text_fields": ["goal"], "id_field": "id", "category_field": "cat",
        "expected_count": 3,
    }
    doc.update(over)
    return doc


@pytest.fixture
def toy(tmp_path):
    """A manifests folder with one subset and a data folder holding its file."""
    mdir, ddir = tmp_path / "manifests" / "benchmarks", tmp_path / "data"
    write_manifest(mdir, toy_doc())
    (ddir / "benchmarks/toy").mkdir(parents=True)
    (ddir / "benchmarks/toy/toy.csv").write_bytes(TOY_CSV)
    return mdir, ddir


def load(mdir: Path, ddir: Path, sid: str = "toy") -> pl.DataFrame:
    return data.load_benchmark(sid, data_dir=ddir, manifests_dir=mdir,
                               derived_dir=mdir.parent / "none")


def error_of(mdir: Path, ddir: Path, sid: str = "toy") -> str:
    with pytest.raises(GuarddiagError) as info:
        load(mdir, ddir, sid)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_toy_loads(toy):
    mdir, ddir = toy
    frame = load(mdir, ddir)
    assert frame.to_dicts() == [
        {"benchmark": "toy", "prompt_id": "a1", "text": "Do the first thing",
         "label_kind": "harmful", "category": "x"},
        {"benchmark": "toy", "prompt_id": "a2", "text": "Do the second thing",
         "label_kind": "harmful", "category": "y"},
        {"benchmark": "toy", "prompt_id": "a3", "text": "Do a third", "label_kind": "harmful",
         "category": "x"},
    ]


def test_missing_file_is_unavailable_not_a_crash(toy):
    mdir, ddir = toy
    (ddir / "benchmarks/toy/toy.csv").unlink()
    msg = error_of(mdir, ddir)
    assert "toy.csv" in msg
    assert "file not found" in msg
    assert "data pull --ids toy" in msg
    loaded = data.load_benchmarks("all", data_dir=ddir, manifests_dir=mdir,
                                  derived_dir=mdir.parent / "none")
    assert loaded.frames == {}
    assert [u.status for u in loaded.unavailable] == ["unavailable"]
    assert "http://127.0.0.1:9/toy.csv" in loaded.unavailable[0].source


def test_checksum_mismatch(toy):
    mdir, ddir = toy
    (ddir / "benchmarks/toy/toy.csv").write_bytes(TOY_CSV.replace(b"third", b"THIRD"))
    msg = error_of(mdir, ddir)
    assert "toy.csv" in msg
    assert "checksum mismatch" in msg
    assert sha(TOY_CSV)[:12] in msg
    # An invalid subset stops load_benchmarks: its numbers would be silently wrong.
    with pytest.raises(GuarddiagError, match="checksum mismatch"):
        data.load_benchmarks("all", data_dir=ddir, manifests_dir=mdir,
                             derived_dir=mdir.parent / "none")
    status = data.subset_status(data_dir=ddir, manifests_dir=mdir,
                                derived_dir=mdir.parent / "none")
    assert status[0].status == "invalid"


def test_wrong_file_row_count(toy):
    mdir, ddir = toy
    write_manifest(mdir, toy_doc(files=[{**toy_doc()["files"][0], "rows": 4}]))
    msg = error_of(mdir, ddir)
    assert "toy.csv: 3 data rows" in msg
    assert "expects 4" in msg


def test_wrong_expected_count(toy):
    mdir, ddir = toy
    write_manifest(mdir, toy_doc(expected_count=2))
    msg = error_of(mdir, ddir)
    assert "3 prompts in toy" in msg
    assert "expects 2" in msg


def test_missing_text_column(toy):
    mdir, ddir = toy
    write_manifest(mdir, toy_doc(text_fields=["prompt"]))
    msg = error_of(mdir, ddir)
    assert 'toy.csv: missing column "prompt"' in msg
    assert "found: id, goal, cat" in msg


def rewrite(mdir: Path, ddir: Path, content: bytes) -> None:
    """Replace the toy file and pin its new digest, so only the content check can fail."""
    (ddir / "benchmarks/toy/toy.csv").write_bytes(content)
    write_manifest(mdir, toy_doc(files=[{**toy_doc()["files"][0], "sha256": sha(content)}]))


def test_empty_text(toy):
    mdir, ddir = toy
    rewrite(mdir, ddir, b"id,goal,cat\na1,Do it,x\na2,   ,y\na3,Do a third,x\n")
    assert error_of(mdir, ddir).endswith(
        'toy.csv row 2 field "goal": empty text (every prompt needs non-empty text)')


def test_non_utf8_bytes(toy):
    mdir, ddir = toy
    rewrite(mdir, ddir, b"id,goal,cat\na1,Do it,x\na2,Caf\xe9 cr\xe8me,y\na3,Do a third,x\n")
    msg = error_of(mdir, ddir)
    assert "toy.csv line 3: not UTF-8 text" in msg


def test_duplicate_ids(toy):
    mdir, ddir = toy
    rewrite(mdir, ddir, b"id,goal,cat\na1,Do it,x\na2,Do that,y\na1,Do a third,x\n")
    msg = error_of(mdir, ddir)
    assert 'toy.csv row 3 field "id": duplicate id \'a1\'' in msg
    assert "row 1" in msg


def test_unknown_benchmark_id(toy):
    mdir, ddir = toy
    msg = error_of(mdir, ddir, "tyo")
    assert "unknown benchmark 'tyo'" in msg
    assert "toy" in msg
    manifests = data.load_manifests(manifests_dir=mdir, derived_dir=mdir.parent / "none")
    with pytest.raises(GuarddiagError, match="unknown benchmark 'harmbench'"):
        data.resolve_ids("study,harmbench", manifests)


def test_malformed_manifests_reported_all_at_once(toy):
    mdir, _ = toy
    write_manifest(mdir, toy_doc(id="bad_key", colour="red"))
    write_manifest(mdir, toy_doc(id="bad_kind", kind="harmfull"))
    (mdir / "bad_yaml.yaml").write_text("id: bad_yaml\nkind: [harmful\n", encoding="utf-8")
    write_manifest(mdir, toy_doc(id="Stem_Mismatch")).rename(mdir / "other.yaml")
    broken = toy_doc(id="missing_bits")
    del broken["expected_count"]
    broken["files"][0]["sha256"] = "abc"
    write_manifest(mdir, broken)
    with pytest.raises(SpecError) as info:
        data.load_manifests(manifests_dir=mdir, derived_dir=mdir.parent / "none")
    problems = info.value.problems
    assert len(problems) == 6, problems
    text = "\n".join(problems)
    assert 'bad_key.yaml field "colour": unknown key' in text
    assert "bad_kind.yaml field \"kind\": expected harmful or benign, got 'harmfull'" in text
    assert "bad_yaml.yaml line 3: malformed YAML" in text
    assert 'other.yaml field "id"' in text
    assert 'missing_bits.yaml field "expected_count": missing required key' in text
    assert 'missing_bits.yaml files[0] field "sha256": expected 64 lower-case hex' in text


def test_study_flag_must_match_spec(toy):
    mdir, _ = toy
    write_manifest(mdir, toy_doc(study=True))
    with pytest.raises(SpecError, match="must be false for 'toy'"):
        data.load_manifests(manifests_dir=mdir, derived_dir=mdir.parent / "none")


@pytest.mark.parametrize(("change", "expected"), [
    (lambda t: t.replace("kind: harmful", "kind: toxic", 1),
     "field \"kind\": expected harmful or benign, got 'toxic'"),
    (lambda t: t + "expected_cuont: 313\n",
     'field "expected_cuont": unknown key (did you mean expected_count?)'),
    (lambda t: t.replace("kind: harmful", "kind: [harmful", 1), "malformed YAML"),
])
def test_cli_reports_broken_copy_of_real_manifests(tmp_path, monkeypatch, capsys, change,
                                                   expected):
    copy = tmp_path / "data_manifests"
    shutil.copytree(REPO_MANIFESTS / "benchmarks", copy / "benchmarks")
    target = copy / "benchmarks" / "strongreject.yaml"
    target.write_text(change(target.read_text(encoding="utf-8")), encoding="utf-8")
    monkeypatch.setenv("GUARDDIAG_MANIFESTS", str(copy))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["--data-dir", str(tmp_path), "data", "list"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("guarddiag: error: ")
    assert "\n" not in err
    assert "strongreject.yaml" in err
    assert expected in err


# ── formats and filters, each with a hand-made file ───────────────────────────────────────────


def test_formats_filters_and_multi_file(tmp_path):
    mdir, ddir = tmp_path / "m", tmp_path / "d"
    b = ddir / "benchmarks"
    b.mkdir(parents=True)
    files = {
        "a.csv": b"goal\nfirst behaviour\nsecond behaviour\n",
        "b.csv": b"target\nonly string\n",
        "lines.txt": b"one\r\ntwo\nthree",
        "tree.json": json.dumps({"T1": {"s1": ["q1", "q2"]}, "T2": {"s2": ["q3"]}}).encode(),
        "mod.jsonl.gz": gzip.compress(b'{"prompt": "p1", "A": 0, "B": 1}\n'
                                      b'{"prompt": "p2", "A": 0}\n'
                                      b'{"prompt": "p3", "A": 1, "B": 1}\n'
                                      b'{"prompt": "p4"}\n'),
        "recs.json": json.dumps([{"qid": 7, "q": "x", "c": "k", "lab": "keep"},
                                 {"qid": 9, "q": "y", "c": "k", "lab": None},
                                 {"qid": 11, "q": "z", "c": None, "lab": "drop"}]).encode(),
    }
    for name, content in files.items():
        (b / name).write_bytes(content)

    def entry(name, fmt, rows, **extra):
        return {"path": f"benchmarks/{name}", "format": fmt, "sha256": sha(files[name]),
                "rows": rows, **extra}

    base = {"title": "t", "kind": "harmful", "study": False, "source_kind": "upstream",
            "licence": "MIT"}
    write_manifest(mdir, {**base, "id": "multi", "text_fields": ["goal"], "expected_count": 3,
                          "files": [entry("a.csv", "csv", 2, id_prefix="b-"),
                                    entry("b.csv", "csv", 1, id_prefix="s-",
                                          text_fields=["target"])]})
    write_manifest(mdir, {**base, "id": "lines", "text_fields": ["text"], "expected_count": 3,
                          "files": [entry("lines.txt", "lines", 3)]})
    write_manifest(mdir, {**base, "id": "tree", "text_fields": ["text"], "expected_count": 3,
                          "category_field": "topic",
                          "files": [entry("tree.json", "json_tree", 3,
                                          tree_levels=["topic", "sub"])]})
    for sid, flagged, n in (("flagged", True, 2), ("unflagged", False, 2)):
        write_manifest(mdir, {**base, "id": sid, "text_fields": ["prompt"], "expected_count": n,
                              "flags": ["A", "B"], "flagged": flagged,
                              "files": [entry("mod.jsonl.gz", "jsonl.gz", 4)]})
    write_manifest(mdir, {**base, "id": "recs", "text_fields": ["q"], "expected_count": 1,
                          "id_field": "qid", "category_field": "c", "filter_field": "lab",
                          "filter_values": ["keep"], "files": [entry("recs.json", "json", 3)]})
    got = data.load_benchmarks("all", data_dir=ddir, manifests_dir=mdir,
                               derived_dir=tmp_path / "none").frames

    def rows(sid):
        return got[sid].select("prompt_id", "text", "category").rows()

    assert rows("multi") == [("b-1", "first behaviour", None), ("b-2", "second behaviour", None),
                             ("s-1", "only string", None)]
    assert rows("lines") == [("1", "one", None), ("2", "two", None), ("3", "three", None)]
    assert rows("tree") == [("1", "q1", "T1"), ("2", "q2", "T1"), ("3", "q3", "T2")]
    assert rows("flagged") == [("1", "p1", "B"), ("3", "p3", "A,B")]
    assert rows("unflagged") == [("2", "p2", None), ("4", "p4", None)]
    assert rows("recs") == [("7", "x", "k")]


# ── derived subsets ───────────────────────────────────────────────────────────────────────────


def test_derived_subset_roundtrip_and_tamper(toy):
    mdir, ddir = toy
    derived = mdir.parent / "derived"
    frame = pl.DataFrame({"prompt_id": ["a1~leet", "a2~leet"], "text": ["D0 1t", "D0 th4t"],
                          "base_prompt_id": ["a1", "a2"], "mutation": ["leet", "leet"],
                          "category": ["x", None]})
    manifest_path = data.write_derived_subset(frame, subset_id="toy_leet", derived_from="toy",
                                              mutation="leet", kind="harmful",
                                              derived_dir=derived)
    manifests = data.load_manifests(manifests_dir=mdir, derived_dir=derived)
    assert list(manifests) == ["toy", "toy_leet"]
    assert manifests["toy_leet"].derived
    assert data.resolve_ids("all", manifests) == ["toy"]
    assert data.resolve_ids("derived", manifests) == ["toy_leet"]
    got = data.load_benchmark("toy_leet", data_dir=ddir, manifests_dir=mdir,
                              derived_dir=derived)
    assert got.columns == [*data.FRAME_SCHEMA, "base_prompt_id", "mutation"]
    assert got.select("prompt_id", "text", "base_prompt_id", "category").rows() == [
        ("a1~leet", "D0 1t", "a1", "x"), ("a2~leet", "D0 th4t", "a2", None)]
    both = data.load_benchmarks("all,derived", data_dir=ddir, manifests_dir=mdir,
                                derived_dir=derived)
    assert both.to_frame().height == 5
    # Tampering with the parquet is caught by the pinned sha256.
    pl.DataFrame({c: ["z"] for c in data.DERIVED_COLUMNS}).write_parquet(
        derived / "toy_leet.parquet")
    with pytest.raises(GuarddiagError, match="checksum mismatch"):
        data.load_benchmark("toy_leet", data_dir=ddir, manifests_dir=mdir, derived_dir=derived)
    # A derived manifest must name a known base subset.
    doc = yaml.safe_load(manifest_path.read_text(encoding="utf-8"))
    write_manifest(derived, {**doc, "derived_from": "nope"})
    with pytest.raises(SpecError, match='field "derived_from": unknown base subset'):
        data.load_manifests(manifests_dir=mdir, derived_dir=derived)


# ── data pull against a local HTTP server ─────────────────────────────────────────────────────


class _Handler(http.server.BaseHTTPRequestHandler):
    """Serves files from ``root`` with HTTP range support; records each request."""

    root: Path
    log: list[tuple[str, str | None]]
    cut_once: set[str]
    """Paths whose next response promises the whole file but stops halfway."""

    def do_GET(self):
        self.log.append((self.path, self.headers.get("Range")))
        path = self.root / self.path.lstrip("/")
        if not path.is_file():
            self.send_error(404)
            return
        body = path.read_bytes()
        if self.path in self.cut_once:
            self.cut_once.discard(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            start = int(rng[len("bytes="):].split("-")[0])
            if start >= len(body):
                self.send_response(416)
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        self.wfile.write(body[start:])

    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    handler = type("H", (_Handler,), {"root": root, "log": [], "cut_once": set()})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}", handler.log, handler.cut_once
    httpd.shutdown()
    httpd.server_close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pull_manifests(mdir: Path, url: str) -> None:
    """good (pinned), bad (served bytes differ), gone (404), unpinned (sha256 null), zipped."""
    good = toy_doc(id="good", files=[{"path": "benchmarks/good.csv", "format": "csv",
                                      "sha256": sha(TOY_CSV), "rows": 3,
                                      "urls": [f"{url}/up/good.csv"]}])
    bad = toy_doc(id="bad", files=[{"path": "benchmarks/bad.csv", "format": "csv",
                                    "sha256": sha(TOY_CSV), "rows": 3,
                                    "urls": [f"{url}/up/bad.csv"]}])
    gone = toy_doc(id="gone", files=[{"path": "benchmarks/gone.csv", "format": "csv",
                                      "sha256": sha(TOY_CSV), "rows": 3,
                                      "urls": [f"{url}/up/missing.csv"]}])
    unpinned = toy_doc(id="unpinned", files=[{"path": "benchmarks/unpinned.csv",
                                              "format": "csv", "sha256": None, "rows": 3,
                                              "urls": [f"{url}/up/good.csv"]}])
    for doc in (good, bad, gone, unpinned):
        write_manifest(mdir, doc)


def test_pull_downloads_verifies_and_reports_failures(tmp_path, server):
    root, url, _, _ = server
    (root / "up").mkdir()
    (root / "up/good.csv").write_bytes(TOY_CSV)
    (root / "up/bad.csv").write_bytes(TOY_CSV + b"a4,tampered,z\n")
    mdir, ddir = tmp_path / "m", tmp_path / "d"
    pull_manifests(mdir, url)
    result = data.pull(ids="all", data_dir=ddir, manifests_dir=mdir, timeout=10)
    by_path = {f.path: f for f in result.files}
    assert by_path["benchmarks/good.csv"].status == "downloaded"
    assert by_path["benchmarks/good.csv"].verified
    assert (ddir / "benchmarks/good.csv").read_bytes() == TOY_CSV
    assert by_path["benchmarks/bad.csv"].status == "failed"
    assert "checksum mismatch" in by_path["benchmarks/bad.csv"].message
    assert not (ddir / "benchmarks/bad.csv").exists()
    assert not (ddir / "benchmarks/bad.csv.part").exists()
    assert "HTTP 404" in by_path["benchmarks/gone.csv"].message
    unpinned = by_path["benchmarks/unpinned.csv"]
    assert unpinned.status == "downloaded"
    assert not unpinned.verified
    assert unpinned.sha256 == sha(TOY_CSV)
    assert "verified 3 rows" in unpinned.message
    # Pulled subsets now load; a second pull leaves present files alone.
    assert load(mdir, ddir, "good").height == 3
    again = {f.path: f.status for f in data.pull(ids="good,unpinned", data_dir=ddir,
                                                 manifests_dir=mdir).files}
    assert again == {"benchmarks/good.csv": "present", "benchmarks/unpinned.csv": "present"}


def test_pull_unpinned_wrong_count_is_discarded(tmp_path, server):
    root, url, _, _ = server
    (root / "up").mkdir()
    (root / "up/good.csv").write_bytes(TOY_CSV + b"a4,one more,z\n")
    mdir, ddir = tmp_path / "m", tmp_path / "d"
    pull_manifests(mdir, url)
    (result,) = data.pull(ids="unpinned", data_dir=ddir, manifests_dir=mdir).files
    assert result.status == "failed"
    assert "4 data rows" in result.message
    assert not (ddir / "benchmarks/unpinned.csv").exists()


def test_pull_resumes_a_partial_download(tmp_path, server):
    root, url, log, _cut_once = server
    (root / "up").mkdir()
    (root / "up/good.csv").write_bytes(TOY_CSV)
    mdir, ddir = tmp_path / "m", tmp_path / "d"
    pull_manifests(mdir, url)
    (ddir / "benchmarks").mkdir(parents=True)
    (ddir / "benchmarks/good.csv.part").write_bytes(TOY_CSV[:20])
    (result,) = data.pull(ids="good", data_dir=ddir, manifests_dir=mdir).files
    assert result.status == "downloaded"
    assert result.verified
    assert log == [("/up/good.csv", "bytes=20-")]
    assert (ddir / "benchmarks/good.csv").read_bytes() == TOY_CSV
    assert not (ddir / "benchmarks/good.csv.part").exists()


def test_pull_interrupted_download_is_kept_and_resumed(tmp_path, server):
    root, url, log, cut_once = server
    (root / "up").mkdir()
    (root / "up/good.csv").write_bytes(TOY_CSV)
    cut_once.add("/up/good.csv")
    mdir, ddir = tmp_path / "m", tmp_path / "d"
    pull_manifests(mdir, url)
    (first,) = data.pull(ids="good", data_dir=ddir, manifests_dir=mdir).files
    assert first.status == "failed"
    assert "run the same command again to resume" in first.message
    assert (ddir / "benchmarks/good.csv.part").read_bytes() == TOY_CSV[: len(TOY_CSV) // 2]
    (second,) = data.pull(ids="good", data_dir=ddir, manifests_dir=mdir).files
    assert second.status == "downloaded"
    assert log[-1] == ("/up/good.csv", f"bytes={len(TOY_CSV) // 2}-")
    assert (ddir / "benchmarks/good.csv").read_bytes() == TOY_CSV


def test_pull_connection_refused_is_one_line(tmp_path):
    mdir, ddir = tmp_path / "m", tmp_path / "d"
    pull_manifests(mdir, f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(GuarddiagError) as info:
        data.pull(ids="good", data_dir=ddir, manifests_dir=mdir, timeout=5)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith("cannot reach the network")
    assert "--mirror" in msg
    assert not (ddir / "benchmarks/good.csv").exists()


def test_pull_from_mirror_env_and_cli(tmp_path, server, monkeypatch, capsys):
    root, url, log, _cut_once = server
    (root / "benchmarks").mkdir()
    (root / "benchmarks/good.csv").write_bytes(TOY_CSV)
    mdir, ddir = tmp_path / "m" / "benchmarks", tmp_path / "d"
    pull_manifests(mdir, "http://127.0.0.1:9")  # the public URLs are never used
    monkeypatch.setenv("GUARDDIAG_MANIFESTS", str(mdir.parent))
    monkeypatch.setenv(data.MIRROR_ENV, url)
    assert cli.main(["data", "pull", "--ids", "good", "--data-dir", str(ddir)]) == 0
    assert log == [("/benchmarks/good.csv", None)]
    assert "1 downloaded, 0 already present, 0 failed" in capsys.readouterr().out
    # A file the mirror lacks fails with exit status 1; the refusing host exits 2, one line.
    assert cli.main(["data", "pull", "--ids", "gone", "--data-dir", str(ddir)]) == 1
    assert "HTTP 404" in capsys.readouterr().out
    assert cli.main(["data", "pull", "--ids", "good", "--data-dir", str(tmp_path / "e"),
                     "--mirror", f"http://127.0.0.1:{closed_port()}"]) == 2
    err = capsys.readouterr().err
    assert "guarddiag: error: cannot reach the network" in err


def test_pull_extracts_an_archive_member(tmp_path, server):
    root, url, _, _ = server
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("pkg/data/toy.csv", TOY_CSV)
        archive.writestr("pkg/other.txt", b"not this")
    (root / "pkg.whl").write_bytes(buf.getvalue())
    mdir, ddir = tmp_path / "m", tmp_path / "d"
    write_manifest(mdir, toy_doc(files=[{
        "path": "benchmarks/toy/toy.csv", "format": "csv", "sha256": sha(TOY_CSV), "rows": 3,
        "urls": [f"{url}/pkg.whl"], "archive_member": "pkg/data/toy.csv",
        "archive_sha256": sha(buf.getvalue())}]))
    (result,) = data.pull(ids="toy", data_dir=ddir, manifests_dir=mdir).files
    assert result.status == "downloaded"
    assert result.verified
    assert load(mdir, ddir).height == 3


def test_pull_refuses_to_overwrite_a_wrong_present_file(toy):
    mdir, ddir = toy
    (ddir / "benchmarks/toy/toy.csv").write_bytes(b"id,goal,cat\nz,zz,z\n")
    (result,) = data.pull(ids="toy", data_dir=ddir, manifests_dir=mdir).files
    assert result.status == "failed"
    assert "move it away" in result.message
    assert (ddir / "benchmarks/toy/toy.csv").read_bytes() == b"id,goal,cat\nz,zz,z\n"
