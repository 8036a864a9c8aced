"""A guard run elsewhere, read from a predictions file (CSV, TSV, JSON lines or parquet).

Columns, one row per prompt:

* the key: ``prompt_id`` (with an optional ``benchmark`` column; needed when the same id occurs
  in several benchmarks) or ``text`` (matched exactly, then after ``text.normalise``);
* the answer, one of: the four class probabilities ``p_GENERIC_SAFE`` … ``p_COMPOUND``;
  ``p_unsafe``; or ``label``. Labels are read through ``--labels`` (a YAML ``labels:`` mapping
  to the four classes) or, by default, case-insensitively: safe / no / 0 / false →
  GENERIC_SAFE, controversial → BOUNDARY_SAFE, unsafe / yes / 1 / true → HARMFUL, and the
  four class names.

A binary answer (``p_unsafe`` or a safe/unsafe label) has no boundary class: its safe mass is
GENERIC_SAFE, so the strict and loose read-outs agree.

Rows that match no prompt of the selected benchmarks (another benchmark, an id or text the
selected ones lack) are skipped and counted in one line, so a file covering every benchmark can
score two of them; ``strict=True`` (``guards score --strict``) makes such rows an error instead.
Prompts of a scored benchmark that the file lacks are ``failed`` (not scored, never read as
safe) and counted; a selected benchmark with no row at all is not scored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from guarddiag.errors import GuarddiagError
from guarddiag.files import read_table, sha256_file
from guarddiag.guards.base import ClassProbs, GuardAdapter, GuardVerdict, one_hot, slug
from guarddiag.guards.classifier import load_label_map
from guarddiag.labels import CLASSES, PROB_COLUMNS
from guarddiag.text import normalise

logger = logging.getLogger(__name__)

DEFAULT_LABELS: dict[str, str] = {
    **{name.lower(): name for name in CLASSES},
    "safe": "GENERIC_SAFE", "no": "GENERIC_SAFE", "0": "GENERIC_SAFE", "false": "GENERIC_SAFE",
    "controversial": "BOUNDARY_SAFE",
    "unsafe": "HARMFUL", "yes": "HARMFUL", "1": "HARMFUL", "true": "HARMFUL",
}

_PROB_TOL = 1e-4


class PredictionsFileAdapter(GuardAdapter):
    """Answers looked up in a file instead of computed."""

    kind = "file"
    resumable = False  # re-reading a file is cheap; a changed file must replace old answers

    def __init__(self, *, file: str | Path | None = None,
                 labels: str | Path | Mapping[str, str] | None = None, name: str | None = None,
                 strict: bool = False):
        """``strict``: a row matching no prompt of the selected benchmarks is an error (by
        default it is skipped and counted)."""
        if not file:
            raise GuarddiagError("guard 'file' needs --file <predictions table>")
        self.path = Path(file)
        self.strict = bool(strict)
        df = read_table(self.path)
        self.sha256 = sha256_file(self.path)
        self.name = name or slug(self.path.name.split(".")[0])
        self.custom_labels = labels is not None
        self.label_map = ({k.lower(): v for k, v in load_label_map(labels).items()}
                          if labels is not None else DEFAULT_LABELS)
        if "prompt_id" in df.columns:
            self.key = "prompt_id"
        elif "text" in df.columns:
            self.key = "text"
        else:
            raise GuarddiagError(f"{self.path}: needs a prompt_id or a text column; found "
                                 f"{', '.join(df.columns)}")
        self.has_benchmark = "benchmark" in df.columns and self.key == "prompt_id"
        self.rows = self._read_rows(df)
        self._lookup: dict[tuple[str, str], tuple[int, GuardVerdict]] = {}

    @property
    def answers_any_text(self) -> bool:
        return False  # a lookup: nothing to ask about a canary or a sanity prompt

    # -- reading the file ------------------------------------------------------------------------
    def _read_rows(self, df: pl.DataFrame) -> list[tuple[int, str | None, str, GuardVerdict]]:
        """(data row number, benchmark, key, verdict) for every row, checked."""
        if all(c in df.columns for c in PROB_COLUMNS):
            mode = "classes"
        elif "p_unsafe" in df.columns:
            mode = "p_unsafe"
        elif "label" in df.columns:
            mode = "label"
        else:
            raise GuarddiagError(
                f"{self.path}: needs the answer as p_GENERIC_SAFE … p_COMPOUND, p_unsafe or "
                f"label; found {', '.join(df.columns)}")
        self.mode = mode
        out = []
        seen: dict[tuple[str | None, str], int] = {}
        for row_no, rec in enumerate(df.iter_rows(named=True), start=1):
            key = rec[self.key]
            if key is None or str(key).strip() == "":
                raise GuarddiagError(f"{self.path} row {row_no} field \"{self.key}\": empty")
            key = str(key)
            bench = None
            if self.has_benchmark:
                bench = rec["benchmark"]
                if bench is None or not str(bench).strip():
                    raise GuarddiagError(f"{self.path} row {row_no} field \"benchmark\": empty")
                bench = str(bench).strip()
            ident = (bench, key)
            if ident in seen:
                raise GuarddiagError(f"{self.path} row {row_no}: duplicate {self.key} {key!r}"
                                     f"{f' in {bench!r}' if bench else ''} (first at row "
                                     f"{seen[ident]})")
            seen[ident] = row_no
            out.append((row_no, bench, key, self._verdict(rec, row_no)))
        if not out:
            raise GuarddiagError(f"{self.path}: no rows")
        return out

    def _prob(self, rec: dict[str, Any], col: str, row_no: int) -> float:
        value = rec[col]
        try:
            p = float(value)
        except (TypeError, ValueError):
            raise GuarddiagError(f"{self.path} row {row_no} field \"{col}\": expected a "
                                 f"probability, got {value!r}") from None
        if not 0.0 <= p <= 1.0:
            raise GuarddiagError(f"{self.path} row {row_no} field \"{col}\": {p} is outside "
                                 f"[0, 1]")
        return p

    def _verdict(self, rec: dict[str, Any], row_no: int) -> GuardVerdict:
        raw = {k: rec[k] for k in rec if k in (*PROB_COLUMNS, "p_unsafe", "label")}
        if self.mode == "classes":
            vec = [self._prob(rec, c, row_no) for c in PROB_COLUMNS]
            if abs(sum(vec) - 1.0) > _PROB_TOL:
                raise GuarddiagError(f"{self.path} row {row_no}: class probabilities sum to "
                                     f"{sum(vec):.6f}, expected 1")
            probs: ClassProbs = (vec[0], vec[1], vec[2], vec[3])
            verdict = None
        elif self.mode == "p_unsafe":
            p = self._prob(rec, "p_unsafe", row_no)
            probs = (1.0 - p, 0.0, p, 0.0)
            verdict = None
        else:
            label = rec["label"]
            text = "" if label is None else str(label).strip()
            if text.endswith(".0") and text[:-2].isdigit():
                text = text[:-2]  # a 0/1 label column read as floats
            cls = self.label_map.get(text.lower())
            if cls is None:
                known = sorted(self.label_map)
                raise GuarddiagError(
                    f"{self.path} row {row_no} field \"label\": unknown label {label!r} "
                    f"(expected one of {', '.join(known)}"
                    f"{'' if self.custom_labels else '; map others with --labels'})")
            probs = one_hot(cls)
            verdict = text
        return GuardVerdict(status="ok", class_probs=probs, verdict=verdict, p_source="file",
                            raw=json.dumps(raw, sort_keys=True, default=str))

    # -- matching to the benchmarks ---------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        return {"adapter": self.kind, "file": str(self.path), "sha256": self.sha256,
                "key": self.key, "answer": self.mode,
                "labels": self.label_map if self.custom_labels else "default"}

    def prepare(self, frames: dict[str, pl.DataFrame], *,
                known: Collection[str] | None = None) -> dict[str, pl.DataFrame]:
        known_ids = set(known) if known is not None else set(frames)
        self._lookup.clear()
        if self.key == "text":
            self._match_text(frames)
        else:
            self._match_ids(frames, known_ids)
        covered = {b for b, _ in self._lookup}
        absent = sorted(set(frames) - covered)
        if absent:
            logger.info(f"{self.path}: no rows for benchmark(s) {', '.join(absent)}; not scored")
        for bench in sorted(covered):
            missing = frames[bench].height - sum(1 for b, _ in self._lookup if b == bench)
            if missing:
                logger.info(f"{self.path}: {missing} of {frames[bench].height} prompt(s) of "
                            f"{bench} are not in the file; they are recorded as failed")
        return {b: f for b, f in frames.items() if b in covered}

    def _match_ids(self, frames: dict[str, pl.DataFrame], known: set[str]) -> None:
        ids = {b: set(f["prompt_id"].cast(pl.String).to_list()) for b, f in frames.items()}
        ignored = 0
        unmatched: list[tuple[int, str]] = []
        for row_no, bench, key, verdict in self.rows:
            if bench is not None:
                if bench not in frames:
                    if bench in known and self.strict:
                        ignored += 1
                        continue
                    miss = f"benchmark {bench!r} is not selected"
                    if bench not in known:
                        miss = f"unknown benchmark {bench!r}"
                        self._no_match(f"{self.path} row {row_no} field \"benchmark\": {miss}")
                    unmatched.append((row_no, miss))
                    continue
                if key not in ids[bench]:
                    miss = f"prompt id {key!r} is not in benchmark {bench!r}"
                    self._no_match(f"{self.path} row {row_no}: {miss}")
                    unmatched.append((row_no, miss))
                    continue
                self._lookup[(bench, key)] = (row_no, verdict)
                continue
            owners = [b for b in sorted(ids) if key in ids[b]]
            if not owners:
                miss = f"prompt id {key!r} is in none of the selected benchmarks"
                self._no_match(f"{self.path} row {row_no}: {miss} ({', '.join(sorted(frames))})")
                unmatched.append((row_no, miss))
                continue
            if len(owners) > 1:
                raise GuarddiagError(f"{self.path} row {row_no}: prompt id {key!r} occurs in "
                                     f"{', '.join(owners)}; add a benchmark column")
            self._lookup[(owners[0], key)] = (row_no, verdict)
        if ignored:
            logger.info(f"{self.path}: {ignored} row(s) of benchmarks not selected were ignored")
        self._log_skipped(unmatched)

    def _no_match(self, message: str) -> None:
        """A row that matches no selected prompt: the error itself under ``strict``."""
        if self.strict:
            raise GuarddiagError(message)

    def _log_skipped(self, unmatched: list[tuple[int, str]]) -> None:
        if unmatched:
            row_no, why = unmatched[0]
            logger.info(f"{self.path}: {len(unmatched)} row(s) match no prompt of the selected "
                        f"benchmarks (first at row {row_no}: {why}); skipped (--strict makes "
                        f"this an error)")

    def _match_text(self, frames: dict[str, pl.DataFrame]) -> None:
        exact: dict[str, tuple[int, GuardVerdict]] = {}
        loose: dict[str, tuple[int, GuardVerdict]] = {}
        for row_no, _, key, verdict in self.rows:
            exact[key] = (row_no, verdict)
            loose.setdefault(normalise(key), (row_no, verdict))
        used: set[int] = set()
        for bench, frame in frames.items():
            for pid, text in zip(frame["prompt_id"].cast(pl.String).to_list(),
                                 frame["text"].to_list(), strict=True):
                hit = exact.get(text) or loose.get(normalise(text))
                if hit is not None:
                    self._lookup[(bench, pid)] = hit
                    used.add(hit[0])
        unused = [row_no for row_no, _, _, _ in self.rows if row_no not in used]
        if unused:
            self._no_match(f"{self.path}: {len(unused)} row(s) match no prompt of the "
                           f"selected benchmarks (first at row {unused[0]})")
            self._log_skipped([(unused[0], "text matches no selected prompt"),
                               *((r, "") for r in unused[1:])])

    def score_prompts(self, frame: pl.DataFrame) -> list[GuardVerdict]:
        out = []
        for bench, pid in zip(frame["benchmark"].to_list(),
                              frame["prompt_id"].cast(pl.String).to_list(), strict=True):
            hit = self._lookup.get((bench, pid))
            out.append(hit[1] if hit is not None else
                       GuardVerdict.failed("not in predictions file", answered=False))
        return out

    def score(self, texts: Sequence[str]) -> list[GuardVerdict]:
        if self.key != "text":
            raise GuarddiagError(f"{self.path}: keyed by prompt_id; score benchmark prompts "
                                 f"(guards score), not free texts")
        exact = {key: v for _, _, key, v in self.rows}
        loose = {normalise(key): v for _, _, key, v in reversed(self.rows)}
        return [exact.get(t) or loose.get(normalise(t)) or
                GuardVerdict.failed("not in predictions file", answered=False) for t in texts]
