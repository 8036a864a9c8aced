"""The house rules of the package layout, checked from the source's own imports (issue 11).

- no import cycle among guarddiag modules, counting function-level imports and the type-only
  ones under ``if TYPE_CHECKING:`` (two modules that name each other's types are one idea
  split in two, or one of them is in the wrong layer);
- imports only go down the layer order below (a module may import its own layer or lower ones);
- a module is one idea: its docstring's summary (the text up to the first blank line) is one
  sentence saying which. Size is not the rule; a generous backstop (1,500 lines per module,
  200 per function) only catches a file that has plainly grown several ideas, so that code is
  split by purpose, not to fit a cap;
- no private name (``_x``) imported from another module;
- a function-level import of a guarddiag module is allowed only when it keeps a heavy library
  (torch, transformers, matplotlib, scikit-learn, numba) out of a light module's import time;
  one that merely dodges a cycle, or repeats a top-level import, is an error. The CLI is the
  exception: its handlers import their stage lazily so that ``guarddiag --help`` stays fast.

Measurements (timings, rates, "3x faster") are not quoted in docstrings or comments, where they
go stale: they live in the dated decisions log, docs/decisions.md, and the code points there by
``docs/decisions.md#<entry>``, an entry that must exist.

Run it as a script (``python tests/test_architecture.py``) for the full list of findings.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "guarddiag"
DECISIONS = PACKAGE.parent / "docs" / "decisions.md"

MAX_MODULE_LINES = 1_500
MAX_FUNCTION_LINES = 200
HEAVY = ("torch", "transformers", "matplotlib", "sklearn", "numba")

# Lowest first. A module belongs to the first layer whose prefix matches its dotted name.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("leaves", ("errors", "cores", "text", "labels", "files", "spec", "stats", "paths", "progress",
                "predictions", "figures", "typed", "roles", "numerics", "protocol",
                "study_figures", "gguf")),
    ("data", ("data",)),
    ("pool", ("pool",)),
    ("audit", ("audit",)),
    ("runs", ("runs",)),
    ("model", ("model",)),
    ("train", ("train",)),
    ("predict", ("predict",)),
    ("guards", ("guards",)),
    ("sorry", ("sorry",)),
    ("analyses", ("analyses",)),
    ("report", ("report", "plots")),
    ("bench", ("bench",)),             # guarddiag bench: measures the stages, imported by none
    ("demo", ("demo", "demo_defaults", "reproduce")),
    ("api", ("", "api", "exports", "export_options")),  # the package face,
                                        # guarddiag/__init__.py, its verbs and the exports
                                        # for other tools (their options apart: no datasets)
    ("cli", ("cli", "__main__")),
)

# Modules or functions allowed past the size backstop, with the reason (none at present).
SIZE_EXCEPTIONS: dict[str, str] = {}
# A timing quoted in a docstring or comment: seconds, a rate, or "Nx faster".
TIMING = re.compile(r"\b\d[\d,.]*(?:-\d[\d,.]*)?(?: ?(?:ms|µs)| (?:s|seconds|minutes|min))\b"
                    r"|\b\d[\d.]*x (?:faster|slower|cheaper)"
                    r"|\b\d[\d,.]* ?(?:rows|examples|prompts|MB)/s\b")
# (path, text) of figures that are settings or examples, not measurements.
TIMING_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("guarddiag/cli/__init__.py", "1 s"): "polars' own jemalloc decay setting (0.5 and 1 s)",
    ("guarddiag/guards/transport.py", "30 s"): "the retry back-off's cap, a setting",
    ("guarddiag/guards/backends.py", "40.1 s"): "an example of the rendered line",
}
# Path prefixes whose function-level imports are not checked, with the reason (none at present).
LOCAL_IMPORT_EXCEPTIONS: tuple[str, ...] = ()


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    is_package: bool
    lines: int
    top_imports: set[str] = field(default_factory=set)       # guarddiag modules, module level
    local_imports: list[tuple[int, str]] = field(default_factory=list)  # (line, module)
    private_imports: list[tuple[int, str]] = field(default_factory=list)
    type_imports: set[str] = field(default_factory=set)      # under ``if TYPE_CHECKING:``
    heavy_top: bool = False


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk_runtime(node: ast.AST, *, in_function: bool = False):
    """Yield (import node, in_function) pairs, skipping ``if TYPE_CHECKING:`` blocks."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for sub in child.orelse:
                yield from _walk_runtime(sub, in_function=in_function)
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, in_function
        inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                  ast.Lambda))
        yield from _walk_runtime(child, in_function=inner)


def _type_checking_imports(tree: ast.Module):
    """Yield the import statements under ``if TYPE_CHECKING:`` blocks, wherever they sit."""
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            for stmt in node.body:
                for sub in ast.walk(stmt):
                    if isinstance(sub, (ast.Import, ast.ImportFrom)):
                        yield sub


def load_modules() -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = _module_name(path)
        modules[name] = Module(name, path, ast.parse(text), path.name == "__init__.py",
                               len(text.splitlines()))
    for mod in modules.values():
        _collect_imports(mod, modules)
    return modules


def _targets(mod: Module, node: ast.Import | ast.ImportFrom, modules: dict[str, Module]):
    """The guarddiag modules an import statement names, and the private names it takes."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in modules], []
    if node.level:
        base = mod.name.split(".") if mod.is_package else mod.name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join([*base, node.module] if node.module else base)
    else:
        source = node.module or ""
    targets, private = [], []
    for alias in node.names:
        sub = f"{source}.{alias.name}"
        if sub in modules:
            targets.append(sub)
        elif source in modules:
            targets.append(source)
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                private.append(f"{source}.{alias.name}")
    return targets, private


def _collect_imports(mod: Module, modules: dict[str, Module]) -> None:
    for node, in_function in _walk_runtime(mod.tree):
        if not in_function and isinstance(node, (ast.Import, ast.ImportFrom)):
            roots = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""])
            absolute = isinstance(node, ast.Import) or node.level == 0
            if absolute and any(r.split(".")[0] in HEAVY for r in roots):
                mod.heavy_top = True
        targets, private = _targets(mod, node, modules)
        targets = [t for t in targets if t != mod.name]
        mod.private_imports += [(node.lineno, p) for p in private]
        if in_function:
            mod.local_imports += [(node.lineno, t) for t in targets]
        else:
            mod.top_imports.update(targets)
    for node in _type_checking_imports(mod.tree):
        targets, private = _targets(mod, node, modules)
        mod.type_imports.update(t for t in targets if t != mod.name)
        mod.private_imports += [(node.lineno, p) for p in private]


def layer_of(name: str) -> int:
    rel = name.removeprefix("guarddiag").removeprefix(".")
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if rel == prefix or (prefix and rel.startswith(prefix + ".")):
                return index
    raise AssertionError(f"{name} belongs to no layer: add it to LAYERS in {__file__}")


def import_cycles(modules: dict[str, Module]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), over every import:
    module level, function level and type-only."""
    edges = {n: set(m.top_imports) | {t for _, t in m.local_imports} | m.type_imports
             for n, m in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for name in sorted(modules):
        if name not in index:
            visit(name)
    return found


def upward_imports(modules: dict[str, Module]) -> list[str]:
    out = []
    for name, mod in sorted(modules.items()):
        own = layer_of(name)
        for target in sorted(mod.top_imports | {t for _, t in mod.local_imports}):
            if layer_of(target) > own:
                out.append(f"{name} ({LAYERS[own][0]}) imports {target} "
                           f"({LAYERS[layer_of(target)][0]})")
    return out


def _pulls_heavy(modules: dict[str, Module]) -> dict[str, bool]:
    """Whether importing a module (its parent packages' faces included) loads a heavy library."""
    memo: dict[str, bool] = {}

    def heavy(name: str, seen: frozenset[str]) -> bool:
        if name in memo:
            return memo[name]
        if name in seen:
            return False
        mod = modules[name]
        parents = [".".join(name.split(".")[:i]) for i in range(2, name.count(".") + 1)]
        deps = set(mod.top_imports) | {p for p in parents if p in modules}
        result = mod.heavy_top or any(heavy(d, seen | {name}) for d in sorted(deps))
        memo[name] = result
        return result

    return {name: heavy(name, frozenset()) for name in modules}


def needless_local_imports(modules: dict[str, Module]) -> list[str]:
    heavy = _pulls_heavy(modules)
    out = []
    for name, mod in sorted(modules.items()):
        lazy_front_end = layer_of(name) == len(LAYERS) - 1
        for line, target in sorted(set(mod.local_imports)):
            where = f"{mod.path.relative_to(PACKAGE.parent)}:{line} imports {target}"
            if where.startswith(LOCAL_IMPORT_EXCEPTIONS):
                continue
            if target in mod.top_imports:
                out.append(f"{where} again inside a function (already imported at the top)")
            elif lazy_front_end:
                continue
            elif not heavy[target]:
                out.append(f"{where} inside a function, but it is light: import it at the top")
            elif heavy[name]:
                out.append(f"{where} inside a function, but {name} already loads a heavy library")
    return out


def oversized(modules: dict[str, Module]) -> list[str]:
    out = []
    for mod in sorted(modules.values(), key=lambda m: m.name):
        rel = str(mod.path.relative_to(PACKAGE.parent))
        if mod.lines > MAX_MODULE_LINES and rel not in SIZE_EXCEPTIONS:
            out.append(f"{rel}: {mod.lines} lines (max {MAX_MODULE_LINES})")
        for node in ast.walk(mod.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                key = f"{rel}:{node.name}"
                if length > MAX_FUNCTION_LINES and key not in SIZE_EXCEPTIONS:
                    out.append(f"{key} (line {node.lineno}): {length} lines "
                               f"(max {MAX_FUNCTION_LINES})")
    return out


def _one_sentence(summary: str) -> bool:
    """Whether ``summary`` is one sentence: it ends a sentence and no sentence ends before."""
    if not summary.endswith((".", "?")):
        return False
    inner = summary[:-1]
    return not any(inner[i] in ".?!" and inner[i + 1] == " " and inner[i + 2:i + 3].isupper()
                   for i in range(len(inner) - 2))


def purposeless(modules: dict[str, Module]) -> list[str]:
    """Modules whose docstring does not open with one sentence saying what the module is."""
    out = []
    for mod in sorted(modules.values(), key=lambda m: m.name):
        rel = mod.path.relative_to(PACKAGE.parent)
        doc = ast.get_docstring(mod.tree)
        if not doc:
            out.append(f"{rel}: no docstring (its first line says what the module is)")
            continue
        summary = " ".join(doc.split("\n\n")[0].split())
        if not _one_sentence(summary):
            out.append(f"{rel}: the docstring's summary is not one sentence: {summary[:80]!r}")
    return out


def _docs_and_comments(mod: Module) -> list[tuple[int, str]]:
    texts = [(n.lineno, n.value.value) for n in ast.walk(mod.tree)
             if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
             and isinstance(n.value.value, str)]
    source = mod.path.read_text(encoding="utf-8")
    texts += [(tok.start[0], tok.string)
              for tok in tokenize.generate_tokens(io.StringIO(source).readline)
              if tok.type == tokenize.COMMENT]
    return texts


def quoted_timings(modules: dict[str, Module]) -> list[str]:
    """Timings quoted in docstrings and comments (they belong in docs/decisions.md)."""
    out = []
    for mod in sorted(modules.values(), key=lambda m: m.name):
        rel = str(mod.path.relative_to(PACKAGE.parent))
        for line, text in _docs_and_comments(mod):
            out += [f"{rel}:{line}: {m.group(0)!r}: move the figure to docs/decisions.md"
                    for m in TIMING.finditer(text) if (rel, m.group(0)) not in TIMING_EXCEPTIONS]
    return out


def _slug(heading: str) -> str:
    """The anchor MkDocs gives a heading (Python-Markdown's toc slugify)."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def dangling_decision_pointers(modules: dict[str, Module]) -> list[str]:
    """``docs/decisions.md#<entry>`` pointers in the package that name no entry of the log."""
    entries = {_slug(line.lstrip("#").strip())
               for line in DECISIONS.read_text(encoding="utf-8").splitlines()
               if line.startswith("## ")}
    return [f"{mod.path.relative_to(PACKAGE.parent)}: docs/decisions.md#{anchor} names no entry"
            for mod in sorted(modules.values(), key=lambda m: m.name)
            for anchor in re.findall(r"docs/decisions\.md#([\w-]+)",
                                     mod.path.read_text(encoding="utf-8"))
            if anchor not in entries]


def private_imports(modules: dict[str, Module]) -> list[str]:
    return [f"{m.path.relative_to(PACKAGE.parent)}:{line} imports private {p}"
            for m in modules.values() for line, p in m.private_imports]


# ---------------------------------------------------------------------------------------------

MODULES = load_modules()


def test_every_module_belongs_to_a_layer():
    for name in MODULES:
        layer_of(name)


def test_no_import_cycle():
    assert import_cycles(MODULES) == []


def test_imports_only_go_down_the_layers():
    assert upward_imports(MODULES) == []


def test_no_private_name_is_imported_from_another_module():
    assert private_imports(MODULES) == []


def test_function_level_imports_only_keep_heavy_libraries_lazy():
    assert needless_local_imports(MODULES) == []


def test_every_module_says_its_one_idea_in_one_sentence():
    assert purposeless(MODULES) == []


def test_no_docstring_or_comment_quotes_a_timing():
    assert quoted_timings(MODULES) == []


def test_every_pointer_to_the_decisions_log_names_an_entry():
    assert dangling_decision_pointers(MODULES) == []


def test_the_timing_check_sees_figures_and_the_slug_matches_mkdocs():
    found = [m.group(0) for m in TIMING.finditer(
        "sorts 10M hashes (0.36 s), 2.3x cheaper, ~500 MB/s, 13 ms, at ``2s + 1``, 20 epochs")]
    assert found == ["0.36 s", "2.3x cheaper", "500 MB/s", "13 ms"]
    assert _slug("2026-12-05: the audit's scan (`engine.py`)") == (
        "2026-12-05-the-audits-scan-enginepy")


def test_modules_and_functions_stay_under_the_backstop():
    assert oversized(MODULES) == []


def test_the_purpose_check_sees_a_missing_or_two_sentence_summary(tmp_path):
    def module(doc: str) -> Module:
        path = PACKAGE / "planted.py"
        return Module("guarddiag.planted", path, ast.parse(doc), False, 1)

    planted = {"a": module(""), "b": module('"""Reads shards. Also writes them."""'),
               "c": module('"""Reads shards\nof a pool, e.g. a corpus.\n\nMore. Text."""')}
    found = purposeless(planted)
    assert [line.split(":")[0] for line in found] == ["guarddiag/planted.py"] * 2
    assert "no docstring" in found[0]
    assert "not one sentence" in found[1]


def test_the_checker_sees_a_planted_cycle_and_an_upward_import(tmp_path):
    # The checks above can fail: build a two-module cycle and an upward import by hand.
    a = Module("guarddiag.stats", tmp_path / "a.py", ast.parse(""), False, 1,
               top_imports={"guarddiag.report"})
    b = Module("guarddiag.report", tmp_path / "b.py", ast.parse(""), True, 1,
               top_imports={"guarddiag.stats"})
    planted = {"guarddiag.stats": a, "guarddiag.report": b}
    assert import_cycles(planted) == [["guarddiag.report", "guarddiag.stats"]]
    assert upward_imports(planted) == [
        "guarddiag.stats (leaves) imports guarddiag.report (report)"]


def test_the_checker_sees_a_cycle_closed_by_a_type_only_import(tmp_path):
    # report imports stats; stats names a report type under TYPE_CHECKING only.
    source = ("from typing import TYPE_CHECKING\n"
              "if TYPE_CHECKING:\n    from guarddiag import report\n")
    stats = Module("guarddiag.stats", tmp_path / "stats.py", ast.parse(source), False, 3)
    report = Module("guarddiag.report", tmp_path / "report.py", ast.parse(""), True, 1,
                    top_imports={"guarddiag.stats"})
    planted = {"guarddiag.stats": stats, "guarddiag.report": report}
    _collect_imports(stats, planted)
    assert stats.top_imports == set()
    assert stats.type_imports == {"guarddiag.report"}
    assert import_cycles(planted) == [["guarddiag.report", "guarddiag.stats"]]


if __name__ == "__main__":
    checks = {
        "import cycles": [" <-> ".join(c) for c in import_cycles(MODULES)],
        "upward imports": upward_imports(MODULES),
        "private imports": private_imports(MODULES),
        "needless function-level imports": needless_local_imports(MODULES),
        "not one idea in one sentence": purposeless(MODULES),
        "oversized": oversized(MODULES),
        "timings quoted in docstrings or comments": quoted_timings(MODULES),
        "pointers to no decisions entry": dangling_decision_pointers(MODULES),
    }
    for title, found in checks.items():
        print(f"{title}: {len(found)}")
        for line in found:
            print(f"  {line}")
    print(f"{len(MODULES)} modules in {len(LAYERS)} layers")
    sys.exit(1 if any(checks.values()) else 0)
