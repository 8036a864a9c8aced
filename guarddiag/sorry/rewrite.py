"""Generative rewrites of prompts (the generative SORRY-Bench mutations): asking the chat model,
the resume cache, and what became of each rewrite.

Each finished batch of rewrites is appended to a JSON-lines cache (``prompt_id``, the cleaned
``text``, the ``raw`` reply and whether it was ``truncated``), so a killed run asks only for
what is missing, and a rerun accounts for cached rewrites exactly as for fresh ones.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from guarddiag.errors import GuarddiagError
from guarddiag.guards.backends import TextGenerator
from guarddiag.guards.parsing import answer_outcome
from guarddiag.progress import progress

PROMPT = "{prompt}"
"""Where the base prompt goes in a generative mutation's instruction."""


def clean_generation(text: str) -> str:
    """The reply used as the mutated prompt: stripped, one pair of enclosing quotes removed."""
    text = text.strip()
    for left, right in (('"', '"'), ("“", "”"), ("'", "'"), ("「", "」")):
        if len(text) >= 2 and text.startswith(left) and text.endswith(right) \
                and left not in text[1:-1] and right not in text[1:-1]:
            text = text[1:-1].strip()
            break
    return text


REWRITE_OUTCOMES: tuple[str, ...] = ("kept", "truncated", "empty", "refused", "echo")
"""What became of one generated rewrite: ``kept`` (the mutated prompt), ``truncated`` (kept,
but it ran into --max-new-tokens), or left out: ``empty``, ``refused`` (a refusal phrase the
base prompt did not hold), ``echo`` (its first line repeats the instruction or the prompt)."""
KEPT = ("kept", "truncated")
SKIP_REASONS = {"empty": "the generator returned an empty rewrite",
                "refused": "the generator refused to rewrite it",
                "echo": "the rewrite repeats the instruction or the prompt unchanged"}


def rewrite_outcome(record: dict[str, Any], instruction: str, prompt: str) -> str:
    """One of :data:`REWRITE_OUTCOMES` for a stored rewrite (see :func:`answer_outcome`)."""
    shown = instruction.replace(PROMPT, prompt)
    outcome = answer_outcome(record["text"], parsed=False, truncated=record["truncated"],
                             shown=shown)
    return "kept" if outcome == "off_format" else outcome


def generate_rewrites(ids: list[str], texts: list[str], instruction: str, *, desc: str,
                      generator: TextGenerator, seed: int, max_new_tokens: int,
                      temperature: float, batch_size: int,
                      cache_path: str | os.PathLike[str] | None,
                      stop: Sequence[str] = ()) -> tuple[dict[str, dict[str, Any]], int]:
    """Every prompt's rewrite record (``text``, ``raw``, ``truncated``) of ``instruction`` with
    the prompt in place of ``{prompt}``, from the cache or the generator, and how many came
    from the cache."""
    if batch_size < 1:
        raise GuarddiagError(f"--batch-size: expected a positive integer, got {batch_size}")
    done = _read_cache(cache_path) if cache_path else {}
    todo = [(pid, text) for pid, text in zip(ids, texts, strict=True) if pid not in done]
    n_cached = len(ids) - len(todo)
    bar = progress(total=len(ids), initial=n_cached, desc=desc, unit="prompt")
    try:
        for start in range(0, len(todo), batch_size):
            batch = todo[start:start + batch_size]
            conversations = [[{"role": "user", "content": instruction.replace(PROMPT, text)}]
                             for _, text in batch]
            replies = generator.answers(conversations, max_new_tokens=max_new_tokens,
                                        temperature=temperature, seed=seed, stop=stop)
            if len(replies) != len(batch):
                raise GuarddiagError(f"{getattr(generator, 'spec', 'generator')}: returned "
                                     f"{len(replies)} replies for {len(batch)} prompts")
            fresh = {pid: {"text": clean_generation(g.text or ""), "raw": g.text,
                           "truncated": g.truncated}
                     for (pid, _), g in zip(batch, replies, strict=True)}
            if cache_path:
                _append_cache(cache_path, fresh)
            done.update(fresh)
            bar.update(len(batch))
    finally:
        bar.close()
    return {pid: done[pid] for pid in ids}, n_cached


def _read_cache(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    path = Path(path)
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
            # Records written before raw text and truncation were kept read as whole answers.
            out[str(rec["prompt_id"])] = {"text": str(rec["text"]),
                                          "raw": rec.get("raw", rec["text"]),
                                          "truncated": bool(rec.get("truncated", False))}
        except (json.JSONDecodeError, KeyError, TypeError):
            continue  # a line cut short by a kill: that prompt is simply asked again
    return out


def _append_cache(path: str | os.PathLike[str], rows: dict[str, dict[str, Any]]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        # A kill can cut the last line; start on a fresh line so the next record stays whole.
        if fh.tell() > 0:
            with open(path, "rb") as check:
                check.seek(-1, os.SEEK_END)
                if check.read(1) != b"\n":
                    fh.write("\n")
        for pid, rec in rows.items():
            fh.write(json.dumps({"prompt_id": pid, **rec}, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
