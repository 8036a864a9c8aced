"""Reading and writing the tables and JSON files every stage hands to the next.

Writes are atomic (temporary file, then rename) so a killed run never leaves a half-written
hand-off behind, and JSON is written with sorted keys so the same inputs give the same bytes.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import platform
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from guarddiag.errors import GuarddiagError
from guarddiag.paths import META_FILE

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

TABLE_SUFFIXES = (".parquet", ".csv", ".tsv", ".jsonl", ".json", ".jsonl.gz")


def sha256_file(path: str | Path, *, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, streamed."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def verify_file(path: str | Path, *, sha256: str | None, what: str = "file") -> Path:
    """Check that a pinned input file exists and has the expected sha256.

    ``sha256=None`` means the checksum is not known (it is then not checked). One-line errors
    name the file, the expected and the found digest.
    """
    path = Path(path)
    if not path.is_file():
        raise GuarddiagError(f"{path}: {what} not found")
    if sha256 is not None:
        found = sha256_file(path)
        if found != sha256.lower():
            raise GuarddiagError(
                f"{path}: checksum mismatch for {what} (expected sha256 {sha256[:12]}…, "
                f"found {found[:12]}…); the file was changed or is a different version"
            )
    return path


def table_format(path: str | Path) -> str:
    name = str(path).lower()
    for suffix in (".jsonl.gz", ".parquet", ".csv", ".tsv", ".jsonl", ".json"):
        if name.endswith(suffix):
            return suffix.lstrip(".")
    raise GuarddiagError(
        f"{path}: unsupported table format (expected one of {', '.join(TABLE_SUFFIXES)})"
    )


def read_table(path: str | Path, *, columns: list[str] | None = None) -> pl.DataFrame:
    """Read a parquet, CSV/TSV or JSON-lines table into polars with one-line errors.

    ``columns`` are required columns: a missing one is reported by name.
    """
    path = Path(path)
    if not path.is_file():
        raise GuarddiagError(f"{path}: file not found")
    fmt = table_format(path)
    try:
        if fmt == "parquet":
            df = pl.read_parquet(path)
        elif fmt in ("csv", "tsv"):
            _check_utf8(path)
            df = pl.read_csv(path, separator="\t" if fmt == "tsv" else ",",
                             infer_schema_length=0, quote_char='"')
        elif fmt == "jsonl.gz":
            with gzip.open(path, "rb") as fh:
                df = _read_jsonl_bytes(fh.read(), path)
        elif fmt == "jsonl":
            df = _read_jsonl_bytes(path.read_bytes(), path)
        else:
            raw = path.read_bytes()
            try:
                doc = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise GuarddiagError(f"{path}: not UTF-8 text (byte {exc.start})") from None
            if not isinstance(doc, list):
                raise GuarddiagError(f"{path}: expected a JSON list of records")
            df = pl.DataFrame(doc, infer_schema_length=None)
    except GuarddiagError:
        raise
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GuarddiagError(f"{path}: cannot read as {fmt} ({first})") from None
    if columns:
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise GuarddiagError(
                f"{path}: missing column(s) {', '.join(missing)}; found {', '.join(df.columns)}"
            )
    return df


def _check_utf8(path: Path) -> None:
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise GuarddiagError(f"{path} line {line}: not UTF-8 text (byte {exc.start})") from None


def json_lines(raw: bytes, path: str | Path, *, first_line: int = 1
               ) -> Iterator[tuple[int, Any]]:
    """(line number, value) of every non-blank line of JSON-lines bytes, lines numbered from
    ``first_line``; a line that is not UTF-8 or not JSON is a one-line error naming the file
    and the line. The one JSON-lines parser of the package (:func:`json_lines_at`)."""
    for lineno, _, value in json_lines_at(raw, path, first_line=first_line):
        yield lineno, value


BadLine = Callable[[int, int, str], None]
"""Told of a line that is not UTF-8 or not JSON: (line number, byte offset of the line in the
bytes, what is wrong: ``malformed JSON (Extra data)``, ``not UTF-8 text (byte N)`` with N the
bad byte's offset in the bytes)."""


def json_lines_at(raw: bytes, path: str | Path, *, first_line: int = 1,
                  on_bad: BadLine | None = None) -> Iterator[tuple[int, int, Any]]:
    """(line number, byte offset of the line in ``raw``, value) of every non-blank line of
    JSON-lines bytes. A line is what ends at a line feed (a CRLF line keeps its CR, which JSON
    reads as white space), so line numbers count blank lines and agree with a count of
    ``\n``. A line that is not UTF-8 or not JSON is a one-line error naming the file and the
    line, or, given ``on_bad``, reported to it and passed over."""
    offset = 0
    for lineno, line in enumerate(raw.split(b"\n"), start=first_line):
        start, offset = offset, offset + len(line) + 1
        if not line.strip():
            continue
        try:
            value = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError as exc:
            problem = f"not UTF-8 text (byte {start + exc.start})"
        except json.JSONDecodeError as exc:
            problem = f"malformed JSON ({exc.msg})"
        else:
            yield lineno, start, value
            continue
        if on_bad is None:
            raise GuarddiagError(f"{path} line {lineno}: {problem}") from None
        on_bad(lineno, start, problem)


def _read_jsonl_bytes(raw: bytes, path: Path) -> pl.DataFrame:
    return pl.DataFrame([record for _, record in json_lines(raw, path)],
                        infer_schema_length=None)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it into place only on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        # mkstemp creates 0600; give the result the permissions a plain open() would have.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_parquet(df: pl.DataFrame, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        df.write_parquet(tmp, compression="zstd", statistics=False)
    return Path(path)


def read_cached_parquet(path: Path | None, *, rows: int,
                        columns: list[str] | None = None) -> pl.DataFrame | None:
    """A derived-cache entry (:func:`guarddiag.paths.cache_dir`), or None, a cache miss: no
    path (the cache is off), no file, a damaged one, a missing column or not ``rows`` rows."""
    if path is None or not path.is_file():
        return None
    try:
        frame = pl.read_parquet(path, columns=columns)
    except (OSError, pl.exceptions.PolarsError):
        return None
    return frame if frame.height == rows else None


def write_cached_parquet(df: pl.DataFrame, path: Path | None) -> None:
    """Store a derived-cache entry; a cache that is off (None) or cannot be written only costs
    the next run the work."""
    if path is not None:
        with contextlib.suppress(OSError):
            write_parquet(df, path)


def write_jsonl(df: pl.DataFrame, path: str | Path) -> Path:
    """``df`` as JSON lines, keys sorted at every level (columns, struct fields, structs in
    lists), written by polars, several times faster than through ``to_dicts`` and ``json.dumps``
    (docs/decisions.md#2026-12-05-the-audits-scan-and-outputs)."""
    with atomic_path(path) as tmp:
        df.select(_keys_sorted(pl.col(name), df.schema[name]).alias(name)
                  for name in sorted(df.columns)).write_ndjson(tmp)
    return Path(path)


def _keys_sorted(expr: pl.Expr, dtype: PolarsDataType) -> pl.Expr:
    """``expr`` with the fields of every struct in it (also inside lists) in name order."""
    if isinstance(dtype, pl.Struct):
        fields = sorted(dtype.fields, key=lambda f: f.name)
        rebuilt = pl.struct([_keys_sorted(expr.struct.field(f.name), f.dtype).alias(f.name)
                             for f in fields])
        return pl.when(expr.is_null()).then(None).otherwise(rebuilt)
    if isinstance(dtype, pl.List):
        return expr.list.eval(_keys_sorted(pl.element(), dtype.inner))
    return expr


def write_text(text: str, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def dumps_json(obj: Any) -> str:
    """Canonical JSON: sorted keys, two-space indent, trailing newline, no NaN."""
    return json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def write_json(obj: Any, path: str | Path) -> Path:
    return write_text(dumps_json(obj), path)


def read_json(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise GuarddiagError(f"{path}: file not found")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GuarddiagError(f"{path}: malformed JSON ({exc})") from None


_VERSIONED = ("guarddiag", "torch", "transformers", "tokenizers", "numpy", "scipy", "polars",
              "scikit-learn", "rapidfuzz")


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def git_sha() -> str | None:
    """The commit of the guarddiag checkout, or None outside a git checkout."""
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True,
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None




def write_meta(folder: str | Path, *, inputs: dict[str, str] | None = None,
               seed: int | None = None, **extra: Any) -> Path:
    """Write ``meta.json`` describing how a folder's contents were made.

    ``inputs`` maps a role to a sha256 (e.g. ``{"pool.parquet": "ab12…"}``).
    """
    meta = {"inputs": inputs or {}, "seed": seed, "versions": package_versions(),
            "git_sha": git_sha(), **extra}
    return write_json(meta, Path(folder) / META_FILE)
