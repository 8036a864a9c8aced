"""The SORRY-Bench taxonomy and the map from every benchmark's own categories onto pillars/domains.

Two manifests under ``data_manifests/taxonomy/``:

* ``sorrybench.yaml`` - the 45 categories of the 2024-06 release, each with its SORRY-Bench
  domain (``hate``, ``crimes``, ``inappropriate``, ``advice``) and its pillars;
* ``category_map.yaml`` - per benchmark subset, its ``category`` values onto pillars and one
  domain.

A prompt's category turns into *weights*: one unit spread equally over the category's pillars
(and over the parts of a multi-code value such as ``"H,V"``), so a benchmark's pillar weights sum
to its number of mapped prompts. Balance and per-domain capture are computed from these weights.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any

import polars as pl

from guarddiag.data import SUBSET_SEPARATOR
from guarddiag.errors import GuarddiagError, unknown_name
from guarddiag.labels import pillar_ids
from guarddiag.paths import manifests_dir
from guarddiag.spec import Problems, load_yaml_mapping
from guarddiag.text import normalise
from guarddiag.typed import Check, SpecModel, check_keys, read_values

DOMAINS: tuple[str, ...] = ("hate", "crimes", "inappropriate", "advice")
"""SORRY-Bench's four domains, in the paper's order."""

SORRY_BENCHMARK = "sorrybench"

class CategoryFields(SpecModel):
    """One category of ``sorrybench.yaml`` (domain and pillars are checked by hand)."""

    number: Annotated[int, Check("int")]
    name: Annotated[str, Check("str")]
    domain: Any
    pillars: Any
    in_44_category_version: Annotated[bool, Check("bool")] = True


@dataclass(frozen=True)
class SorryCategory:
    """One SORRY-Bench category."""

    number: int
    """1-based number in the 2024-06 release (the value of the data's ``category`` column)."""
    name: str
    """Official name."""
    domain: str
    """One of :data:`DOMAINS`."""
    pillars: tuple[str, ...]
    """This project's pillar mapping."""
    in_44_category_version: bool = True
    """False only for "Impersonation" (removed in the 44-category version)."""


@dataclass(frozen=True)
class SorryTaxonomy:
    release: str
    domain_titles: dict[str, str]
    categories: tuple[SorryCategory, ...]

    def category(self, key: str | int) -> SorryCategory:
        """A category by number (``12`` or ``"12"``) or official name (any case/punctuation)."""
        text = str(key).strip()
        if text.isdigit():
            number = int(text)
            for cat in self.categories:
                if cat.number == number:
                    return cat
        wanted = normalise(text)
        for cat in self.categories:
            if normalise(cat.name) == wanted:
                return cat
        raise unknown_name("SORRY-Bench category", text,
                           tuple(str(c.number) for c in self.categories))

    def to_frame(self) -> pl.DataFrame:
        return pl.DataFrame({
            "number": [c.number for c in self.categories],
            "name": [c.name for c in self.categories],
            "domain": [c.domain for c in self.categories],
            "domain_title": [self.domain_titles[c.domain] for c in self.categories],
            "pillars": [list(c.pillars) for c in self.categories],
            "in_44_category_version": [c.in_44_category_version for c in self.categories],
        })


@dataclass(frozen=True)
class CategoryMapping:
    """Where one benchmark category value lands."""

    pillars: tuple[str, ...]
    """Empty: outside the harm taxonomy (e.g. "benign")."""
    domain: str | None


@dataclass(frozen=True)
class PromptWeights:
    """How one prompt's unit weight is spread; both empty when it is unmapped or out of scope."""

    pillars: dict[str, float]
    domains: dict[str, float]
    status: str
    """``mapped`` | ``out_of_taxonomy`` (mapped to no pillar) | ``unmapped`` (value not in the
    map, or null) | ``no_map`` (the benchmark has no category map)."""


@dataclass(frozen=True)
class BenchmarkCategoryMap:
    """The category map of one benchmark subset."""

    benchmark: str
    field: str
    """The upstream column the categories come from (documentation)."""
    separator: str | None
    entries: dict[str, CategoryMapping]
    """Keyed by :func:`guarddiag.text.normalise` of the category value."""

    def lookup(self, value: str | None) -> CategoryMapping | list[CategoryMapping] | None:
        if value is None:
            return None
        parts = [value] if self.separator is None else \
            [p for p in str(value).split(self.separator) if p.strip()]
        found = [self.entries.get(normalise(str(p))) for p in parts]
        if not found or any(f is None for f in found):
            return None
        return found[0] if len(found) == 1 else found  # type: ignore[return-value]

    def weights(self, value: str | None) -> PromptWeights:
        hit = self.lookup(value)
        if hit is None:
            return PromptWeights({}, {}, "unmapped")
        parts = hit if isinstance(hit, list) else [hit]
        parts = [p for p in parts if p.pillars]
        if not parts:
            return PromptWeights({}, {}, "out_of_taxonomy")
        pillars: dict[str, float] = {}
        domains: dict[str, float] = {}
        for part in parts:
            share = 1.0 / len(parts)
            for pillar in part.pillars:
                pillars[pillar] = pillars.get(pillar, 0.0) + share / len(part.pillars)
            if part.domain is not None:
                domains[part.domain] = domains.get(part.domain, 0.0) + share
        return PromptWeights(pillars, domains, "mapped")


def _taxonomy_dir() -> Path:
    return manifests_dir() / "taxonomy"


@cache
def sorry_taxonomy() -> SorryTaxonomy:
    """``data_manifests/taxonomy/sorrybench.yaml``, validated (all problems reported at once)."""
    path = _taxonomy_dir() / "sorrybench.yaml"
    doc = load_yaml_mapping(path)
    problems = Problems()
    check_keys(doc, required={"release", "domains", "categories"}, optional={"source"},
               where=str(path), problems=problems)
    titles: dict[str, str] = {}
    for i, row in enumerate(doc.get("domains") or [], start=1):
        where = f"{path} domains[{i}]"
        check_keys(row, required={"id", "title"}, where=where, problems=problems)
        if isinstance(row, Mapping) and "id" in row:
            if row["id"] not in DOMAINS:
                problems.add(where, f"domain {row['id']!r} is not one of {', '.join(DOMAINS)}")
            titles[str(row["id"])] = str(row.get("title", row["id"]))
    if set(titles) != set(DOMAINS):
        problems.add(str(path), f"domains must list exactly {', '.join(DOMAINS)}")
    known_pillars = set(pillar_ids())
    cats = []
    for i, row in enumerate(doc.get("categories") or [], start=1):
        where = f"{path} categories[{i}]"
        values = read_values(CategoryFields, row, where=where, problems=problems)
        if not {"number", "name", "domain", "pillars"} <= set(values):
            continue
        if values["number"] != i:
            problems.add(where, f"number {values['number']!r}: expected {i} (categories in "
                                "order)")
        if values["domain"] not in DOMAINS:
            problems.add(where, f"domain {values['domain']!r} is not one of "
                                f"{', '.join(DOMAINS)}")
        pillars = values["pillars"] if isinstance(values["pillars"], list) else []
        if not pillars:
            problems.add(where, "pillars: expected a non-empty list of pillar ids")
        for p in pillars:
            if p not in known_pillars:
                problems.add(where, f"unknown pillar {p!r}")
        cats.append(SorryCategory(number=values["number"], name=values["name"],
                                  domain=str(values["domain"]), pillars=tuple(map(str, pillars)),
                                  in_44_category_version=values["in_44_category_version"]))
    problems.raise_if_any(str(path))
    return SorryTaxonomy(release=str(doc["release"]), domain_titles=titles,
                         categories=tuple(cats))


def _sorry_map(taxonomy: SorryTaxonomy) -> BenchmarkCategoryMap:
    entries: dict[str, CategoryMapping] = {}
    for cat in taxonomy.categories:
        mapping = CategoryMapping(cat.pillars, cat.domain)
        entries[normalise(str(cat.number))] = mapping
        entries[normalise(cat.name)] = mapping
    return BenchmarkCategoryMap(SORRY_BENCHMARK, "category", None, entries)


@cache
def category_maps() -> dict[str, BenchmarkCategoryMap]:
    """``data_manifests/taxonomy/category_map.yaml`` plus SORRY-Bench's own map, validated."""
    path = _taxonomy_dir() / "category_map.yaml"
    doc = load_yaml_mapping(path)
    problems = Problems()
    check_keys(doc, required={"benchmarks"}, where=str(path), problems=problems)
    known_pillars = set(pillar_ids())
    out: dict[str, BenchmarkCategoryMap] = {}
    for bench, spec in (doc.get("benchmarks") or {}).items():
        where = f"{path} benchmarks.{bench}"
        check_keys(spec, required={"field", "categories"}, optional={"separator"}, where=where,
                   problems=problems)
        if not isinstance(spec, Mapping) or not isinstance(spec.get("categories"), Mapping):
            continue
        entries: dict[str, CategoryMapping] = {}
        for value, target in spec["categories"].items():
            at = f"{where}.categories[{value!r}]"
            check_keys(target, required={"pillars", "domain"}, where=at, problems=problems)
            if not isinstance(target, Mapping) or not {"pillars", "domain"} <= set(target):
                continue
            pillars = target["pillars"] if isinstance(target["pillars"], list) else None
            if pillars is None:
                problems.add(at, "pillars: expected a list of pillar ids")
                continue
            for p in pillars:
                if p not in known_pillars:
                    problems.add(at, f"unknown pillar {p!r}")
            domain = target["domain"]
            if pillars and domain not in DOMAINS:
                problems.add(at, f"domain {domain!r} is not one of {', '.join(DOMAINS)}")
            if not pillars and domain is not None:
                problems.add(at, "domain must be null when pillars is empty")
            key = normalise(str(value))
            if key in entries:
                problems.add(at, "duplicate category (after normalisation)")
            entries[key] = CategoryMapping(tuple(map(str, pillars)), domain)
        out[str(bench)] = BenchmarkCategoryMap(str(bench), str(spec["field"]),
                                               spec.get("separator"), entries)
    problems.raise_if_any(str(path))
    out[SORRY_BENCHMARK] = _sorry_map(sorry_taxonomy())
    return out


def base_benchmark(benchmark: str) -> str:
    """The benchmark whose categories a subset uses: itself, or a mutated subset's base.

    Derived (mutated) subsets carry their base's categories; their id starts with the base id
    followed by ``__`` (:data:`guarddiag.data.SUBSET_SEPARATOR`).
    """
    return benchmark.split(SUBSET_SEPARATOR, 1)[0]


def prompt_weights(benchmark: str, categories: Sequence[str | None]) -> list[PromptWeights]:
    """Per prompt of ``benchmark``, how its unit weight spreads over pillars and domains."""
    maps = category_maps()
    cmap = maps.get(base_benchmark(benchmark))
    if cmap is None:
        return [PromptWeights({}, {}, "no_map") for _ in categories]
    return [cmap.weights(c) for c in categories]


def category_label(benchmark: str, value: str | None) -> str | None:
    """A readable label for a category value: SORRY-Bench numbers get their official name."""
    if value is None:
        return None
    if base_benchmark(benchmark) == SORRY_BENCHMARK:
        try:
            cat = sorry_taxonomy().category(value)
        except GuarddiagError:
            return str(value)
        return f"{cat.number}. {cat.name}"
    return str(value)


def category_domain(benchmark: str, value: str | None) -> str | None:
    """The single domain of a category value (the heaviest one for multi-code values)."""
    weights = prompt_weights(benchmark, [value])[0]
    if not weights.domains:
        return None
    return max(sorted(weights.domains), key=lambda d: weights.domains[d])
