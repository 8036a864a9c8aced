"""Scoring an outside guard on the benchmarks, into the predictions table.

``score_guard`` writes, under ``<runs>/outside/``:

* ``<name>.parquet`` — the predictions table (``guarddiag.predictions`` schema; run id
  ``guard/<name>``, guard_kind ``outside``, label_policy ``outside``, seed null), written once
  every prompt has been asked;
* ``<name>.raw.jsonl`` — one line per prompt with the guard's raw output, parsed verdict,
  categories and probabilities, appended as answers arrive. It is the resume log: a rerun
  reuses every answered prompt and asks only the rest (and the ones whose request failed);
* ``<name>.meta.json`` — the guard's settings, the benchmarks' sha256, counts, versions.

A response-level guard (``adapter.input == "prompt+response"``) gets each prompt with a model's
response (:mod:`guarddiag.guards.responses`); only benchmarks that carry responses can be scored
by it, and its raw outputs key each answer to the prompt and the response together.

``survives_decontam`` follows the same rule as ``guarddiag predict``: the audit's
decontaminated lists when the audit folder exists; True for a benchmark the audit did not cover
and everywhere when there is no audit (a rerun after ``guarddiag audit`` refreshes it without
asking the guard again).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl

from guarddiag import data, files
from guarddiag.audit import load_decontaminated
from guarddiag.errors import GuarddiagError
from guarddiag.files import read_table
from guarddiag.guards.backends import repair_jsonl_tail
from guarddiag.guards.base import PROMPT_RESPONSE, GuardAdapter, GuardVerdict, check_guard_name
from guarddiag.guards.own_decontam import own_audit, read_training, with_own_flags
from guarddiag.guards.responses import RESPONSE, with_responses
from guarddiag.labels import CLASSES, PROB_COLUMNS, get_mapping
from guarddiag.predictions import validate
from guarddiag.progress import progress

logger = logging.getLogger(__name__)

RUN_PREFIX = "guard/"
UNSAFE_CUTOFF = 0.5
"""A guard calls a prompt unsafe when its P(unsafe) is at least this (the printed summary; the
report's default threshold is the same 0.5)."""


@dataclass(frozen=True)
class GuardScoreResult:
    """What one ``guards score`` run did."""

    name: str
    table_path: Path
    raw_path: Path
    n_prompts: int
    n_asked: int
    """Prompts sent to the guard in this run."""
    n_reused: int
    """Answers taken from an earlier run's raw outputs."""
    n_failed: int
    """Prompts whose answer could not be read (or never came): status ``failed``."""
    mapping: str
    summary: pl.DataFrame
    """Per benchmark: kind, n, n_failed, unsafe rate under the loose and strict mappings."""
    unavailable: tuple[str, ...] = ()
    decontam_known: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    fingerprint: str = ""
    """The guard's identity digest its answers are keyed on (:func:`identity`)."""
    training: dict[str, Any] | None = None
    """The audit of the guard's own training data (file, sha256, rows, per benchmark n,
    n_exact, n_near, n_kept); None without ``training_data``."""

    def to_frame(self) -> pl.DataFrame:
        """Per benchmark: kind, n, n_failed, unsafe rate under both mappings."""
        return self.summary

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the counts, the files written and the per-benchmark summary."""
        return {"name": self.name, "table_path": str(self.table_path),
                "raw_path": str(self.raw_path), "n_prompts": self.n_prompts,
                "n_asked": self.n_asked, "n_reused": self.n_reused, "n_failed": self.n_failed,
                "mapping": self.mapping, "unavailable": list(self.unavailable),
                "decontam_known": self.decontam_known, "notes": list(self.notes),
                "fingerprint": self.fingerprint, "unsafe_cutoff": UNSAFE_CUTOFF,
                "training_data": self.training,
                "benchmarks": self.summary.to_dicts()}


def identity(adapter: GuardAdapter, *, version: str | None = None) -> dict[str, Any]:
    """What the guard's answers are keyed on: its adapter's description (a function's source
    digest, a model folder's sha256, a file's sha256, the options) and the user's ``version``."""
    out = dict(adapter.describe())
    if version is not None:
        out["version"] = version
    return out


def fingerprint(adapter: GuardAdapter, *, version: str | None = None) -> str:
    """A short digest of :func:`identity`: answers under another fingerprint are not reused."""
    doc = json.dumps(identity(adapter, version=version), sort_keys=True, default=str)
    return hashlib.sha256(doc.encode("utf-8")).hexdigest()[:16]


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _asked_texts(frame: pl.DataFrame, *, pairs: bool) -> list[str]:
    """What the guard is asked about each row: the prompt, or the prompt and its response (a
    changed response, like a changed prompt, is asked again on a rerun)."""
    texts: list[str] = frame["text"].to_list()
    if not pairs:
        return texts
    return [f"{t}\n\x1e\n{r}" for t, r in zip(texts, frame[RESPONSE].to_list(), strict=True)]


def _record(bench: str, pid: str, text: str, fp: str, v: GuardVerdict, asked_at: str
            ) -> dict[str, Any]:
    return {"benchmark": bench, "prompt_id": pid, "text_sha256": _text_sha(text),
            "fingerprint": fp, "asked_at": asked_at, "answered": v.answered, "status": v.status,
            "verdict": v.verdict, "categories": list(v.categories),
            "class_probs": list(v.class_probs) if v.class_probs is not None else None,
            "p_unsafe": v.p_unsafe, "p_source": v.p_source, "raw": v.raw, "error": v.error,
            "extra": v.extra}


@dataclass
class _RawLog:
    """The answers of the raw log written under the current fingerprint, by (benchmark, prompt
    id), and how many lines an earlier identity of the guard wrote (by its fingerprint)."""

    done: dict[tuple[str, str], dict[str, Any]]
    stale: dict[str, int]


def _load_raw(path: Path, fp: str, *, forget: frozenset[str] = frozenset()) -> _RawLog:
    """Earlier answers of this guard (later lines win); answers of another identity are counted,
    never reused, and dropped from the log, as are the answers on the ``forget`` benchmarks."""
    log = _RawLog({}, {})
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


def _open_log(raw_path: Path, fp: str, *, name: str, resumable: bool,
              rescore: frozenset[str]) -> dict[tuple[str, str], dict[str, Any]]:
    """The answers to reuse: the raw log's answers under fingerprint ``fp`` (other identities'
    are dropped, and said so), less those on the ``rescore`` benchmarks; none at all for an
    adapter that is not ``resumable`` (the log is removed)."""
    if not resumable:
        raw_path.unlink(missing_ok=True)
    log = _load_raw(raw_path, fp, forget=rescore)
    if log.stale:
        logger.info(f"{name}: the guard changed since {sum(log.stale.values())} answer(s) were "
                    f"computed (identity {', '.join(sorted(log.stale))} → {fp}); not reusing them")
    return log.done


def _verdict_from_record(rec: dict[str, Any]) -> GuardVerdict:
    probs = rec.get("class_probs")
    return GuardVerdict(status=rec["status"],
                        class_probs=tuple(probs) if probs is not None else None,
                        verdict=rec.get("verdict"), categories=tuple(rec.get("categories") or ()),
                        p_source=rec.get("p_source") or "", raw=rec.get("raw"),
                        error=rec.get("error"), answered=bool(rec.get("answered", True)))


def _decontaminated(audit_dir: Path | None, *, derived_dir: str | Path | None,
                    data_dir: str | Path | None) -> dict[str, frozenset[str]] | None:
    # The same rule as `guarddiag predict`, so every run agrees on each prompt's flag: derived
    # subsets inherit their base's decontamination.
    if audit_dir is None or not Path(audit_dir).is_dir():
        return None
    bases = data.derived_bases(data.load_manifests(derived_dir=derived_dir, data_dir=data_dir))
    return load_decontaminated(audit_dir, derived_from=bases)


@dataclass(frozen=True)
class _Inputs:
    """The benchmark frames to score, after the adapter's ``prepare``."""

    frames: dict[str, pl.DataFrame]
    benchmark_sha256: dict[str, str] | None
    unavailable: tuple[str, ...]
    derived_from: dict[str, str] = field(default_factory=dict)
    """Each derived subset's base (from the manifests; empty for injected frames)."""


def _select_inputs(adapter: GuardAdapter, name: str, *, benchmarks: str | Sequence[str],
                   data_dir: str | Path | None, derived_dir: str | Path | None,
                   frames: dict[str, pl.DataFrame] | None,
                   benchmark_sha256: dict[str, str] | None) -> _Inputs:
    """The injected ``frames``, or the selected benchmarks loaded from the data directory."""
    unavailable: tuple[str, ...] = ()
    known: list[str] | None = None
    manifests = None
    if frames is None:
        bset = data.load_benchmarks(benchmarks, data_dir=data_dir, derived_dir=derived_dir)
        frames = bset.frames
        benchmark_sha256 = bset.sha256
        unavailable = tuple(s.id for s in bset.unavailable)
        for status in bset.unavailable:
            logger.info(f"skipping {status.id}: unavailable ({status.message})")
        manifests = data.load_manifests(derived_dir=derived_dir, data_dir=data_dir)
        known = list(manifests)
    if not frames:
        raise GuarddiagError(f"no benchmark prompts to score (selected: {benchmarks}; "
                             f"unavailable: {', '.join(unavailable) or 'none'})")
    if adapter.input == PROMPT_RESPONSE:
        frames = with_responses(frames, guard=name, manifests=manifests, data_dir=data_dir)
    frames = adapter.prepare(frames, known=known)
    if not frames:
        raise GuarddiagError(f"guard {name}: none of the selected benchmarks can be scored")
    return _Inputs(frames, benchmark_sha256, unavailable,
                   data.derived_bases(manifests) if manifests is not None else {})


def _unanswered(ordered: dict[str, pl.DataFrame], done: dict[tuple[str, str], dict[str, Any]],
                *, pairs: bool) -> tuple[list[pl.DataFrame], int]:
    """Per benchmark, the prompts without a usable earlier answer (with a ``benchmark``
    column), and how many earlier answers are reused."""
    pending: list[pl.DataFrame] = []
    n_reused = 0
    for bench, frame in ordered.items():
        keep = []
        for pid, text in zip(frame["prompt_id"].to_list(), _asked_texts(frame, pairs=pairs),
                             strict=True):
            rec = done.get((bench, pid))
            reuse = rec is not None and rec.get("answered", True) and \
                rec.get("text_sha256") == _text_sha(text)
            keep.append(not reuse)
            n_reused += reuse
        todo = frame.filter(pl.Series(keep, dtype=pl.Boolean))
        if todo.height:
            pending.append(todo.with_columns(pl.lit(bench).alias("benchmark")))
    return pending, n_reused


def _ask(adapter: GuardAdapter, name: str, pending: list[pl.DataFrame], *, fp: str,
         chunk_size: int, raw_path: Path, done: dict[tuple[str, str], dict[str, Any]],
         n_reused: int, pairs: bool) -> int:
    """Ask the guard for every pending prompt, ``chunk_size`` at a time; each answer goes into
    ``done`` and is appended to the raw log as it arrives. Returns the number asked."""
    n_asked = 0
    total = sum(p.height for p in pending)
    bar = progress(total=total, desc=f"guard {name}", unit="prompt")
    try:
        with open(raw_path, "a", encoding="utf-8") as raw_fh:
            for frame in pending:
                for start in range(0, frame.height, chunk_size):
                    chunk = frame.slice(start, chunk_size)
                    verdicts = adapter.score_prompts(chunk)
                    asked_at = _now()
                    if len(verdicts) != chunk.height:
                        raise GuarddiagError(f"guard {name}: adapter returned {len(verdicts)} "
                                             f"verdicts for {chunk.height} prompts")
                    for bench, pid, text, v in zip(chunk["benchmark"].to_list(),
                                                   chunk["prompt_id"].to_list(),
                                                   _asked_texts(chunk, pairs=pairs), verdicts,
                                                   strict=True):
                        rec = _record(bench, pid, text, fp, v, asked_at)
                        done[(bench, pid)] = rec
                        raw_fh.write(json.dumps(rec, sort_keys=True, ensure_ascii=False,
                                                default=str) + "\n")
                    raw_fh.flush()
                    n_asked += chunk.height
                    bar.update(chunk.height)
    except GuarddiagError as exc:
        kept = n_reused + n_asked
        raise GuarddiagError(f"{exc}; {kept} answer(s) are kept in {raw_path} and a rerun "
                             f"resumes") from None
    finally:
        bar.close()
    return n_asked


@dataclass(frozen=True)
class _Earlier:
    """The guard's rows of benchmarks outside this selection, kept as they were."""

    rows: pl.DataFrame
    sha256: dict[str, str | None]
    dropped: tuple[str, ...] = ()
    """Benchmarks whose rows an earlier identity of the guard computed: left out."""
    training: dict[str, Any] | None = None
    """The earlier meta's ``training_data`` (the guard's own audit) for the kept rows."""
    definition: str | None = None
    """The definition the same identity was scored with before."""


def _earlier_rows(table_path: Path, meta_path: Path, *, fp: str,
                  selected: Sequence[str]) -> _Earlier:
    meta = files.read_json(meta_path) if meta_path.is_file() else {}
    meta = meta if isinstance(meta, dict) and meta.get("fingerprint") == fp else {}
    # A definition describes the guard, not its answers: kept while the identity is the same.
    definition = meta.get("definition") if isinstance(meta.get("definition"), str) else None
    if not table_path.is_file():
        return _Earlier(rows=pl.DataFrame(), sha256={}, definition=definition)
    others = read_table(table_path).filter(~pl.col("benchmark").is_in(list(selected)))
    benches = tuple(sorted(set(others["benchmark"].to_list())))
    if others.height and not meta:
        return _Earlier(rows=pl.DataFrame(), sha256={}, dropped=benches, definition=definition)
    old_sha = meta.get("benchmark_sha256")
    old_sha = old_sha if isinstance(old_sha, dict) else {}
    training = meta.get("training_data")
    return _Earlier(rows=others, sha256={b: old_sha.get(b) for b in benches},
                    training=training if isinstance(training, dict) and others.height
                    else None, definition=definition)


def _notes(*, decontam_known: bool, audit_dir: str | Path | None,
           ordered: dict[str, pl.DataFrame], done: dict[tuple[str, str], dict[str, Any]],
           earlier: _Earlier) -> tuple[str, ...]:
    notes = []
    if earlier.rows.height:
        kept = sorted(earlier.sha256)
        notes.append(f"kept {earlier.rows.height} row(s) of {len(kept)} benchmark(s) scored "
                     f"earlier, outside this selection: {', '.join(kept)}")
    if earlier.dropped:
        notes.append(f"dropped the rows of {', '.join(earlier.dropped)}: an earlier identity "
                     f"of the guard computed them; score them again")
    if not decontam_known:
        notes.append(f"no audit folder at {audit_dir}: survives_decontam is True everywhere; "
                     f"run `guarddiag audit`, then score again (answers are reused)")
    n_unanswered = sum(1 for (b, p), r in done.items() if b in ordered and
                       not r.get("answered", True))
    if n_unanswered:
        notes.append(f"{n_unanswered} prompt(s) got no answer (recorded as failed); a rerun "
                     f"asks them again")
    return tuple(notes)


def _merged(fresh: pl.DataFrame, earlier: _Earlier, *, source: str) -> pl.DataFrame:
    """This run's rows after the kept rows of the benchmarks outside the selection."""
    if earlier.rows.height == 0:
        return fresh
    return validate(pl.concat([validate(earlier.rows, source=source), fresh])
                    .sort(["benchmark"], maintain_order=True), source=source)


def _computed(done: dict[tuple[str, str], dict[str, Any]], table: pl.DataFrame
              ) -> dict[str, str | None]:
    """When the table's answers were asked: the first and the last time (UTC)."""
    times = [t for key in zip(table["benchmark"].to_list(), table["prompt_id"].to_list(),
                              strict=True)
             if (t := (done.get(key) or {}).get("asked_at"))]
    return {"first": min(times) if times else None, "last": max(times) if times else None}


def _meta(adapter: GuardAdapter, name: str, *, version: str | None, definition: str | None,
          fp: str, sha256: dict[str, str | None], computed: dict[str, str | None],
          table: pl.DataFrame, unavailable: tuple[str, ...], decontam_known: bool,
          training: dict[str, Any] | None) -> dict[str, Any]:
    """The guard's ``<name>.meta.json``: settings, identity, when its answers were asked."""
    return {
        "guard": name, "run_id": RUN_PREFIX + name, "adapter": adapter.describe(),
        "identity": identity(adapter, version=version), "version": version,
        "source": getattr(adapter, "source", None),
        "definition": definition or adapter.definition or None,
        **({"input": adapter.input} if adapter.input == PROMPT_RESPONSE else {}),
        "fingerprint": fp, "benchmarks": sorted(sha256), "answers_computed": computed,
        "unavailable": list(unavailable),
        "benchmark_sha256": {b: sha256[b] for b in sorted(sha256)},
        "n_prompts": table.height, "n_failed": int((table["status"] == "failed").sum()),
        "decontam_known": decontam_known, "training_data": training,
        "versions": files.package_versions(), "git_sha": files.git_sha(),
    }


def score_guard(adapter: GuardAdapter, *, benchmarks: str | Sequence[str] = "all,derived",
                runs_dir: str | Path = "work/runs", audit_dir: str | Path | None = "work/audit",
                data_dir: str | Path | None = None, derived_dir: str | Path | None = None,
                frames: dict[str, pl.DataFrame] | None = None, name: str | None = None,
                mapping: str = "loose", chunk_size: int | None = None,
                benchmark_sha256: dict[str, str] | None = None, version: str | None = None,
                rescore: bool = False, definition: str | None = None,
                training_data: str | Path | None = None, training_text_column: str = "text"
                ) -> GuardScoreResult:
    """Score ``adapter`` on the benchmarks and write its predictions table (see module doc).

    ``benchmarks`` defaults to every benchmark and every derived (mutated) subset, as the
    demo's outside guard is scored. A prompt is called unsafe at P(unsafe) ≥
    :data:`UNSAFE_CUTOFF` (0.5). ``frames`` injects benchmark frames (``benchmark``,
    ``prompt_id``, ``text``, ``label_kind``) instead of loading ``benchmarks`` from the data
    directory. Answers are stored every ``chunk_size`` prompts (default: the adapter's
    ``chunk_size``).

    Answers are reused only under the same identity (:func:`identity`: the adapter's
    description and ``version``); ``rescore`` asks every selected prompt again (other
    benchmarks' rows and answers stay). Rows of
    benchmarks outside the selection stay as they were, unless an earlier identity of the guard
    computed them (then they are dropped, and the result's notes say so). ``definition``
    states what "unsafe" means for the guard (default: what the adapter says).

    ``training_data`` (a table with the guard's training prompts in ``training_text_column``)
    is audited against the scored benchmarks; the table's :data:`OWN_DECONTAM` column says
    which prompts survive it, beside ``survives_decontam`` (the pool audit's flag).
    """
    read_out = get_mapping(mapping)
    name = check_guard_name(name or adapter.name)
    inputs = _select_inputs(adapter, name, benchmarks=benchmarks, data_dir=data_dir,
                            derived_dir=derived_dir, frames=frames,
                            benchmark_sha256=benchmark_sha256)

    out_dir = Path(runs_dir) / "outside"
    out_dir.mkdir(parents=True, exist_ok=True)
    table_path, raw_path, meta_path = (out_dir / f"{name}{suffix}" for suffix in
                                       (".parquet", ".raw.jsonl", ".meta.json"))
    fp = fingerprint(adapter, version=version)
    training = read_training(training_data, text_column=training_text_column)
    done = _open_log(raw_path, fp, name=name, resumable=getattr(adapter, "resumable", True),
                     rescore=frozenset(inputs.frames) if rescore else frozenset())

    ordered = {b: inputs.frames[b].with_columns(pl.col("prompt_id").cast(pl.String))
               for b in sorted(inputs.frames)}
    pending, n_reused = _unanswered(ordered, done, pairs=adapter.input == PROMPT_RESPONSE)
    if n_reused:
        logger.info(f"{name}: reusing {n_reused} answer(s) from {raw_path} (identity {fp}; "
                    f"rescore=True / --rescore asks again)")
    n_asked = _ask(adapter, name, pending, fp=fp, raw_path=raw_path, done=done,
                   chunk_size=max(1, int(chunk_size or adapter.chunk_size)), n_reused=n_reused,
                   pairs=adapter.input == PROMPT_RESPONSE)

    decontam = _decontaminated(Path(audit_dir) if audit_dir is not None else None,
                               derived_dir=derived_dir, data_dir=data_dir)
    earlier = _earlier_rows(table_path, meta_path, fp=fp, selected=list(ordered))
    table = _merged(validate(_table(name, adapter.kind, ordered, done, decontam),
                             source=str(table_path)), earlier, source=str(table_path))
    own = None if training is None else own_audit(training, ordered, bases=inputs.derived_from)
    files.write_parquet(with_own_flags(table, own, earlier.rows), table_path)
    summary = _summary(table.filter(pl.col("benchmark").is_in(list(ordered))), ordered,
                       read_out.name)
    n_failed = int((table["status"] == "failed").sum())
    notes = _notes(decontam_known=decontam is not None, audit_dir=audit_dir, ordered=ordered,
                   done=done, earlier=earlier)
    sha256 = {**earlier.sha256, **{b: (inputs.benchmark_sha256 or {}).get(b) for b in ordered}}
    files.write_json(_meta(adapter, name, version=version, fp=fp,
                           definition=definition or earlier.definition,
                           sha256=sha256, computed=_computed(done, table), table=table,
                           unavailable=inputs.unavailable, decontam_known=decontam is not None,
                           training=own.doc if own is not None else earlier.training),
                     meta_path)
    return GuardScoreResult(name=name, table_path=table_path, raw_path=raw_path,
                            n_prompts=table.height, n_asked=n_asked, n_reused=n_reused,
                            n_failed=n_failed, mapping=read_out.name, summary=summary,
                            unavailable=inputs.unavailable,
                            decontam_known=decontam is not None, notes=notes,
                            fingerprint=fp, training=own.doc if own is not None else None)


def _table(name: str, kind: str, frames: dict[str, pl.DataFrame],
           done: dict[tuple[str, str], dict[str, Any]], decontam: dict[str, frozenset[str]] | None
           ) -> pl.DataFrame:
    cols: dict[str, list[Any]] = {c: [] for c in
                                  ("benchmark", "prompt_id", *PROB_COLUMNS, "p_unsafe",
                                   "pred_class", "survives_decontam", "status")}
    for bench, frame in frames.items():
        kept = decontam.get(bench) if decontam is not None else None
        for pid in frame["prompt_id"].to_list():
            v = _verdict_from_record(done[(bench, pid)])
            cols["benchmark"].append(bench)
            cols["prompt_id"].append(pid)
            probs = v.class_probs if v.status == "ok" else None
            for i, col in enumerate(PROB_COLUMNS):
                cols[col].append(probs[i] if probs is not None else None)
            cols["p_unsafe"].append(v.p_unsafe)
            cols["pred_class"].append(v.pred_class)
            cols["survives_decontam"].append(pid in kept if kept is not None else True)
            cols["status"].append(v.status)
    n = len(cols["benchmark"])
    return pl.DataFrame({
        "run_id": [RUN_PREFIX + name] * n, "guard_kind": ["outside"] * n,
        "branch": [name] * n, "size": [kind] * n, "seed": pl.Series([None] * n, dtype=pl.Int64),
        "label_policy": ["outside"] * n,
        **{k: pl.Series(v, dtype=pl.Float64 if k in (*PROB_COLUMNS, "p_unsafe") else
                        pl.Boolean if k == "survives_decontam" else pl.String)
           for k, v in cols.items()},
    })


def _summary(table: pl.DataFrame, frames: dict[str, pl.DataFrame], mapping: str
             ) -> pl.DataFrame:
    """Per benchmark: share predicted unsafe (p_unsafe ≥ :data:`UNSAFE_CUTOFF`) under loose
    and strict."""
    strict_unsafe = [c for c, name in zip(PROB_COLUMNS, CLASSES, strict=True)
                     if name in get_mapping("strict").unsafe]
    kinds = {b: (f["label_kind"].unique().sort().str.join("/").item()
                 if "label_kind" in f.columns else None) for b, f in frames.items()}
    ok = table.filter(pl.col("status") == "ok").with_columns(
        (pl.col("p_unsafe") >= UNSAFE_CUTOFF).alias("unsafe_loose"),
        (pl.sum_horizontal([pl.col(c) for c in strict_unsafe]) >= UNSAFE_CUTOFF)
        .alias("unsafe_strict"))
    per = ok.group_by("benchmark").agg(
        (pl.col("unsafe_loose").mean() * 100).alias("pct_unsafe_loose"),
        (pl.col("unsafe_strict").mean() * 100).alias("pct_unsafe_strict"))
    counts = table.group_by("benchmark").agg(
        pl.len().alias("n"), (pl.col("status") == "failed").sum().alias("n_failed"))
    out = counts.join(per, on="benchmark", how="left").sort("benchmark").with_columns(
        pl.col("benchmark").replace_strict(kinds, default=None).alias("kind"))
    order = ["benchmark", "kind", "n", "n_failed", "pct_unsafe_loose", "pct_unsafe_strict"]
    out = out.select(order)
    return out.with_columns(pl.lit(mapping).alias("mapping"))
