"""Branch specs (branches/*.yaml): how a labelling policy reaches one trained guard.

A branch is one recipe: which route(s) carry the policy (hard labels, distillation from a
teacher, head-only recalibration of a parent), which rows carry policy-A labels, the optimiser
budget, and its roles (:mod:`guarddiag.roles`: what the branch is for, the policy of its last
label signal, what it is a control for). Specs are flat YAML, one file per branch, named by
their file stem, read through one typed model (:class:`BranchSpec`, :func:`guarddiag.typed.
validate`) and validated as a set: teachers, parents and controlled branches must exist, no
cycles, fractions in [0, 1], no unknown keys, known sizes, roles consistent with the recipe —
every problem reported at once, each naming file and field.

A plan expands branches × sizes × seeds into runs (``<size>/<branch>/seed=<s>``) in dependency
order (a teacher or parent before the runs that need it; ties in the branches' reading order),
adding the runs a requested branch depends on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import ConfigDict, Field, PrivateAttr, field_validator

from guarddiag.errors import GuarddiagError, did_you_mean, unknown_name
from guarddiag.labels import branch_sort_key
from guarddiag.model.sizes import get_size, size_names, size_up
from guarddiag.paths import branches_dir
from guarddiag.roles import ROUTES, BranchRoles, Policy, RoleKind, Route
from guarddiag.runs import run_id
from guarddiag.spec import Problems, SpecError, load_yaml_mapping
from guarddiag.typed import Model, name_list, validate

if TYPE_CHECKING:
    from guarddiag.train.options import PlanOptions

ROUTE_SETS = ({"hard_labels"}, {"hard_labels", "distill"}, {"head_only"})
SIZE_MODES = ("same", "one_up")
CALIBRATION_SPLITS = ("train", "cal", "val")
CALIBRATION_SOURCES = ("all", "disagreement")
VARIANT_TAG = re.compile(r"^[A-Za-z0-9_.]+$")
"""The tag of a sensitivity variant's name, ``<variant_of>-<tag>`` (``E6-a05``)."""
ROLE_KEYS = ("role", "last_policy", "control_of")
"""The role keys a spec declares beside its recipe (``routes``, ``teacher`` and ``variant_of``
are recipe keys that are roles too); roles never change what a run learns, so they stay out of
the run's fingerprint (:meth:`BranchSpec.resolved`)."""

Fraction = Annotated[float, Field(ge=0.0, le=1.0)]


class BranchSpec(Model):
    """One branch recipe, as resolved from its YAML file (defaults filled in)."""

    model_config = ConfigDict(strict=True)

    name: str
    """Branch name; equals the file stem (``E1``, ``T_A``, ``reference``…)."""
    routes: tuple[Route, ...]
    """``[hard_labels]``, ``[hard_labels, distill]`` or ``[head_only]``."""
    policy_a_fraction: Fraction
    """Share of rows whose labels (class and pillars) come from policy A; the rest use B.
    Rows are assigned by a hash of their prompt id, so a smaller share is a subset of a larger."""
    epochs: int = Field(ge=1)
    lr: float = Field(gt=0.0)
    batch_size: int = Field(ge=1)
    role: RoleKind
    """``teacher``, ``reference``, ``student`` or ``control`` (:mod:`guarddiag.roles`)."""
    last_policy: Policy
    """Policy (A or B) of the last label signal that reached the model: a distilled branch's
    teacher's, a recalibration's (or a hard-label branch's) labels' where they are all one
    policy."""
    control_of: str | None = None
    """The branch this one is a control for (role ``control``); null for the study's branches."""
    description: str = ""
    train_rows: int | None = Field(default=None, ge=1)
    """Rows drawn from the pool's train split (hash order; null = all of them)."""
    val_rows: int | None = Field(default=2000, ge=1)
    """Rows of the val split that choose the kept checkpoint (null = all)."""
    size: str = "same"
    """``same`` (the --sizes value), ``one_up`` (teachers: micro→tiny, base→large) or a size."""
    fixed_seed: int | None = Field(default=None, ge=0)
    """Train once at this seed whatever --seeds says (teachers: every student seed distils from
    the same teacher, so the seed floor measures the student recipe)."""
    pillar_weight: float = Field(default=1.0, ge=0.0)
    span_weight: float = Field(default=1.0, ge=0.0)
    weight_decay: float = Field(default=0.01, ge=0.0)
    evals_per_epoch: int = Field(default=2, ge=1)
    # hard_labels
    max_length: int | None = Field(default=None, ge=8)
    anchors: bool = False
    """Add the policy-refusal anchors to the mix: a fixed 25% of the train rows policy A blocks
    and B allows, on their policy-A label (:func:`guarddiag.train.rows.policy_anchor_mask`);
    the ones outside the train sample are added as rows (:func:`~guarddiag.train.rows.
    training_frame`)."""
    warmup_fraction: float = Field(default=0.06, ge=0.0, lt=1.0)
    # distill
    teacher: str | None = None
    distill_weight: Fraction = 0.8
    """Weight α of the teacher term: loss = α·τ²·KL(teacher‖student) + (1−α)·CE(hard)."""
    temperature: float = Field(default=4.0, gt=0.0)
    # head_only
    parent: str | None = None
    calibration_split: Literal["train", "cal", "val"] = "train"
    """Where calibration rows come from: ``cal`` (the disagreement-enriched split the pool builds
    for this route), ``train`` (the parent's train sample) or ``val``."""
    calibration_fraction: float | None = Field(default=None, gt=0.0, le=1.0)
    """Calibration set size as a share of the parent's train sample (``train_rows``), whichever
    split the rows come from; a split with fewer rows is resampled with replacement."""
    calibration_source: Literal["all", "disagreement"] = "all"
    """``all`` rows, or only ``disagreement`` rows (label_a ≠ label_b) plus anchors."""
    generic_anchor_fraction: float = Field(default=0.0, ge=0.0, lt=1.0)
    """Share of the calibration set that is GENERIC_SAFE anchor rows (both policies agree)."""
    calibration_swap: Literal["none", "agreement"] = "none"
    """``agreement`` (a head-only control): the set is drawn as above, then every row on which
    the policies disagree is replaced by a row of the same split on which they agree, of the
    same policy-A class (anchors kept). The control then sees its A branch's size and class
    balance and no row that the policy decides: A branch − control is the policy's content."""
    variant_of: str | None = None
    """A sensitivity variant of this branch (name ``<variant_of>-<tag>``): trained like any
    branch, reported only in its own table (the distillation-weight table), never in the
    ten-branch rank test, Table 1, the span Δb, the load call or the seed floor."""
    _path: str = PrivateAttr(default="")

    @property
    def path(self) -> str:
        """The YAML file the spec was read from (empty for a spec built in code)."""
        return self._path

    @field_validator("routes", mode="before")
    @classmethod
    def _route_list(cls, value: Any) -> Any:
        """A route name or a list of them, in the routes' order; one valid combination."""
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise ValueError("expected a list of route names")
        unknown = [v for v in value if v not in ROUTES]
        if unknown:
            raise ValueError(f"unknown route {unknown[0]!r} ({did_you_mean(unknown[0], ROUTES)})")
        if set(value) not in ROUTE_SETS or len(set(value)) != len(value):
            raise ValueError("not a valid combination: use [hard_labels], [hard_labels, "
                             "distill] or [head_only]")
        return tuple(r for r in ROUTES if r in value)

    @field_validator("description", mode="after")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()

    @property
    def head_only(self) -> bool:
        return "head_only" in self.routes

    @property
    def distill(self) -> bool:
        return "distill" in self.routes

    @property
    def last_route(self) -> Route:
        """The route that carried the last label signal (the roles' ``route``)."""
        return self.routes[-1]

    def roles(self) -> BranchRoles:
        """The branch's roles, as run meta and the predictions table carry them."""
        return BranchRoles(role=self.role, route=self.last_route, last_policy=self.last_policy,
                           teacher=self.teacher, control_of=self.control_of,
                           variant_of=self.variant_of)

    def depends_on(self) -> list[tuple[str, str]]:
        """(field, branch) pairs this branch needs trained first."""
        out = []
        if self.teacher:
            out.append(("teacher", self.teacher))
        if self.parent:
            out.append(("parent", self.parent))
        return out

    def label_policy(self) -> str:
        """``A``, ``B`` or a mix like ``A25+B75`` (``+anchors`` when anchors are on)."""
        pct = round(100 * self.policy_a_fraction)
        text = "A" if pct == 100 else "B" if pct == 0 else f"A{pct}+B{100 - pct}"
        return text + ("+anchors" if self.anchors else "")

    def resolved(self) -> dict[str, Any]:
        """The recipe as the run fingerprint hashes it: every key but the roles (a role says
        what a run is for, not what it learns), ``variant_of`` only when set (so the
        fingerprints of runs made before variants and roles existed do not change)."""
        out = self.model_dump(exclude=set(ROLE_KEYS))
        if out["variant_of"] is None:
            out.pop("variant_of")
        if out["calibration_swap"] == "none":  # as above: older runs keep their fingerprints
            out.pop("calibration_swap")
        out["routes"] = list(self.routes)
        return out


# Which keys a route may set; a key outside its routes is a spec error, not silently ignored.
_ROUTE_KEYS = {
    "hard_labels": {"max_length", "anchors", "warmup_fraction"},
    "distill": {"teacher", "distill_weight", "temperature"},
    "head_only": {"parent", "calibration_split", "calibration_fraction", "calibration_source",
                  "generic_anchor_fraction", "calibration_swap"},
}
_ROUTE_REQUIRED = {"hard_labels": {"max_length", "train_rows"}, "distill": {"teacher"},
                   "head_only": {"parent", "calibration_fraction"}}
assert set().union(*_ROUTE_KEYS.values()) <= set(BranchSpec.model_fields)


@dataclass(frozen=True)
class BranchSet:
    """Every branch of a folder, validated together."""

    folder: Path
    branches: dict[str, BranchSpec]

    def __getitem__(self, name: str) -> BranchSpec:
        try:
            return self.branches[name]
        except KeyError:
            raise unknown_name("branch", name, tuple(self.branches), str(self.folder)) from None

    def names(self) -> list[str]:
        """Branch names in the reading order the report uses (:func:`guarddiag.labels.
        branch_sort_key`: reference, E1…E10, others, teachers last)."""
        return sorted(self.branches, key=lambda n: branch_sort_key(n, self.branches[n].role))


# ----------------------------------------------------------------------------- loading

def load_branches(folder: str | Path | None = None) -> BranchSet:
    """Load and validate every ``*.yaml`` under ``folder`` (default: the bundled branches/)."""
    folder = Path(folder) if folder is not None else branches_dir()
    if not folder.is_dir():
        raise GuarddiagError(f"{folder}: branches folder not found")
    files = sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml"))
    if not files:
        raise GuarddiagError(f"{folder}: no branch specs (*.yaml) found")
    problems = Problems()
    raw: dict[str, tuple[Path, dict[str, Any]]] = {}
    for path in files:
        try:
            doc = load_yaml_mapping(path)
        except GuarddiagError as exc:
            problems.items.append(str(exc))
            continue
        if path.stem in raw:
            problems.add(str(path), f"a second spec for branch {path.stem!r}")
            continue
        raw[path.stem] = (path, doc)
    specs: dict[str, BranchSpec] = {}
    for stem, (path, doc) in raw.items():
        spec = _parse(path, doc, problems)
        if spec is not None:
            specs[stem] = spec
    paths = {stem: path for stem, (path, _) in raw.items()}
    _check_links(specs, paths, problems)
    _check_roles(specs, paths, problems)
    problems.raise_if_any(f"branch specs in {folder}")
    return BranchSet(folder, specs)


def _where(path: Path, key: str) -> str:
    return f'{path} field "{key}"'


def _parse(path: Path, doc: dict[str, Any], problems: Problems) -> BranchSpec | None:
    """One spec through the typed model, plus the checks that span its keys."""
    n_before = len(problems.items)
    spec: BranchSpec | None = None
    try:
        spec = validate(BranchSpec, doc, where=path)
    except SpecError as exc:
        problems.items.extend(exc.problems)
    routes = spec.routes if spec is not None else _valid_routes(doc.get("routes"))
    if routes is not None:
        _check_route_keys(path, doc, routes, problems)
    name = doc.get("name")
    if "name" in doc and name != path.stem:
        problems.add(_where(path, "name"), f"{name!r} must equal the file stem {path.stem!r}")
    if "size" in doc:
        _check_size(path, doc, routes, problems)
    if len(problems.items) > n_before or spec is None:
        return None
    spec._path = str(path)
    return spec


def _valid_routes(value: Any) -> tuple[str, ...] | None:
    """The routes of a spec that failed elsewhere, when they alone are valid (so the route
    keys are still checked and every problem is reported at once)."""
    try:
        return BranchSpec._route_list(value)
    except ValueError:
        return None


def _check_route_keys(path: Path, doc: dict[str, Any], routes: Sequence[str],
                      problems: Problems) -> None:
    """Keys of routes the branch does not take are errors; each route's own keys are needed."""
    allowed = set().union(*(_ROUTE_KEYS[r] for r in routes))
    for key in doc:
        owners = [r for r, keys in _ROUTE_KEYS.items() if key in keys]
        if owners and key not in allowed:
            problems.add(_where(path, key),
                         f"applies only to route {' or '.join(owners)}, not to "
                         f"[{', '.join(routes)}]")
    for route in routes:
        for key in sorted(_ROUTE_REQUIRED[route] - set(doc)):
            problems.add(_where(path, key), f"required by route {route}")


def _check_size(path: Path, doc: dict[str, Any], routes: Sequence[str] | None,
                problems: Problems) -> None:
    size = doc["size"]
    if not isinstance(size, str) or size not in (*SIZE_MODES, *size_names()):
        problems.add(_where(path, "size"),
                     f"unknown model size {size!r}: expected one of "
                     f"{', '.join((*SIZE_MODES, *size_names()))}")
    if routes is not None and "head_only" in routes and size != "same":
        problems.add(_where(path, "size"), "a head-only branch always has its parent's size")


def _check_links(specs: dict[str, BranchSpec], paths: dict[str, Path],
                 problems: Problems) -> None:
    # A spec that failed to parse still exists as a name, so its dependants are not blamed.
    names = sorted(paths)
    for spec in specs.values():
        links = [*spec.depends_on(), *([("control_of", spec.control_of)] if spec.control_of
                                       else [])]
        for key, target in links:
            if target not in paths:
                problems.add(_where(paths[spec.name], key),
                             f"unknown branch {target!r} ({did_you_mean(target, names)})")
            elif target == spec.name:
                problems.add(_where(paths[spec.name], key),
                             "a branch cannot depend on itself" if key != "control_of"
                             else "a branch cannot be a control for itself")
    for spec in specs.values():
        _check_variant(spec, specs, paths, problems)
    reported: set[frozenset[str]] = set()
    for start in sorted(specs, key=lambda n: branch_sort_key(n, specs[n].role)):
        cycle = _find_cycle(start, specs)
        if cycle and frozenset(cycle) not in reported:
            reported.add(frozenset(cycle))
            first = specs[cycle[0]]
            key = next(k for k, t in first.depends_on() if t == cycle[1])
            problems.add(_where(paths[first.name], key),
                         f"dependency cycle {' → '.join(cycle)}")


def _check_variant(spec: BranchSpec, specs: dict[str, BranchSpec], paths: dict[str, Path],
                   problems: Problems) -> None:
    """A variant is named ``<variant_of>-<tag>``, and a branch named ``<other branch>-<tag>``
    is a variant of that branch (unless it is a control: ``E1-ctrl`` may be ``control_of: E1``)."""
    where = _where(paths[spec.name], "variant_of")
    base = spec.variant_of
    if base is None:
        if spec.role == "control":
            return
        head, _, tag = spec.name.rpartition("-")
        if head in paths and VARIANT_TAG.fullmatch(tag):
            problems.add(where, f"a branch named {spec.name!r} is a variant of {head!r}: add "
                                f"variant_of: {head}, or rename it")
        return
    tag = spec.name[len(base) + 1:] if spec.name.startswith(base + "-") else ""
    if not VARIANT_TAG.fullmatch(tag):
        problems.add(where, f"a variant of {base!r} must be named {base}-<tag> (letters, "
                            f"digits, '_' or '.'), not {spec.name!r}")
    elif base not in paths:
        problems.add(where, f"unknown branch {base!r} ({did_you_mean(base, sorted(paths))})")
    elif base in specs and specs[base].variant_of is not None:
        problems.add(where, f"{base!r} is itself a variant; name the branch it varies")


def _implied_policy(spec: BranchSpec, specs: dict[str, BranchSpec]) -> tuple[str, str] | None:
    """(policy, the reason) the recipe implies for the last label signal; None where it implies none
    (a mix of hard labels without a teacher, or a teacher that did not parse)."""
    if spec.distill and spec.teacher is not None:
        teacher = specs.get(spec.teacher)
        if teacher is None:
            return None
        return (teacher.last_policy,
                f"its teacher {spec.teacher}'s last policy is {teacher.last_policy}")
    if spec.policy_a_fraction in (0.0, 1.0):
        policy = "A" if spec.policy_a_fraction == 1.0 else "B"
        what = "calibration" if spec.head_only else "hard"
        return policy, f"all its {what} labels are policy {policy}"
    return None


def _check_roles(specs: dict[str, BranchSpec], paths: dict[str, Path],
                 problems: Problems) -> None:
    """Roles agree with the recipe and with each other (the set is checked as a whole)."""
    for spec in specs.values():
        path = paths[spec.name]
        implied = _implied_policy(spec, specs)
        if implied is not None and implied[0] != spec.last_policy:
            problems.add(_where(path, "last_policy"),
                         f"{implied[1]}, got {spec.last_policy!r}")
        if (spec.role == "control") != (spec.control_of is not None):
            problems.add(_where(path, "control_of" if spec.role == "control" else "role"),
                         "a control names the branch it is a control for (role: control "
                         "with control_of: <branch>), and only a control does")
        if spec.teacher in specs and specs[spec.teacher].role != "teacher":
            problems.add(_where(path, "teacher"),
                         f"{spec.teacher!r} has role {specs[spec.teacher].role!r}; a branch "
                         f"distils from a branch with role teacher")
        if spec.role == "teacher" and spec.variant_of is not None:
            problems.add(_where(path, "role"), "a sensitivity variant is not a teacher")
    references = sorted(n for n, s in specs.items()
                        if s.role == "reference" and s.variant_of is None)
    for extra in references[1:]:
        problems.add(_where(paths[extra], "role"),
                     f"a second reference ({references[0]!r} is the reference); the tables "
                     f"compare every recipe with one reference per size")


def _find_cycle(start: str, specs: dict[str, BranchSpec]) -> list[str] | None:
    path: list[str] = []

    def walk(name: str) -> list[str] | None:
        if name in path:
            return [*path[path.index(name):], name]
        if name not in specs:
            return None
        path.append(name)
        for _, target in specs[name].depends_on():
            if target == name:
                continue
            found = walk(target)
            if found:
                return found
        path.pop()
        return None

    cycle = walk(start)
    return cycle if cycle and cycle[0] == start else None


# ----------------------------------------------------------------------------- planning

@dataclass(frozen=True)
class PlannedRun:
    """One run of a plan: a branch at a size and seed, with the runs it needs."""

    branch: str
    size: str
    seed: int
    teacher: str | None = None
    """Run id of the teacher (distill), if any."""
    parent: str | None = None
    """Run id of the parent (head-only), if any."""

    @property
    def run_id(self) -> str:
        return run_id(self.size, self.branch, self.seed)

    def deps(self) -> list[str]:
        return [d for d in (self.teacher, self.parent) if d]


def resolve_size(spec: BranchSpec, requested: str, branches: BranchSet) -> str:
    """The model size a branch trains at when ``requested`` is asked for."""
    if spec.head_only and spec.parent:
        return resolve_size(branches[spec.parent], requested, branches)
    if spec.size == "same":
        return get_size(requested).name
    if spec.size == "one_up":
        return size_up(requested)
    return get_size(spec.size).name


def plan_runs(branches: BranchSet, plan: PlanOptions) -> list[PlannedRun]:
    """Every run needed for ``plan``'s branches × sizes × seeds
    (:class:`~guarddiag.train.options.PlanOptions`), dependencies first."""
    wanted = select_branches(branches, plan.branches)
    sizes, seeds = plan.sizes, plan.seeds
    runs: dict[str, PlannedRun] = {}

    def add(name: str, requested: str, seed: int) -> str:
        spec = branches[name]
        run_seed = spec.fixed_seed if spec.fixed_seed is not None else seed
        teacher = add(spec.teacher, requested, seed) if spec.distill and spec.teacher else None
        parent = add(spec.parent, requested, run_seed) if spec.head_only and spec.parent \
            else None
        planned = PlannedRun(name, resolve_size(spec, requested, branches), run_seed,
                             teacher, parent)
        runs.setdefault(planned.run_id, planned)
        return planned.run_id

    for size in sizes:
        for seed in seeds:
            for name in wanted:
                add(name, size, seed)
    return _topological(runs)


def select_branches(branches: BranchSet, names: str | Sequence[str]) -> list[str]:
    if isinstance(names, str):
        if names.strip() == "all":
            return branches.names()
        names = name_list(names)
    if not names:
        raise GuarddiagError("--branches: expected 'all' or a comma-separated list of branches")
    return [branches[n].name for n in names]


def _topological(runs: dict[str, PlannedRun]) -> list[PlannedRun]:
    depth: dict[str, int] = {}

    def level(rid: str) -> int:
        if rid not in depth:
            depth[rid] = 1 + max((level(d) for d in runs[rid].deps()), default=-1)
        return depth[rid]

    order = size_names()

    def key(r: PlannedRun) -> tuple:
        return (level(r.run_id), order.index(r.size), branch_sort_key(r.branch), r.seed)

    return sorted(runs.values(), key=key)
