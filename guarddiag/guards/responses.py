"""Responses for guards that score prompt + response.

A benchmark whose manifest names a ``response_field`` (WildGuardTest: a model's answer to each
prompt) can be scored by a response-level guard (:attr:`GuardAdapter.input
<guarddiag.guards.base.GuardAdapter.input>` ``prompt+response``). The response is read from the
same verified file, with the same row filter and prompt ids as the prompt, and added to the
benchmark frame as a ``response`` column for that guard only; every other consumer of the
frames (audit, predict, report) never sees it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import polars as pl

from guarddiag import paths
from guarddiag.data.manifest import BenchmarkManifest
from guarddiag.data.read import ROW, normalise_file, read_file_rows
from guarddiag.errors import GuarddiagError
from guarddiag.files import verify_file

RESPONSE = "response"
"""The column a response-level guard's frames carry."""


def load_responses(manifest: BenchmarkManifest, *, data_dir: str | Path | None = None
                   ) -> dict[str, str]:
    """``{prompt_id: response}`` for a subset whose manifest has a ``response_field``.

    One-line errors: the file's checksum, a missing column, a row without a response.
    """
    field = manifest.response_field
    if field is None:
        raise GuarddiagError(f"benchmark {manifest.id!r} has no responses (its manifest "
                             f"{manifest.manifest_path.name} names no response_field)")
    root = paths.resolve_data_dir(data_dir)
    out: dict[str, str] = {}
    for entry in manifest.files:
        path = manifest.file_path(entry, root)
        if entry.sha256 is not None:
            verify_file(path, sha256=entry.sha256, what=f"{manifest.id} data file")
        raw = read_file_rows(path, entry)
        if field not in raw.columns:
            found = ", ".join(c for c in raw.columns if c != ROW) or "none"
            raise GuarddiagError(f'{path}: missing column "{field}" named by response_field '
                                 f"of {manifest.manifest_path.name} (found: {found})")
        # The prompt's own reading of the file gives the kept rows and their ids; the response
        # is the same row's response_field.
        kept = normalise_file(manifest, entry, path, raw).select("prompt_id", ROW)
        by_row = dict(zip(raw[ROW].to_list(), raw[field].cast(pl.String, strict=False).to_list(),
                          strict=True))
        for pid, row in zip(kept["prompt_id"].to_list(), kept[ROW].to_list(), strict=True):
            response = by_row[row]
            if response is None or not response.strip():
                raise GuarddiagError(f'{path} row {row} field "{field}": no response for '
                                     f"{manifest.id}/{pid}")
            out[pid] = response
    return out


def with_responses(frames: Mapping[str, pl.DataFrame], *, guard: str,
                   manifests: Mapping[str, BenchmarkManifest] | None,
                   data_dir: str | Path | None = None) -> dict[str, pl.DataFrame]:
    """Each frame with a ``response`` column for the response-level guard ``guard``.

    A frame that already has one (frames injected by the caller) keeps it. A benchmark without
    responses is a one-line error naming it and the benchmarks that have them.
    """
    manifests = manifests or {}
    out: dict[str, pl.DataFrame] = {}
    for bench, frame in frames.items():
        if RESPONSE not in frame.columns:
            manifest = manifests.get(bench)
            if manifest is None or manifest.response_field is None:
                having = [k for k, m in manifests.items() if m.response_field is not None]
                hint = (f"; benchmarks with responses: {', '.join(having) or 'none'}"
                        if manifests else " and its frame has no response column")
                raise GuarddiagError(
                    f"guard {guard!r} scores prompt + response, but benchmark {bench!r} has "
                    f"no responses (no response_field in its manifest){hint}")
            responses = load_responses(manifest, data_dir=data_dir)
            column = [responses.get(pid) for pid in frame["prompt_id"].cast(pl.String)]
            frame = frame.with_columns(pl.Series(RESPONSE, column, dtype=pl.String))
        bad = frame.filter(pl.col(RESPONSE).is_null()
                           | (pl.col(RESPONSE).cast(pl.String).str.strip_chars() == ""))
        if bad.height:
            raise GuarddiagError(f"guard {guard!r}: {bench}/{bad['prompt_id'][0]} has no "
                                 f"response ({bad.height} prompt(s) of {bench} lack one)")
        out[bench] = frame
    return out
