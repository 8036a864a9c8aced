"""Pool recipes and labelling policies as data: loading and whole-file validation.

A recipe (``data_manifests/pools/default.yaml``) names the sources, how many rows each gives,
the title lists and jailbreak wrappers for synthetic rows, the splits and the seed. It points at
two policy files (``data_manifests/policies/policy_a.yaml``, ``policy_b.yaml``) and the keyword
pillar tagger (``pillar_keywords.yaml``). :func:`load_recipe` validates all of them together and
reports every problem at once, one line each naming the file and the field.

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
from guarddiag.paths import manifests_dir
from guarddiag.pool.sources import READERS, FileRef, SourceSpec
from guarddiag.spec import Problems, check_keys, load_yaml_mapping

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


_POLICY_KEYS = {"policy", "title", "description", "patterns", "never_blocks", "rules"}
_RULE_KEYS = {"class", "pillars", "match", "ids", "note"}


def _compile(pattern: str, where: str, problems: Problems) -> re.Pattern[str] | None:
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
            match = patterns.get(raw_match) or _compile(raw_match, f'{where} field "match"',
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
    return Rule(label=label, pillars=pillars, auto=auto, match=match, ids=ids)


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
    check_keys(doc, required=("policy", "rules"), optional=_POLICY_KEYS, where=str(path),
               problems=problems)
    name = str(doc.get("policy", ""))
    if expect_name is not None and name != expect_name:
        problems.add(f'{path} field "policy"', f"expected {expect_name!r}, found {name!r}")
    patterns: dict[str, re.Pattern[str]] = {}
    raw_patterns = doc.get("patterns", {}) or {}
    if not isinstance(raw_patterns, Mapping):
        problems.add(f'{path} field "patterns"', "expected a mapping name → regex")
        raw_patterns = {}
    for pname, pat in raw_patterns.items():
        where = f'{path} field "patterns.{pname}"'
        if isinstance(pat, list):
            pat = "|".join(f"(?:{p})" for p in pat)
        if not isinstance(pat, str):
            problems.add(where, "expected a regex or a list of regexes")
            continue
        compiled = _compile(pat, where, problems)
        if compiled is not None:
            patterns[str(pname)] = compiled
    known = frozenset(pillar_ids())
    raw_never = doc.get("never_blocks", []) or []
    never: set[str] = set()
    if not isinstance(raw_never, list):
        problems.add(f'{path} field "never_blocks"', "expected a list of pillar ids")
        raw_never = []
    for tag in raw_never:
        if tag not in known:
            problems.add(f'{path} field "never_blocks"',
                         f"unknown pillar {tag!r} (see data_manifests/policies/pillars.yaml)")
        else:
            never.add(tag)
    rules: dict[str, dict[str, tuple[Rule, ...]]] = {}
    raw_rules = doc.get("rules", {})
    if not isinstance(raw_rules, Mapping):
        problems.add(f'{path} field "rules"', "expected a mapping source → category → rule")
        raw_rules = {}
    for source, table in raw_rules.items():
        if not isinstance(table, Mapping):
            problems.add(f'{path} field "rules.{source}"',
                         "expected a mapping category → rule")
            continue
        parsed: dict[str, tuple[Rule, ...]] = {}
        for category, body in table.items():
            where = f'{path} field "rules.{source}.{category}"'
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
            parsed[str(category)] = tuple(out)
        rules[str(source)] = parsed
    if own:
        problems.raise_if_any(str(path))
    # With problems collected for the caller, still return what parsed, so the caller's
    # cross-checks (unknown sources, unlabelled sources) report in the same pass.
    return Policy(name=name, path=path, title=str(doc.get("title", "")), rules=rules,
                  never_blocks=frozenset(never))


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
            compiled = _compile("|".join(f"(?:{p})" for p in pats), where, problems)
            if compiled is not None:
                out[pid] = compiled
        for pid in table:
            if pid not in known:
                problems.add(f'{path} field "pillars.{pid}"',
                             "unknown pillar (see data_manifests/policies/pillars.yaml)")
    if own:
        problems.raise_if_any(str(path))
    return PillarTagger(path=path, patterns=out)


# ================================================================ recipe spec


@dataclass(frozen=True)
class Take:
    """How many rows of a source enter the pool (before de-duplication)."""

    mode: str
    """``all`` | ``n`` (uniform) | ``fraction`` (per (lang, category) stratum) |
    ``per_category`` (at most k per (lang, category) stratum)."""
    value: float = 0.0
    exclude: tuple[str, ...] = ()
    """Categories (exact or ``prefix/*``) left out entirely."""


@dataclass(frozen=True)
class PoolSource:
    spec: SourceSpec
    take: Take
    split: str | None = None
    """Force every row of this source into one split (the multilingual validation rows)."""


@dataclass(frozen=True)
class TitleList:
    id: str
    files: tuple[FileRef, ...]
    kind: str
    """``song`` or ``book``."""
    title: tuple[str, ...]
    """Alternative column names for the title (the first present in a file is used)."""
    author: tuple[str, ...]
    year: tuple[str, ...] = ()
    delimiter: str = ","
    public_domain: bool = False
    """Every title on this list is in the public domain (the Gutenberg catalogue)."""
    min_year: int | None = None
    """Titles published earlier are skipped (their copyright may have expired)."""
    last_first: bool = False
    """Authors are written "Surname, First, dates" (the Gutenberg catalogue)."""


@dataclass(frozen=True)
class WrapperSpec:
    files: tuple[FileRef, ...]
    text: str
    max_chars: int
    placeholder: re.Pattern[str]
    exclude: re.Pattern[str] | None
    require_placeholder: bool = True
    """Use only templates with a slot for the request (most in-the-wild "templates" without one
    already carry a concrete request of their own, often a harmful one)."""


@dataclass(frozen=True)
class CopyrightSpec:
    templates: Mapping[str, tuple[str, ...]]
    """category → templates with ``{title}`` and ``{author}``."""
    counts: Mapping[str, int]
    kinds: Mapping[str, str]
    """category → which titles it draws: ``song``, ``book`` or ``public_domain``."""
    exclude_titles_from: str | None


@dataclass(frozen=True)
class CompoundSpec:
    n: int
    benign_from: tuple[str, ...]
    blocked_from: tuple[str, ...]
    a_only_share: float
    max_benign_chars: int
    max_blocked_chars: int
    wrapper_share: float
    joins: tuple[str, ...]


@dataclass(frozen=True)
class JailbreakSpec:
    n: int
    benign_from: tuple[str, ...]
    max_benign_chars: int


@dataclass(frozen=True)
class Recipe:
    """A validated pool recipe with its two policies and the pillar tagger."""

    path: Path
    name: str
    seed: int
    policies: Mapping[str, Policy]
    tagger: PillarTagger
    sources: Mapping[str, PoolSource]
    titles: Mapping[str, TitleList]
    wrappers: WrapperSpec | None
    copyright: CopyrightSpec | None
    compound: CompoundSpec | None
    jailbreak: JailbreakSpec | None
    val: float
    cal: float
    cal_disagreement: float


_RECIPE_KEYS = {"name", "description", "seed", "policies", "pillar_keywords", "splits",
                "sources", "titles", "wrappers", "constructions"}
_SOURCE_KEYS = {"files", "format", "text", "category", "id", "records", "header", "delimiter",
                "lang", "span", "take", "split", "origin", "licence", "note"}
_TITLE_KEYS = {"files", "kind", "title", "author", "year", "delimiter", "public_domain",
               "min_year", "last_first", "origin", "licence", "note"}


def default_recipe_path() -> Path:
    return manifests_dir() / "pools" / "default.yaml"


def _str_tuple(value: Any, where: str, problems: Problems, *, allow_int: bool = False
               ) -> tuple[Any, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    ok_types = (str, int) if allow_int else (str,)
    for item in items:
        if not isinstance(item, ok_types) or isinstance(item, bool):
            problems.add(where, f"expected a field name or a list of them, got {item!r}")
            return ()
    return tuple(items)


def _file_refs(value: Any, where: str, problems: Problems) -> tuple[FileRef, ...]:
    if not isinstance(value, list) or not value:
        problems.add(where, "expected a non-empty list of {path|glob, sha256}")
        return ()
    out = []
    for i, item in enumerate(value):
        w = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            problems.add(w, "expected {path: …, sha256: …} or {glob: …, sha256: …}")
            continue
        check_keys(item, required=("sha256",), optional=("path", "glob"), where=w,
                   problems=problems)
        if ("path" in item) == ("glob" in item):
            problems.add(w, "give exactly one of path or glob")
            continue
        digest = item.get("sha256")
        if digest is not None and not (isinstance(digest, str)
                                       and re.fullmatch(r"[0-9a-fA-F]{64}", digest)):
            problems.add(f'{w} field "sha256"', "expected 64 hex digits")
            continue
        pattern = str(item.get("path") or item.get("glob"))
        out.append(FileRef(pattern=pattern, sha256=digest, is_glob="glob" in item))
    return tuple(out)


def _parse_take(value: Any, where: str, problems: Problems) -> Take:
    if value is None or value == "all":
        return Take("all")
    if isinstance(value, int) and not isinstance(value, bool):
        return Take("n", float(value))
    if not isinstance(value, Mapping):
        problems.add(where, "expected 'all', a row count, or {n|fraction|per_category: …}")
        return Take("all")
    check_keys(value, required=(), optional=("n", "fraction", "per_category", "exclude"),
               where=where, problems=problems)
    modes = [k for k in ("n", "fraction", "per_category") if k in value]
    exclude = _str_tuple(value.get("exclude"), f'{where} field "exclude"', problems)
    if len(modes) > 1:
        problems.add(where, f"give one of n, fraction, per_category (got {', '.join(modes)})")
        return Take("all")
    if not modes:
        return Take("all", exclude=exclude)
    mode = modes[0]
    amount = value[mode]
    if not isinstance(amount, (int, float)) or isinstance(amount, bool) or amount < 0 or (
            mode == "fraction" and amount > 1):
        problems.add(f'{where} field "{mode}"',
                     "expected a fraction in [0, 1]" if mode == "fraction"
                     else "expected a non-negative count")
        return Take("all")
    return Take(mode, float(amount), exclude)


def _parse_source(sid: str, doc: Any, where: str, problems: Problems) -> PoolSource | None:
    if not isinstance(doc, Mapping):
        problems.add(where, "expected a mapping")
        return None
    n_before = len(problems.items)
    check_keys(doc, required=("files", "format"), optional=_SOURCE_KEYS - {"files", "format"},
               where=where, problems=problems)
    fmt = doc.get("format")
    if fmt not in READERS:
        problems.add(f'{where} field "format"',
                     f"unknown format {fmt!r} (expected one of {', '.join(READERS)})")
    files = _file_refs(doc.get("files"), f'{where} field "files"', problems)
    text = _str_tuple(doc.get("text"), f'{where} field "text"', problems, allow_int=True)
    if fmt in ("csv", "jsonl") and not text:
        problems.add(f'{where} field "text"', f"format {fmt} needs the text field name")
    category = _str_tuple(doc.get("category"), f'{where} field "category"', problems,
                          allow_int=True)
    records = _str_tuple(doc.get("records"), f'{where} field "records"', problems)
    split = doc.get("split")
    if split is not None and split not in SPLITS:
        problems.add(f'{where} field "split"', f"expected one of {', '.join(SPLITS)}")
    span = doc.get("span")
    if span is not None and span not in text:
        problems.add(f'{where} field "span"', "must name one of the text fields")
    lang = doc.get("lang", "en")
    if not (isinstance(lang, str) and re.fullmatch(r"[a-z]{2}", lang)):
        problems.add(f'{where} field "lang"', "expected an ISO 639-1 code such as en")
    take = _parse_take(doc.get("take"), f'{where} field "take"', problems)
    if len(problems.items) > n_before:
        return None
    spec = SourceSpec(
        id=sid, files=files, format=str(fmt), text=text, category=category,
        id_field=doc.get("id"), records=records, header=bool(doc.get("header", True)),
        delimiter=str(doc.get("delimiter", ",")).replace("\\t", "\t"), lang=lang,
        span_field=span)
    return PoolSource(spec=spec, take=take, split=split)


def _parse_titles(tid: str, doc: Any, where: str, problems: Problems) -> TitleList | None:
    if not isinstance(doc, Mapping):
        problems.add(where, "expected a mapping")
        return None
    n_before = len(problems.items)
    check_keys(doc, required=("files", "kind", "title", "author"),
               optional=_TITLE_KEYS - {"files", "kind", "title", "author"}, where=where,
               problems=problems)
    if doc.get("kind") not in ("song", "book"):
        problems.add(f'{where} field "kind"', "expected song or book")
    files = _file_refs(doc.get("files"), f'{where} field "files"', problems)
    title = _str_tuple(doc.get("title"), f'{where} field "title"', problems)
    author = _str_tuple(doc.get("author"), f'{where} field "author"', problems)
    year = _str_tuple(doc.get("year"), f'{where} field "year"', problems)
    min_year = doc.get("min_year")
    if min_year is not None and (not isinstance(min_year, int) or not year):
        problems.add(f'{where} field "min_year"', "expected a year, with a year column given")
    if len(problems.items) > n_before:
        return None
    return TitleList(id=tid, files=files, kind=str(doc["kind"]), title=title, author=author,
                     year=year, delimiter=str(doc.get("delimiter", ",")).replace("\\t", "\t"),
                     public_domain=bool(doc.get("public_domain", False)), min_year=min_year,
                     last_first=bool(doc.get("last_first", False)))


def _num(doc: Mapping[str, Any], key: str, where: str, problems: Problems, *,
         default: float | None = None, lo: float = 0.0, hi: float | None = None,
         integer: bool = False) -> float:
    value = doc.get(key, default)
    bad = (value is None or isinstance(value, bool) or not isinstance(value, (int, float))
           or value < lo or (hi is not None and value > hi)
           or (integer and not isinstance(value, int)))
    if bad:
        rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        kind = "an integer" if integer else "a number"
        problems.add(f'{where} field "{key}"', f"expected {kind} in {rng}, got {value!r}")
        return default if default is not None else lo
    return value


def _source_list(doc: Mapping[str, Any], key: str, where: str, sources: Mapping[str, Any],
                 problems: Problems) -> tuple[str, ...]:
    ids = _str_tuple(doc.get(key), f'{where} field "{key}"', problems)
    if not ids:
        problems.add(f'{where} field "{key}"', "expected a non-empty list of source ids")
    for sid in ids:
        if sid not in sources:
            problems.add(f'{where} field "{key}"', f"unknown source {sid!r}")
    return ids


def _parse_constructions(doc: Any, where: str, sources: Mapping[str, Any],
                         titles: Mapping[str, TitleList], has_wrappers: bool,
                         problems: Problems
                         ) -> tuple[CopyrightSpec | None, CompoundSpec | None,
                                    JailbreakSpec | None]:
    if doc is None:
        return None, None, None
    if not isinstance(doc, Mapping):
        problems.add(where, "expected a mapping")
        return None, None, None
    check_keys(doc, required=(), optional=("copyright", "compound", "jailbreak"), where=where,
               problems=problems)
    copyright_spec = compound = jailbreak = None
    if "copyright" in doc:
        w = f"{where}.copyright"
        c = doc["copyright"]
        if isinstance(c, Mapping):
            check_keys(c, required=("categories",), optional=("exclude_titles_from", "note"),
                       where=w, problems=problems)
            templates: dict[str, tuple[str, ...]] = {}
            counts: dict[str, int] = {}
            kinds: dict[str, str] = {}
            cats = c.get("categories", {})
            if not isinstance(cats, Mapping) or not cats:
                problems.add(f'{w} field "categories"', "expected a mapping category → spec")
                cats = {}
            have_kinds = {t.kind for t in titles.values()} | (
                {"public_domain"} if any(t.public_domain for t in titles.values()) else set())
            for cat, spec in cats.items():
                cw = f"{w}.categories.{cat}"
                if not isinstance(spec, Mapping):
                    problems.add(cw, "expected {titles, n, templates}")
                    continue
                check_keys(spec, required=("titles", "n", "templates"), optional=("note",),
                           where=cw, problems=problems)
                kind = spec.get("titles")
                if kind not in ("song", "book", "public_domain"):
                    problems.add(f'{cw} field "titles"', "expected song, book or public_domain")
                elif kind not in have_kinds:
                    problems.add(f'{cw} field "titles"', f"no title list provides {kind} titles")
                tpls = _str_tuple(spec.get("templates"), f'{cw} field "templates"', problems)
                for t in tpls:
                    if "{title}" not in t:
                        problems.add(f'{cw} field "templates"', f"template lacks {{title}}: {t!r}")
                templates[str(cat)] = tpls
                counts[str(cat)] = int(_num(spec, "n", cw, problems, integer=True))
                kinds[str(cat)] = str(kind)
            excl = c.get("exclude_titles_from")
            if excl is not None and excl not in sources:
                problems.add(f'{w} field "exclude_titles_from"', f"unknown source {excl!r}")
            copyright_spec = CopyrightSpec(templates=templates, counts=counts, kinds=kinds,
                                           exclude_titles_from=excl)
        else:
            problems.add(w, "expected a mapping")
    if "compound" in doc:
        w = f"{where}.compound"
        c = doc["compound"]
        if isinstance(c, Mapping):
            check_keys(c, required=("n", "benign_from", "blocked_from", "joins"),
                       optional=("a_only_share", "max_benign_chars", "max_blocked_chars",
                                 "wrapper_share", "note"), where=w, problems=problems)
            joins = _str_tuple(c.get("joins"), f'{w} field "joins"', problems)
            for j in joins:
                if "{benign}" not in j or "{blocked}" not in j:
                    problems.add(f'{w} field "joins"', f"join needs {{benign}} and {{blocked}}: "
                                                       f"{j!r}")
            wrapper_share = _num(c, "wrapper_share", w, problems, default=0.0, hi=1.0)
            if wrapper_share > 0 and not has_wrappers:
                problems.add(f'{w} field "wrapper_share"', "needs a wrappers section")
            compound = CompoundSpec(
                n=int(_num(c, "n", w, problems, integer=True)),
                benign_from=_source_list(c, "benign_from", w, sources, problems),
                blocked_from=_source_list(c, "blocked_from", w, sources, problems),
                a_only_share=_num(c, "a_only_share", w, problems, default=0.0, hi=1.0),
                max_benign_chars=int(_num(c, "max_benign_chars", w, problems, default=300,
                                          lo=1, integer=True)),
                max_blocked_chars=int(_num(c, "max_blocked_chars", w, problems, default=300,
                                           lo=1, integer=True)),
                wrapper_share=wrapper_share, joins=joins)
        else:
            problems.add(w, "expected a mapping")
    if "jailbreak" in doc:
        w = f"{where}.jailbreak"
        c = doc["jailbreak"]
        if isinstance(c, Mapping):
            check_keys(c, required=("n", "benign_from"), optional=("max_benign_chars", "note"),
                       where=w, problems=problems)
            if not has_wrappers:
                problems.add(w, "needs a wrappers section")
            jailbreak = JailbreakSpec(
                n=int(_num(c, "n", w, problems, integer=True)),
                benign_from=_source_list(c, "benign_from", w, sources, problems),
                max_benign_chars=int(_num(c, "max_benign_chars", w, problems, default=300,
                                          lo=1, integer=True)))
        else:
            problems.add(w, "expected a mapping")
    return copyright_spec, compound, jailbreak


def load_recipe(path: str | Path | None = None) -> Recipe:
    """Load and validate a recipe, its policies and the pillar tagger, every problem at once.

    Checks: unknown or missing keys, formats, class names outside the four, unknown pillars,
    policy rules for sources the recipe does not read, recipe sources no policy maps, and
    synthetic sources the policies leave unlabelled.
    """
    path = Path(path) if path is not None else default_recipe_path()
    problems = Problems()
    doc = load_yaml_mapping(path)
    where = str(path)
    check_keys(doc, required=("seed", "policies", "pillar_keywords", "sources", "splits"),
               optional=_RECIPE_KEYS, where=where, problems=problems)
    seed = doc.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        problems.add(f'{where} field "seed"', "expected a non-negative integer")
        seed = 0
    root = manifests_dir()

    def spec_path(value: Any, field_name: str) -> Path | None:
        if not isinstance(value, str):
            problems.add(f'{where} field "{field_name}"', "expected a path under data_manifests/")
            return None
        return root / value

    policies: dict[str, Policy] = {}
    raw_pol = doc.get("policies", {})
    if not isinstance(raw_pol, Mapping) or set(raw_pol) != {"A", "B"}:
        problems.add(f'{where} field "policies"', "expected {A: <file>, B: <file>}")
        raw_pol = {}
    for name in ("A", "B"):
        p = spec_path(raw_pol.get(name), f"policies.{name}") if name in raw_pol else None
        if p is not None:
            pol = load_policy(p, problems=problems, expect_name=name)
            if pol is not None:
                policies[name] = pol
    tagger_path = spec_path(doc.get("pillar_keywords"), "pillar_keywords")
    tagger = (load_pillar_tagger(tagger_path, problems=problems) if tagger_path is not None
              else None)

    sources: dict[str, PoolSource] = {}
    raw_sources = doc.get("sources", {})
    if not isinstance(raw_sources, Mapping) or not raw_sources:
        problems.add(f'{where} field "sources"', "expected a mapping source id → spec")
        raw_sources = {}
    for sid, sdoc in raw_sources.items():
        if sid in SYNTHETIC_SOURCES:
            problems.add(f'{where} field "sources.{sid}"', "this id is reserved for synthetic "
                                                           "rows")
            continue
        src = _parse_source(str(sid), sdoc, f'{where} field "sources.{sid}"', problems)
        if src is not None:
            sources[str(sid)] = src

    titles: dict[str, TitleList] = {}
    raw_titles = doc.get("titles", {}) or {}
    if not isinstance(raw_titles, Mapping):
        problems.add(f'{where} field "titles"', "expected a mapping list id → spec")
        raw_titles = {}
    for tid, tdoc in raw_titles.items():
        tl = _parse_titles(str(tid), tdoc, f'{where} field "titles.{tid}"', problems)
        if tl is not None:
            titles[str(tid)] = tl

    wrappers = None
    if doc.get("wrappers") is not None:
        w = f'{where} field "wrappers"'
        wdoc = doc["wrappers"]
        if isinstance(wdoc, Mapping):
            check_keys(wdoc, required=("files", "text", "placeholder"),
                       optional=("max_chars", "exclude", "require_placeholder", "origin",
                                 "licence", "note"), where=w,
                       problems=problems)
            files = _file_refs(wdoc.get("files"), f"{w}.files", problems)
            placeholder = _compile(str(wdoc.get("placeholder", "")), f"{w}.placeholder",
                                   problems)
            exclude = (_compile("|".join(f"(?:{p})" for p in wdoc["exclude"])
                                if isinstance(wdoc["exclude"], list) else str(wdoc["exclude"]),
                                f"{w}.exclude", problems) if "exclude" in wdoc else None)
            max_chars = int(_num(wdoc, "max_chars", w, problems, default=1200, lo=50,
                                 integer=True))
            if placeholder is not None and files:
                wrappers = WrapperSpec(files=files, text=str(wdoc.get("text", "")),
                                       max_chars=max_chars, placeholder=placeholder,
                                       exclude=exclude,
                                       require_placeholder=bool(wdoc.get("require_placeholder",
                                                                         True)))
        else:
            problems.add(w, "expected a mapping")

    declared = {str(k): None for k in raw_sources}
    copyright_spec, compound, jailbreak = _parse_constructions(
        doc.get("constructions"), f'{where} field "constructions"', declared, titles,
        wrappers is not None, problems)

    splits = doc.get("splits", {})
    sw = f'{where} field "splits"'
    if not isinstance(splits, Mapping):
        problems.add(sw, "expected {val: f, cal: f, cal_disagreement: f}")
        splits = {}
    check_keys(splits, required=("val", "cal"), optional=("cal_disagreement",), where=sw,
               problems=problems)
    val = _num(splits, "val", sw, problems, default=0.1, hi=0.5)
    cal = _num(splits, "cal", sw, problems, default=0.1, hi=0.5)
    cal_dis = _num(splits, "cal_disagreement", sw, problems, default=cal, hi=0.8)
    if val + max(cal, cal_dis) >= 1:
        problems.add(sw, "val + cal must leave rows for train")

    # Policies and recipe must describe the same sources, so no row goes unlabelled and no rule
    # silently refers to a source that is never read.
    # Sources that failed to parse were still declared: cross-checks use the declared ids so
    # one bad source does not cascade into "unknown source" everywhere.
    produced = {str(k) for k in raw_sources} - set(SYNTHETIC_SOURCES)
    if copyright_spec is not None:
        produced.add(SYNTHETIC_COPYRIGHT)
    if jailbreak is not None:
        produced.add(SYNTHETIC_JAILBREAK)
    for name, pol in policies.items():
        for sid in pol.rules:
            if sid not in produced:
                if sid == SYNTHETIC_COMPOUND:
                    problems.add(f'{pol.path} field "rules.{sid}"',
                                 "COMPOUND rows take their class from the inserted request; "
                                 "they have no rules of their own")
                else:
                    problems.add(f'{pol.path} field "rules.{sid}"',
                                 f"unknown source {sid!r} (not in the recipe {path.name})")
        for sid in sorted(produced - set(pol.rules)):
            problems.add(f"{pol.path}", f"no rules for source {sid!r}; policy {name} must label "
                                        "every source the recipe reads")
    if copyright_spec is not None:
        for name, pol in policies.items():
            for cat in copyright_spec.templates:
                if pol.rules_for(SYNTHETIC_COPYRIGHT, cat) is None:
                    problems.add(f'{pol.path} field "rules.{SYNTHETIC_COPYRIGHT}"',
                                 f"no rule for category {cat!r} (policy {name})")
    problems.raise_if_any(f"pool recipe {path}")
    assert tagger is not None
    return Recipe(path=path, name=str(doc.get("name", path.stem)), seed=seed,
                  policies=policies, tagger=tagger, sources=sources, titles=titles,
                  wrappers=wrappers, copyright=copyright_spec, compound=compound,
                  jailbreak=jailbreak, val=val, cal=cal, cal_disagreement=cal_dis)

