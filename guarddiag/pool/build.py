"""``build_pool``: read the recipe's sources, label, add synthetic rows, split, write.

Duplicates are removed by equal :func:`guarddiag.text.normalise` forms (the first source in recipe
order wins). Outputs, each written atomically: ``pool.parquet`` (:data:`POOL_SCHEMA`),
``agreement.json`` (policy agreement overall, by split, by language, and per source) and
``meta.json`` (input digests, seed, counts).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from guarddiag import files as gfiles
from guarddiag.errors import GuarddiagError
from guarddiag.labels import CLASSES
from guarddiag.paths import PoolFolder, manifests_dir
from guarddiag.pool.agreement import AgreementResult, agreement
from guarddiag.pool.recipe import Recipe, load_recipe
from guarddiag.pool.rows import (
    POOL_SCHEMA,
    PoolRow,
    dedupe,
    label_row,
    purpose_rng,
    raise_unmapped,
    rows_to_frame,
    sample_rows,
)
from guarddiag.pool.sources import read_source
from guarddiag.pool.spec import BLOCKING, SPLITS, SYNTHETIC_SOURCES, UNSAFE
from guarddiag.pool.splits import COPY_SUFFIX, assign_splits, overlap_copies
from guarddiag.pool.synthetic import (
    benchmark_titles,
    build_compound,
    build_copyright,
    build_jailbreak,
    read_titles,
    read_wrappers,
)

logger = logging.getLogger(__name__)

__all__ = ["PoolResult", "build_pool", "load_pool"]


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
    natural = _natural_rows(rec, data_dir, seed, digests=digests, unmapped=unmapped,
                            counts=counts)
    raise_unmapped(unmapped, rec)

    seen: set[str] = set()
    dropped: Counter[str] = Counter()
    natural = dedupe(natural, seen, dropped)
    ids_seen = Counter(r.prompt_id for r in natural)
    dup_ids = [pid for pid, c in ids_seen.items() if c > 1]
    if dup_ids:
        raise GuarddiagError(f"{rec.path}: duplicate row ids {', '.join(sorted(dup_ids)[:5])} "
                             "(give the source an id field that is unique)")
    for r in natural:
        r.keys = (f"text:{r.norm}",)

    synthetic, constructions = _synthetic_rows(rec, natural, data_dir, seed, digests=digests,
                                               unmapped=unmapped)
    raise_unmapped(unmapped, rec)
    rows_all = natural + dedupe(synthetic, seen, dropped)

    assign_splits(rows_all, rec, seed)
    copies = overlap_copies(rows_all, rec.multilingual_train_overlap, seed)
    if copies:
        constructions["multilingual_train_overlap"] = _overlap_record(rows_all, copies, rec)
    pool = rows_to_frame(rows_all + copies)
    # A train copy is not a row its source contributed (meta.json's constructions counts it).
    source_counts = _source_counts(
        rec, pool.filter(~pl.col("prompt_id").str.ends_with(COPY_SUFFIX)), counts, dropped)
    overall = agreement(pool["label_a"].to_list(), pool["label_b"].to_list())
    by_split = {}
    for split in SPLITS:
        part = pool.filter(pl.col("split") == split)
        by_split[split] = agreement(part["label_a"].to_list(), part["label_b"].to_list())

    out_dir.mkdir(parents=True, exist_ok=True)
    folder = PoolFolder(out_dir)
    pool_path = gfiles.write_parquet(pool, folder.table)
    agreement_path = gfiles.write_json(_agreement_doc(pool, overall, by_split), folder.agreement)
    meta_path = _write_meta(rec, pool, pool_path, out_dir, seed=seed, digests=digests,
                            counts=counts, constructions=constructions)
    return PoolResult(pool=pool, agreement=overall, agreement_by_split=by_split,
                      source_counts=source_counts, out_dir=out_dir, pool_path=pool_path,
                      agreement_path=agreement_path, meta_path=meta_path, seed=seed)


def _natural_rows(rec: Recipe, data_dir: Path, seed: int, *, digests: dict[str, str],
                  unmapped: dict[tuple[str, str, str], int],
                  counts: dict[str, dict[str, int]]) -> list[PoolRow]:
    """Every source's sampled rows, labelled by both policies (in recipe order)."""
    natural: list[PoolRow] = []
    for sid, src in rec.sources.items():
        got = read_source(src.spec, data_dir, where=f"{rec.path} sources.{sid}")
        digests.update(got.files)
        picked = sample_rows(got.frame, src.take, purpose_rng(seed, "take", sid))
        frame = got.frame
        ids, texts, cats = frame["row_id"].to_list(), frame["text"].to_list(), \
            frame["category"].to_list()
        langs, s0, s1 = frame["lang"].to_list(), frame["span_start"].to_list(), \
            frame["span_end"].to_list()
        for i in picked:
            span = None if s0[i] is None else (int(s0[i]), int(s1[i]))
            row = PoolRow(prompt_id=f"{sid}:{ids[i]}", text=texts[i], source=sid,
                          category=cats[i], lang=langs[i], span=span, split=src.split)
            label_row(row, rec, unmapped, ids[i])
            natural.append(row)
        counts[sid] = {"read": got.n_raw, "empty_skipped": got.n_empty, "sampled": len(picked)}
        logger.info(f"pool: {sid}: {len(picked)} of {got.frame.height} rows")
    return natural


def _synthetic_rows(rec: Recipe, natural: list[PoolRow], data_dir: Path, seed: int, *,
                    digests: dict[str, str], unmapped: dict[tuple[str, str, str], int]
                    ) -> tuple[list[PoolRow], dict[str, Any]]:
    """The recipe's constructions (copyright, compound, jailbreak) and what each made."""
    constructions: dict[str, Any] = {}
    synthetic: list[PoolRow] = []
    if rec.copyright is not None:
        titles = read_titles(rec, data_dir, digests)
        banned: set[str] = set()
        if rec.copyright.exclude_titles_from is not None:
            # Read the whole source, not just the sampled rows: every benchmark title stays out.
            src = rec.sources[rec.copyright.exclude_titles_from]
            full = read_source(src.spec, data_dir, where="exclude_titles_from").frame
            banned = benchmark_titles([
                PoolRow(prompt_id="", text=t, source="", category=c, lang="en", span=None)
                for t, c in zip(full["text"].to_list(), full["category"].to_list(),
                                strict=True)])
        rows, constructions["copyright"] = build_copyright(rec, titles, banned, seed)
        for r in rows:
            label_row(r, rec, unmapped, r.prompt_id)
        synthetic.extend(rows)
        constructions["copyright"]["banned_titles"] = len(banned)
    wrappers: list[str] = []
    if rec.wrappers is not None:
        wrappers = read_wrappers(rec, data_dir, digests)
    if rec.compound is not None:
        rows, constructions["compound"] = build_compound(rec, natural, wrappers, seed)
        synthetic.extend(rows)
    if rec.jailbreak is not None:
        rows, constructions["jailbreak"] = build_jailbreak(rec, natural, wrappers, seed,
                                                           unmapped)
        synthetic.extend(rows)
    return synthetic, constructions


def _overlap_record(rows: list[PoolRow], copies: list[PoolRow], rec: Recipe) -> dict[str, Any]:
    """What the multilingual overlap switch did: the share asked, val rows per language and
    how many of them got a train copy."""
    n_val = Counter(r.lang for r in rows if r.split == "val" and r.lang != "en")
    n_copy = Counter(r.lang for r in copies)
    return {"share": rec.multilingual_train_overlap, "n_val": sum(n_val.values()),
            "n_copies": len(copies),
            "by_lang": {lang: {"n_val": n_val[lang], "n_copies": n_copy[lang]}
                        for lang in sorted(n_val)}}


def _source_counts(rec: Recipe, pool: pl.DataFrame, counts: dict[str, dict[str, int]],
                   dropped: Counter[str]) -> pl.DataFrame:
    """Per source: rows read, empty rows skipped, sampled, duplicates dropped, kept."""
    kept = Counter(pool["source"].to_list())
    for sid in [*rec.sources, *SYNTHETIC_SOURCES]:
        if sid in counts or kept[sid]:
            c = counts.setdefault(sid, {"read": 0, "empty_skipped": 0,
                                        "sampled": kept[sid] + dropped[sid]})
            c["duplicates_dropped"] = dropped[sid]
            c["kept"] = kept[sid]
    return pl.DataFrame(
        [{"source": sid, **c} for sid, c in counts.items()],
        schema={"source": pl.String(), "read": pl.Int64(), "empty_skipped": pl.Int64(),
                "sampled": pl.Int64(), "duplicates_dropped": pl.Int64(), "kept": pl.Int64()})


def _agreement_doc(pool: pl.DataFrame, overall: AgreementResult,
                   by_split: Mapping[str, AgreementResult]) -> dict[str, Any]:
    """What ``agreement.json`` holds: overall, by split, by language, per-source disagreement
    and class counts."""
    english = pool.filter(pl.col("lang") == "en")
    by_lang = {"en": agreement(english["label_a"].to_list(), english["label_b"].to_list())}
    other = pool.filter(pl.col("lang") != "en")
    if other.height:
        by_lang["non_en"] = agreement(other["label_a"].to_list(), other["label_b"].to_list())
    disagree = pool.filter(
        pl.col("label_a").is_in(list(UNSAFE)) != pl.col("label_b").is_in(list(UNSAFE)))
    dis_by_source = Counter(disagree["source"].to_list())
    return {
        "overall": overall.to_json(),
        "by_split": {s: a.to_json() for s, a in by_split.items()},
        "by_lang": {k: a.to_json() for k, a in by_lang.items()},
        "binary_disagreement_by_source": dict(sorted(dis_by_source.items())),
        "class_counts": {
            "A": {c: int((pool["label_a"] == c).sum()) for c in CLASSES},
            "B": {c: int((pool["label_b"] == c).sum()) for c in CLASSES},
        },
    }


def _write_meta(rec: Recipe, pool: pl.DataFrame, pool_path: Path, out_dir: Path, *, seed: int,
                digests: Mapping[str, str], counts: dict[str, dict[str, int]],
                constructions: dict[str, Any]) -> Path:
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
    return gfiles.write_meta(
        out_dir, inputs=inputs, seed=seed, recipe=rec.name, n_rows=pool.height,
        pool_sha256=gfiles.sha256_file(pool_path), splits=dict(Counter(pool["split"])),
        sources=counts, constructions=constructions, pillar_coverage=coverage)


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
