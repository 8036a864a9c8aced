"""Sub-commands: ``data list`` (what is there, verified) and ``data pull`` (fetch what is not).

Examples::

    GUARDDIAG_DATA=../shared/data guarddiag data list
    guarddiag data list --ids study --json
    guarddiag data pull --ids saladbench_base,saladbench_attack
    guarddiag data pull --mirror http://127.0.0.1:8000     # a copy of the data dir over HTTP
"""

from __future__ import annotations

import argparse
import json
import sys

from guarddiag.cli import add_parser, add_work_paths, work_paths_from
from guarddiag.paths import resolve_data_dir

# Handlers import their stage package (polars) and guarddiag.progress (tqdm) when they run:
# every sub-command module is imported to build the parser, and `guarddiag --help` stays fast.

_IDS_HELP = ("subset ids and/or selectors, comma-separated: all (every mirrored subset), study "
             "(the 15 of SPEC §5), extra, derived")


def register(sub: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "data", help="benchmark subsets: list their status, pull missing files",
        description="Benchmark subsets described by data_manifests/benchmarks/*.yaml.")
    data_sub = parser.add_subparsers(dest="data_command", metavar="ACTION", required=True)

    listing = add_parser(
        data_sub, "list", help="each subset's status (available/unavailable/invalid) and counts",
        description="Load and verify every selected subset (sha256, row counts, fields) and\n"
                    "print one line each: id, kind, set (study/extra/derived), status, expected\n"
                    "and found prompt counts; unavailable subsets show where to get them.\n"
                    "Exit status 1 when a subset is invalid (present but wrong), 0 otherwise.")
    listing.add_argument("--ids", default="all,derived", help=_IDS_HELP)
    add_work_paths(listing, "derived")
    listing.add_argument("--json", action="store_true",
                         help="print a JSON list of subset records instead of the table")
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
    pulling.add_argument("--ids", default="all", help=_IDS_HELP)
    pulling.add_argument("--mirror", default=None, metavar="URL",
                         help="fetch <URL>/<relative path> instead of the public sources: a "
                              "copy of the data directory served over HTTP (default "
                              "$GUARDDIAG_MIRROR)")
    pulling.add_argument("--timeout", type=float, default=60.0, metavar="S",
                         help="seconds to wait for a server before giving up on a URL")
    pulling.set_defaults(handler=_run_pull)


def _fmt_count(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def _run_list(args: argparse.Namespace) -> int:
    from guarddiag import data

    data_dir = resolve_data_dir(args.data_dir)
    derived_dir = work_paths_from(args).derived
    statuses = data.subset_status(data_dir=data_dir, ids=args.ids, derived_dir=derived_dir)
    if args.json:
        print(json.dumps([s.to_dict() for s in statuses], indent=2, sort_keys=True,
                         ensure_ascii=False))
        return 1 if any(s.status == "invalid" for s in statuses) else 0
    print(f"data directory: {data_dir}")
    width = max([len(s.id) for s in statuses] + [6])
    print(f"{'subset':<{width}}  {'kind':<7}  {'set':<7}  {'status':<11}  "
          f"{'expected':>8}  {'found':>8}  note")
    for s in statuses:
        group = "derived" if s.derived else ("study" if s.study else "extra")
        if s.status == "unavailable":
            note = f"source: {s.source}"
        elif s.status == "invalid":
            note = s.message or ""
        elif not s.checksum_verified:
            note = f"sha256 not pinned (count verified; computed {(s.sha256 or '')[:12]}…)"
        else:
            note = ""
        print(f"{s.id:<{width}}  {s.kind:<7}  {group:<7}  {s.status:<11}  "
              f"{_fmt_count(s.expected):>8}  {_fmt_count(s.found):>8}  {note}".rstrip())
    print()
    for group, pick in (("study", lambda s: s.study), ("extra", lambda s: not s.study
                                                        and not s.derived),
                        ("derived", lambda s: s.derived)):
        chosen = [s for s in statuses if pick(s)]
        if not chosen:
            continue
        ok = [s for s in chosen if s.status == "available"]
        found = sum(s.found or 0 for s in ok)
        expected = sum(s.expected for s in chosen)
        print(f"{group}: {len(ok)} of {len(chosen)} subsets available, {found:,} of "
              f"{expected:,} prompts")
    invalid = [s for s in statuses if s.status == "invalid"]
    if any(s.status == "unavailable" for s in statuses):
        print("unavailable subsets are skipped by every command; "
              "`guarddiag data pull` fetches them", file=sys.stderr)
    for s in invalid:
        print(f"guarddiag: invalid subset: {s.message}", file=sys.stderr)
    return 1 if invalid else 0


def _run_pull(args: argparse.Namespace) -> int:
    from guarddiag import data
    from guarddiag.progress import say

    result = data.pull(ids=args.ids, data_dir=args.data_dir, mirror=args.mirror,
                       timeout=args.timeout)
    say(f"data directory: {result.data_dir}")
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
