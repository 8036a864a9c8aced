"""How many CPU cores this process may use (the one answer every parallel stage asks), work
started beside the caller's, and the collector kept off the objects a long run starts with."""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity, e.g. a Slurm or container limit), at
    least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS and Windows have no affinity call
        return max(1, os.cpu_count() or 1)


def meanwhile(work: Callable[..., T], *args: Any) -> Future[T]:
    """``work(*args)`` started in a daemon thread, for work that releases the GIL while the
    caller does other work: the pool's sha256 while the benchmarks load (the figures:
    docs/decisions.md#2026-12-05-the-audits-memory-and-threads), the near-dup index while the id
    pass runs. Not an executor: a run that fails or is interrupted meanwhile returns at once,
    where an executor would wait for the work to end, even at exit."""
    future: Future[T] = Future()

    def run() -> None:
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(work(*args))
            except BaseException as exc:    # handed to whoever waits on the result
                future.set_exception(exc)

    threading.Thread(target=run, daemon=True, name=getattr(work, "__name__", "meanwhile")
                     ).start()
    return future


@contextlib.contextmanager
def objects_alive_now_frozen() -> Iterator[None]:
    """While the block runs, the objects alive at its start (chiefly the imported libraries) are
    left out of the collector's full collections (:func:`gc.freeze`), which would otherwise walk
    them all again each time (docs/decisions.md#2026-12-05-the-audits-memory-and-threads). They are
    handed back to the collector at the end. A process that froze objects itself, or turned the
    collector off, is left as it is."""
    if gc.get_freeze_count() or not gc.isenabled():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
