"""The dual-policy training pool: public prompts labelled under policy A and policy B.

``build_pool`` reads the sources a recipe names (see :mod:`guarddiag.pool.spec`), applies both
policies as data, adds the synthetic rows the recipe asks for (copyright-reproduction requests
from title lists, COMPOUND rows that join a benign instruction to a blocked request and record
its character span, jailbreak wrappers around benign requests), removes duplicates (equal
:func:`guarddiag.text.normalise` forms; the first source in recipe order wins), assigns
train/val/cal splits and measures how far the two policies agree.

Example (CPU, well under a minute)::

    guarddiag pool build --out work/pool
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from guarddiag import files as gfiles
from guarddiag.errors import GuarddiagError
from guarddiag.labels import CLASS_INDEX, CLASSES, LOOSE, STRICT, BinaryMapping, pillar_ids
from guarddiag.paths import manifests_dir
from guarddiag.pool.sources import SourceSpec, csv_records, read_source, verify_refs
from guarddiag.pool.spec import (
    BLOCKING,
    SPLITS,
    SYNTHETIC_COMPOUND,
    SYNTHETIC_COPYRIGHT,
    SYNTHETIC_JAILBREAK,
    SYNTHETIC_SOURCES,
    UNSAFE,
    Recipe,
    Take,
    load_recipe,
)
from guarddiag.progress import say
from guarddiag.spec import Problems
from guarddiag.text import normalise

__all__ = ["POOL_SCHEMA", "AgreementResult", "PoolResult", "agreement", "build_pool",
           "cohen_kappa", "load_pool", "load_recipe"]

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
"""Columns of ``pool.parquet`` (COMMON.md contract), in order."""


# ================================================================ agreement statistics


def cohen_kappa(a: Sequence[str], b: Sequence[str], labels: Sequence[str]) -> float:
    """Cohen's κ = (p_o − p_e) / (1 − p_e) over the given label set.

    p_o is the share of items with equal labels, p_e = Σ_k p_a(k)·p_b(k) the agreement expected
    from the two marginals alone. NaN when p_e = 1 (both raters used one same label only:
    κ is undefined, as in scikit-learn).
    """
    if len(a) != len(b):
        raise GuarddiagError(f"cohen_kappa: {len(a)} labels against {len(b)}")
    n = len(a)
    if n == 0:
        return float("nan")
    index = {lab: i for i, lab in enumerate(labels)}
    conf = np.zeros((len(labels), len(labels)), dtype=np.int64)
    for x, y in zip(a, b, strict=True):
        conf[index[x], index[y]] += 1
    p_o = np.trace(conf) / n
    p_e = float((conf.sum(axis=1) / n) @ (conf.sum(axis=0) / n))
    if p_e >= 1.0:
        return float("nan")
    return float((p_o - p_e) / (1.0 - p_e))


@dataclass(frozen=True)
class AgreementResult:
    """How far policy A and policy B agree on the same prompts."""

    n: int
    coarse_agreement: float
    """Share of prompts with the same 4-class label."""
    binary_agreement: float
    """Share with the same safe/unsafe read-out under ``mapping``."""
    kappa_coarse: float
    kappa_binary: float
    confusion: tuple[tuple[int, ...], ...]
    """4×4 counts, rows = policy A class, columns = policy B class, in ``CLASSES`` order."""
    mapping: str
    binary_agreement_strict: float
    """Binary agreement when BOUNDARY_SAFE reads as unsafe (the strict mapping)."""

    @property
    def n_disagree_binary(self) -> int:
        return self.n - round(self.binary_agreement * self.n)

    def to_frame(self) -> pl.DataFrame:
        """The confusion matrix as a table: one row per A class, one column per B class."""
        return pl.DataFrame(
            {"label_a": list(CLASSES),
             **{name: [row[j] for row in self.confusion] for j, name in enumerate(CLASSES)}})

    def to_json(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return None if x != x else round(x, 6)

        return {"n": self.n, "coarse_agreement": num(self.coarse_agreement),
                "binary_agreement": num(self.binary_agreement),
                "binary_disagreement": num(1 - self.binary_agreement) if self.n else None,
                "binary_agreement_strict": num(self.binary_agreement_strict),
                "kappa_coarse": num(self.kappa_coarse), "kappa_binary": num(self.kappa_binary),
                "mapping": self.mapping, "classes": list(CLASSES),
                "confusion_a_rows_b_cols": [list(r) for r in self.confusion]}


def agreement(label_a: Sequence[str], label_b: Sequence[str], *,
              mapping: BinaryMapping = LOOSE) -> AgreementResult:
    """Coarse and binary agreement, Cohen's κ (4-class and binary) and the A×B confusion."""
    for lab in (*label_a, *label_b):
        if lab not in CLASS_INDEX:
            raise GuarddiagError(f"agreement: class {lab!r} is not one of {', '.join(CLASSES)}")
    n = len(label_a)
    conf = np.zeros((4, 4), dtype=np.int64)
    for x, y in zip(label_a, label_b, strict=True):
        conf[CLASS_INDEX[x], CLASS_INDEX[y]] += 1
    bin_a = ["unsafe" if mapping.is_unsafe(x) else "safe" for x in label_a]
    bin_b = ["unsafe" if mapping.is_unsafe(y) else "safe" for y in label_b]
    strict_eq = sum(STRICT.is_unsafe(x) == STRICT.is_unsafe(y)
                    for x, y in zip(label_a, label_b, strict=True))
    nan = float("nan")
    return AgreementResult(
        n=n,
        coarse_agreement=float(np.trace(conf) / n) if n else nan,
        binary_agreement=sum(x == y for x, y in zip(bin_a, bin_b, strict=True)) / n if n else nan,
        kappa_coarse=cohen_kappa(label_a, label_b, CLASSES),
        kappa_binary=cohen_kappa(bin_a, bin_b, ("safe", "unsafe")),
        confusion=tuple(tuple(int(v) for v in row) for row in conf),
        mapping=mapping.name,
        binary_agreement_strict=strict_eq / n if n else nan,
    )


# ================================================================ labelling


@dataclass
class _Row:
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


def _label_row(row: _Row, recipe: Recipe, unmapped: dict[tuple[str, str, str], int],
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
            order = _pillar_order()
            row.pillars[name] = tuple(sorted(set(tags), key=order.__getitem__))
        else:
            row.pillars[name] = ()
    return ok


@cache
def _pillar_order() -> dict[str, int]:
    """Pillar id → head position, so tags are always listed in head order."""
    return {pid: i for i, pid in enumerate(pillar_ids())}


def _raise_unmapped(unmapped: Mapping[tuple[str, str, str], int], recipe: Recipe) -> None:
    if not unmapped:
        return
    problems = Problems()
    for (name, source, category), count in sorted(unmapped.items()):
        problems.add(f"{recipe.policies[name].path}",
                     f"no rule labels source {source!r} category {category or '<none>'!r} "
                     f"({count} rows)")
    problems.raise_if_any("policy coverage")


# ================================================================ sampling


def _rng(seed: int, *parts: str) -> np.random.Generator:
    """A generator per purpose, so adding one source leaves every other source's sample alone."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()
    return np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])


def _category_excluded(category: str | None, exclude: Sequence[str]) -> bool:
    cat = category or ""
    for pat in exclude:
        if pat == cat or (pat.endswith("/*") and (cat + "/").startswith(pat[:-1])):
            return True
    return False


def _sample(frame: pl.DataFrame, take: Take, rng: np.random.Generator) -> list[int]:
    """Row indices (in file order) of the rows a source contributes."""
    cats = frame["category"].to_list()
    langs = frame["lang"].to_list()
    keep = [i for i, c in enumerate(cats) if not _category_excluded(c, take.exclude)]
    if take.mode == "all":
        return keep
    if take.mode == "n":
        k = min(int(take.value), len(keep))
        chosen = rng.choice(len(keep), size=k, replace=False) if k else []
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


# ================================================================ synthetic rows


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _clean_title(raw: str) -> str:
    title = re.sub(r"\s*\([^)]*#\s*\d[^)]*\)\s*$", "", raw)  # goodbooks "(Series, #2)" suffix
    title = title.replace('"', "").strip()
    title = re.sub(r"\s+", " ", title)
    if title.isupper() and len(title) > 3:
        # NYT lists are upper case: "THE GOLDFINCH" → "The Goldfinch" (apostrophes kept intact).
        title = re.sub(r"[A-Za-z]+('[A-Za-z]+)?", lambda m: m.group(0).capitalize(), title.lower())
    return title


def _clean_author(raw: str, *, last_first: bool = False) -> str:
    """The first listed author, written the way a prompt would name them."""
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if not parts:
        return ""
    if last_first:
        # Gutenberg: "Austen, Jane, 1775-1817" → "Jane Austen".
        names = [p for p in parts if not re.search(r"\d", p)]
        author = f"{names[1]} {names[0]}" if len(names) >= 2 else (names or parts)[0]
    else:
        # "J.K. Rowling, Mary GrandPré" (author, illustrator) / "Latto, Jung Kook" → first name.
        author = parts[0]
    return re.sub(r"\s+", " ", author).strip()


@dataclass(frozen=True)
class _Title:
    title: str
    author: str
    kind: str
    """``song``, ``book`` or ``public_domain``."""


_LATIN_TITLE = re.compile(r"[\x20-\x7e\u00a0-\u024f\u2018-\u201d\u2013\u2014\u2026]+")


def _pick(rec: Mapping[str, str], names: tuple[str, ...], where: str) -> str:
    """The first non-empty of alternative columns (Billboard renamed its columns in 1970)."""
    for name in names:
        if rec.get(name, "").strip():
            return rec[name].strip()
    if names and not any(n in rec for n in names):
        raise GuarddiagError(f"{where}: none of the columns {', '.join(names)}")
    return ""


def _read_titles(recipe: Recipe, data_dir: Path, digests: dict[str, str]) -> list[_Title]:
    out: list[_Title] = []
    for tl in recipe.titles.values():
        paths, got = verify_refs(tl.id, tl.files, data_dir, f"titles.{tl.id}")
        digests.update(got)
        spec = SourceSpec(id=tl.id, files=(), format="csv", delimiter=tl.delimiter)
        for path in paths:
            for i, rec in csv_records(path, spec):
                where = f"{path} row {i} (title list {tl.id!r})"
                title = _clean_title(_pick(rec, tl.title, where))
                if not _LATIN_TITLE.fullmatch(title):
                    continue  # "進撃の巨人 1": the templates are English, keep titles Latin-script
                author = _clean_author(_pick(rec, tl.author, where), last_first=tl.last_first)
                if not title or not author:
                    continue
                if tl.min_year is not None:
                    try:
                        year = int(float(_pick(rec, tl.year, where)))
                    except ValueError:
                        continue  # unknown year: cannot tell whether it is still protected
                    if year < tl.min_year:
                        continue
                kind = "public_domain" if tl.public_domain else tl.kind
                out.append(_Title(title=title, author=author, kind=kind))
    return out


_QUOTED = re.compile(r'"([^"]+)"')


def _benchmark_titles(rows: Sequence[_Row]) -> set[str]:
    """Normalised titles quoted in HarmBench's copyright behaviours ("Generate the lyrics of
    "X" by Y"): synthetic requests must not name them, so they never copy a benchmark item."""
    out = set()
    for row in rows:
        if row.category is not None and row.category.startswith("copyright"):
            out.update(normalise(t) for t in _QUOTED.findall(row.text))
    return out


def _build_copyright(recipe: Recipe, titles: Sequence[_Title], banned: set[str],
                     seed: int) -> tuple[list[_Row], dict[str, Any]]:
    spec = recipe.copyright
    assert spec is not None
    by_kind: dict[str, list[_Title]] = defaultdict(list)
    seen: set[tuple[str, str]] = set()
    n_banned = 0
    for t in titles:
        key = (t.kind, normalise(t.title))
        if key in seen:
            continue
        seen.add(key)
        if key[1] in banned:
            n_banned += 1
            continue
        by_kind[t.kind].append(t)
    rows: list[_Row] = []
    stats: dict[str, Any] = {"titles_available": {k: len(v) for k, v in sorted(by_kind.items())},
                             "titles_excluded_benchmark": n_banned, "rows": {}}
    for cat in sorted(spec.templates):
        rng = _rng(seed, "copyright", cat)
        pool = by_kind.get(spec.kinds[cat], [])
        templates = spec.templates[cat]
        n = min(spec.counts[cat], len(pool))
        order = rng.permutation(len(pool))[:n]
        for idx in order:
            t = pool[int(idx)]
            tpl = templates[int(rng.integers(len(templates)))]
            text = tpl.replace("{title}", t.title).replace("{author}", t.author)
            rows.append(_Row(prompt_id=f"{SYNTHETIC_COPYRIGHT}:{_short_hash(text)}", text=text,
                             source=SYNTHETIC_COPYRIGHT, category=cat, lang="en", span=None,
                             keys=(f"title:{t.kind}:{normalise(t.title)}",)))
        stats["rows"][cat] = n
    return rows, stats


def _read_wrappers(recipe: Recipe, data_dir: Path, digests: dict[str, str]) -> list[str]:
    spec = recipe.wrappers
    assert spec is not None
    src = SourceSpec(id="wrappers", files=spec.files, format="csv", text=(spec.text,))
    rows = read_source(src, data_dir, where="wrappers")
    digests.update(rows.files)
    out, seen = [], set()
    for text in rows.frame["text"].to_list():
        if len(text) > spec.max_chars or (spec.exclude is not None and spec.exclude.search(text)):
            continue
        if spec.require_placeholder and not spec.placeholder.search(text):
            continue
        key = normalise(text)
        if key not in seen:
            seen.add(key)
            out.append(text)
    return out


def _wrap(wrapper: str, inner: str, placeholder: re.Pattern[str]) -> tuple[str, int]:
    """Put ``inner`` into a jailbreak template; returns the text and where ``inner`` starts."""
    m = placeholder.search(wrapper)
    if m:
        return wrapper[: m.start()] + inner + wrapper[m.end():], m.start()
    head = wrapper.rstrip() + "\n\n"
    return head + inner, len(head)


def _build_compound(recipe: Recipe, natural: Sequence[_Row], wrappers: Sequence[str],
                    seed: int) -> tuple[list[_Row], dict[str, Any]]:
    spec = recipe.compound
    assert spec is not None
    benign = [r for r in natural if r.source in spec.benign_from
              and r.labels["A"] == r.labels["B"] == "GENERIC_SAFE"
              and len(r.text) <= spec.max_benign_chars and "\n" not in r.text]
    blocked = [r for r in natural if r.source in spec.blocked_from and r.span is None
               and r.labels["A"] == "HARMFUL" and len(r.text) <= spec.max_blocked_chars
               and "\n" not in r.text]
    both = [r for r in blocked if r.labels["B"] == "HARMFUL"]
    a_only = [r for r in blocked if r.labels["B"] not in BLOCKING]
    if not benign or not (both or a_only):
        raise GuarddiagError(f"{recipe.path}: constructions.compound finds no benign "
                             f"({len(benign)}) or blocked ({len(blocked)}) requests to join")
    rng = _rng(seed, "compound")
    benign_order = rng.permutation(len(benign))
    out: list[_Row] = []
    n_wrapped = n_a_only = 0
    for k in range(spec.n):
        b = benign[int(benign_order[k % len(benign)])]
        use_a_only = bool(a_only) and (not both or rng.random() < spec.a_only_share)
        group = a_only if use_a_only else both
        r = group[int(rng.integers(len(group)))]
        join = spec.joins[int(rng.integers(len(spec.joins)))]
        # Split the join at {blocked}; the blocked request goes in verbatim, so its span is exact.
        head, tail = join.split("{blocked}", 1)
        head = head.replace("{benign}", b.text)
        tail = tail.replace("{benign}", b.text)
        text = head + r.text + tail
        start = len(head)
        keys = [*b.keys, *r.keys]
        wrapped = bool(wrappers) and rng.random() < spec.wrapper_share
        if wrapped:
            w_idx = int(rng.integers(len(wrappers)))
            text, offset = _wrap(wrappers[w_idx], text, recipe.wrappers.placeholder)
            start += offset
        row = _Row(prompt_id=f"{SYNTHETIC_COMPOUND}:{_short_hash(text)}", text=text,
                   source=SYNTHETIC_COMPOUND,
                   category=f"{'wrapped' if wrapped else 'plain'}/{r.source}/{r.category}",
                   lang="en", span=(start, start + len(r.text)), keys=tuple(keys))
        for name in recipe.policies:
            inner = r.labels[name]
            if inner in BLOCKING:
                row.labels[name], row.pillars[name] = "COMPOUND", r.pillars[name]
            else:
                # This policy allows the inserted request: the prompt is as safe as its parts.
                row.labels[name], row.pillars[name] = inner, ()
        out.append(row)
        n_wrapped += wrapped
        n_a_only += use_a_only
    return out, {"rows": len(out), "wrapped": n_wrapped, "a_only_inner": n_a_only,
                 "benign_candidates": len(benign), "blocked_candidates_both": len(both),
                 "blocked_candidates_a_only": len(a_only)}


def _build_jailbreak(recipe: Recipe, natural: Sequence[_Row], wrappers: Sequence[str],
                     seed: int, unmapped: dict[tuple[str, str, str], int]
                     ) -> tuple[list[_Row], dict[str, Any]]:
    spec = recipe.jailbreak
    assert spec is not None
    assert recipe.wrappers is not None
    benign = [r for r in natural if r.source in spec.benign_from
              and r.labels["A"] == r.labels["B"] == "GENERIC_SAFE"
              and len(r.text) <= spec.max_benign_chars]
    if not benign or not wrappers:
        raise GuarddiagError(f"{recipe.path}: constructions.jailbreak finds no benign requests "
                             f"({len(benign)}) or wrappers ({len(wrappers)})")
    rng = _rng(seed, "jailbreak")
    out = []
    for _ in range(spec.n):
        b = benign[int(rng.integers(len(benign)))]
        w_idx = int(rng.integers(len(wrappers)))
        text, _ = _wrap(wrappers[w_idx], b.text, recipe.wrappers.placeholder)
        row = _Row(prompt_id=f"{SYNTHETIC_JAILBREAK}:{_short_hash(text)}", text=text,
                   source=SYNTHETIC_JAILBREAK, category="benign_request", lang="en", span=None,
                   keys=b.keys)
        _label_row(row, recipe, unmapped, row.prompt_id)
        out.append(row)
    return out, {"rows": len(out), "benign_candidates": len(benign), "wrappers": len(wrappers)}


# ================================================================ splits


def _binary_disagrees(row: _Row) -> bool:
    return (row.labels["A"] in UNSAFE) != (row.labels["B"] in UNSAFE)


def _assign_splits(rows: Sequence[_Row], recipe: Recipe, seed: int) -> None:
    """Group-aware, stratified, seeded split assignment.

    Rows linked by a shared key (see :class:`_Row`) form one group and share a split, so no
    prompt's parts sit in train while the prompt sits in val. Jailbreak templates are not keys:
    a few dozen templates wrap a thousand requests, and real attackers reuse them too. Groups
    are stratified by the (A, B) label pair of their first row; groups where the policies
    disagree go to cal at the higher ``cal_disagreement`` rate, so head-only recalibration has
    disagreement rows to learn from without starving train.
    """
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    free = [r for r in rows if r.split is None]
    for r in free:
        first = find(r.keys[0])
        for k in r.keys[1:]:
            other = find(k)
            if other != first:
                parent[other] = first
    groups: dict[str, list[_Row]] = {}
    for r in free:
        groups.setdefault(find(r.keys[0]), []).append(r)
    strata: dict[tuple[str, str, bool], list[list[_Row]]] = defaultdict(list)
    for members in groups.values():
        dis = any(_binary_disagrees(m) for m in members)
        strata[(members[0].labels["A"], members[0].labels["B"], dis)].append(members)
    for key in sorted(strata):
        glist = strata[key]
        rng = _rng(seed, "split", *map(str, key))
        order = rng.permutation(len(glist))
        total = sum(len(g) for g in glist)
        cal_target = (recipe.cal_disagreement if key[2] else recipe.cal) * total
        val_target = cal_target + recipe.val * total
        done = 0
        for gi in order:
            members = glist[int(gi)]
            mid = done + len(members) / 2
            split = "cal" if mid < cal_target else "val" if mid < val_target else "train"
            for m in members:
                m.split = split
            done += len(members)


# ================================================================ build


@dataclass(frozen=True)
class PoolResult:
    """What ``build_pool`` made and where it wrote it."""

    pool: pl.DataFrame
    agreement: AgreementResult
    agreement_by_split: Mapping[str, AgreementResult]
    source_counts: pl.DataFrame
    """Per source: rows read, empty rows skipped, sampled, duplicates dropped, kept."""
    out_dir: Path
    pool_path: Path
    agreement_path: Path
    meta_path: Path
    seed: int

    def to_frame(self) -> pl.DataFrame:
        return self.pool

    def class_counts(self) -> pl.DataFrame:
        """Rows per class under each policy (classes in ``CLASSES`` order)."""
        a = Counter(self.pool["label_a"].to_list())
        b = Counter(self.pool["label_b"].to_list())
        return pl.DataFrame({"class": list(CLASSES), "policy_a": [a[c] for c in CLASSES],
                             "policy_b": [b[c] for c in CLASSES]})

    def split_counts(self) -> dict[str, int]:
        c = Counter(self.pool["split"].to_list())
        return {s: c[s] for s in SPLITS}


def _to_frame(rows: Sequence[_Row]) -> pl.DataFrame:
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


def _dedupe(rows: Sequence[_Row], seen: set[str], dropped: Counter[str]) -> list[_Row]:
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


def build_pool(*, recipe: str | Path | Recipe | None = None, data_dir: str | Path,
               out_dir: str | Path, seed: int | None = None) -> PoolResult:
    """Build the dual-policy pool and write pool.parquet, agreement.json and meta.json.

    ``seed`` overrides the recipe's seed. The same recipe, data and seed give byte-identical
    outputs. A run writes each file atomically, so an interrupted build leaves the previous
    pool (or nothing) in place, never half a file.
    """
    rec = recipe if isinstance(recipe, Recipe) else load_recipe(recipe)
    seed = rec.seed if seed is None else seed
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    digests: dict[str, str] = {}
    unmapped: dict[tuple[str, str, str], int] = Counter()
    counts: dict[str, dict[str, int]] = {}

    # Natural rows: read, sample, label.
    natural: list[_Row] = []
    for sid, src in rec.sources.items():
        got = read_source(src.spec, data_dir, where=f"{rec.path} sources.{sid}")
        digests.update(got.files)
        picked = _sample(got.frame, src.take, _rng(seed, "take", sid))
        frame = got.frame
        ids, texts, cats = frame["row_id"].to_list(), frame["text"].to_list(), \
            frame["category"].to_list()
        langs, s0, s1 = frame["lang"].to_list(), frame["span_start"].to_list(), \
            frame["span_end"].to_list()
        for i in picked:
            span = None if s0[i] is None else (int(s0[i]), int(s1[i]))
            row = _Row(prompt_id=f"{sid}:{ids[i]}", text=texts[i], source=sid,
                       category=cats[i], lang=langs[i], span=span, split=src.split)
            _label_row(row, rec, unmapped, ids[i])
            natural.append(row)
        counts[sid] = {"read": got.n_raw, "empty_skipped": got.n_empty, "sampled": len(picked)}
        say(f"pool: {sid}: {len(picked)} of {got.frame.height} rows")
    _raise_unmapped(unmapped, rec)

    seen: set[str] = set()
    dropped: Counter[str] = Counter()
    natural = _dedupe(natural, seen, dropped)
    ids_seen = Counter(r.prompt_id for r in natural)
    dup_ids = [pid for pid, c in ids_seen.items() if c > 1]
    if dup_ids:
        raise GuarddiagError(f"{rec.path}: duplicate row ids {', '.join(sorted(dup_ids)[:5])} "
                             "(give the source an id field that is unique)")
    for r in natural:
        r.keys = (f"text:{r.norm}",)

    # Synthetic rows.
    constructions: dict[str, Any] = {}
    synthetic: list[_Row] = []
    if rec.copyright is not None:
        titles = _read_titles(rec, data_dir, digests)
        banned: set[str] = set()
        if rec.copyright.exclude_titles_from is not None:
            # Read the whole source, not just the sampled rows: every benchmark title stays out.
            src = rec.sources[rec.copyright.exclude_titles_from]
            full = read_source(src.spec, data_dir, where="exclude_titles_from").frame
            banned = _benchmark_titles([
                _Row(prompt_id="", text=t, source="", category=c, lang="en", span=None)
                for t, c in zip(full["text"].to_list(), full["category"].to_list(),
                                strict=True)])
        rows, constructions["copyright"] = _build_copyright(rec, titles, banned, seed)
        for r in rows:
            _label_row(r, rec, unmapped, r.prompt_id)
        synthetic.extend(rows)
        constructions["copyright"]["banned_titles"] = len(banned)
    wrappers: list[str] = []
    if rec.wrappers is not None:
        wrappers = _read_wrappers(rec, data_dir, digests)
    if rec.compound is not None:
        rows, constructions["compound"] = _build_compound(rec, natural, wrappers, seed)
        synthetic.extend(rows)
    if rec.jailbreak is not None:
        rows, constructions["jailbreak"] = _build_jailbreak(rec, natural, wrappers, seed,
                                                            unmapped)
        synthetic.extend(rows)
    _raise_unmapped(unmapped, rec)
    synthetic = _dedupe(synthetic, seen, dropped)
    rows_all = natural + synthetic

    _assign_splits(rows_all, rec, seed)
    pool = _to_frame(rows_all)
    kept = Counter(pool["source"].to_list())
    for sid in [*rec.sources, *SYNTHETIC_SOURCES]:
        if sid in counts or kept[sid]:
            c = counts.setdefault(sid, {"read": 0, "empty_skipped": 0,
                                        "sampled": kept[sid] + dropped[sid]})
            c["duplicates_dropped"] = dropped[sid]
            c["kept"] = kept[sid]
    source_counts = pl.DataFrame(
        [{"source": sid, **c} for sid, c in counts.items()],
        schema={"source": pl.String(), "read": pl.Int64(), "empty_skipped": pl.Int64(),
                "sampled": pl.Int64(), "duplicates_dropped": pl.Int64(), "kept": pl.Int64()})

    overall = agreement(pool["label_a"].to_list(), pool["label_b"].to_list())
    by_split = {}
    for split in SPLITS:
        part = pool.filter(pl.col("split") == split)
        by_split[split] = agreement(part["label_a"].to_list(), part["label_b"].to_list())
    english = pool.filter(pl.col("lang") == "en")
    by_lang = {"en": agreement(english["label_a"].to_list(), english["label_b"].to_list())}
    other = pool.filter(pl.col("lang") != "en")
    if other.height:
        by_lang["non_en"] = agreement(other["label_a"].to_list(), other["label_b"].to_list())

    disagree = pool.filter(
        pl.col("label_a").is_in(list(UNSAFE)) != pl.col("label_b").is_in(list(UNSAFE)))
    dis_by_source = Counter(disagree["source"].to_list())

    out_dir.mkdir(parents=True, exist_ok=True)
    pool_path = gfiles.write_parquet(pool, out_dir / "pool.parquet")
    agreement_doc = {
        "overall": overall.to_json(),
        "by_split": {s: a.to_json() for s, a in by_split.items()},
        "by_lang": {k: a.to_json() for k, a in by_lang.items()},
        "binary_disagreement_by_source": dict(sorted(dis_by_source.items())),
        "class_counts": {
            "A": {c: int((pool["label_a"] == c).sum()) for c in CLASSES},
            "B": {c: int((pool["label_b"] == c).sum()) for c in CLASSES},
        },
    }
    agreement_path = gfiles.write_json(agreement_doc, out_dir / "agreement.json")
    spec_files = [rec.path, rec.policies["A"].path, rec.policies["B"].path, rec.tagger.path,
                  manifests_dir() / "policies" / "pillars.yaml"]
    inputs = {**dict(sorted(digests.items())),
              **{f"data_manifests/{p.relative_to(manifests_dir()).as_posix()}"
                 if p.is_relative_to(manifests_dir()) else str(p): gfiles.sha256_file(p)
                 for p in spec_files}}
    coverage = {}
    for name, lab, col in (("A", "label_a", "pillars_a"), ("B", "label_b", "pillars_b")):
        blocked = pool.filter(pl.col(lab).is_in(list(BLOCKING)))
        coverage[name] = {"blocked": blocked.height,
                          "blocked_without_pillar": int((blocked[col].list.len() == 0).sum())}
    meta_path = gfiles.write_meta(
        out_dir, inputs=inputs, seed=seed, recipe=rec.name, n_rows=pool.height,
        pool_sha256=gfiles.sha256_file(pool_path), splits=dict(Counter(pool["split"])),
        sources=counts, constructions=constructions, pillar_coverage=coverage)
    return PoolResult(pool=pool, agreement=overall, agreement_by_split=by_split,
                      source_counts=source_counts, out_dir=out_dir, pool_path=pool_path,
                      agreement_path=agreement_path, meta_path=meta_path, seed=seed)


def load_pool(path: str | Path) -> pl.DataFrame:
    """Read a pool.parquet and check it has the contract's columns and classes."""
    path = Path(path)
    df = gfiles.read_table(path, columns=list(POOL_SCHEMA))
    for col in ("label_a", "label_b"):
        bad = df.filter(~pl.col(col).is_in(list(CLASSES)))
        if bad.height:
            raise GuarddiagError(f"{path} field {col!r}: class {bad[col][0]!r} is not one of "
                                 f"{', '.join(CLASSES)} (prompt_id {bad['prompt_id'][0]})")
    return df
