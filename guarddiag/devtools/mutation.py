"""Mutation testing of the pure layers: does a small wrong change to the code fail a test?

``python -m guarddiag.devtools.mutation`` makes one mutant at a time (the operators are listed in
:mod:`guarddiag.devtools.mutants`), writes it into a COPY of the repository in a temporary
folder (the working tree is never touched), runs only the tests mapped to that module with a
timeout, and counts the mutant **killed** (a test failed or errored), **survived** (every
test passed) or **timeout** (counted as killed in the score). It prints killed/total per module
and every survivor as a diff; ``--json`` writes the whole result.

Examples::

    python -m guarddiag.devtools.mutation --list                    # what would run
    python -m guarddiag.devtools.mutation --jobs 2 --max-mutants 40  # a sampled run, minutes
    python -m guarddiag.devtools.mutation --modules guarddiag/stats.py --max-mutants 0
    python -m guarddiag.devtools.mutation --known                   # issue 18's named mutants
    python -m guarddiag.devtools.mutation --survivors-of before.json --json after.json

Sampling is seeded (``--seed``): the same tree and options give the same mutants. The first
run per module is the unmutated copy: if its tests fail, the module is reported as an error
and nothing is counted. A mutant on a line marked ``# pragma: no mutate: <reason>`` is drawn
like any other but counted **equivalent** (not run, not in the score); the pragma is applied
after sampling, so it never changes which mutants are drawn.

``--survivors-of PREV.json`` makes a run incremental: a module whose source (pragma comments
stripped, :func:`~guarddiag.devtools.mutants.source_sha256`) is unchanged since PREV re-tests only
PREV's mutants that were not killed and carries PREV's killed results over (``"carried": true``
in the JSON); a changed or new module runs in full.

Tests that need the public data directory run when GUARDDIAG_DATA is set and skip otherwise,
exactly as in a normal test run.
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guarddiag.devtools.mutants import OPERATORS, Mutant, module_mutants, source_sha256

# Module patterns (relative to the repository root) → the test files that guard them. The
# first matching pattern wins. Test files that do not exist are left out. The fast,
# behaviour-level tests/test_mutants_<area>.py go first: with -x they usually fail first.
_PINNED = ("tests/test_pinned_numbers.py", "tests/test_compound_mass.py", "tests/test_analyses.py")
_ANALYSES = "tests/test_mutants_analyses.py"
_REPORT_INPUTS = "tests/test_mutants_report_inputs.py"
TARGETS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("guarddiag/stats.py", ("tests/test_mutants_stats.py", "tests/test_pinned_numbers.py",
                            "tests/test_stats.py", "tests/test_wilson.py",
                            "tests/test_paired.py", "tests/test_rank_ties.py",
                            "tests/test_analyses.py", "tests/test_load_calibration.py")),
    ("guarddiag/text.py", ("tests/test_mutants_text.py", "tests/test_text.py",
                           "tests/test_pinned_numbers.py", "tests/test_audit.py")),
    ("guarddiag/labels.py", ("tests/test_mutants_text.py", "tests/test_labels.py",
                             "tests/test_label_schema.py", "tests/test_policy_table.py",
                             "tests/test_ties.py", "tests/test_compound_mass.py",
                             "tests/test_analyses.py")),
    ("guarddiag/audit/scanstore.py", ("tests/test_audit_resume.py", "tests/test_audit_stream.py",
                                      "tests/test_audit_engine_ray.py")),
    ("guarddiag/audit/engine.py", ("tests/test_audit_resume.py", "tests/test_audit_stream.py",
                                   "tests/test_audit_split.py", "tests/test_audit_suite.py",
                                   "tests/test_audit.py")),
    ("guarddiag/audit/ray_engine.py", ("tests/test_audit_engine_ray.py",)),
    ("guarddiag/audit/stream.py", ("tests/test_audit_split.py", "tests/test_audit_stream.py",
                                   "tests/test_audit_resume.py")),
    ("guarddiag/audit/shardread.py", ("tests/test_audit_split.py", "tests/test_audit_stream.py")),
    ("guarddiag/audit/normal.py", ("tests/test_normalise_vectorised.py",
                                   "tests/test_audit_stream.py")),
    ("guarddiag/audit/containment.py", ("tests/test_audit_containment.py",
                                        "tests/test_audit_suite.py")),
    ("guarddiag/audit/suite.py", ("tests/test_audit_suite.py", "tests/test_audit_suite_plan.py")),
    ("guarddiag/audit/plan.py", ("tests/test_audit_suite_plan.py",)),
    ("guarddiag/audit/*.py", ("tests/test_mutants_audit.py", "tests/test_mutants_audit_display.py",
                              "tests/test_mutants_audit_template.py",
                              "tests/test_pinned_numbers.py", "tests/test_audit_examples.py",
                              "tests/test_audit_templates.py", "tests/test_audit.py",
                              "tests/test_derived_decontam.py")),
    ("guarddiag/analyses/inputs.py", ("tests/test_report.py",)),
    ("guarddiag/analyses/step.py", ("tests/test_report.py",)),
    ("guarddiag/analyses/sorry.py", ("tests/test_sorry_report.py", "tests/test_report.py")),
    ("guarddiag/analyses/load*.py", ("tests/test_mutants_loadtest.py", *_PINNED,
                                     "tests/test_load_calibration.py")),
    ("guarddiag/analyses/paired.py", (_ANALYSES, *_PINNED, "tests/test_paired.py")),
    ("guarddiag/analyses/competence.py", (_ANALYSES, *_PINNED, "tests/test_competence.py")),
    ("guarddiag/analyses/correlation.py", (_ANALYSES, *_PINNED,
                                           "tests/test_correlation_recipes.py")),
    ("guarddiag/analyses/rank.py", ("tests/test_mutants_rank.py", *_PINNED,
                                    "tests/test_rank_ties.py")),
    ("guarddiag/analyses/study.py", ("tests/test_mutants_study.py", *_PINNED,
                                     "tests/test_study_fairness.py")),
    ("guarddiag/analyses/overlap_origin.py", (_ANALYSES, *_PINNED,
                                              "tests/test_study_fairness.py")),
    ("guarddiag/analyses/provenance.py", (_REPORT_INPUTS, _ANALYSES, *_PINNED,
                                          "tests/test_report_headline.py")),
    ("guarddiag/analyses/threshold_free.py", (_REPORT_INPUTS, _ANALYSES, *_PINNED,
                                              "tests/test_threshold_free.py")),
    ("guarddiag/analyses/contamination.py", (_ANALYSES, *_PINNED, "tests/test_wilson.py",
                                             "tests/test_ties.py", "tests/test_study_fairness.py",
                                             "tests/test_audit_templates.py")),
    ("guarddiag/analyses/valsets.py", ("tests/test_analyses_variants.py", "tests/test_report.py")),
    ("guarddiag/analyses/variants.py", ("tests/test_analyses_variants.py",
                                        "tests/test_report_distill.py")),
    ("guarddiag/analyses/*.py", (_ANALYSES, *_PINNED, "tests/test_wilson.py",
                                 "tests/test_ties.py")),
    ("guarddiag/pool/spec.py", ("tests/test_mutants_pool.py", "tests/test_policy_table.py",
                                "tests/test_spec.py", "tests/test_pool.py")),
    ("guarddiag/pool/recipe.py", ("tests/test_mutants_pool.py", "tests/test_spec.py",
                                  "tests/test_pool.py", "tests/test_branch_rows.py")),
    ("guarddiag/guards/backends.py", ("tests/test_pinned_numbers.py",
                                      "tests/test_guards_backends.py")),
)
DEFAULT_MODULES = ("guarddiag/stats.py", "guarddiag/text.py", "guarddiag/labels.py",
                   "guarddiag/audit/*.py", "guarddiag/analyses/*.py", "guarddiag/pool/spec.py",
                   "guarddiag/pool/recipe.py")
"""The pure layers measured by default (issue 18): stats, analyses, audit, labels, text and
the pool spec (policies in pool/spec.py, the recipe in pool/recipe.py)."""
DEFAULT_EXCLUDE = ("guarddiag/analyses/inputs.py", "guarddiag/analyses/step.py",
                   "guarddiag/analyses/sorry.py", "guarddiag/audit/bench.py")
"""Left out of the default set: the analysis *step* (reads the saved files, runs every analysis
once for the report; tested end to end by the report tests, too slow to rerun per mutant) and
the audit's speed benchmark (``guarddiag bench audit``: synthetic pool sizes, timers and printed
figures, not a result anything reads). Name them with --modules to measure them."""

# Issue 18's named mutants as exact text edits, found wherever the text now lives (modules
# move between files during refactors): the first file of the globs ("|"-separated, in order)
# that holds the text exactly once. Each must be killed by the pinned-number tests.
KNOWN: tuple[tuple[str, str, str, str], ...] = (
    ("load: delta > widest → >=", "guarddiag/analyses/**/*.py",
     '"policy" if delta > widest else "capability"',
     '"policy" if delta >= widest else "capability"'),
    ("audit: `if form:` guard dropped", "guarddiag/audit/**/*.py",
     "            if form:\n                keyed.append(",
     "            if True:\n                keyed.append("),
    ("policy B: iwp/* HARMFUL → GENERIC_SAFE", "data_manifests/policies/policy_b.yaml",
     "iwp/*: {class: HARMFUL, pillars: [cbrn]}", "iwp/*: {class: GENERIC_SAFE}"),
    ("recipe table: seed mean → max",
     "guarddiag/analyses/tables.py|guarddiag/analyses/intervals.py",
     'pl.col("score").mean().alias(', 'pl.col("score").max().alias('),
    ("study: median seed floor → max", "guarddiag/analyses/**/*.py",
     "statistics.median(all_ranges) if all_ranges", "max(all_ranges) if all_ranges"),
    ("backends: 429 not retried", "guarddiag/guards/**/*.py",
     "(408, 409, 425, 429)", "(408, 409, 425)"),
    ("backends: consecutive-failure counter never reset", "guarddiag/guards/**/*.py",
     "                    else:\n                        consecutive = 0\n",
     "                    else:\n                        pass\n"),
    ("report: an unescaped <li>", "guarddiag/report/**/*.py",
     '"".join(f"<li>{_esc(x)}</li>" for x in b.items)',
     '"".join(f"<li>{x}</li>" for x in b.items)'),
)
KNOWN_TESTS = ("tests/test_pinned_numbers.py", "tests/test_policy_table.py",
               "tests/test_escaping.py")
COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.pyc", ".pytest_cache",
                                     ".ruff_cache", "work", "runs", "reports", "*.egg-info")


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # killed | survived | timeout | error | equivalent
    seconds: float
    tail: str = ""
    carried: bool = False
    """Taken over from the previous run (``--survivors-of``), not run again."""


NOT_SCORED = ("error", "equivalent")


@dataclass
class ModuleReport:
    path: str
    tests: tuple[str, ...]
    total_sites: int
    outcomes: list[Outcome] = field(default_factory=list)
    error: str = ""
    sha256: str = ""
    """:func:`source_sha256` of the module as measured."""
    incremental: bool = False
    """True when the module was unchanged since ``--survivors-of`` and only its survivors ran."""

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def carried(self) -> int:
        return sum(o.carried for o in self.outcomes)

    @property
    def score(self) -> float | None:
        n = len(self.outcomes) - sum(self.count(s) for s in NOT_SCORED)
        return (self.count("killed") + self.count("timeout")) / n if n else None


def repo_root(given: str | None) -> Path:
    if given:
        return Path(given).resolve()
    here = Path.cwd()
    if (here / "guarddiag").is_dir() and (here / "tests").is_dir():
        return here
    return Path(__file__).resolve().parents[2]


def tests_for(path: str, root: Path, override: Sequence[str] | None) -> tuple[str, ...]:
    if override:
        return tuple(override)
    for pattern, tests in TARGETS:
        if fnmatch.fnmatch(path, pattern):
            return tuple(t for t in tests if (root / t).is_file())
    return ()


def expand_modules(patterns: Sequence[str], root: Path) -> list[str]:
    out: list[str] = []
    for pattern in patterns:
        found = sorted(p.relative_to(root).as_posix() for p in root.glob(pattern) if p.is_file())
        out += [f for f in found if f not in out and f.endswith(".py")]
    return out


def sample(mutants: list[Mutant], max_mutants: int, seed: int, path: str) -> list[Mutant]:
    """At most ``max_mutants`` (0: all), chosen by a generator seeded from seed and path."""
    if max_mutants <= 0 or len(mutants) <= max_mutants:
        return mutants
    picked = random.Random(f"{seed}:{path}").sample(range(len(mutants)), max_mutants)
    return [mutants[i] for i in sorted(picked)]


class Sandbox:
    """One private copy of the repository; runs the tests with the copy first on sys.path."""

    def __init__(self, root: Path, parent: Path, index: int):
        self.dir = parent / f"copy{index}"
        shutil.copytree(root, self.dir, ignore=COPY_IGNORE, symlinks=True)
        self.env = {**os.environ, "PYTHONPATH": str(self.dir), "PYTHONDONTWRITEBYTECODE": "1",
                    "GUARDDIAG_PROGRESS": "0"}

    def run_tests(self, tests: Sequence[str], timeout: float) -> tuple[str, float, str]:
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
               "--no-header", "-o", "addopts=", *tests]
        start = time.monotonic()
        try:
            done = subprocess.run(cmd, cwd=self.dir, env=self.env, capture_output=True,
                                  text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return "timeout", time.monotonic() - start, ""
        seconds = time.monotonic() - start
        tail = (done.stdout + done.stderr)[-1500:]
        status = {0: "survived", 1: "killed", 2: "killed"}.get(done.returncode, "error")
        return status, seconds, tail

    def with_file(self, rel: str, text: str, action: Callable[[], tuple[str, float, str]]
                  ) -> tuple[str, float, str]:
        target = self.dir / rel
        original = target.read_bytes()
        target.write_text(text, encoding="utf-8")
        try:
            return action()
        finally:
            target.write_bytes(original)


def run_module(path: str, tests: tuple[str, ...], mutants: list[Mutant],
               sandboxes: queue.Queue[Sandbox], *, jobs: int, timeout_min: float,
               report: ModuleReport, verbose: bool) -> None:
    """Run ``mutants`` (those without an outcome in ``report`` yet) and fill in ``report``:
    outcomes already there (carried over) and equivalent mutants are not run."""
    decided = {o.mutant.id: o for o in report.outcomes}
    for m in mutants:
        if m.equivalent and m.id not in decided:
            decided[m.id] = Outcome(m, "equivalent", 0.0)
    todo = [m for m in mutants if m.id not in decided]
    if not todo:
        report.outcomes = [decided[m.id] for m in mutants]
        return
    box = sandboxes.get()
    try:
        status, base_s, tail = box.run_tests(tests, timeout=max(600.0, timeout_min))
    finally:
        sandboxes.put(box)
    if status != "survived":
        report.error = f"unmutated tests did not pass ({status}):\n{tail}"
        return
    timeout = max(timeout_min, 3 * base_s + 10)

    def one(m: Mutant) -> Outcome:
        box = sandboxes.get()
        try:
            status, seconds, tail = box.with_file(
                m.path, m.mutated, lambda: box.run_tests(tests, timeout))
        finally:
            sandboxes.put(box)
        if verbose:
            print(f"  {status:8s} {seconds:5.1f}s {m.id}", file=sys.stderr, flush=True)
        return Outcome(m, status, seconds, tail if status == "error" else "")

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        decided.update((o.mutant.id, o) for o in pool.map(one, todo))
    report.outcomes = [decided[m.id] for m in mutants]


def print_summary(reports: list[ModuleReport], *, show_diffs: bool) -> None:
    print(f"{'module':44s} {'killed':>7s} {'surv.':>6s} {'t/out':>6s} {'err':>4s} "
          f"{'equiv':>6s} {'total':>6s} {'sites':>6s}  score")
    for r in reports:
        score = "error" if r.error else (f"{100 * r.score:5.1f} %" if r.score is not None
                                          else "  -")
        print(f"{r.path:44s} {r.count('killed'):7d} {r.count('survived'):6d} "
              f"{r.count('timeout'):6d} {r.count('error'):4d} {r.count('equivalent'):6d} "
              f"{len(r.outcomes):6d} {r.total_sites:6d}  {score}")
    killed, total = overall(reports)
    if total:
        print(f"{'overall':44s} killed (incl. timeouts) {killed}/{total} = "
              f"{100 * killed / total:.1f} % (equivalent mutants not counted)")
    if any(r.incremental for r in reports):
        carried = sum(r.carried for r in reports)
        run = sum(len(r.outcomes) - r.carried - r.count("equivalent") for r in reports)
        full = [r.path for r in reports if not r.incremental]
        print(f"incremental: {carried} result(s) carried over, {run} mutant(s) tested; "
              f"{len(full)} module(s) changed or new, run in full"
              + (f": {', '.join(full)}" if full else ""))
    for r in reports:
        if r.error:
            print(f"\n{r.path}: {r.error}")
    if show_diffs:
        for r in reports:
            for o in r.outcomes:
                if o.status in ("survived", "error"):
                    print(f"\n── {o.status}: {o.mutant.id}\n{o.mutant.diff()}", end="")


def overall(reports: list[ModuleReport]) -> tuple[int, int]:
    counted = [o for r in reports if not r.error for o in r.outcomes
               if o.status not in NOT_SCORED]
    return sum(o.status in ("killed", "timeout") for o in counted), len(counted)


def _outcome_json(o: Outcome) -> dict[str, Any]:
    out: dict[str, Any] = {"id": o.mutant.id, "line": o.mutant.line,
                           "operator": o.mutant.operator, "description": o.mutant.description,
                           "status": o.status, "seconds": round(o.seconds, 2),
                           "diff": o.mutant.diff() if o.status != "killed" else ""}
    if o.carried:
        out["carried"] = True
    if o.status == "equivalent":
        out["reason"] = o.mutant.equivalent
    return out


def to_json(reports: list[ModuleReport], args: argparse.Namespace) -> dict[str, Any]:
    killed, total = overall(reports)
    return {
        "tool": "guarddiag.devtools.mutation", "seed": args.seed,
        "max_mutants": args.max_mutants, "operators": list(args.operators),
        "survivors_of": args.survivors_of,
        "killed": killed, "total": total, "score": killed / total if total else None,
        "modules": [{"path": r.path, "sha256": r.sha256, "tests": list(r.tests),
                     "sites": r.total_sites, "incremental": r.incremental,
                     "killed": r.count("killed"), "survived": r.count("survived"),
                     "timeout": r.count("timeout"), "errors": r.count("error"),
                     "equivalent": r.count("equivalent"), "carried": r.carried,
                     "score": r.score, "error": r.error,
                     "mutants": [_outcome_json(o) for o in r.outcomes]}
                    for r in reports],
    }


def load_previous(path: str, args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """PREV's modules by path, after checking it was sampled with the same options (else the
    same ids would name different mutants)."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    theirs = (doc.get("seed"), doc.get("max_mutants"), sorted(doc.get("operators", [])))
    ours = (args.seed, args.max_mutants, sorted(args.operators))
    if theirs != ours:
        raise SystemExit(f"--survivors-of {path}: sampled with seed, max-mutants, operators = "
                         f"{theirs}, this run uses {ours}; use the same options or run in full")
    return {m["path"]: m for m in doc["modules"]}


def carry_over(report: ModuleReport, mutants: list[Mutant], prev: dict[str, Any] | None
               ) -> None:
    """If the module is unchanged since ``prev`` (same :func:`source_sha256`, no error),
    mark ``report`` incremental and put ``prev``'s killed and timed-out results into it."""
    if prev is None or prev.get("error") or prev.get("sha256") != report.sha256:
        return
    report.incremental = True
    before = {m["id"]: m for m in prev["mutants"]}
    for m in mutants:
        old = before.get(m.id)
        if old is None or old["status"] not in ("killed", "timeout"):
            continue
        if m.equivalent:  # a test told this mutant apart: the pragma is wrong
            print(f"warning: {m.id} was {old['status']} in the previous run but its line is "
                  f"marked no mutate ({m.equivalent})", file=sys.stderr)
            continue
        report.outcomes.append(Outcome(m, old["status"], float(old.get("seconds", 0.0)),
                                       carried=True))


def known_mutants(root: Path) -> list[tuple[str, Mutant | None]]:
    """Issue 18's named mutants, each as a :class:`Mutant` of the file that now holds the
    text (None where the text is no longer found: the code changed, re-derive the mutant)."""
    out: list[tuple[str, Mutant | None]] = []
    for name, patterns, old, new in KNOWN:
        found = None
        paths = [p for pattern in patterns.split("|") for p in sorted(root.glob(pattern))]
        for path in paths:
            text = path.read_text(encoding="utf-8")
            if text.count(old) == 1:
                rel = path.relative_to(root).as_posix()
                line = text[:text.index(old)].count("\n") + 1
                found = Mutant(path=rel, line=line, col=0, operator="known", description=name,
                               original=text, mutated=text.replace(old, new))
                break
        out.append((name, found))
    return out


def run_known(root: Path, sandboxes: queue.Queue[Sandbox], timeout: float) -> int:
    tests = [t for t in KNOWN_TESTS if (root / t).is_file()]
    if not tests:
        print(f"none of {', '.join(KNOWN_TESTS)} exists here")
        return 1
    box = sandboxes.get()
    try:
        status, _, tail = box.run_tests(tests, timeout)
    finally:
        sandboxes.put(box)
    if status != "survived":
        print(f"the unmutated tests do not pass ({status}):\n{tail}")
        return 1
    failed = 0
    for name, mutant in known_mutants(root):
        if mutant is None:
            print(f"MISSING   {name}: its text is no longer in the tree")
            failed += 1
            continue
        box = sandboxes.get()
        try:
            status, seconds, tail = box.with_file(mutant.path, mutant.mutated,
                                                  functools.partial(box.run_tests, tests,
                                                                    timeout))
        finally:
            sandboxes.put(box)
        failed += status not in ("killed", "timeout")
        print(f"{status.upper():9s} {name} ({mutant.path}:{mutant.line}, {seconds:.1f} s)"
              + "".join(f"\n          by {line[7:].split(' - ')[0]}"
                        for line in tail.splitlines() if line.startswith("FAILED ")))
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m guarddiag.devtools.mutation",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--modules", nargs="+", default=list(DEFAULT_MODULES),
                   help="module paths or globs relative to the repository root (default: "
                        "the pure layers: stats, text, labels, audit, analyses, pool spec)")
    p.add_argument("--tests", nargs="+", default=None,
                   help="test files to run for every module (default: the built-in map)")
    p.add_argument("--operators", nargs="+", default=list(OPERATORS), choices=OPERATORS,
                   help="operators to apply (default: all)")
    p.add_argument("--max-mutants", type=int, default=40,
                   help="seeded sample of at most this many mutants per module; 0 = all "
                        "(default 40)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument("--jobs", type=int, default=1,
                   help="parallel workers, each with its own copy (default 1)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="least seconds per mutant's test run; the limit is the larger of "
                        "this and 3 × the unmutated run + 10 s (default 60)")
    p.add_argument("--repo", default=None, help="repository root (default: the current "
                                                "folder, else this package's checkout)")
    p.add_argument("--json", default=None, help="also write the full result as JSON here")
    p.add_argument("--survivors-of", default=None, metavar="PREV.json",
                   help="incremental run: in modules unchanged since PREV (a --json result of "
                        "the same seed, sample size and operators) re-test only PREV's "
                        "mutants that were not killed and carry its killed results over")
    p.add_argument("--list", action="store_true",
                   help="list the (sampled) mutants and their tests; run nothing")
    p.add_argument("--known", action="store_true",
                   help="run only issue 18's named mutants against the pinned-number tests; "
                        "exit 1 unless every one is killed")
    p.add_argument("--no-diffs", action="store_true", help="do not print surviving diffs")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per mutant")
    return p


def plan(args: argparse.Namespace, root: Path) -> list[tuple[ModuleReport, list[Mutant]]]:
    out = []
    modules = expand_modules(args.modules, root)
    if args.modules == list(DEFAULT_MODULES):
        modules = [m for m in modules if m not in DEFAULT_EXCLUDE]
    previous = load_previous(args.survivors_of, args) if args.survivors_of else {}
    for path in modules:
        source = (root / path).read_text(encoding="utf-8")
        every = module_mutants(path, source, operators=tuple(args.operators))
        report = ModuleReport(path=path, tests=tests_for(path, root, args.tests),
                              total_sites=len(every), sha256=source_sha256(source))
        if not report.tests:
            report.error = "no tests mapped to this module (use --tests)"
        mutants = sample(every, args.max_mutants, args.seed, path)
        if args.survivors_of:
            carry_over(report, mutants, previous.get(path))
        out.append((report, mutants))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    root = repo_root(args.repo)
    jobs = max(1, args.jobs)
    if args.list:
        for report, mutants in plan(args, root):
            print(f"{report.path}: {len(mutants)} of {report.total_sites} mutant(s); tests: "
                  f"{' '.join(report.tests) or '-'}")
            carried = {o.mutant.id for o in report.outcomes}
            for m in mutants:
                note = (" (carried over)" if m.id in carried
                        else f" (equivalent: {m.equivalent})" if m.equivalent else "")
                print(f"  {m.id}{note}")
        return 0
    # A terminated run still removes its copies (after the mutants in flight finish).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="guarddiag-mutation-") as tmp:
        sandboxes: queue.Queue[Sandbox] = queue.Queue()
        for i in range(jobs):
            sandboxes.put(Sandbox(root, Path(tmp), i))
        if args.known:
            return run_known(root, sandboxes, max(args.timeout, 300.0))
        reports = []
        for report, mutants in plan(args, root):
            how = (f" ({report.carried} carried over, "
                   f"{len(mutants) - report.carried} to re-test or equivalent)"
                   if report.incremental else "")
            print(f"{report.path}: {len(mutants)} of {report.total_sites} mutant(s){how} × "
                  f"{' '.join(report.tests)}", file=sys.stderr, flush=True)
            if not report.error:
                run_module(report.path, report.tests, mutants, sandboxes, jobs=jobs,
                           timeout_min=args.timeout, report=report, verbose=args.verbose)
            reports.append(report)
    print_summary(reports, show_diffs=not args.no_diffs)
    if args.json:
        Path(args.json).write_text(json.dumps(to_json(reports, args), indent=1,
                                              ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
