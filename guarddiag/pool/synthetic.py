"""Synthetic pool rows: copyright-reproduction requests from title lists, COMPOUND rows that join
a benign instruction to a blocked request (recording its character span), and jailbreak wrappers
around benign requests.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guarddiag.errors import GuarddiagError
from guarddiag.pool.recipe import Recipe
from guarddiag.pool.rows import PoolRow, label_row, purpose_rng, short_hash
from guarddiag.pool.sources import SourceSpec, csv_records, read_source, verify_refs
from guarddiag.pool.spec import (
    BLOCKING,
    SYNTHETIC_COMPOUND,
    SYNTHETIC_COPYRIGHT,
    SYNTHETIC_JAILBREAK,
)
from guarddiag.text import normalise


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
class TitleRow:
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


def read_titles(recipe: Recipe, data_dir: Path, digests: dict[str, str]) -> list[TitleRow]:
    out: list[TitleRow] = []
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
                out.append(TitleRow(title=title, author=author, kind=kind))
    return out


_QUOTED = re.compile(r'"([^"]+)"')


def benchmark_titles(rows: Sequence[PoolRow]) -> set[str]:
    """Normalised titles quoted in HarmBench's copyright behaviours ("Generate the lyrics of
    "X" by Y"): synthetic requests must not name them, so they never copy a benchmark item."""
    out: set[str] = set()
    for row in rows:
        if row.category is not None and row.category.startswith("copyright"):
            out.update(normalise(t) for t in _QUOTED.findall(row.text))
    return out


def build_copyright(recipe: Recipe, titles: Sequence[TitleRow], banned: set[str],
                     seed: int) -> tuple[list[PoolRow], dict[str, Any]]:
    spec = recipe.copyright
    assert spec is not None
    by_kind: dict[str, list[TitleRow]] = defaultdict(list)
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
    rows: list[PoolRow] = []
    stats: dict[str, Any] = {"titles_available": {k: len(v) for k, v in sorted(by_kind.items())},
                             "titles_excluded_benchmark": n_banned, "rows": {}}
    for cat in sorted(spec.templates):
        rng = purpose_rng(seed, "copyright", cat)
        pool = by_kind.get(spec.kinds[cat], [])
        templates = spec.templates[cat]
        n = min(spec.counts[cat], len(pool))
        order = rng.permutation(len(pool))[:n]
        for idx in order:
            t = pool[int(idx)]
            tpl = templates[int(rng.integers(len(templates)))]
            text = tpl.replace("{title}", t.title).replace("{author}", t.author)
            rows.append(PoolRow(prompt_id=f"{SYNTHETIC_COPYRIGHT}:{short_hash(text)}", text=text,
                             source=SYNTHETIC_COPYRIGHT, category=cat, lang="en", span=None,
                             keys=(f"title:{t.kind}:{normalise(t.title)}",)))
        stats["rows"][cat] = n
    return rows, stats


def read_wrappers(recipe: Recipe, data_dir: Path, digests: dict[str, str]) -> list[str]:
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


def build_compound(recipe: Recipe, natural: Sequence[PoolRow], wrappers: Sequence[str],
                    seed: int) -> tuple[list[PoolRow], dict[str, Any]]:
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
    rng = purpose_rng(seed, "compound")
    benign_order = rng.permutation(len(benign))
    out: list[PoolRow] = []
    n_wrapped = n_a_only = 0
    for k in range(spec.n):
        b = benign[int(benign_order[k % len(benign)])]
        use_a_only = bool(a_only) and (not both or rng.random() < spec.a_only_share)
        group = a_only if use_a_only else both
        r = group[int(rng.integers(len(group)))]
        join = spec.joins[int(rng.integers(len(spec.joins)))]
        text, start = join_requests(join, benign=b.text, blocked=r.text)
        keys = [*b.keys, *r.keys]
        wrapped = bool(wrappers) and rng.random() < spec.wrapper_share
        if wrapped:
            if recipe.wrappers is None:
                raise ValueError(f"{recipe.path}: wrappers given, but the recipe has no "
                                 f"wrappers section to read their placeholder from")
            w_idx = int(rng.integers(len(wrappers)))
            text, offset = _wrap(wrappers[w_idx], text, recipe.wrappers.placeholder)
            start += offset
        row = PoolRow(prompt_id=f"{SYNTHETIC_COMPOUND}:{short_hash(text)}", text=text,
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
    contrast = benign_pairs(recipe, benign, seed)
    return [*out, *contrast], {
        "rows": len(out), "wrapped": n_wrapped, "a_only_inner": n_a_only,
        "benign_pairs": len(contrast), "benign_candidates": len(benign),
        "blocked_candidates_both": len(both), "blocked_candidates_a_only": len(a_only)}


def join_requests(join: str, *, benign: str, blocked: str) -> tuple[str, int]:
    """Fill a join phrase; returns the text and where ``blocked`` starts. The join is split at
    ``{blocked}`` and that request goes in verbatim, so its span is exact."""
    head, tail = join.split("{blocked}", 1)
    head = head.replace("{benign}", benign)
    return head + blocked + tail.replace("{benign}", benign), len(head)


def benign_pairs(recipe: Recipe, benign: Sequence[PoolRow], seed: int) -> list[PoolRow]:
    """Contrast rows for COMPOUND: two benign requests joined by the same join phrases, which
    both policies allow (GENERIC_SAFE), so a join phrase never carries the COMPOUND label."""
    spec = recipe.compound
    assert spec is not None
    if spec.contrast_n and len(benign) < 2:
        raise GuarddiagError(f"{recipe.path}: constructions.compound.contrast_n needs at least "
                             f"two benign requests, found {len(benign)}")
    rng = purpose_rng(seed, "compound-contrast")
    out: list[PoolRow] = []
    for _ in range(spec.contrast_n):
        i, j = (int(x) for x in rng.choice(len(benign), size=2, replace=False))
        first, second = benign[i], benign[j]
        join = spec.joins[int(rng.integers(len(spec.joins)))]
        text, _ = join_requests(join, benign=first.text, blocked=second.text)
        row = PoolRow(prompt_id=f"{SYNTHETIC_COMPOUND}:{short_hash(text)}", text=text,
                      source=SYNTHETIC_COMPOUND, category=f"benign_pair/{second.source}",
                      lang="en", span=None, keys=(*first.keys, *second.keys))
        for name in recipe.policies:
            row.labels[name], row.pillars[name] = "GENERIC_SAFE", ()
        out.append(row)
    return out


def build_jailbreak(recipe: Recipe, natural: Sequence[PoolRow], wrappers: Sequence[str],
                     seed: int, unmapped: dict[tuple[str, str, str], int]
                     ) -> tuple[list[PoolRow], dict[str, Any]]:
    spec = recipe.jailbreak
    assert spec is not None
    assert recipe.wrappers is not None
    benign = [r for r in natural if r.source in spec.benign_from
              and r.labels["A"] == r.labels["B"] == "GENERIC_SAFE"
              and len(r.text) <= spec.max_benign_chars]
    if not benign or not wrappers:
        raise GuarddiagError(f"{recipe.path}: constructions.jailbreak finds no benign requests "
                             f"({len(benign)}) or wrappers ({len(wrappers)})")
    rng = purpose_rng(seed, "jailbreak")
    out = []
    for _ in range(spec.n):
        b = benign[int(rng.integers(len(benign)))]
        w_idx = int(rng.integers(len(wrappers)))
        text, _ = _wrap(wrappers[w_idx], b.text, recipe.wrappers.placeholder)
        row = PoolRow(prompt_id=f"{SYNTHETIC_JAILBREAK}:{short_hash(text)}", text=text,
                   source=SYNTHETIC_JAILBREAK, category="benign_request", lang="en", span=None,
                   keys=b.keys)
        label_row(row, recipe, unmapped, row.prompt_id)
        out.append(row)
    return out, {"rows": len(out), "benign_candidates": len(benign), "wrappers": len(wrappers)}

