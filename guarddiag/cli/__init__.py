"""The ``guarddiag`` command: one thin sub-command per stage, each calling one library verb.

Sub-commands live in :mod:`guarddiag.cli`, one module per command (or command group); each
module's ``register(sub, bench)`` adds its parsers to the top-level sub-parsers and to
``bench``'s. A verb's option flags are generated from its options model
(:mod:`guarddiag.cli.options`).
Heavy libraries (torch, transformers, matplotlib) are imported inside handlers, so
``guarddiag --help`` stays fast.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from importlib import import_module
from pathlib import Path
from typing import NoReturn

from guarddiag.cli.options import field_of, help_of
from guarddiag.errors import GuarddiagError
from guarddiag.paths import DEFAULT_WORK_DIR, WorkPaths

COMMAND_MODULES = ("data", "pool", "audit", "branches", "train", "predict", "sweep", "guards",
                   "label", "report", "sorry", "export", "demo", "runs")

_DESCRIPTION = """\
guarddiag: how much of a guard classifier's public-benchmark score is detection capability,
and how much is the moderation policy its training labels encoded.

Typical order: data list -> pool build -> audit -> train -> predict -> report
(`guarddiag demo` runs all of it at CPU size). Every sub-command has its own --help."""


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Keeps descriptions as written and shows defaults, except empty ones; a flag generated
    from an options model (:mod:`guarddiag.cli.options`) shows its field's help and default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if field_of(action) is not None:
            return help_of(action)
        if action.default in (None, False, argparse.SUPPRESS) or not action.help:
            return action.help
        return super()._get_help_string(action)


def _common_options() -> argparse.ArgumentParser:
    # Accept --data-dir after the sub-command too; SUPPRESS keeps the top-level value otherwise.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", default=argparse.SUPPRESS, metavar="DIR",
                        help="public data directory (benchmarks/, pools/); "
                             "default $GUARDDIAG_DATA")
    return common


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="guarddiag", description=_DESCRIPTION,
                                     formatter_class=_Formatter)
    from guarddiag import __version__

    parser.add_argument("--version", action="version", version=f"guarddiag {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="status lines on stderr only for warnings and errors")
    parser.add_argument(
        "--numerics", choices=("portable", "native"), default=None,
        help="CPU kernels torch computes with: portable (the same bytes on any x86-64 CPU with "
             "AVX2; the default) or native (this CPU's fastest, bf16 where it pays; other "
             "CPUs give other bits). Default: $GUARDDIAG_NUMERICS, else portable")
    parser.add_argument(
        "--data-dir", default=None, metavar="DIR",
        help="public data directory holding benchmarks/ and pools/ "
             "(default: $GUARDDIAG_DATA, else ~/.cache/guarddiag/data)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    bench_parser = sub.add_parser(
        "bench", help="speed benchmarks that print throughput figures",
        description="Speed benchmarks. Each prints figures; none is a pass/fail test.",
        formatter_class=_Formatter)
    bench_parser.add_argument(
        "--record", type=Path, default=None, metavar="FILE",
        help="also write what the bench prints, headed by the date, commit, CPU flags, load and "
             "command, to FILE (Markdown; the docs include docs/measured/*.md)")
    bench = bench_parser.add_subparsers(dest="bench_command", metavar="BENCH", required=True)
    for name in COMMAND_MODULES:
        import_module(f"guarddiag.cli.{name}").register(sub, bench)
    return parser


def add_parser(sub: argparse._SubParsersAction, name: str, *, help: str,
               description: str | None = None) -> argparse.ArgumentParser:
    """A sub-command parser with the house formatter (defaults shown, text kept as written)."""
    return sub.add_parser(name, help=help, description=description or help,
                          formatter_class=_Formatter, parents=[_common_options()])


def add_group(sub: argparse._SubParsersAction, name: str, *, help: str, description: str,
              metavar: str = "ACTION") -> argparse._SubParsersAction:
    """A command that only groups actions (``data list``, ``guards score``): the sub-parsers
    its actions are added to, their name in ``<name>_command``."""
    parser = sub.add_parser(name, help=help, description=description,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser.add_subparsers(dest=f"{name}_command", metavar=metavar, required=True)


def print_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    """Left-aligned columns, as wide as their longest cell, for a command's printed summary."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


# The work-folder options: WorkPaths field → flag, metavar, what it holds (where it defaults to
# is WorkPaths.under's).
_PATH_OPTIONS: dict[str, tuple[str, str, str]] = {
    "pool": ("--pool", "FILE", "labelled pool table"),
    "audit": ("--audit-dir", "DIR", "contamination audit folder (overlap.parquet, summary.json)"),
    "runs": ("--runs-dir", "DIR", "runs folder (runs, predictions.parquet, outside/)"),
    "derived": ("--derived-dir", "DIR", "folder of derived (mutated) subsets written by "
                                        "`guarddiag mutate`"),
}


def add_work_paths(p: argparse.ArgumentParser | argparse._ArgumentGroup, *fields: str,
                   help: Mapping[str, str] | None = None) -> None:
    """``--work-dir`` and the named work-folder options (``pool``, ``audit``, ``runs``,
    ``derived``), each defaulting to its place under ``--work-dir`` (``work/``); resolve them
    with :func:`work_paths_from`. ``help`` replaces an option's description for one command."""
    if not any(a.dest == "work_dir" for a in getattr(p, "_actions", [])):
        p.add_argument("--work-dir", type=Path, default=None, metavar="DIR",
                       help="work folder the options below default into "
                            f"(default {DEFAULT_WORK_DIR}/)")
    layout = WorkPaths.under("<work-dir>")
    for name in fields:
        flag, metavar, text = _PATH_OPTIONS[name]
        text = (help or {}).get(name, text)
        p.add_argument(flag, dest=f"{name}_path", type=Path, default=None, metavar=metavar,
                       help=f"{text} (default {getattr(layout, name).as_posix()})")


def work_paths_from(args: argparse.Namespace) -> WorkPaths:
    """The :class:`WorkPaths` a command was given: ``--work-dir``'s layout with every
    work-folder option the user set put in its place."""
    base = WorkPaths.under(getattr(args, "work_dir", None))
    given = {name: getattr(args, f"{name}_path") for name in _PATH_OPTIONS
             if getattr(args, f"{name}_path", None) is not None}
    return replace(base, **given)


POLARS_ALLOCATOR = "dirty_decay_ms:10000,muzzy_decay_ms:10000"
"""How long polars' jemalloc keeps freed pages before handing them back (polars' own default: 0.5
and 1 s). A scan allocates and frees each batch's buffers, and a page handed back is zeroed again
when next used (docs/decisions.md#2026-12-05-the-audits-memory-and-threads). Set by :func:`main`
before polars is imported (polars appends ``_RJEM_MALLOC_CONF`` to its own, so this wins); a value
the user set is kept."""


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("_RJEM_MALLOC_CONF", POLARS_ALLOCATOR)
    parser = build_parser()
    args = parser.parse_args(argv)
    from guarddiag.progress import log_to_stderr

    log_to_stderr(level=logging.WARNING if getattr(args, "quiet", False) else logging.INFO)
    try:
        from guarddiag import numerics

        # torch is imported by the handlers only, so the kernels can still be chosen here
        numerics.request(getattr(args, "numerics", None) or numerics.requested())
        if getattr(args, "record", None) is not None:
            from guarddiag.cli.record import recorded

            return recorded(lambda: int(args.handler(args) or 0), path=args.record,
                            argv=list(argv if argv is not None else sys.argv[1:]))
        return int(args.handler(args) or 0)
    except GuarddiagError as exc:
        print(f"guarddiag: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("guarddiag: interrupted; finished work is kept and the next run resumes",
              file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `guarddiag data list | head`: stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:
        # A bug, not the user's input: status 3, never 1 (1 means "a gate failed"), with the
        # traceback for the report.
        import traceback

        traceback.print_exc(file=sys.stderr)
        print(f"guarddiag: internal error ({type(exc).__name__}: {exc}); this is a bug in "
              "guarddiag, not in your input: please report it with the traceback above",
              file=sys.stderr)
        return 3


def run() -> NoReturn:
    """The ``guarddiag`` command: :func:`main`, then exit with its status.

    Every object is frozen first (:func:`gc.freeze`): the interpreter's shutdown otherwise walks
    them all in full collections, a noticeable share of every command once polars, pydantic and
    pyarrow are loaded (docs/decisions.md#2026-12-05-start-up-costs-behind-the-lazy-imports).
    Objects are still freed by
    their reference counts and the exit handlers still run; only reference cycles still alive at
    exit go unwalked, as the process's memory is handed back whole."""
    status = main()
    gc.freeze()
    sys.exit(status)


if __name__ == "__main__":
    run()
