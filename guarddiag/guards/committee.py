"""The committee labeller: relabel prompts under a written policy with several models' votes.

A three-round binary cascade, every round asked of every committee model ``samples`` times
(the study: 4 models × 3 samples = 12 votes per question):

1. ``harmful``  — is the request harmful under the policy?           (every prompt)
2. ``boundary`` — allowed, but edgy / sensitive / controversial?     (prompts not harmful)
3. ``compound`` — an allowed request combined with a disallowed one,
   or an injected instruction?                                        (prompts harmful)

Class: not harmful → BOUNDARY_SAFE if round 2 says yes, else GENERIC_SAFE; harmful → COMPOUND
if round 3 says yes, else HARMFUL.

Aggregation: the majority of a question's valid votes. **Tie rule:** an exact tie resolves to
"yes" (the more cautious reading of round 1 — harmful — and the more specific class in rounds
2 and 3), and every tie is flagged in the ``tie`` column so it can be reviewed or dropped. A vote
is valid when the answer starts with yes or no (case and leading punctuation ignored); an
invalid answer is stored (with its raw text and why it was not read: empty, refused, echo,
truncated or off_format, see :data:`~guarddiag.guards.parsing.OUTCOMES`) and left out of the
majority, never guessed.

Agreement: Fleiss' κ per round, over the prompts whose every vote in that round is valid
(raters = member × sample), with the counts it used and a 95% percentile interval from 2,000
resamples of those prompts (:func:`guarddiag.stats.fleiss_kappa_interval`).

Back ends: each member's ``generator`` spec (``hf:<model>`` or ``endpoint:<url>#<model>``); a
local model is loaded for each round it votes in and released after it, so members need not fit
in memory together; members naming the same model share one load.

Storage (``--out``, default ``work/label/``): ``votes.jsonl`` gets one line per vote as it
arrives (append-only): a killed run keeps every stored vote, and a rerun asks only for the
votes it lacks. ``labels.parquet`` (``prompt_id``, ``label_c``, per-round yes/valid counts,
``tie``, ``status``), ``summary.json`` (κ and its interval per round, what became of the
votes, class counts, generation speed) and ``meta.json``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import Counter
from collections.abc import Mapping
from copy import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from guarddiag import files
from guarddiag.errors import GuarddiagError
from guarddiag.guards.backends import (
    Generation,
    GenerationTiming,
    TextGenerator,
    make_generator,
    repair_jsonl_tail,
)
from guarddiag.guards.committee_spec import (
    ROUNDS,
    SYSTEM_PROMPT,
    USER_PROMPT,
    Committee,
    CommitteeMember,
    load_committee,
    load_policy,
)
from guarddiag.guards.options import LABEL_DIR
from guarddiag.guards.parsing import OUTCOMES, answer_outcome
from guarddiag.progress import progress
from guarddiag.stats import fleiss_kappa as fleiss_kappa  # re-exported
from guarddiag.stats import fleiss_kappa_interval

logger = logging.getLogger(__name__)

_VOTE = re.compile(r"^\W*(yes|no)\b", re.I)


def parse_vote(text: str | None) -> bool | None:
    """True for yes, False for no, None when the answer starts with neither."""
    if text is None:
        return None
    m = _VOTE.match(text.strip())
    return None if m is None else m.group(1).lower() == "yes"


def load_prompts(pool: str | Path | pl.DataFrame) -> pl.DataFrame:
    """``prompt_id``, ``text`` of a pool table (any table with those columns), checked."""
    if isinstance(pool, pl.DataFrame):
        df, where = pool, "pool"
    else:
        df, where = files.read_table(pool, columns=["prompt_id", "text"]), str(pool)
    missing = [c for c in ("prompt_id", "text") if c not in df.columns]
    if missing:
        raise GuarddiagError(f"{where}: missing column(s) {', '.join(missing)}")
    df = df.select(pl.col("prompt_id").cast(pl.String), pl.col("text").cast(pl.String))
    bad = df.with_row_index("row", offset=1).filter(
        pl.col("prompt_id").is_null() | pl.col("text").is_null() |
        (pl.col("text").str.strip_chars() == ""))
    if bad.height:
        row = bad.row(0, named=True)
        field_name = "prompt_id" if row["prompt_id"] is None else "text"
        raise GuarddiagError(f'{where} row {row["row"]} field "{field_name}": empty')
    dup = df.filter(pl.col("prompt_id").is_duplicated())
    if dup.height:
        raise GuarddiagError(f"{where}: duplicate prompt_id {dup['prompt_id'][0]!r}")
    if not df.height:
        raise GuarddiagError(f"{where}: no prompts")
    return df


# ── running the cascade ────────────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class RoundStats:
    round: str
    n_prompts: int
    n_votes: int
    n_invalid: int
    """Votes left unread (every outcome but ``parsed``)."""
    n_ties: int
    n_kappa_prompts: int
    """Prompts whose every vote was valid: the subjects of κ."""
    fleiss_kappa: float | None
    kappa_low: float | None = None
    kappa_high: float | None = None
    """The 95% percentile interval of κ over resamples of its prompts (None: too few)."""
    n_resamples: int = 0
    outcomes: Mapping[str, int] = field(default_factory=dict)
    """What became of the round's votes: outcome → count (:data:`OUTCOMES`)."""


@dataclass(frozen=True)
class LabelResult:
    """What a labelling run produced."""

    out_dir: Path
    labels: pl.DataFrame
    rounds: tuple[RoundStats, ...]
    n_asked: int
    """Votes requested in this run."""
    n_reused: int
    """Votes found in votes.jsonl from earlier runs."""
    n_unanswered: int
    """Votes whose request failed; a rerun asks for them again."""
    timing: GenerationTiming = field(default_factory=GenerationTiming)
    """What the committee generated in this run and how fast."""

    def to_frame(self) -> pl.DataFrame:
        return pl.DataFrame([{
            "round": r.round, "n_prompts": r.n_prompts, "n_votes": r.n_votes,
            "n_invalid": r.n_invalid, "n_ties": r.n_ties, "n_kappa_prompts": r.n_kappa_prompts,
            "fleiss_kappa": r.fleiss_kappa, "kappa_low": r.kappa_low, "kappa_high": r.kappa_high,
            **{f"n_{o}": r.outcomes.get(o, 0) for o in OUTCOMES}} for r in self.rounds],
            schema={"round": pl.String, "n_prompts": pl.Int64, "n_votes": pl.Int64,
                    "n_invalid": pl.Int64, "n_ties": pl.Int64, "n_kappa_prompts": pl.Int64,
                    "fleiss_kappa": pl.Float64, "kappa_low": pl.Float64,
                    "kappa_high": pl.Float64, **{f"n_{o}": pl.Int64 for o in OUTCOMES}})


VoteKey = tuple[str, str, str, int]
"""(round, prompt_id, model name, sample index)."""


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class _VoteLog:
    """votes.jsonl: append-only, one vote per line, flushed as it is written."""

    def __init__(self, path: Path, run_fp: str):
        self.path = path
        self.run_fp = run_fp
        self.votes: dict[VoteKey, dict[str, Any]] = {}
        if path.is_file():
            repair_jsonl_tail(path)
            with open(path, encoding="utf-8", errors="replace") as fh:
                for lineno, line in enumerate(fh, start=1):
                    try:
                        rec = json.loads(line)
                        key = (rec["round"], rec["prompt_id"], rec["model"], int(rec["sample"]))
                        fp = rec["run"]
                    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                        continue  # a line torn by a kill
                    if fp != run_fp:
                        raise GuarddiagError(
                            f"{path} line {lineno}: a vote made under another policy or "
                            f"committee; label into another --out folder")
                    self.votes[key] = rec
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def add(self, rec: dict[str, Any]) -> None:
        key = (rec["round"], rec["prompt_id"], rec["model"], int(rec["sample"]))
        self.votes[key] = rec
        self._fh.write(json.dumps(rec, sort_keys=True, ensure_ascii=False) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def label_pool(*, policy: str | Path, committee: str | Path | Committee,
               pool: str | Path | pl.DataFrame, out_dir: str | Path = LABEL_DIR,
               generators: Mapping[str, TextGenerator] | None = None) -> LabelResult:
    """Relabel the pool's prompts under ``policy`` with the committee (see the module doc).

    ``generators`` maps member names to ready back ends (tests, or callers that hold models);
    members not in it are built from their spec, one at a time.
    """
    policy_text = load_policy(policy)
    spec = committee if isinstance(committee, Committee) else load_committee(committee)
    prompts = load_prompts(pool)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    run_fp = hashlib.sha256(json.dumps({"policy": policy_text,
                                        "committee": spec.describe(with_urls=False)},
                                       sort_keys=True).encode()).hexdigest()[:16]
    texts = dict(zip(prompts["prompt_id"].to_list(), prompts["text"].to_list(), strict=True))
    run = _Run(spec, policy_text, texts, _VoteLog(out / "votes.jsonl", run_fp),
               dict(generators or {}))
    inputs = {"policy": files.sha256_file(policy)}
    if not isinstance(pool, pl.DataFrame):
        inputs["pool"] = files.sha256_file(pool)
    try:
        harmful = _run_round(run, "harmful", list(texts))
        yes_h = [p for p in texts if harmful.get(p) is True]
        no_h = [p for p in texts if harmful.get(p) is False]
        boundary = _run_round(run, "boundary", no_h)
        compound = _run_round(run, "compound", yes_h)
    except GuarddiagError as exc:
        raise GuarddiagError(f"{exc}; {len(run.log.votes)} vote(s) are stored in "
                             f"{run.log.path} and a rerun resumes") from None
    finally:
        run.log.close()
    return _finish(out, prompts, run, inputs,
                   decided={"harmful": harmful, "boundary": boundary, "compound": compound})


@dataclass
class _Run:
    """One labelling run's inputs and running totals."""

    spec: Committee
    policy: str
    texts: dict[str, str]
    log: _VoteLog
    generators: dict[str, TextGenerator]
    """Ready back ends given by the caller, by member name."""
    counters: Counter[str] = field(default_factory=Counter)
    """asked, reused, unanswered."""
    timing: GenerationTiming = field(default_factory=GenerationTiming)


def _run_round(run: _Run, round_name: str, ids: list[str]) -> dict[str, bool | None]:
    """Collect every vote of one round, then return each prompt's majority (None: no votes)."""
    spec = run.spec
    todo = [(m, k, pid) for m in spec.members for k in range(spec.samples) for pid in ids
            if (round_name, pid, m.name, k) not in run.log.votes]
    run.counters["reused"] += len(ids) * spec.n_raters - len(todo)
    bar = progress(total=len(todo), desc=f"label: {round_name}", unit="vote")
    made: dict[str, TextGenerator] = {}  # members naming one model share one load per round
    try:
        for member in spec.members:
            mine = [(k, pid) for m, k, pid in todo if m is member]
            if not mine:
                continue
            gen = run.generators.get(member.name) or made.get(member.generator)
            if gen is None:
                gen = made[member.generator] = make_generator(
                    member.generator, batch_size=spec.batch_size,
                    concurrency=spec.concurrency, timeout_s=spec.timeout_s,
                    retries=spec.retries)
            before = copy(gen.timing)
            _ask_member(run, round_name, member, mine, gen, bar)
            run.timing.merge(gen.timing.since(before))
    finally:
        for gen in made.values():  # made here, so closed here
            gen.close()
    bar.close()
    out: dict[str, bool | None] = {}
    for pid in ids:
        yes, valid = _tally(run.log, round_name, pid, spec)
        out[pid] = None if valid == 0 else (2 * yes >= valid)  # tie → yes (module doc)
    return out


def _ask_member(run: _Run, round_name: str, member: CommitteeMember,
                mine: list[tuple[int, str]], gen: TextGenerator, bar: Any) -> None:
    """Ask one member for its missing votes of one round, sample by sample."""
    spec, log, texts = run.spec, run.log, run.texts
    system = (member.system or SYSTEM_PROMPT).replace("{policy}", run.policy)
    for k in range(spec.samples):
        pids = [pid for kk, pid in mine if kk == k]
        if not pids:
            continue
        users = [USER_PROMPT.format(question=spec.questions[round_name], text=texts[pid])
                 for pid in pids]

        def store(i: int, g: Generation, k: int = k, pids: list[str] = pids,
                  users: list[str] = users) -> None:
            bar.update(1)
            if not g.ok:
                run.counters["unanswered"] += 1
                return
            vote = parse_vote(g.text)
            log.add({"run": log.run_fp, "round": round_name, "prompt_id": pids[i],
                     "model": member.name, "sample": k, "seed": spec.seed_of(member, k),
                     "text_sha256": _sha(texts[pids[i]]), "vote": vote, "raw": g.text,
                     "outcome": answer_outcome(g.text, parsed=vote is not None,
                                               truncated=g.truncated,
                                               shown=f"{system}\n{users[i]}"),
                     "truncated": g.truncated})

        run.counters["asked"] += len(pids)
        gen.generate([[{"role": "system", "content": system},
                       {"role": "user", "content": u}] for u in users],
                     max_new_tokens=spec.max_new_tokens, temperature=spec.temperature_of(member),
                     seed=spec.seed_of(member, k), on_result=store, stop=spec.stop)


def _tally(log: _VoteLog, round_name: str, pid: str, spec: Committee) -> tuple[int, int]:
    votes = [log.votes.get((round_name, pid, m.name, k)) for m in spec.members
             for k in range(spec.samples)]
    valid = [v["vote"] for v in votes if v is not None and v["vote"] is not None]
    return sum(1 for v in valid if v), len(valid)


def _finish(out: Path, prompts: pl.DataFrame, run: _Run, inputs: dict[str, str],
            decided: dict[str, dict[str, bool | None]]) -> LabelResult:
    spec, log, counters = run.spec, run.log, run.counters
    labels = _labels(prompts, spec, log, decided)
    files.write_parquet(labels, out / "labels.parquet")
    stats = tuple(_round_stats(r, list(decided[r]), spec, log) for r in ROUNDS)
    counts = labels.group_by("label_c").len().sort("label_c")
    models = sorted({m.generator for m in spec.members})
    files.write_json({
        "rounds": {s.round: {"n_prompts": s.n_prompts, "n_votes": s.n_votes,
                             "n_invalid": s.n_invalid, "n_ties": s.n_ties,
                             "outcomes": dict(s.outcomes),
                             "n_kappa_prompts": s.n_kappa_prompts,
                             "fleiss_kappa": s.fleiss_kappa,
                             "kappa_interval": [s.kappa_low, s.kappa_high],
                             "n_resamples": s.n_resamples} for s in stats},
        "classes": {str(k): int(v) for k, v in zip(counts["label_c"].to_list(),
                                                   counts["len"].to_list(), strict=True)},
        "n_prompts": labels.height, "n_raters": spec.n_raters,
        "committee": describe_committee(spec),
        "models": models,
        "tie_rule": "an exact tie resolves to yes; ties are flagged in the tie column",
        "kappa_subjects": "prompts whose every vote in the round is valid",
        "kappa_interval": "95% percentile interval over resamples of those prompts",
        "outcomes": "parsed votes count; empty, refused, echo, truncated and off_format "
                    "answers are stored with their raw text and never read as a vote",
        "generation": run.timing.to_dict(),
    }, out / "summary.json")
    files.write_meta(out, inputs=inputs, seed=spec.seed, committee=spec.describe(),
                     run=log.run_fp)
    if counters["unanswered"]:
        logger.info(f"{counters['unanswered']} vote request(s) failed; rerun to ask for them again")
    return LabelResult(out_dir=out, labels=labels, rounds=stats,
                       n_asked=counters["asked"], n_reused=counters["reused"],
                       n_unanswered=counters["unanswered"], timing=run.timing)


def describe_committee(spec: Committee) -> str:
    """What this committee is, in one line, beside what the study's was (so a small test
    committee is never read as the study's)."""
    models = sorted({m.generator for m in spec.members})
    return (f"{len(spec.members)} member(s) over {len(models)} model(s) × {spec.samples} "
            f"sample(s) = {spec.n_raters} votes per question (this committee file; the study's "
            f"committee was 4 instruction models × 3 samples = 12 votes)")


def _labels(prompts: pl.DataFrame, spec: Committee, log: _VoteLog,
            decided: dict[str, dict[str, bool | None]]) -> pl.DataFrame:
    rows = []
    for pid in prompts["prompt_id"].to_list():
        row: dict[str, Any] = {"prompt_id": pid}
        tie = False
        for r in ROUNDS:
            if pid in decided[r]:
                yes, valid = _tally(log, r, pid, spec)
                row[f"{r}_yes"], row[f"{r}_valid"] = yes, valid
                tie = tie or (valid > 0 and 2 * yes == valid)
            else:
                row[f"{r}_yes"], row[f"{r}_valid"] = None, None
        h = decided["harmful"].get(pid)
        if h is True:
            c = decided["compound"].get(pid)
            label = None if c is None else ("COMPOUND" if c else "HARMFUL")
        elif h is False:
            b = decided["boundary"].get(pid)
            label = None if b is None else ("BOUNDARY_SAFE" if b else "GENERIC_SAFE")
        else:
            label = None
        complete = label is not None and all(
            row[f"{r}_valid"] in (None, spec.n_raters) for r in ROUNDS)
        row.update(label_c=label, tie=tie,
                   status="ok" if complete else ("partial" if label else "incomplete"))
        rows.append(row)
    schema = {"prompt_id": pl.String, "label_c": pl.String,
              **{f"{r}_{s}": pl.Int64 for r in ROUNDS for s in ("yes", "valid")},
              "tie": pl.Boolean, "status": pl.String}
    return pl.DataFrame(rows, schema=schema).select(list(schema))


def vote_outcome(rec: dict[str, Any]) -> str:
    """A stored vote's outcome; votes stored before outcomes were recorded: parsed or
    off_format."""
    outcome = rec.get("outcome")
    if isinstance(outcome, str) and outcome in OUTCOMES:
        return outcome
    return "parsed" if rec.get("vote") is not None else "off_format"


def _round_stats(r: str, ids: list[str], spec: Committee, log: _VoteLog) -> RoundStats:
    tallies = [_tally(log, r, pid, spec) for pid in ids]
    full = [y for y, v in tallies if v == spec.n_raters]
    votes = [v for pid in ids for m in spec.members for k in range(spec.samples)
             if (v := log.votes.get((r, pid, m.name, k))) is not None]
    outcomes = Counter(vote_outcome(v) for v in votes)
    kappa = fleiss_kappa_interval(full, spec.n_raters, seed=spec.seed)
    return RoundStats(
        round=r, n_prompts=len(ids), n_votes=len(votes),
        n_invalid=sum(1 for v in votes if v["vote"] is None),
        n_ties=sum(1 for y, v in tallies if v > 0 and 2 * y == v),
        n_kappa_prompts=len(full), fleiss_kappa=kappa.kappa, kappa_low=kappa.low,
        kappa_high=kappa.high, n_resamples=kappa.n_resamples,
        outcomes={o: outcomes[o] for o in OUTCOMES if outcomes[o]})
