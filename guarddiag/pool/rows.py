"""Pool rows under construction: labelling by both policies, seeded sampling, de-duplication.

Every random choice of the pool build draws from :func:`purpose_rng`, one generator per purpose
(a source's sample, a construction, a split stratum), so adding one source leaves every other
sample alone.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

import numpy as np
import polars as pl

from guarddiag.labels import pillar_ids
from guarddiag.pool.recipe import Recipe, Take
from guarddiag.pool.spec import BLOCKING
from guarddiag.spec import Problems
from guarddiag.text import normalise

POOL_SCHEMA: dict[str, pl.DataType] = {
    "prompt_id": pl.String(),
    "text": pl.String(),
    "source": pl.String(),
    "source_category": pl.String(),
    "label_a": pl.String(),
    "label_b": pl.String(),
    "pillars_a": pl.List(pl.String()),
    "pillars_b": pl.List(pl.String()),
    "span_start": pl.Int64(),
    "span_end": pl.Int64(),
    "split": pl.String(),
    "lang": pl.String(),
}


@dataclass
class PoolRow:
    """A pool row under construction."""

    prompt_id: str
    text: str
    source: str
    category: str | None
    lang: str
    span: tuple[int, int] | None
    labels: dict[str, str] = field(default_factory=dict)
    pillars: dict[str, tuple[str, ...]] = field(default_factory=dict)
    keys: tuple[str, ...] = ()
    """Split-group keys: rows sharing a key land in the same split (a COMPOUND row and the
    prompts it was built from; every request built from one title)."""
    split: str | None = None
    norm: str = ""


def label_row(row: PoolRow, recipe: Recipe, unmapped: dict[tuple[str, str, str], int],
               row_id: str) -> bool:
    ok = True
    for name, policy in recipe.policies.items():
        rules = policy.rules_for(row.source, row.category)
        rule = None if rules is None else next(
            (r for r in rules if r.applies(row_id, row.text)), None)
        if rule is None:
            unmapped[(name, row.source, row.category or "")] += 1
            ok = False
            continue
        row.labels[name] = rule.label
        if rule.label in BLOCKING:
            found = recipe.tagger.tag(row.text) if rule.auto else ()
            tags = rule.pillars + tuple(t for t in found if t not in policy.never_blocks)
            order = pillar_order()
            row.pillars[name] = tuple(sorted(set(tags), key=order.__getitem__))
        else:
            row.pillars[name] = ()
    return ok


@cache
def pillar_order() -> dict[str, int]:
    """Pillar id → head position, so tags are always listed in head order."""
    return {pid: i for i, pid in enumerate(pillar_ids())}


def raise_unmapped(unmapped: Mapping[tuple[str, str, str], int], recipe: Recipe) -> None:
    if not unmapped:
        return
    problems = Problems()
    for (name, source, category), count in sorted(unmapped.items()):
        problems.add(f"{recipe.policies[name].path}",
                     f"no rule labels source {source!r} category {category or '<none>'!r} "
                     f"({count} rows)")
    problems.raise_if_any("policy coverage")


# ================================================================ sampling


def purpose_rng(seed: int, *parts: str) -> np.random.Generator:
    """A generator per purpose, so adding one source leaves every other source's sample alone."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()
    return np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])


def category_excluded(category: str | None, exclude: Sequence[str]) -> bool:
    cat = category or ""
    for pat in exclude:
        if pat == cat or (pat.endswith("/*") and (cat + "/").startswith(pat[:-1])):
            return True
    return False


def sample_rows(frame: pl.DataFrame, take: Take, rng: np.random.Generator) -> list[int]:
    """Row indices (in file order) of the rows a source contributes."""
    cats = frame["category"].to_list()
    langs = frame["lang"].to_list()
    keep = [i for i, c in enumerate(cats) if not category_excluded(c, take.exclude)]
    if take.mode == "all":
        return keep
    if take.mode == "n":
        k = min(int(take.value), len(keep))
        chosen: np.ndarray | list[int] = (rng.choice(len(keep), size=k, replace=False)
                                           if k else [])
        return sorted(keep[i] for i in chosen)
    strata: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i in keep:
        strata[(langs[i], cats[i] or "")].append(i)
    out: list[int] = []
    for key in sorted(strata):
        members = strata[key]
        if take.mode == "fraction":
            k = round(take.value * len(members))
        else:
            k = min(int(take.value), len(members))
        if k:
            out.extend(members[i] for i in rng.choice(len(members), size=k, replace=False))
    return sorted(out)


def short_hash(text: str) -> str:
    """The first 12 hex digits of the text's sha256: the id of a synthetic row."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def rows_to_frame(rows: Sequence[PoolRow]) -> pl.DataFrame:
    data = {
        "prompt_id": [r.prompt_id for r in rows],
        "text": [r.text for r in rows],
        "source": [r.source for r in rows],
        "source_category": [r.category for r in rows],
        "label_a": [r.labels["A"] for r in rows],
        "label_b": [r.labels["B"] for r in rows],
        "pillars_a": [list(r.pillars["A"]) for r in rows],
        "pillars_b": [list(r.pillars["B"]) for r in rows],
        "span_start": [None if r.span is None else r.span[0] for r in rows],
        "span_end": [None if r.span is None else r.span[1] for r in rows],
        "split": [r.split for r in rows],
        "lang": [r.lang for r in rows],
    }
    return pl.DataFrame(data, schema=POOL_SCHEMA)


def dedupe(rows: Sequence[PoolRow], seen: set[str], dropped: Counter[str]) -> list[PoolRow]:
    out = []
    for r in rows:
        if not r.norm:
            r.norm = normalise(r.text)
        if not r.norm or r.norm in seen:
            dropped[r.source] += 1
            continue
        seen.add(r.norm)
        out.append(r)
    return out
