"""Sub-commands: ``branches validate`` and ``branches list`` (the branch specs, branches/*.yaml).

Examples::

    guarddiag branches validate
    guarddiag branches list --branches-dir my_branches/
"""

from __future__ import annotations

import argparse

from guarddiag.cli import add_group, add_parser, print_table


def register(sub: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    actions = add_group(
        sub, "branches", help="check and list the branch specs (branches/*.yaml)",
        description="Branch specs: the teachers T_A/T_B, the reference and E1-E10 (SPEC §4),\n"
                    "one flat YAML file each. Use --branches-dir for your own set.")
    validate = add_parser(actions, "validate", help="validate every spec, all errors at once",
                          description="Validate the branch specs as a set: known keys and "
                                      "routes, fractions in [0, 1],\nknown sizes, teachers and "
                                      "parents that exist, no dependency cycles, roles\n"
                                      "consistent with the recipe. Every problem is printed on "
                                      "its own line\nnaming file and field.")
    lister = add_parser(actions, "list", help="one line per branch",
                        description="List the branches with their roles (role, policy of "
                                    "the last signal), routes, label mix, teacher/parent and "
                                    "budget.")
    for p in (validate, lister):
        p.add_argument("--branches-dir", default=None, metavar="DIR",
                       help="folder of branch specs (default: the bundled branches/)")
    validate.set_defaults(handler=_run_validate)
    lister.set_defaults(handler=_run_list)


def _run_validate(args: argparse.Namespace) -> int:
    from guarddiag.train.branches import load_branches

    branches = load_branches(args.branches_dir)
    print(f"{len(branches.branches)} branch specs OK in {branches.folder}: "
          f"{', '.join(branches.names())}")
    return 0


def _run_list(args: argparse.Namespace) -> int:
    from guarddiag.train.branches import load_branches

    branches = load_branches(args.branches_dir)
    header = ("branch", "role", "last", "routes", "labels", "teacher", "parent", "size", "rows",
              "epochs", "description")
    rows = []
    for name in branches.names():
        s = branches[name]
        role = s.role + (f" of {s.control_of}" if s.control_of else "")
        rows.append((name, role, s.last_policy, "+".join(s.routes), s.label_policy(),
                     s.teacher or "-",
                     s.parent or "-", s.size, "all" if s.train_rows is None else str(s.train_rows),
                     str(s.epochs), s.description))
    print_table(header, rows)
    return 0
