"""``--engine ray``: the audit's scan tasks as Ray tasks, on a local or a remote cluster.

Each work unit (:class:`~guarddiag.audit.stream.Task`) becomes one Ray task that reads its rows
itself, so the shards must be at the same path on every node (a shared file system or a bucket
mounted alike). Results come back as tasks finish; the driver stores each one and merges them
in task order, which is what makes the outputs the same bytes as the local engine's. Ray is
optional (``pip install -e ".[ray]"``, the same extra as the sweep).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from guarddiag.audit.stream import Task
from guarddiag.errors import GuarddiagError

__all__ = ["ray_map"]

_IN_FLIGHT = 64
"""Tasks submitted at once: bounds the finished results waiting for the driver."""


def ray_map(fn: Callable[[Task, Any], Any], pending: list[tuple[int, Task]], spec: Any, *,
            address: str | None = None) -> Generator[tuple[int, Any]]:
    """``(index, fn(task, spec))`` for every pending ``(index, task)`` as Ray tasks, as each
    finishes. Joins the running cluster at ``address`` (``auto`` for the one ``ray start``
    made), or the one this process already joined, or starts a local one.

    A bad row (a :class:`GuarddiagError` in a task) stops new submissions and cancels the
    tasks after it; the error raised is the one of the first bad task in pool order.
    """
    try:
        import ray
    except ImportError:
        raise GuarddiagError('--engine ray: Ray is not installed; pip install -e ".[ray]" (or '
                             "use --engine local)") from None
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    remote = ray.remote(fn).options(num_cpus=1, max_retries=3)
    spec_ref = ray.put(spec)
    queue = list(reversed(pending))       # pop() takes the next task in pool order
    running: dict[Any, int] = {}
    failed: list[tuple[int, GuarddiagError]] = []
    while queue or running:
        while queue and not failed and len(running) < _IN_FLIGHT:
            index, task = queue.pop()
            running[remote.remote(task, spec_ref)] = index
        if not running:
            break
        ready, _ = ray.wait(list(running), num_returns=1)
        for ref in ready:
            index = running.pop(ref)
            try:
                result = ray.get(ref)
            except ray.exceptions.RayTaskError as exc:
                # A bad row in a shard is the user's mistake: its one line, not Ray's traceback.
                cause = getattr(exc, "cause", None)
                if not isinstance(cause, GuarddiagError):
                    raise
                failed.append((index, GuarddiagError(str(cause))))
                for later in [r for r, i in running.items() if i > index]:
                    ray.cancel(later)
                    running.pop(later)
                continue
            yield index, result
    if failed:
        raise min(failed, key=lambda f: f[0])[1]
