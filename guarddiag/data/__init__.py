"""Benchmark subsets: manifests, verified loading, one record shape, and ``data pull``.

Every benchmark subset is described by one flat YAML manifest in ``data_manifests/benchmarks/``
or, for a user's own files, in the user manifests folder (fields in
:mod:`guarddiag.data.manifest`). Loading a subset checks each file's sha256 and row
count, reads it, applies the manifest's row filter, and reduces the rows to one record shape:

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

Modules:

* :mod:`~guarddiag.data.manifest` - the manifest model, whole-set validation, subset selectors;
* :mod:`~guarddiag.data.fields` - a manifest's keys, declared once as typed models;
* :mod:`~guarddiag.data.read` - reading one file (every format), text fields and row filters;
* :mod:`~guarddiag.data.load` - verified, cached loading, subset status, derived subsets;
* :mod:`~guarddiag.data.pull` - ``data pull``: resumable, verified downloads;
* :mod:`~guarddiag.data.add` - ``data add``: a user's own benchmark file, described by a
  manifest in the user manifests folder that every command reads with the built-in ones.
"""

from guarddiag.data.add import (
    ADD_FORMATS,
    AddResult,
    SplitAddResult,
    add_benchmark,
    add_file,
    add_labelled_benchmark,
)
from guarddiag.data.load import (
    DERIVED_COLUMNS,
    FRAME_SCHEMA,
    SUBSET_SEPARATOR,
    BenchmarkSet,
    SubsetStatus,
    load_benchmark,
    load_benchmarks,
    subset_status,
    write_derived_subset,
)
from guarddiag.data.manifest import (
    FORMATS,
    KINDS,
    USER_MANIFESTS_ENV,
    BenchmarkFile,
    BenchmarkManifest,
    derived_bases,
    legacy_user_manifests,
    load_manifests,
    resolve_ids,
    user_benchmarks,
    user_manifests_root,
)
from guarddiag.data.pull import MIRROR_ENV, PulledFile, PullResult, pull

__all__ = [
    "ADD_FORMATS",
    "DERIVED_COLUMNS",
    "FORMATS",
    "FRAME_SCHEMA",
    "KINDS",
    "MIRROR_ENV",
    "SUBSET_SEPARATOR",
    "USER_MANIFESTS_ENV",
    "AddResult",
    "BenchmarkFile",
    "BenchmarkManifest",
    "BenchmarkSet",
    "PullResult",
    "PulledFile",
    "SplitAddResult",
    "SubsetStatus",
    "add_benchmark",
    "add_file",
    "add_labelled_benchmark",
    "derived_bases",
    "legacy_user_manifests",
    "load_benchmark",
    "load_benchmarks",
    "load_manifests",
    "pull",
    "resolve_ids",
    "subset_status",
    "user_benchmarks",
    "user_manifests_root",
    "write_derived_subset",
]
