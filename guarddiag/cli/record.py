"""``guarddiag bench --record FILE …``: a bench command's printed figures, kept as the Markdown
file the docs include (docs/measured/), headed by when, at which commit, on which CPU, at what
load and by which command they were measured, so no figure in the docs is copied by hand."""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

__all__ = ["recorded"]


class _Tee(io.TextIOBase):
    """Writes to the terminal and keeps a copy."""

    def __init__(self, out: TextIO | None) -> None:
        self.out, self.kept = out, io.StringIO()

    def write(self, text: str) -> int:
        if self.out is not None:
            self.out.write(text)
        return self.kept.write(text)

    def flush(self) -> None:
        if self.out is not None:
            self.out.flush()


def recorded(run: Callable[[], int], *, path: Path, argv: Sequence[str]) -> int:
    """Run ``run`` (a bench handler) printing as usual; if it succeeds, write what it printed
    to ``path`` under a dated header. A failed bench writes nothing (an old file stays)."""
    from guarddiag import numerics
    from guarddiag.files import git_sha

    tee = _Tee(sys.stdout)
    load = os.getloadavg()
    start = time.monotonic()
    with contextlib.redirect_stdout(tee):
        status = run()
    if status != 0:
        return status
    command = "guarddiag " + shlex.join(_without_record(argv))
    header = (f"Measured {datetime.date.today().isoformat()} at commit "
              f"`{git_sha() or 'unknown'}` by `{command}` in {time.monotonic() - start:,.0f} s; "
              f"CPU {numerics.cpu_flags()}, {os.cpu_count()} core(s), load average "
              + " ".join(f"{x:.2f}" for x in load) + " at the start.")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{header}\n\n```text\n{tee.kept.getvalue().rstrip()}\n```\n",
                    encoding="utf-8")
    print(f"wrote {path}")
    return 0


def _without_record(argv: Sequence[str]) -> list[str]:
    """The command line less its ``--record FILE`` (or ``--record=FILE``)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--record":
            skip = True
        elif not arg.startswith("--record="):
            out.append(arg)
    return out
