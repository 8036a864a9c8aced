"""Pool recipes as data: sources, title lists, wrappers, constructions and splits.

A recipe (``data_manifests/pools/default.yaml``) names the sources, how many rows each gives,
the title lists and jailbreak wrappers for synthetic rows, the splits and the seed. It points at
two policy files and the keyword pillar tagger (:mod:`guarddiag.pool.spec`). :func:`load_recipe`
validates all of them together through :mod:`guarddiag.spec` and reports every problem at once,
one line each naming the file and the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from guarddiag.paths import manifests_dir
from guarddiag.pool.sources import READERS, FileRef, SourceSpec
from guarddiag.pool.spec import (
    SPLITS,
    SYNTHETIC_COMPOUND,
    SYNTHETIC_COPYRIGHT,
    SYNTHETIC_JAILBREAK,
    SYNTHETIC_SOURCES,
    PillarTagger,
    Policy,
    compile_pattern,
    load_pillar_tagger,
    load_policy,
)
from guarddiag.spec import Problems, load_yaml_mapping
from guarddiag.typed import Check, SpecModel, check_keys, read_values


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
    contrast_n: int
    """Benign + benign rows joined by the same join phrases (both policies allow them)."""


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
    multilingual_train_overlap: float = 0.0
    """Share of the non-English val rows whose copies also enter the train split (study: 69.3%
    of its multilingual val rows sat in policy-A training files); 0 = no copies."""

class RecipeFields(SpecModel):
    """Top-level keys of a recipe; each section is read by its own function below."""

    seed: Annotated[int, Check("int", minimum=0)]
    policies: Any
    pillar_keywords: Any
    sources: Any
    splits: Any
    name: Any = None
    description: Any = None
    titles: Any = None
    wrappers: Any = None
    constructions: Any = None
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
    message = Check("int" if integer else "number", minimum=lo, maximum=hi).problem(value)
    if message is not None:
        problems.add(f'{where} field "{key}"', message)
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
    parts: dict[str, Any] = {}
    for name, parse in (("copyright", _parse_copyright), ("compound", _parse_compound),
                        ("jailbreak", _parse_jailbreak)):
        if name not in doc:
            parts[name] = None
        elif isinstance(doc[name], Mapping):
            parts[name] = parse(doc[name], f"{where}.{name}", sources=sources, titles=titles,
                                has_wrappers=has_wrappers, problems=problems)
        else:
            problems.add(f"{where}.{name}", "expected a mapping")
            parts[name] = None
    return parts["copyright"], parts["compound"], parts["jailbreak"]


def _parse_copyright(c: Mapping[str, Any], w: str, *, sources: Mapping[str, Any],
                     titles: Mapping[str, TitleList], has_wrappers: bool,
                     problems: Problems) -> CopyrightSpec:
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
    return CopyrightSpec(templates=templates, counts=counts, kinds=kinds,
                         exclude_titles_from=excl)


def _parse_compound(c: Mapping[str, Any], w: str, *, sources: Mapping[str, Any],
                    titles: Mapping[str, TitleList], has_wrappers: bool,
                    problems: Problems) -> CompoundSpec:
    check_keys(c, required=("n", "benign_from", "blocked_from", "joins"),
               optional=("a_only_share", "max_benign_chars", "max_blocked_chars",
                         "wrapper_share", "contrast_n", "note"), where=w, problems=problems)
    joins = _str_tuple(c.get("joins"), f'{w} field "joins"', problems)
    for j in joins:
        if "{benign}" not in j or "{blocked}" not in j:
            problems.add(f'{w} field "joins"', f"join needs {{benign}} and {{blocked}}: {j!r}")
    wrapper_share = _num(c, "wrapper_share", w, problems, default=0.0, hi=1.0)
    if wrapper_share > 0 and not has_wrappers:
        problems.add(f'{w} field "wrapper_share"', "needs a wrappers section")
    return CompoundSpec(
        n=int(_num(c, "n", w, problems, integer=True)),
        benign_from=_source_list(c, "benign_from", w, sources, problems),
        blocked_from=_source_list(c, "blocked_from", w, sources, problems),
        a_only_share=_num(c, "a_only_share", w, problems, default=0.0, hi=1.0),
        max_benign_chars=int(_num(c, "max_benign_chars", w, problems, default=300, lo=1,
                                  integer=True)),
        max_blocked_chars=int(_num(c, "max_blocked_chars", w, problems, default=300, lo=1,
                                   integer=True)),
        wrapper_share=wrapper_share, joins=joins,
        contrast_n=int(_num(c, "contrast_n", w, problems, default=0, integer=True)))


def _parse_jailbreak(c: Mapping[str, Any], w: str, *, sources: Mapping[str, Any],
                     titles: Mapping[str, TitleList], has_wrappers: bool,
                     problems: Problems) -> JailbreakSpec:
    check_keys(c, required=("n", "benign_from"), optional=("max_benign_chars", "note"),
               where=w, problems=problems)
    if not has_wrappers:
        problems.add(w, "needs a wrappers section")
    return JailbreakSpec(
        n=int(_num(c, "n", w, problems, integer=True)),
        benign_from=_source_list(c, "benign_from", w, sources, problems),
        max_benign_chars=int(_num(c, "max_benign_chars", w, problems, default=300, lo=1,
                                  integer=True)))


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
    seed = read_values(RecipeFields, doc, where=where, problems=problems).get("seed", 0)
    policies, tagger = _read_policies(doc, where, problems)
    raw_sources = doc.get("sources", {})
    sources = _read_sources(raw_sources, where, problems)
    titles = _read_title_lists(doc.get("titles", {}) or {}, where, problems)
    wrappers = None
    if doc.get("wrappers") is not None:
        wrappers = _parse_wrappers(doc["wrappers"], f'{where} field "wrappers"', problems)
    # Sources that failed to parse were still declared: cross-checks use the declared ids so
    # one bad source does not cascade into "unknown source" everywhere.
    declared = {str(k): None for k in raw_sources} if isinstance(raw_sources, Mapping) else {}
    copyright_spec, compound, jailbreak = _parse_constructions(
        doc.get("constructions"), f'{where} field "constructions"', declared, titles,
        wrappers is not None, problems)
    val, cal, cal_dis, overlap = _read_splits(doc.get("splits", {}), f'{where} field "splits"',
                                              problems)
    produced = set(declared) - set(SYNTHETIC_SOURCES)
    if copyright_spec is not None:
        produced.add(SYNTHETIC_COPYRIGHT)
    if jailbreak is not None:
        produced.add(SYNTHETIC_JAILBREAK)
    _check_coverage(policies, produced, copyright_spec, path, problems)
    problems.raise_if_any(f"pool recipe {path}")
    assert tagger is not None
    return Recipe(path=path, name=str(doc.get("name", path.stem)), seed=seed,
                  policies=policies, tagger=tagger, sources=sources, titles=titles,
                  wrappers=wrappers, copyright=copyright_spec, compound=compound,
                  jailbreak=jailbreak, val=val, cal=cal, cal_disagreement=cal_dis,
                  multilingual_train_overlap=overlap)


def _read_policies(doc: Mapping[str, Any], where: str, problems: Problems
                   ) -> tuple[dict[str, Policy], PillarTagger | None]:
    """The two policy files and the pillar tagger, paths relative to data_manifests/."""
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
    return policies, tagger


def _read_sources(raw_sources: Any, where: str, problems: Problems) -> dict[str, PoolSource]:
    sources: dict[str, PoolSource] = {}
    if not isinstance(raw_sources, Mapping) or not raw_sources:
        problems.add(f'{where} field "sources"', "expected a mapping source id → spec")
        return sources
    for sid, sdoc in raw_sources.items():
        if sid in SYNTHETIC_SOURCES:
            problems.add(f'{where} field "sources.{sid}"', "this id is reserved for synthetic "
                                                           "rows")
            continue
        src = _parse_source(str(sid), sdoc, f'{where} field "sources.{sid}"', problems)
        if src is not None:
            sources[str(sid)] = src
    return sources


def _read_title_lists(raw_titles: Any, where: str, problems: Problems
                      ) -> dict[str, TitleList]:
    titles: dict[str, TitleList] = {}
    if not isinstance(raw_titles, Mapping):
        problems.add(f'{where} field "titles"', "expected a mapping list id → spec")
        return titles
    for tid, tdoc in raw_titles.items():
        tl = _parse_titles(str(tid), tdoc, f'{where} field "titles.{tid}"', problems)
        if tl is not None:
            titles[str(tid)] = tl
    return titles


def _parse_wrappers(wdoc: Any, w: str, problems: Problems) -> WrapperSpec | None:
    if not isinstance(wdoc, Mapping):
        problems.add(w, "expected a mapping")
        return None
    check_keys(wdoc, required=("files", "text", "placeholder"),
               optional=("max_chars", "exclude", "require_placeholder", "origin",
                         "licence", "note"), where=w,
               problems=problems)
    files = _file_refs(wdoc.get("files"), f"{w}.files", problems)
    placeholder = compile_pattern(str(wdoc.get("placeholder", "")), f"{w}.placeholder",
                                  problems)
    exclude = (compile_pattern("|".join(f"(?:{p})" for p in wdoc["exclude"])
                               if isinstance(wdoc["exclude"], list) else str(wdoc["exclude"]),
                               f"{w}.exclude", problems) if "exclude" in wdoc else None)
    max_chars = int(_num(wdoc, "max_chars", w, problems, default=1200, lo=50, integer=True))
    if placeholder is None or not files:
        return None
    return WrapperSpec(files=files, text=str(wdoc.get("text", "")), max_chars=max_chars,
                       placeholder=placeholder, exclude=exclude,
                       require_placeholder=bool(wdoc.get("require_placeholder", True)))


def _read_splits(splits: Any, sw: str, problems: Problems
                 ) -> tuple[float, float, float, float]:
    """``val`` and ``cal`` shares, ``cal_disagreement`` (cal's share among rows where the
    policies disagree; defaults to ``cal``) and ``multilingual_train_overlap`` (default 0)."""
    if not isinstance(splits, Mapping):
        problems.add(sw, "expected {val: f, cal: f, cal_disagreement: f}")
        splits = {}
    check_keys(splits, required=("val", "cal"),
               optional=("cal_disagreement", "multilingual_train_overlap"), where=sw,
               problems=problems)
    val = _num(splits, "val", sw, problems, default=0.1, hi=0.5)
    cal = _num(splits, "cal", sw, problems, default=0.1, hi=0.5)
    cal_dis = _num(splits, "cal_disagreement", sw, problems, default=cal, hi=0.8)
    overlap = _num(splits, "multilingual_train_overlap", sw, problems, default=0.0, hi=1.0)
    if val + max(cal, cal_dis) >= 1:
        problems.add(sw, "val + cal must leave rows for train")
    return val, cal, cal_dis, overlap


def _check_coverage(policies: Mapping[str, Policy], produced: set[str],
                    copyright_spec: CopyrightSpec | None, path: Path,
                    problems: Problems) -> None:
    """Policies and recipe must describe the same sources, so no row goes unlabelled and no
    rule silently refers to a source that is never read."""
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
