"""Labelling policies and the keyword pillar tagger as data: loading and whole-file validation.

A pool recipe (:mod:`guarddiag.pool.recipe`) points at two policy files
(``data_manifests/policies/policy_a.yaml``, ``policy_b.yaml``) and the keyword pillar tagger
(``pillar_keywords.yaml``); :func:`load_policy` and :func:`load_pillar_tagger` read them through
:mod:`guarddiag.spec`, adding every problem to the recipe's list so all are reported at once.

Policy files
------------
``rules`` maps a source id to its categories; each category maps to one rule
``{class: HARMFUL, pillars: [fraud]}`` or to a list of rules tried in order, where all but the last
carry a condition: ``match`` (a regex, or the name of one under ``patterns``, searched
case-insensitively in the prompt) or ``ids`` (upstream row ids read and labelled by hand). A
category is looked up exactly, then by its ``/``-separated prefixes (``vcr/*``), then by the first
value of a ``+``-joined multi-value category, then ``*``.
``pillars`` is a list of pillar ids, where ``auto`` adds what the keyword tagger finds.
Pillars are the harms *this policy blocks* in the prompt, so a class that blocks nothing
(GENERIC_SAFE, BOUNDARY_SAFE) carries none: a copyright request is tagged ``copyright`` under
A and carries no pillar under B, which allows it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guarddiag.errors import GuarddiagError
from guarddiag.labels import CLASS_INDEX, CLASSES, pillar_ids
from guarddiag.spec import Problems, load_yaml_mapping
from guarddiag.typed import SpecModel, check_keys, read_values

SPLITS: tuple[str, ...] = ("train", "val", "cal")
UNSAFE = frozenset({"HARMFUL", "COMPOUND"})
BLOCKING = UNSAFE
"""Classes under which a policy blocks the prompt; only these carry pillar tags."""

SYNTHETIC_COPYRIGHT = "synthetic_copyright"
SYNTHETIC_COMPOUND = "synthetic_compound"
SYNTHETIC_JAILBREAK = "synthetic_jailbreak"
SYNTHETIC_SOURCES = (SYNTHETIC_COPYRIGHT, SYNTHETIC_COMPOUND, SYNTHETIC_JAILBREAK)


# ================================================================ policy specs


@dataclass(frozen=True)
class Rule:
    """One class assignment, optionally guarded by a text pattern or a list of row ids."""

    label: str
    pillars: tuple[str, ...]
    """Fixed pillar tags."""
    auto: bool = False
    """Also tag the pillars the keyword tagger finds (``auto`` in the pillar list)."""
    match: re.Pattern[str] | None = None
    ids: frozenset[str] | None = None

    def applies(self, row_id: str, text: str) -> bool:
        if self.ids is not None and row_id not in self.ids:
            return False
        return not (self.match is not None and not self.match.search(text))


@dataclass(frozen=True)
class Policy:
    """A labelling policy: (source, category) → rules, loaded from a policy YAML file."""

    name: str
    path: Path
    title: str
    rules: Mapping[str, Mapping[str, tuple[Rule, ...]]]
    """source id → category pattern (exact, ``prefix/*`` or ``*``) → rules, first match wins."""
    never_blocks: frozenset[str] = frozenset()
    """Pillars this policy allows outright (B: copyright, consensual adult content, personal
    legal/financial advice): no rule may tag them and the keyword tagger's hits are dropped."""

    def rules_for(self, source: str, category: str | None) -> tuple[Rule, ...] | None:
        table = self.rules.get(source)
        if table is None:
            return None
        cat = category or ""
        if cat in table:
            return table[cat]
        parts = cat.split("/")
        for cut in range(len(parts) - 1, 0, -1):
            key = "/".join(parts[:cut]) + "/*"
            if key in table:
                return table[key]
        if "+" in cat:
            # A multi-valued category (Do-Not-Answer intents "S002med+C006") falls back to its
            # first value, the source's primary label.
            first = cat.split("+", 1)[0]
            if first in table:
                return table[first]
        return table.get("*")


@dataclass(frozen=True)
class PillarTagger:
    """Keyword pillar tagger: a pillar is tagged when any of its patterns occurs in the text."""

    path: Path
    patterns: Mapping[str, re.Pattern[str]]

    def tag(self, text: str) -> tuple[str, ...]:
        return tuple(pid for pid, pat in self.patterns.items() if pat.search(text))


class PolicyFields(SpecModel):
    """Top-level keys of a policy file (``patterns``, ``never_blocks`` and ``rules`` are read by
    hand below: each entry is checked against the pillars and patterns)."""

    policy: Any
    rules: Any
    title: Any = ""
    description: Any = None
    patterns: Any = None
    never_blocks: Any = None
_RULE_KEYS = {"class", "pillars", "match", "ids", "note"}


def compile_pattern(pattern: str, where: str, problems: Problems) -> re.Pattern[str] | None:
    """``pattern`` compiled case-insensitively, or None with the problem recorded."""
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        problems.add(where, f"invalid regular expression ({exc})")
        return None


def _parse_rule(doc: Any, *, where: str, patterns: Mapping[str, re.Pattern[str]],
                known_pillars: frozenset[str], problems: Problems) -> Rule | None:
    if not isinstance(doc, Mapping):
        problems.add(where, f"expected a rule mapping like {{class: HARMFUL, pillars: [fraud]}}, "
                            f"got {type(doc).__name__}")
        return None
    check_keys(doc, required=("class",), optional=_RULE_KEYS - {"class"}, where=where,
               problems=problems)
    label = doc.get("class")
    ok = "class" in doc  # a missing class is reported by check_keys already
    if ok and label not in CLASS_INDEX:
        problems.add(f'{where} field "class"',
                     f"{label!r} is not one of {', '.join(CLASSES)}")
        ok = False
    raw = doc.get("pillars", [])
    if raw == "auto":
        raw = ["auto"]
    pillars: tuple[str, ...] = ()
    auto = False
    if isinstance(raw, list) and all(isinstance(p, str) for p in raw):
        auto = "auto" in raw
        pillars = tuple(p for p in raw if p != "auto")
        for tag in pillars:
            if tag not in known_pillars:
                problems.add(f'{where} field "pillars"',
                             f"unknown pillar {tag!r} (see data_manifests/policies/pillars.yaml)")
                ok = False
    else:
        problems.add(f'{where} field "pillars"',
                     "expected a list of pillar ids (with 'auto' for the keyword tagger)")
        ok = False
    if ok and label not in BLOCKING and (auto or pillars):
        problems.add(f'{where} field "pillars"',
                     f"class {label} blocks nothing, so it carries no pillars (pillars are the "
                     "harms a policy blocks)")
        ok = False
    match = None
    if "match" in doc:
        raw_match = doc["match"]
        if not isinstance(raw_match, str) or not raw_match:
            problems.add(f'{where} field "match"', "expected a pattern name or a regex")
            ok = False
        else:
            match = patterns.get(raw_match) or compile_pattern(raw_match, f'{where} field "match"',
                                                        problems)
            ok = ok and match is not None
    ids = None
    if "ids" in doc:
        raw_ids = doc["ids"]
        if not isinstance(raw_ids, list) or not raw_ids:
            problems.add(f'{where} field "ids"', "expected a non-empty list of row ids")
            ok = False
        else:
            ids = frozenset(str(i) for i in raw_ids)
    if not ok:
        return None
    return Rule(label=str(label), pillars=pillars, auto=auto, match=match, ids=ids)

def load_policy(path: str | Path, *, problems: Problems | None = None,
                expect_name: str | None = None) -> Policy | None:
    """Parse and validate one policy file; problems go to ``problems`` (raised if not given)."""
    own = problems is None
    problems = Problems() if problems is None else problems
    path = Path(path)
    try:
        doc = load_yaml_mapping(path)
    except GuarddiagError as exc:
        problems.add(str(path), str(exc).removeprefix(f"{path}: "))
        if own:
            problems.raise_if_any(str(path))
        return None
    values = read_values(PolicyFields, doc, where=str(path), problems=problems)
    name = str(doc.get("policy", ""))
    if expect_name is not None and name != expect_name:
        problems.add(f'{path} field "policy"', f"expected {expect_name!r}, found {name!r}")
    patterns = _read_patterns(doc.get("patterns", {}) or {}, path, problems)
    never = _read_never_blocks(doc.get("never_blocks", []) or [], path, problems)
    rules = _read_rules(doc.get("rules", {}), path, patterns, never, problems)
    if own:
        problems.raise_if_any(str(path))
    # With problems collected for the caller, still return what parsed, so the caller's
    # cross-checks (unknown sources, unlabelled sources) report in the same pass.
    return Policy(name=name, path=path, title=str(values.get("title", "")), rules=rules,
                  never_blocks=frozenset(never))


def _read_patterns(raw: Any, path: Path, problems: Problems) -> dict[str, re.Pattern[str]]:
    """Named regexes (or lists of them) that rules refer to by name in ``match``."""
    patterns: dict[str, re.Pattern[str]] = {}
    if not isinstance(raw, Mapping):
        problems.add(f'{path} field "patterns"', "expected a mapping name → regex")
        return patterns
    for pname, pat in raw.items():
        where = f'{path} field "patterns.{pname}"'
        if isinstance(pat, list):
            pat = "|".join(f"(?:{p})" for p in pat)
        if not isinstance(pat, str):
            problems.add(where, "expected a regex or a list of regexes")
            continue
        compiled = compile_pattern(pat, where, problems)
        if compiled is not None:
            patterns[str(pname)] = compiled
    return patterns


def _read_never_blocks(raw: Any, path: Path, problems: Problems) -> set[str]:
    known = frozenset(pillar_ids())
    never: set[str] = set()
    if not isinstance(raw, list):
        problems.add(f'{path} field "never_blocks"', "expected a list of pillar ids")
        return never
    for tag in raw:
        if tag not in known:
            problems.add(f'{path} field "never_blocks"',
                         f"unknown pillar {tag!r} (see data_manifests/policies/pillars.yaml)")
        else:
            never.add(tag)
    return never


def _read_rules(raw: Any, path: Path, patterns: Mapping[str, re.Pattern[str]],
                never: set[str], problems: Problems
                ) -> dict[str, dict[str, tuple[Rule, ...]]]:
    rules: dict[str, dict[str, tuple[Rule, ...]]] = {}
    if not isinstance(raw, Mapping):
        problems.add(f'{path} field "rules"', "expected a mapping source → category → rule")
        return rules
    for source, table in raw.items():
        if not isinstance(table, Mapping):
            problems.add(f'{path} field "rules.{source}"',
                         "expected a mapping category → rule")
            continue
        rules[str(source)] = {
            str(category): _read_category(body, f'{path} field "rules.{source}.{category}"',
                                          patterns, never, problems)
            for category, body in table.items()}
    return rules


def _read_category(body: Any, where: str, patterns: Mapping[str, re.Pattern[str]],
                   never: set[str], problems: Problems) -> tuple[Rule, ...]:
    """One category's rule, or its list of rules tried in order (the last one unconditional)."""
    known = frozenset(pillar_ids())
    items = body if isinstance(body, list) else [body]
    out = []
    for k, item in enumerate(items):
        rule = _parse_rule(item, where=where if len(items) == 1 else f"{where}[{k}]",
                           patterns=patterns, known_pillars=known, problems=problems)
        if rule is not None:
            clash = sorted(set(rule.pillars) & never)
            if clash:
                problems.add(f'{where} field "pillars"',
                             f"{', '.join(clash)} is listed under never_blocks: this "
                             "policy does not block it")
            out.append(rule)
    if out and (out[-1].match is not None or out[-1].ids is not None):
        problems.add(where, "the last rule of a list must have no match/ids condition "
                            "(it is the category's default)")
    return tuple(out)


def load_pillar_tagger(path: str | Path, *, problems: Problems | None = None
                       ) -> PillarTagger | None:
    """Parse ``pillar_keywords.yaml``: ``pillars: {pillar_id: [regex, …]}``."""
    own = problems is None
    problems = Problems() if problems is None else problems
    path = Path(path)
    try:
        doc = load_yaml_mapping(path)
    except GuarddiagError as exc:
        problems.add(str(path), str(exc).removeprefix(f"{path}: "))
        doc = None
    out: dict[str, re.Pattern[str]] = {}
    if doc is not None:
        check_keys(doc, required=("pillars",), optional=("description",), where=str(path),
                   problems=problems)
        table = doc.get("pillars", {})
        if not isinstance(table, Mapping):
            problems.add(f'{path} field "pillars"', "expected a mapping pillar id → [regex, …]")
            table = {}
        known = set(pillar_ids())
        for pid in pillar_ids():  # head order, whatever the file's order
            if pid not in table:
                continue
            pats = table[pid]
            where = f'{path} field "pillars.{pid}"'
            if not isinstance(pats, list) or not all(isinstance(p, str) for p in pats):
                problems.add(where, "expected a list of regexes")
                continue
            compiled = compile_pattern("|".join(f"(?:{p})" for p in pats), where, problems)
            if compiled is not None:
                out[pid] = compiled
        for pid in table:
            if pid not in known:
                problems.add(f'{path} field "pillars.{pid}"',
                             "unknown pillar (see data_manifests/policies/pillars.yaml)")
    if own:
        problems.raise_if_any(str(path))
    return PillarTagger(path=path, patterns=out)
