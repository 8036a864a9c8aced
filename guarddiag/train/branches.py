"""Branch specs (branches/*.yaml): how a labelling policy reaches one trained guard.

A branch is one recipe: which route(s) carry the policy (hard labels, distillation from a
teacher, head-only recalibration of a parent), which rows carry policy-A labels, and the
optimiser budget. Specs are flat YAML, one file per branch, named by their file stem, and are
validated as a set: teachers and parents must exist, no cycles, fractions in [0, 1], no unknown
keys, known sizes — every problem reported at once, each naming file and field.

A plan expands branches × sizes × seeds into runs (``<size>/<branch>/seed=<s>``) in dependency
order (teachers → reference → branches), adding the runs a requested branch depends on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from guarddiag.errors import GuarddiagError, did_you_mean, unknown_name
from guarddiag.model.sizes import SIZE_ORDER, get_size, size_up
from guarddiag.paths import branches_dir
from guarddiag.runs import run_id
from guarddiag.spec import Field, Problems, load_yaml_mapping, read_fields

ROUTES = ("hard_labels", "distill", "head_only")
ROUTE_SETS = ({"hard_labels"}, {"hard_labels", "distill"}, {"head_only"})
SIZE_MODES = ("same", "one_up")
CALIBRATION_SPLITS = ("train", "cal", "val")
CALIBRATION_SOURCES = ("all", "disagreement")
VARIANT_NAME = re.compile(r"^(?P<base>E\d+|reference)-(?P<tag>[A-Za-z0-9_.]+)$")
"""Name of a sensitivity variant: its base branch, a hyphen and a tag (``E6-a05``). The report's
analyses know a variant by this name alone (``guarddiag.analyses.variants`` holds the same
pattern), so a spec with this name must say ``variant_of`` and the reverse."""


@dataclass(frozen=True)
class BranchSpec:
    """One branch recipe, as resolved from its YAML file (defaults filled in)."""

    name: str
    """Branch name; equals the file stem (``E1``, ``T_A``, ``reference``…)."""
    routes: tuple[str, ...]
    """``[hard_labels]``, ``[hard_labels, distill]`` or ``[head_only]``."""
    policy_a_fraction: float
    """Share of rows whose labels (class and pillars) come from policy A; the rest use B.
    Rows are assigned by a hash of their prompt id, so a smaller share is a subset of a larger."""
    epochs: int
    lr: float
    batch_size: int
    description: str = ""
    train_rows: int | None = None
    """Rows drawn from the pool's train split (hash order; null = all of them)."""
    val_rows: int | None = 2000
    """Rows of the val split that choose the kept checkpoint (null = all)."""
    size: str = "same"
    """``same`` (the --sizes value), ``one_up`` (teachers: micro→tiny, base→large) or a size."""
    fixed_seed: int | None = None
    """Train once at this seed whatever --seeds says (teachers: every student seed distils from
    the same teacher, so the seed floor measures the student recipe)."""
    pillar_weight: float = 1.0
    span_weight: float = 1.0
    weight_decay: float = 0.01
    evals_per_epoch: int = 2
    # hard_labels
    max_length: int | None = None
    anchors: bool = False
    """Add the policy-refusal anchors to the mix: a fixed 25% of the train rows policy A blocks
    and B allows, on their policy-A label (:func:`guarddiag.train.rows.policy_anchor_mask`);
    the ones outside the train sample are added as rows (:func:`~guarddiag.train.rows.
    training_frame`)."""
    warmup_fraction: float = 0.06
    # distill
    teacher: str | None = None
    distill_weight: float = 0.8
    """Weight α of the teacher term: loss = α·τ²·KL(teacher‖student) + (1−α)·CE(hard)."""
    temperature: float = 4.0
    # head_only
    parent: str | None = None
    calibration_split: str = "train"
    """Where calibration rows come from: ``cal`` (the disagreement-enriched split the pool builds
    for this route), ``train`` (the parent's train sample) or ``val``."""
    calibration_fraction: float | None = None
    """Calibration set size as a share of the parent's train sample (``train_rows``), whichever
    split the rows come from; a split with fewer rows is resampled with replacement."""
    calibration_source: str = "all"
    """``all`` rows, or only ``disagreement`` rows (label_a ≠ label_b) plus anchors."""
    generic_anchor_fraction: float = 0.0
    """Share of the calibration set that is GENERIC_SAFE anchor rows (both policies agree)."""
    variant_of: str | None = None
    """A sensitivity variant of this branch (name ``<variant_of>-<tag>``): trained like any
    branch, reported only in its own table (the distillation-weight table), never in the
    ten-branch rank test, Table 1, the span Δb, the load call or the seed floor."""
    path: str = field(default="", compare=False)

    @property
    def head_only(self) -> bool:
        return "head_only" in self.routes

    @property
    def distill(self) -> bool:
        return "distill" in self.routes

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
        out = asdict(self)
        out.pop("path")
        if out["variant_of"] is None:
            # Left out when unset, so the fingerprints of existing runs do not change.
            out.pop("variant_of")
        out["routes"] = list(self.routes)
        return out


# Which keys a route may set; a key outside its routes is a spec error, not silently ignored.
_COMMON = {"name", "description", "routes", "policy_a_fraction", "epochs", "lr", "batch_size",
           "train_rows", "val_rows", "size", "fixed_seed", "pillar_weight", "span_weight",
           "weight_decay", "evals_per_epoch", "variant_of"}
_ROUTE_KEYS = {
    "hard_labels": {"max_length", "anchors", "warmup_fraction"},
    "distill": {"teacher", "distill_weight", "temperature"},
    "head_only": {"parent", "calibration_split", "calibration_fraction", "calibration_source",
                  "generic_anchor_fraction"},
}
_ROUTE_REQUIRED = {"hard_labels": {"max_length", "train_rows"}, "distill": {"teacher"},
                   "head_only": {"parent", "calibration_fraction"}}


def _fraction(name: str, *, required: bool = False, open_minimum: bool = False,
              open_maximum: bool = False) -> Field:
    return Field(name, "number", required=required, minimum=0.0, maximum=1.0,
                 open_minimum=open_minimum, open_maximum=open_maximum)


BRANCH_FIELDS: tuple[Field, ...] = (
    Field("name", required=True),
    Field("routes", required=True),
    _fraction("policy_a_fraction", required=True),
    Field("epochs", "int", required=True, minimum=1),
    Field("lr", "number", required=True, minimum=0.0, open_minimum=True),
    Field("batch_size", "int", required=True, minimum=1),
    Field("description", "text"),
    Field("train_rows", "int", minimum=1, nullable=True),
    Field("val_rows", "int", minimum=1, nullable=True),
    Field("size"),
    Field("fixed_seed", "int", minimum=0, nullable=True),
    Field("pillar_weight", "number", minimum=0.0),
    Field("span_weight", "number", minimum=0.0),
    Field("weight_decay", "number", minimum=0.0),
    Field("evals_per_epoch", "int", minimum=1),
    Field("variant_of", "str"),
    # hard_labels
    Field("max_length", "int", minimum=8),
    Field("anchors", "bool"),
    _fraction("warmup_fraction", open_maximum=True),
    # distill
    Field("teacher", "str"),
    _fraction("distill_weight"),
    Field("temperature", "number", minimum=0.0, open_minimum=True),
    # head_only
    Field("parent", "str"),
    Field("calibration_split", allowed=CALIBRATION_SPLITS),
    _fraction("calibration_fraction", open_minimum=True),
    Field("calibration_source", allowed=CALIBRATION_SOURCES),
    _fraction("generic_anchor_fraction", open_maximum=True),
)
"""Every key of a branch spec, with its type and range (defaults live on :class:`BranchSpec`);
``routes``, ``size`` and ``name`` get their own checks in :func:`_parse`."""
_ALL_KEYS = {f.name for f in BRANCH_FIELDS}
assert _COMMON.union(*_ROUTE_KEYS.values()) == _ALL_KEYS
assert {f.name for f in fields(BranchSpec)} >= _ALL_KEYS


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
        return sorted(self.branches, key=branch_sort_key)


def branch_sort_key(name: str) -> tuple[int, int, str]:
    """Teachers, then the reference, then E1…E10 in numeric order, then anything else."""
    if name.startswith("T_"):
        return (0, 0, name)
    if name == "reference":
        return (1, 0, name)
    m = re.fullmatch(r"E(\d+)", name)
    if m:
        return (2, int(m.group(1)), name)
    return (3, 0, name)


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
    _check_links(specs, set(raw), problems)
    problems.raise_if_any(f"branch specs in {folder}")
    return BranchSet(folder, specs)


def _where(path: Path, key: str) -> str:
    return f'{path} field "{key}"'


def _parse(path: Path, doc: dict[str, Any], problems: Problems) -> BranchSpec | None:
    n_before = len(problems.items)
    values = read_fields(doc, BRANCH_FIELDS, where=str(path), problems=problems)
    routes = _routes(path, doc.get("routes"), problems)
    if routes is not None:
        _check_route_keys(path, doc, routes, problems)
    name = doc.get("name")
    if "name" in doc and name != path.stem:
        problems.add(_where(path, "name"), f"{name!r} must equal the file stem {path.stem!r}")
    if "description" in values:
        values["description"] = values["description"].strip()
    if "size" in doc:
        _check_size(path, doc, routes, problems)
    _check_variant_name(path, doc.get("variant_of"), problems)
    if len(problems.items) > n_before or routes is None:
        return None
    values["routes"] = tuple(routes)
    values["name"] = path.stem
    return BranchSpec(**values, path=str(path))


def _check_route_keys(path: Path, doc: dict[str, Any], routes: list[str],
                      problems: Problems) -> None:
    """Keys of routes the branch does not take are errors; each route's own keys are needed."""
    allowed = _COMMON.union(*(_ROUTE_KEYS[r] for r in routes))
    for key in doc:
        if key in _ALL_KEYS and key not in allowed:
            owners = [r for r, keys in _ROUTE_KEYS.items() if key in keys]
            problems.add(_where(path, key),
                         f"applies only to route {' or '.join(owners)}, not to "
                         f"[{', '.join(routes)}]")
    for route in routes:
        for key in sorted(_ROUTE_REQUIRED[route] - set(doc)):
            problems.add(_where(path, key), f"required by route {route}")


def _check_variant_name(path: Path, variant_of: Any, problems: Problems) -> None:
    """A variant is named ``<variant_of>-<tag>``, and only a variant has such a name."""
    m = VARIANT_NAME.fullmatch(path.stem)
    if variant_of is None and m is not None:
        problems.add(_where(path, "variant_of"),
                     f"a branch named {path.stem!r} is a variant of {m['base']!r}: add "
                     f"variant_of: {m['base']}, or rename it")
    elif isinstance(variant_of, str) and (m is None or m["base"] != variant_of):
        problems.add(_where(path, "variant_of"),
                     f"a variant of {variant_of!r} must be named {variant_of}-<tag> (letters, "
                     f"digits, '_' or '.'), not {path.stem!r}")


def _check_size(path: Path, doc: dict[str, Any], routes: list[str] | None,
                problems: Problems) -> None:
    size = doc["size"]
    if not isinstance(size, str) or size not in (*SIZE_MODES, *SIZE_ORDER):
        problems.add(_where(path, "size"),
                     f"unknown model size {size!r}: expected one of "
                     f"{', '.join((*SIZE_MODES, *SIZE_ORDER))}")
    if routes is not None and "head_only" in routes and size != "same":
        problems.add(_where(path, "size"), "a head-only branch always has its parent's size")


def _routes(path: Path, value: Any, problems: Problems) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.add(_where(path, "routes"), f"expected a list of route names, got {value!r}")
        return None
    unknown = [v for v in value if v not in ROUTES]
    if unknown:
        problems.add(_where(path, "routes"),
                     f"unknown route {unknown[0]!r} ({did_you_mean(unknown[0], ROUTES)})")
        return None
    if set(value) not in ROUTE_SETS or len(set(value)) != len(value):
        problems.add(_where(path, "routes"),
                     f"{value} is not a valid combination: use [hard_labels], "
                     f"[hard_labels, distill] or [head_only]")
        return None
    return [r for r in ROUTES if r in value]


def _check_links(specs: dict[str, BranchSpec], names: set[str], problems: Problems) -> None:
    # A spec that failed to parse still exists as a name, so its dependants are not blamed.
    for spec in specs.values():
        for key, target in spec.depends_on():
            if target not in names:
                problems.add(_where(Path(spec.path), key),
                             f"unknown branch {target!r} ({did_you_mean(target, sorted(names))})")
            elif target == spec.name:
                problems.add(_where(Path(spec.path), key), "a branch cannot depend on itself")
    for spec in specs.values():
        base = spec.variant_of
        if base is not None and base not in names:
            problems.add(_where(Path(spec.path), "variant_of"),
                         f"unknown branch {base!r} ({did_you_mean(base, sorted(names))})")
        elif base is not None and base in specs and specs[base].variant_of is not None:
            problems.add(_where(Path(spec.path), "variant_of"),
                         f"{base!r} is itself a variant; name the branch it varies")
    reported: set[frozenset[str]] = set()
    for start in sorted(specs, key=branch_sort_key):
        cycle = _find_cycle(start, specs)
        if cycle and frozenset(cycle) not in reported:
            reported.add(frozenset(cycle))
            first = specs[cycle[0]]
            key = next(k for k, t in first.depends_on() if t == cycle[1])
            problems.add(_where(Path(first.path), key),
                         f"dependency cycle {' → '.join(cycle)}")


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


def plan_runs(branches: BranchSet, *, names: str | Sequence[str] = "all",
              sizes: Sequence[str], seeds: Sequence[int]) -> list[PlannedRun]:
    """Every run needed for ``names`` × ``sizes`` × ``seeds``, dependencies first."""
    wanted = select_branches(branches, names)
    for size in sizes:
        get_size(size, where="--sizes")
    if not seeds:
        raise GuarddiagError("--seeds: expected at least one seed")
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
        names = [n.strip() for n in names.split(",") if n.strip()]
    if not names:
        raise GuarddiagError("--branches: expected 'all' or a comma-separated list of branches")
    return [branches[n].name for n in names]


def _topological(runs: dict[str, PlannedRun]) -> list[PlannedRun]:
    depth: dict[str, int] = {}

    def level(rid: str) -> int:
        if rid not in depth:
            depth[rid] = 1 + max((level(d) for d in runs[rid].deps()), default=-1)
        return depth[rid]

    def key(r: PlannedRun) -> tuple:
        return (level(r.run_id), SIZE_ORDER.index(r.size), branch_sort_key(r.branch), r.seed)

    return sorted(runs.values(), key=key)


def parse_seeds(text: str | Iterable[int]) -> list[int]:
    """``"42,43,44"`` → [42, 43, 44], with a one-line error for anything else."""
    if not isinstance(text, str):
        return [int(s) for s in text]
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not re.fullmatch(r"\d+", part):
            raise GuarddiagError(f"--seeds: {part!r} is not a non-negative integer")
        out.append(int(part))
    if not out:
        raise GuarddiagError("--seeds: expected at least one seed, e.g. 42,43,44")
    return out


def parse_sizes(text: str | Sequence[str]) -> list[str]:
    parts = [p.strip() for p in text.split(",")] if isinstance(text, str) else list(text)
    parts = [p for p in parts if p]
    if not parts:
        raise GuarddiagError("--sizes: expected at least one size, e.g. micro")
    return [get_size(p, where="--sizes").name for p in parts]
