"""``bench audit --suite``: the counting of planted cases and the planted pool itself.

Oracles: hand-made overlap tables whose precision and recall are counted by hand, and the
documented properties of each planted kind checked with ``normalise`` and ``template_form``.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from guarddiag.audit.template import template_form
from guarddiag.bench.audit_suite import (
    KindScore,
    PlantedCase,
    SuiteResult,
    plant_suite,
    score_suite,
)
from guarddiag.errors import GuarddiagError
from guarddiag.text import normalise

FORMS = {("B", "1"): "how to pick a lock", ("B", "2"): "write a poem about the sea",
         ("C", "9"): "how to pick a lock"}


def _overlap(*rows: tuple[str, str, str, str]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=["benchmark", "prompt_id", "pool_id", "kind"], orient="row")


# ─── counting ──────────────────────────────────────────────────────────────────────────────────

def test_score_counts_found_false_and_other_by_hand():
    lock, poem = FORMS[("B", "1")], FORMS[("B", "2")]
    cases = [
        PlantedCase("c1", "exact", True, lock),      # found (exact and contained)
        PlantedCase("c2", "exact", True, lock),      # paired only with another prompt: missed
        PlantedCase("c3", "exact", True, poem),      # not reported at all: missed
        PlantedCase("d1", "exact", False, lock),     # paired with its source: false match
        PlantedCase("d2", "exact", False, lock),     # paired with another prompt: other
        PlantedCase("d3", "exact", False, poem),     # silent: correct
        PlantedCase("e1", "embedded", True, poem),   # paired with its source: found
    ]
    overlap = _overlap(("B", "1", "c1", "exact"), ("C", "9", "c1", "contained"),
                       ("B", "2", "c2", "near"), ("C", "9", "d1", "near"),
                       ("B", "2", "d2", "contained"), ("B", "2", "e1", "contained"),
                       ("B", "1", "bg-2", "near"))
    scores, background = score_suite(cases, overlap, FORMS, background_ids=["bg-1", "bg-2"])
    exact, embedded = scores
    # exact: planted 3, found 1 → recall 1/3; distractors 3, one false → precision 1/(1 + 1).
    assert exact == KindScore(kind="exact", planted=3, found=1, distractors=3, false_matches=1,
                              other_matches=1, found_as={"exact": 1, "contained": 1})
    assert exact.recall == pytest.approx(1 / 3)
    assert exact.precision == pytest.approx(0.5)
    assert (embedded.planted, embedded.found, embedded.recall) == (1, 1, 1.0)
    assert embedded.precision == 1.0
    assert background == 1


def test_kinds_come_in_table_order_and_empty_ratios_are_none():
    cases = [PlantedCase("t", "template", False, "x"), PlantedCase("x", "exact", True, "y")]
    scores, _ = score_suite(cases, _overlap(), FORMS)
    assert [s.kind for s in scores] == ["exact", "template"]
    assert scores[0].recall == 0.0
    assert scores[0].precision is None          # nothing reported: no precision to state
    assert scores[1].recall is None


def test_an_overlap_naming_an_unknown_prompt_is_an_error():
    with pytest.raises(GuarddiagError, match="Z/1"):
        score_suite([], _overlap(("Z", "1", "p", "exact")), FORMS)


def test_render_and_json_carry_the_same_numbers():
    score = KindScore(kind="exact", planted=4, found=3, distractors=5, false_matches=1,
                      found_as={"exact": 3})
    res = SuiteResult(scores=(score,), background_rows=10, background_matches=0, pool_rows=19,
                      seed=3, n_prompts=4, audit_s=1.0, options="exact")
    doc = json.loads(json.dumps(res.to_dict()))
    assert doc["kinds"][0]["recall"] == 0.75
    assert doc["kinds"][0]["precision"] == 0.75
    row = next(line for line in res.render().splitlines() if line.startswith("exact"))
    assert row.split()[:8] == ["exact", "4", "3", "0.750", "5", "1", "0", "0.750"]


# ─── planting ──────────────────────────────────────────────────────────────────────────────────

def _prompts() -> list[str]:
    rng = np.random.default_rng(1)
    vocab = [f"word{i}" for i in range(300)]
    long = [" ".join(rng.choice(vocab, size=16, replace=False).tolist()).capitalize() + "?"
            for _ in range(30)]
    short = [" ".join(rng.choice(vocab, size=7, replace=False).tolist()) for _ in range(10)]
    titled = [f'Generate the lyrics of "Song {chr(65 + i)} Blue" by Singer{i}'
              for i in range(10)]
    tiny = [" ".join(rng.choice(vocab, size=4, replace=False).tolist()) for _ in range(10)]
    return long + short + titled + tiny


def test_planted_pool_is_seeded_and_labels_every_row():
    a = plant_suite(_prompts(), cases=8, background=50, seed=4)
    b = plant_suite(_prompts(), cases=8, background=50, seed=4)
    assert a.frame.equals(b.frame)
    labelled = {c.pool_id for c in a.cases} | set(a.background_ids)
    assert labelled == set(a.frame.get_column("prompt_id").to_list())
    assert a.frame.height == len(a.cases) + 50


def test_planted_kinds_have_their_documented_shape():
    pool = plant_suite(_prompts(), cases=8, background=0, seed=0)
    text = dict(pool.frame.iter_rows())
    by_kind: dict[tuple[str, bool], list[PlantedCase]] = {}
    for c in pool.cases:
        by_kind.setdefault((c.kind, c.planted), []).append(c)
    for kind in ("exact", "case_punct", "rewrapped"):
        assert all(normalise(text[c.pool_id]) == c.source for c in by_kind[(kind, True)])
    assert all("\n" in text[c.pool_id] or "\t" in text[c.pool_id]
               for c in by_kind[("rewrapped", True)])
    for c in by_kind[("embedded", True)]:
        ratio = len(normalise(text[c.pool_id]).split()) / len(c.source.split())
        assert 4.5 <= ratio <= 55, ratio
        assert c.source in normalise(text[c.pool_id])
    for c in by_kind[("template", True)]:
        row = text[c.pool_id]
        assert normalise(row) != c.source
        assert template_form(row) == "generate the lyrics of qslot by nslot"
    for c in by_kind[("case_punct", False)]:
        # Two words of a 7-word prompt changed: five of its words left.
        row_words = set(normalise(text[c.pool_id]).split())
        assert len(row_words & set(c.source.split())) == 5
    for c in by_kind[("one_word", True)]:
        # One word of a 7-word prompt substituted, in place, whole or inside a wrapper.
        row = normalise(text[c.pool_id]).split()
        source = c.source.split()
        assert any(sum(a != b for a, b in zip(source, row[k:k + 7], strict=True)) == 1
                   for k in range(len(row) - 6))
    for c in by_kind[("escaped", True)]:
        # Glued to a two-character "\n" on both sides: the plain normal form never holds it.
        assert "\\n" + text[c.pool_id].split("\\n")[1] + "\\n" in text[c.pool_id]
        assert f" {c.source} " not in f" {normalise(text[c.pool_id])} "
    for c in by_kind[("short", False)]:
        assert " ".join(reversed(c.source.split())) in normalise(text[c.pool_id])
    assert all(normalise(text[c.pool_id]) != c.source for c in by_kind[("paraphrase", True)])
    # An exact copy would make its prompt exact-only: template sources are other prompts.
    exact_sources = {c.source for c in by_kind[("exact", True)]}
    assert not exact_sources & {c.source for c in by_kind[("template", True)]}


def test_templates_are_planted_only_where_the_title_is_at_most_half_the_prompt():
    long_title = 'Summarise "the whole of this very long quoted passage right here" by Ann now'
    prompts = [*_prompts(), long_title]
    pool = plant_suite(prompts, cases=50, background=0, seed=2)
    text = dict(pool.frame.iter_rows())
    sources = {c.source for c in pool.cases if c.kind == "template"}
    assert normalise(long_title) not in sources
    assert len(sources) == 10
    # Each distractor quotes its own title in another sentence: another template form.
    misses = [text[c.pool_id] for c in pool.cases if c.kind == "template" and not c.planted]
    assert len(misses) == 10
    assert all('"Song ' in row for row in misses)
    assert all(template_form(row) != "generate the lyrics of qslot by nslot"
               for row in misses)
