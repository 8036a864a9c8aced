"""Where a user's own benchmark manifests live (``data add``), apart from the shared data.

The data directory is often shared (a team's mount, a CI cache) and sometimes read-only; a
team's private red-team set must not be described there unless the user asks for it. The user
manifests folder is ``--manifests-dir``, else ``$GUARDDIAG_USER_MANIFESTS``, else
``<user data>/user_manifests`` (:func:`guarddiag.paths.user_data_dir`, XDG-style).
"""

from __future__ import annotations

import os
from pathlib import Path

from guarddiag import paths

__all__ = ["USER_MANIFESTS_ENV", "USER_MANIFESTS_FOLDER", "legacy_user_manifests",
           "user_manifests_root"]

USER_MANIFESTS_ENV = "GUARDDIAG_USER_MANIFESTS"
"""Environment variable naming the user manifests folder (default: :func:`user_manifests_root`)."""
USER_MANIFESTS_FOLDER = "user_manifests"


def user_manifests_root(user_manifests_dir: str | os.PathLike[str] | None = None, *,
                        data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The user manifests folder: the one given, else ``$GUARDDIAG_USER_MANIFESTS``, else
    ``<user data>/user_manifests`` (:func:`guarddiag.paths.user_data_dir`). The data directory
    is often shared: a team's private benchmarks are not described there unless asked.
    ``data_dir`` is kept for :func:`legacy_user_manifests`."""
    if user_manifests_dir is not None:
        return Path(user_manifests_dir).expanduser()
    env = os.environ.get(USER_MANIFESTS_ENV)
    if env:
        return Path(env).expanduser()
    return paths.user_data_dir() / USER_MANIFESTS_FOLDER


def legacy_user_manifests(user_manifests_dir: str | os.PathLike[str] | None = None, *,
                          data_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """``<data dir>/user_manifests`` when it holds manifests an earlier version wrote there and
    it is not the folder read now (so a listing can say how to move them); else None."""
    old = paths.resolve_data_dir(data_dir) / USER_MANIFESTS_FOLDER
    now = user_manifests_root(user_manifests_dir, data_dir=data_dir)
    if not old.is_dir() or old.resolve() == now.resolve() or not any(old.glob("*.yaml")):
        return None
    return old
