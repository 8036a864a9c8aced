"""Progress bars for long work: shown on a terminal, silent in logs and tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

from tqdm.auto import tqdm


def _enabled() -> bool:
    if os.environ.get("GUARDDIAG_PROGRESS") == "1":
        return True
    if os.environ.get("GUARDDIAG_PROGRESS") == "0":
        return False
    return sys.stderr.isatty()


def progress(iterable: Iterable[Any] | None = None, *, total: int | None = None, desc: str = "",
             unit: str = "it", **kwargs: Any) -> tqdm[Any]:
    """A tqdm bar on stderr; disabled unless stderr is a terminal (or GUARDDIAG_PROGRESS=1)."""
    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=not _enabled(),
                dynamic_ncols=True, leave=False, file=sys.stderr, **kwargs)


def say(message: str) -> None:
    """A status line for the user, on stderr so stdout stays machine-readable."""
    print(message, file=sys.stderr, flush=True)
