"""The study protocol (issue 51, item 2): one file declares the study's constants, every module
reads it, a user can point at another one, and no analysis or report module restates them."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from synthetic_runs import frame, rows_for, run_meta

from guarddiag import analyses
from guarddiag.analyses.competence import clear_harm_benchmarks, ranking_pairs
from guarddiag.analyses.options import ReportOptions
from guarddiag.analyses.threshold_free import pairs
from guarddiag.protocol import PROTOCOL_ENV, load_protocol, protocol, protocol_path
from guarddiag.spec import SpecError

ROOT = Path(__file__).resolve().parents[1]
BUILTIN = ROOT / "data_manifests" / "protocol.yaml"
MANIFEST_IDS = frozenset(p.stem for p in (ROOT / "data_manifests" / "benchmarks").glob("*.yaml"))


def _write(tmp_path: Path, **changes: object) -> Path:
    doc = yaml.safe_load(BUILTIN.read_text(encoding="utf-8"))
    doc.update(changes)
    path = tmp_path / "protocol.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


# ── the built-in protocol ─────────────────────────────────────────────────────────────────────

def test_the_builtin_protocol_loads_with_the_studys_constants():
    p = load_protocol(BUILTIN)
    assert (p.cutoff, p.alpha, p.min_prompts, p.equivalence_margin, p.competence_floor,
            p.auroc_margin) == (0.5, 0.05, 20, 0.05, 0.80, 0.05)
    assert p.cutoff_name == "0.5"
    assert len(p.study_benchmarks) == 15
    assert p.rank_benchmark == "harmbench_copyright"
    assert (p.neutral_split, p.neutral_labels) == ("val", ("GENERIC_SAFE", "BOUNDARY_SAFE"))
    # every benchmark id it names has a manifest
    named = {*p.study_benchmarks, *p.policy_content, *p.metric_aliases,
             *(b for pair in p.pairs.values() for b in pair)}
    assert named <= MANIFEST_IDS, named - MANIFEST_IDS


def test_the_two_pair_uses_keep_their_members_from_one_declaration():
    """Before the protocol the gate and the threshold-free table each declared their pairs
    (with different members); both lists are now names into one ``pairs`` mapping."""
    assert ranking_pairs() == (
        ("xstest", "xstest_unsafe", "xstest_safe"),
        ("wildguardtest", "wildguardtest_harmful", "wildguardtest_benign"),
        ("jailbreakbench", "jbb_harmful", "jbb_benign"),
        ("openai_moderation", "openai_moderation_flagged", "openai_moderation_unflagged"))
    assert pairs() == (
        ("xstest", "xstest_unsafe", "xstest_safe"),
        ("jailbreakbench", "jbb_harmful", "jbb_benign"),
        ("wildguardtest", "wildguardtest_harmful", "wildguardtest_benign"),
        ("orbench", "orbench_toxic", "orbench_hard"))


def test_the_manifests_study_flags_come_from_the_protocol():
    from guarddiag import data
    manifests = data.load_manifests(derived_dir=Path("/nonexistent"))
    assert tuple(m for m in manifests if manifests[m].study) == protocol().study_benchmarks


# ── bad protocol files ────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize(("change", "expected"), [
    ({"cutoff": 1.5}, 'field "cutoff": input should be less than 1'),
    ({"cut_off": 0.5}, 'field "cut_off": unknown key'),
    ({"min_prompts": "twenty"}, 'field "min_prompts": input should be a valid integer'),
    ({"competence_pairs": ["xstest", "beavertails"]},
     'field "competence_pairs": expected names of pairs, not beavertails'),
    ({"study_benign": ["xstest_safe"]},
     'field "study_benign": expected study benchmarks (study_benchmarks), not xstest_safe'),
    ({"neutral_labels": ["SAFE"]}, 'field "neutral_labels": expected labels among'),
])
def test_a_bad_protocol_is_one_line_naming_file_and_field(tmp_path, change, expected):
    path = _write(tmp_path, **change)
    with pytest.raises(SpecError) as err:
        load_protocol(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path} field ")
    assert expected in message


def test_a_missing_protocol_file_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv(PROTOCOL_ENV, str(tmp_path / "none.yaml"))
    with pytest.raises(Exception, match=r"none\.yaml: file not found$"):
        protocol()


# ── pointing at another protocol ──────────────────────────────────────────────────────────────

def test_guarddiag_protocol_names_the_file_in_force(tmp_path, monkeypatch):
    monkeypatch.delenv(PROTOCOL_ENV, raising=False)
    assert protocol_path() == BUILTIN
    mine = _write(tmp_path, cutoff=0.7)
    monkeypatch.setenv(PROTOCOL_ENV, str(mine))
    assert protocol_path() == mine
    assert protocol().cutoff == 0.7


def _one_run_scores():
    # P(unsafe) of 5 advbench prompts: 4 reach 0.5, 2 reach 0.7
    rows = rows_for(run_meta("micro", "reference", 42), "advbench",
                    [0.2, 0.55, 0.65, 0.75, 0.9])
    scored = analyses.compute_scores(frame(rows), kinds={"advbench": "harmful"},
                                     n_resamples=10, seed=0)
    return scored.binary(subset="full", mapping="loose").row(0, named=True)


def test_another_cutoff_changes_the_scores_threshold_by_hand(tmp_path, monkeypatch):
    monkeypatch.delenv(PROTOCOL_ENV, raising=False)
    row = _one_run_scores()
    assert (row["threshold"], row["n_positive"], row["score"]) == (0.5, 4, 4 / 5)
    monkeypatch.setenv(PROTOCOL_ENV, str(_write(tmp_path, cutoff=0.7)))
    row = _one_run_scores()
    assert (row["threshold"], row["n_positive"], row["score"]) == (0.7, 2, 2 / 5)
    assert ReportOptions().threshold == 0.7


def test_another_policy_content_benchmark_changes_the_clear_harm_set(tmp_path, monkeypatch):
    monkeypatch.setenv(PROTOCOL_ENV, str(_write(
        tmp_path, policy_content={"advbench": "a policy question in this protocol"})))
    clear = clear_harm_benchmarks()
    assert "advbench" not in clear
    assert "harmbench_copyright" in clear
    assert len(clear) == 11           # 12 harmful study subsets, less the one policy set
    assert ReportOptions().rank_benchmark == "advbench"


# ── no module restates the protocol ───────────────────────────────────────────────────────────

ALLOWED: dict[tuple[str, str], str] = {
    ("analyses/competence.py", "weighted_auroc"):
        "0.5: a tie counts half in the Mann-Whitney AUROC",
    ("analyses/operating.py", "auroc_against"):
        "0.5: a tie counts half in the Mann-Whitney AUROC",
    ("analyses/operating.py", "HALF"):
        "the middle of [0, 1], which edge a degenerate threshold is written from",
    ("analyses/overlap_origin.py", "RECIPE_SHARE"):
        "the share of a benchmark's overlap that marks it set by the recipe, not the cut-off",
}
"""(module under guarddiag/, top-level name holding the literal) → why it is not a protocol
constant."""
CONSTANTS = (0.5, 0.05)


def _docstrings(tree: ast.AST) -> set[int]:
    """Ids of string-statement constants (docstrings, attribute docstrings)."""
    return {id(n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
            and isinstance(n.value.value, str)}


def _top_name(node: ast.stmt) -> str:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name
    targets = node.targets if isinstance(node, ast.Assign) else (
        [node.target] if isinstance(node, ast.AnnAssign) else [])
    return next((t.id for t in targets if isinstance(t, ast.Name)), "")


def _restated(value: object) -> bool:
    if isinstance(value, float):
        return value in CONSTANTS
    if isinstance(value, str):
        return (value in MANIFEST_IDS or value in {format(c, "g") for c in CONSTANTS}
                or value.split(":")[0] in MANIFEST_IDS)
    return False


def _constants() -> Iterator[tuple[str, str, ast.Constant]]:
    """(module under guarddiag/, top-level name, constant) of every literal in analyses/ and
    report/ that is not a docstring."""
    package = ROOT / "guarddiag"
    for path in sorted([*(package / "analyses").rglob("*.py"),
                        *(package / "report").rglob("*.py")]):
        rel = path.relative_to(package).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for top in tree.body:
            name = _top_name(top)
            yield from ((rel, name, node) for node in ast.walk(top)
                        if isinstance(node, ast.Constant) and id(node) not in docs)


def protocol_literals() -> list[str]:
    """``path:line: value (in name)`` of every literal in analyses/ and report/ that restates
    a benchmark id, the cut-off or α, outside :data:`ALLOWED`."""
    return [f"{rel}:{node.lineno}: {node.value!r} (in {name or '?'})"
            for rel, name, node in _constants()
            if _restated(node.value) and (rel, name) not in ALLOWED]


CUTOFF_WORDS = re.compile(r"(?<![\d.])0\.5(?!\d)")
"""The cut-off quoted inside a sentence or a column heading ("at 0.5", "P(unsafe) ≥ 0.5")."""
WORDS_ALLOWED: dict[tuple[str, str], str] = {
    ("analyses/competence.py", "weighted_auroc"):
        "0.5: a tie counts half in the Mann-Whitney AUROC",
    ("report/sections/threshold_free.py", "section_threshold_free"):
        "'not 0.5': the AUROC of a guard ranking at random, which AUPRC's chance level is not",
}
"""Texts that say 0.5 and do not mean the cut-off, with the reason (besides :data:`ALLOWED`)."""


def cutoff_words() -> list[str]:
    """``path:line: text`` of every report or analysis text that writes the cut-off's value
    instead of reading it from the protocol, so that another protocol file would leave it
    saying 0.5."""
    return [f"{rel}:{node.lineno}: {node.value[:60]!r}" for rel, name, node in _constants()
            if isinstance(node.value, str) and CUTOFF_WORDS.search(node.value)
            and (rel, name) not in ALLOWED and (rel, name) not in WORDS_ALLOWED]


def test_no_report_text_quotes_the_cutoff():
    assert cutoff_words() == []


def test_another_cutoff_changes_the_reports_words(tmp_path, monkeypatch):
    """The glossary, the call words and the neutral rows' note read the protocol's cut-off;
    the default protocol's words are the pinned ones (tests/test_example_report.py)."""
    from guarddiag.analyses.operating import neutral_note
    from guarddiag.report.glossary import glossary
    from guarddiag.report.sections.first_screen import call_columns

    monkeypatch.delenv(PROTOCOL_ENV, raising=False)
    assert "differ at 0.5 but not" in dict(glossary())["threshold shift"]
    monkeypatch.setenv(PROTOCOL_ENV, str(_write(tmp_path, cutoff=0.7)))
    terms = dict(glossary())
    assert "differ at 0.7 but not" in terms["threshold shift"]
    assert "false-flag rate at 0.7 on the policy-neutral rows" in terms["matched threshold"]
    assert not any("{cut}" in meaning for meaning in terms.values())
    assert neutral_note().endswith("false-flag rate at 0.7 there")
    assert [c.header for c in call_columns() if c.key == "effect_05"] == ["A − B at 0.7 (pp)"]


def test_no_analysis_or_report_module_restates_the_protocol():
    assert protocol_literals() == []


def test_the_scan_finds_a_restated_cutoff_and_benchmark_id():
    tree = ast.parse('THRESHOLD = 0.5\nBENCH = "harmbench_copyright:lyrics"\n"""xstest_safe"""')
    docs = _docstrings(tree)
    hits = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and id(n) not in docs and _restated(n.value)]
    assert hits == [0.5, "harmbench_copyright:lyrics"]


def test_every_allowed_entry_is_still_needed():
    """An allow-list entry whose literal went away must go too (none may hide a new one)."""
    package = ROOT / "guarddiag"
    for rel, name in ALLOWED:
        tree = ast.parse((package / rel).read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        top = next((t for t in tree.body if _top_name(t) == name), None)
        assert top is not None, f"{rel}: no top-level {name}"
        assert any(isinstance(n, ast.Constant) and id(n) not in docs and _restated(n.value)
                   for n in ast.walk(top)), f"{rel}:{name} holds no protocol literal now"


def test_the_words_scan_finds_a_quoted_cutoff_and_only_that():
    texts = ("beyond it at 0.5 only", "P(unsafe) ≥ 0.5 sits beside it", "0.55", "10.5",
             "effect_05", "at 0.50")
    assert [bool(CUTOFF_WORDS.search(t)) for t in texts] == [True, True, False, False, False,
                                                            False]
