"""The raw log of an outside guard: every answer as it arrived, the resume point of a run.

``<run>.raw.jsonl`` holds one line per prompt with the guard's raw output, parsed verdict,
categories and probabilities, the digest of the text it answered and the identity
(fingerprint) of the guard that answered, appended as answers arrive. A rerun reuses the
answers of the same identity (later lines win) and asks only the rest.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guarddiag import files
from guarddiag.guards.base import GuardVerdict, text_digest
from guarddiag.guards.transport import repair_jsonl_tail

__all__ = ["RawLog", "load_raw", "open_log", "record", "verdict_from_record"]

logger = logging.getLogger(__name__)

Answers = dict[tuple[str, str], dict[str, Any]]
"""Answers by (benchmark, prompt id)."""


def record(bench: str, pid: str, text: str, fp: str, v: GuardVerdict, asked_at: str
           ) -> dict[str, Any]:
    """One line of the log: the answer ``v`` to ``text`` by the guard of fingerprint ``fp``."""
    return {"benchmark": bench, "prompt_id": pid, "text_sha256": text_digest(text),
            "fingerprint": fp, "asked_at": asked_at, "answered": v.answered, "status": v.status,
            "verdict": v.verdict, "categories": list(v.categories),
            "class_probs": list(v.class_probs) if v.class_probs is not None else None,
            "p_unsafe": v.p_unsafe, "p_source": v.p_source, "raw": v.raw, "error": v.error,
            "extra": v.extra}


@dataclass
class RawLog:
    """The answers of the raw log written under the current fingerprint, by (benchmark, prompt
    id), and how many lines an earlier identity of the guard wrote (by its fingerprint)."""

    done: Answers
    stale: dict[str, int]


def load_raw(path: Path, fp: str, *, forget: frozenset[str] = frozenset()) -> RawLog:
    """Earlier answers of this guard (later lines win); answers of another identity are counted,
    never reused, and dropped from the log, as are the answers on the ``forget`` benchmarks."""
    log = RawLog({}, {})
    if not path.is_file():
        return log
    repair_jsonl_tail(path)
    kept_lines: list[str] = []
    n_forgotten = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
                key = (rec["benchmark"], rec["prompt_id"])
                rec_fp = rec["fingerprint"]
            except (json.JSONDecodeError, KeyError, TypeError):
                continue  # a line torn by a kill
            if rec_fp != fp:
                log.stale[rec_fp] = log.stale.get(rec_fp, 0) + 1
                continue
            if key[0] in forget:
                n_forgotten += 1
                continue
            log.done[key] = rec
            kept_lines.append(line if line.endswith("\n") else line + "\n")
    if log.stale or n_forgotten:
        files.write_text("".join(kept_lines), path)
    return log


def open_log(raw_path: Path, fp: str, *, name: str, resumable: bool,
             rescore: frozenset[str]) -> Answers:
    """The answers to reuse: the raw log's answers under fingerprint ``fp`` (other identities'
    are dropped, and said so), less those on the ``rescore`` benchmarks; none at all for an
    adapter that is not ``resumable`` (the log is removed)."""
    if not resumable:
        raw_path.unlink(missing_ok=True)
    log = load_raw(raw_path, fp, forget=rescore)
    if log.stale:
        logger.info(f"{name}: the guard changed since {sum(log.stale.values())} answer(s) were "
                    f"computed (identity {', '.join(sorted(log.stale))} → {fp}); not reusing them")
    return log.done


def verdict_from_record(rec: dict[str, Any]) -> GuardVerdict:
    probs = rec.get("class_probs")
    return GuardVerdict(status=rec["status"],
                        class_probs=tuple(probs) if probs is not None else None,
                        verdict=rec.get("verdict"), categories=tuple(rec.get("categories") or ()),
                        p_source=rec.get("p_source") or "", raw=rec.get("raw"),
                        error=rec.get("error"), answered=bool(rec.get("answered", True)))
