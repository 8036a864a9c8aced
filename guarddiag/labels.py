"""The label schema: four coarse classes, the binary read-out, and the 24 harm pillars.

The binary read-out is never hidden in code: a :class:`BinaryMapping` names which classes count
as unsafe, and every score records the mapping it used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from guarddiag.errors import GuarddiagError, unknown_name
from guarddiag.paths import manifests_dir
from guarddiag.spec import Problems, load_yaml_mapping
from guarddiag.typed import SpecModel, read_values

CLASSES: tuple[str, ...] = ("GENERIC_SAFE", "BOUNDARY_SAFE", "HARMFUL", "COMPOUND")
"""The four coarse classes, in the order of every probability vector and model head."""

CLASS_INDEX: dict[str, int] = {name: i for i, name in enumerate(CLASSES)}

PROB_COLUMNS: tuple[str, ...] = tuple(f"p_{name}" for name in CLASSES)
"""Column names of the class probabilities in the predictions table."""

POLICIES: tuple[str, ...] = ("A", "B")
"""A: a moderator rulebook. B: genuinely harmful intent only (SPEC §2)."""


@dataclass(frozen=True)
class BinaryMapping:
    """Which coarse classes count as *unsafe* in the binary read-out."""

    name: str
    """``loose`` or ``strict`` (or a user-defined name)."""
    unsafe: frozenset[str]
    """Classes read as unsafe; every other class is safe."""
    description: str = ""

    def is_unsafe(self, label: str) -> bool:
        return label in self.unsafe

    def unsafe_mask(self) -> tuple[bool, ...]:
        """Per class, in :data:`CLASSES` order: does it count as unsafe?"""
        return tuple(name in self.unsafe for name in CLASSES)


LOOSE = BinaryMapping(
    "loose",
    frozenset({"HARMFUL", "COMPOUND"}),
    "unsafe = HARMFUL or COMPOUND; BOUNDARY_SAFE reads as safe (the default)",
)
STRICT = BinaryMapping(
    "strict",
    frozenset({"BOUNDARY_SAFE", "HARMFUL", "COMPOUND"}),
    "unsafe = BOUNDARY_SAFE, HARMFUL or COMPOUND; the controversial class reads as unsafe",
)
MAPPINGS: dict[str, BinaryMapping] = {m.name: m for m in (LOOSE, STRICT)}


def get_mapping(name: str) -> BinaryMapping:
    """Look a binary mapping up by name, with a one-line error for an unknown one."""
    try:
        return MAPPINGS[name]
    except KeyError:
        raise unknown_name("binary mapping", name, tuple(MAPPINGS)) from None


def check_class(label: str, where: str) -> str:
    """Return ``label`` if it is one of the four classes, else raise naming ``where``."""
    if label not in CLASS_INDEX:
        raise GuarddiagError(
            f"{where}: class {label!r} is not one of {', '.join(CLASSES)}"
        )
    return label


@dataclass(frozen=True)
class Pillar:
    """One of the 24 harm pillars of the default taxonomy."""

    id: str
    """Short identifier, e.g. ``copyright``."""
    number: int
    """1-based position; fixes the order of the pillar heads."""
    title: str
    policy_note: str = ""
    """Where the policies differ on it (e.g. "A-only")."""


class PillarFields(SpecModel):
    """One entry of ``pillars.yaml`` (its comments say what each key means)."""

    id: Any
    title: Any
    policy_note: Any = ""
    sorry_domains: Any = None


@cache
def pillars() -> tuple[Pillar, ...]:
    """The pillar taxonomy from ``data_manifests/policies/pillars.yaml``, in head order."""
    path = manifests_dir() / "policies" / "pillars.yaml"
    doc = load_yaml_mapping(path)
    rows = doc.get("pillars")
    if not isinstance(rows, list) or not rows:
        raise GuarddiagError(f'{path} field "pillars": expected a non-empty list')
    out, problems = [], Problems()
    for i, row in enumerate(rows, start=1):
        values = read_values(PillarFields, row, where=f"{path} pillars[{i}]", problems=problems)
        if {"id", "title"} <= set(values):
            out.append(Pillar(id=str(values["id"]), number=i, title=str(values["title"]),
                              policy_note=str(values["policy_note"])))
    problems.raise_if_any(str(path))
    ids = [p.id for p in out]
    if len(set(ids)) != len(ids):
        raise GuarddiagError(f"{path}: pillar ids must be unique")
    return tuple(out)


def pillar_ids() -> tuple[str, ...]:
    return tuple(p.id for p in pillars())


def check_pillars(tags: Sequence[str], where: str) -> list[str]:
    """Validate pillar tags against the taxonomy."""
    known = set(pillar_ids())
    for tag in tags:
        if tag not in known:
            raise unknown_name("pillar", tag, pillar_ids(), where)
    return list(tags)


def class_probs_to_unsafe(probs: Mapping[str, float], mapping: BinaryMapping) -> float:
    """Probability of *unsafe* under ``mapping`` from a class-probability mapping."""
    return float(sum(probs[name] for name in CLASSES if name in mapping.unsafe))


# ─── the reading order of branches (every tie-break in tables and plans uses it) ───────────────

def branch_order(branch: str | None, role: str | None = None) -> int:
    """Reading order of branch names, as the specs number them and the report shows them: the
    reference recipe, E1…E10 by number, other branches, then the teachers; None last. A branch's
    ``role`` (:mod:`guarddiag.roles`), when known, says which is a teacher or the reference;
    without it the names do (``T_*`` teachers, ``reference``)."""
    if branch is None:
        return 100_000
    if role == "teacher" or (role is None and branch.startswith("T_")):
        return 10_000
    if role == "reference" or (role is None and branch == "reference"):
        return 0
    if branch.startswith("E") and branch[1:].isdigit():
        return int(branch[1:])
    return 1_000


def branch_sort_key(branch: str | None, role: str | None = None) -> tuple[int, str]:
    """Sort key of a branch name: :func:`branch_order`, then the name (total and stable, so a
    tie between two values is always broken the same way)."""
    return branch_order(branch, role), branch or ""
