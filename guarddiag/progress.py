"""Progress bars for long work (shown on a terminal, silent in logs and tests) and the CLI's
status lines: every module logs to ``logging.getLogger(__name__)``; the CLI shows them."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tqdm.auto import tqdm


def _enabled() -> bool:
    if os.environ.get("GUARDDIAG_PROGRESS") == "1":
        return True
    if os.environ.get("GUARDDIAG_PROGRESS") == "0":
        return False
    return sys.stderr.isatty()


def library_bars_follow_ours() -> None:
    """Hugging Face's own bars (weights loading, downloads) shown exactly when ours are: a log
    file or a test never gets them. Call it after importing transformers, before loading."""
    from transformers.utils import logging as hf_logging

    if _enabled():
        hf_logging.enable_progress_bar()
    else:
        hf_logging.disable_progress_bar()


def progress(iterable: Iterable[Any] | None = None, *, total: int | None = None, desc: str = "",
             unit: str = "it", **kwargs: Any) -> tqdm[Any]:
    """A tqdm bar on stderr; disabled unless stderr is a terminal (or GUARDDIAG_PROGRESS=1).
    tqdm is imported here: every command imports this module for its status lines, and tqdm.auto
    imports asyncio and looks its version up
    (docs/decisions.md#2026-12-05-start-up-costs-behind-the-lazy-imports)."""
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=not _enabled(),
                dynamic_ncols=True, leave=False, file=sys.stderr, **kwargs)


class _CurrentStderr(logging.StreamHandler):
    # logging.StreamHandler binds the stream it was given; this one writes to whatever
    # sys.stderr is when a record is emitted, so redirections and pytest's capture see it.
    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def log_to_stderr(*, level: int = logging.INFO) -> None:
    """Show guarddiag's log records on stderr as plain lines (what the CLI does; stdout stays
    machine-readable). Library users configure ``logging`` as they like instead. Idempotent."""
    logger = logging.getLogger("guarddiag")
    logger.setLevel(level)
    if not any(isinstance(h, _CurrentStderr) for h in logger.handlers):
        handler = _CurrentStderr()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
