"""Pool spec edges (guarddiag.pool.spec, guarddiag.pool.recipe): a rule, a rule table or a
keyword list that fails to parse is reported and left out (never half-used); a bad number falls
back to its default so one mistake does not cascade; optional sections really are optional;
the split shares must leave rows for training.

Each case writes a small policy or recipe under tmp_path and checks the problems reported and
what was parsed, against values read off the YAML by hand.
"""

from __future__ import annotations

import shutil

import pytest
from test_pool import KEYWORDS, POLICY_A, POLICY_B, RECIPE

from guarddiag.errors import GuarddiagError
from guarddiag.paths import manifests_dir
from guarddiag.pool.recipe import load_recipe
from guarddiag.pool.spec import load_pillar_tagger, load_policy
from guarddiag.spec import Problems, SpecError

# ─── policy files ──────────────────────────────────────────────────────────────────────────────

def _policy(tmp_path, text: str):
    path = tmp_path / "policy.yaml"
    path.write_text(text, encoding="utf-8")
    problems = Problems()
    return load_policy(path, problems=problems), problems.items


def test_rules_that_fail_to_parse_are_left_out(tmp_path):
    policy, problems = _policy(tmp_path, "policy: A\nrules:\n"
                               "  src:\n    bad: {class: UNSAFE}\n"
                               "    empty_ids: {class: HARMFUL, ids: []}\n"
                               "    good: {class: GENERIC_SAFE}\n")
    assert policy.rules["src"]["bad"] == ()
    assert policy.rules["src"]["empty_ids"] == ()
    (good,) = policy.rules["src"]["good"]
    assert (good.label, good.pillars) == ("GENERIC_SAFE", ())
    assert len(problems) == 2
    assert "'UNSAFE' is not one of" in problems[0]
    assert 'field "ids": expected a non-empty list of row ids' in problems[1]


def test_a_rules_list_instead_of_a_mapping_gives_an_empty_table(tmp_path):
    policy, problems = _policy(tmp_path, "policy: A\nrules: [1, 2]\n")
    assert policy.rules == {}
    assert policy.rules_for("src", "cat") is None
    assert problems == [f'{tmp_path / "policy.yaml"} field "rules": expected a mapping '
                        "source → category → rule"]


def test_a_keyword_entry_that_is_not_a_list_is_reported_and_not_compiled(tmp_path):
    path = tmp_path / "kw.yaml"
    path.write_text("pillars:\n  violent_crime: '\\bknife\\b'\n  cbrn: ['\\bbomb\\b']\n",
                    encoding="utf-8")
    problems = Problems()
    tagger = load_pillar_tagger(path, problems=problems)
    assert set(tagger.patterns) == {"cbrn"}
    assert tagger.tag("a knife and a bomb") == ("cbrn",)
    assert problems.items == [f'{path} field "pillars.violent_crime": expected a list of '
                              "regexes"]
    with pytest.raises(GuarddiagError, match="expected a list of regexes"):
        load_pillar_tagger(path)


# ─── recipes ───────────────────────────────────────────────────────────────────────────────────

@pytest.fixture
def manifests(tmp_path, monkeypatch):
    """A manifests folder with test_pool's tiny policies and keywords; returns its path."""
    man = tmp_path / "manifests"
    (man / "policies").mkdir(parents=True)
    (man / "pools").mkdir()
    shutil.copy(manifests_dir() / "policies" / "pillars.yaml", man / "policies" / "pillars.yaml")
    (man / "policies" / "policy_a.yaml").write_text(POLICY_A, encoding="utf-8")
    (man / "policies" / "policy_b.yaml").write_text(POLICY_B, encoding="utf-8")
    (man / "policies" / "pillar_keywords.yaml").write_text(KEYWORDS, encoding="utf-8")
    monkeypatch.setenv("GUARDDIAG_MANIFESTS", str(man))
    return man


def _recipe(man, text: str):
    path = man / "pools" / "tiny.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _problems(man, text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_recipe(_recipe(man, text))
    return info.value.problems


def test_the_tiny_recipe_loads(manifests):
    recipe = load_recipe(_recipe(manifests, RECIPE))
    assert (recipe.val, recipe.cal, recipe.cal_disagreement) == (0.2, 0.2, 0.3)
    assert recipe.wrappers is not None


def test_wrappers_are_optional_when_nothing_uses_them(manifests):
    text = RECIPE.split("wrappers:\n")[0] + "constructions:" + RECIPE.split("constructions:")[1]
    text = text.replace("    wrapper_share: 0.5\n", "").split("  jailbreak:")[0]
    for name in ("policy_a.yaml", "policy_b.yaml"):   # no jailbreak rows to label any more
        pol = manifests / "policies" / name
        pol.write_text(pol.read_text(encoding="utf-8").split("  synthetic_jailbreak:")[0],
                       encoding="utf-8")
    recipe = load_recipe(_recipe(manifests, text))
    assert recipe.wrappers is None
    assert recipe.compound.wrapper_share == 0.0
    assert recipe.jailbreak is None


def test_a_compound_wrapper_share_needs_a_wrappers_section(manifests):
    text = RECIPE.split("wrappers:\n")[0] + "constructions:" + RECIPE.split("constructions:")[1]
    text = text.split("  jailbreak:")[0]
    problems = _problems(manifests, text)
    assert [p for p in problems if 'field "wrapper_share": needs a wrappers section' in p]


@pytest.mark.parametrize(("take", "message"), [
    ("{n: -3}", 'field "n": expected a non-negative count'),
    ("{fraction: 1.5}", 'field "fraction": expected a fraction in [0, 1]'),
    ("{fraction: -0.1}", 'field "fraction": expected a fraction in [0, 1]'),
    ("{n: true}", 'field "n": expected a non-negative count'),
    ("{n: lots}", 'field "n": expected a non-negative count'),
])
def test_a_bad_take_amount_is_reported(manifests, take, message):
    text = RECIPE.replace("    format: csv\n    text: text\n    id: id\n",
                          f"    format: csv\n    text: text\n    id: id\n    take: {take}\n")
    problems = _problems(manifests, text)
    assert len(problems) == 1
    assert 'sources.benign" field "take"' in problems[0]
    assert message in problems[0]


def test_good_take_amounts_load(manifests):
    text = RECIPE.replace("    format: csv\n    text: text\n    id: id\n",
                          "    format: csv\n    text: text\n    id: id\n    take: {fraction: 1}\n")
    recipe = load_recipe(_recipe(manifests, text))
    assert recipe.sources["benign"].take.mode == "fraction"
    assert recipe.sources["benign"].take.value == 1.0


def test_a_bad_number_falls_back_to_its_default_without_follow_on_errors(manifests):
    # val 2.0 breaks its maximum 0.5; falling back to the default 0.1 keeps val + cal below 1,
    # so the one problem is the val field itself. compound n (no default) falls back to 0.
    text = RECIPE.replace("splits: {val: 0.2,", "splits: {val: 2.0,").replace(
        "    n: 6\n", "    n: -1\n")
    problems = _problems(manifests, text)
    assert len(problems) == 2
    assert 'compound field "n": -1 is below the minimum 0' in problems[0]
    assert 'field "splits" field "val"' in problems[1]


@pytest.mark.parametrize(("splits", "bad"), [
    ("{val: 0.5, cal: 0.5}", True),                             # 0.5 + 0.5 = 1: nothing left
    ("{val: 0.3, cal: 0.1, cal_disagreement: 0.7}", True),      # 0.3 + 0.7 = 1
    ("{val: 0.3, cal: 0.1, cal_disagreement: 0.6}", False),     # 0.3 + 0.6 = 0.9
    ("{val: 0.5, cal: 0.4}", False),                            # 0.9
])
def test_val_plus_cal_must_leave_rows_for_train(manifests, splits, bad):
    text = RECIPE.replace("splits: {val: 0.2, cal: 0.2, cal_disagreement: 0.3}",
                          f"splits: {splits}")
    if bad:
        assert _problems(manifests, text) == [
            f'{manifests / "pools" / "tiny.yaml"} field "splits": val + cal must leave rows '
            "for train"]
    else:
        load_recipe(_recipe(manifests, text))


def test_a_pillar_keywords_entry_that_is_not_a_path_is_reported(manifests):
    text = RECIPE.replace("pillar_keywords: policies/pillar_keywords.yaml",
                          "pillar_keywords: [policies/pillar_keywords.yaml]")
    problems = _problems(manifests, text)
    assert problems == [f'{manifests / "pools" / "tiny.yaml"} field "pillar_keywords": '
                        "expected a path under data_manifests/"]
