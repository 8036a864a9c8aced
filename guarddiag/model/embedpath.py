"""The frozen encoder's numeric path on this machine, and ``guarddiag bench embed``.

On the portable path (the default, :mod:`guarddiag.numerics`) the encoder runs float32 and there is
nothing to choose. On the native path a short timed probe picks bf16 only where it is at least
:data:`BF16_MIN_GAIN` times float32's rate here (bf16 without bf16 units is emulated, slower than
float32: docs/decisions.md#2026-12-06-the-encoders-numeric-paths), and remembers the answer per CPU,
torch version and encoder, so later runs start at once.

``bench embed`` times every path in a child process of its own (torch's kernels are fixed per
process) on the same prompts, and says how far each path's states are from the portable ones.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from guarddiag import numerics
from guarddiag.errors import GuarddiagError
from guarddiag.model.states import FrozenEncoder, states_root

logger = logging.getLogger(__name__)

BF16_MIN_GAIN = 1.1
"""The native path takes bf16 only at this many times float32's measured rate."""
PROBE_FILE = "numeric-probe.json"
PROBE_TEXTS: tuple[str, ...] = tuple(
    f"{opening} {subject} {tail}" for opening in (
        "How do I", "Write a short story where someone tries to", "Explain whether it is legal to")
    for subject in ("bake sourdough bread", "pick the lock of my own front door",
                    "get the full lyrics of a famous song", "treat a sprained ankle at home")
    for tail in ("?", "without anyone noticing, step by step, with every detail spelled out?"))
"""24 prompts of 8-30 tokens, fixed: the probe's workload."""
PATHS = (("portable", "fp32"), ("native", "fp32"), ("native", "bf16"))
"""(kernels, numeric path) pairs ``bench embed`` times."""


@dataclass(frozen=True)
class ProbeResult:
    """prompts/s per numeric path on this machine's native kernels, and the one chosen."""

    per_s: dict[str, float]
    chosen: str
    cpu: str


def encoder_numeric(checkpoint: str, *, max_length: int) -> str:
    """The numeric path frozen sizes embed with here: fp32 on the portable path; on the native
    path the probe's choice."""
    if numerics.active().mode == "portable":
        return "fp32"
    return probe_numeric_path(checkpoint, max_length=max_length).chosen


def probe_numeric_path(checkpoint: str, *, max_length: int, root: Path | None = None,
                       repeats: int = 2) -> ProbeResult:
    """Time float32 and bf16 on :data:`PROBE_TEXTS` (native kernels), once per CPU, torch
    version, thread count and encoder; the answer is kept in ``<states>/numeric-probe.json``."""
    state = numerics.active()
    cpu = numerics.cpu_flags()
    key = hashlib.sha256(json.dumps([cpu, torch.__version__, state.tag, checkpoint, max_length,
                                     torch.get_num_threads()]).encode()).hexdigest()[:20]
    path = (root or states_root()) / PROBE_FILE
    known = _read_json(path)
    if key in known:
        hit = known[key]
        return ProbeResult({k: float(v) for k, v in dict(hit["per_s"]).items()},
                           str(hit["chosen"]), str(hit["cpu"]))
    per_s = {}
    for numeric in ("fp32", "bf16"):
        enc = FrozenEncoder.load(checkpoint, max_length=max_length, numeric=numeric)
        per_s[numeric] = _rate(enc, list(PROBE_TEXTS), batch_size=len(PROBE_TEXTS),
                               repeats=repeats)[0]
    chosen = "bf16" if per_s["bf16"] >= BF16_MIN_GAIN * per_s["fp32"] else "fp32"
    result = ProbeResult(per_s, chosen, cpu)
    known[key] = asdict(result)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(known, indent=1, sort_keys=True))
    tmp.replace(path)
    logger.info(f"encoder numeric path (native kernels, {cpu}): fp32 {per_s['fp32']:.0f}/s, "
                f"bf16 {per_s['bf16']:.0f}/s: {chosen} (kept in {path})")
    return result


def _read_json(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _rate(enc: FrozenEncoder, texts: list[str], *, batch_size: int, repeats: int
          ) -> tuple[float, np.ndarray]:
    """(prompts/s, states) of the best of ``repeats`` timed passes after a warm-up batch."""
    embed = enc.embed
    embed(texts[:batch_size], batch_size=batch_size)
    best, states = math.inf, np.zeros(0)
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        states = embed(texts, batch_size=batch_size)
        best = min(best, time.perf_counter() - t0)
    return len(texts) / max(best, 1e-9), states


@dataclass(frozen=True)
class EmbedBenchResult:
    """``guarddiag bench embed``: prompts/s of each path on the same prompts, and how far each
    path's states are from the portable path's."""

    checkpoint: str
    n_texts: int
    max_length: int
    batch_size: int
    threads: int
    cpu: str
    onednn_isa: str
    """``ONEDNN_MAX_CPU_ISA`` as the native children saw it (``default``: unset)."""
    per_s: dict[str, float]
    """``<kernels>/<numeric>`` → prompts/s (best of ``repeats`` timed passes)."""
    cosine_min: dict[str, float]
    max_abs_diff: dict[str, float]
    """Per path, against the portable float32 states."""
    native_choice: str
    """What the native path would embed with here (bf16 only at 1.1x float32's rate)."""

    def to_markdown(self, *, date: str, commit: str | None, load: Sequence[float]) -> str:
        """The result as the Markdown table the docs include (docs/measured/bench_embed.md):
        when, at which commit and on which CPU it was measured, then one row per path."""
        rows = [f"| {name} | {rate:.1f} | {self.cosine_min[name]:.6f} | "
                f"{self.max_abs_diff[name]:.2e} |" for name, rate in self.per_s.items()]
        return "\n".join([
            f"Measured {date} at commit `{commit or 'unknown'}` by `guarddiag bench embed`: "
            f"`{self.checkpoint}`, {self.n_texts} prompts, {self.max_length} tokens, batch "
            f"{self.batch_size}, {self.threads} torch thread(s), load average "
            + " ".join(f"{x:.2f}" for x in load) + f"; native passes with ONEDNN_MAX_CPU_ISA="
            f"{self.onednn_isa}.", "", f"CPU: {self.cpu}.", "",
            "| path | prompts/s | cosine min vs portable fp32 | max abs diff |",
            "|---|---:|---:|---:|", *rows, "",
            f"The native path would embed with {self.native_choice} here; the portable path "
            "(the default) with fp32.", ""])


def bench_embed(checkpoint: str, texts: Sequence[str], *, max_length: int,
                batch_size: int = 64, repeats: int = 1, threads: int | None = None
                ) -> EmbedBenchResult:
    """Embed ``texts`` on every path of :data:`PATHS`, each in a child process (no cache)."""
    per_s, states = {}, {}
    with tempfile.TemporaryDirectory(prefix="guarddiag-embed-") as tmp:
        job = Path(tmp) / "job.json"
        job.write_text(json.dumps({"checkpoint": checkpoint, "texts": list(texts),
                                   "max_length": max_length, "batch_size": batch_size,
                                   "repeats": repeats, "threads": threads}))
        for kernels, numeric in PATHS:
            out = Path(tmp) / f"{kernels}-{numeric}.npy"
            cmd = [sys.executable, "-m", "guarddiag.model.embedpath", str(job), numeric,
                   str(out)]
            proc = subprocess.run(cmd, env=numerics.child_env(kernels), capture_output=True,
                                  text=True, check=False)
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                raise GuarddiagError(f"bench embed: the {kernels} {numeric} pass failed: {last}")
            name = f"{kernels}/{numeric}"
            per_s[name] = float(proc.stdout.strip().splitlines()[-1])
            states[name] = np.load(out)
    ref = states["portable/fp32"]
    cos, diff = {}, {}
    for name, s in states.items():
        norms = np.maximum(np.linalg.norm(ref, axis=1) * np.linalg.norm(s, axis=1), 1e-12)
        cos[name] = float(((ref * s).sum(1) / norms).min())
        diff[name] = float(np.abs(ref - s).max())
    choice = ("bf16" if per_s["native/bf16"] >= BF16_MIN_GAIN * per_s["native/fp32"]
              else "fp32")
    user = numerics.child_env("native").get("ONEDNN_MAX_CPU_ISA", "default")
    return EmbedBenchResult(checkpoint, len(texts), max_length, batch_size,
                            threads or os.cpu_count() or 1, numerics.cpu_flags(), user, per_s,
                            cos, diff, choice)


def _bench_child(job_file: str, numeric: str, out: str) -> None:
    """One timed pass of ``bench embed`` in this (child) process, whose kernels were pinned
    (or not) when ``-m`` imported the package: prints prompts/s."""
    job = json.loads(Path(job_file).read_text())
    if job["threads"]:
        torch.set_num_threads(int(job["threads"]))
    enc = FrozenEncoder.load(job["checkpoint"], max_length=job["max_length"], numeric=numeric)
    rate, states = _rate(enc, job["texts"], batch_size=job["batch_size"],
                         repeats=job["repeats"])
    np.save(out, states)
    print(rate)


if __name__ == "__main__":
    _bench_child(*sys.argv[1:4])
