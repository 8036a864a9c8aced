"""Sub-commands: ``data list`` (what is there, verified), ``data pull`` (fetch what is not)
and ``data add`` (a user's own benchmark file).

Examples::

    GUARDDIAG_DATA=../shared/data guarddiag data list
    guarddiag data list --ids study --json
    guarddiag data pull --ids saladbench_base,saladbench_attack
    guarddiag data pull --mirror http://127.0.0.1:8000     # a copy of the data dir over HTTP
    guarddiag data add red_team.csv --id red_team --text-column prompt --kind harmful
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from guarddiag.cli import add_group, add_parser, add_work_paths, work_paths_from
from guarddiag.cli.options import Flag, add_options, options_from
from guarddiag.paths import resolve_data_dir
from guarddiag.typed import name_list

logger = logging.getLogger(__name__)

# Handlers import their stage package (polars) and guarddiag.progress (tqdm) when they run:
# every sub-command module is imported to build the parser, and `guarddiag --help` stays fast.

_IDS_HELP = ("subset ids and/or selectors, comma-separated: all (every base subset), study "
             "(the 15 of SPEC §5), extra (other built-in ones), user (added with data add), "
             "derived")
ADD_MODEL = "guarddiag.data.options:AddOptions"

_MANIFESTS_DIR_HELP = ("user manifests folder (default $GUARDDIAG_USER_MANIFESTS, else "
                       "$XDG_DATA_HOME/guarddiag/user_manifests, i.e. "
                       "~/.local/share/guarddiag/user_manifests: yours, never the shared data "
                       "directory); every command reads it beside the built-in manifests")


def register(sub: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    data_sub = add_group(
        sub, "data", help="benchmark subsets: list their status, pull missing files, add your own",
        description="Benchmark subsets described by data_manifests/benchmarks/*.yaml and, for\n"
                    "your own files (data add), by the user manifests folder.")

    listing = add_parser(
        data_sub, "list", help="each subset's status (available/unavailable/invalid) and counts",
        description="Load and verify every selected subset (sha256, row counts, fields) and\n"
                    "print one line each: id, kind, set (study/extra/user/derived), where its\n"
                    "manifest comes from (built-in, user: the user manifests folder, derived),\n"
                    "status, expected and found prompt counts; unavailable subsets show where\n"
                    "to get them. Exit status 1 when a subset is invalid (present but wrong),\n"
                    "0 otherwise.")
    add_options(listing, "guarddiag.data.options:ListOptions", {
        "ids": Flag(help=_IDS_HELP),
        "manifests_dir": Flag(metavar="DIR", help=_MANIFESTS_DIR_HELP)})
    add_work_paths(listing, "derived")
    add_options(listing, "guarddiag.data.options:ListOptions",
                {"as_json": Flag(names=("--json",), action="store_true")})
    listing.set_defaults(handler=_run_list)

    pulling = add_parser(
        data_sub, "pull", help="download missing benchmark files from their public source",
        description="Download the selected subsets' missing files into the data directory.\n"
                    "Each file is checked against its pinned sha256 (or, where none is known,\n"
                    "its row count) before it is moved into place; partial downloads are kept\n"
                    "as <file>.part and resumed. Files already present are verified, never\n"
                    "overwritten. Exit status 1 when a file could not be fetched, 2 when no\n"
                    "host can be reached.\n\n"
                    "  guarddiag data pull --ids saladbench_base,saladbench_attack\n"
                    "  guarddiag data pull --mirror http://127.0.0.1:8000")
    add_options(pulling, "guarddiag.data.options:PullOptions", {
        "ids": Flag(help=_IDS_HELP), "mirror": Flag(metavar="URL"),
        "timeout": Flag(type=float, metavar="S")})
    pulling.set_defaults(handler=_run_pull)
    _add_add(data_sub)


def _add_add(data_sub: argparse._SubParsersAction) -> None:
    adding = add_parser(
        data_sub, "add", help="add your own benchmark file (CSV, JSONL, parquet, …)",
        description="Describe FILE as benchmark --id in the user manifests folder, beside the\n"
                    "built-in benchmarks: every command (audit, guards score, predict, report)\n"
                    "then reads it like one. The manifest pins the file's sha256 and row count\n"
                    "and holds its absolute path: the file stays where you keep it, and an edited\n"
                    "file fails to load with a checksum error until added again with --replace.\n"
                    "Prompt ids are the --id-column values, else the 1-based data-row numbers.\n"
                    "Formats by suffix: .csv, .jsonl, .jsonl.gz, .json (array of records),\n"
                    ".parquet, .txt (one prompt per line, column text).\n\n"
                    "A file with a label-like column (label, verdict, is_harmful …, or one\n"
                    "holding only label words such as safe/unsafe) is refused unless\n"
                    "--label-column splits it or --whole-file says every row is --kind.\n"
                    "Label values match whatever their case and spacing; any value in\n"
                    "neither --harmful-values nor --benign-values is an error. A benchmark\n"
                    "under 20 prompts is 'undetermined' in the policy-or-capability test.\n\n"
                    "  guarddiag data add red_team.csv --id red_team --text-column prompt \\\n"
                    "      --kind harmful --category-column category\n"
                    "  guarddiag data add mixed.csv --id team --text-column prompt \\\n"
                    "      --label-column label --harmful-values harmful,unsafe \\\n"
                    "      --benign-values benign")
    adding.add_argument("file", metavar="FILE", help="the benchmark file")
    add_options(adding, ADD_MODEL, {
        "subset_id": Flag(names=("--id",), required=True, metavar="ID"),
        "text_column": Flag(required=True, metavar="C"),
        "kind": Flag(choices=("harmful", "benign"),
                     help="what a guard should call every prompt of it (required unless "
                          "--label-column splits the file)"),
        "label_column": Flag(metavar="C",
                             help="column holding each row's label: split the file into "
                                  "ID_harmful (rows with a --harmful-values value) and "
                                  "ID_benign (rows with a --benign-values value)"),
        "harmful_values": Flag(type=name_list, metavar="V[,V…]",
                               help="with --label-column: the values that mean harmful (case "
                                    "and spaces ignored: Harmful, ' harmful ' and harmful are "
                                    "one value)"),
        "benign_values": Flag(type=name_list, metavar="V[,V…]",
                              help="with --label-column: the values that mean benign; required "
                                   "when the column holds any other value, and a value in "
                                   "neither list is an error listing every value with its "
                                   "count"),
        "whole_file": Flag(action="store_true",
                           help="every row is --kind even though a column looks like a "
                                "per-row label (without it such a file is refused)"),
        "category_column": Flag(metavar="C"), "id_column": Flag(metavar="C"),
        "response_column": Flag(metavar="C"), "title": Flag(),
        "file_format": Flag(names=("--format",),
                            choices=("csv", "jsonl", "jsonl.gz", "json", "parquet", "lines")),
        "manifests_dir": Flag(metavar="DIR",
                              help=_MANIFESTS_DIR_HELP + "; a folder other than the default is "
                                   "read by other commands only when "
                                   "$GUARDDIAG_USER_MANIFESTS names it"),
        "replace": Flag(action="store_true")})
    adding.set_defaults(handler=_run_add)


def _group(status: Any) -> str:
    """study / extra / user / derived: the selector a subset belongs to."""
    if status.derived:
        return "derived"
    if status.defined_in == "user":
        return "user"
    return "study" if status.study else "extra"


def _fmt_count(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def _run_list(args: argparse.Namespace) -> int:
    from guarddiag import data
    from guarddiag.data.options import ListOptions

    o = options_from(args, ListOptions, where="guarddiag data list")
    data_dir = resolve_data_dir(args.data_dir)
    derived_dir = work_paths_from(args).derived
    statuses = data.subset_status(data_dir=data_dir, ids=o.ids, derived_dir=derived_dir,
                                  user_manifests_dir=o.manifests_dir)
    if o.as_json:
        print(json.dumps([s.to_dict() for s in statuses], indent=2, sort_keys=True,
                         ensure_ascii=False))
        return 1 if any(s.status == "invalid" for s in statuses) else 0
    print(f"data directory: {data_dir}")
    print(f"user manifests: {data.user_manifests_root(o.manifests_dir, data_dir=data_dir)}")
    old = data.legacy_user_manifests(o.manifests_dir, data_dir=data_dir)
    if old is not None:
        print(f"not read: {old} (user manifests an earlier version wrote into the data "
              f"directory; move them to the folder above, or set {data.USER_MANIFESTS_ENV})")
    width = max([len(s.id) for s in statuses] + [6])
    print(f"{'subset':<{width}}  {'kind':<7}  {'set':<7}  {'from':<8}  {'status':<11}  "
          f"{'expected':>8}  {'found':>8}  note")
    for s in statuses:
        group = _group(s)
        if s.status == "unavailable":
            note = f"source: {s.source}"
        elif s.status == "invalid":
            note = s.message or ""
        elif not s.checksum_verified:
            note = f"sha256 not pinned (count verified; computed {(s.sha256 or '')[:12]}…)"
        else:
            note = ""
        print(f"{s.id:<{width}}  {s.kind:<7}  {group:<7}  {s.defined_in:<8}  {s.status:<11}  "
              f"{_fmt_count(s.expected):>8}  {_fmt_count(s.found):>8}  {note}".rstrip())
    print()
    for group in ("study", "extra", "user", "derived"):
        chosen = [s for s in statuses if _group(s) == group]
        if not chosen:
            continue
        ok = [s for s in chosen if s.status == "available"]
        found = sum(s.found or 0 for s in ok)
        expected = sum(s.expected for s in chosen)
        print(f"{group}: {len(ok)} of {len(chosen)} subsets available, {found:,} of "
              f"{expected:,} prompts")
    invalid = [s for s in statuses if s.status == "invalid"]
    if any(s.status == "unavailable" for s in statuses):
        # On stdout with the listing it explains: on stderr it interleaved with the counts.
        print("unavailable subsets are skipped by every command; "
              "`guarddiag data pull` fetches them")
    for s in invalid:
        print(f"guarddiag: invalid subset: {s.message}", file=sys.stderr)
    return 1 if invalid else 0


def _run_pull(args: argparse.Namespace) -> int:
    from guarddiag import data
    from guarddiag.data.options import PullOptions

    o = options_from(args, PullOptions, where="guarddiag data pull")
    result = data.pull(ids=o.ids, data_dir=args.data_dir, mirror=o.mirror, timeout=o.timeout)
    logger.info(f"data directory: {result.data_dir}")
    for f in result.files:
        if f.status == "present":
            detail = "sha256 ok" if f.verified else (f.message or "")
        elif f.status == "downloaded":
            detail = (f"sha256 ok, from {f.url}" if f.verified
                      else f"{f.message}, from {f.url}")
        else:
            detail = f.message or ""
        print(f"{f.status:<10}  {f.path}  [{','.join(f.subsets)}]  {detail}".rstrip())
    n = {k: sum(f.status == k for f in result.files)
         for k in ("present", "downloaded", "failed")}
    print(f"{n['downloaded']} downloaded, {n['present']} already present, {n['failed']} failed")
    return 1 if result.failed else 0


def _run_add(args: argparse.Namespace) -> int:
    from guarddiag import data
    from guarddiag.data.options import AddOptions
    from guarddiag.protocol import protocol

    o = options_from(args, AddOptions, where="guarddiag data add")
    added = data.add_file(args.file, o, data_dir=resolve_data_dir(args.data_dir))
    results = [("harmful", added.harmful), ("benign", added.benign)] \
        if isinstance(added, data.SplitAddResult) else [(o.kind, added)]
    verb = {"added": "added", "replaced": "replaced", "unchanged": "already added, unchanged:"}
    for kind, result in results:
        print(f"{verb[result.status]} {result.subset_id}: {result.rows:,} {kind} prompts from "
              f"{result.file} ({result.format}, sha256 {result.sha256[:12]}…)")
        print(f"manifest: {result.manifest_path}")
        if result.rows < (need := protocol().min_prompts):
            logger.info(f"{result.subset_id} has {result.rows} prompts: the report's policy-or-"
                        f"capability test needs {need}, so it will call it undetermined")
    first = results[0][1]
    default_root = data.user_manifests_root(data_dir=resolve_data_dir(args.data_dir))
    if first.manifest_path.parent.resolve() != default_root.resolve():
        logger.info(f"other commands read this folder when {data.USER_MANIFESTS_ENV}="
                    f"{first.manifest_path.parent} is set")
    ids = ",".join(r.subset_id for _, r in results)
    print(f"use it: guarddiag audit --benchmarks {ids}; in Python: "
          f"guarddiag.data.load_benchmark({first.subset_id!r})")
    return 0
