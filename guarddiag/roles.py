"""Branch roles: what a branch is *for*, declared once in its spec and carried as data.

A branch spec (branches/*.yaml) declares its roles as flat keys; they travel unchanged
spec → run meta (``meta.json``, section ``roles``) → the predictions table (one column each) →
the analyses, which select runs by role and never by branch name:

=============  ==========================================================================
role column    meaning
=============  ==========================================================================
role           ``teacher`` (its soft labels train other branches; never a student),
               ``reference`` (the reference student recipe every table compares against),
               ``student`` (a study branch), ``control`` (a control for ``control_of``)
route          the route that carried the last label signal: ``head_only`` for a head-only
               recalibration, ``distill`` for a distilled branch, else ``hard_labels``
last_policy    ``A`` or ``B``: the policy of the last label signal that reached the model
               (a distilled branch's is its teacher's; a recalibration's its calibration
               labels')
teacher        the branch it is distilled from (null without distillation)
control_of     the branch it is a control for (null for the study's branches)
variant_of     the branch it is a sensitivity variant of (null for any other branch)
=============  ==========================================================================

Runs that are not branches (the TF-IDF baselines, outside guards) have null roles.

The groups the analyses use are declared here, once, as polars expressions over those
columns (:func:`is_student`, :func:`is_study_branch`, :func:`is_reference`, :func:`is_a_last`,
:func:`is_route_cohort`, :func:`is_variant`).
"""

from __future__ import annotations

from typing import Literal

import polars as pl

from guarddiag.errors import GuarddiagError
from guarddiag.labels import branch_sort_key
from guarddiag.typed import Model

ROLE_KINDS = ("teacher", "reference", "student", "control")
POLICIES = ("A", "B")
ROUTES = ("hard_labels", "distill", "head_only")

RoleKind = Literal["teacher", "reference", "student", "control"]
Policy = Literal["A", "B"]
Route = Literal["hard_labels", "distill", "head_only"]


class BranchRoles(Model):
    """The roles of one branch: the ``roles`` section of a run's meta.json, and one value per
    role column of the predictions table."""

    role: RoleKind
    """teacher, reference, student or control (module docstring)."""
    route: Route
    """The route of the last label signal."""
    last_policy: Policy
    """Policy (A or B) of the last label signal that reached the model."""
    teacher: str | None = None
    """Branch it is distilled from."""
    control_of: str | None = None
    """Branch it is a control for."""
    variant_of: str | None = None
    """Branch it is a sensitivity variant of."""


ROLE_SCHEMA: dict[str, pl.DataType] = {name: pl.String() for name in BranchRoles.model_fields}
"""The role columns of the predictions and score tables (null for runs that are not branches)."""
ROLE_COLUMNS: tuple[str, ...] = tuple(ROLE_SCHEMA)


def _branch() -> pl.Expr:
    return pl.col("guard_kind") == "branch"


def is_student() -> pl.Expr:
    """Student runs: the reference recipe and the study's branches (teachers, controls,
    baselines and outside guards left out) — the branches a span Δb ranges over."""
    return _branch() & pl.col("role").is_in(["reference", "student"])


def is_study_branch() -> pl.Expr:
    """The study's branches proper: students that are neither the reference nor a sensitivity
    variant (the rank test ranks these)."""
    return _branch() & (pl.col("role") == "student") & pl.col("variant_of").is_null()


def is_reference() -> pl.Expr:
    """Runs of the reference student recipe."""
    return _branch() & (pl.col("role") == "reference")


def is_teacher() -> pl.Expr:
    """Runs of a teacher branch (its soft labels train other branches)."""
    return _branch() & (pl.col("role") == "teacher")


def is_a_last() -> pl.Expr:
    """The A-last group: students whose last policy signal is A (the study's E1, E7, E8, E10:
    three recalibrated on policy-A labels, one distilled from the policy-A teacher). Every
    other student is B-last."""
    return is_student() & (pl.col("last_policy") == "A")


def is_route_cohort() -> pl.Expr:
    """The branches a route-matched call compares: the reference, the study's branches and their
    controls, without sensitivity variants (teachers, baselines and outside guards left out)."""
    return (_branch() & pl.col("role").is_in(["reference", "student", "control"])
            & pl.col("variant_of").is_null())


def is_variant() -> pl.Expr:
    """Runs of a sensitivity variant of another branch."""
    return _branch() & pl.col("variant_of").is_not_null()


def check_roles(table: pl.DataFrame, *, source: str) -> None:
    """A one-line error when a branch run of ``table`` has no role (a table written before
    roles existed, or built without them): the analyses could only guess its group."""
    missing = [c for c in ("guard_kind", *ROLE_COLUMNS) if c not in table.columns]
    if missing:
        raise GuarddiagError(f"{source}: missing role column(s) {', '.join(missing)}")
    bad = table.filter(_branch() & (pl.col("role").is_null() | pl.col("route").is_null()
                                     | pl.col("last_policy").is_null()))
    if bad.height:
        run = bad["run_id"][0] if "run_id" in bad.columns else bad["branch"][0]
        raise GuarddiagError(
            f"{source}: branch run {run!r} has no role, route or last_policy; its predictions "
            f"predate branch roles: run `guarddiag train` (finished runs only get their roles "
            f"written) and `guarddiag predict` again")


def names_where(table: pl.DataFrame, expr: pl.Expr) -> tuple[str, ...]:
    """Branch names of the runs of ``table`` that ``expr`` selects, in the specs' reading
    order (:func:`guarddiag.labels.branch_sort_key`)."""
    return tuple(sorted(set(table.filter(expr)["branch"].drop_nulls().to_list()),
                        key=branch_sort_key))
