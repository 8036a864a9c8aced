"""What a benchmark manifest may say: its keys, declared once as typed models.

:func:`guarddiag.data.manifest.parse_manifest` reads a manifest through them
(:func:`guarddiag.typed.read_values`), then checks what needs more than one key (an id equal to
its file stem, filters and flags in pairs, a derived file's rows). Each key's meaning is in
:mod:`guarddiag.data.manifest`'s docstring.
"""

from __future__ import annotations

from typing import Annotated, Any

from guarddiag.typed import Check, SpecModel

KINDS = ("harmful", "benign")
FORMATS = ("csv", "parquet", "json", "jsonl", "jsonl.gz", "lines", "json_tree")
SOURCE_KINDS = ("upstream", "upstream-fork", "third-party-copy", "package", "rebuilt")
ID_PATTERN = r"[a-z0-9][a-z0-9_\-]*"
"""A subset id: lower-case letters, digits, ``_`` and ``-``."""
_HEX64 = r"[0-9a-f]{64}"

_OptionalStr = Annotated[str | None, Check("str", nullable=True)]
_Id = Annotated[str, Check("str", pattern=ID_PATTERN,
                           describe="a lower-case id like harmbench_standard")]
_SourceKind = Annotated[str | None, Check(nullable=True, allowed=SOURCE_KINDS)]
_Hex64 = Annotated[str | None, Check("str", nullable=True, pattern=_HEX64,
                                     describe="64 lower-case hex digits")]


class _CommonFields(SpecModel):
    """The keys base and derived manifests share (ids, counts, where the subset comes from)."""

    id: _Id
    title: _OptionalStr
    files: Any  # read by hand (parse_files): each entry is a FileFields
    kind: Annotated[str, Check(allowed=KINDS)]
    expected_count: Annotated[int, Check("int", minimum=1)]
    text_joiner: Annotated[str, Check("text")] = "\n\n"
    hf_dataset: _OptionalStr = None
    hf_config: _OptionalStr = None
    hf_split: _OptionalStr = None
    source_note: _OptionalStr = None
    id_field: _OptionalStr = None
    category_field: _OptionalStr = None
    notes: _OptionalStr = None


class BaseFields(_CommonFields):
    """Keys of a base subset's manifest (``files``, ``filter_values`` and ``flags`` are checked
    by hand: they need more than a type)."""

    study: Annotated[bool | None, Check("bool")] = None
    """Absent: read from the protocol's study_benchmarks (the built-in manifests leave it out)."""
    source_kind: _SourceKind
    licence: _OptionalStr
    text_fields: Annotated[tuple[str, ...], Check("str_list")]
    filter_field: _OptionalStr = None
    response_field: _OptionalStr = None
    filter_values: Any = None
    flags: Any = None
    flagged: Annotated[bool | None, Check("bool")] = None


class DerivedFields(_CommonFields):
    """Keys of a derived subset's manifest (see the module docstring)."""

    derived_from: _OptionalStr
    mutation: _OptionalStr
    study: Annotated[bool, Check("bool")] = False
    source_kind: _SourceKind = None
    licence: _OptionalStr = None
    text_fields: Annotated[tuple[str, ...], Check("str_list")] = ("text",)


class FileFields(SpecModel):
    """Keys of one ``files`` entry."""

    path: Annotated[str, Check("str", describe="a relative path inside the data directory")]
    format: Annotated[str, Check(allowed=FORMATS)]
    sha256: _Hex64
    rows: Annotated[int, Check("int", minimum=1)]
    origin: Annotated[str | None, Check("text", nullable=True)] = None
    urls: Annotated[tuple[str, ...], Check("str_list")] = ()
    archive_member: _OptionalStr = None
    archive_sha256: _Hex64 = None
    text_fields: Annotated[tuple[str, ...] | None, Check("str_list")] = None
    id_prefix: Annotated[str, Check("text")] = ""
    tree_levels: Annotated[tuple[str, ...], Check("str_list")] = ()
