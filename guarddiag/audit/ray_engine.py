"""``--engine ray``: the audit's scan tasks as Ray tasks, on a local or a remote cluster.

Each work unit (:class:`~guarddiag.audit.stream.Task`) becomes one Ray task that reads its rows
itself, so the shards must be at the same path on every node (a shared file system or a bucket
mounted alike). Results are fetched in task order, which is what makes the merged outputs the
same bytes as the local engine's. Ray is optional (``pip install -e ".[ray]"``, the same extra as
the sweep).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from guarddiag.audit.stream import Task
from guarddiag.errors import GuarddiagError

__all__ = ["ray_map"]

_IN_FLIGHT = 64
"""Tasks submitted ahead of the one being merged: bounds the results held by the driver."""


def ray_map(fn: Callable[[Task, Any], Any], tasks: list[Task], spec: Any, *,
            address: str | None = None) -> Iterator[Any]:
    """``fn(task, spec)`` for every task as Ray tasks, results in task order. Joins the running
    cluster at ``address`` (``auto`` for the one ``ray start`` made), or the one this process
    already joined, or starts a local one."""
    try:
        import ray
    except ImportError:
        raise GuarddiagError('--engine ray: Ray is not installed; pip install -e ".[ray]" (or '
                             "use --engine local)") from None
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    remote = ray.remote(fn).options(num_cpus=1, max_retries=3)
    spec_ref = ray.put(spec)
    refs: list[Any] = []
    submitted = 0
    for k in range(len(tasks)):
        while submitted < len(tasks) and submitted < k + _IN_FLIGHT:
            refs.append(remote.remote(tasks[submitted], spec_ref))
            submitted += 1
        try:
            yield ray.get(refs[k])
        except ray.exceptions.RayTaskError as exc:
            for ref in refs[k + 1:]:
                ray.cancel(ref)
            # A bad row in a shard is the user's mistake: its one line, not Ray's traceback.
            cause = getattr(exc, "cause", None)
            if isinstance(cause, GuarddiagError):
                raise GuarddiagError(str(cause)) from None
            raise
        refs[k] = None
