"""Group-aware, stratified, seeded train/val/cal split assignment of the pool rows."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence

from guarddiag.pool.recipe import Recipe
from guarddiag.pool.rows import PoolRow, purpose_rng
from guarddiag.pool.spec import UNSAFE


def _binary_disagrees(row: PoolRow) -> bool:
    return (row.labels["A"] in UNSAFE) != (row.labels["B"] in UNSAFE)


def assign_splits(rows: Sequence[PoolRow], recipe: Recipe, seed: int) -> None:
    """Group-aware, stratified, seeded split assignment.

    Rows linked by a shared key (see :class:`PoolRow`) form one group and share a split, so no
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
    groups: dict[str, list[PoolRow]] = {}
    for r in free:
        groups.setdefault(find(r.keys[0]), []).append(r)
    strata: dict[tuple[str, str, bool], list[list[PoolRow]]] = defaultdict(list)
    for members in groups.values():
        dis = any(_binary_disagrees(m) for m in members)
        strata[(members[0].labels["A"], members[0].labels["B"], dis)].append(members)
    for key in sorted(strata):
        glist = strata[key]
        rng = purpose_rng(seed, "split", *map(str, key))
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



OVERLAP_SALT = "multilingual-train-overlap"
"""Salt of the hash order that picks which non-English val rows get a train copy."""
COPY_SUFFIX = "@train-copy"
"""Appended to a val row's prompt id to name its train copy."""


def overlap_copies(rows: Sequence[PoolRow], share: float, seed: int) -> list[PoolRow]:
    """Train copies of ``share`` of the non-English val rows, per language.

    Mirrors the study, whose multilingual val rows sat 69.3% in policy-A training files: in
    each language, the first ``round(share × n)`` val rows in the hash order of (seed, prompt
    id) get a copy in train — same text, labels, pillars and source, prompt id
    ``<id>@train-copy``. Each branch then labels the copy by its own policy mix, like any other
    train row. English val rows never get one (English val chooses checkpoints).
    """
    if share <= 0:
        return []
    by_lang: dict[str, list[PoolRow]] = defaultdict(list)
    for r in rows:
        if r.split == "val" and r.lang != "en":
            by_lang[r.lang].append(r)
    out: list[PoolRow] = []
    for lang in sorted(by_lang):
        members = sorted(by_lang[lang], key=lambda r: (_overlap_key(seed, r.prompt_id),
                                                       r.prompt_id))
        for r in members[:round(share * len(members))]:
            out.append(PoolRow(prompt_id=r.prompt_id + COPY_SUFFIX, text=r.text, source=r.source,
                               category=r.category, lang=r.lang, span=r.span,
                               labels=dict(r.labels), pillars=dict(r.pillars), keys=r.keys,
                               split="train", norm=r.norm))
    return out


def _overlap_key(seed: int, prompt_id: str) -> bytes:
    return hashlib.sha256(f"{OVERLAP_SALT}\x1f{seed}\x1f{prompt_id}".encode()).digest()
