"""Scoring an outside guard on the benchmarks, into the predictions table.

``score_guard`` writes, under ``<runs>/outside/``, for the run ``<name>`` (``<name>@<version>``
when a version is given, so each version of a guard is its own run, side by side):

* ``<run>.parquet`` — the predictions table (``guarddiag.predictions`` schema; run id
  ``guard/<run>``, guard_kind ``outside``, label_policy ``outside``, seed null), written once
  every prompt has been asked;
* ``<run>.raw.jsonl`` — the resume log (:mod:`guarddiag.guards.rawlog`): a rerun reuses every
  answered prompt and asks only the rest (and the ones whose request failed);
* ``<run>.canaries.json`` — a sample of answers asked again before any reuse
  (:mod:`guarddiag.guards.canary`): a guard changed behind the same identity is noticed;
* ``<run>.meta.json`` — the guard's settings, the benchmarks' sha256, counts, versions.

Before the guard is asked about any benchmark prompt it is asked about a few unmistakable ones
(:mod:`guarddiag.guards.sanity`): a guard answering P(safe) is stopped.

A response-level guard (``adapter.input == "prompt+response"``) gets each prompt with a model's
response (:mod:`guarddiag.guards.responses`); only benchmarks that carry responses can be scored
by it, and its raw outputs key each answer to the prompt and the response together.

``survives_decontam`` follows the same rule as ``guarddiag predict``: the audit's
decontaminated lists when the audit folder exists; True for a built-in benchmark the audit did
not cover and everywhere when there is no audit; null ("not audited") for a user benchmark no
audit covers (a rerun after ``guarddiag audit`` refreshes it without asking the guard again).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl

from guarddiag import files
from guarddiag.errors import GuarddiagError
from guarddiag.files import read_table
from guarddiag.guards.base import (
    PROMPT_RESPONSE,
    GuardAdapter,
    asked_text,
    check_guard_name,
    text_digest,
)
from guarddiag.guards.canary import (
    Canary,
    CanaryCheck,
    canaries_from,
    check_canaries,
    pick_canaries,
    read_canaries,
    write_canaries,
)
from guarddiag.guards.inputs import ScoringInputs, decontaminated, select_inputs
from guarddiag.guards.options import GuardScoreOptions
from guarddiag.guards.own_decontam import own_audit, read_training, with_own_flags
from guarddiag.guards.rawlog import Answers, open_log, record
from guarddiag.guards.responses import RESPONSE
from guarddiag.guards.sanity import check_direction
from guarddiag.guards.table import RUN_PREFIX, guard_table, summary
from guarddiag.labels import get_mapping
from guarddiag.paths import OutsideGuardFiles, RunsFolder
from guarddiag.predictions import validate
from guarddiag.progress import progress
from guarddiag.protocol import protocol

logger = logging.getLogger(__name__)


_VERSION_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def run_name(name: str, version: str | None) -> str:
    """The run a guard's answers go to: ``name``, or ``name@version`` (each version its own
    run, kept beside the others)."""
    if version is None:
        return name
    if not _VERSION_OK.match(version):
        raise GuarddiagError(f"guard version {version!r}: use letters, digits and . _ + - (it "
                             f"becomes part of the run id guard/{name}@<version> and its file "
                             f"names)")
    return f"{name}@{version}"


@dataclass(frozen=True)
class GuardScoreResult:
    """What one ``guards score`` run did."""

    name: str
    """The run's name: the guard's name, with ``@<version>`` when a version was given."""
    table_path: Path
    raw_path: Path
    n_prompts: int
    n_asked: int
    """Prompts whose answer came from the guard in this run (a real request or call)."""
    n_reused: int
    """Answers taken from an earlier run: the raw log's, and those the adapter took from its
    own response cache."""
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
    canaries: dict[str, Any] | None = None
    """The canary check before reuse (n, n_answered, n_differ, largest, tolerance); None when
    no saved answer was up for reuse."""
    sanity: dict[str, Any] | None = None
    """Mean P(unsafe) on the sanity prompts (harmful_mean, benign_mean, n_failed, margin);
    None when nothing was asked or the guard cannot be asked about any text."""

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
                "fingerprint": self.fingerprint, "unsafe_cutoff": protocol().cutoff,
                "training_data": self.training, "canaries": self.canaries,
                "sanity": self.sanity, "benchmarks": self.summary.to_dicts()}


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


def _asked_texts(frame: pl.DataFrame, *, pairs: bool) -> list[str]:
    """What the guard is asked about each row (:func:`~guarddiag.guards.base.asked_text`)."""
    texts: list[str] = frame["text"].to_list()
    if not pairs:
        return texts
    return [asked_text(t, r) for t, r in zip(texts, frame[RESPONSE].to_list(), strict=True)]


def _unanswered(ordered: dict[str, pl.DataFrame], done: Answers, *, pairs: bool
                ) -> tuple[list[pl.DataFrame], int]:
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
                rec.get("text_sha256") == text_digest(text)
            keep.append(not reuse)
            n_reused += reuse
        todo = frame.filter(pl.Series(keep, dtype=pl.Boolean))
        if todo.height:
            pending.append(todo.with_columns(pl.lit(bench).alias("benchmark")))
    return pending, n_reused


def _ask(adapter: GuardAdapter, name: str, pending: list[pl.DataFrame], *, fp: str,
         chunk_size: int, raw_path: Path, done: Answers, n_reused: int, pairs: bool
         ) -> tuple[int, set[tuple[str, str]]]:
    """Ask the guard for every pending prompt, ``chunk_size`` at a time; each answer goes into
    ``done`` and is appended to the raw log as it arrives. Returns the number of prompts the
    guard was asked about, and those the adapter answered from its own cache."""
    n_asked, cached = 0, set()
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
                        rec = record(bench, pid, text, fp, v, asked_at)
                        done[(bench, pid)] = rec
                        raw_fh.write(json.dumps(rec, sort_keys=True, ensure_ascii=False,
                                                default=str) + "\n")
                        if v.cached:
                            cached.add((bench, pid))
                    raw_fh.flush()
                    n_asked += chunk.height
                    bar.update(chunk.height)
    except GuarddiagError as exc:
        kept = n_reused + n_asked
        raise GuarddiagError(f"{exc}; {kept} answer(s) are kept in {raw_path} and a rerun "
                             f"resumes") from None
    finally:
        bar.close()
    return n_asked, cached


@dataclass(frozen=True)
class _Earlier:
    """The guard's rows of benchmarks outside this selection, kept as they were."""

    rows: pl.DataFrame
    sha256: dict[str, str | None]
    dropped: tuple[str, ...] = ()
    """Benchmarks whose rows another guard computed (an earlier identity, or the same identity
    before the canaries showed a change): left out."""
    training: dict[str, Any] | None = None
    """The earlier meta's ``training_data`` (the guard's own audit) for the kept rows."""
    definition: str | None = None
    """The definition the same identity was scored with before."""


def _earlier_rows(table_path: Path, meta_path: Path, *, fp: str, selected: Sequence[str],
                  changed: bool) -> _Earlier:
    meta = files.read_json(meta_path) if meta_path.is_file() else {}
    meta = meta if isinstance(meta, dict) and meta.get("fingerprint") == fp else {}
    # A definition describes the guard, not its answers: kept while the identity is the same.
    definition = meta.get("definition") if isinstance(meta.get("definition"), str) else None
    if not table_path.is_file():
        return _Earlier(rows=pl.DataFrame(), sha256={}, definition=definition)
    others = read_table(table_path).filter(~pl.col("benchmark").is_in(list(selected)))
    benches = tuple(sorted(set(others["benchmark"].to_list())))
    if others.height and (changed or not meta):
        return _Earlier(rows=pl.DataFrame(), sha256={}, dropped=benches, definition=definition)
    old_sha = meta.get("benchmark_sha256")
    old_sha = old_sha if isinstance(old_sha, dict) else {}
    training = meta.get("training_data")
    return _Earlier(rows=others, sha256={b: old_sha.get(b) for b in benches},
                    training=training if isinstance(training, dict) and others.height
                    else None, definition=definition)


def _notes(*, decontam_known: bool, audit_dir: str | Path | None,
           ordered: dict[str, pl.DataFrame], done: Answers, earlier: _Earlier,
           unaudited: Sequence[str], adapter_notes: Sequence[str]) -> tuple[str, ...]:
    notes = list(adapter_notes)
    if earlier.rows.height:
        kept = sorted(earlier.sha256)
        notes.append(f"kept {earlier.rows.height} row(s) of {len(kept)} benchmark(s) scored "
                     f"earlier, outside this selection: {', '.join(kept)}")
    if earlier.dropped:
        notes.append(f"dropped the rows of {', '.join(earlier.dropped)}: another model or "
                     f"identity of the guard computed them; score them again, or give each "
                     f"model its own version (version=, --guard-version) to keep both")
    if not decontam_known:
        where = " but on your own benchmarks (null)" if unaudited else " everywhere"
        notes.append(f"no audit folder at {audit_dir}: survives_decontam is True{where}; "
                     f"run `guarddiag audit`, then score again (answers are reused)")
    if unaudited:
        listed = ",".join(unaudited)
        notes.append(f"not audited: {', '.join(unaudited)} (your own benchmarks; "
                     f"survives_decontam is null until an audit covers them): audit with "
                     f"`guarddiag audit --benchmarks {listed}`, score the branches with "
                     f"`guarddiag predict --benchmarks {listed}`, then score this guard again "
                     f"(answers are reused)")
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


def _computed(done: Answers, table: pl.DataFrame) -> dict[str, str | None]:
    """When the table's answers were asked: the first and the last time (UTC)."""
    times = [t for key in zip(table["benchmark"].to_list(), table["prompt_id"].to_list(),
                              strict=True)
             if (t := (done.get(key) or {}).get("asked_at"))]
    return {"first": min(times) if times else None, "last": max(times) if times else None}


@dataclass
class _Reuse:
    """What an earlier run left that this one may reuse, after the canary check."""

    done: Answers
    pending: list[pl.DataFrame]
    n_reused: int
    stored: list[Canary]
    """The canaries saved for this identity (kept for the benchmarks not scored again)."""
    check: CanaryCheck | None = None
    changed: bool = False
    """The canaries showed another guard behind the same identity: nothing is reused."""


def _canary_doc(check: CanaryCheck | None, tolerance: float) -> dict[str, Any] | None:
    if check is None:
        return None
    return {"n": check.n, "n_answered": check.n_answered, "n_differ": len(check.differ),
            "largest": check.largest, "tolerance": tolerance}


def _reuse(adapter: GuardAdapter, run: str, where: OutsideGuardFiles, fp: str,
           ordered: dict[str, pl.DataFrame], *, rescore: bool, tolerance: float) -> _Reuse:
    """The saved answers this run may reuse. The canaries are asked first (caches bypassed):
    one that differs beyond ``tolerance`` means the guard changed behind its identity, and then
    no saved answer is reused (a warning says so)."""
    pairs = adapter.input == PROMPT_RESPONSE
    done = open_log(where.raw, fp, name=run, resumable=getattr(adapter, "resumable", True),
                    rescore=frozenset(ordered) if rescore else frozenset())
    pending, n_reused = _unanswered(ordered, done, pairs=pairs)
    if not adapter.answers_any_text:
        return _Reuse(done, pending, n_reused, [])
    stored = read_canaries(where.canaries, fp)
    # With rescore only the kept benchmarks' canaries matter (the selection is asked anyway);
    # without any saved canary (a run killed before writing them), the reused answers give some.
    asked = [c for c in stored if not (rescore and c.benchmark in ordered)]
    if not stored and n_reused:
        asked = pick_canaries(canaries_from(done, ordered, pairs=pairs))
    if not asked:
        return _Reuse(done, pending, n_reused, stored)
    adapter.use_cache(scope=fp, read=False)
    try:
        check = check_canaries(adapter, asked, tolerance=tolerance)
    except GuarddiagError as exc:
        raise GuarddiagError(f"{exc}; asking {len(asked)} canary prompt(s) again before any "
                             f"reuse, so {n_reused} answer(s) are kept in {where.raw} and a "
                             f"rerun resumes") from None
    adapter.use_cache(scope=fp, read=not rescore)
    if check.n_answered == 0:
        logger.warning(f"{run}: none of {check.n} canary prompt(s) got an answer, so the "
                       f"{n_reused} saved answer(s) are reused unchecked")
    elif check.same:
        logger.info(f"{run}: {check.n_answered} canary answer(s) asked again, all within "
                    f"{tolerance:g} of the saved ones (identity {fp})")
    else:
        logger.warning(
            f"{run}: {len(check.differ)} of {check.n_answered} canary answer(s) differ from the "
            f"saved ones beyond {tolerance:g} (first {check.differ[0]}): the guard changed "
            f"behind the same identity (a retrained model?), so none of its saved answers is "
            f"reused and every selected prompt is asked again; give each model its own "
            f"version (version=, --guard-version) to keep both side by side")
        # The adapter's own cache holds the other model's answers too: forgotten.
        adapter.use_cache(scope=fp, read=False, forget=True)
        where.raw.unlink(missing_ok=True)
        where.canaries.unlink(missing_ok=True)
        pending, _ = _unanswered(ordered, {}, pairs=pairs)
        return _Reuse({}, pending, 0, [], check, changed=True)
    return _Reuse(done, pending, n_reused, stored, check)


def _verify_cached(adapter: GuardAdapter, run: str, where: OutsideGuardFiles, fp: str,
                   ordered: dict[str, pl.DataFrame], reuse: _Reuse,
                   cached: set[tuple[str, str]], *, tolerance: float, chunk_size: int
                   ) -> set[tuple[str, str]]:
    """Answers the adapter took from its own cache are saved answers too: canaries among them
    are asked afresh, and when one differs the cache's answers of this identity are forgotten
    and those prompts asked again. Returns the prompts still answered from the cache."""
    pairs = adapter.input == PROMPT_RESPONSE
    canaries = pick_canaries(canaries_from({k: reuse.done[k] for k in cached}, ordered,
                                           pairs=pairs))
    adapter.use_cache(scope=fp, read=False)
    check = check_canaries(adapter, canaries, tolerance=tolerance) if canaries else None
    if check is None or check.same or check.n_answered == 0:
        return cached
    logger.warning(f"{run}: {len(check.differ)} of {check.n_answered} canary answer(s) from the "
                   f"response cache differ beyond {tolerance:g} (first {check.differ[0]}): the "
                   f"cache held another model's answers; forgotten, and {len(cached)} prompt(s) "
                   f"asked again")
    adapter.use_cache(scope=fp, read=False, forget=True)
    redo = [f.filter(pl.col("prompt_id").is_in([p for b, p in cached if b == bench]))
            .with_columns(pl.lit(bench).alias("benchmark")) for bench, f in ordered.items()]
    _ask(adapter, run, [f for f in redo if f.height], fp=fp, raw_path=where.raw,
         done=reuse.done, n_reused=reuse.n_reused, chunk_size=chunk_size, pairs=pairs)
    return set()


def _save_canaries(adapter: GuardAdapter, where: OutsideGuardFiles, fp: str, reuse: _Reuse,
                   ordered: dict[str, pl.DataFrame], table: pl.DataFrame, *,
                   tolerance: float) -> None:
    """This identity's canaries: the saved ones of benchmarks kept as they were, and fresh
    ones from the benchmarks just scored."""
    if not adapter.answers_any_text:
        return
    present = set(table["benchmark"].to_list())
    kept = [c for c in reuse.stored if c.benchmark not in ordered and c.benchmark in present]
    fresh = canaries_from(reuse.done, ordered, pairs=adapter.input == PROMPT_RESPONSE)
    chosen = pick_canaries([*kept, *fresh])
    if chosen:
        write_canaries(where.canaries, fp, chosen, tolerance=tolerance)


def _meta(adapter: GuardAdapter, name: str, *, version: str | None, definition: str | None,
          fp: str, sha256: dict[str, str | None], computed: dict[str, str | None],
          table: pl.DataFrame, unavailable: tuple[str, ...], decontam_known: bool,
          training: dict[str, Any] | None, checks: dict[str, Any]) -> dict[str, Any]:
    """The guard's ``<run>.meta.json``: settings, identity, when its answers were asked."""
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
        "decontam_known": decontam_known, "training_data": training, **checks,
        "versions": files.package_versions(), "git_sha": files.git_sha(),
    }


def score_guard(adapter: GuardAdapter, options: GuardScoreOptions | None = None, *,
                frames: dict[str, pl.DataFrame] | None = None, chunk_size: int | None = None,
                benchmark_sha256: dict[str, str] | None = None,
                **fields: Any) -> GuardScoreResult:
    """Score ``adapter`` on the benchmarks and write its predictions table (see module doc).

    ``options`` (:class:`~guarddiag.guards.options.GuardScoreOptions`, the object ``guarddiag
    guards score`` builds), with any field replaced by ``fields``, says what is scored and how.
    ``benchmarks`` defaults to every benchmark and every derived (mutated) subset, as the
    demo's outside guard is scored. A prompt is called unsafe at P(unsafe) ≥
    the protocol's cut-off (0.5). ``frames`` injects benchmark frames (``benchmark``,
    ``prompt_id``, ``text``, ``label_kind``) instead of loading ``benchmarks`` from the data
    directory. Answers are stored every ``chunk_size`` prompts (default: the adapter's
    ``chunk_size``).

    Answers are reused only under the same identity (:func:`identity`: the adapter's
    description and ``version``) and only after the canaries (:mod:`guarddiag.guards.canary`)
    came back within ``canary_tolerance``; a ``version`` is its own run (``<name>@<version>``),
    so the versions of a guard stay side by side. ``rescore`` asks every selected prompt again,
    bypassing every cache (other benchmarks' rows and answers stay while the canaries agree).
    Rows of benchmarks outside the selection stay as they were, unless another identity or
    model computed them (then they are dropped, and the result's notes say so).
    Before anything is asked, the sanity prompts are (:mod:`guarddiag.guards.sanity`): a guard
    rating the harmful ones clearly lower than the benign ones stops the run unless
    ``allow_inverted``. ``definition`` states what "unsafe" means for the guard (default: what
    the adapter says).

    ``training_data`` (a table with the guard's training prompts in ``training_text_column``)
    is audited against the scored benchmarks; the table's :data:`OWN_DECONTAM` column says
    which prompts survive it, beside ``survives_decontam`` (the pool audit's flag). ``pool``
    scores the pool's val split too (``pool_val``), so the report's calls can read the guard
    at the branches' matched false-flag rate and place it on their axis.
    """
    o = GuardScoreOptions.of(options, **fields)
    version, rescore, tolerance = o.version, o.rescore, o.canary_tolerance
    read_out = get_mapping(o.mapping)
    run = run_name(check_guard_name(o.name or adapter.name), version)
    inputs = select_inputs(adapter, run, benchmarks=o.benchmarks, data_dir=o.data_dir,
                            derived_dir=o.derived_dir, frames=frames,
                            benchmark_sha256=benchmark_sha256, pool=o.pool)
    folder = RunsFolder(Path(o.runs_dir))
    folder.outside.mkdir(parents=True, exist_ok=True)
    where = folder.outside_guard(run)
    fp = fingerprint(adapter, version=version)
    training = read_training(o.training_data, text_column=o.training_text_column)
    adapter.use_cache(scope=fp, read=not rescore)
    ordered = {b: inputs.frames[b].with_columns(pl.col("prompt_id").cast(pl.String))
               for b in sorted(inputs.frames)}
    reuse = _reuse(adapter, run, where, fp, ordered, rescore=rescore, tolerance=tolerance)
    if reuse.n_reused:
        logger.info(f"{run}: reusing {reuse.n_reused} answer(s) from {where.raw} (identity "
                    f"{fp}; rescore=True / --rescore asks again)")
    sanity = (check_direction(adapter, name=run, allow_inverted=o.allow_inverted)
              if reuse.pending else None)
    chunk = max(1, int(chunk_size or adapter.chunk_size))
    n_asked, cached = _ask(adapter, run, reuse.pending, fp=fp, raw_path=where.raw,
                           done=reuse.done, n_reused=reuse.n_reused, chunk_size=chunk,
                           pairs=adapter.input == PROMPT_RESPONSE)
    if cached:
        cached = _verify_cached(adapter, run, where, fp, ordered, reuse, cached,
                                tolerance=tolerance, chunk_size=chunk)
    return _finish(adapter, run, where, fp, inputs, ordered, reuse, read_out.name,
                   counts=(n_asked - len(cached), reuse.n_reused + len(cached)),
                   checks={"canaries": _canary_doc(reuse.check, tolerance),
                           "sanity": sanity.to_dict() if sanity is not None else None},
                   version=version, definition=o.definition, audit_dir=o.audit_dir,
                   derived_dir=o.derived_dir, data_dir=o.data_dir, training=training,
                   tolerance=tolerance)


def _finish(adapter: GuardAdapter, run: str, where: OutsideGuardFiles, fp: str,
            inputs: ScoringInputs, ordered: dict[str, pl.DataFrame], reuse: _Reuse, mapping: str, *,
            counts: tuple[int, int], checks: dict[str, Any], version: str | None,
            definition: str | None, audit_dir: str | Path | None,
            derived_dir: str | Path | None, data_dir: str | Path | None,
            training: Any, tolerance: float) -> GuardScoreResult:
    """Write the table, the canaries and the meta of a run whose answers are all in."""
    decontam = decontaminated(Path(audit_dir) if audit_dir is not None else None,
                               derived_dir=derived_dir, data_dir=data_dir)
    unaudited = sorted(b for b in ordered if b in inputs.user and (decontam or {}).get(b)
                       is None)
    earlier = _earlier_rows(where.table, where.meta, fp=fp, selected=list(ordered),
                            changed=reuse.changed)
    table = _merged(validate(guard_table(run, adapter.kind, ordered, reuse.done, decontam,
                                    unaudited=frozenset(unaudited)),
                             source=str(where.table)), earlier, source=str(where.table))
    own = None if training is None else own_audit(training, ordered, bases=inputs.derived_from)
    files.write_parquet(with_own_flags(table, own, earlier.rows), where.table)
    _save_canaries(adapter, where, fp, reuse, ordered, table, tolerance=tolerance)
    per_bench = summary(table.filter(pl.col("benchmark").is_in(list(ordered))), ordered, mapping)
    notes = _notes(decontam_known=decontam is not None, audit_dir=audit_dir, ordered=ordered,
                   done=reuse.done, earlier=earlier, unaudited=unaudited,
                   adapter_notes=adapter.notes())
    sha256 = {**earlier.sha256, **{b: (inputs.benchmark_sha256 or {}).get(b) for b in ordered}}
    files.write_json(_meta(adapter, run, version=version, fp=fp,
                           definition=definition or earlier.definition,
                           sha256=sha256, computed=_computed(reuse.done, table), table=table,
                           unavailable=inputs.unavailable, decontam_known=decontam is not None,
                           training=own.doc if own is not None else earlier.training,
                           checks=checks), where.meta)
    return GuardScoreResult(name=run, table_path=where.table, raw_path=where.raw,
                            n_prompts=table.height, n_asked=counts[0], n_reused=counts[1],
                            n_failed=int((table["status"] == "failed").sum()), mapping=mapping,
                            summary=per_bench, unavailable=inputs.unavailable,
                            decontam_known=decontam is not None, notes=notes,
                            fingerprint=fp, training=own.doc if own is not None else None,
                            **checks)
