"""One process trains a run: a lock file in the run folder, created with O_EXCL.

The file (``train.lock``) holds the holder's pid, host and start time. A second process
either waits for it to go or stops with a one-line error naming the holder. A lock left by a
process that died (same host, pid no longer alive) is taken over, and said so in one line.
O_EXCL creation is atomic on local disks and on NFSv3+, which is what a Slurm cluster's
shared runs folder usually is; a holder on another host is never declared dead, because its
pid means nothing here.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any

from guarddiag.errors import GuarddiagError
from guarddiag.runs import LOCK_FILE

logger = logging.getLogger(__name__)

TAKEOVER_STALE_S = 60.0
"""A takeover marker older than this was left by a process that died mid-takeover."""


class RunLockedError(GuarddiagError):
    """Another live process holds the run's lock."""


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def read_holder(path: Path) -> dict[str, Any] | None:
    """The lock's content (pid, host, since), or None when there is no lock. A lock being
    written this instant reads as empty: {}."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return doc if isinstance(doc, dict) else {}


def describe_holder(holder: dict[str, Any]) -> str:
    return (f"pid {holder.get('pid', '?')} on {holder.get('host', '?')} "
            f"since {holder.get('since', '?')}")


class RunLock:
    """``with RunLock(run_dir, run_id=…, wait=…):`` — hold the run's lock inside the block."""

    def __init__(self, run_dir: Path, *, run_id: str, wait: bool = False,
                 poll_s: float = 1.0, on_wait: Callable[[dict[str, Any]], None] | None = None):
        self.path = run_dir / LOCK_FILE
        self.run_id, self.wait, self.poll_s = run_id, wait, poll_s
        self.on_wait = on_wait
        self.host = socket.gethostname()
        self.held = False

    def _try_create(self) -> bool:
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        since = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"pid": os.getpid(), "host": self.host, "since": since}, fh)
        self.held = True
        return True

    def _stale(self, holder: dict[str, Any]) -> bool:
        pid = holder.get("pid")
        return (holder.get("host") == self.host and isinstance(pid, int)
                and not pid_alive(pid))

    def _young(self) -> bool:
        try:
            return time.time() - self.path.stat().st_mtime < 5.0
        except FileNotFoundError:
            return True

    def _take_over(self, holder: dict[str, Any]) -> bool:
        """Replace a dead holder's lock. A second marker file, also O_EXCL, makes sure two
        processes that both saw the dead lock do not both remove it and both train."""
        marker = self.path.with_name(LOCK_FILE + ".takeover")
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                if time.time() - marker.stat().st_mtime > TAKEOVER_STALE_S:
                    marker.unlink(missing_ok=True)
            except FileNotFoundError:
                pass
            return False
        os.close(fd)
        try:
            if read_holder(self.path) != holder:  # someone else got there first
                return False
            self.path.unlink(missing_ok=True)
            if not self._try_create():
                return False
            logger.info(f"{self.run_id}: took over the lock of {describe_holder(holder)}, "
                        f"which is no longer running")
            return True
        finally:
            marker.unlink(missing_ok=True)

    def acquire(self) -> None:
        announced = False
        while True:
            if self._try_create():
                return
            holder = read_holder(self.path)
            if holder is None:
                continue  # released between our two looks
            if not holder and self._young():
                time.sleep(0.05)  # created, its content not yet written
                continue
            if holder and self._stale(holder):
                if self._take_over(holder):
                    return
                continue
            if not self.wait:
                who = describe_holder(holder) if holder else "another process"
                raise RunLockedError(f"{self.run_id}: being trained by {who} (lock {self.path}); "
                                f"use --wait to wait for it")
            if not announced and holder:
                logger.info(f"{self.run_id}: waiting for {describe_holder(holder)} to finish it")
                if self.on_wait is not None:
                    self.on_wait(holder)
                announced = True
            time.sleep(self.poll_s)

    def release(self) -> None:
        if self.held:
            holder = read_holder(self.path)
            if holder and holder.get("pid") == os.getpid() and holder.get("host") == self.host:
                self.path.unlink(missing_ok=True)
            self.held = False

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
