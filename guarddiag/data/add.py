"""``data add``: a user's own benchmark file, described by a manifest every command reads.

:func:`add_file` (or :func:`add_benchmark`) reads the file once, checks it exactly as loading
will (the columns, a non-empty text in every row, unique ids), and writes ``<id>.yaml`` into
the user manifests folder (:func:`guarddiag.data.manifest.user_manifests_root`). The manifest
is a base manifest like the built-in ones and is parsed by the same code; it pins the file's
sha256 and row count.

The file stays where the user keeps it and the manifest holds its absolute path. A copy in the
data directory would hide a later edit (the audit would silently use the old copy) and would
put private prompts into a folder that is often shared; pinned in place, an edited file fails
to load with a checksum error naming it, and ``data add --replace`` takes the new version.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from guarddiag import paths
from guarddiag.data.fields import ID_PATTERN
from guarddiag.data.load import load_subset
from guarddiag.data.manifest import (
    BenchmarkFile,
    BenchmarkManifest,
    load_manifests,
    parse_manifest,
    user_manifests_root,
)
from guarddiag.data.options import AddOptions
from guarddiag.data.read import ROW, as_text, read_file_rows
from guarddiag.errors import GuarddiagError
from guarddiag.files import atomic_path, sha256_file
from guarddiag.spec import Problems
from guarddiag.typed import replaced

__all__ = ["ADD_FORMATS", "AddResult", "SplitAddResult", "add_benchmark", "add_file",
           "add_labelled_benchmark"]

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


def _check_columns(path: Path, raw: pl.DataFrame, wanted: dict[str, str | None]) -> None:
    columns = [c for c in raw.columns if c != ROW]
    for option, column in wanted.items():
        if column is not None and column not in columns:
            labels = label_like_columns(raw) if option == "--label-column" else []
            hint = f"; label-like: {', '.join(labels)}" if labels else ""
            raise GuarddiagError(f'{path}: no column "{column}" ({option}); found: '
                                 f"{', '.join(columns) or 'none'}{hint}")


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


def add_file(file: str | os.PathLike[str], options: AddOptions, *,
             data_dir: str | os.PathLike[str] | None = None) -> AddResult | SplitAddResult:
    """Describe ``file`` as ``options`` (:class:`~guarddiag.data.options.AddOptions`) say:
    split by ``label_column`` into two benchmarks (:func:`add_labelled_benchmark`), else one
    benchmark of ``kind`` (:func:`add_benchmark`)."""
    o = options
    if o.label_column is not None:
        if o.kind is not None or o.whole_file:
            raise GuarddiagError("--label-column splits the file by kind: drop --kind and "
                                 "--whole-file")
        if not o.harmful_values:
            raise GuarddiagError("--label-column needs --harmful-values V[,V…] (the values "
                                 "that mean harmful)")
        return _add_labelled(file, o, o.label_column, data_dir=data_dir)
    if o.harmful_values or o.benign_values:
        raise GuarddiagError("--harmful-values and --benign-values go with --label-column")
    if o.kind is None:
        raise GuarddiagError("--kind harmful|benign is required (or --label-column C "
                             "--harmful-values V to split a mixed file)")
    return _add_whole(file, o, o.kind, data_dir=data_dir)


def add_benchmark(file: str | os.PathLike[str], *,
                  data_dir: str | os.PathLike[str] | None = None, **fields: Any) -> AddResult:
    """Describe ``file`` as the benchmark ``subset_id`` in the user manifests folder; ``fields``
    are :class:`~guarddiag.data.options.AddOptions`'s (``kind`` required, no
    ``label_column``).

    ``kind`` is what a guard should call every prompt (``harmful`` or ``benign``). Without
    ``id_column`` the prompt ids are the 1-based data-row numbers. ``response_column`` holds a
    model's response to each prompt, for guards that read prompt + response. ``manifests_dir``
    is the user manifests folder (default: ``$GUARDDIAG_USER_MANIFESTS``, else
    ``<data dir>/user_manifests``).
    One-line errors name the file, row and field; re-adding a changed file under the same id
    is a checksum error unless ``replace``. A file with a label-like column holding more than
    one value (``label``: harmful / benign) is refused unless ``whole_file`` says every row is
    ``kind``; :func:`add_labelled_benchmark` splits such a file instead.

        add_benchmark("red_team.csv", subset_id="red_team", text_column="prompt",
                      kind="harmful", category_column="category")
    """
    result = _add_by_name(file, fields, data_dir=data_dir, split=False)
    assert isinstance(result, AddResult)
    return result


def _add_by_name(file: str | os.PathLike[str], fields: dict[str, Any], *,
                 data_dir: str | os.PathLike[str] | None, split: bool
                 ) -> AddResult | SplitAddResult:
    """:func:`add_file` with ``fields`` as the options, refused when ``label_column`` does not
    match the verb (``split``) called."""
    verb = "add_labelled_benchmark" if split else "add_benchmark"
    o = replaced(AddOptions, None, fields, where=verb)
    if split and o.label_column is None:
        raise GuarddiagError(f"{verb}: label_column is required (the column holding each "
                             "row's label)")
    if not split and o.label_column is not None:
        raise GuarddiagError(f"{verb}: label_column splits the file; call "
                             "add_labelled_benchmark")
    return add_file(file, o, data_dir=data_dir)


def _add_whole(file: str | os.PathLike[str], o: AddOptions, kind: str, *,
               data_dir: str | os.PathLike[str] | None) -> AddResult:
    src = _read_source(file, subset_id=o.subset_id, file_format=o.file_format,
                       manifests_dir=o.manifests_dir, data_dir=data_dir,
                       columns={"--text-column": o.text_column, "--id-column": o.id_column,
                                "--category-column": o.category_column,
                                "--response-column": o.response_column})
    if not o.whole_file:
        _refuse_label_like(src, subset_id=o.subset_id, kind=kind,
                           used={o.text_column, o.id_column, o.category_column,
                                 o.response_column})
    doc = _manifest_doc(subset_id=o.subset_id, title=o.title, kind=kind, path=src.path,
                        fmt=src.fmt, sha256=src.sha256, rows=src.raw.height,
                        text_column=o.text_column, id_column=o.id_column,
                        category_column=o.category_column, response_column=o.response_column)
    return _write_manifest(doc, src, replace=o.replace, data_dir=data_dir)


@dataclass(frozen=True)
class SplitAddResult:
    """What ``data add --label-column`` wrote: one benchmark per kind."""

    harmful: AddResult
    benign: AddResult


def add_labelled_benchmark(file: str | os.PathLike[str], *,
                           data_dir: str | os.PathLike[str] | None = None,
                           **fields: Any) -> SplitAddResult:
    """Split a file of harmful and benign prompts into ``<id>_harmful`` and ``<id>_benign``;
    ``fields`` are :class:`~guarddiag.data.options.AddOptions`'s (``label_column`` and
    ``harmful_values`` required).

    Rows whose ``label_column`` value is among ``harmful_values`` are harmful, those among
    ``benign_values`` benign; values match whatever their case and spacing (``Harmful``,
    `` harmful `` and ``harmful`` are one value). ``benign_values`` is required whenever the
    column holds any value besides the harmful ones, and a value in neither list (a typo such
    as ``harmfull``, an empty cell) is an error listing the values with their counts: no row is
    filed on the wrong side silently. Both manifests name the same file with a row filter
    (``filter_field`` / ``filter_values``: the spellings the file holds), so the file stays
    where it is.

        add_labelled_benchmark("team.csv", subset_id="team", text_column="prompt",
                               label_column="label", harmful_values=["harmful"],
                               benign_values=["benign"])
    """
    result = _add_by_name(file, fields, data_dir=data_dir, split=True)
    assert isinstance(result, SplitAddResult)
    return result


def _add_labelled(file: str | os.PathLike[str], o: AddOptions, label_column: str, *,
                  data_dir: str | os.PathLike[str] | None) -> SplitAddResult:
    harmful = _values(o.harmful_values, "--harmful-values")
    src = _read_source(file, subset_id=o.subset_id, file_format=o.file_format,
                       manifests_dir=o.manifests_dir, data_dir=data_dir,
                       columns={"--text-column": o.text_column, "--label-column": label_column,
                                "--id-column": o.id_column,
                                "--category-column": o.category_column,
                                "--response-column": o.response_column})
    split = _split_values(src, label_column, harmful,
                          _values(o.benign_values, "--benign-values") if o.benign_values
                          else None)
    out = {}
    for kind, values in split.items():
        part_id = f"{o.subset_id}_{kind}"
        _check_id_free(part_id, src.known)
        doc = _manifest_doc(subset_id=part_id, title=f"{o.title or o.subset_id} ({kind})",
                            kind=kind, path=src.path, fmt=src.fmt, sha256=src.sha256,
                            rows=src.raw.height, text_column=o.text_column,
                            id_column=o.id_column, category_column=o.category_column,
                            response_column=o.response_column)
        doc["filter_field"] = label_column
        doc["filter_values"] = list(values)
        doc["expected_count"] = int(src.labels(label_column).is_in(list(values)).sum())
        out[kind] = doc
    return SplitAddResult(
        harmful=_write_manifest(out["harmful"], src, replace=o.replace, data_dir=data_dir),
        benign=_write_manifest(out["benign"], src, replace=o.replace, data_dir=data_dir))


# ── shared steps ─────────────────────────────────────────────────────────────────────────────

LABEL_LIKE = ("label", "labels", "is_harmful", "harmful", "is_unsafe", "unsafe", "safety",
              "safety_label", "prompt_label", "gold", "gold_label", "target", "class", "y",
              "harmfulness", "moderation", "toxic", "is_toxic", "verdict", "is_safe", "safe",
              "judgement", "judgment", "annotation", "rating", "decision", "outcome")
"""Column names that usually hold a per-row harmful / benign label."""
LABEL_WORDS = frozenset({
    "harmful", "harmless", "benign", "unharmful", "not harmful", "safe", "unsafe", "not safe",
    "toxic", "non-toxic", "nontoxic", "yes", "no", "true", "false", "0", "1", "allow",
    "allowed", "block", "blocked", "refuse", "comply", "controversial", "malicious"})
"""Values that read as a harmful / benign label, whatever the column is called (a
``category`` column of safe / unsafe)."""


@dataclass(frozen=True)
class _Source:
    """The file being added, read once."""

    path: Path
    fmt: str
    sha256: str
    raw: pl.DataFrame
    root: Path
    known: dict[str, BenchmarkManifest]

    def labels(self, column: str) -> pl.Series:
        """``column`` as the text the loader's row filter compares."""
        return self.raw.select(as_text(self.raw, column)).to_series()


def _read_source(file: str | os.PathLike[str], *, subset_id: str, file_format: str | None,
                 manifests_dir: str | os.PathLike[str] | None,
                 data_dir: str | os.PathLike[str] | None,
                 columns: dict[str, str | None]) -> _Source:
    if not re.fullmatch(ID_PATTERN, subset_id):
        raise GuarddiagError(f"--id {subset_id!r}: expected lower-case letters, digits, _ or - "
                             f"(starting with a letter or digit)")
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
    _check_columns(path, raw, columns)
    return _Source(path=path, fmt=fmt, sha256=sha256_file(path), raw=raw, root=root,
                   known=known)


def _values(values: Sequence[str], option: str) -> tuple[str, ...]:
    out = tuple(dict.fromkeys(str(v).strip() for v in values if str(v).strip()))
    if not out:
        raise GuarddiagError(f"{option}: give at least one value")
    return out


def label_like_columns(raw: pl.DataFrame, *, used: Iterable[str | None] = ()) -> list[str]:
    """Columns of ``raw`` (besides ``used``) that look like a per-row label holding two or more
    values: a label-like name (:data:`LABEL_LIKE`), or values that are all label words
    (:data:`LABEL_WORDS`)."""
    out, skip = [], {*used, ROW}
    for column in raw.columns:
        if column in skip:
            continue
        values = {_norm(v) for v in raw.select(as_text(raw, column)).to_series().drop_nulls()}
        if len(values) >= 2 and (column.lower() in LABEL_LIKE or values <= LABEL_WORDS):
            out.append(column)
    return out


def _refuse_label_like(src: _Source, *, subset_id: str, kind: str,
                       used: set[str | None]) -> None:
    """A mixed file added as one kind gives silently wrong numbers: refuse it, say how."""
    found = label_like_columns(src.raw, used=used)
    if not found:
        return
    column = found[0]
    values = _counts(src.labels(column).drop_nulls().to_list())
    raise GuarddiagError(
        f'{src.path}: column "{column}" looks like a per-row label (values: {values}); pass '
        f"--label-column {column} --harmful-values V[,V…] --benign-values V[,V…] to split it "
        f"into {subset_id}_harmful and {subset_id}_benign, or --whole-file to add every row as "
        f"{kind}")


def _norm(value: str | None) -> str:
    """A label as it is matched: case and runs of spaces ignored."""
    return " ".join((value or "").split()).casefold()


def _counts(labels: list[str | None]) -> str:
    counts = Counter(labels)
    return _shown_counts(counts, counts)


def _shown_counts(counts: Counter[str | None], values: Iterable[str | None]) -> str:
    """``'v' (n), …`` for ``values``, most frequent first; an empty cell is ``(empty)``."""
    return ", ".join(f"{'(empty)' if v is None or not v.strip() else repr(v)} ({counts[v]})"
                     for v in sorted(values, key=lambda v: (-counts[v], str(v))))


def _split_values(src: _Source, column: str, harmful: tuple[str, ...],
                  benign: tuple[str, ...] | None) -> dict[str, tuple[str, ...]]:
    """The file's own spellings of the harmful and the benign values (see
    :func:`add_labelled_benchmark` for the rules); one-line errors list the values."""
    labels = src.labels(column).to_list()
    counts = Counter(labels)
    where = f'{src.path} column "{column}"'
    wanted = {"harmful": {_norm(v) for v in harmful}, "benign": {_norm(v) for v in benign or ()}}
    both = wanted["harmful"] & wanted["benign"]
    if both:
        raise GuarddiagError(f"--benign-values: {sorted(both)[0]!r} is also a harmful value")
    found = {_norm(v) for v in counts}
    absent = [v for v in harmful if _norm(v) not in found]
    if absent:
        raise GuarddiagError(f"{where}: no row has the harmful value {absent[0]!r}; the values "
                             f"are {_shown_counts(counts, counts)}")
    others = [v for v in counts if _norm(v) not in wanted["harmful"]]
    if not others:
        raise GuarddiagError(f"{where}: every row has a harmful value "
                             f"({_shown_counts(counts, counts)}); add the file with --kind "
                             f"harmful instead")
    if benign is None:
        raise GuarddiagError(
            f"{where} holds values besides the harmful ones ({', '.join(harmful)}): "
            f"{_shown_counts(counts, others)}; name the benign ones with --benign-values too, "
            f"so that no misspelt or unexpected value is filed as benign")
    neither = [v for v in others if _norm(v) not in wanted["benign"]]
    if neither:
        first = next(i for i, v in enumerate(labels) if v in neither)
        raise GuarddiagError(
            f"{where}: {sum(counts[v] for v in neither)} row(s) have a value that is neither "
            f"harmful ({', '.join(harmful)}) nor benign ({', '.join(benign)}): "
            f"{_shown_counts(counts, neither)} (first at row {int(src.raw[ROW][first])}); "
            f"every value: {_shown_counts(counts, counts)}")
    spelt = {kind: tuple(sorted(str(v) for v in counts if _norm(v) in norms))
             for kind, norms in wanted.items()}
    if not spelt["benign"]:
        raise GuarddiagError(f"{where}: no row has a benign value ({', '.join(benign)}); the "
                             f"values are {_shown_counts(counts, counts)}")
    return spelt


def _write_manifest(doc: dict[str, Any], src: _Source, *, replace: bool,
                    data_dir: str | os.PathLike[str] | None) -> AddResult:
    target = src.root / f"{doc['id']}.yaml"
    status = _previous(target, doc, replace=replace)
    _validate(doc, paths.resolve_data_dir(data_dir))
    if status != "unchanged":
        src.root.mkdir(parents=True, exist_ok=True)
        with atomic_path(target) as tmp:
            tmp.write_text(_HEADER + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True),
                           encoding="utf-8")
    return AddResult(subset_id=doc["id"], manifest_path=target, file=src.path,
                     format=src.fmt, rows=int(doc["expected_count"]), sha256=src.sha256,
                     status=status)


def _check_id_free(subset_id: str, known: dict[str, BenchmarkManifest]) -> None:
    other = known.get(subset_id)
    if other is not None and not other.user:
        what = "a derived subset" if other.derived else "a built-in benchmark"
        raise GuarddiagError(f"--id {subset_id!r} is already {what} ({other.manifest_path}); "
                             f"choose another id")
