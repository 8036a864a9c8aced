"""``data pull``: download the selected subsets' missing files from their public source.

Each file goes to ``<file>.part`` (resumed on the next run when the server honours HTTP
ranges), is checked against its pinned sha256 (or, where none is known, its row count), and only
then renamed into place. A mirror (``--mirror`` or ``$GUARDDIAG_MIRROR``) is a copy of the data
directory served over HTTP.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.error
import urllib.request
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from guarddiag import paths
from guarddiag.data.manifest import BenchmarkFile, BenchmarkManifest, load_manifests, resolve_ids
from guarddiag.data.read import read_file_rows
from guarddiag.errors import GuarddiagError
from guarddiag.files import atomic_path, sha256_file
from guarddiag.progress import progress

__all__ = ["MIRROR_ENV", "PullResult", "PulledFile", "pull"]

MIRROR_ENV = "GUARDDIAG_MIRROR"
"""Environment variable: base URL of a mirror laid out like the data directory."""


@dataclass(frozen=True)
class PulledFile:
    """What ``data pull`` did with one file."""

    path: str
    """Relative path under the data directory."""
    subsets: tuple[str, ...]
    status: str
    """``present`` (already there, verified), ``downloaded``, or ``failed``."""
    url: str | None
    sha256: str | None
    verified: bool
    """True when the sha256 was checked against a pinned digest."""
    message: str | None = None


@dataclass(frozen=True)
class PullResult:
    files: tuple[PulledFile, ...]
    data_dir: Path

    @property
    def failed(self) -> tuple[PulledFile, ...]:
        return tuple(f for f in self.files if f.status == "failed")

    def to_frame(self) -> pl.DataFrame:
        return pl.DataFrame([{"path": f.path, "subsets": ",".join(f.subsets),
                              "status": f.status, "url": f.url, "sha256": f.sha256,
                              "verified": f.verified, "message": f.message}
                             for f in self.files],
                            schema={"path": pl.String, "subsets": pl.String,
                                    "status": pl.String, "url": pl.String,
                                    "sha256": pl.String, "verified": pl.Boolean,
                                    "message": pl.String})


class _UnreachableError(Exception):
    """The host could not be reached at all (no network, refused, DNS failure)."""


class _FetchFailedError(Exception):
    """The server answered but the download failed (HTTP error, short read, bad bytes)."""

    def __init__(self, message: str, *, resumable: bool = False):
        super().__init__(message)
        self.resumable = resumable
        """True when the ``.part`` file is a good prefix worth resuming from."""


def _fetch(url: str, part: Path, *, timeout: float, desc: str) -> None:
    """Download ``url`` into ``part``, resuming from its current size when the server allows."""
    have = part.stat().st_size if part.is_file() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "guarddiag-data-pull"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:
            return  # the part file is already complete
        raise _FetchFailedError(f"HTTP {exc.code} {exc.reason} for {url}") from None
    except urllib.error.URLError as exc:
        raise _UnreachableError(f"{url}: {exc.reason}") from None
    except (TimeoutError, ConnectionError) as exc:
        raise _UnreachableError(f"{url}: {exc}") from None
    with response:
        resumed = have and response.status == 206
        mode = "ab" if resumed else "wb"
        length = response.headers.get("Content-Length")
        total = (int(length) + (have if resumed else 0)) if length and length.isdigit() else None
        bar = progress(total=total, desc=desc, unit="B", unit_scale=True,
                       initial=have if resumed else 0)
        try:
            with open(part, mode) as out:
                while True:
                    try:
                        block = response.read(1 << 16)
                    except (OSError, http.client.HTTPException) as exc:
                        raise _FetchFailedError(f"{url}: download interrupted ({exc}); run the "
                                                f"same command again to resume",
                                                resumable=True) from None
                    if not block:
                        break
                    out.write(block)
                    bar.update(len(block))
        finally:
            bar.close()
    if total is not None and part.stat().st_size != total:
        raise _FetchFailedError(f"{url}: got {part.stat().st_size} of {total} bytes; run the "
                                f"same command again to resume", resumable=True)


def _verify_download(manifest_ids: tuple[str, ...], manifests: dict[str, BenchmarkManifest],
                     entry: BenchmarkFile, part: Path) -> tuple[str, bool]:
    """Check a finished download before it is moved into place. Returns (sha256, verified)."""
    digest = sha256_file(part)
    if entry.sha256 is not None:
        if digest != entry.sha256:
            raise _FetchFailedError(f"checksum mismatch (expected sha256 {entry.sha256[:12]}…, got "
                               f"{digest[:12]}…); the download was discarded")
        return digest, True
    # No pinned digest: the honest check left is the row count (and that it parses).
    try:
        rows = read_file_rows(part, entry).height
    except GuarddiagError as exc:
        raise _FetchFailedError(f"downloaded file does not parse as {entry.format}: "
                                f"{exc}") from None
    if rows != entry.rows:
        raise _FetchFailedError(f"downloaded file has {rows} data rows, manifest of "
                           f"{', '.join(manifest_ids)} expects {entry.rows}; discarded")
    return digest, False


def pull(*, ids: str | Sequence[str] = "all", data_dir: str | os.PathLike[str] | None = None,
         mirror: str | None = None, timeout: float = 60.0,
         manifests_dir: str | os.PathLike[str] | None = None) -> PullResult:
    """Download the selected subsets' missing files from their public source.

    Each file goes to ``<file>.part`` (resumed on the next run when the server honours HTTP
    ranges), is checked against its pinned sha256 (or, where none is known, its row count), and
    only then renamed into place. ``mirror`` (or ``$GUARDDIAG_MIRROR``) replaces every source by
    ``<mirror>/<relative path>``: a mirror is a copy of the data directory served over HTTP.
    Files already present are verified, never overwritten. Raises a one-line error when no host
    can be reached.
    """
    manifests = load_manifests(manifests_dir=manifests_dir, data_dir=data_dir)
    chosen = [manifests[i] for i in resolve_ids(ids, manifests)]
    root = paths.resolve_data_dir(data_dir)
    mirror = mirror if mirror is not None else os.environ.get(MIRROR_ENV) or None
    # One entry per distinct file (the three HarmBench subsets share one CSV).
    by_path: dict[str, tuple[BenchmarkFile, list[str]]] = {}
    for manifest in chosen:
        if manifest.derived or manifest.user:
            continue  # made locally, or the user's own file: nothing to download
        for entry in manifest.files:
            by_path.setdefault(entry.path, (entry, []))[1].append(manifest.id)
    results = []
    for rel, (entry, subset_ids) in by_path.items():
        results.append(_pull_one(rel, entry, tuple(subset_ids), manifests, root, mirror,
                                 timeout))
    return PullResult(files=tuple(results), data_dir=root)


def _pull_one(rel: str, entry: BenchmarkFile, subset_ids: tuple[str, ...],
              manifests: dict[str, BenchmarkManifest], root: Path, mirror: str | None,
              timeout: float) -> PulledFile:
    target = root / rel
    if target.is_file():
        if entry.sha256 is None:
            return PulledFile(rel, subset_ids, "present", None, sha256_file(target), False,
                              "already present; no pinned sha256 to check")
        found = sha256_file(target)
        if found != entry.sha256:
            return PulledFile(rel, subset_ids, "failed", None, found, False,
                              f"{target} is present but its sha256 is {found[:12]}…, expected "
                              f"{entry.sha256[:12]}…; move it away and pull again")
        return PulledFile(rel, subset_ids, "present", None, found, True, None)
    if mirror:
        urls = [mirror.rstrip("/") + "/" + rel]
        use_archive = False
    else:
        urls = list(entry.urls)
        use_archive = entry.archive_member is not None
    if not urls:
        return PulledFile(rel, subset_ids, "failed", None, None, False,
                          "no download URL in the manifest")
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    errors: list[str] = []
    unreachable: list[str] = []
    for url in urls:
        try:
            _fetch(url, part, timeout=timeout, desc=target.name)
            if use_archive:
                digest, verified = _extract_member(entry, part, target)
            else:
                digest, verified = _verify_download(subset_ids, manifests, entry, part)
                os.replace(part, target)
        except _UnreachableError as exc:
            unreachable.append(str(exc))
            continue
        except _FetchFailedError as exc:
            errors.append(str(exc))
            # A wrong or broken download must not be resumed: start clean from the next URL.
            if not exc.resumable:
                part.unlink(missing_ok=True)
            continue
        note = None if verified else (f"no pinned sha256: verified {entry.rows} rows; "
                                      f"computed sha256 {digest}")
        return PulledFile(rel, subset_ids, "downloaded", url, digest, verified, note)
    if unreachable and not errors:
        host = unreachable[0]
        raise GuarddiagError(
            f"cannot reach the network ({host}); no files were downloaded for {rel}. Copy the "
            f"files by hand into {root} (paths and sources: `guarddiag data list`) or serve a "
            f"copy of the data directory and pass --mirror URL (or ${MIRROR_ENV})")
    return PulledFile(rel, subset_ids, "failed", urls[-1], None, False,
                      "; ".join(errors + unreachable))


def _extract_member(entry: BenchmarkFile, part: Path, target: Path) -> tuple[str, bool]:
    archive_digest = sha256_file(part)
    if archive_digest != entry.archive_sha256:
        raise _FetchFailedError(f"archive checksum mismatch (expected sha256 "
                           f"{(entry.archive_sha256 or '')[:12]}…, got {archive_digest[:12]}…)")
    try:
        with zipfile.ZipFile(part) as archive:
            data = archive.read(entry.archive_member or "")
    except (zipfile.BadZipFile, KeyError) as exc:
        raise _FetchFailedError(f"cannot extract {entry.archive_member}: {exc}") from None
    digest = hashlib.sha256(data).hexdigest()
    if entry.sha256 is not None and digest != entry.sha256:
        raise _FetchFailedError(f"checksum mismatch for {entry.archive_member} (expected sha256 "
                           f"{entry.sha256[:12]}…, got {digest[:12]}…)")
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)
    part.unlink(missing_ok=True)
    return digest, entry.sha256 is not None
