"""Mutant generation for :mod:`guarddiag.devtools.mutation`: a fixed set of AST operators.

Each mutant changes one place in one module's source text; everything else in the file stays
byte-identical, so a surviving mutant reads as a one-line diff. The operators, by name:

``cmp``
    comparison boundaries and flips: ``<`` ↔ ``<=``, ``>`` ↔ ``>=``, ``==`` ↔ ``!=``,
    ``in`` ↔ ``not in``, ``is`` ↔ ``is not``.
``arith``
    arithmetic swaps: ``+`` ↔ ``-``, ``*`` ↔ ``/``, ``//`` → ``/``, ``%`` → ``//``,
    ``**`` → ``*`` (augmented assignments too; string concatenation and ``%``-formatting
    are left alone).
``bool``
    ``and`` ↔ ``or``, ``&`` ↔ ``|`` (polars filter expressions, sets), ``not x`` → ``x``.
``const``
    constant tweaks: an int ``n`` → ``n + 1``, a float ``x`` → ``x + 1.0``, ``True`` ↔
    ``False``. Strings are left alone.
``guard``
    an ``if`` guard dropped (its test becomes ``True``: the body always runs) or its body
    removed (the test becomes ``False``); also conditional expressions and comprehension
    filters.
``call``
    aggregate swaps by called name: ``mean``/``median``/``sum`` → ``max``, ``max`` ↔ ``min``,
    ``any`` ↔ ``all``, ``first`` ↔ ``last``, ``floor`` ↔ ``ceil``.
``return``
    a returned value replaced by ``None``.

Never mutated: docstrings and other strings, f-string internals, annotations, decorators,
``if TYPE_CHECKING`` / ``if __name__ == "__main__"`` blocks, and the ``strict=``, ``stacklevel=``
and ``repr=`` keywords (length checks, warnings and dataclass reprs: behaviour-neutral).

A line carrying ``# pragma: no mutate: <reason>`` still yields its mutants (so the seeded sample
does not move when a pragma is added), but each is marked :attr:`Mutant.equivalent` with the
reason: the mutation tool counts it as an equivalent mutant, never runs it and leaves it out of
the score. ``# pragma: no mutate(guard-always, call): <reason>`` marks only the mutants of the
operators named (``guard-always`` / ``guard-never``: one of the two guard edits; ``arith@15``:
only the one starting at column 15; a description such as ``and → or``: only that edit).
:func:`source_sha256` hashes a module with those comments stripped, so adding one does not
count as a change of the module.
"""

from __future__ import annotations

import ast
import copy
import difflib
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

OPERATORS = ("cmp", "arith", "bool", "const", "guard", "call", "return")

CMP_SWAPS: dict[type, type] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
ARITH_SWAPS: dict[type, type] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult,
}
BIT_SWAPS: dict[type, type] = {ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd}
CALL_SWAPS: dict[str, str] = {
    "mean": "max", "median": "max", "sum": "max", "max": "min", "min": "max", "any": "all",
    "all": "any", "first": "last", "last": "first", "floor": "ceil", "ceil": "floor",
}
SKIP_KEYWORDS = frozenset({"strict", "stacklevel", "repr"})
PRAGMA = "pragma: no mutate"
_PRAGMA_COMMENT = re.compile(r"[ \t]*#[ \t]*pragma: no mutate\b.*$", re.MULTILINE)
_PRAGMA_REASON = re.compile(
    r"#[ \t]*pragma: no mutate(?:\(([^)]*)\))?[ \t]*:?[ \t]*(.*?)[ \t]*$")
_NOQA = re.compile(r"[ \t]*#[ \t]*noqa\b.*$")
NO_REASON = "marked equivalent (no reason given)"


@dataclass(frozen=True)
class Mutant:
    """One changed place in one module."""

    path: str
    """Module path relative to the repository root (POSIX separators)."""
    line: int
    col: int
    operator: str
    description: str
    original: str
    mutated: str
    equivalent: str = ""
    """The reason from a ``# pragma: no mutate: <reason>`` on the mutated line(s), or empty."""

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}:{self.col}:{self.operator}:{self.description}"

    def diff(self, context: int = 1) -> str:
        lines = difflib.unified_diff(self.original.splitlines(keepends=True),
                                     self.mutated.splitlines(keepends=True),
                                     fromfile=f"a/{self.path}", tofile=f"b/{self.path}",
                                     n=context)
        return "".join(lines)


@dataclass(frozen=True)
class Edit:
    """Replace the source span of ``node`` (or a trailing part of it) with ``text``."""

    line: int
    col: int
    end_line: int
    end_col: int
    text: str
    operator: str
    description: str


def _symbol(op: ast.cmpop | ast.operator) -> str:
    fake: ast.expr
    if isinstance(op, ast.cmpop):
        fake = ast.Compare(left=ast.Name("a"), ops=[op], comparators=[ast.Name("b")])
    else:
        fake = ast.BinOp(left=ast.Name("a"), op=op, right=ast.Name("b"))
    return ast.unparse(fake)[2:-2]


def _span(node: ast.expr | ast.stmt, text: str, operator: str, description: str) -> Edit:
    return Edit(node.lineno, node.col_offset, node.end_lineno or node.lineno,
                node.end_col_offset or 0, text, operator, description)


def _is_string(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant)
                                               and isinstance(node.value, str | bytes))


def _compare_edits(node: ast.Compare) -> Iterator[Edit]:
    for i, op in enumerate(node.ops):
        alt = CMP_SWAPS.get(type(op))
        if alt is None:
            continue
        new = copy.deepcopy(node)
        new.ops[i] = alt()
        yield _span(node, f"({ast.unparse(new)})", "cmp", f"{_symbol(op)} → {_symbol(alt())}")


def _binop_edits(node: ast.BinOp) -> Iterator[Edit]:
    if _is_string(node.left) or _is_string(node.right):
        return
    for table, operator in ((ARITH_SWAPS, "arith"), (BIT_SWAPS, "bool")):
        alt = table.get(type(node.op))
        if alt is not None:
            new = copy.deepcopy(node)
            new.op = alt()
            yield _span(node, f"({ast.unparse(new)})", operator,
                        f"{_symbol(node.op)} → {_symbol(alt())}")


def _augassign_edits(node: ast.AugAssign) -> Iterator[Edit]:
    if _is_string(node.value):
        return
    for table, operator in ((ARITH_SWAPS, "arith"), (BIT_SWAPS, "bool")):
        alt = table.get(type(node.op))
        if alt is not None:
            new = copy.deepcopy(node)
            new.op = alt()
            yield _span(node, ast.unparse(new), operator,
                        f"{_symbol(node.op)}= → {_symbol(alt())}=")


def _boolop_edits(node: ast.BoolOp) -> Iterator[Edit]:
    new = copy.deepcopy(node)
    new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    names = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
    yield _span(node, f"({ast.unparse(new)})", "bool", f"{names[0]} → {names[1]}")


def _constant_edits(node: ast.Constant) -> Iterator[Edit]:
    value = node.value
    if isinstance(value, bool):
        yield _span(node, repr(not value), "const", f"{value} → {not value}")
    elif isinstance(value, int):
        yield _span(node, repr(value + 1), "const", f"{value} → {value + 1}")
    elif isinstance(value, float):
        yield _span(node, repr(value + 1.0), "const", f"{value!r} → {value + 1.0!r}")


def _guard_edits(test: ast.expr, what: str) -> Iterator[Edit]:
    yield _span(test, "True", "guard", f"{what} guard dropped (always)")
    yield _span(test, "False", "guard", f"{what} body removed (never)")


def _call_edits(node: ast.Call) -> Iterator[Edit]:
    func = node.func
    if isinstance(func, ast.Name) and func.id in CALL_SWAPS:
        new = CALL_SWAPS[func.id]
        yield _span(func, new, "call", f"{func.id}() → {new}()")
    elif isinstance(func, ast.Attribute) and func.attr in CALL_SWAPS:
        new = CALL_SWAPS[func.attr]
        end = func.end_col_offset or 0
        yield Edit(func.end_lineno or func.lineno, end - len(func.attr.encode()),
                   func.end_lineno or func.lineno, end, new, "call",
                   f".{func.attr}() → .{new}()")


def _return_edits(node: ast.Return) -> Iterator[Edit]:
    value = node.value
    if value is None or (isinstance(value, ast.Constant) and value.value is None):
        return
    yield _span(value, "None", "return", "returns None")


def _is_skipped_if(node: ast.If) -> bool:
    text = ast.unparse(node.test)
    return text in ("TYPE_CHECKING", "typing.TYPE_CHECKING") or "__name__" in text


def _skipped_parts(node: ast.AST) -> set[int]:
    """ids of the parts of ``node`` (at any depth below it) never to mutate: annotations,
    decorators, skipped keywords, ``__all__``."""
    skip: list[ast.AST | None] = []
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        skip += node.decorator_list
        if not isinstance(node, ast.ClassDef):
            skip.append(node.returns)
            args = node.args
            skip += [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
            skip += [a.annotation for a in (args.vararg, args.kwarg) if a is not None]
    if isinstance(node, ast.AnnAssign):
        skip.append(node.annotation)
    if isinstance(node, ast.Call):
        skip += [k for k in node.keywords if k.arg in SKIP_KEYWORDS]
    if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                            for t in node.targets):
        skip += [*node.targets, node.value]
    return {id(n) for n in skip if n is not None}


def _node_edits(node: ast.AST) -> Iterator[Edit]:
    if isinstance(node, ast.Compare):
        yield from _compare_edits(node)
    elif isinstance(node, ast.BinOp):
        yield from _binop_edits(node)
    elif isinstance(node, ast.AugAssign):
        yield from _augassign_edits(node)
    elif isinstance(node, ast.BoolOp):
        yield from _boolop_edits(node)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield _span(node, f"({ast.unparse(node.operand)})", "bool", "not x → x")
    elif isinstance(node, ast.Constant):
        yield from _constant_edits(node)
    elif isinstance(node, ast.If):
        yield from _guard_edits(node.test, "if")
    elif isinstance(node, ast.IfExp):
        yield from _guard_edits(node.test, "conditional expression")
    elif isinstance(node, ast.comprehension):
        for cond in node.ifs:
            yield from _guard_edits(cond, "comprehension filter")
    elif isinstance(node, ast.Call):
        yield from _call_edits(node)
    elif isinstance(node, ast.Return):
        yield from _return_edits(node)


def _walk(node: ast.AST, skip: set[int] | None = None) -> Iterator[ast.AST]:
    """Every node worth mutating, in source order, minus the never-mutated parts."""
    skip = set() if skip is None else skip
    if id(node) in skip or isinstance(node, ast.JoinedStr):
        return
    if isinstance(node, ast.If) and _is_skipped_if(node):
        return
    if isinstance(node, ast.Expr) and _is_string(node.value):
        return  # docstrings and bare string statements
    yield node
    skip |= _skipped_parts(node)
    for child in ast.iter_child_nodes(node):
        yield from _walk(child, skip)


def _apply(lines: list[bytes], edit: Edit) -> str:
    head = b"".join(lines[:edit.line - 1]) + lines[edit.line - 1][:edit.col]
    tail = lines[edit.end_line - 1][edit.end_col:] + b"".join(lines[edit.end_line:])
    return (head + edit.text.encode() + tail).decode("utf-8")


def _pragma_reason(lines: list[bytes], edit: Edit) -> str:
    """The reason of the first ``# pragma: no mutate`` on the edited line(s) that covers the
    edit's operator (``no mutate(guard, call): ...`` covers only those; ``guard-always`` and
    ``guard-never`` name one of the two guard edits, ``arith@15`` only the edit at column 15,
    a mutant's description such as ``and → or`` only that edit); "" if none."""
    kinds = {edit.operator}
    if edit.operator == "guard":
        kinds.add("guard-always" if "(always)" in edit.description else "guard-never")
    for i in range(edit.line, edit.end_line + 1):
        found = _PRAGMA_REASON.search(lines[i - 1].decode("utf-8").rstrip("\r\n"))
        if found is None:
            continue
        scope = {op.strip() for op in (found.group(1) or "").split(",") if op.strip()}
        names = kinds | {f"{k}@{edit.col}" for k in kinds} | {edit.description}
        if not scope or scope & names:
            # a trailing noqa directive (ruff, long line) is not part of the reason
            return _NOQA.sub("", found.group(2)) or NO_REASON
    return ""


def normalised_source(source: str) -> str:
    """``source`` with every ``# pragma: no mutate...`` comment (and the blanks before it)
    removed: the text whose hash says whether a module changed between two runs."""
    return _PRAGMA_COMMENT.sub("", source)


def source_sha256(source: str) -> str:
    """sha256 (hex) of :func:`normalised_source`: adding or editing a pragma keeps it."""
    return hashlib.sha256(normalised_source(source).encode("utf-8")).hexdigest()


def module_mutants(path: str, source: str, *,
                   operators: tuple[str, ...] = OPERATORS) -> list[Mutant]:
    """Every mutant of one module, in source order; mutants that do not compile are dropped.
    Mutants on a ``# pragma: no mutate`` line are kept, with :attr:`Mutant.equivalent` set."""
    tree = ast.parse(source)
    lines = source.encode("utf-8").splitlines(keepends=True)
    out: list[Mutant] = []
    seen: set[str] = set()
    for node in _walk(tree):
        for edit in _node_edits(node):
            if edit.operator not in operators:
                continue
            mutated = _apply(lines, edit)
            if mutated == source or mutated in seen:
                continue
            try:
                compile(mutated, path, "exec")
            except SyntaxError:
                continue
            seen.add(mutated)
            out.append(Mutant(path=path, line=edit.line, col=edit.col, operator=edit.operator,
                              description=edit.description, original=source,
                              mutated=mutated, equivalent=_pragma_reason(lines, edit)))
    return out
