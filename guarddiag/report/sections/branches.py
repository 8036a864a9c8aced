"""The branches and the glossary: every branch and control of the scored runs with its roles
(route, last policy, teacher, control of, variant of), its labels column, training rows and
the group the analyses put it in — all read from the runs' roles (declared in the branch
specs, :mod:`guarddiag.roles`) and meta.json — and every symbol the report uses, defined once
(:mod:`guarddiag.report.glossary`)."""

from __future__ import annotations

from typing import Any

import polars as pl

from guarddiag.labels import branch_sort_key
from guarddiag.report.context import ReportContext
from guarddiag.report.document import Block, Column, Definitions, Paragraph, Section, Table
from guarddiag.report.glossary import glossary
from guarddiag.report.jsonable import records
from guarddiag.roles import is_a_last, is_student

TITLE = "Branches and terms"

_SCHEMA: dict[str, Any] = {
    "branch": pl.String, "group": pl.String, "role": pl.String, "route": pl.String,
    "last_policy": pl.String, "label_policy": pl.String, "teacher": pl.String,
    "control_of": pl.String, "variant_of": pl.String, "sizes": pl.String, "n_runs": pl.Int64,
    "train_rows": pl.String}

COLUMNS = (Column("branch", "branch"), Column("group", "group"), Column("route", "route"),
           Column("last_policy", "last policy"), Column("label_policy", "labels"),
           Column("teacher", "teacher"), Column("control_of", "control for"),
           Column("variant_of", "variant of"), Column("n_runs", "runs", "int"),
           Column("train_rows", "training rows"))


def _group(r: dict[str, Any]) -> str:
    if r["variant_of"]:
        return "variant (sensitivity only)"
    if r["role"] == "teacher":
        return "teacher (not a student)"
    if r["role"] == "control":
        return "control"
    if r["a_last"]:
        return "A-last"
    return "B-last (reference)" if r["role"] == "reference" else "B-last"


def branch_table(ctx: ReportContext) -> pl.DataFrame:
    """One row per branch of the scored runs, in the specs' reading order."""
    p = ctx.results.inputs.predictions.filter(pl.col("guard_kind") == "branch")
    if not p.height:
        return pl.DataFrame(schema=_SCHEMA)
    runs = p.select("run_id", "branch", "size", "role", "route", "last_policy", "label_policy",
                    "teacher", "control_of", "variant_of",
                    (is_student() & is_a_last()).alias("a_last")).unique()
    meta = ctx.results.inputs.run_meta
    rows_of: dict[str, list[int]] = {}
    if meta is not None:
        for r in meta.filter(pl.col("train_rows").is_not_null()).iter_rows(named=True):
            rows_of.setdefault(r["branch"], []).append(r["train_rows"])
    out = []
    for branch in sorted(set(runs["branch"].to_list()), key=branch_sort_key):
        part = runs.filter(pl.col("branch") == branch)
        r = part.row(0, named=True)
        rows = rows_of.get(branch)
        out.append({
            "branch": branch, "group": _group(r), "role": r["role"],
            "route": (r["route"] or "").replace("_", " "), "last_policy": r["last_policy"],
            "label_policy": ", ".join(sorted(set(part["label_policy"].drop_nulls().to_list()))),
            "teacher": r["teacher"], "control_of": r["control_of"],
            "variant_of": r["variant_of"], "sizes": ", ".join(sorted(set(part["size"]))),
            "n_runs": part.height,
            "train_rows": None if not rows else (f"{min(rows):,}" if min(rows) == max(rows)
                                                 else f"{min(rows):,}–{max(rows):,}")})
    return pl.DataFrame(out, schema=_SCHEMA)


def section_branches(ctx: ReportContext) -> Section:
    table, terms = branch_table(ctx), glossary()
    blocks: list[Block] = []
    if table.height:
        blocks.append(Table(
            "branches", "Every branch of the scored runs, from its spec's roles and its runs' "
            "meta.json. group: where the analyses put it — A-last (last policy A) against "
            "B-last; teachers, controls and variants enter no A/B contrast. labels: the runs' "
            "label-policy column, which can differ from the last policy that sets the group. "
            "training rows: from meta.json ('—' without one).", COLUMNS, table))
    else:
        blocks.append(Paragraph("No branch runs were scored: only outside guards or baselines."))
    blocks += [Paragraph("Every symbol and abbreviation of this report; its first use links "
                         "here."), Definitions(terms)]
    return Section("branches", TITLE, tuple(blocks),
                   {"branches": records(table), "glossary": dict(terms)})
