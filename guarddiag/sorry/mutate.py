"""SORRY-Bench linguistic mutations of a benchmark, written as derived subsets.

``guarddiag mutate --benchmark sorrybench --mutations caesar,morse,misspell`` writes one derived
subset per mutation, ``<base>__<mutation>`` (e.g. ``sorrybench__caesar``), under the derived
folder (default ``work/derived/``) through :func:`guarddiag.data.write_derived_subset`. Every
other command (``predict``, ``report``, ``balance``, ``jaccard``) then loads it like any other
subset. Each mutated row keeps its base prompt: ``prompt_id`` and ``base_prompt_id`` are both
the base prompt's id (one variant per base prompt and mutation), and ``category`` is copied.

The mutations, their kinds and the exact prompts used are in
``data_manifests/mutations/sorrybench_mutations.yaml``; see its header for how encoded prompts
are presented and why. Beside each subset a ``<id>.mutation.json`` records how it was made
(mutation, seed, generator, presentation, skipped rows, Morse pass-through characters; for a
generative mutation, what became of each rewrite: kept, truncated, empty, refused, echo).

Generative mutations are resumable: each finished batch of rewrites is appended to
``<derived>/.cache/<id>-<signature>.jsonl`` (the signature covers the generator, instruction,
decoding settings and seed), so a killed run asks the generator only for what is missing
(:mod:`guarddiag.sorry.rewrite`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Sequence
from copy import copy
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import polars as pl

from guarddiag.data import SUBSET_SEPARATOR, load_benchmark, load_manifests, write_derived_subset
from guarddiag.errors import GuarddiagError, unknown_name
from guarddiag.files import write_json
from guarddiag.guards.backends import GenerationTiming, TextGenerator
from guarddiag.paths import manifests_dir, work_paths
from guarddiag.sorry.ciphers import (
    decode_ascii,
    decode_atbash,
    decode_caesar,
    decode_morse,
    encode_ascii,
    encode_atbash,
    encode_caesar,
    encode_morse,
    misspell,
    morse_unencodable,
)
from guarddiag.sorry.options import MutateOptions
from guarddiag.sorry.rewrite import (
    KEPT,
    PROMPT,
    REWRITE_OUTCOMES,
    SKIP_REASONS,
    generate_rewrites,
    rewrite_outcome,
)
from guarddiag.sorry.rewrite import clean_generation as clean_generation  # re-exported
from guarddiag.spec import Problems, load_yaml_mapping
from guarddiag.typed import Check, SpecModel, check_keys, name_list, read_values

KINDS = ("encoding", "misspell", "generative")
GROUPS = ("writing_style", "persuasion", "encoding", "translation")
PAYLOAD = "{payload}"

ENCODINGS: dict[str, tuple[Callable[[str], str], Callable[[str], str]]] = {
    "ascii": (encode_ascii, decode_ascii),
    "caesar": (encode_caesar, decode_caesar),
    "morse": (encode_morse, decode_morse),
    "atbash": (encode_atbash, decode_atbash),
}


@dataclass(frozen=True)
class Mutation:
    """One mutation, as the manifest describes it."""

    id: str
    kind: str
    """``encoding`` | ``misspell`` | ``generative``."""
    group: str
    """SORRY-Bench's family: writing_style, persuasion, encoding or translation."""
    instruction: str | None = None
    """Generative: the user message, with ``{prompt}`` standing for the base prompt."""
    presentation: str | None = None
    """Encoding: the mutated prompt, with ``{payload}`` standing for the encoded base prompt."""
    description: str | None = None

    @property
    def deterministic(self) -> bool:
        return self.kind != "generative"


def mutations_manifest_path() -> Path:
    return manifests_dir() / "mutations" / "sorrybench_mutations.yaml"


class MutationFields(SpecModel):
    """One entry under ``mutations:`` in the mutations manifest."""

    kind: Annotated[str, Check(allowed=KINDS)]
    group: Annotated[str, Check(allowed=GROUPS)]
    instruction: Any = None
    presentation: Any = None
    description: Any = None


@cache
def mutation_specs() -> dict[str, Mutation]:
    """Every mutation of the manifest, validated as a whole (all problems at once)."""
    path = mutations_manifest_path()
    doc = load_yaml_mapping(path)
    problems = Problems()
    check_keys(doc, required={"mutations"}, where=str(path), problems=problems)
    out: dict[str, Mutation] = {}
    for name, spec in (doc.get("mutations") or {}).items():
        mutation = _parse_mutation(str(name), spec, f"{path} mutations.{name}", problems)
        if mutation is not None:
            out[str(name)] = mutation
    problems.raise_if_any(str(path))
    return out


def _parse_mutation(name: str, spec: Any, where: str, problems: Problems) -> Mutation | None:
    values = read_values(MutationFields, spec, where=where, problems=problems)
    kind, group = values.get("kind"), values.get("group")
    if kind is None or not isinstance(spec, dict):
        return None
    instruction, presentation = values.get("instruction"), values.get("presentation")
    if kind == "generative" and (not isinstance(instruction, str)
                                 or instruction.count(PROMPT) != 1):
        problems.add(where, f"a generative mutation needs an instruction containing "
                            f"{PROMPT} exactly once")
    if kind == "encoding":
        if name not in ENCODINGS:
            problems.add(where, f"no encoder implements {name!r} (implemented: "
                                f"{', '.join(ENCODINGS)})")
        # The payload must close the prompt so the decoder can cut it off unambiguously.
        if not isinstance(presentation, str) or presentation.count(PAYLOAD) != 1 \
                or not presentation.endswith(PAYLOAD):
            problems.add(where, f"an encoding needs a presentation ending in {PAYLOAD} "
                                f"(and containing it once)")
    if kind != "generative" and instruction is not None:
        problems.add(where, "only generative mutations take an instruction")
    if kind != "encoding" and presentation is not None:
        problems.add(where, "only encodings take a presentation")
    return Mutation(id=name, kind=kind, group=str(group), instruction=instruction,
                    presentation=presentation, description=values.get("description"))


def resolve_mutations(names: str | Sequence[str]) -> list[Mutation]:
    """Mutations from ``"a,b"`` or a list; also ``all``, ``deterministic``, ``generative`` and
    the group names (``encoding``, ``persuasion``, ``translation``, ``writing_style``)."""
    tokens = name_list(names)
    if not tokens:
        raise GuarddiagError("--mutations: expected at least one mutation name")
    known = mutation_specs()
    chosen: dict[str, Mutation] = {}
    for token in tokens:
        if token == "all":
            chosen.update(known)
        elif token == "deterministic":
            chosen.update({k: m for k, m in known.items() if m.deterministic})
        elif token == "generative":
            chosen.update({k: m for k, m in known.items() if not m.deterministic})
        elif token in GROUPS:
            chosen.update({k: m for k, m in known.items() if m.group == token})
        elif token in known:
            chosen[token] = known[token]
        else:
            raise unknown_name("mutation", token,
                               ("all", "deterministic", "generative", *GROUPS, *known))
    return [known[k] for k in known if k in chosen]


# ── deterministic mutations ───────────────────────────────────────────────────────────────────


def encode_prompt(mutation: Mutation | str, text: str, *, bare: bool = False) -> str:
    """The encoded prompt: the presentation around the encoded text (``bare``: payload only)."""
    mutation = _get(mutation)
    if mutation.kind != "encoding":
        raise GuarddiagError(f"mutation {mutation.id!r} is not an encoding")
    payload = ENCODINGS[mutation.id][0](text)
    if bare:
        return payload
    return mutation.presentation.replace(PAYLOAD, payload)  # type: ignore[union-attr]


def decode_prompt(mutation: Mutation | str, text: str, *, bare: bool = False) -> str:
    """Invert :func:`encode_prompt`: cut the presentation off and decode the payload."""
    mutation = _get(mutation)
    if mutation.kind != "encoding":
        raise GuarddiagError(f"mutation {mutation.id!r} is not an encoding")
    payload = text
    if not bare:
        prefix = mutation.presentation.removesuffix(PAYLOAD)  # type: ignore[union-attr]
        if not text.startswith(prefix):
            raise GuarddiagError(f"{mutation.id}: the text does not start with the "
                                 f"mutation's presentation")
        payload = text[len(prefix):]
    return ENCODINGS[mutation.id][1](payload)


def _get(mutation: Mutation | str) -> Mutation:
    if isinstance(mutation, Mutation):
        return mutation
    known = mutation_specs()
    if mutation not in known:
        raise unknown_name("mutation", mutation, tuple(known))
    return known[mutation]


# ── one frame, one mutation ───────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class MutatedFrame:
    """The rows of one mutated subset, plus what could not be mutated."""

    frame: pl.DataFrame
    """Columns ``prompt_id``, ``text``, ``base_prompt_id``, ``mutation``, ``category``."""
    skipped: dict[str, str]
    """Base prompt id → why it has no mutated row (an empty, refused or echoed rewrite)."""
    passthrough: dict[str, int]
    """Morse only: character → number of prompts in which it was passed through unencoded."""
    outcomes: dict[str, str] = field(default_factory=dict)
    """Generative only: base prompt id → what became of its rewrite (:data:`REWRITE_OUTCOMES`)."""
    n_cached: int = 0
    """Generative only: rewrites read from the resume cache instead of generated."""


def _check_frame(frame: pl.DataFrame, where: str) -> None:
    missing = [c for c in ("prompt_id", "text") if c not in frame.columns]
    if missing:
        raise GuarddiagError(f"{where}: missing column(s) {', '.join(missing)}")
    if frame.height == 0:
        raise GuarddiagError(f"{where}: no prompts to mutate")
    for i, (pid, text) in enumerate(zip(frame["prompt_id"], frame["text"], strict=True)):
        if text is None or not str(text).strip():
            raise GuarddiagError(f"{where} row {i + 1} (prompt_id {pid!r}): empty prompt, "
                                 f"expected non-empty text")


def _rows(frame: pl.DataFrame, texts: dict[str, str], mutation: str) -> pl.DataFrame:
    keep = frame.filter(pl.col("prompt_id").is_in(list(texts)))
    category = keep["category"] if "category" in keep.columns else \
        pl.Series([None] * keep.height, dtype=pl.String)
    return pl.DataFrame({
        "prompt_id": keep["prompt_id"],
        "text": [texts[p] for p in keep["prompt_id"]],
        "base_prompt_id": keep["prompt_id"],
        "mutation": [mutation] * keep.height,
        "category": category.cast(pl.String),
    }, schema={"prompt_id": pl.String, "text": pl.String, "base_prompt_id": pl.String,
               "mutation": pl.String, "category": pl.String})


def mutate_frame(frame: pl.DataFrame, mutation: Mutation | str, *, seed: int = 0,
                 bare: bool = False, misspell_rate: float = 0.3,
                 generator: TextGenerator | None = None, max_new_tokens: int = 1024,
                 temperature: float = 0.0, batch_size: int = 16,
                 cache_path: str | os.PathLike[str] | None = None,
                 where: str = "benchmark", stop: Sequence[str] = ()) -> MutatedFrame:
    """Mutate every prompt of ``frame`` (columns ``prompt_id``, ``text``, optional ``category``).

    Deterministic mutations need nothing else; generative ones need ``generator``. Empty
    prompts raise a one-line error naming the row.
    """
    mutation = _get(mutation)
    _check_frame(frame, where)
    ids = [str(p) for p in frame["prompt_id"]]
    texts = [str(t) for t in frame["text"]]
    out: dict[str, str] = {}
    skipped: dict[str, str] = {}
    passthrough: dict[str, int] = {}
    if mutation.kind == "encoding":
        for pid, text in zip(ids, texts, strict=True):
            out[pid] = encode_prompt(mutation, text, bare=bare)
            if mutation.id == "morse":
                for char in morse_unencodable(text):
                    passthrough[char] = passthrough.get(char, 0) + 1
    elif mutation.kind == "misspell":
        for pid, text in zip(ids, texts, strict=True):
            out[pid] = misspell(text, seed=seed, key=pid, rate=misspell_rate)
    else:
        if generator is None:
            raise GuarddiagError(f"mutation {mutation.id!r} rewrites prompts with a chat model: "
                                 f"pass --generator hf:<model> or endpoint:<url>#<model>")
        done, n_cached = generate_rewrites(
            ids, texts, mutation.instruction or "", desc=mutation.id, generator=generator,
            seed=seed, max_new_tokens=max_new_tokens, temperature=temperature,
            batch_size=batch_size, cache_path=cache_path, stop=stop)
        outcomes = {pid: rewrite_outcome(done[pid], mutation.instruction or "", text)
                    for pid, text in zip(ids, texts, strict=True)}
        out = {pid: done[pid]["text"] for pid in ids if outcomes[pid] in KEPT}
        skipped = {pid: SKIP_REASONS[o] for pid, o in outcomes.items() if o not in KEPT}
        return MutatedFrame(_rows(frame, out, mutation.id), skipped, passthrough, outcomes,
                            n_cached)
    return MutatedFrame(_rows(frame, out, mutation.id), skipped, passthrough)


# ── the verb ──────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class MutatedSubset:
    subset_id: str
    mutation: str
    kind: str
    n_rows: int
    n_skipped: int
    manifest_path: Path
    passthrough_prompts: int
    """Morse: prompts with at least one character passed through unencoded."""
    outcomes: dict[str, int] = field(default_factory=dict)
    """Generative: how many rewrites came out each way (:data:`REWRITE_OUTCOMES`)."""
    n_cached: int = 0
    """Generative: rewrites read from the resume cache rather than generated in this run."""


@dataclass(frozen=True)
class MutateResult:
    benchmark: str
    seed: int
    subsets: tuple[MutatedSubset, ...]
    timing: GenerationTiming | None = None
    """What the generator produced in this run and how fast (None: nothing generative)."""

    def to_frame(self) -> pl.DataFrame:
        return pl.DataFrame({
            "subset": [s.subset_id for s in self.subsets],
            "mutation": [s.mutation for s in self.subsets],
            "kind": [s.kind for s in self.subsets],
            "rows": [s.n_rows for s in self.subsets],
            "skipped": [s.n_skipped for s in self.subsets],
            "cached": [s.n_cached for s in self.subsets],
            **{o: [s.outcomes.get(o, 0) for s in self.subsets] for o in REWRITE_OUTCOMES},
            "morse_passthrough_prompts": [s.passthrough_prompts for s in self.subsets],
            "manifest": [str(s.manifest_path) for s in self.subsets],
        }, schema={"subset": pl.String, "mutation": pl.String, "kind": pl.String,
                   "rows": pl.Int64, "skipped": pl.Int64, "cached": pl.Int64,
                   **dict.fromkeys(REWRITE_OUTCOMES, pl.Int64),
                   "morse_passthrough_prompts": pl.Int64, "manifest": pl.String})


def subset_id_for(benchmark: str, mutation: str, *, suffix: str | None = None) -> str:
    sid = f"{benchmark}{SUBSET_SEPARATOR}{mutation}"
    return f"{sid}_{suffix}" if suffix else sid


def _signature(**parts: Any) -> str:
    raw = json.dumps(parts, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class _Settings:
    """How every mutation of one ``mutate_benchmark`` call is made."""

    benchmark: str
    seed: int
    generator: TextGenerator | None
    bare: bool
    misspell_rate: float
    max_new_tokens: int
    temperature: float
    batch_size: int
    stop: tuple[str, ...]
    suffix: str | None
    sample: int | None
    root: Path


def mutate_benchmark(benchmark: str, options: MutateOptions | None = None, *,
                     generator: TextGenerator | None = None,
                     data_dir: str | os.PathLike[str] | None = None,
                     derived_dir: str | os.PathLike[str] | None = None,
                     **fields: Any) -> MutateResult:
    """Write one derived subset per mutation of base subset ``benchmark``, as ``options``
    (:class:`~guarddiag.sorry.options.MutateOptions`, any field replaced by ``fields``:
    ``mutations=["caesar"]``) say.

    Unknown mutations and a generative mutation without ``generator`` are reported before any
    work starts. Rewrites that come back empty, refused or echoed are left out (listed in
    ``<id>.mutation.json``), never written as prompts. ``sample``: mutate a seeded sample of
    that many base prompts only (a trial run; the notes say so). ``stop``: strings that end a
    rewrite.
    """
    o = MutateOptions.of(options, **fields)
    seed, suffix, sample = o.seed, o.suffix, o.sample
    chosen = resolve_mutations(o.mutations)
    if generator is None:
        needing = [m.id for m in chosen if not m.deterministic]
        if needing:
            raise GuarddiagError(f"mutation(s) {', '.join(needing)} rewrite prompts with a "
                                 f"chat model: pass --generator hf:<model> or "
                                 f"endpoint:<url>#<model>")
    if suffix is not None and not suffix.replace("_", "").replace("-", "").isalnum():
        raise GuarddiagError(f"--suffix {suffix!r}: expected letters, digits, _ or -")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise GuarddiagError(f"--seed: expected a non-negative integer, got {seed!r}")
    if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int)
                               or sample < 1):
        raise GuarddiagError(f"--sample: expected a positive integer, got {sample!r}")
    manifests = load_manifests(derived_dir=derived_dir, data_dir=data_dir)
    if benchmark not in manifests:
        raise unknown_name("benchmark", benchmark, [k for k, m in manifests.items()
                                                   if not m.derived])
    base = manifests[benchmark]
    if base.derived:
        raise GuarddiagError(f"benchmark {benchmark!r} is itself a mutation of "
                             f"{base.derived_from!r}; mutate the base subset instead")
    frame = load_benchmark(benchmark, data_dir=data_dir, derived_dir=derived_dir)
    if sample is not None and sample < frame.height:
        picked = np.sort(np.random.default_rng(seed).choice(frame.height, sample, replace=False))
        frame = frame[picked.tolist()]
    how = _Settings(benchmark, seed, generator, o.bare, o.misspell_rate, o.max_new_tokens,
                    o.temperature, o.batch_size, o.stop, suffix, sample,
                    Path(derived_dir) if derived_dir is not None else work_paths().derived)
    timing = getattr(generator, "timing", None)
    before = copy(timing) if isinstance(timing, GenerationTiming) else None
    written = tuple(_mutate_one(frame, mutation, base, how) for mutation in chosen)
    ran = timing.since(before) if isinstance(timing, GenerationTiming) and before else None
    return MutateResult(benchmark=benchmark, seed=seed, subsets=written,
                        timing=ran if any(not m.deterministic for m in chosen) else None)


def _mutate_one(frame: pl.DataFrame, mutation: Mutation, base: Any,
                how: _Settings) -> MutatedSubset:
    sid = subset_id_for(how.benchmark, mutation.id, suffix=how.suffix)
    settings: dict[str, Any] = {"mutation": mutation.id, "kind": mutation.kind,
                                "seed": how.seed, "base": how.benchmark}
    if mutation.kind == "encoding":
        settings["presentation"] = "bare" if how.bare else mutation.presentation
    elif mutation.kind == "misspell":
        settings["misspell_rate"] = how.misspell_rate
    else:
        settings.update(generator=getattr(how.generator, "spec",
                                          type(how.generator).__name__),
                        instruction=mutation.instruction, max_new_tokens=how.max_new_tokens,
                        temperature=how.temperature)
        if how.stop:  # only when given, so earlier caches keep their names
            settings["stop"] = list(how.stop)
    cache_path = how.root / ".cache" / f"{sid}-{_signature(**settings)}.jsonl" \
        if mutation.kind == "generative" else None
    result = mutate_frame(frame, mutation, seed=how.seed, bare=how.bare,
                          misspell_rate=how.misspell_rate, generator=how.generator,
                          max_new_tokens=how.max_new_tokens, temperature=how.temperature,
                          batch_size=how.batch_size, cache_path=cache_path,
                          where=f"benchmark {how.benchmark}", stop=how.stop)
    outcomes = dict(Counter(result.outcomes.values()))
    if result.frame.height == 0:
        raise GuarddiagError(f"mutation {mutation.id} of {how.benchmark}: no rewrite was kept "
                             f"({_counts(outcomes)}); nothing written")
    if how.sample is not None:
        settings["sample"] = {"n": frame.height, "seed": how.seed}
    path = _write_subset(result.frame, subset_id=sid, base=how.benchmark, mutation=mutation.id,
                         kind=base.kind, title=f"{base.title} × {mutation.id}",
                         derived_dir=how.root, notes=_notes(mutation, settings, result))
    write_json({**settings, "subset": sid, "rows": result.frame.height,
                "skipped": result.skipped, "morse_passthrough": result.passthrough,
                **({"outcomes": outcomes, "cached": result.n_cached,
                    "truncated": sorted(p for p, o in result.outcomes.items()
                                        if o == "truncated")}
                   if mutation.kind == "generative" else {})},
               how.root / f"{sid}.mutation.json")
    return MutatedSubset(
        subset_id=sid, mutation=mutation.id, kind=mutation.kind,
        n_rows=result.frame.height, n_skipped=len(result.skipped), manifest_path=path,
        passthrough_prompts=_passthrough_prompts(frame, mutation), outcomes=outcomes,
        n_cached=result.n_cached)


def _counts(outcomes: dict[str, int]) -> str:
    return ", ".join(f"{o} {outcomes[o]}" for o in REWRITE_OUTCOMES if outcomes.get(o))


def _passthrough_prompts(frame: pl.DataFrame, mutation: Mutation) -> int:
    if mutation.id != "morse":
        return 0
    return sum(bool(morse_unencodable(str(t))) for t in frame["text"])


def _notes(mutation: Mutation, settings: dict[str, Any], result: MutatedFrame) -> str:
    family = mutation.group if mutation.group == mutation.kind else \
        f"{mutation.group}, {mutation.kind}"
    parts = [f"SORRY-Bench mutation {mutation.id} ({family})"]
    if mutation.kind == "encoding":
        parts.append("bare payload" if settings["presentation"] == "bare"
                     else "payload presented with a decoding instruction")
    if mutation.kind == "misspell":
        parts.append(f"seed {settings['seed']}, rate {settings['misspell_rate']}")
    if mutation.kind == "generative":
        parts.append(f"generator {settings['generator']}, temperature "
                     f"{settings['temperature']}, seed {settings['seed']}")
    if "sample" in settings:
        parts.append(f"a seeded sample of {settings['sample']['n']} base prompts "
                     f"(seed {settings['sample']['seed']})")
    if result.outcomes:
        parts.append(_counts(dict(Counter(result.outcomes.values()))))
    if result.skipped:
        parts.append(f"{len(result.skipped)} base prompt(s) skipped (empty, refused or "
                     f"echoed rewrite)")
    return "; ".join(parts) + "; details in the .mutation.json beside this file"


def _write_subset(frame: pl.DataFrame, *, subset_id: str, base: str, mutation: str, kind: str,
                  title: str, derived_dir: Path, notes: str) -> Path:
    """The one place that writes a derived subset (the format belongs to guarddiag.data)."""
    return write_derived_subset(frame, subset_id=subset_id, derived_from=base,
                                mutation=mutation, kind=kind, title=title,
                                derived_dir=derived_dir, notes=notes)
