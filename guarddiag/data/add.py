"""``data add``: a user's own benchmark file, described by a manifest every command reads.

:func:`add_benchmark` reads the file once, checks it exactly as loading will (the columns, a
non-empty text in every row, unique ids), and writes ``<id>.yaml`` into the user manifests
folder (:func:`guarddiag.data.manifest.user_manifests_root`). The manifest is a base manifest
like the built-in ones and is parsed by the same code; it pins the file's sha256 and row count.

The file stays where the user keeps it and the manifest holds its absolute path. A copy in the
data directory would hide a later edit (the audit would silently use the old copy) and would
put private prompts into a folder that is often shared; pinned in place, an edited file fails
to load with a checksum error naming it, and ``data add --replace`` takes the new version.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from guarddiag import paths
from guarddiag.data.load import load_subset
from guarddiag.data.manifest import (
    ID_PATTERN,
    KINDS,
    BenchmarkFile,
    BenchmarkManifest,
    load_manifests,
    parse_manifest,
    user_manifests_root,
)
from guarddiag.data.read import ROW, read_file_rows
from guarddiag.errors import GuarddiagError
from guarddiag.files import atomic_path, sha256_file
from guarddiag.spec import Problems

__all__ = ["ADD_FORMATS", "AddResult", "add_benchmark"]

ADD_FORMATS: dict[str, str] = {
    ".csv": "csv", ".parquet": "parquet", ".jsonl": "jsonl", ".jsonl.gz": "jsonl.gz",
    ".json": "json", ".txt": "lines",
}
"""File suffix → manifest format that ``data add`` reads (``.txt``: one prompt per line, column
``text``)."""

_HEADER = ("# A user benchmark written by `guarddiag data add`. The sha256 pins the file named\n"
           "# below: after an edit, run `guarddiag data add ... --replace` rather than editing\n"
           "# this manifest.\n")


@dataclass(frozen=True)
class AddResult:
    """What ``data add`` wrote (or found already there)."""

    subset_id: str
    manifest_path: Path
    file: Path
    format: str
    rows: int
    sha256: str
    status: str
    """``added``, ``replaced`` or ``unchanged`` (the same file and options were added before)."""


def _file_format(path: Path, file_format: str | None) -> str:
    if file_format is not None:
        if file_format not in ADD_FORMATS.values():
            raise GuarddiagError(f"--format {file_format!r}: expected one of "
                                 f"{', '.join(sorted(set(ADD_FORMATS.values())))}")
        return file_format
    name = path.name.lower()
    for suffix in sorted(ADD_FORMATS, key=len, reverse=True):
        if name.endswith(suffix):
            return ADD_FORMATS[suffix]
    raise GuarddiagError(f"{path}: cannot tell the format from the name (expected "
                         f"{', '.join(ADD_FORMATS)}; or pass --format)")


def _check_columns(path: Path, columns: list[str], wanted: dict[str, str | None]) -> None:
    for option, column in wanted.items():
        if column is not None and column not in columns:
            raise GuarddiagError(f'{path}: no column "{column}" ({option}); found: '
                                 f"{', '.join(columns) or 'none'}")


def _manifest_doc(*, subset_id: str, title: str | None, kind: str, path: Path, fmt: str,
                  sha256: str, rows: int, text_column: str, id_column: str | None,
                  category_column: str | None, response_column: str | None
                  ) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": subset_id, "title": title or subset_id, "kind": kind, "study": False,
        "source_kind": None, "licence": None, "text_fields": [text_column],
        "id_field": id_column, "category_field": category_column,
        "files": [{"path": str(path), "format": fmt, "sha256": sha256, "rows": rows}],
        "expected_count": rows,
    }
    if response_column is not None:  # only then, so earlier manifests stay as they were
        doc["response_field"] = response_column
    return doc


def _validate(doc: dict[str, Any], data_dir: Path) -> None:
    """Parse ``doc`` as the manifest it will be and load its file: the checks of every load."""
    with tempfile.TemporaryDirectory(prefix="guarddiag-add-") as tmp:
        draft = Path(tmp) / f"{doc['id']}.yaml"
        draft.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True),
                         encoding="utf-8")
        problems = Problems()
        manifest = parse_manifest(draft, problems, derived_root=None, user=True)
        problems.raise_if_any("the new manifest")
        if manifest is None:  # parse_manifest records a problem whenever it returns None
            raise GuarddiagError(f"{draft.name}: the new manifest does not parse")
        load_subset(manifest, data_dir)


def _previous(target: Path, doc: dict[str, Any], *, replace: bool) -> str:
    """``added`` / ``replaced`` / ``unchanged`` for a manifest already at ``target``; raises
    when it differs and ``replace`` is false."""
    if not target.is_file():
        return "added"
    try:
        old = yaml.safe_load(target.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        old = None
    if old == doc:
        return "unchanged"
    if replace:
        return "replaced"
    sid = doc["id"]
    old_files = old.get("files") if isinstance(old, dict) else None
    old_file = old_files[0] if isinstance(old_files, list) and old_files else None
    if not isinstance(old_file, dict):
        raise GuarddiagError(f"{target}: exists but names no file; pass --replace to write "
                             f"{sid} afresh")
    new_file = doc["files"][0]
    if old_file.get("path") == new_file["path"] and old_file.get("sha256") != new_file["sha256"]:
        raise GuarddiagError(
            f"{new_file['path']}: checksum changed since it was added as {sid} (sha256 "
            f"{str(old_file.get('sha256'))[:12]}… in {target}, now {new_file['sha256'][:12]}…); "
            f"pass --replace to use the new version")
    if old_file.get("path") != new_file["path"]:
        raise GuarddiagError(f"{sid}: already added from {old_file.get('path')} ({target}); "
                             f"pass --replace to point it at {new_file['path']}")
    raise GuarddiagError(f"{sid}: already added from {new_file['path']} with other options "
                         f"({target}); pass --replace to change them")


def add_benchmark(file: str | os.PathLike[str], *, subset_id: str, text_column: str,
                  kind: str, category_column: str | None = None, id_column: str | None = None,
                  response_column: str | None = None, title: str | None = None,
                  file_format: str | None = None,
                  manifests_dir: str | os.PathLike[str] | None = None,
                  data_dir: str | os.PathLike[str] | None = None,
                  replace: bool = False) -> AddResult:
    """Describe ``file`` as the benchmark ``subset_id`` in the user manifests folder.

    ``kind`` is what a guard should call every prompt (``harmful`` or ``benign``). Without
    ``id_column`` the prompt ids are the 1-based data-row numbers. ``response_column`` holds a
    model's response to each prompt, for guards that read prompt + response. ``manifests_dir``
    is the user manifests folder (default: ``$GUARDDIAG_USER_MANIFESTS``, else
    ``<data dir>/user_manifests``).
    One-line errors name the file, row and field; re-adding a changed file under the same id
    is a checksum error unless ``replace``.

        add_benchmark("red_team.csv", subset_id="red_team", text_column="prompt",
                      kind="harmful", category_column="category")
    """
    if not re.fullmatch(ID_PATTERN, subset_id):
        raise GuarddiagError(f"--id {subset_id!r}: expected lower-case letters, digits, _ or - "
                             f"(starting with a letter or digit)")
    if kind not in KINDS:
        raise GuarddiagError(f"--kind {kind!r}: expected harmful or benign")
    path = Path(file).expanduser().resolve()
    if not path.is_file():
        raise GuarddiagError(f"{path}: file not found")
    fmt = _file_format(path, file_format)
    root = user_manifests_root(manifests_dir, data_dir=data_dir)
    known = load_manifests(data_dir=data_dir, user_manifests_dir=root)
    _check_id_free(subset_id, known)
    raw = read_file_rows(path, BenchmarkFile(path=str(path), format=fmt, sha256=None, rows=1))
    if raw.height == 0:
        raise GuarddiagError(f"{path}: no data rows")
    _check_columns(path, [c for c in raw.columns if c != ROW],
                   {"--text-column": text_column, "--id-column": id_column,
                    "--category-column": category_column,
                    "--response-column": response_column})
    doc = _manifest_doc(subset_id=subset_id, title=title, kind=kind, path=path, fmt=fmt,
                        sha256=sha256_file(path), rows=raw.height, text_column=text_column,
                        id_column=id_column, category_column=category_column,
                        response_column=response_column)
    target = root / f"{subset_id}.yaml"
    status = _previous(target, doc, replace=replace)
    _validate(doc, paths.resolve_data_dir(data_dir))
    if status != "unchanged":
        root.mkdir(parents=True, exist_ok=True)
        with atomic_path(target) as tmp:
            tmp.write_text(_HEADER + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True),
                           encoding="utf-8")
    return AddResult(subset_id=subset_id, manifest_path=target, file=path, format=fmt,
                     rows=raw.height, sha256=doc["files"][0]["sha256"], status=status)


def _check_id_free(subset_id: str, known: dict[str, BenchmarkManifest]) -> None:
    other = known.get(subset_id)
    if other is not None and not other.user:
        what = "a derived subset" if other.derived else "a built-in benchmark"
        raise GuarddiagError(f"--id {subset_id!r} is already {what} ({other.manifest_path}); "
                             f"choose another id")
