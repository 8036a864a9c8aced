"""One run by its id, and the plan as a dependency graph (``guarddiag train plan --json``).

A scheduler (a Slurm array, a Ray sweep) reads the graph: nodes are runs with their size,
branch, seed, route, folder and status; edges point from a dependency to the run that needs
it. ``level`` is the run's depth in the graph: every run of level k can start once the runs
of levels < k are finished.
"""

from __future__ import annotations

import re
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from guarddiag.errors import GuarddiagError
from guarddiag.model.sizes import size_names
from guarddiag.runs import CHECKPOINT_FILE, LOCK_FILE, finished_meta
from guarddiag.train.branches import BranchSet, PlannedRun, plan_runs
from guarddiag.train.lock import pid_alive, read_holder
from guarddiag.train.options import PlanOptions

_RUN_ID = re.compile(r"(?P<size>[^/]+)/(?P<branch>[^/]+)/seed=(?P<seed>\d+)")

STATUSES = ("finished", "running", "interrupted", "pending")
"""A run's status in a runs folder: finished (meta.json says so); running (a live process on
this host, or any process on another host, holds its lock); interrupted (a checkpoint and no
live holder: the next ``train`` resumes it); pending (nothing yet)."""


def find_run(branches: BranchSet, run_id: str) -> PlannedRun:
    """The planned run with this id (``<size>/<branch>/seed=<s>``), with its dependencies."""
    m = _RUN_ID.fullmatch(run_id.strip())
    if m is None:
        raise GuarddiagError(f"--run {run_id!r}: expected <size>/<branch>/seed=<s>, "
                             f"e.g. micro/E1/seed=42")
    branch = branches[m["branch"]].name
    seed = int(m["seed"])
    candidates: dict[str, PlannedRun] = {}
    for size in size_names():
        for run in plan_runs(branches, PlanOptions.of(branches=(branch,), sizes=(size,),
                                                      seeds=(seed,))):
            if run.branch == branch:
                candidates.setdefault(run.run_id, run)
    if run_id.strip() in candidates:
        return candidates[run_id.strip()]
    raise GuarddiagError(f"--run {run_id}: not a run of branch {branch} at seed {seed}; "
                         f"its runs are {', '.join(sorted(candidates))}")


def run_status(runs_dir: Path, run_id: str) -> str:
    """One of :data:`STATUSES`."""
    run_dir = runs_dir / run_id
    if finished_meta(run_dir) is not None:
        return "finished"
    holder = read_holder(run_dir / LOCK_FILE)
    if holder is not None:
        pid = holder.get("pid")
        here = holder.get("host") == socket.gethostname()
        if not here or not isinstance(pid, int) or pid_alive(pid):
            return "running"
    return "interrupted" if (run_dir / CHECKPOINT_FILE).is_file() else "pending"


@dataclass(frozen=True)
class PlanNode:
    id: str
    size: str
    branch: str
    seed: int
    route: str
    """``hard_labels``, ``distill`` or ``head_only``."""
    folder: str
    status: str
    level: int
    needs: tuple[str, ...]


@dataclass(frozen=True)
class PlanGraph:
    runs_dir: Path
    nodes: tuple[PlanNode, ...]
    edges: tuple[tuple[str, str, str], ...]
    """(dependency, run, role): role is ``teacher`` or ``parent``."""

    def to_dict(self) -> dict[str, Any]:
        return {"runs_dir": str(self.runs_dir),
                "nodes": [{**asdict(n), "needs": list(n.needs)} for n in self.nodes],
                "edges": [{"from": a, "to": b, "role": r} for a, b, r in self.edges],
                "levels": max((n.level for n in self.nodes), default=-1) + 1}


def plan_graph(branches: BranchSet, chosen: PlanOptions, *, runs_dir: str | Path
               ) -> PlanGraph:
    """The plan ``chosen`` (:class:`~guarddiag.train.options.PlanOptions`) as nodes and edges,
    with each run's status in ``runs_dir``."""
    runs_dir = Path(runs_dir)
    plan = plan_runs(branches, chosen)
    level: dict[str, int] = {}
    nodes, edges = [], []
    for run in plan:  # dependencies come first in a plan
        spec = branches[run.branch]
        route = "head_only" if spec.head_only else "distill" if spec.distill else "hard_labels"
        level[run.run_id] = 1 + max((level[d] for d in run.deps()), default=-1)
        nodes.append(PlanNode(run.run_id, run.size, run.branch, run.seed, route,
                              str(runs_dir / run.run_id), run_status(runs_dir, run.run_id),
                              level[run.run_id], tuple(run.deps())))
        for role, dep in (("teacher", run.teacher), ("parent", run.parent)):
            if dep:
                edges.append((dep, run.run_id, role))
    return PlanGraph(runs_dir, tuple(nodes), tuple(edges))
