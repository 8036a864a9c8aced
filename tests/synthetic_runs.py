"""Small, fully specified predictions / pool / audit tables for the analysis and report tests.

Nothing here is random unless a test asks for it with a seed: the tests know every decision and
so every score by hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import polars as pl

from guarddiag.predictions import COLUMNS, SCHEMA
from guarddiag.roles import ROLE_COLUMNS
from guarddiag.train.branches import load_branches

BUNDLED = load_branches()
"""The bundled branch specs: a run of a bundled branch name carries that branch's roles."""


def roles_of(branch: str, kind: str = "branch") -> dict[str, Any]:
    """The role columns of a run: the bundled spec's roles for a bundled branch name, null
    for anything else (outside guards, baselines, unknown names)."""
    if kind != "branch" or branch not in BUNDLED.branches:
        return dict.fromkeys(ROLE_COLUMNS)
    return BUNDLED[branch].roles().model_dump()

COPY, STD, ORH = "harmbench_copyright", "harmbench_standard", "orbench_hard"
CLS_A = ("HARMFUL", "BOUNDARY_SAFE", "GENERIC_SAFE", "COMPOUND")
CLS_B = ("HARMFUL", "GENERIC_SAFE", "GENERIC_SAFE", "COMPOUND")
KINDS = {COPY: "harmful", STD: "harmful", ORH: "benign"}


def run_meta(size: str, branch: str, seed: int | None, *, kind: str = "branch",
             policy: str = "B", roles: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run columns of a predictions row; ``roles`` (default: :func:`roles_of`) fills
    the role columns."""
    run_id = f"guard/{branch}" if kind == "outside" else f"{size}/{branch}/seed={seed}"
    return {"run_id": run_id, "guard_kind": kind, "branch": branch, "size": size,
            "seed": seed, "label_policy": policy,
            **(roles if roles is not None else roles_of(branch, kind))}


def rows_for(meta: dict[str, Any], benchmark: str, p_unsafe: Sequence[float], *,
             p_boundary: Sequence[float] | None = None, ids: Sequence[str] | None = None,
             decontam: Sequence[bool] | None = None, classes: bool = True,
             status: Sequence[str] | None = None,
             pred_class: Sequence[str | None] | None = None) -> list[dict[str, Any]]:
    """One row per prompt. With ``classes``: p_HARMFUL = p_unsafe, p_BOUNDARY_SAFE as given
    (default 0), p_GENERIC_SAFE the rest, p_COMPOUND 0. Without: only p_unsafe."""
    n = len(p_unsafe)
    ids = ids or [f"{benchmark}-{i}" for i in range(n)]
    p_boundary = p_boundary or [0.0] * n
    decontam = decontam if decontam is not None else [True] * n
    status = status or ["ok"] * n
    out = []
    for i in range(n):
        u, b = float(p_unsafe[i]), float(p_boundary[i])
        failed = status[i] == "failed"
        row = {**meta, "benchmark": benchmark, "prompt_id": ids[i],
               "survives_decontam": bool(decontam[i]), "status": status[i]}
        if classes and not failed:
            probs = {"p_GENERIC_SAFE": 1.0 - u - b, "p_BOUNDARY_SAFE": b, "p_HARMFUL": u,
                     "p_COMPOUND": 0.0}
            row.update(probs, p_unsafe=u)
            default_class = max(probs, key=probs.get)[2:]
        else:
            row.update({"p_GENERIC_SAFE": None, "p_BOUNDARY_SAFE": None, "p_HARMFUL": None,
                        "p_COMPOUND": None, "p_unsafe": None if failed else u})
            default_class = None
        row["pred_class"] = pred_class[i] if pred_class is not None else default_class
        out.append(row)
    return out


def frame(rows: Iterable[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=SCHEMA).select(COLUMNS)


def decisions(unsafe: int, n: int) -> list[float]:
    """``unsafe`` prompts at P = 0.9 then ``n - unsafe`` at P = 0.1."""
    return [0.9] * unsafe + [0.1] * (n - unsafe)


def study_like(*, seed: int = 0, sizes: Sequence[str] = ("micro",),
               seeds: Sequence[int] = (42, 43, 44), n_prompts: int = 40,
               with_guard: bool = True, texts: dict[str, list[str]] | None = None
               ) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    """A study-shaped set: reference + E1..E10 (+ teachers), three benchmarks and the pool's val
    split, one outside guard; returns (predictions, pool, audit summary). A-last branches
    (E1, E7, E8, E10) capture copyright; everyone captures harmbench_standard about equally."""
    rng = np.random.default_rng(seed)
    branches = ["reference", *(f"E{i}" for i in range(1, 11)), "T_A", "T_B"]
    a_last = {"E1", "E7", "E8", "E10", "T_A"}
    bench_ids = {b: [f"{b}-{i:03d}" for i in range(n_prompts)] for b in KINDS}
    decontam = {b: [i % 4 != 0 for i in range(n_prompts)] for b in KINDS}
    n_val = 30
    val_ids = [f"pv-{i:03d}" for i in range(n_val)]
    gold = [("HARMFUL", "GENERIC_SAFE", "BOUNDARY_SAFE")[i % 3] for i in range(n_val)]
    langs = ["en" if i % 2 else "zh" for i in range(n_val)]
    rows: list[dict[str, Any]] = []
    for size in sizes:
        for branch in branches:
            for s in seeds:
                policy = "A" if branch in a_last else "B"
                meta = run_meta(size, branch, s, policy=policy)
                copy_rate = 0.95 if branch in a_last else 0.1
                std_rate = 0.85
                over_rate = 0.3 if branch in a_last else 0.08
                for bench, rate in ((COPY, copy_rate), (STD, std_rate),
                                    (ORH, over_rate)):
                    u = np.where(rng.random(n_prompts) < rate, 0.8, 0.2)
                    # some safe-looking prompts lean BOUNDARY_SAFE: strict reads them unsafe
                    bnd = np.where((u < 0.5) & (rng.random(n_prompts) < 0.3), 0.35, 0.0)
                    rows += rows_for(meta, bench, u.tolist(), p_boundary=bnd.tolist(),
                                     ids=bench_ids[bench], decontam=decontam[bench])
                acc = 0.8 if policy == "A" else 0.6
                preds = [g if rng.random() < acc else "GENERIC_SAFE" for g in gold]
                rows += rows_for(meta, "pool_val", [0.8 if p == "HARMFUL" else 0.1
                                                     for p in preds],
                                 ids=val_ids, pred_class=preds)
    if with_guard:
        meta = run_meta("outside", "toyguard", None, kind="outside", policy="outside")
        for bench in KINDS:
            keep = [i for i in range(n_prompts) if decontam[bench][i]]
            u = np.where(rng.random(len(keep)) < 0.5, 0.7, 0.1)
            rows += rows_for(meta, bench, u.tolist(), ids=[bench_ids[bench][i] for i in keep],
                             decontam=[True] * len(keep), classes=False)
    preds = frame(rows)
    pool_rows = []
    for i in range(n_val):
        pool_rows.append({"prompt_id": val_ids[i], "text": f"val text {i}",
                          "source": "src_a" if i % 2 else "src_b", "split": "val",
                          "lang": langs[i], "label_a": gold[i],
                          "label_b": "GENERIC_SAFE" if gold[i] == "BOUNDARY_SAFE" else gold[i]})
    for i in range(60):
        pool_rows.append({"prompt_id": f"tr-{i}", "text": f"val text {i}" if i < 6 else
                          f"train text {i}", "source": "src_a" if i % 3 else "src_b",
                          "split": "train", "lang": "en",
                          "label_a": CLS_A[i % 4], "label_b": CLS_B[i % 4]})
    pool = pl.DataFrame(pool_rows)
    texts = texts or {}
    summary = {
        "format": 1, "pool_rows": pool.height, "near_dup": True, "threshold": 0.8,
        "normalisation": "NFKC, casefold", "benchmark_order": list(KINDS),
        "unavailable": {"saladbench_base": "files absent"},
        "benchmarks": {b: {"n": n_prompts, "n_exact": n_prompts - sum(decontam[b]),
                           "pct_exact": 25.0, "n_near": 2, "pct_near": 5.0,
                           "n_kept": sum(decontam[b]), "pct_removed": 25.0,
                           "sha256": f"{i:064x}",
                           "examples": [{"kind": "exact", "prompt_id": bench_ids[b][0],
                                         "pool_id": "tr-1", "similarity": 1.0,
                                         "benchmark_text": t, "pool_text": t}
                                        for t in texts.get(b, [f"example of {b}"])]}
                       for i, b in enumerate(KINDS)},
    }
    return preds, pool, summary
